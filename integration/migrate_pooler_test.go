package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// withExecMode sets pgx's default_query_exec_mode in a URL; "" leaves pgx's
// default (cache_statement).
func withExecMode(t *testing.T, dbURL, mode string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if mode != "" {
		q := u.Query()
		q.Set("default_query_exec_mode", mode)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// advisoryLocks counts the advisory locks held or awaited in the database
// of d, by any backend.
func advisoryLocks(t *testing.T, d *pgtest.DB) (held, waiting int) {
	t.Helper()
	err := d.Pool.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted)
		FROM pg_locks
		WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&held, &waiting)
	if err != nil {
		t.Fatal(err)
	}
	return held, waiting
}

// holdMigrationLock takes the migration lock in a transaction of its own,
// which the test commits or leaves to be rolled back at its end.
func holdMigrationLock(t *testing.T, d *pgtest.DB) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	holder, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Rollback(ctx) })
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schema.MigrationLockKey); err != nil {
		t.Fatal(err)
	}
	return holder
}

// migrateUpCLI runs `migrate up` on dbURL; ctx kills it.
func migrateUpCLI(ctx context.Context, bin, dbURL string) (stdout string, err error) {
	cmd := exec.CommandContext(ctx, bin, "up")
	cmd.Env = []string{"DATABASE_URL=" + dbURL}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%w: %s", err, errOut.String())
	}
	return out.String(), nil
}

// recordDDL makes the database of d log every DDL command it commits, in
// ddl_audit.log, so that a test can see each migration applied exactly
// once (a rolled-back command leaves no row). Postgres reports drops to
// sql_drop triggers only, not in pg_event_trigger_ddl_commands, so a
// second trigger logs what each DROP removed: a migration may be drops
// alone.
func recordDDL(t *testing.T, d *pgtest.DB) {
	t.Helper()
	if _, err := d.Pool.Exec(context.Background(), `
		CREATE SCHEMA ddl_audit;
		CREATE TABLE ddl_audit.log (command text NOT NULL);
		CREATE FUNCTION ddl_audit.record() RETURNS event_trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO ddl_audit.log
			SELECT command_tag || ' ' || coalesce(object_identity, '') FROM pg_event_trigger_ddl_commands();
		END $$;
		CREATE EVENT TRIGGER ddl_audit ON ddl_command_end EXECUTE FUNCTION ddl_audit.record();
		CREATE FUNCTION ddl_audit.record_drop() RETURNS event_trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO ddl_audit.log
			SELECT 'DROP ' || object_type || ' ' || coalesce(object_identity, '') FROM pg_event_trigger_dropped_objects();
		END $$;
		CREATE EVENT TRIGGER ddl_audit_drop ON sql_drop EXECUTE FUNCTION ddl_audit.record_drop();`); err != nil {
		t.Fatal(err)
	}
}

// takeDDL returns the DDL commands logged since the last call (sorted) and
// clears the log. The internal triggers of a dropped foreign key are named
// by their oids, which differ from one database to the next: the oid is
// left out.
func takeDDL(t *testing.T, d *pgtest.DB) []string {
	t.Helper()
	var log []string
	if err := d.Pool.QueryRow(context.Background(), `
		WITH taken AS (DELETE FROM ddl_audit.log RETURNING command)
		SELECT coalesce(array_agg(c ORDER BY c), '{}')
		FROM (SELECT regexp_replace(command, 'RI_ConstraintTrigger_([ac])_[0-9]+', 'RI_ConstraintTrigger_\1_oid', 'g') AS c FROM taken) n`).Scan(&log); err != nil {
		t.Fatal(err)
	}
	return log
}

// migrationReference is what migrating a fresh database directly, one
// process, produces: the schema, and the DDL of a whole up and of an up
// from the version before the latest.
type migrationReference struct {
	catalog                 string
	upFromEmpty, upFromPrev []string
}

func referenceMigration(t *testing.T) migrationReference {
	t.Helper()
	ctx := context.Background()
	d := pgtest.EmptyDB(t)
	recordDDL(t, d)
	m := schema.NewMigrator(d.URL)
	var ref migrationReference
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	ref.catalog, ref.upFromEmpty = catalog(t, d.Pool), takeDDL(t, d)
	if err := m.Down(ctx, 1); err != nil {
		t.Fatal(err)
	}
	takeDDL(t, d)
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	ref.upFromPrev = takeDDL(t, d)
	if len(ref.upFromEmpty) < 20 || len(ref.upFromPrev) == 0 || len(ref.upFromPrev) >= len(ref.upFromEmpty) {
		t.Fatalf("the DDL log is not recording migrations: %d commands for a whole up, %d for the last migration", len(ref.upFromEmpty), len(ref.upFromPrev))
	}
	return ref
}

// Through PgBouncer in transaction mode, with pgx's exec mode and with its
// default: eight `migrate up` processes, four schema.Migrate and four
// schema.MigratePool calls at once, on a fresh database and again after a
// down 1. Every one succeeds, promptly; the DDL committed is exactly that
// of one direct migration (each migration applied once); the schema is that
// of a database migrated directly; one version row, at the latest version,
// not dirty; no advisory lock left held or awaited. (The application's own
// traffic through PgBouncer is TestEngineBehindPgBouncerInTransactionMode.)
func TestMigrateBehindPgBouncerInTransactionMode(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "migrate")
	ref := referenceMigration(t)
	for _, mode := range []string{"exec", ""} {
		name := mode
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			d := pgtest.EmptyDB(t)
			recordDDL(t, d)
			via := withExecMode(t, startPgBouncer(t, d.URL), mode)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			pool := poolOf(t, via, 4)

			migrateAtOnce(ctx, t, d, bin, via, pool)
			migratedOnce(t, d, ref.catalog, ref.upFromEmpty)

			if err := schema.NewMigrator(via).Down(ctx, 1); err != nil {
				t.Fatal(err)
			}
			takeDDL(t, d)
			migrateAtOnce(ctx, t, d, bin, via, pool)
			migratedOnce(t, d, ref.catalog, ref.upFromPrev)
		})
	}
}

// migrateAtOnce runs eight `migrate up` processes, four schema.Migrate and
// four schema.MigratePool calls at once through via, and fails the test
// unless every one succeeds within 90 s.
func migrateAtOnce(ctx context.Context, t *testing.T, d *pgtest.DB, bin, via string, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const n = 8
	var cliOut [n]string
	var cliErr, libErr [n]error
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { cliOut[i], cliErr[i] = migrateUpCLI(ctx, bin, via) })
			if i%2 == 0 {
				wg.Go(func() { libErr[i] = schema.Migrate(ctx, via) })
			} else {
				wg.Go(func() { libErr[i] = schema.MigratePool(ctx, pool) })
			}
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		held, waiting := advisoryLocks(t, d)
		t.Fatalf("%d migrations through PgBouncer still running after 90 s (advisory locks: %d held, %d awaited)", 2*n, held, waiting)
	}
	t.Logf("%d concurrent migrations through PgBouncer: %v", 2*n, time.Since(start).Round(time.Millisecond))
	latest := "version " + itoa(schema.Latest()) + " of " + itoa(schema.Latest()) + "\n"
	for i := range n {
		if cliErr[i] != nil || cliOut[i] != latest {
			t.Errorf("migrate up #%d: %q, %v", i, cliOut[i], cliErr[i])
		}
		if libErr[i] != nil {
			t.Errorf("schema.Migrate/MigratePool #%d: %v", i, libErr[i])
		}
	}
}

// migratedOnce checks, directly on the server, that the database of d is
// at the latest version, not dirty, with one version row, the schema
// wantCatalog, no advisory lock held or awaited, and that the DDL committed
// since the last takeDDL is wantDDL: each migration applied once.
func migratedOnce(t *testing.T, d *pgtest.DB, wantCatalog string, wantDDL []string) {
	t.Helper()
	var rows int
	var version int64
	var dirty bool
	if err := d.Pool.QueryRow(context.Background(), `SELECT count(*), coalesce(max(version), -1), coalesce(bool_or(dirty), false)
		FROM pgcheckpoint.schema_migrations`).Scan(&rows, &version, &dirty); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || version != int64(schema.Latest()) || dirty {
		t.Errorf("schema_migrations: %d rows, version %d, dirty %v; want 1 row, version %d, not dirty", rows, version, dirty, schema.Latest())
	}
	if got := takeDDL(t, d); !slices.Equal(got, wantDDL) {
		var diff []string
		for _, c := range got {
			if !slices.Contains(wantDDL, c) {
				diff = append(diff, "+ "+c)
			}
		}
		for _, c := range wantDDL {
			if !slices.Contains(got, c) {
				diff = append(diff, "- "+c)
			}
		}
		t.Errorf("DDL committed through PgBouncer differs from one direct migration's (%d commands, want %d):\n%s",
			len(got), len(wantDDL), strings.Join(diff, "\n"))
	}
	if got := catalog(t, d.Pool); got != wantCatalog {
		t.Errorf("the schema differs from one migrated directly (- directly, + through PgBouncer):\n%s", schemaDiff(wantCatalog, got))
	}
	if held, waiting := advisoryLocks(t, d); held != 0 || waiting != 0 {
		t.Errorf("advisory locks left on the server: %d held, %d awaited", held, waiting)
	}
}

// SIGTERM ends a `migrate up` that waits, through PgBouncer, for another
// migrator's lock: the process exits within a few seconds, its server
// backend stops waiting (the CLI cancels the query, it does not only hang
// up), and nothing was written. schema.Migrate, in the same wait, ends
// with its context and returns the context's error.
func TestMigrateCLIEndsOnSIGTERMBehindPgBouncer(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "migrate")
	d := pgtest.EmptyDB(t)
	via := withExecMode(t, startPgBouncer(t, d.URL), "exec")
	ctx := context.Background()

	holder := holdMigrationLock(t, d)

	cmd := exec.Command(bin, "up")
	cmd.Env = []string{"DATABASE_URL=" + via}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()
	waitFor(t, "the CLI to wait for the migration lock", func() bool {
		_, waiting := advisoryLocks(t, d)
		return waiting == 1
	})

	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("after SIGTERM: %v, want exit status 1\n%s", err, out.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("migrate up still running 5 s after SIGTERM\n%s", out.String())
	}
	t.Logf("migrate up exited %v after SIGTERM: %s", time.Since(sent).Round(time.Millisecond), bytes.TrimSpace(out.Bytes()))
	waitFor(t, "the CLI's backend to stop waiting for the lock", func() bool {
		_, waiting := advisoryLocks(t, d)
		return waiting == 0
	})
	if elapsed := time.Since(sent); elapsed > 5*time.Second {
		t.Fatalf("the CLI's backend waited for the lock %v after SIGTERM", elapsed)
	} else {
		t.Logf("its backend stopped waiting %v after SIGTERM", elapsed.Round(time.Millisecond))
	}

	// The same wait in schema.Migrate ends with its context, and says so.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := schema.Migrate(short, via); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("schema.Migrate waiting for the lock past its deadline: %v, want context.DeadlineExceeded", err)
	}
	waitFor(t, "schema.Migrate's backend to stop waiting for the lock", func() bool {
		_, waiting := advisoryLocks(t, d)
		return waiting == 0
	})

	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if schemaExists(t, d.Pool) {
		t.Fatal("a migration ended by SIGTERM left the pgcheckpoint schema behind")
	}
	if held, waiting := advisoryLocks(t, d); held != 0 || waiting != 0 {
		t.Fatalf("advisory locks left on the server: %d held, %d awaited", held, waiting)
	}
}

// A migration that fails part way changes nothing: the database stays at
// the version it was, not dirty, without the failed migration's first
// statements; once the cause is gone, up completes. Down with fewer
// migrations applied than asked reverts nothing.
func TestFailedMigrationChangesNothing(t *testing.T) {
	t.Parallel()
	d := pgtest.EmptyDB(t)
	ctx := context.Background()
	m := schema.NewMigrator(d.URL)
	if err := m.DownAll(ctx); err != nil { // the schema and the version table
		t.Fatal(err)
	}
	// In the way of the first migration, after its first tables (it
	// makes the tables in name order).
	if _, err := d.Pool.Exec(ctx, `CREATE TABLE pgcheckpoint.threads (in_the_way int)`); err != nil {
		t.Fatal(err)
	}
	before := catalog(t, d.Pool)
	first := schema.Migrations()[0].Version
	err := m.Up(ctx)
	if err == nil || errors.Is(err, schema.ErrDirty) || !strings.Contains(err.Error(), fmt.Sprintf("migration %06d up failed", first)) || !strings.Contains(err.Error(), "still at version 0") {
		t.Fatalf("up over an object in the way: %v", err)
	}
	if v, dirty, err := m.Version(ctx); v != 0 || dirty || err != nil {
		t.Fatalf("after the failed up: version %d, dirty %v, %v; want 0, clean", v, dirty, err)
	}
	if after := catalog(t, d.Pool); after != before {
		t.Fatalf("the failed up changed the schema (- before, + after):\n%s", schemaDiff(before, after))
	}
	if err := m.Check(ctx); !errors.Is(err, schema.ErrPending) {
		t.Fatalf("check after the failed up: %v, want ErrPending", err)
	}
	if _, err := d.Pool.Exec(ctx, `DROP TABLE pgcheckpoint.threads`); err != nil {
		t.Fatal(err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Down(ctx, int(schema.Latest())+1); err == nil || !strings.Contains(err.Error(), "nothing reverted") {
		t.Fatalf("down more than applied: %v", err)
	}
	if err := m.Check(ctx); err != nil {
		t.Fatalf("after a refused down: %v", err)
	}
}

// MigratePool over a pool whose pgx cancels queries on the server (a
// cancel request, not pgx's default): a migration waiting for the lock
// past its deadline returns the context's error, not only the server's
// "canceling statement", and stops waiting on the server.
func TestMigratePoolEndsWithItsContext(t *testing.T) {
	t.Parallel()
	d := pgtest.EmptyDB(t)
	ctx := context.Background()
	holdMigrationLock(t, d)
	cfg, err := pgxpool.ParseConfig(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 5 * time.Second}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// The pool connects before the deadline starts: on a loaded machine a
	// first connection can take longer than the wait this test is about.
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err = schema.MigratePool(short, pool)
	var pgErr *pgconn.PgError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("MigratePool past its deadline: %v, want context.DeadlineExceeded and the server's 57014", err)
	}
	if _, waiting := advisoryLocks(t, d); waiting != 0 {
		t.Fatalf("%d backends still wait for the migration lock", waiting)
	}
}

// A database whose lock_timeout is short (a DBA's bound for the
// application's locks): a migrator waits for another's migration lock
// past it, as it does without one, and the migrations' own locks are held
// to it again (a down that meets a reader of a table it drops fails with
// the lock timeout instead of waiting). Every migrator but the first failed
// with 55P03 at once.
func TestMigrateWaitsForTheLockPastLockTimeout(t *testing.T) {
	t.Parallel()
	d := pgtest.EmptyDB(t)
	ctx := context.Background()
	if _, err := d.Pool.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %q SET lock_timeout = '50ms'`, d.Name)); err != nil {
		t.Fatal(err)
	}
	holder := holdMigrationLock(t, d)
	done := make(chan error, 1)
	go func() { done <- schema.Migrate(ctx, d.URL) }()
	waitFor(t, "the migrator to wait for the lock", func() bool {
		_, waiting := advisoryLocks(t, d)
		return waiting == 1
	})
	time.Sleep(200 * time.Millisecond) // four times lock_timeout
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("migrate up after waiting past lock_timeout: %v", err)
	}

	reader, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback(ctx)
	if _, err := reader.Exec(ctx, `LOCK TABLE pgcheckpoint.checkpoints IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var pgErr *pgconn.PgError
	if err := schema.NewMigrator(d.URL).Down(short, 1); !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("a down that meets a reader of its table: %v, want the lock timeout (55P03)", err)
	}
}
