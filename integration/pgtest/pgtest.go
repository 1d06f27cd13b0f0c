// Package pgtest gives each test its own freshly migrated Postgres database,
// quickly: the migrations run once per server into a template database, and
// every test gets a clone of it (CREATE DATABASE ... TEMPLATE), dropped when
// the test ends.
//
// The server is found as:
//   - PGCHECKPOINT_TEST_DATABASE_URL, if set: a URL to any database of a
//     server where the user may create databases; or else
//   - a throwaway container started with testcontainers-go, from the image in
//     PGCHECKPOINT_TEST_IMAGE (default DefaultImage), one per test binary.
//
// If neither works, the test fails with a message naming both ways; it is
// never skipped. A package's tests use it like this:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		d := pgtest.NewDB(t)
//		eng := engine.New(d.Pool, engine.Config{})
//		...
//	}
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// Environment variables read by the harness.
const (
	EnvDatabaseURL = "PGCHECKPOINT_TEST_DATABASE_URL"
	EnvImage       = "PGCHECKPOINT_TEST_IMAGE"
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

// DB is one test's database.
type DB struct {
	// URL connects to the database.
	URL string
	// Pool is connected to it and closed when the test ends.
	Pool *pgxpool.Pool
	// Name is the database's name.
	Name string
}

type server struct {
	adminURL string // to a maintenance database on the server
	admin    *pgxpool.Pool
	template string
	stop     func(context.Context) error // stops a container we started; nil otherwise
	how      string                      // how the server was found, for messages
}

var (
	once      sync.Once
	shared    *server
	sharedErr error
)

// Main runs the tests and then stops the container the harness started, if
// any. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.admin.Close()
		if shared.stop != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := shared.stop(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: stopping the test container: %v\n", err)
			}
		}
	}
	return code
}

// NewDB returns a new database, migrated to the latest version, that only
// this test uses. It is dropped when the test ends.
func NewDB(tb testing.TB) *DB {
	tb.Helper()
	srv, err := getServer()
	if err != nil {
		tb.Fatalf("pgtest: no Postgres server for the tests: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()

	name := "pgct_" + randomHex(8)
	if _, err := srv.admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{srv.template}.Sanitize())); err != nil {
		tb.Fatalf("pgtest: clone template %s on %s: %v", srv.template, srv.how, err)
	}
	url, err := databaseURL(srv.adminURL, name)
	if err != nil {
		tb.Fatal(err)
	}
	pool, err := connectPool(ctx, url)
	if err != nil {
		tb.Fatalf("pgtest: connect to %s on %s: %v", name, srv.how, err)
	}
	tb.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		if _, err := srv.admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{name}.Sanitize())); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return &DB{URL: url, Pool: pool, Name: name}
}

// EmptyDB returns a new database with no migrations applied, dropped when the
// test ends. Tests of the migrations use it.
func EmptyDB(tb testing.TB) *DB {
	tb.Helper()
	srv, err := getServer()
	if err != nil {
		tb.Fatalf("pgtest: no Postgres server for the tests: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	name := "pgct_" + randomHex(8)
	if _, err := srv.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database on %s: %v", srv.how, err)
	}
	url, err := databaseURL(srv.adminURL, name)
	if err != nil {
		tb.Fatal(err)
	}
	pool, err := connectPool(ctx, url)
	if err != nil {
		tb.Fatalf("pgtest: connect to %s: %v", name, err)
	}
	tb.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		if _, err := srv.admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{name}.Sanitize())); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return &DB{URL: url, Pool: pool, Name: name}
}

func getServer() (*server, error) {
	once.Do(func() {
		image := os.Getenv(EnvImage)
		if image == "" {
			image = DefaultImage
		}
		shared, sharedErr = startServer(context.Background(), os.Getenv(EnvDatabaseURL), image)
	})
	return shared, sharedErr
}

// startServer connects to the server at url, or, when url is empty, starts a
// container from image; then it makes sure the template database exists.
func startServer(ctx context.Context, url, image string) (*server, error) {
	srv := &server{}
	if url != "" {
		srv.adminURL, srv.how = url, "the server in "+EnvDatabaseURL
	} else {
		cctx, cancel := context.WithTimeout(ctx, containerTimeout)
		url, stop, err := StartContainer(cctx, image)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s is not set, and starting a Postgres container failed: %w\n"+
				"Either set %s to a Postgres URL whose user may create databases "+
				"(e.g. postgres://postgres@127.0.0.1:5432/postgres), "+
				"or make Docker able to run the image %q (set %s to use another image; "+
				"integration/pgimage/build builds one with no registry; where no image can be "+
				"pulled set TESTCONTAINERS_RYUK_DISABLED=true, and TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 "+
				"when the tests themselves run in a container)",
				EnvDatabaseURL, err, EnvDatabaseURL, image, EnvImage)
		}
		srv.adminURL, srv.stop, srv.how = url, stop, "the container from "+image
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	admin, err := connectPool(cctx, srv.adminURL)
	if err != nil {
		if srv.stop != nil {
			_ = srv.stop(ctx)
		}
		return nil, fmt.Errorf("connect to %s: %w (check the URL, that the server runs, and that the user may log in)", srv.how, err)
	}
	srv.admin = admin
	tctx, tcancel := context.WithTimeout(ctx, templateTimeout)
	defer tcancel()
	if srv.template, err = ensureTemplate(tctx, admin, srv.adminURL); err != nil {
		admin.Close()
		if srv.stop != nil {
			_ = srv.stop(ctx)
		}
		return nil, fmt.Errorf("build the template database on %s: %w", srv.how, err)
	}
	return srv, nil
}

// ensureTemplate makes, once per server and migration set, a database with
// every migration applied. The name carries a hash of the migration files,
// so a changed migration gets a new template.
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
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
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

func migrationsHash() string {
	h := sha256.New()
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

func connectPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
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
