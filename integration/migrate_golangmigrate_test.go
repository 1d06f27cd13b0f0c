package integration

import (
	"context"
	"errors"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// golangMigrate is golang-migrate over the embedded migrations, configured
// as a team that applies them with golang-migrate would: its version table
// is the one schema.Migrator keeps.
func golangMigrate(t *testing.T, d *pgtest.DB) *migrate.Migrate {
	t.Helper()
	db := stdlib.OpenDBFromPool(d.Pool)
	t.Cleanup(func() { db.Close() })
	src, err := iofs.New(schema.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{SchemaName: schema.Name, MigrationsTable: schema.VersionTable})
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		t.Fatal(err)
	}
	// Before the pool closes: the driver holds one of its connections.
	t.Cleanup(func() { m.Close() })
	return m
}

// The migrations are golang-migrate's format and the version table is
// golang-migrate's, so a database can move between golang-migrate and
// schema.Migrator in either direction, and both end at the same schema.
func TestGolangMigrateAndMigratorShareTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := catalog(t, pgtest.NewDB(t).Pool)

	d := pgtest.EmptyDB(t)
	if _, err := d.Pool.Exec(ctx, "CREATE SCHEMA "+schema.Name); err != nil { // golang-migrate keeps its table there
		t.Fatal(err)
	}
	gm := golangMigrate(t, d)
	if prev := previousVersion(); prev > 0 { // 0: the baseline alone, left to the Migrator
		if err := gm.Migrate(prev); err != nil {
			t.Fatalf("golang-migrate to version %d: %v", prev, err)
		}
	}
	m := schema.NewMigratorFromPool(d.Pool)
	if v, dirty, err := m.Version(ctx); err != nil || dirty || v != previousVersion() {
		t.Fatalf("Migrator reads golang-migrate's version: %d %v %v", v, dirty, err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatalf("Migrator up after golang-migrate: %v", err)
	}
	if v, dirty, err := gm.Version(); err != nil || dirty || v != schema.Latest() {
		t.Fatalf("golang-migrate reads the Migrator's version: %d %v %v", v, dirty, err)
	}
	if got := catalog(t, d.Pool); got != want {
		t.Fatalf("golang-migrate then Migrator: the schema differs from a Migrator's alone (- Migrator, + golang-migrate then Migrator):\n%s", schemaDiff(want, got))
	}
	if err := gm.Steps(-1); err != nil {
		t.Fatalf("golang-migrate down 1 after the Migrator: %v", err)
	}
	if v, _, err := m.Version(ctx); err != nil || v != previousVersion() {
		t.Fatalf("after golang-migrate's down: version %d, %v", v, err)
	}
	if err := gm.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		t.Fatalf("golang-migrate up: %v", err)
	}
	if got := catalog(t, d.Pool); got != want {
		t.Fatalf("after golang-migrate's down and up: the schema differs (- Migrator, + after golang-migrate's down and up):\n%s", schemaDiff(want, got))
	}
}
