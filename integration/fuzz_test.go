package integration

import (
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
)

// The fuzz targets of package enginetest on Postgres, where what only
// Postgres refuses (numbers jsonb cannot hold, deep nesting, unpaired
// surrogates, bytes that are not UTF-8) meets every input surface. .ci/run
// runs each for a few seconds; `go test` runs their seeds and
// testdata/fuzz. Each fuzzing process has a database of its own.

var postgresHarness = enginetest.Harness{
	Name:   "postgres",
	NewURL: func(t testing.TB) string { return pgtest.NewDB(t).URL },
}

func FuzzSnapshot(f *testing.F) { enginetest.FuzzSnapshot(f, postgresHarness) }

func FuzzListFilter(f *testing.F) { enginetest.FuzzListFilter(f, postgresHarness) }

func FuzzImport(f *testing.F) { enginetest.FuzzImport(f, postgresHarness) }
