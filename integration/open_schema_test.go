package integration

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// pgcheckpoint.Open checks the schema version on both stores and gives the
// same sentinels: a database with no schema, or an older one, is
// engine.ErrNotMigrated naming the fix (unless Options.Migrate, which
// migrates it); one a newer pgcheckpoint migrated is engine.ErrNewerSchema,
// with Migrate too; a dirty one engine.ErrDirtySchema. A refused Open
// creates nothing.
func TestOpenChecksTheSchemaVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type database struct {
		url  string
		exec func(sql string) // runs SQL on it, as its owner
	}
	stores := map[string]func(t *testing.T, migrated bool) database{
		"postgres": func(t *testing.T, migrated bool) database {
			d := pgtest.EmptyDB(t)
			if migrated {
				if err := schema.MigratePool(ctx, d.Pool); err != nil {
					t.Fatal(err)
				}
			}
			return database{d.URL, func(q string) {
				t.Helper()
				if _, err := d.Pool.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}}
		},
		"sqlite": func(t *testing.T, migrated bool) database {
			path := filepath.Join(t.TempDir(), "open.db")
			if migrated {
				s, err := sqlite.Open(ctx, path, sqlite.Options{Migrate: true})
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
			}
			return database{"sqlite:" + path, func(q string) {
				t.Helper()
				db, err := sql.Open("sqlite", path)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if _, err := db.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}}
		},
	}
	for name, newDatabase := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			open := func(db database, migrate bool) error {
				t.Helper()
				eng, err := pgcheckpoint.Open(ctx, db.url, pgcheckpoint.Options{Migrate: migrate})
				if err == nil {
					_, err = eng.ListThreads(ctx, engine.ThreadListOptions{})
					eng.Close()
				}
				return err
			}
			notMigrated := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, engine.ErrNotMigrated) || !strings.Contains(err.Error(), "migrate up") || !strings.Contains(err.Error(), "Options.Migrate") {
					t.Errorf("%s: %v; want engine.ErrNotMigrated naming `migrate up` and Options.Migrate", what, err)
				}
			}

			empty := newDatabase(t, false)
			notMigrated("a database never migrated", open(empty, false))
			if err := open(empty, true); err != nil {
				t.Errorf("a database never migrated, with Migrate: %v", err)
			}

			older := newDatabase(t, true)
			older.exec(map[string]string{
				"postgres": "UPDATE pgcheckpoint.schema_migrations SET version = version - 1",
				"sqlite":   "UPDATE schema_migrations SET version = version - 1",
			}[name])
			notMigrated("an older schema", open(older, false))

			newer := newDatabase(t, true)
			newer.exec(map[string]string{
				"postgres": "UPDATE pgcheckpoint.schema_migrations SET version = 99999",
				"sqlite":   "UPDATE schema_migrations SET version = 99999",
			}[name])
			for _, migrate := range []bool{false, true} {
				if err := open(newer, migrate); !errors.Is(err, engine.ErrNewerSchema) || !strings.Contains(err.Error(), "99999") {
					t.Errorf("a newer schema (Migrate %v): %v; want engine.ErrNewerSchema naming its version", migrate, err)
				}
			}

			dirty := newDatabase(t, true)
			dirty.exec(map[string]string{
				"postgres": "UPDATE pgcheckpoint.schema_migrations SET dirty = true",
				"sqlite":   "UPDATE schema_migrations SET dirty = 1",
			}[name])
			// With Migrate, the SQLite store first waits a minute for the flag
			// to clear, as another process's migration would clear it.
			for _, migrate := range []bool{false, name == "postgres"} {
				if err := open(dirty, migrate); !errors.Is(err, engine.ErrDirtySchema) {
					t.Errorf("a dirty schema (Migrate %v): %v; want engine.ErrDirtySchema", migrate, err)
				}
			}
		})
	}
}

// A refused Open on Postgres creates nothing; a schema that goes missing
// after Open (dropped, or a table of it) is engine.ErrNotMigrated at call
// time, not the driver's SQLSTATE 3F000 or 42P01 alone.
func TestMissingSchemaIsNotMigrated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.EmptyDB(t)
	if _, err := pgcheckpoint.Open(ctx, d.URL, pgcheckpoint.Options{}); !errors.Is(err, engine.ErrNotMigrated) {
		t.Fatalf("open of an empty database: %v", err)
	}
	if schemaExists(t, d.Pool) {
		t.Fatal("a refused Open created the schema")
	}
	if err := postgres.CheckSchema(ctx, d.Pool); !errors.Is(err, engine.ErrNotMigrated) || !errors.Is(err, schema.ErrPending) {
		t.Fatalf("CheckSchema of an empty database: %v; want engine.ErrNotMigrated and schema.ErrPending", err)
	}

	eng, err := pgcheckpoint.Open(ctx, d.URL, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	first, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, "DROP TABLE pgcheckpoint.pending_writes CASCADE"); err != nil {
		t.Fatal(err)
	}
	_, err = eng.PutWrites(ctx, first.ID, "task", []engine.Write{{Channel: "c", Value: []byte(`1`)}})
	if !errors.Is(err, engine.ErrNotMigrated) || !strings.Contains(err.Error(), "42P01") {
		t.Errorf("a write to a dropped table: %v; want engine.ErrNotMigrated with SQLSTATE 42P01", err)
	}
	if _, err := d.Pool.Exec(ctx, "DROP SCHEMA pgcheckpoint CASCADE"); err != nil {
		t.Fatal(err)
	}
	_, err = eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
	// The write's first statement names the thread locks' table (42P01)
	// or a function of the schema (3F000): either way the schema is gone.
	if !errors.Is(err, engine.ErrNotMigrated) || !strings.Contains(err.Error(), "3F000") && !strings.Contains(err.Error(), "42P01") ||
		!strings.Contains(err.Error(), "migrate up") {
		t.Errorf("a snapshot with the schema dropped: %v; want engine.ErrNotMigrated with SQLSTATE 3F000 or 42P01, naming `migrate up`", err)
	}
}
