package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/internal/localpg"
	"github.com/pgcheckpoint/pgcheckpoint/internal/readmecheck"
)

// Every ckpt command in a sh block of the README and docs/ runs, in the
// order written, on a temporary SQLite file that the demo filled (the
// docs' thread demo-trip): it may fail (a file that is not there, an id
// that names nothing here) but never as bad usage, so every command, flag
// and argument count the docs show is one ckpt takes. A database given as
// $VARIABLE is the temporary file; web serves for a moment.
func TestDocsCkptCommands(t *testing.T) {
	blocks, err := readmecheck.Blocks("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := readmecheck.ProgCommands(blocks, "ckpt")
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 {
		t.Fatal("the docs show no ckpt command")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	db := "sqlite:" + filepath.Join(dir, "docs.db")
	t.Setenv("DATABASE_URL", db)
	t.Setenv("PGCHECKPOINT_TENANT", "")
	t.Setenv("PGCHECKPOINT_KEYS", "")
	if err := run(context.Background(), []string{"--database", db, "demo"}, io.Discard, io.Discard, terminals{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			if strings.HasPrefix(a, "$") && strings.HasSuffix(a, "URL") {
				a = db
			}
			args[i] = a
		}
		for _, e := range c.Env {
			name, val, _ := strings.Cut(e, "=")
			t.Setenv(name, val)
		}
		wait := time.Minute
		if len(args) > 0 && slices.Contains(args, "web") {
			wait = 500 * time.Millisecond // serves until then
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		var out, errOut bytes.Buffer
		err := run(ctx, args, &out, &errOut, terminals{})
		cancel()
		var ue usageError
		if errors.As(err, &ue) {
			t.Errorf("%s: bad usage: %v", c.Where(), err)
		} else {
			t.Logf("%s: %v", c.Where(), err)
		}
	}
}

// The output blocks named "ckpt help" and "ckpt demo" are what ckpt
// prints: the usage text exactly; the demo's run on a machine with nothing
// installed, but for its temporary path, the branch's random suffix and
// the times.
func TestDocsCkptOutputs(t *testing.T) {
	blocks, err := readmecheck.Blocks("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, b := range blocks {
		if b.Kind() != readmecheck.KindOutput || !strings.HasPrefix(b.Output(), "ckpt ") {
			continue
		}
		seen[b.Output()] = true
		switch b.Output() {
		case "ckpt help":
			if b.Text != usage() {
				t.Errorf("%s: differs from ckpt's usage text:\n--- docs\n%s--- ckpt help\n%s", b.Where(), b.Text, usage())
			}
		case "ckpt demo":
			t.Setenv("DATABASE_URL", "")
			t.Setenv("PATH", "/nonexistent")
			t.Setenv(localpg.EnvDirs, "")
			var out bytes.Buffer
			if err := run(context.Background(), []string{"demo"}, &out, io.Discard, terminals{}); err != nil {
				t.Fatal(err)
			}
			if got, want := normalizeDemo(out.String()), normalizeDemo(b.Text); got != want {
				t.Errorf("%s: differs from the demo's output (normalized):\n--- docs\n%s--- demo\n%s", b.Where(), want, got)
			}
		default:
			t.Errorf("%s: no check for output %q", b.Where(), b.Output())
		}
	}
	for _, name := range []string{"ckpt help", "ckpt demo"} {
		if !seen[name] {
			t.Errorf("the docs no longer show output %q: remove it from docs_test.go's outputOwners and here", name)
		}
	}
}

var (
	demoTempDir = regexp.MustCompile(`pgcheckpoint-demo-[0-9]+`)
	demoBranch  = regexp.MustCompile(`branch-hostel-[0-9a-f]+`)
)

// normalizeDemo replaces what differs between runs of the demo.
func normalizeDemo(s string) string {
	s = demoTempDir.ReplaceAllString(s, "pgcheckpoint-demo-N")
	return demoBranch.ReplaceAllString(s, "branch-hostel-X")
}
