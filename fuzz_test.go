package pgcheckpoint_test

import (
	"path/filepath"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
)

// The fuzz targets of package enginetest, on a SQLite file. .ci/run runs
// each for a few seconds; `go test` runs their seeds and testdata/fuzz.
// The Postgres runs are in package integration.

var sqliteHarness = enginetest.Harness{
	Name:   "sqlite",
	NewURL: func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "test.db") },
}

func FuzzSnapshot(f *testing.F) { enginetest.FuzzSnapshot(f, sqliteHarness) }

func FuzzListFilter(f *testing.F) { enginetest.FuzzListFilter(f, sqliteHarness) }

func FuzzImport(f *testing.F) { enginetest.FuzzImport(f, sqliteHarness) }
