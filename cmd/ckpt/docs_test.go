package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/internal/localpg"
	"github.com/pgcheckpoint/pgcheckpoint/internal/readmecheck"
)

// Every ckpt command in a sh block of the README and docs/ runs, in the
// order written, on a temporary SQLite file that the demo filled (the
// docs' thread demo-trip), and succeeds: every command, flag and argument
// the docs show is one ckpt takes, and works. $DATABASE_URL is that file,
// any other $...URL a second, migrated file; output sent to a file (>) is
// written there, so an export can be imported; web serves for a moment.
func TestDocsCkptCommands(t *testing.T) {
	cmds, err := readmecheck.DocCommands("../..", "ckpt")
	if err != nil {
		t.Fatal(err)
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
	other := "sqlite:" + filepath.Join(dir, "other.db")
	eng, err := pgcheckpoint.Open(context.Background(), other, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	for _, c := range cmds {
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			switch {
			case a == "$DATABASE_URL":
				a = db
			case strings.HasPrefix(a, "$") && strings.HasSuffix(a, "URL"):
				a = other
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
		if err != nil {
			t.Errorf("%s: %v\n%s", c.Where(), err, errOut.String())
		}
		if c.Stdout != "" {
			if err := os.WriteFile(c.Stdout, out.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
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
