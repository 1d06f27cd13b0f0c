//go:build unix

package localpg

import (
	"context"
	"errors"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// realBinDir returns the directory of this machine's server binaries, or
// skips the test: without them there is nothing to start.
func realBinDir(t *testing.T) string {
	t.Helper()
	dir, err := Find()
	if errors.Is(err, ErrNotFound) {
		t.Skipf("no PostgreSQL server installed, so no cluster to start: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// startCluster starts a cluster under a directory of the test's own, which
// must be empty again once the cluster is stopped.
func startCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	opts.BinDir = realBinDir(t)
	opts.TempDir = emptyAfterTest(t)
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return c
}

// emptyAfterTest returns a directory, reachable by the server's user, that
// the test fails on if anything is left in it at the end.
func emptyAfterTest(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// t.TempDir's parent is private to this process's user; as root the
	// server runs as another one.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("left behind in %s: %s", dir, left[0].Name())
		}
	})
	return dir
}

func TestStartRunsAServerAndStopRemovesIt(t *testing.T) {
	t.Parallel()
	c := startCluster(t, Options{Settings: map[string]string{"max_connections": "120", "application_name": "it's quoted"}})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	var maxConns, fsync, appName, user string
	var answer int
	if err := conn.QueryRow(ctx, `SELECT current_setting('max_connections'), current_setting('fsync'),
		current_setting('application_name'), current_user, 6 * 7`).Scan(&maxConns, &fsync, &appName, &user, &answer); err != nil {
		t.Fatal(err)
	}
	if maxConns != "120" || fsync != "off" || user != "postgres" || answer != 42 {
		t.Fatalf("max_connections %s, fsync %s, user %s, answer %d", maxConns, fsync, user, answer)
	}
	conn.Close(ctx)
	if !strings.Contains(c.Version(), "PostgreSQL") {
		t.Errorf("Version() = %q", c.Version())
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), ".s.PGSQL."+strconv.Itoa(c.Port()))); err != nil && len(c.Dir()) < 80 {
		t.Errorf("no unix socket in the cluster directory: %v", err)
	}

	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is still there after Stop (%v)", c.Dir(), err)
	}
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(c.Port()), time.Second); err == nil {
		conn.Close()
		t.Fatalf("port %d still accepts connections after Stop", c.Port())
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

func TestStartAsRootRunsTheServerAsItsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root has to hand the server to another user")
	}
	t.Parallel()
	pgUser, err := user.Lookup(DefaultUser)
	if err != nil {
		t.Fatalf("running as root needs the OS user %s: %v", DefaultUser, err)
	}
	c := startCluster(t, Options{})
	fi, err := os.Stat(filepath.Join(c.Dir(), "data", "PG_VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10); uid != pgUser.Uid {
		t.Fatalf("the data directory belongs to uid %s, want %s (%s)", uid, pgUser.Uid, DefaultUser)
	}

	t.Run("missing user", func(t *testing.T) {
		_, err := Start(context.Background(), Options{BinDir: c.BinDir(), User: "no-such-user-pgcheckpoint", TempDir: emptyAfterTest(t)})
		if err == nil || !strings.Contains(err.Error(), "root") || !strings.Contains(err.Error(), "no-such-user-pgcheckpoint") {
			t.Fatalf("error %v should say root needs user no-such-user-pgcheckpoint", err)
		}
	})
}

func TestStartFailureLeavesNothingAndShowsTheLog(t *testing.T) {
	t.Parallel()
	dir := emptyAfterTest(t)
	_, err := Start(context.Background(), Options{BinDir: realBinDir(t), TempDir: dir,
		Settings: map[string]string{"no_such_setting": "1"}})
	if err == nil {
		t.Fatal("a server with an unknown setting was reported started")
	}
	if !strings.Contains(err.Error(), `unrecognized configuration parameter "no_such_setting"`) {
		t.Fatalf("the error does not carry the server log:\n%v", err)
	}
}

func TestStartCutShortLeavesNothing(t *testing.T) {
	t.Parallel()
	binDir := realBinDir(t)
	for _, d := range []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond, 800 * time.Millisecond, 1000 * time.Millisecond, 1200 * time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			c, err := Start(ctx, Options{BinDir: binDir, TempDir: emptyAfterTest(t)})
			if err == nil { // a fast machine: fine, as long as Stop cleans up
				if err := c.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Log(strings.SplitN(err.Error(), "\n", 2)[0])
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v does not say the time ran out", err)
			}
		})
	}
}

func TestStartRejectsABadSettingName(t *testing.T) {
	t.Parallel()
	dir := emptyAfterTest(t)
	_, err := Start(context.Background(), Options{BinDir: "/nonexistent", TempDir: dir,
		Settings: map[string]string{"fsync = off\nport": "1"}})
	if err == nil || !strings.Contains(err.Error(), "not a setting name") {
		t.Fatalf("got %v", err)
	}
}

func TestStopAfterTheServerDied(t *testing.T) {
	t.Parallel()
	c := startCluster(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := c.command(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", "immediate").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestStopNowEndsAServerThatWillNotStop(t *testing.T) {
	t.Parallel()
	c := startCluster(t, Options{})
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err := killServer(pid, c.dataDir); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(c.Port()), time.Second); err == nil {
		conn.Close()
		t.Fatal("the server still accepts connections after killServer")
	}
	if err := killServer(os.Getpid(), c.dataDir); err == nil || !strings.Contains(err.Error(), "not killed") {
		if _, statErr := os.Stat("/proc/self/cwd"); statErr == nil {
			t.Fatalf("killServer would signal a process outside the data directory: %v", err)
		}
	}
}

// A server start cut short (pg_ctl killed while the server comes up) must
// not leave a server running once Stop returns.
func TestStopAfterAnInterruptedServerStart(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{5 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			c := startCluster(t, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if out, err := c.command(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-w").CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			sctx, scancel := context.WithTimeout(context.Background(), d)
			defer scancel()
			err := c.pgCtlStart(sctx)
			t.Logf("start cut after %v: %v", d, err)
			if err := c.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if pids := processesIn(t, c.Dir()); len(pids) > 0 {
				t.Fatalf("processes %v still run in %s after Stop", pids, c.Dir())
			}
		})
	}
}

// processesIn returns the processes whose working directory is in dir,
// where /proc tells (Linux).
func processesIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []string
	for _, e := range entries {
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && strings.HasPrefix(cwd, dir) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
