package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

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

// Eight `migrate up` processes, four schema.Migrate and four
// schema.MigratePool calls at once on a fresh database, all through
// PgBouncer in transaction mode, with pgx's exec mode and with its default:
// every one succeeds, promptly; the schema is migrated exactly once
// (one version row, at the latest version, not dirty, the same objects as a
// database migrated directly); no advisory lock is left behind. Then down 1
// and up again through PgBouncer. (The application's own traffic through
// PgBouncer is TestEngineBehindPgBouncerInTransactionMode.)
func TestMigrateBehindPgBouncerInTransactionMode(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "migrate")
	reference := catalog(t, pgtest.NewDB(t).Pool)
	latest := "version " + itoa(schema.Latest()) + " of " + itoa(schema.Latest()) + "\n"
	for _, mode := range []string{"exec", ""} {
		name := mode
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			d := pgtest.EmptyDB(t)
			via := withExecMode(t, startPgBouncer(t, d.URL), mode)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg, err := pgxpool.ParseConfig(via)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 4
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()

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
				cancel()
				held, waiting := advisoryLocks(t, d)
				t.Fatalf("16 migrations through PgBouncer still running after 90 s (advisory locks: %d held, %d awaited)", held, waiting)
			}
			t.Logf("16 concurrent migrations through PgBouncer (pgx mode %s): %v", name, time.Since(start).Round(time.Millisecond))
			for i := range n {
				if cliErr[i] != nil || cliOut[i] != latest {
					t.Errorf("migrate up #%d: %q, %v", i, cliOut[i], cliErr[i])
				}
				if libErr[i] != nil {
					t.Errorf("schema.Migrate/MigratePool #%d: %v", i, libErr[i])
				}
			}
			migratedOnce(t, d, reference, schema.Latest())

			// Down and up again through PgBouncer.
			m := schema.NewMigrator(via)
			if err := m.Down(ctx, 1); err != nil {
				t.Fatal(err)
			}
			migratedOnce(t, d, "", schema.Latest()-1)
			if err := schema.MigratePool(ctx, pool); err != nil {
				t.Fatal(err)
			}
			migratedOnce(t, d, reference, schema.Latest())
		})
	}
}

// migratedOnce checks, directly on the server, that d is at version want,
// not dirty, with one version row, no advisory lock held or awaited, and
// (unless reference is "") the objects of a database migrated directly.
func migratedOnce(t *testing.T, d *pgtest.DB, reference string, want uint) {
	t.Helper()
	var rows int
	var version int64
	var dirty bool
	if err := d.Pool.QueryRow(context.Background(), `SELECT count(*), coalesce(max(version), -1), coalesce(bool_or(dirty), false)
		FROM pgcheckpoint.schema_migrations`).Scan(&rows, &version, &dirty); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || version != int64(want) || dirty {
		t.Errorf("schema_migrations: %d rows, version %d, dirty %v; want 1 row, version %d, not dirty", rows, version, dirty, want)
	}
	if reference != "" {
		if got := catalog(t, d.Pool); got != reference {
			t.Errorf("the schema differs from one migrated directly:\n--- through PgBouncer\n%s\n--- directly\n%s", got, reference)
		}
	}
	if held, waiting := advisoryLocks(t, d); held != 0 || waiting != 0 {
		t.Errorf("advisory locks left on the server: %d held, %d awaited", held, waiting)
	}
}

// SIGTERM ends a `migrate up` that waits, through PgBouncer, for another
// migrator's lock: the process exits within a few seconds, its server
// backend stops waiting (the CLI cancels the query, it does not only hang
// up), and nothing was written.
func TestMigrateCLIEndsOnSIGTERMBehindPgBouncer(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "migrate")
	d := pgtest.EmptyDB(t)
	via := withExecMode(t, startPgBouncer(t, d.URL), "exec")
	ctx := context.Background()

	holder, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schema.MigrationLockKey); err != nil {
		t.Fatal(err)
	}

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
	}
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
