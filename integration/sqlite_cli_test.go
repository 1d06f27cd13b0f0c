package integration

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// envWithout is the test's environment less the variables named.
func envWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return env
}

// The demo on a SQLite file, then ckpt reading that file: the tree drawn
// from it, threads listed, a checkpoint shown.
func TestCkptOnASQLiteFile(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	env := envWithout("DATABASE_URL")
	url := "sqlite:" + filepath.Join(t.TempDir(), "demo.db")

	r := runCLI(t, bin, env, "--database", url, "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "merge    the branch into demo-trip: step 5") {
		t.Fatalf("demo on %s: exit %d\n%s\n%s", url, r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, bin, env, "--database", url, "log", "demo-trip", "--graph")
	if r.code != 0 || !strings.Contains(r.stdout, " step 5 manual (head)  Merge of demo-trip-branch-hostel-") || !strings.Contains(r.stdout, "*-. ") {
		t.Fatalf("log --graph from the file: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, bin, append(env, "DATABASE_URL="+url), "threads")
	if r.code != 0 || !strings.Contains(r.stdout, "demo-trip") {
		t.Fatalf("threads with DATABASE_URL: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// The demo runs again on the same file.
	r = runCLI(t, bin, env, "--database", url, "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "(deleted 8 checkpoints of an earlier demo first)") {
		t.Fatalf("demo again: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// A --database that cannot be opened gets a clear error, exit 2 for a
// malformed URL and 1 for the rest, and nothing is created or changed.
func TestCkptBadSQLiteDatabase(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	env := envWithout("DATABASE_URL")
	dir := t.TempDir()

	notDB := filepath.Join(dir, "notes.txt")
	text := []byte("not a database\n")
	if err := os.WriteFile(notDB, text, 0o644); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, "newer.db")
	ctx := context.Background()
	db, err := sqlite.OpenDB(ctx, newer, sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlite.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE schema_migrations SET version = 999`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for _, c := range []struct {
		name, url string
		code      int
		want      string
	}{
		{"malformed", "mysql://u@h/db", 2, "want postgres://..., postgresql://..., sqlite:PATH"},
		{"no path", "sqlite:", 2, "has no file path"},
		{"missing directory", "sqlite:" + filepath.Join(dir, "nope", "x.db"), 1, "directory does not exist"},
		{"missing file", "sqlite:" + filepath.Join(dir, "absent.db"), 1, "run migrate up"},
		{"not a database", "sqlite:" + notDB, 1, "not a SQLite database"},
		{"newer schema", "sqlite:" + newer, 1, "newer"},
	} {
		r := runCLI(t, bin, env, "--database", c.url, "threads")
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, want %d, with %q in\n%s", c.name, r.code, c.code, c.want, r.stderr)
		}
		noStackTrace(t, r)
	}
	if _, err := os.Stat(filepath.Join(dir, "nope")); !os.IsNotExist(err) {
		t.Errorf("the missing directory was created: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "absent.db")); !os.IsNotExist(err) {
		t.Errorf("the missing file was created: %v", err)
	}
	if got, _ := os.ReadFile(notDB); !bytes.Equal(got, text) {
		t.Errorf("the file that is not a database changed: %q", got)
	}
}

// cmd/migrate on a SQLite file: up creates it, version reads it without
// creating anything, down -all empties it.
func TestMigrateSQLiteFile(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "migrate")
	env := envWithout("DATABASE_URL")
	path := filepath.Join(t.TempDir(), "m.db")
	url := "sqlite:" + path

	if r := runCLI(t, bin, env, "-database", url, "version"); r.code != 1 || !strings.Contains(r.stderr, "run migrate up") {
		t.Fatalf("version of a missing file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("version created the file: %v", err)
	}
	want := func(args []string, out string) {
		t.Helper()
		r := runCLI(t, bin, env, append([]string{"-database", url}, args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, out) {
			t.Fatalf("migrate %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	latest := itoa(sqlite.LatestVersion())
	want([]string{"up"}, "version "+latest+" of "+latest)
	want([]string{"up"}, "version "+latest+" of "+latest)
	want([]string{"version"}, "version "+latest+" of "+latest)
	want([]string{"down", "-all"}, "version 0 of "+latest)
	want([]string{"goto", latest}, "version "+latest+" of "+latest)
	want([]string{"goto", "0"}, "version 0 of "+latest)
	want([]string{"goto", latest}, "version "+latest+" of "+latest)
	// A process that died in the migration left the flag dirty and the
	// schema as it was (the migration is one transaction): version says
	// how to go on, force -1 and up do. down takes 1, the one migration.
	if r := runCLI(t, bin, env, "-database", url, "down", "2"); r.code != 1 || !strings.Contains(r.stderr, "one migration") {
		t.Fatalf("down 2 on SQLite: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want([]string{"down", "1"}, "version 0 of "+latest)
	db, err := sqlite.OpenDB(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM schema_migrations; INSERT INTO schema_migrations (version, dirty) VALUES (` + latest + `, 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	want([]string{"version"}, "version "+latest+" of "+latest+" (dirty: it ran in one transaction and left nothing: run `migrate force -1`, then `migrate up`)")
	if r := runCLI(t, bin, env, "-database", url, "force", "1"); r.code != 1 || !strings.Contains(r.stderr, "versions -1 (none) and "+latest) {
		t.Fatalf("force 1 on SQLite: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want([]string{"force", "-1"}, "version 0 of "+latest)
	want([]string{"up"}, "version "+latest+" of "+latest)
	want([]string{"check"}, "version "+latest+" of "+latest)
	eng, err := pgcheckpoint.Open(context.Background(), url, pgcheckpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Snapshot(context.Background(), engine.SnapshotInput{ThreadID: "after-repair"}); err != nil {
		t.Fatalf("a write after the repair: %v", err)
	}
	// list and sql answer for the store the URL names: SQLite's
	// migrations for a sqlite: URL (-database or DATABASE_URL), Postgres's
	// for a Postgres URL or none. Each store's first migration is a
	// version the other store lacks.
	sqliteMigrations := schema.MigrationsIn(sqliteFS(t))
	sqliteFirst := sqliteMigrations[0]
	sqliteUp, err := fs.ReadFile(sqliteFS(t), fmt.Sprintf("%06d_%s.up.sql", sqliteFirst.Version, sqliteFirst.Name))
	if err != nil {
		t.Fatal(err)
	}
	sqliteDown, err := fs.ReadFile(sqliteFS(t), fmt.Sprintf("%06d_%s.down.sql", sqliteFirst.Version, sqliteFirst.Name))
	if err != nil {
		t.Fatal(err)
	}
	sqliteList := ""
	for _, m := range sqliteMigrations {
		sqliteList += fmt.Sprintf("%06d %s\n", m.Version, m.Name)
	}
	pgFirstVersion := schema.Migrations()[0].Version
	pgFirst, err := schema.SQL(pgFirstVersion, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schema.SQL(sqliteFirst.Version, true); err == nil {
		t.Fatalf("Postgres has a migration %d too: the cases below cannot tell the stores apart", sqliteFirst.Version)
	}
	pgList := ""
	for _, m := range schema.Migrations() {
		pgList += fmt.Sprintf("%06d %s\n", m.Version, m.Name)
	}
	missing := "sqlite:" + filepath.Join(t.TempDir(), "never-created.db")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{env, []string{"-database", missing, "list"}, sqliteList},
		{append(env, "DATABASE_URL="+missing), []string{"list"}, sqliteList},
		{env, []string{"list", "--database", missing}, sqliteList},
		{env, []string{"-database", missing, "sql", itoa(sqliteFirst.Version)}, string(sqliteUp)},
		{append(env, "DATABASE_URL="+missing), []string{"sql", itoa(sqliteFirst.Version), "down"}, string(sqliteDown)},
		{env, []string{"list"}, pgList},
		{env, []string{"-database", "postgres://nobody@127.0.0.1:1/none", "list"}, pgList},
		{env, []string{"sql", itoa(pgFirstVersion)}, pgFirst},
	} {
		r := runCLI(t, bin, c.env, c.args...)
		if r.code != 0 || r.stdout != c.want {
			t.Errorf("migrate %v: exit %d\n%.300s\n%s", c.args, r.code, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, bin, env, "-database", missing, "sql", itoa(pgFirstVersion)); r.code != 1 || !strings.Contains(r.stderr, "no such migration version: "+itoa(pgFirstVersion)+" (latest is "+latest+")") {
		t.Errorf("migrate sql %d on SQLite: exit %d\n%s%s", pgFirstVersion, r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(strings.TrimPrefix(missing, "sqlite:")); !os.IsNotExist(err) {
		t.Errorf("list or sql created the file: %v", err)
	}
}
