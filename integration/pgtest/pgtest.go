// Package pgtest gives each test its own freshly migrated Postgres database,
// quickly: the migrations run once per server into a template database, and
// every test gets a clone of it (CREATE DATABASE ... TEMPLATE), dropped when
// the test ends, or emptied and handed to a later test when its test
// changed nothing but rows (see recycler).
//
// The server is found as:
//   - PGCHECKPOINT_TEST_DATABASE_URL, if set: a URL to any database of a
//     server where the user may create databases; or else
//   - PGCHECKPOINT_TEST_IMAGE, if set: a throwaway container started with
//     testcontainers-go from that image, one per test binary; or else
//   - a container from DefaultImage, if Docker can run it; or else
//   - a throwaway cluster from the Postgres server binaries installed on the
//     machine (internal/localpg), one per test binary.
//
// If none works, the tests fail, never skip: the first with a message
// naming the three ways to fix it, the others with a one-line reference to
// it. A package's tests use it like this:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		d := pgtest.NewDB(t)
//		eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
//		...
//	}
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	stdlog "log"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/localpg"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// Environment variables read by the harness.
const (
	EnvDatabaseURL = "PGCHECKPOINT_TEST_DATABASE_URL"
	EnvImage       = "PGCHECKPOINT_TEST_IMAGE"
	// EnvHeldRole, set to 1, makes every session of a migrated test
	// database's pool SET ROLE to a role that row-level security holds
	// (HeldRole: no superuser, no BYPASSRLS, all privileges on the
	// database's schemas), in the default tenant: the application's path,
	// where the tenant's qualifier reaches the plans. For benchmarks; the
	// tests run as the superuser.
	EnvHeldRole = "PGCHECKPOINT_TEST_HELD_ROLE"
	// HeldRole is the role EnvHeldRole sets.
	HeldRole = "pgct_held"
)

// DefaultImage is the container image used when PGCHECKPOINT_TEST_IMAGE is
// not set.
const DefaultImage = "postgres:15"

// Bounds on every wait, so a broken setup fails instead of hanging.
const (
	connectTimeout   = 15 * time.Second
	containerTimeout = 90 * time.Second
	templateTimeout  = 2 * time.Minute
)

// templateLockKey serialises template builds across test binaries.
const templateLockKey int64 = 0x70_67_63_6b_74_6d_70_6c // "pgcktmpl"

// templateUsersKey is held shared by every test binary using a server given
// by URL; the last one to finish takes it exclusively and drops the
// template ("pgcktusr").
const templateUsersKey int64 = 0x70_67_63_6b_74_75_73_72

// DB is one test's database.
type DB struct {
	// URL connects to the database.
	URL string
	// Pool is connected to it and closed when the test ends.
	Pool *pgxpool.Pool
	// Name is the database's name.
	Name string

	fresh fresh // when it was handed out (see recycler)
	held  bool  // its pool's sessions SET ROLE to HeldRole
}

type server struct {
	adminURL string // to a maintenance database on the server
	admin    *pgxpool.Pool
	template string
	stop     func(context.Context) error // stops a container we started; nil otherwise
	how      string                      // how the server was found, for messages
	// user holds, on a server given by URL, a shared lock on
	// templateUsersKey for as long as this test binary may use the
	// template (see leaveNothing).
	user *pgxpool.Conn
	// recycled keeps the databases of ended tests for the next ones.
	recycled recycler
}

var (
	once      sync.Once
	shared    *server
	sharedErr error
	explained atomic.Bool // the no-server failure was explained in full
)

// fixIt says how to give the tests a server.
const fixIt = "Give the tests a Postgres server one of three ways: set " + EnvDatabaseURL +
	" to a Postgres URL whose user may create databases (e.g. postgres://postgres@127.0.0.1:5432/postgres); " +
	"or install the PostgreSQL server (e.g. apt-get install postgresql, brew install postgresql@15), " +
	"whose binaries the tests then run themselves (found on PATH, through pg_config, or in the usual places; " +
	"as root they run as the OS user postgres); or make Docker able to run the image " + DefaultImage +
	" (" + EnvImage + " names another; integration/pgimage/build builds one with no registry; " +
	"where no image can be pulled set TESTCONTAINERS_RYUK_DISABLED=true, and TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 " +
	"when the tests themselves run in a container)."

// oneLine is the first line of err's text.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// Main runs the tests and then stops the container the harness started, if
// any. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	finish()
	return code
}

// finish leaves nothing behind on the server: it drops the template when
// no other test binary uses it and stops the container or cluster that the
// harness started.
func finish() {
	if shared != nil {
		if shared.stop == nil { // a server that outlives the tests
			if err := shared.dropFree(); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			}
		}
		if shared.user != nil {
			if err := shared.leaveNothing(); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: dropping the template database: %v\n", err)
			}
		}
		shared.admin.Close()
		if shared.stop != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := shared.stop(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: stopping the test container: %v\n", err)
			}
		}
	}
}

// NewDB returns a new database, migrated to the latest version, that only
// this test uses, whose sessions start in tenant engine.DefaultTenant (see
// DB.NoTenant). It is dropped when the test ends, or, if the test passed
// and changed nothing but rows, emptied and given to a later test: either
// way the next test meets a fresh clone's state.
func NewDB(tb testing.TB) *DB {
	tb.Helper()
	return newDB(tb, true)
}

// EmptyDB returns a new database with no migrations applied, dropped when the
// test ends. Tests of the migrations use it.
func EmptyDB(tb testing.TB) *DB {
	tb.Helper()
	return newDB(tb, false)
}

func newDB(tb testing.TB, migrated bool) *DB {
	tb.Helper()
	srv, err := getServer()
	if err != nil {
		noServer(tb, err)
	}
	d, err := srv.createDB(migrated)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if migrated && !tb.Failed() && srv.recycle(d) {
			return
		}
		if err := srv.dropDB(d); err != nil {
			tb.Error(err)
		}
	})
	return d
}

// MainWithDatabase is Main for a package whose examples use a database:
// examples take no testing.T, so they read its URL from the environment
// variable env, set here to a new migrated database that the package's
// tests and examples share, dropped at the end. Each example uses threads
// of its own. With no server, it explains why once and fails.
func MainWithDatabase(m *testing.M, env string) int {
	srv, err := getServer()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: no Postgres server for the examples: %v\n", err)
		return 1
	}
	d, err := srv.createDB(true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		finish()
		return 1
	}
	os.Setenv(env, d.URL)
	code := m.Run()
	if err := srv.dropDB(d); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	finish()
	return code
}

// createDB creates a database, a clone of the template when migrated
// (or takes one that a test has given back, see recycler), and connects to
// it.
func (srv *server) createDB(migrated bool) (*DB, error) {
	if migrated {
		if d := srv.recycled.takeFree(); d != nil {
			reused, err := srv.reuse(d)
			if err == nil {
				return reused, nil
			}
			// Not reusable after all: dropped, or the failure is the test's,
			// not a database left on the server unseen.
			if derr := srv.dropDB(d); derr != nil {
				return nil, fmt.Errorf("pgtest: drop database %s, which could not be reused (%v): %w", d.Name, err, derr)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	name := "pgct_" + randomHex(8)
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if migrated {
		stmt += " TEMPLATE " + pgx.Identifier{srv.template}.Sanitize()
	}
	if _, err := srv.admin.Exec(ctx, stmt); err != nil {
		return nil, fmt.Errorf("pgtest: create database %s on %s: %w", name, srv.how, err)
	}
	// Every session on the database, whatever its role and client (psql,
	// the CLIs, a pooler), is in the tenant of an Engine that names none,
	// as in an installation without tenants whose DBA set it so: the SQL a
	// test runs reads and writes what its Engine does. (The superuser the
	// tests connect as is not held by row-level security, but its new rows
	// take the session's tenant.) Tests of tenants RESET it (NoTenant).
	if _, err := srv.admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" SET pgcheckpoint.tenant = "+
		"'"+engine.DefaultTenant+"'"); err != nil {
		_ = srv.dropDB(&DB{Name: name})
		return nil, fmt.Errorf("pgtest: set the tenant of database %s: %w", name, err)
	}
	held := migrated && os.Getenv(EnvHeldRole) == "1"
	if held {
		if err := holdRole(ctx, srv, name); err != nil {
			_ = srv.dropDB(&DB{Name: name})
			return nil, err
		}
	}
	url, err := databaseURL(srv.adminURL, name)
	if err == nil {
		var pool *pgxpool.Pool
		if pool, err = connectPool(ctx, url, held); err == nil {
			d := &DB{URL: url, Pool: pool, Name: name, held: held}
			if !migrated {
				return d, nil
			}
			srv.recycled.learn(ctx, url)
			if d.fresh, err = handOut(ctx, pool); err == nil {
				return d, nil
			}
			pool.Close()
		}
		err = fmt.Errorf("pgtest: connect to %s on %s: %w", name, srv.how, err)
	}
	_ = srv.dropDB(&DB{Name: name})
	return nil, err
}

// holdRole makes HeldRole (once per server) and gives it the database's
// schemas (see EnvHeldRole).
func holdRole(ctx context.Context, srv *server, name string) error {
	url, err := databaseURL(srv.adminURL, name)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return grantHeldRole(ctx, conn)
}

// grantHeldRole makes HeldRole if need be and gives it the schemas of the
// database db is connected to.
func grantHeldRole(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}) error {
	if _, err := db.Exec(ctx, `DO $$BEGIN
		CREATE ROLE `+HeldRole+` NOLOGIN NOSUPERUSER NOBYPASSRLS;
	EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END$$`); err != nil {
		return fmt.Errorf("pgtest: create role %s: %w", HeldRole, err)
	}
	_, err := db.Exec(ctx, `GRANT ALL ON SCHEMA pgcheckpoint, public TO `+HeldRole+`;
		GRANT ALL ON ALL TABLES IN SCHEMA pgcheckpoint TO `+HeldRole+`;
		GRANT EXECUTE ON ALL ROUTINES IN SCHEMA pgcheckpoint TO `+HeldRole, pgx.QueryExecModeSimpleProtocol)
	return err
}

// HoldRole gives HeldRole, a role that row-level security holds, the
// database's schemas: a test that SETs ROLE to it runs the statements as
// the application would, with the tenant's qualifier in their plans.
func (d *DB) HoldRole(tb testing.TB) {
	tb.Helper()
	if err := grantHeldRole(context.Background(), d.Pool); err != nil {
		tb.Fatal(err)
	}
}

// AsOwner runs sql (statements without arguments) on a connection of its
// own that keeps the server's role, not HeldRole: VACUUM and ANALYZE of
// the pgcheckpoint tables, which a role that does not own them is only
// warned about, so that a benchmark run with EnvHeldRole reads tables with
// statistics, as its bare baseline's are.
func (d *DB) AsOwner(tb testing.TB, sql string) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// NoTenant takes away the tenant every session on d starts in (see
// NewDB): its new sessions have none, as in an installation with tenants.
// The pool's open connections keep it; tests of tenants connect anew.
func (d *DB) NoTenant(tb testing.TB) {
	tb.Helper()
	if _, err := d.Pool.Exec(context.Background(), "ALTER DATABASE "+pgx.Identifier{d.Name}.Sanitize()+" RESET pgcheckpoint.tenant"); err != nil {
		tb.Fatal(err)
	}
}

// dropDB closes d's pool and drops it, whoever is still connected.
func (srv *server) dropDB(d *DB) error {
	if d.Pool != nil {
		d.Pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	if _, err := srv.admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{d.Name}.Sanitize())); err != nil {
		return fmt.Errorf("pgtest: drop database %s: %w", d.Name, err)
	}
	return nil
}

func getServer() (*server, error) {
	once.Do(func() {
		shared, sharedErr = startServer(context.Background(), os.Getenv(EnvDatabaseURL), os.Getenv(EnvImage))
	})
	return shared, sharedErr
}

// noServer fails a test that found no server: with the whole explanation
// the first time in the test binary, with a one-line reference after.
func noServer(tb testing.TB, err error) {
	tb.Helper()
	if explained.CompareAndSwap(false, true) {
		tb.Fatalf("pgtest: no Postgres server for the tests: %v", err)
	}
	tb.Fatal("pgtest: no Postgres server for the tests (the first failure above says why and how to fix it)")
}

// startServer connects to the server at url; or, when url is empty,
// starts a container from image; or, when image is empty too, a container
// from DefaultImage if Docker can run it, else a throwaway cluster from the
// Postgres server binaries installed here (internal/localpg). Then it makes
// sure the template database exists.
func startServer(ctx context.Context, url, image string) (*server, error) {
	srv := &server{}
	switch {
	case url != "":
		srv.adminURL, srv.how = url, "the server in "+EnvDatabaseURL
	case image != "":
		cctx, cancel := context.WithTimeout(ctx, containerTimeout)
		u, stop, err := StartContainer(cctx, image)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s is not set, and starting a Postgres container from %s (%s) failed: %w\n%s",
				EnvDatabaseURL, EnvImage, image, err, fixIt)
		}
		srv.adminURL, srv.stop, srv.how = u, stop, "the container from "+image
	default:
		// Quietly: the container is one of two ways, and where it fails
		// (no Docker, no image) the next one is tried.
		tclog.SetDefault(stdlog.New(io.Discard, "", 0))
		cctx, cancel := context.WithTimeout(ctx, containerTimeout)
		u, stop, cerr := StartContainer(cctx, DefaultImage)
		cancel()
		if cerr == nil {
			srv.adminURL, srv.stop, srv.how = u, stop, "the container from "+DefaultImage
			break
		}
		cluster, lerr := localpg.Start(ctx, localpg.Options{Settings: map[string]string{"max_connections": "300"}})
		if lerr != nil {
			return nil, fmt.Errorf("%s is not set; a container from %s did not start (%v); and no local Postgres server: %w\n%s",
				EnvDatabaseURL, DefaultImage, oneLine(cerr), lerr, fixIt)
		}
		srv.adminURL, srv.how = cluster.URL(), "the throwaway Postgres from "+cluster.BinDir()
		srv.stop = cluster.Stop
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	admin, err := connectPool(cctx, srv.adminURL, false)
	if err != nil {
		if srv.stop != nil {
			_ = srv.stop(ctx)
		}
		return nil, fmt.Errorf("connect to %s: %w (check the URL, that the server runs, and that the user may log in)", srv.how, err)
	}
	srv.admin = admin
	if srv.stop == nil {
		// A server that outlives the tests: note this binary as a user of
		// the template, before the template is looked for.
		if srv.user, err = admin.Acquire(cctx); err == nil {
			_, err = srv.user.Exec(cctx, "SELECT pg_advisory_lock_shared($1)", templateUsersKey)
		}
		if err != nil {
			admin.Close()
			return nil, fmt.Errorf("connect to %s: %w", srv.how, err)
		}
	}
	tctx, tcancel := context.WithTimeout(ctx, templateTimeout)
	defer tcancel()
	if srv.template, err = ensureTemplate(tctx, admin, srv.adminURL); err != nil {
		if srv.user != nil {
			srv.user.Release() // else Close waits for it forever
		}
		admin.Close()
		if srv.stop != nil {
			_ = srv.stop(ctx)
		}
		return nil, fmt.Errorf("build the template database on %s: %w", srv.how, err)
	}
	return srv, nil
}

// leaveNothing drops the template when no other test binary uses it: the
// tests leave no database behind on a server they were given. A binary
// that starts meanwhile takes the shared lock before it looks for the
// template, so it either stops the drop or builds the template anew.
func (srv *server) leaveNothing() error {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	defer srv.user.Release()
	if _, err := srv.user.Exec(ctx, "SELECT pg_advisory_unlock_shared($1)", templateUsersKey); err != nil {
		return err
	}
	var last bool
	if err := srv.user.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", templateUsersKey).Scan(&last); err != nil || !last {
		return err
	}
	defer srv.user.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", templateUsersKey)
	_, err := srv.user.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{srv.template}.Sanitize()))
	return err
}

// ensureTemplate makes, once per server and migration set, a database with
// every migration applied. The name carries a hash of the migration files,
// so a changed migration (or templateLocale) gets a new template.
func ensureTemplate(ctx context.Context, admin *pgxpool.Pool, adminURL string) (string, error) {
	name := "pgct_template_" + migrationsHash()
	conn, err := admin.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", templateLockKey)

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_building"
	if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{building}.Sanitize())); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()+templateLocale); err != nil {
		return "", err
	}
	url, err := databaseURL(adminURL, building)
	if err != nil {
		return "", err
	}
	if err := schema.Migrate(ctx, url); err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	// Renaming waits for the migration's connections to go; the rename makes
	// the finished template visible to other test binaries in one step.
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s",
		pgx.Identifier{building}.Sanitize(), pgx.Identifier{name}.Sanitize())); err != nil {
		return "", err
	}
	return name, nil
}

// templateLocale is how the template database sorts text: a language's
// order (ICU's en-US: case and accents second, punctuation first), as the
// databases of most installations do, not the byte order of the C locale
// that initdb gives a test cluster. What must not depend on it (the order
// of thread ids) is tested under it.
const templateLocale = " TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C' LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"

func migrationsHash() string {
	h := sha256.New()
	h.Write([]byte(templateLocale))
	entries, _ := fs.ReadDir(schema.FS, ".")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(schema.FS, n)
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func connectPool(ctx context.Context, url string, held bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if held {
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SET ROLE "+HeldRole)
			return err
		}
	}
	cfg.ConnConfig.ConnectTimeout = connectTimeout
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// databaseURL returns base (a URL or a key=value string) naming database
// name instead of its own.
func databaseURL(base, name string) (string, error) {
	if _, err := pgx.ParseConfig(base); err != nil {
		return "", fmt.Errorf("pgtest: parse the server URL: %w", err)
	}
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			return "", fmt.Errorf("pgtest: parse the server URL: %w", err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return base + " dbname=" + name, nil // later keywords win
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
