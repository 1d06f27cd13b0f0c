package cliflags

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args []string
		db   string
		all  bool
		pos  []string
	}{
		{[]string{"up"}, "", false, []string{"up"}},
		{[]string{"-database", "u", "up"}, "u", false, []string{"up"}},
		{[]string{"up", "--database", "u"}, "u", false, []string{"up"}},
		{[]string{"down", "-all", "--database=u"}, "u", true, []string{"down"}},
		{[]string{"sql", "1", "down", "-database", "u"}, "u", false, []string{"sql", "1", "down"}},
		{[]string{"log", "--", "-database"}, "", false, []string{"log", "-database"}},
		// A negative number is positional, not a flag; as a flag's value it
		// stays the value.
		{[]string{"force", "-1"}, "", false, []string{"force", "-1"}},
		{[]string{"force", "-1", "-database", "u"}, "u", false, []string{"force", "-1"}},
		{[]string{"-all", "force", "-database", "u", "-2.5", "x"}, "u", true, []string{"force", "-2.5", "x"}},
		{[]string{"force", "-database", "-1", "-3"}, "-1", false, []string{"force", "-3"}},
		{[]string{"force", "--database=-1", "-3"}, "-1", false, []string{"force", "-3"}},
		{[]string{"force", "--", "-1"}, "", false, []string{"force", "-1"}},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		db := fs.String("database", "", "")
		all := fs.Bool("all", false, "")
		pos, err := Parse(fs, c.args)
		if err != nil || *db != c.db || *all != c.all || !slices.Equal(pos, c.pos) {
			t.Errorf("Parse(%q) = %q, database %q, all %v, %v; want %q, %q, %v", c.args, pos, *db, *all, err, c.pos, c.db, c.all)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := Parse(fs, []string{"up", "--nope"}); err == nil {
		t.Error("an unknown flag after the command parsed")
	}
	// Only digits make a number: a mistyped flag that Go would parse as a
	// float is still a flag, and an unknown one.
	for _, a := range []string{"-inf", "-NaN", "-1e5", "-0x1p3"} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if pos, err := Parse(fs, []string{"force", a}); err == nil {
			t.Errorf("Parse(force %s) = %q; want an unknown flag", a, pos)
		}
	}
}
