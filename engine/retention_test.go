package engine

import (
	"errors"
	"testing"
	"time"
)

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{
		"keep_all": KeepAll(), "keep-all": KeepAll(),
		"keep_last_n(10)": KeepLastN(10), "keep-last-n:10": KeepLastN(10),
		"keep_age(72h)": KeepAge(72 * time.Hour), "keep-age:90m": KeepAge(90 * time.Minute),
		"keep_milestones(0)": KeepMilestones(0), "keep-milestones:5": KeepMilestones(5),
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
		"keep_age(1)", "keep_age(-1h)", "keep_milestones(-1)", "keep_all(3)", "drop_everything"} {
		if p, err := ParsePolicy(in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ParsePolicy(%q) = %v, %v; want ErrInvalidInput", in, p, err)
		}
	}
}
