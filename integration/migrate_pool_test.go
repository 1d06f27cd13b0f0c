package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// schemaExists reports whether the pgcheckpoint schema exists.
func schemaExists(t *testing.T, pool *pgxpool.Pool) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'pgcheckpoint')`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// Migrations run over the application's own pool, its AfterConnect
// included; Version and Check change nothing on an empty database.
func TestMigrateFromTheApplicationsPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.EmptyDB(t)
	cfg, err := pgxpool.ParseConfig(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	var connected int
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		connected++
		_, err := c.Exec(ctx, `SET application_name = 'the-app'`)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m := schema.NewMigratorFromPool(pool)

	if v, dirty, err := m.Version(ctx); err != nil || v != 0 || dirty {
		t.Fatalf("version of an empty database: %d %v %v", v, dirty, err)
	}
	if err := m.Check(ctx); !errors.Is(err, schema.ErrPending) {
		t.Fatalf("check of an empty database: %v, want ErrPending", err)
	}
	if err := schema.CheckPool(ctx, pool); !errors.Is(err, schema.ErrPending) {
		t.Fatalf("CheckPool of an empty database: %v, want ErrPending", err)
	}
	if err := schema.Check(ctx, d.URL); !errors.Is(err, schema.ErrPending) {
		t.Fatalf("Check of an empty database: %v, want ErrPending", err)
	}
	if schemaExists(t, pool) {
		t.Fatal("Version or Check created the schema")
	}
	if err := schema.MigratePool(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(ctx); err != nil {
		t.Fatalf("check after up: %v", err)
	}
	if err := schema.Check(ctx, d.URL); err != nil {
		t.Fatalf("Check after up: %v", err)
	}
	if connected == 0 {
		t.Fatal("the pool's AfterConnect never ran")
	}
	// The pool serves on, the engine over it works.
	if _, err := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{}).Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Down(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(ctx); !errors.Is(err, schema.ErrPending) || !strings.Contains(err.Error(), "version "+itoa(previousVersion())+" of "+itoa(schema.Latest())) {
		t.Fatalf("check one migration behind: %v", err)
	}
}

// The migrate CLI: help, check's exit codes, version creating nothing, and
// flags after the command.
func TestMigrateCLICheckHelpAndFlags(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "migrate")
	env := envWithout("DATABASE_URL")
	d := pgtest.EmptyDB(t)
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"up", "--help"}} {
		if r := runCLI(t, bin, env, args...); r.code != 0 || !strings.Contains(r.stdout, "check") || !strings.Contains(r.stdout, "usage: migrate") {
			t.Errorf("migrate %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, bin, env, "version", "--database", d.URL); r.code != 0 || !strings.Contains(r.stdout, "version 0 of "+itoa(schema.Latest())) {
		t.Fatalf("version after the command: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if schemaExists(t, d.Pool) {
		t.Fatal("migrate version created the schema")
	}
	if r := runCLI(t, bin, env, "check", "-database", d.URL); r.code != 1 || !strings.Contains(r.stderr, "version 0 of "+itoa(schema.Latest())) {
		t.Fatalf("check of an empty database: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if schemaExists(t, d.Pool) {
		t.Fatal("migrate check created the schema")
	}
	if r := runCLI(t, bin, env, "up", "--database", d.URL); r.code != 0 || !strings.Contains(r.stdout, "version "+itoa(schema.Latest())+" of "+itoa(schema.Latest())) {
		t.Fatalf("up --database URL: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, bin, env, "check", "--database="+d.URL); r.code != 0 {
		t.Fatalf("check after up: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, bin, env, "down", "--all", "--database", d.URL); r.code != 0 || !strings.Contains(r.stdout, "version 0 of "+itoa(schema.Latest())) {
		t.Fatalf("down --all: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, bin, env, "up", "-all", "--database", d.URL); r.code != 2 {
		t.Fatalf("up -all: exit %d, want 2", r.code)
	}
}

// A pool of one connection migrates: a migration is one transaction on
// one connection, it never waits for a second one of its own.
func TestMigratePoolOfOneConnection(t *testing.T) {
	t.Parallel()
	d := pgtest.EmptyDB(t)
	pool := poolOf(t, d.URL, 1)
	// Bounded, so that a Migrator that waits for itself fails the test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := schema.NewMigratorFromPool(pool)
	if err := m.Check(ctx); !errors.Is(err, schema.ErrPending) {
		t.Fatalf("check over one connection: %v, want ErrPending", err)
	}
	if err := schema.MigratePool(ctx, pool); err != nil {
		t.Fatalf("MigratePool over one connection: %v", err)
	}
	if err := m.Check(ctx); err != nil {
		t.Fatalf("check after MigratePool over one connection: %v", err)
	}
}
