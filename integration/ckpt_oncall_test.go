package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/uuid"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// oncallStore is a database for the on-call tests: its URL, for ckpt, and
// an engine on it, for the fixture and the checks.
type oncallStore struct {
	name, url string
	eng       *engine.Engine
	ctx       context.Context
}

// oncallStores opens both stores: a Postgres database of its own and a
// SQLite file.
func oncallStores(t *testing.T) []*oncallStore {
	t.Helper()
	ctx := context.Background()
	var out []*oncallStore
	for _, s := range []struct{ name, url string }{
		{"postgres", pgtest.NewDB(t).URL},
		{"sqlite", "sqlite:" + filepath.Join(t.TempDir(), "oncall.db")},
	} {
		eng, err := pgcheckpoint.Open(ctx, s.url, pgcheckpoint.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		out = append(out, &oncallStore{name: s.name, url: s.url, eng: eng, ctx: ctx})
	}
	return out
}

// line writes n checkpoints on thread, each with a pending write.
func (s *oncallStore) line(t *testing.T, thread string, n int) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for i := range n {
		r, err := s.eng.Snapshot(s.ctx, engine.SnapshotInput{ThreadID: thread, State: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.eng.PutWrites(s.ctx, r.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// ids returns the checkpoint ids of each thread, sorted; none for a thread
// that is gone.
func (s *oncallStore) ids(t *testing.T, threads ...string) map[string][]uuid.UUID {
	t.Helper()
	out := map[string][]uuid.UUID{}
	for _, th := range threads {
		tree, err := s.eng.Tree(s.ctx, th)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range tree.Nodes {
			if n.ThreadID == th {
				out[th] = append(out[th], n.ID)
			}
		}
		slices.SortFunc(out[th], func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	}
	return out
}

// gone returns what is in before and not in after.
func gone(before, after map[string][]uuid.UUID) []uuid.UUID {
	var out []uuid.UUID
	for th, ids := range before {
		for _, id := range ids {
			if !slices.Contains(after[th], id) {
				out = append(out, id)
			}
		}
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// --dry-run deletes nothing and says what the same command without it
// then deletes: the checkpoints of gc --thread (by id), the count of
// delete, the counts of a sweep (expiries too), on both stores.
func TestCkptDryRun(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	env := envWithout("DATABASE_URL")
	for _, s := range oncallStores(t) {
		t.Run(s.name, func(t *testing.T) {
			ckpt := func(args ...string) cliResult {
				t.Helper()
				r := runCLI(t, bin, env, append([]string{"--database", s.url}, args...)...)
				if r.code != 0 {
					t.Fatalf("ckpt %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
				}
				return r
			}
			threads := []string{"one", "two", "three", "old"}
			for _, th := range threads {
				s.line(t, th, 5)
			}
			if err := s.eng.SetThreadExpiry(s.ctx, "old", time.Now().Add(-time.Minute), engine.KeepNone()); err != nil {
				t.Fatal(err)
			}
			type gcJSON struct {
				Deleted     int64 `json:"deleted"`
				DryRun      bool  `json:"dry_run"`
				Checkpoints []struct {
					ID uuid.UUID `json:"checkpoint_id"`
				} `json:"checkpoints"`
			}
			decode := func(r cliResult) gcJSON {
				t.Helper()
				var g gcJSON
				if err := json.Unmarshal([]byte(r.stdout), &g); err != nil {
					t.Fatalf("%v\n%s", err, r.stdout)
				}
				return g
			}

			// gc --thread: the dry run lists the ids the real run deletes.
			before := s.ids(t, threads...)
			dry := decode(ckpt("--json", "gc", "--policy", "keep_last_n:2", "--thread", "one", "--dry-run"))
			if after := s.ids(t, threads...); !equalIDs(after, before) {
				t.Fatalf("gc --dry-run deleted %v", gone(before, after))
			}
			text := ckpt("gc", "--policy", "keep_last_n:2", "--thread", "one", "--dry-run").stdout
			real := decode(ckpt("--json", "gc", "--policy", "keep_last_n:2", "--thread", "one"))
			deleted := gone(before, s.ids(t, threads...))
			var listed []uuid.UUID
			for _, c := range dry.Checkpoints {
				listed = append(listed, c.ID)
			}
			slices.SortFunc(listed, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
			if !dry.DryRun || real.DryRun || dry.Deleted != 3 || real.Deleted != 3 || !slices.Equal(listed, deleted) {
				t.Fatalf("gc --thread: the dry run said %+v, the run %+v deleted %v", dry, real, deleted)
			}
			for _, id := range deleted {
				if !strings.Contains(text, id.String()) {
					t.Errorf("gc --dry-run's text does not list %s:\n%s", id, text)
				}
			}

			// delete: the dry run counts what delete then deletes.
			before = s.ids(t, threads...)
			r := ckpt("delete", "two", "--dry-run")
			if after := s.ids(t, threads...); !equalIDs(after, before) || !strings.Contains(r.stdout, "thread two would be deleted: 5 checkpoint(s)") ||
				!strings.Contains(r.stdout, "nothing was deleted") {
				t.Fatalf("delete --dry-run: %q; deleted %v", r.stdout, gone(before, after))
			}
			r = ckpt("delete", "two")
			if d := gone(before, s.ids(t, threads...)); len(d) != 5 || !strings.Contains(r.stdout, "thread two deleted: 5 checkpoint(s)") {
				t.Fatalf("delete after its dry run: %q; deleted %v", r.stdout, d)
			}
			if r := runCLI(t, bin, env, "--database", s.url, "delete", "two", "--dry-run"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
				t.Fatalf("delete --dry-run of no thread: %+v", r)
			}

			// A sweep: the dry run's counts are the sweep's, the expiry
			// included (the dry run does not clear it).
			before = s.ids(t, threads...)
			sweepDry := ckpt("--json", "gc", "--policy", "keep_last_n:3", "--batch", "1", "--dry-run").stdout
			if after := s.ids(t, threads...); !equalIDs(after, before) {
				t.Fatalf("gc sweep --dry-run deleted %v", gone(before, after))
			}
			sweep := ckpt("--json", "gc", "--policy", "keep_last_n:3", "--batch", "1").stdout
			d := gone(before, s.ids(t, threads...))
			counts := func(out string) map[string]any {
				t.Helper()
				var m map[string]any
				if err := json.Unmarshal([]byte(out), &m); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				delete(m, "longest_batch_ms")
				delete(m, "dry_run")
				return m
			}
			if !strings.Contains(sweepDry, `"dry_run": true`) || !strings.Contains(sweepDry, `"expired": 1`) ||
				!strings.Contains(sweepDry, fmt.Sprintf(`"deleted": %d`, len(d))) || len(d) != 5+2 ||
				!reflect.DeepEqual(counts(sweepDry), counts(sweep)) {
				t.Fatalf("gc sweep: the dry run said\n%s\nthe sweep\n%s\nand deleted %d", sweepDry, sweep, len(d))
			}
		})
	}
}

func equalIDs(a, b map[string][]uuid.UUID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// runOnTerminal runs ckpt with a pseudo-terminal as its input and answer
// typed on it; stdout and stderr are pipes, as for runCLI.
func runOnTerminal(t *testing.T, bin string, env []string, answer string, args ...string) cliResult {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	go func() { // drain the echo, so the terminal never blocks
		buf := make([]byte, 4096)
		for {
			if _, err := ptmx.Read(buf); err != nil {
				return
			}
		}
	}()
	if answer != "" {
		if _, err := ptmx.WriteString(answer); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdin = tty
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("ckpt %v on a terminal did not end (waiting for an answer?)\n%s%s", args, out.String(), errOut.String())
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{out.String(), errOut.String(), code}
}

// The commands that delete ask on a terminal: no (or nothing) deletes
// nothing, yes and --yes go on; without a terminal (/dev/null, a pipe) they
// never ask and go on, as scripts expect; --dry-run never asks.
func TestCkptConfirmation(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	env := envWithout("DATABASE_URL")
	s := oncallStores(t)[1] // the prompt is the CLI's: one store will do
	threads := []string{"a", "b", "c", "d", "e"}
	for _, th := range threads {
		s.line(t, th, 4)
	}
	db := []string{"--database", s.url}
	const question = "[y/N]"

	for _, c := range []struct {
		answer string
		args   []string
	}{
		{"n\n", []string{"delete", "a"}},
		{"\n", []string{"delete", "a"}},
		{"maybe\n", []string{"delete", "a"}},
		{"no\n", []string{"gc", "--policy", "keep_last_n:1", "--thread", "a"}},
		{"n\n", []string{"gc", "--policy", "keep_last_n:1"}},
		{"n\n", []string{"--json", "delete", "a"}},
	} {
		before := s.ids(t, threads...)
		r := runOnTerminal(t, bin, env, c.answer, append(db, c.args...)...)
		if after := s.ids(t, threads...); !equalIDs(after, before) {
			t.Fatalf("%v answered %q deleted %v", c.args, c.answer, gone(before, after))
		}
		if r.code != 1 || !strings.Contains(r.stderr, question) || !strings.Contains(r.stderr, "not confirmed; nothing was deleted") || r.stdout != "" {
			t.Fatalf("%v answered %q: %+v", c.args, c.answer, r)
		}
	}
	r := runOnTerminal(t, bin, env, "", append(db, "delete", "a", "--dry-run")...)
	if r.code != 0 || strings.Contains(r.stderr, question) || !strings.Contains(r.stdout, "would be deleted: 4") {
		t.Fatalf("delete --dry-run on a terminal: %+v", r)
	}

	for _, c := range []struct {
		name   string
		run    func(args ...string) cliResult
		args   []string
		thread string
		asked  bool
	}{
		{"y on a terminal", func(args ...string) cliResult { return runOnTerminal(t, bin, env, "y\n", args...) }, []string{"delete", "a"}, "a", true},
		{"YES on a terminal", func(args ...string) cliResult { return runOnTerminal(t, bin, env, "YES\n", args...) },
			[]string{"gc", "--policy", "keep_none", "--thread", "b"}, "b", true},
		{"--yes on a terminal", func(args ...string) cliResult { return runOnTerminal(t, bin, env, "", args...) }, []string{"delete", "c", "--yes"}, "c", false},
		{"no terminal (/dev/null)", func(args ...string) cliResult { return runCLI(t, bin, env, args...) }, []string{"delete", "d"}, "d", false},
		{"no terminal (a pipe)", func(args ...string) cliResult { return runCLIStdin(t, bin, env, []byte("n\n"), args...) }, []string{"delete", "e"}, "e", false},
	} {
		r := c.run(append(db, c.args...)...)
		if left := s.ids(t, c.thread)[c.thread]; r.code != 0 || len(left) != 0 || strings.Contains(r.stderr, question) != c.asked {
			t.Fatalf("%s: %v: %+v; left %d checkpoint(s)", c.name, c.args, r, len(left))
		}
	}
}

// An empty import is an error: exit 1, a message that says so, nothing
// written; from stdin and from a file.
func TestCkptImportEmpty(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	env := envWithout("DATABASE_URL")
	for _, s := range oncallStores(t) {
		empty := filepath.Join(t.TempDir(), "empty.jsonl")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, r := range []cliResult{
			runCLIStdin(t, bin, env, nil, "--database", s.url, "import"),
			runCLI(t, bin, env, "--database", s.url, "import", empty),
			runCLIStdin(t, bin, env, nil, "--database", s.url, "--json", "import", "-"),
		} {
			if r.code != 1 || !strings.Contains(r.stderr, "invalid input: the input is empty") || !strings.Contains(r.stderr, "nothing was imported") || r.stdout != "" {
				t.Fatalf("%s: an empty import: %+v", s.name, r)
			}
		}
		if threads, err := s.eng.ListThreads(s.ctx, engine.ThreadListOptions{}); err != nil || len(threads) != 0 {
			t.Fatalf("%s: an empty import wrote %v (%v)", s.name, threads, err)
		}
	}
}

// ckpt --version and migrate --version: the module version ("(devel)"
// for a build from a source tree), the revision line and the schema
// versions this build migrates to.
func TestVersionFlags(t *testing.T) {
	t.Parallel()
	env := envWithout("DATABASE_URL")
	want := fmt.Sprintf("schema   Postgres version %d, SQLite version %d\n", schema.Latest(), sqlite.LatestVersion())
	for _, name := range []string{"ckpt", "migrate"} {
		bin := buildCommand(t, name)
		for _, flag := range []string{"--version", "-version"} {
			r := runCLI(t, bin, env, flag)
			first, _, _ := strings.Cut(r.stdout, "\n")
			if r.code != 0 || r.stderr != "" || !regexp.MustCompile(`^`+name+` (\(devel\)|v\d+\.\d+\.\d+\S*)$`).MatchString(first) ||
				!strings.Contains(r.stdout, "\nmodule   github.com/pgcheckpoint/pgcheckpoint\n") ||
				!strings.Contains(r.stdout, "\nrevision ") || !strings.Contains(r.stdout, want) {
				t.Errorf("%s %s: exit %d\n%s%s", name, flag, r.code, r.stdout, r.stderr)
			}
		}
	}
}

// A signal at the question ends ckpt at once, nothing deleted, where it
// went on waiting for an answer through any number of them; `import` with
// no FILE on a terminal is a usage error, where it read the terminal and
// no signal ended it.
func TestCkptSignalAtTheQuestion(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	env := envWithout("DATABASE_URL")
	s := oncallStores(t)[1]
	s.line(t, "a", 3)
	before := s.ids(t, "a")
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	go io.Copy(io.Discard, ptmx) //nolint:errcheck // the echo

	cmd := exec.Command(bin, "--database", s.url, "delete", "a")
	cmd.Env, cmd.Stdin = env, tty
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck
	var errOut []byte        // stderr up to the question, then the rest
	for !bytes.Contains(errOut, []byte("[y/N]")) {
		buf := make([]byte, 256)
		n, err := stderr.Read(buf)
		if err != nil {
			t.Fatalf("no question: %v\n%s", err, errOut)
		}
		errOut = append(errOut, buf[:n]...)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		rest, _ := io.ReadAll(stderr)
		errOut = append(errOut, rest...)
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !bytes.Contains(errOut, []byte("not confirmed")) {
			t.Fatalf("delete interrupted at its question: %v\n%s", err, errOut)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("delete still waits for an answer 10 s after SIGINT")
	}
	if after := s.ids(t, "a"); !equalIDs(after, before) {
		t.Fatalf("the interrupted delete deleted %v", gone(before, after))
	}

	r := runOnTerminal(t, bin, env, "", "--database", s.url, "import")
	if r.code != 2 || !strings.Contains(r.stderr, "give FILE, or pipe an export in") {
		t.Fatalf("import with a terminal for input: %+v", r)
	}
}
