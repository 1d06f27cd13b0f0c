package engine

import (
	"errors"
	"testing"
	"time"
)

// String writes the one spelling: the SQL name, a colon and the argument.
func TestPolicyString(t *testing.T) {
	for p, want := range map[Policy]string{
		KeepAll(): "keep_all", {}: "keep_all", KeepLatest(): "keep_latest", KeepNone(): "keep_none",
		KeepLastN(10): "keep_last_n:10", KeepAge(72 * time.Hour): "keep_age:72h0m0s", KeepMilestones(5): "keep_milestones:5",
	} {
		if got := p.String(); got != want {
			t.Errorf("%#v.String() = %q; want %q", p, got, want)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{
		"keep_all": KeepAll(), "keep_latest": KeepLatest(), "keep_none": KeepNone(),
		"keep_last_n(10)": KeepLastN(10), "keep_last_n:10": KeepLastN(10),
		"keep_age(72h)": KeepAge(72 * time.Hour), "keep_age:90m": KeepAge(90 * time.Minute),
		"keep_milestones(0)": KeepMilestones(0), "keep_milestones:5": KeepMilestones(5),
	} {
		got, err := ParsePolicy(in)
		if err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := ParsePolicy(got.String()); err != nil || back != got {
			t.Errorf("ParsePolicy(%q) = %v, %v; String does not round-trip", got.String(), back, err)
		}
	}
	for _, in := range []string{"", "keep", "keep_last_n", "keep_last_n(0)", "keep_last_n(x)", "keep_last_n(3", "keep_last_n:3)",
		"keep_age(1)", "keep_age(-1h)", "keep_milestones(-1)", "keep_all(3)", "drop_everything",
		// One spelling: the SQL functions' names, with underscores.
		"keep-all", "keep-last-n:10", "keep-age:90m", "keep_last-n:3", "KEEP_ALL"} {
		if p, err := ParsePolicy(in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ParsePolicy(%q) = %v, %v; want ErrInvalidInput", in, p, err)
		}
	}
}
