package integration

import (
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
)

// TestConformance runs the conformance suite every store passes (package
// enginetest) on Postgres, each test in a database of its own, which is
// checked at the end of the test for what only Postgres shows: every delta
// has its base in its thread and namespace, and every checkpoint
// materializes in SQL. The SQLite run is in the module's root package.
//
// The behaviour the stores share is tested there; the other tests of this
// package are about Postgres: its SQL functions, locks, plans, migrations,
// storage columns, the CLI and benchmarks.
func TestConformance(t *testing.T) {
	enginetest.Run(t, enginetest.Harness{
		Name: "postgres",
		NewURL: func(t testing.TB) string {
			d := pgtest.NewDB(t)
			t.Cleanup(func() { checkDeltaBases(t, d.Pool) })
			return d.URL
		},
	})
}
