package integration

import (
	"context"
	"path/filepath"
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
		// The tenant tests run as the application role of the shipped
		// roles script, which both walls hold (the tenant views and
		// row-level security); TestTenantsAsSuperuser runs them as a
		// superuser, which the views alone hold.
		TenantURL: func(t testing.TB) string { return setupTenants(t).appURL },
	})
}

// TestConformanceBetweenStores holds each store to taking what the other
// exports (see enginetest.RunBetween): values at the edge of what both
// keep, written to SQLite, move to Postgres and back, and written to
// Postgres, move to SQLite and back.
func TestConformanceBetweenStores(t *testing.T) {
	sqlite := enginetest.Harness{
		Name:   "sqlite",
		NewURL: func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "test.db") },
	}
	postgres := enginetest.Harness{
		Name:   "postgres",
		NewURL: func(t testing.TB) string { return pgtest.NewDB(t).URL },
	}
	t.Run("SQLiteToPostgres", func(t *testing.T) {
		t.Parallel()
		enginetest.RunBetween(t, sqlite, postgres)
	})
	t.Run("PostgresToSQLite", func(t *testing.T) {
		t.Parallel()
		enginetest.RunBetween(t, postgres, sqlite)
	})
}

// TestTenantsAsSuperuser runs the tenant tests of the conformance and
// encryption suites (enginetest.RunTenants) as a superuser, the test
// database's own role, which row-level security does not hold: tenant B
// neither sees nor changes tenant A's rows all the same, since every
// statement of the store and every SQL function reads and writes the
// tables through the views of the session's tenant. The
// sessions start with no tenant (what an Engine bound to none gets is
// DefaultTenant's, set by the store).
func TestTenantsAsSuperuser(t *testing.T) {
	enginetest.RunTenants(t, enginetest.Harness{
		Name: "postgres-superuser",
		NewURL: func(t testing.TB) string {
			d := pgtest.NewDB(t)
			d.NoTenant(t)
			var super bool
			if err := d.Pool.QueryRow(context.Background(), "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
				t.Fatal(err)
			}
			if !super {
				t.Skip("the test database's role is not a superuser")
			}
			return d.URL
		},
	})
}
