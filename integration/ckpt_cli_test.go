package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The rough edges a first user met in ckpt: per-command help, errors in
// the CLI's own spelling, exit codes that follow the rule (0 success, 1
// failure, 2 bad usage), indented JSON everywhere, a delete command, and an
// unreachable database reported once.
func TestCkptRoughEdges(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	env := envWithout("DATABASE_URL")
	url := "sqlite:" + filepath.Join(t.TempDir(), "cli.db")
	ctx := context.Background()
	eng, err := pgcheckpoint.Open(ctx, url, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		r, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run", State: json.RawMessage(`{"a":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID.String())
	}
	eng.Close()
	ckpt := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, bin, env, append([]string{"--database", url}, args...)...)
	}

	// Per-command help shows that command's flags; gc's shows the policies.
	r := ckpt("gc", "--help")
	for _, want := range []string{"usage: ckpt", "gc --policy P", "-thread", "-batch", "keep_last_n:N", "keep_age:DURATION"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("gc --help: exit %d, no %q in\n%s", r.code, want, r.stdout)
		}
	}
	if r := ckpt("log", "-h"); r.code != 0 || !strings.Contains(r.stdout, "-graph") || strings.Contains(r.stdout, "-policy") {
		t.Errorf("log -h: exit %d\n%s", r.code, r.stdout)
	}

	// One spelling of a policy everywhere, the SQL functions' names with
	// the argument after a colon: in help, errors (ckpt's and the
	// engine's) and output; the hyphenated one is refused.
	hyphenated := regexp.MustCompile(`keep-(all|last|age|milestones|latest|none)|keep_[a-z_]+\(`)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"gc", "--help"}, 0, "keep_last_n:N"},
		{[]string{"gc", "--policy", "keep-lots"}, 2, "keep_last_n:N"},
		{[]string{"gc", "--policy", "keep-last-n:2"}, 2, `unknown policy "keep-last-n:2"; use keep_all, keep_last_n:N`},
		{[]string{"gc", "--policy", "keep_last_n:0"}, 2, "keep_last_n:0: n must be 1 or more"},
		{[]string{"gc", "--policy", "keep_latest"}, 2, "keep_latest: a sweep applies keep_all, keep_last_n, keep_age or keep_milestones"},
		{[]string{"gc", "--policy", "keep_milestones(1)", "--thread", "run", "--dry-run"}, 0, "gc keep_milestones:1 on thread run would delete"},
		{[]string{"--json", "gc", "--policy", "keep_age:1h", "--dry-run"}, 0, `"policy": "keep_age:1h0m0s"`},
	} {
		r := ckpt(c.args...)
		out := r.stdout + r.stderr
		said := out // what ckpt says, less the input it quotes
		for _, a := range c.args {
			said = strings.ReplaceAll(said, strconv.Quote(a), "")
		}
		if r.code != c.code || !strings.Contains(out, c.want) || hyphenated.MatchString(said) {
			t.Errorf("%v: exit %d (want %d), want %q and no other spelling in\n%s", c.args, r.code, c.code, c.want, out)
		}
	}

	// Exit codes: unknown thread is a failure (1), an empty name bad usage (2).
	if r := ckpt("gc", "--policy", "keep_last_n:1", "--thread", "unknown"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("gc of an unknown thread: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := ckpt("branch", ids[1], ""); r.code != 2 || !strings.Contains(r.stderr, "NAME is empty") {
		t.Errorf("branch with an empty name: exit %d\n%s", r.code, r.stderr)
	}

	// show --json is indented like every other --json.
	r = ckpt("--json", "show", ids[2])
	if r.code != 0 || !strings.Contains(r.stdout, "\n  \"id\": ") {
		t.Errorf("show --json is not indented:\n%s", r.stdout)
	}

	// delete removes a thread; an unknown one is not found.
	r = ckpt("delete", "run")
	if r.code != 0 || !strings.Contains(r.stdout, "thread run deleted: 3 checkpoint(s)") {
		t.Errorf("delete: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := ckpt("log", "run"); r.code != 1 {
		t.Errorf("log after delete: exit %d\n%s", r.code, r.stdout)
	}
	if r := ckpt("delete", "run"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("delete of an unknown thread: exit %d\n%s", r.code, r.stderr)
	}

	// An unreachable database is reported once, on one line.
	r = runCLI(t, bin, env, "--database", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", "threads")
	if r.code != 1 || strings.Count(r.stderr, "connection refused") != 1 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("unreachable database: exit %d\n%s", r.code, r.stderr)
	}
}
