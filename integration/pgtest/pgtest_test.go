package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"

	"github.com/pgcheckpoint/pgcheckpoint/internal/localpg"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// The harness itself: a working server gives each test its own migrated
// database, dropped afterwards.
func TestNewDBIsMigratedAndPrivate(t *testing.T) {
	a, b := NewDB(t), NewDB(t)
	if a.Name == b.Name {
		t.Fatalf("two tests share database %s", a.Name)
	}
	ctx := context.Background()
	var tables int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'pgcheckpoint'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables < 3 {
		t.Fatalf("%d pgcheckpoint tables in a new database, want the migrated schema", tables)
	}
	if _, err := a.Pool.Exec(ctx, `INSERT INTO pgcheckpoint.threads (thread_id) VALUES ('only-in-a')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.Pool.QueryRow(ctx, `SELECT count(*) FROM pgcheckpoint.threads`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("b sees %d threads (%v): databases are not isolated", n, err)
	}
	srv, _ := getServer()
	exists := func(name string) bool {
		t.Helper()
		var exists bool
		if err := srv.admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		return exists
	}
	// A database whose test changed more than rows is dropped when the
	// test ends; one whose test only wrote rows is emptied and handed to
	// the next test (see recycler).
	changes := []string{
		`CREATE TABLE pgcheckpoint.extra (x int)`,
		`GRANT SELECT ON pgcheckpoint.threads TO PUBLIC`,
		`DROP VIEW pgcheckpoint.checkpoint_info CASCADE`,
		`ANALYZE pgcheckpoint.threads`,
		`ALTER DATABASE %s SET work_mem = '8MB'`,
		`ALTER DATABASE %s RESET pgcheckpoint.tenant`,
		`ALTER DATABASE %s CONNECTION LIMIT 50`,
		`UPDATE pgcheckpoint.schema_migrations SET dirty = true`,
		`CREATE TEMP TABLE t (x int)`,
	}
	names := make([]string, len(changes))
	t.Run("dropped", func(t *testing.T) {
		for i, change := range changes {
			t.Run(change, func(t *testing.T) {
				t.Parallel()
				d := NewDB(t)
				names[i] = d.Name
				if strings.Contains(change, "%s") {
					change = fmt.Sprintf(change, pgx.Identifier{d.Name}.Sanitize())
				}
				if _, err := d.Pool.Exec(ctx, `INSERT INTO pgcheckpoint.threads (thread_id) VALUES ('t')`); err != nil {
					t.Fatal(err)
				}
				if _, err := d.Pool.Exec(ctx, change); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
	for i, change := range changes {
		if exists(names[i]) {
			t.Errorf("database %s still exists after its test ran %s", names[i], change)
		}
	}
	var name string
	t.Run("recycled", func(t *testing.T) {
		d := NewDB(t)
		name = d.Name
		if _, err := d.Pool.Exec(ctx, `INSERT INTO pgcheckpoint.threads (thread_id) VALUES ('left')`); err != nil {
			t.Fatal(err)
		}
		// A session the test leaves open is ended.
		if _, err := pgx.Connect(ctx, d.URL); err != nil {
			t.Fatal(err)
		}
	})
	c := NewDB(t)
	if c.Name != name {
		t.Fatalf("database %s was not handed out again (got %s)", name, c.Name)
	}
	var threads, version int
	if err := c.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pgcheckpoint.threads), (SELECT version FROM pgcheckpoint.schema_migrations)`).Scan(&threads, &version); err != nil {
		t.Fatal(err)
	}
	if threads != 0 || version == 0 {
		t.Fatalf("a recycled database has %d threads and version %d, want none and the migrated version", threads, version)
	}
}

func TestWrongURLFailsFastAndSaysWhatToFix(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := startServer(context.Background(), "postgres://nobody@127.0.0.1:1/nothing?sslmode=disable", DefaultImage)
	if err == nil {
		t.Fatal("no error for an unreachable server")
	}
	if took := time.Since(start); took > connectTimeout+5*time.Second {
		t.Fatalf("took %v to fail", took)
	}
	for _, want := range []string{EnvDatabaseURL, "check the URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestContainerThatCannotStartFailsFastAndSaysWhatToFix(t *testing.T) {
	t.Parallel()
	testcontainers.SkipIfProviderIsNotHealthy(t)
	t.Run("unknown image", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		_, err := startServer(context.Background(), "", "pgcheckpoint/no-such-image:0")
		if err == nil {
			t.Fatal("no error for an image that does not exist")
		}
		if took := time.Since(start); took > containerTimeout+10*time.Second {
			t.Fatalf("took %v to fail", took)
		}
		for _, want := range []string{EnvDatabaseURL, EnvImage, "pgcheckpoint/no-such-image:0"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not mention %q:\n%v", want, err)
			}
		}
	})
	t.Run("server that exits", func(t *testing.T) {
		t.Parallel()
		image := os.Getenv(EnvImage)
		if image == "" {
			image = DefaultImage
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		// An unknown setting makes postgres refuse to start.
		_, _, err := StartContainer(ctx, image, testcontainers.WithCmdArgs("-c", "no_such_setting=1"))
		if err == nil {
			t.Fatal("a server that cannot start was reported ready")
		}
		if took := time.Since(start); took > 40*time.Second {
			t.Fatalf("took %v to fail", took)
		}
		if !strings.Contains(err.Error(), image) {
			t.Errorf("error does not name the image: %v", err)
		}
	})
}

// With no URL and no image named, and no container to be had from
// DefaultImage, the harness runs the Postgres server binaries installed
// here.
func TestNoServerGivenUsesLocalBinaries(t *testing.T) {
	if _, err := localpg.Find(); err != nil {
		t.Fatalf("this test needs Postgres server binaries (CI installs postgresql-15): %v", err)
	}
	if _, _, err := StartContainer(context.Background(), DefaultImage); err == nil {
		t.Skip("Docker can run " + DefaultImage + " here: the harness uses it, not local binaries")
	}
	t.Parallel()
	srv, err := startServer(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.admin.Close()
		if err := srv.stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if !strings.Contains(srv.how, "the throwaway Postgres from") {
		t.Fatalf("server found as %q", srv.how)
	}
	var v int
	if err := srv.admin.QueryRow(context.Background(), `SELECT current_setting('server_version_num')::int`).Scan(&v); err != nil || v < 150000 {
		t.Fatalf("server version %d: %v", v, err)
	}
}

// envChild marks the test binary run by TestNoServerIsExplainedOnce.
const envChild = "PGTEST_NO_SERVER_CHILD"

// With no server at all, every test fails (none is skipped), and the
// explanation is printed once, not once per test.
func TestNoServerIsExplainedOnce(t *testing.T) {
	if os.Getenv(envChild) != "" {
		for i := range 3 {
			t.Run(fmt.Sprint("needs a database ", i), func(t *testing.T) { NewDB(t) })
		}
		return
	}
	t.Parallel()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvDatabaseURL+"=") && !strings.HasPrefix(kv, EnvImage+"=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoServerIsExplainedOnce$", "-test.v")
	cmd.Env = append(env, envChild+"=1", localpg.EnvDirs+"=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the tests passed with no server:\n%s", out)
	}
	if _, _, cerr := StartContainer(context.Background(), DefaultImage); cerr == nil {
		t.Skip("Docker can run " + DefaultImage + " here")
	}
	text := string(out)
	if n := strings.Count(text, "Give the tests a Postgres server one of three ways"); n != 1 {
		t.Errorf("the explanation appears %d times, want once:\n%s", n, text)
	}
	if n := strings.Count(text, "--- FAIL: TestNoServerIsExplainedOnce/needs_a_database"); n != 3 {
		t.Errorf("%d of 3 tests failed:\n%s", n, text)
	}
	if n := strings.Count(text, "the first failure above says why"); n != 2 {
		t.Errorf("%d one-line references, want 2:\n%s", n, text)
	}
	if len(text) > 8<<10 {
		t.Errorf("%d bytes of output for 3 failing tests", len(text))
	}
}

// A test binary given a server by URL leaves no database on it: the
// per-test databases are dropped as the tests end or, recycled, when the
// binary ends, the template when the last binary using it finishes.
func TestTestsLeaveNothingOnTheServer(t *testing.T) {
	if os.Getenv(envChild) != "" {
		return
	}
	t.Parallel()
	ctx := context.Background()
	cluster, err := localpg.Start(ctx, localpg.Options{})
	if err != nil {
		t.Fatalf("this test needs Postgres server binaries (CI installs postgresql-15): %v", err)
	}
	defer cluster.Stop(context.Background())
	for range 2 { // the second run builds the template anew
		// Its "recycled" subtest leaves a database on the free list.
		cmd := exec.Command(os.Args[0], "-test.run=^TestNewDBIsMigratedAndPrivate$/^recycled$")
		cmd.Env = append(os.Environ(), EnvDatabaseURL+"="+cluster.URL())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the tests failed: %v\n%s", err, out)
		}
		conn, err := pgx.Connect(ctx, cluster.URL())
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		rows, _ := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'pgct%'`)
		left, err = pgx.CollectRows(rows, pgx.RowTo[string])
		conn.Close(ctx)
		if err != nil || len(left) != 0 {
			t.Fatalf("the tests left databases %v (%v)", left, err)
		}
	}
}

// A database given back is handed out again only while what the planner
// knows of its tables is a fresh clone's: an ANALYZE of its emptied tables
// after the test gave it back (autovacuum's, here run by hand) gets it
// dropped, and the next test a fresh clone.
func TestRecycledDatabaseWithOtherStatisticsIsDropped(t *testing.T) {
	ctx := context.Background()
	var name, url string
	// A database is recycled only when nothing else shows in its
	// statistics, which other test binaries on the server may disturb for
	// a moment: a few tries.
	free := false
	srv, _ := getServer()
	for try := 0; try < 5 && !free; try++ {
		t.Run("given back", func(t *testing.T) {
			d := NewDB(t)
			name, url = d.Name, d.URL
			if _, err := d.Pool.Exec(ctx, `INSERT INTO pgcheckpoint.threads (thread_id) VALUES ('t')`); err != nil {
				t.Fatal(err)
			}
		})
		srv.recycled.mu.Lock()
		for _, d := range srv.recycled.free {
			free = free || d.Name == name
		}
		srv.recycled.mu.Unlock()
	}
	if !free {
		t.Fatalf("database %s was not recycled, 5 times: nothing to check", name)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `ANALYZE pgcheckpoint.threads`)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := NewDB(t); c.Name == name {
		t.Fatalf("database %s was handed out again with the statistics of an ANALYZE", name)
	}
	var exists bool
	if err := srv.admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil || exists {
		t.Fatalf("database %s left on the server (%v)", name, err)
	}
}
