package integration

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

var fold = flag.Bool("fold", false, "fold every migration in migrations/ into one baseline at the latest version (TestFoldMigrations; before 0.1.0 only)")

// migrationsDir is migrations/, from this package's folder.
var migrationsDir = filepath.Join("..", "migrations")

// foldCommand is the command that folds the migrations into a baseline.
const foldCommand = "go test ./integration -run '^TestFoldMigrations$' -fold"

// baselineName is the name of the baseline migration, after its version.
const baselineName = "baseline"

// The fold (before 0.1.0 only: see docs/contributing.md, "Migrations"):
// every migration in migrations/ becomes one, NNNNNN_baseline, where
// NNNNNN is the latest version, so that a database's version names the
// same schema before and after the fold. Its up is the schema of a
// database migrated to the latest version, as dumpSchema writes it; its
// down drops every object that up made. Without -fold it does nothing.
func TestFoldMigrations(t *testing.T) {
	if !*fold {
		t.Skip("folds the migrations only with -fold: " + foldCommand)
	}
	d := pgtest.NewDB(t)
	up, down, err := baselineFiles(context.Background(), d.Pool, schema.Latest())
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(migrationsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".up.sql") || strings.HasSuffix(e.Name(), ".down.sql") {
			if err := os.Remove(filepath.Join(migrationsDir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	base := filepath.Join(migrationsDir, fmt.Sprintf("%06d_%s", schema.Latest(), baselineName))
	if err := os.WriteFile(base+".up.sql", []byte(up), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".down.sql", []byte(down), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s.up.sql and .down.sql", base)

	// The SQLite store's, the same way.
	sdb := sqliteMigrated(t)
	v, _, err := sqlite.Version(context.Background(), sdb)
	if err != nil {
		t.Fatal(err)
	}
	up, down, err = sqliteBaselineFiles(context.Background(), sdb, v)
	if err != nil {
		t.Fatal(err)
	}
	if entries, err = os.ReadDir(sqliteMigrationsDir); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".up.sql") || strings.HasSuffix(e.Name(), ".down.sql") {
			if err := os.Remove(filepath.Join(sqliteMigrationsDir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	base = filepath.Join(sqliteMigrationsDir, fmt.Sprintf("%06d_%s", v, baselineName))
	if err := os.WriteFile(base+".up.sql", []byte(up), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".down.sql", []byte(down), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s.up.sql and .down.sql; now regenerate schema/current.sql (%s) and run sqlc generate", base, regenerate)
}

// sqliteMigrated returns a new SQLite file migrated up to the latest
// version.
func sqliteMigrated(t *testing.T) *sql.DB {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.OpenDB(ctx, filepath.Join(t.TempDir(), "fold.db"), sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := sqlite.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db
}

// sqliteMigrationsDir is sqlite/migrations/, from this package's folder.
var sqliteMigrationsDir = filepath.Join("..", "sqlite", "migrations")

// The SQLite store's first migration is its baseline, and it is the
// schema it makes, as the fold writes it; its down leaves the file as it
// was before (the version table alone); run a second time, as two
// processes opening a new file at once may, it changes nothing.
func TestSQLiteBaselineIsTheSchemaItMakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ms := schema.MigrationsIn(sqliteFS(t))
	if len(ms) == 0 || ms[0].Name != baselineName {
		t.Fatalf("the SQLite store's first migration is %v, want NNNNNN_%s: fold the migrations (%s)", ms, baselineName, foldCommand)
	}
	first := ms[0].Version
	db := sqliteMigrated(t)
	m := sqliteMigrate(t, db)
	if err := m.Migrate(first); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		t.Fatal(err)
	}
	upFile, err := fs.ReadFile(sqliteFS(t), fmt.Sprintf("%06d_%s.up.sql", first, baselineName))
	if err != nil {
		t.Fatal(err)
	}
	downFile, err := fs.ReadFile(sqliteFS(t), fmt.Sprintf("%06d_%s.down.sql", first, baselineName))
	if err != nil {
		t.Fatal(err)
	}
	up, down, err := sqliteBaselineFiles(ctx, db, first)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ got, want string }{{string(upFile), up}, {string(downFile), down}} {
		if f.got != f.want {
			t.Fatalf("the SQLite baseline is not the fold of the schema it makes (- the file, + the fold):\n%s", schemaDiff(f.got, f.want))
		}
	}
	made := sqliteSchema(t, db)
	if _, err := db.ExecContext(ctx, string(upFile)); err != nil {
		t.Fatalf("the SQLite baseline run a second time: %v", err)
	}
	if again := sqliteSchema(t, db); again != made {
		t.Fatalf("the SQLite baseline run a second time changed the schema (- once, + twice):\n%s", schemaDiff(made, again))
	}
	if err := m.Down(); err != nil {
		t.Fatal(err)
	}
	if left := sqliteSchema(t, db); left != "table schema_migrations\nindex version_unique\n" {
		t.Fatalf("the SQLite baseline's down leaves more than the version table:\n%s", left)
	}
}

// sqliteFS is the SQLite store's migrations folder.
func sqliteFS(t *testing.T) fs.FS {
	t.Helper()
	sub, err := fs.Sub(sqlite.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// sqliteMigrate is golang-migrate over the SQLite store's migrations, as
// sqlite.Migrate runs it.
func sqliteMigrate(t *testing.T, db *sql.DB) *migrate.Migrate {
	t.Helper()
	src, err := iofs.New(sqlite.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	drv, err := migratesqlite.WithInstance(db, &migratesqlite.Config{MigrationsTable: "schema_migrations"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "sqlite", drv)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sqliteSchema lists a SQLite file's schema: each object's kind, name
// and statement.
func sqliteSchema(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		var kind, name, stmt string
		if err := rows.Scan(&kind, &name, &stmt); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s\n", kind, name)
		if stmt != "" && !strings.HasPrefix(name, "sqlite_autoindex_") && name != "schema_migrations" && name != "version_unique" {
			b.WriteString(stmt + "\n")
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// quotedName is a name SQLite quoted in a statement it rewrote (a table
// renamed, and the references to it).
var quotedName = regexp.MustCompile(`"([A-Za-z_][A-Za-z0-9_]*)"`)

// sqliteBaselineFiles writes the SQLite store's baseline at version for
// the schema of db: up, each table and index as SQLite keeps its
// statement (the comments inside it included), in the order they were
// made, IF NOT EXISTS, so that a second run changes nothing; down, a DROP
// of each, the last made first.
func sqliteBaselineFiles(ctx context.Context, db *sql.DB, version uint) (up, down string, err error) {
	rows, err := db.QueryContext(ctx, `SELECT type, name, sql FROM sqlite_master
WHERE sql IS NOT NULL AND name NOT IN ('schema_migrations', 'version_unique') ORDER BY rowid`)
	if err != nil {
		return "", "", err
	}
	defer rows.Close()
	file := fmt.Sprintf("%06d_%s", version, baselineName)
	var u strings.Builder
	fmt.Fprintf(&u, `-- The SQLite store's schema at version %d, whole. Before 0.1.0 every
-- migration was folded into this one (docs/contributing.md, "Migrations");
-- it was generated from a file migrated to version %d with
--
--   %s
--
-- and is never edited: a later migration changes what it made.
--
-- The same rows as the Postgres schema (schema/current.sql) in SQLite's
-- types: ids (uuid) TEXT, the canonical 36-character form; times INTEGER,
-- microseconds since the Unix epoch (UTC), as precise as Postgres
-- timestamptz; JSON (jsonb) TEXT, exactly as the engine handed it over
-- (its stored form, NUL characters escaped: see engine/nul.go); text[]
-- TEXT holding a JSON array of strings. Every key starts with tenant_id,
-- then thread_id.
--
-- Every statement is IF NOT EXISTS: several processes that open a new file
-- with Options.Migrate at once may each run this migration; all of them
-- succeed and the schema is made once.
`, version, version, foldCommand)
	var drops []string
	for rows.Next() {
		var kind, name, stmt string
		if err := rows.Scan(&kind, &name, &stmt); err != nil {
			return "", "", err
		}
		stmt = quotedName.ReplaceAllString(stmt, "$1")
		switch kind {
		case "table":
			rest, ok := strings.CutPrefix(stmt, "CREATE TABLE ")
			if !ok {
				return "", "", fmt.Errorf("table %s: %.40q is not a CREATE TABLE", name, stmt)
			}
			stmt = "CREATE TABLE IF NOT EXISTS " + rest
		case "index":
			rest, ok := strings.CutPrefix(stmt, "CREATE INDEX ")
			if ok {
				stmt = "CREATE INDEX IF NOT EXISTS " + rest
			} else if rest, ok = strings.CutPrefix(stmt, "CREATE UNIQUE INDEX "); ok {
				stmt = "CREATE UNIQUE INDEX IF NOT EXISTS " + rest
			} else {
				return "", "", fmt.Errorf("index %s: %.40q is not a CREATE INDEX", name, stmt)
			}
		default:
			return "", "", fmt.Errorf("%s %s: the fold writes tables and indexes only (teach sqliteBaselineFiles)", kind, name)
		}
		fmt.Fprintf(&u, "\n%s;\n", stmt)
		drops = append(drops, fmt.Sprintf("DROP %s IF EXISTS %s;", strings.ToUpper(kind), name))
	}
	if err := rows.Err(); err != nil {
		return "", "", err
	}
	slices.Reverse(drops)
	down = fmt.Sprintf("-- Reverts %s.up.sql: drops everything it made, data included (the\n-- data keys too, which erases every encrypted thread's content for good).\n-- Generated with the up migration.\n%s\n", file, strings.Join(drops, "\n"))
	return u.String(), down, nil
}

// The first migration is the baseline, and it is the schema it makes,
// exactly as the fold writes it (so it never drifts from the dump, and a
// fold again gives the same file); its down leaves the database as it was
// before: the pgcheckpoint schema holding only the version table.
func TestBaselineIsTheSchemaItMakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := schema.Migrations()[0]
	if first.Name != baselineName {
		t.Fatalf("the first migration is %06d_%s, want NNNNNN_%s: fold the migrations (%s)", first.Version, first.Name, baselineName, foldCommand)
	}
	d := pgtest.EmptyDB(t)
	m := schema.NewMigratorFromPool(d.Pool)
	if err := m.DownAll(ctx); err != nil { // the Migrator's schema and version table, nothing else
		t.Fatal(err)
	}
	before := catalog(t, d.Pool)
	if err := m.Goto(ctx, first.Version); err != nil {
		t.Fatal(err)
	}
	up, down, err := baselineFiles(ctx, d.Pool, first.Version)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ got, want string }{{sqlText(t, first.Version, true), up}, {sqlText(t, first.Version, false), down}} {
		if f.got != f.want {
			t.Fatalf("the baseline is not the fold of the schema it makes (- the file, + the fold):\n%s", schemaDiff(f.got, f.want))
		}
	}
	if err := m.DownAll(ctx); err != nil {
		t.Fatal(err)
	}
	if after := catalog(t, d.Pool); after != before {
		t.Fatalf("the baseline's down leaves another schema than before its up (- before, + after):\n%s", schemaDiff(before, after))
	}
}

func sqlText(t *testing.T, version uint, up bool) string {
	t.Helper()
	s, err := schema.SQL(version, up)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// grantee matches a GRANT or REVOKE of the dump and names its grantee.
var grantee = regexp.MustCompile(`(?m)^(?:GRANT|REVOKE) .* (?:TO|FROM) (\S+?)(?: WITH GRANT OPTION)?;$`)

// baselineFiles writes the baseline migration at version for the schema
// of the database pool reaches: up, the dump made runnable as a
// migration (in the migration's transaction, with the schema the
// Migrator may have made already); down, a DROP of every object up
// makes, the dependent ones first. It refuses privileges granted to a
// role by name: a migration cannot know the roles of every database
// (schema/roles/roles.sql grants them).
func baselineFiles(ctx context.Context, pool *pgxpool.Pool, version uint) (up, down string, err error) {
	dump, err := dumpSchema(ctx, pool)
	if err != nil {
		return "", "", err
	}
	for _, m := range grantee.FindAllStringSubmatch(dump, -1) {
		if m[1] != "PUBLIC" && m[1] != "CURRENT_USER" {
			return "", "", fmt.Errorf("the schema grants to the role %s: a baseline grants to PUBLIC alone (roles.sql grants the roles); revoke it first:\n%s", m[1], m[0])
		}
	}
	const head = "SET check_function_bodies = false;\n\nCREATE SCHEMA " + schema.Name + ";\n"
	rest, ok := strings.CutPrefix(dump, head)
	if !ok {
		return "", "", fmt.Errorf("the dump does not start with %q", head)
	}
	file := fmt.Sprintf("%06d_%s", version, baselineName)
	up = fmt.Sprintf(`-- pgcheckpoint's schema at version %d, whole: tables, views, functions,
-- their comments and privileges. Before 0.1.0 every migration was folded
-- into this one (docs/contributing.md, "Migrations"); it was generated
-- from the catalog of a database migrated to version %d with
--
--   %s
--
-- and is never edited: a later migration changes what it made.
--
-- It runs in one transaction (schema.Migrator, golang-migrate, psql -1):
-- SET LOCAL holds for that transaction alone. Function bodies are checked
-- when called, not here, since the functions come before the views some
-- of them read. The roles are granted by schema/roles/roles.sql.

SET LOCAL check_function_bodies = false;

CREATE SCHEMA IF NOT EXISTS %s;
%s`, version, version, foldCommand, schema.Name, rest)

	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return "", "", err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Names come out schema-qualified, types bare.
	if _, err := tx.Exec(ctx, `SELECT set_config('search_path', 'pg_catalog', true)`); err != nil {
		return "", "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `-- Reverts %s.up.sql: drops every object it made (a function that
-- returns a view's rows, then the view, then its table; the other
-- functions last, which defaults and policies call). The pgcheckpoint schema stays, as the migration tool made it: it
-- holds the version table. Generated with the up migration.
`, file)
	for _, kind := range []struct{ drop, query string }{
		{"FUNCTION", `SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = $1::regnamespace AND p.prokind = 'f' AND ` + returnsViewRows + ` ORDER BY p.proname, 1`},
		{"VIEW", `SELECT c.oid::regclass::text FROM pg_class c WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'v' ORDER BY c.relname`},
		{"TABLE", `SELECT c.oid::regclass::text FROM pg_class c WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'r' AND c.relname <> '` + schema.VersionTable + `' ORDER BY c.relname`},
		{"AGGREGATE", `SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = $1::regnamespace AND p.prokind = 'a' ORDER BY p.proname, 1`},
		{"FUNCTION", `SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = $1::regnamespace AND p.prokind = 'f' AND NOT ` + returnsViewRows + ` ORDER BY p.proname, 1`},
		{"PROCEDURE", `SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = $1::regnamespace AND p.prokind = 'p' ORDER BY p.proname, 1`},
	} {
		rows, err := tx.Query(ctx, kind.query, schema.Name)
		if err != nil {
			return "", "", err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", "", err
		}
		if len(names) > 0 {
			// One statement per kind: Postgres drops a list whose members
			// depend on each other.
			fmt.Fprintf(&b, "\nDROP %s\n    %s;\n", kind.drop, strings.Join(names, ",\n    "))
		}
	}
	fmt.Fprintf(&b, "\nCOMMENT ON SCHEMA %s IS NULL;\n", schema.Name)
	return up, b.String(), nil
}
