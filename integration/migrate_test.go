package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// buildCommand builds a command of this module once per test binary and
// returns the path of the executable.
func buildCommand(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = filepath.Abs("../bin/test")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", binDir+"/", "../cmd/...").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/...: %v", buildErr)
	}
	return filepath.Join(binDir, name)
}

type cliResult struct {
	stdout, stderr string
	code           int
}

func runCLI(t *testing.T, bin string, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{out.String(), errOut.String(), code}
}

func TestConcurrentMigrateUp(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "migrate")
	d := pgtest.EmptyDB(t)
	const n = 8
	results := make([]cliResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = runCLI(t, bin, []string{"DATABASE_URL=" + d.URL}, "up") })
	}
	wg.Wait()
	want := "version " + itoa(schema.Latest()) + " of " + itoa(schema.Latest()) + "\n"
	for i, r := range results {
		if r.code != 0 || r.stdout != want {
			t.Fatalf("migrate up #%d: exit %d stdout %q stderr %q", i, r.code, r.stdout, r.stderr)
		}
	}
	v, dirty, err := schema.NewMigrator(d.URL).Version(context.Background())
	if err != nil || dirty || v != schema.Latest() {
		t.Fatalf("version %d dirty %v err %v", v, dirty, err)
	}
	// Nothing lands in public.
	var inPublic int
	if err := d.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`).Scan(&inPublic); err != nil || inPublic != 0 {
		t.Fatalf("%d relations in public (%v)", inPublic, err)
	}
}

func TestMigrateUpDownUpLeavesTheSameSchema(t *testing.T) {
	t.Parallel()
	d := pgtest.EmptyDB(t)
	ctx := context.Background()
	m := schema.NewMigrator(d.URL)
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	first := catalog(t, d.Pool)
	for _, want := range []string{"    messages jsonb COMPRESSION lz4", "CREATE INDEX checkpoints_metadata_idx", "CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_put", "COMMENT ON COLUMN pgcheckpoint.checkpoints.state IS"} {
		if !strings.Contains(first, want) {
			t.Fatalf("catalog lacks %q:\n%s", want, first)
		}
	}
	if err := m.DownAll(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := m.Version(ctx); v != 0 {
		t.Fatalf("version after down all: %d", v)
	}
	if left := catalog(t, d.Pool); strings.Contains(left, "CREATE TABLE") || strings.Contains(left, "FUNCTION") {
		t.Fatalf("down all left objects behind:\n%s", left)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if again := catalog(t, d.Pool); again != first {
		t.Fatalf("schema differs after up, down, up (- first, + again):\n%s", schemaDiff(first, again))
	}
	// Up on a current database changes nothing and is not an error.
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
}

// Going down from the latest version to any version N leaves the schema
// that going up to N made, exactly (as dumpSchema writes it: columns,
// constraints, indexes, views, function bodies, comments, privileges):
// the test goes up one migration at a time, dumping the schema at each
// version from 0, then down one at a time, comparing at each.
func TestEveryMigrationDownRestoresThePreviousSchema(t *testing.T) {
	t.Parallel()
	d := pgtest.EmptyDB(t)
	ctx := context.Background()
	m := schema.NewMigrator(d.URL)
	// Version 0 as the Migrator leaves it: the schema and the version table.
	if err := m.DownAll(ctx); err != nil {
		t.Fatal(err)
	}
	versions := []uint{0}
	for _, mg := range schema.Migrations() {
		versions = append(versions, mg.Version)
	}
	dumps := map[uint]string{}
	for i, v := range versions {
		if i > 0 {
			if err := m.Goto(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
		dumps[v] = catalog(t, d.Pool)
	}
	if n := len(versions); n < 2 || dumps[versions[n-1]] == dumps[versions[n-2]] {
		t.Fatalf("the last migration changed nothing the dump shows (versions %v)", versions)
	}
	for i := len(versions) - 1; i > 0; i-- {
		if err := m.Down(ctx, 1); err != nil {
			t.Fatal(err)
		}
		v, prev := versions[i], versions[i-1]
		got, want := catalog(t, d.Pool), dumps[prev]
		if got != want {
			t.Fatalf("down from %d does not restore the schema of version %d (- version %d as going up made it, + after the down):\n%s",
				v, prev, prev, schemaDiff(want, got))
		}
	}
}

func TestMigrateCLI(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "migrate")
	d := pgtest.EmptyDB(t)
	env := []string{"DATABASE_URL=" + d.URL}
	latest := itoa(schema.Latest())

	if r := runCLI(t, bin, env, "version"); r.code != 0 || r.stdout != "version 0 of "+latest+"\n" {
		t.Fatalf("version on empty db: %+v", r)
	}
	if r := runCLI(t, bin, nil, "-database", d.URL, "up"); r.code != 0 {
		t.Fatalf("up with -database: %+v", r)
	}
	if r := runCLI(t, bin, env, "down", "1"); r.code != 0 || r.stdout != "version "+itoa(previousVersion())+" of "+latest+"\n" {
		t.Fatalf("down 1: %+v", r)
	}
	// goto 0 reverts every migration, as on SQLite (0 is what version
	// says of an empty schema).
	if r := runCLI(t, bin, env, "goto", "0"); r.code != 0 || r.stdout != "version 0 of "+latest+"\n" {
		t.Fatalf("goto 0: %+v", r)
	}
	if r := runCLI(t, bin, env, "goto", latest); r.code != 0 || r.stdout != "version "+latest+" of "+latest+"\n" {
		t.Fatalf("goto: %+v", r)
	}
	first := schema.Migrations()[0]
	up := runCLI(t, bin, nil, "sql", itoa(first.Version))
	want, _ := schema.SQL(first.Version, true)
	if up.code != 0 || up.stdout != want || !strings.Contains(up.stdout, "CREATE TABLE pgcheckpoint.checkpoints") {
		t.Fatalf("sql %d: exit %d, %d bytes", first.Version, up.code, len(up.stdout))
	}
	if r := runCLI(t, bin, nil, "sql", itoa(first.Version), "down"); r.code != 0 || !strings.Contains(r.stdout, "DROP TABLE") {
		t.Fatalf("sql %d down: %+v", first.Version, r)
	}
	if r := runCLI(t, bin, nil, "list"); r.code != 0 || !strings.HasPrefix(r.stdout, fmt.Sprintf("%06d %s\n", first.Version, first.Name)) {
		t.Fatalf("list: %+v", r)
	}

	// A failed migration leaves the database dirty; up refuses with advice,
	// and force clears it.
	if _, err := d.Pool.Exec(context.Background(), `UPDATE pgcheckpoint.schema_migrations SET dirty = true`); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, bin, env, "up")
	if r.code != 1 || !strings.Contains(r.stderr, "dirty") || !strings.Contains(r.stderr, "migrate force") {
		t.Fatalf("up on dirty db: %+v", r)
	}
	if r := runCLI(t, bin, env, "version"); r.code != 0 || !strings.Contains(r.stdout, "dirty") {
		t.Fatalf("version on dirty db: %+v", r)
	}
	if r := runCLI(t, bin, env, "force", latest); r.code != 0 || r.stdout != "version "+latest+" of "+latest+"\n" {
		t.Fatalf("force: %+v", r)
	}
	// -1 (no version), as the usage offers it, is a version, not a flag.
	if r := runCLI(t, bin, env, "force", "-1"); r.code != 0 || r.stdout != "version 0 of "+latest+"\n" {
		t.Fatalf("force -1: %+v", r)
	}
	if r := runCLI(t, bin, env, "force", latest, "-database", d.URL); r.code != 0 || r.stdout != "version "+latest+" of "+latest+"\n" {
		t.Fatalf("force after -1: %+v", r)
	}
	// Dirty at no version (-1): the first migration's down failed; there
	// is no migration 0 to name.
	if _, err := d.Pool.Exec(context.Background(), `UPDATE pgcheckpoint.schema_migrations SET version = -1, dirty = true`); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, bin, env, "version"); r.code != 0 || !strings.Contains(r.stdout, "a down migration failed part way") || strings.Contains(r.stdout, "migration 0") {
		t.Fatalf("version dirty at -1: %+v", r)
	}
	if r := runCLI(t, bin, env, "force", latest); r.code != 0 {
		t.Fatalf("force after a dirty -1: %+v", r)
	}

	// Bad usage: exit 2 and a message saying what is wrong.
	for _, c := range []struct {
		env  []string
		args []string
		msg  string
	}{
		{nil, nil, "no command"},
		{nil, []string{"up"}, "no database"},
		{env, []string{"sideways"}, "unknown command"},
		{env, []string{"down"}, "down takes N"},
		{env, []string{"down", "zero"}, "not a positive number"},
		{env, []string{"goto", "x"}, "not a number"},
		{nil, []string{"sql", "1", "left"}, "neither up nor down"},
	} {
		r := runCLI(t, bin, c.env, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.msg) || !strings.Contains(r.stderr, "usage:") {
			t.Fatalf("%v: exit %d stderr %q, want exit 2 mentioning %q", c.args, r.code, r.stderr, c.msg)
		}
	}
	if r := runCLI(t, bin, nil, "sql", "999"); r.code != 1 || !strings.Contains(r.stderr, "no such migration version") {
		t.Fatalf("sql 999: %+v", r)
	}
	if r := runCLI(t, bin, env, "goto", "999"); r.code != 1 || !strings.Contains(r.stderr, "no such migration version") {
		t.Fatalf("goto 999: %+v", r)
	}
	// An unreachable database fails promptly with exit 1.
	r = runCLI(t, bin, []string{"DATABASE_URL=postgres://nobody@127.0.0.1:1/none?connect_timeout=5"}, "up")
	if r.code != 1 || !strings.Contains(r.stderr, "connect") {
		t.Fatalf("unreachable database: %+v", r)
	}
}

func TestSchemaSQLUnknownVersion(t *testing.T) {
	if _, err := schema.SQL(0, true); !errors.Is(err, schema.ErrUnknownVersion) {
		t.Fatalf("SQL(0): %v", err)
	}
	if err := schema.NewMigrator("postgres://x@127.0.0.1:1/x").Goto(context.Background(), 42); !errors.Is(err, schema.ErrUnknownVersion) {
		t.Fatalf("Goto(42): %v", err)
	}
}

func itoa(v uint) string { return strconv.FormatUint(uint64(v), 10) }

// previousVersion is the version one migration below the latest (0
// when the baseline is the only one): the numbers need not be
// consecutive.
func previousVersion() uint {
	ms := schema.Migrations()
	if len(ms) < 2 {
		return 0
	}
	return ms[len(ms)-2].Version
}

// DESIGN invariant 5: every table's key starts with thread_id, then the
// tenant (the version table of the migration tool aside).
func TestEveryKeyStartsWithThreadAndTenant(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDB(t)
	rows, err := d.Pool.Query(context.Background(), `
		SELECT c.relname, a.attname || ', ' || a2.attname
		FROM pg_index i
		JOIN pg_class c ON c.oid = i.indrelid
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
		JOIN pg_attribute a2 ON a2.attrelid = i.indrelid AND a2.attnum = i.indkey[1]
		WHERE i.indisprimary AND c.relnamespace = 'pgcheckpoint'::regnamespace
		  AND c.relname <> 'schema_migrations'`)
	if err != nil {
		t.Fatal(err)
	}
	tables := 0
	for rows.Next() {
		var table, first string
		if err := rows.Scan(&table, &first); err != nil {
			t.Fatal(err)
		}
		if first != "thread_id, tenant_id" {
			t.Errorf("the key of %s starts with %s, not thread_id, tenant_id", table, first)
		}
		tables++
	}
	if tables < 3 {
		t.Fatalf("found keys of %d tables, want at least threads, checkpoints, pending_writes", tables)
	}
}

// migrate's errors reach the terminal escaped, as ckpt's do: a URL's
// control characters (here an ESC and a CR in a SQLite path) were written
// as they were.
func TestMigrateCLIEscapesItsErrors(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "migrate")
	r := runCLI(t, bin, nil, "-database", "sqlite:/nope\x1b[2J\r/x.db", "up")
	if r.code != 1 || strings.ContainsAny(r.stderr, "\x1b\r") || !strings.Contains(r.stderr, `\u001b`) {
		t.Fatalf("exit %d, stderr %q: want exit 1 and the control characters escaped", r.code, r.stderr)
	}
}
