package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bounds on the waits of Start and Stop when their context has no deadline.
const (
	DefaultStartTimeout = 60 * time.Second
	DefaultStopTimeout  = 30 * time.Second
)

// DefaultUser is the OS user that runs initdb and the server when the
// calling process is root.
const DefaultUser = "postgres"

// Options configure Start. The zero value is ready to use.
type Options struct {
	// BinDir is the directory with initdb, pg_ctl and postgres; empty: Find.
	BinDir string
	// Settings are extra server settings, as in postgresql.conf, e.g.
	// {"max_connections": "300"}. They override the package's own.
	Settings map[string]string
	// User is the OS user that runs initdb and the server when this process
	// runs as root (they refuse to run as root); empty: DefaultUser. It is
	// not used otherwise.
	User string
	// TempDir is where the cluster's directory is made; empty: os.TempDir().
	// As root, User must be able to reach it.
	TempDir string
}

// Cluster is a running throwaway server. Stop it when done.
type Cluster struct {
	binDir  string
	dir     string // the temporary directory: data, log, socket
	dataDir string
	logPath string
	port    int
	version string
	owner   *osUser // runs the binaries; nil: this process's user
	// interrupted: a pg_ctl start was cut short, so a server may be coming
	// up without a pid file yet.
	interrupted bool

	stopOnce sync.Once
	stopErr  error
}

// osUser is an OS account that initdb, pg_ctl and postgres run as.
type osUser struct {
	name     string
	uid, gid uint32
}

// settingName is what a postgresql.conf parameter name may look like
// (extensions' settings have a dot).
var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// Start makes a new cluster in a temporary directory and starts its server.
// ctx bounds the whole start (DefaultStartTimeout if it has no deadline).
// The error wraps ErrNotFound when Options.BinDir is empty and Find finds
// nothing; when the server does not start, it carries the end of the
// server's log. Whatever fails, nothing is left behind: no directory and no
// server.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	for k := range opts.Settings {
		if !settingName.MatchString(k) {
			return nil, fmt.Errorf("localpg: %q is not a setting name", k)
		}
	}
	binDir := opts.BinDir
	if binDir == "" {
		var err error
		if binDir, err = Find(); err != nil {
			return nil, err
		}
	} else if !hasServer(binDir) {
		return nil, fmt.Errorf("%w in %s", ErrNotFound, binDir)
	}
	owner, err := serverOwner(opts.User)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}

	dir, err := os.MkdirTemp(opts.TempDir, "pgcheckpoint-localpg-")
	if err != nil {
		return nil, fmt.Errorf("localpg: make the cluster directory: %w", err)
	}
	c := &Cluster{
		binDir:  binDir,
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "server.log"),
		owner:   owner,
	}
	if err := c.start(ctx, opts); err != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultStopTimeout)
		defer cancel()
		if serr := c.Stop(sctx); serr != nil {
			err = fmt.Errorf("%w (and cleaning up: %v)", err, serr)
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, opts Options) error {
	if c.owner != nil {
		if err := os.Chown(c.dir, int(c.owner.uid), int(c.owner.gid)); err != nil {
			return fmt.Errorf("localpg: give %s to user %s: %w", c.dir, c.owner.name, err)
		}
	}
	if out, err := c.command(ctx, "postgres", "-V").Output(); err == nil {
		c.version = strings.TrimSpace(string(out))
	}
	out, err := c.command(ctx, "initdb", "-D", c.dataDir, "--auth=trust", "-U", "postgres",
		"--encoding=UTF8", "--locale=C", "-N").CombinedOutput()
	if err != nil {
		return fmt.Errorf("localpg: initdb in %s: %w%s%s", c.dir, c.ctxErr(ctx, err), tail("initdb's output", out), c.ownerHint(ctx))
	}
	if err := c.writeSettings(opts.Settings); err != nil {
		return err
	}
	// A port is free when we look and may be taken when the server binds it:
	// try another one then.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			return fmt.Errorf("localpg: find a free port: %w", err)
		}
		err = c.pgCtlStart(ctx)
		if err == nil {
			return nil
		}
		log := c.logTail()
		if attempt == attempts || ctx.Err() != nil || !strings.Contains(log, "could not bind") {
			return fmt.Errorf("localpg: start the server (%s) on port %d: %w%s",
				c.binDir, c.port, err, log)
		}
	}
}

// pgCtlStart starts the server and waits until it accepts connections.
func (c *Cluster) pgCtlStart(ctx context.Context) error {
	cmd := c.command(ctx, "pg_ctl", "start", "-D", c.dataDir, "-l", c.logPath, "-s",
		"-w", "-t", waitSeconds(ctx), "-p", filepath.Join(c.binDir, exe("postgres")),
		"-o", "-p "+strconv.Itoa(c.port))
	detach(cmd)
	_ = os.Remove(c.logPath) // so the log read after a failure is this attempt's
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.interrupted = c.interrupted || ctx.Err() != nil
		return fmt.Errorf("pg_ctl: %w%s", c.ctxErr(ctx, err), tail("pg_ctl's output", out))
	}
	return nil
}

// writeSettings appends the cluster's settings to postgresql.conf, where
// later lines win over initdb's.
func (c *Cluster) writeSettings(extra map[string]string) error {
	settings := map[string]string{
		"listen_addresses":   "127.0.0.1",
		"fsync":              "off", // throwaway data: no durability needed
		"synchronous_commit": "off",
		"full_page_writes":   "off",
	}
	// A socket path longer than the OS allows (104 bytes on macOS, 108 on
	// Linux) stops the server: with a long temporary directory, TCP only.
	if runtime.GOOS != "windows" && len(c.dir)+len("/.s.PGSQL.65535") < 104 {
		settings["unix_socket_directories"] = c.dir
	} else {
		settings["unix_socket_directories"] = ""
	}
	for k, v := range extra {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("\n# pgcheckpoint localpg: a throwaway cluster\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = '%s'\n", k, strings.ReplaceAll(settings[k], "'", "''"))
	}
	f, err := os.OpenFile(filepath.Join(c.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("localpg: write the settings: %w", err)
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("localpg: write the settings: %w", err)
	}
	return nil
}

// URL returns a URL to the cluster's "postgres" database as the superuser
// "postgres", over TCP, with no password.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Dir returns the cluster's temporary directory: the data directory, the
// server log and the unix socket (where the OS allows a socket path that
// long) are in it. Stop removes it.
func (c *Cluster) Dir() string { return c.dir }

// BinDir returns the directory of the binaries that run the cluster.
func (c *Cluster) BinDir() string { return c.binDir }

// Version returns what `postgres -V` printed, e.g.
// "postgres (PostgreSQL) 15.8", or "" if it printed nothing.
func (c *Cluster) Version() string { return c.version }

// Stop stops the server and removes the cluster's directory. It stops
// politely first (pg_ctl stop -m fast); a server that does not stop in time
// is stopped at once, and killed if it must be. ctx bounds the polite part
// (DefaultStopTimeout if it has no deadline); the directory is removed in
// any case. Calling Stop again returns the first call's result.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() { c.stopErr = c.stop(ctx) })
	return c.stopErr
}

func (c *Cluster) stop(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStopTimeout)
		defer cancel()
	}
	var errs []error
	pidFile := filepath.Join(c.dataDir, "postmaster.pid")
	if c.interrupted {
		waitFor(2*time.Second, func() bool { return fileExists(pidFile) })
	}
	if fileExists(pidFile) {
		out, err := c.command(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-s", "-m", "fast",
			"-w", "-t", waitSeconds(ctx)).CombinedOutput()
		if err != nil && fileExists(pidFile) {
			if kerr := c.stopNow(); kerr != nil {
				errs = append(errs, fmt.Errorf("localpg: stop the server in %s: %w%s; then: %w",
					c.dataDir, err, tail("pg_ctl's output", out), kerr))
			}
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("localpg: remove %s: %w", c.dir, err))
	}
	return errors.Join(errs...)
}

// Crash stops the server at once, as a crash or a power cut would (pg_ctl
// stop -m immediate: no shutdown checkpoint, every connection cut), and
// starts it again on the same port, where it recovers from its WAL. Tests
// of clients that must ride through a server restart use it.
func (c *Cluster) Crash(ctx context.Context) error {
	out, err := c.command(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-s", "-m", "immediate", "-w", "-t", waitSeconds(ctx)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("localpg: immediate stop: %w%s", c.ctxErr(ctx, err), tail("pg_ctl's output", out))
	}
	return c.pgCtlStart(ctx)
}

// stopNow ends a server that did not stop in time: an immediate shutdown,
// then, where the OS allows, a kill. It has its own time bound, as the
// caller's may be spent.
func (c *Cluster) stopNow() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pidFile := filepath.Join(c.dataDir, "postmaster.pid")
	_ = c.command(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-s", "-m", "immediate", "-w", "-t", "5").Run()
	if !fileExists(pidFile) {
		return nil
	}
	// A postmaster writes its pid file just after creating it: one stopped
	// while starting may leave it empty. Wait for the number; without one,
	// end whatever runs in the data directory.
	pid := 0
	waitFor(2*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return true
		}
		pid, _ = strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		return pid > 0
	})
	if pid <= 0 {
		return killAllIn(c.dataDir)
	}
	return killServer(pid, c.dataDir)
}

// command returns a command that runs one of the cluster's binaries, as the
// cluster's owner, in the cluster's directory, without the caller's PG*
// environment (PGDATA, PGPORT, ... would change what the binaries do).
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, exe(name)), args...)
	cmd.Dir = c.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(strings.ToUpper(kv), "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.WaitDelay = 5 * time.Second
	runAs(cmd, c.owner)
	return cmd
}

// ctxErr says so when err comes from the context ending, not the command.
func (c *Cluster) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return err
}

// ownerHint is added to initdb's errors as root, unless ctx ended: the
// usual cause is a temporary directory the server's user cannot reach.
func (c *Cluster) ownerHint(ctx context.Context) string {
	if c.owner == nil || ctx.Err() != nil {
		return ""
	}
	return fmt.Sprintf("\n(as root, initdb and the server run as user %s, who must be able to reach %s: "+
		"set TMPDIR or Options.TempDir to a directory it can reach)", c.owner.name, c.dir)
}

// logTail returns the end of the server log, ready to append to an error.
func (c *Cluster) logTail() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return ""
	}
	return tail("the server log", b)
}

// tail returns the last lines of out under a heading, or "" if out is
// empty.
func tail(what string, out []byte) string {
	const maxLines, maxBytes = 20, 4000
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return ""
	}
	if len(out) > maxBytes {
		out = out[len(out)-maxBytes:]
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return "\n--- end of " + what + ":\n" + strings.Join(lines, "\n")
}

// freePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitSeconds is what is left of ctx's time, in whole seconds for pg_ctl's
// -t (at least 1).
func waitSeconds(ctx context.Context) string {
	s := 60.0
	if d, ok := ctx.Deadline(); ok {
		s = math.Ceil(time.Until(d).Seconds())
	}
	return strconv.Itoa(int(max(s, 1)))
}

// waitFor polls cond until it holds or d has passed, and returns cond's
// last value.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
