package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/internal/readmecheck"
)

// Every migrate command in a sh block of the README and docs/ runs, in the
// order written, on a temporary SQLite file (a database given as
// $VARIABLE, or none, is that file). It may fail (a version that is not
// there) but never as bad usage: every command and flag the docs show is
// one migrate takes.
func TestDocsMigrateCommands(t *testing.T) {
	cmds, err := readmecheck.DocCommands("../..", "migrate")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	db := "sqlite:" + filepath.Join(dir, "docs.db")
	for _, c := range cmds {
		t.Setenv("DATABASE_URL", db)
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			if strings.HasPrefix(a, "$") && strings.HasSuffix(a, "URL") {
				a = db
			}
			args[i] = a
		}
		for _, e := range c.Env {
			name, val, _ := strings.Cut(e, "=")
			if name == "DATABASE_URL" {
				val = db // a server the docs name, here the temporary file
			}
			t.Setenv(name, val)
		}
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		var ue usageError
		if errors.As(err, &ue) {
			t.Errorf("%s: bad usage: %v", c.Where(), err)
		} else {
			t.Logf("%s: %v", c.Where(), err)
		}
	}
}

// The output block named "migrate help" is migrate's usage text.
func TestDocsMigrateOutputs(t *testing.T) {
	blocks, err := readmecheck.Blocks("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, b := range blocks {
		if b.Kind() != readmecheck.KindOutput || b.Output() != "migrate help" {
			continue
		}
		seen = true
		if b.Text != usage {
			t.Errorf("%s: differs from migrate's usage text:\n--- docs\n%s--- migrate help\n%s", b.Where(), b.Text, usage)
		}
	}
	if !seen {
		t.Error(`the docs no longer show output "migrate help": remove it from docs_test.go's outputOwners and here`)
	}
}
