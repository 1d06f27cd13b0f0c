package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/localpg"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// runCLIStdin is runCLI with stdin.
func runCLIStdin(t *testing.T, bin string, env []string, stdin []byte, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
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

// noStackTrace fails when a CLI run printed a Go panic.
func noStackTrace(t *testing.T, r cliResult) {
	t.Helper()
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		t.Fatalf("stack trace on stderr:\n%s", r.stderr)
	}
}

// seedHistory writes a thread with a rewind, a branch, a merge, pending
// writes, a sub-graph namespace and NUL characters, and returns its
// checkpoint ids on the main line in order.
func seedHistory(t *testing.T, b *bundle, thread string) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	msgs := `[{"role":"user","content":"hi\u0000there \u0001"}]`
	for i, s := range []string{`{"n": 1}`, `{"n": 2, "k": "v"}`, `{"n": 3}`} {
		res := b.snap(t, engine.SnapshotInput{ThreadID: thread, Trigger: engine.TriggerLLMCall, Messages: json.RawMessage(msgs),
			State: json.RawMessage(s), Tags: []string{"x"}, Metadata: json.RawMessage(`{"run_id": "r1", "nul": "a\u0000b"}`), NextNode: "n"})
		ids = append(ids, res.ID)
		msgs = msgs[:len(msgs)-1] + `,{"role":"assistant","content":"step ` + string(rune('1'+i)) + `"}]`
	}
	if _, err := b.eng.PutWrites(b.ctx, ids[2], "task-a", []engine.Write{{Channel: "out", Value: json.RawMessage(`{"v": "\u0000"}`)}, {Channel: "out2", Value: json.RawMessage(`7`)}}); err != nil {
		t.Fatal(err)
	}
	br, err := b.eng.Branch(b.ctx, ids[1], "alt")
	if err != nil {
		t.Fatal(err)
	}
	b.snap(t, engine.SnapshotInput{ThreadID: br.ThreadID, State: json.RawMessage(`{"alt": true}`)})
	if _, err := b.eng.MergeBranch(b.ctx, br.ThreadID, thread); err != nil {
		t.Fatal(err)
	}
	b.snap(t, engine.SnapshotInput{ThreadID: thread, Namespace: "sub", State: json.RawMessage(`{"sub": 1}`)})
	if _, err := b.eng.Rewind(b.ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestCkptCLI(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	b := setup(t)
	ids := seedHistory(t, b, "run-1")
	b.snap(t, engine.SnapshotInput{ThreadID: "run-2"})
	env := []string{"DATABASE_URL=" + b.db.URL}
	ok := func(args ...string) cliResult {
		t.Helper()
		r := runCLI(t, bin, env, args...)
		if r.code != 0 {
			t.Fatalf("ckpt %v: exit %d\n%s", args, r.code, r.stderr)
		}
		return r
	}

	r := ok("threads")
	if !strings.HasPrefix(r.stdout, "THREAD") || !strings.Contains(r.stdout, "run-1 ") || !strings.Contains(r.stdout, "run-1-branch-alt-") || !strings.Contains(r.stdout, "run-2 ") {
		t.Fatalf("threads:\n%s", r.stdout)
	}
	var threads []map[string]any
	if err := json.Unmarshal([]byte(ok("--json", "threads").stdout), &threads); err != nil || len(threads) != 3 {
		t.Fatalf("threads --json: %d threads, %v", len(threads), err)
	}
	if r := ok("threads", "--limit", "1", "--json"); strings.Count(r.stdout, `"thread_id"`) != 1 {
		t.Fatalf("threads --limit 1:\n%s", r.stdout)
	}

	// log: newest first, the head (rewound to ids[2]) marked.
	r = ok("log", "run-1")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "STEP") || !strings.Contains(r.stdout, ids[2].String()) {
		t.Fatalf("log:\n%s", r.stdout)
	}
	for _, l := range lines[1:] {
		if strings.Contains(l, "(head)") != strings.Contains(l, ids[2].String()) {
			t.Fatalf("head marked on the wrong line:\n%s", r.stdout)
		}
	}
	var logJSON []struct {
		ID     uuid.UUID `json:"id"`
		Step   int64     `json:"step"`
		IsHead bool      `json:"is_head"`
	}
	if err := json.Unmarshal([]byte(ok("log", "run-1", "--json").stdout), &logJSON); err != nil || len(logJSON) != 4 || logJSON[3].ID != ids[0] || !logJSON[1].IsHead {
		t.Fatalf("log --json: %+v %v", logJSON, err)
	}

	// log --namespace: that namespace's line alone, its head marked.
	var subJSON []struct {
		Namespace string `json:"namespace"`
		IsHead    bool   `json:"is_head"`
	}
	if err := json.Unmarshal([]byte(ok("log", "run-1", "--namespace", "sub", "--json").stdout), &subJSON); err != nil ||
		len(subJSON) != 1 || subJSON[0].Namespace != "sub" || !subJSON[0].IsHead {
		t.Fatalf("log --namespace sub: %+v %v", subJSON, err)
	}

	// log --graph: one row per checkpoint of the tree (namespaces and
	// branches included); the merge, which the rewind to ids[2] left
	// behind, drawn 'o' with its merge line; the branch joining its source.
	r = ok("log", "run-1", "--graph")
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(rows) != 7 || !strings.Contains(r.stdout, "{sub}") || !strings.Contains(r.stdout, "o-. ") || !strings.Contains(r.stdout, "*-' "+ids[1].String()) || !strings.Contains(r.stdout, "[run-1-branch-alt-") {
		t.Fatalf("log --graph (%d rows):\n%s", len(rows), r.stdout)
	}

	// show: the whole checkpoint as pretty JSON, NULs included.
	r = ok("show", ids[2].String())
	var shown struct {
		ID            uuid.UUID           `json:"id"`
		Step          int64               `json:"step"`
		Messages      []map[string]string `json:"messages"`
		PendingWrites []map[string]any    `json:"pending_writes"`
		IsHead        bool                `json:"is_head"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.ID != ids[2] || shown.Step != 3 || !shown.IsHead || len(shown.Messages) != 3 || shown.Messages[0]["content"] != "hi\x00there \x01" ||
		len(shown.PendingWrites) != 2 || !strings.Contains(r.stdout, "\n  \"messages\": [\n") {
		t.Fatalf("show:\n%s", r.stdout)
	}

	// diff
	r = ok("diff", ids[0].String(), ids[2].String())
	if !strings.Contains(r.stdout, "messages: 2 added, 0 removed") || !strings.Contains(r.stdout, "state:\n  ~ n") {
		t.Fatalf("diff:\n%s", r.stdout)
	}
	var d struct {
		State struct{ Added, Changed []string }
	}
	if err := json.Unmarshal([]byte(ok("--json", "diff", ids[0].String(), ids[1].String()).stdout), &d); err != nil ||
		len(d.State.Added) != 1 || d.State.Added[0] != "k" {
		t.Fatalf("diff --json: %+v %v", d, err)
	}

	// rewind and branch change the database, and say what they did.
	r = ok("rewind", ids[0].String())
	if !strings.Contains(r.stdout, "rewound 2 step(s) to step 1") || !strings.Contains(r.stdout, "nothing was deleted") {
		t.Fatalf("rewind:\n%s", r.stdout)
	}
	if head, err := b.eng.Latest(b.ctx, "run-1"); err != nil || head.ID != ids[0] {
		t.Fatalf("head after ckpt rewind: %v %v", head, err)
	}
	var br struct {
		ThreadID string `json:"thread_id"`
		Step     int64  `json:"step"`
	}
	if err := json.Unmarshal([]byte(ok("branch", ids[1].String(), "retry", "--json").stdout), &br); err != nil ||
		!strings.HasPrefix(br.ThreadID, "run-1-branch-retry-") || br.Step != 3 {
		t.Fatalf("branch --json: %+v %v", br, err)
	}
	if _, err := b.eng.Latest(b.ctx, br.ThreadID); err != nil {
		t.Fatalf("the branch thread: %v", err)
	}

	// tree
	if r := ok("tree", "run-1"); !strings.HasPrefix(r.stdout, `digraph "run-1" {`) || strings.Count(r.stdout, " -> ") < 6 || !strings.Contains(r.stdout, "style=dashed") {
		t.Fatalf("tree dot:\n%s", r.stdout)
	}
	if r := ok("tree", "run-1", "--format", "mermaid"); !strings.HasPrefix(r.stdout, "flowchart TD\n") || !strings.Contains(r.stdout, "-. merge .->") {
		t.Fatalf("tree mermaid:\n%s", r.stdout)
	}

	// Bad usage: exit 2, a message, the usage text.
	for _, c := range []struct {
		env  []string
		args []string
		msg  string
	}{
		{env, nil, "no command given"},
		{env, []string{"sideways"}, `unknown command "sideways"`},
		{env, []string{"log"}, "log takes THREAD; got 0"},
		{env, []string{"diff", ids[0].String()}, "diff takes A B; got 1"},
		{env, []string{"show", "not-an-id"}, `"not-an-id" is not a checkpoint id`},
		{env, []string{"threads", "--bogus"}, "flag provided but not defined: -bogus"},
		{env, []string{"tree", "run-1", "--format", "png"}, `--format "png"; use dot or mermaid`},
		{env, []string{"log", "run-1", "--limit", "-1"}, "--limit -1"},
		{env, []string{"log", "run-1", "--graph", "--namespace", "sub"}, "--graph draws every namespace"},
		{env, []string{"--json", "log", "run-1", "--graph", "--limit", "2"}, "--limit cuts the drawing alone"},
		{nil, []string{"threads"}, "no database: pass --database URL or set DATABASE_URL"},
		{nil, []string{"--database", "postgres://x:y@:::bad", "threads"}, "database URL: cannot parse"},
	} {
		r := runCLI(t, bin, c.env, c.args...)
		noStackTrace(t, r)
		if r.code != 2 || !strings.Contains(r.stderr, c.msg) || !strings.Contains(r.stderr, "usage: ckpt") {
			t.Fatalf("ckpt %v: exit %d, stderr %q; want exit 2 with %q", c.args, r.code, r.stderr, c.msg)
		}
	}

	// Failures: exit 1 and one line saying what went wrong.
	unknown := engine.NewCheckpointID().String()
	for _, c := range []struct {
		env  []string
		args []string
		msg  string
	}{
		{env, []string{"show", unknown}, "not found"},
		{env, []string{"rewind", unknown}, "not found"},
		{env, []string{"log", "no-such-thread"}, "not found"},
		{env, []string{"log", "run-1", "--namespace", strings.Repeat("n", 256)}, "invalid input"},
		{env, []string{"branch", ids[0].String(), strings.Repeat("n", 300)}, "invalid input"},
		{[]string{"DATABASE_URL=postgres://nobody@127.0.0.1:1/none?connect_timeout=5"}, []string{"threads"}, "cannot connect to Postgres at 127.0.0.1:1"},
	} {
		r := runCLI(t, bin, c.env, c.args...)
		noStackTrace(t, r)
		if r.code != 1 || !strings.Contains(r.stderr, c.msg) || strings.Contains(r.stderr, "usage:") {
			t.Fatalf("ckpt %v: exit %d, stderr %q; want exit 1 with %q", c.args, r.code, r.stderr, c.msg)
		}
	}
	// A database that was never migrated: say how to fix it.
	empty := pgtest.EmptyDB(t)
	r = runCLI(t, bin, []string{"DATABASE_URL=" + empty.URL}, "threads")
	if r.code != 1 || !strings.Contains(r.stderr, "is the database migrated?") {
		t.Fatalf("unmigrated database: %+v", r)
	}
	// Help is not an error.
	if r := runCLI(t, bin, nil, "help"); r.code != 0 || !strings.Contains(r.stdout, "log THREAD [--graph]") || !strings.Contains(r.stdout, "gc --policy P") {
		t.Fatalf("help: %+v", r)
	}
}

// tableDump renders every pgcheckpoint row of a thread (every column as
// stored, a delta as its delta, with the whole content of each checkpoint
// beside it; not the digests, which an import computes itself), to compare
// two databases without trusting the exporter.
func tableDump(t *testing.T, pool *pgxpool.Pool, thread string) string {
	t.Helper()
	var s string
	err := pool.QueryRow(context.Background(), `SELECT concat_ws(E'\n',
		(SELECT string_agg(to_jsonb(x)::text, E'\n' ORDER BY x.namespace) FROM pgcheckpoint.threads x WHERE x.thread_id = $1),
		(SELECT string_agg((to_jsonb(x) - ARRAY['messages_count', 'messages_digest', 'state_digests', 'tool_results_digests']
		                    || jsonb_build_object('whole', to_jsonb(m)))::text, E'\n' ORDER BY x.namespace, x.seq)
		 FROM pgcheckpoint.checkpoints x CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize(x.checkpoint_id) m
		 WHERE x.thread_id = $1),
		(SELECT string_agg(to_jsonb(x)::text, E'\n' ORDER BY x.namespace, x.checkpoint_seq, x.task_id, x.idx) FROM pgcheckpoint.pending_writes x WHERE x.thread_id = $1))`,
		thread).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCkptExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	src := setup(t)
	seedHistory(t, src, "run-1")
	branches, err := src.eng.Branches(src.ctx, "run-1")
	if err != nil || len(branches) != 1 {
		t.Fatalf("branches: %v %v", branches, err)
	}
	srcEnv := []string{"DATABASE_URL=" + src.db.URL}

	exported := map[string]string{}
	for _, thread := range []string{"run-1", branches[0].ThreadID} {
		r := runCLI(t, bin, srcEnv, "export", thread)
		if r.code != 0 || !strings.HasPrefix(r.stdout, `{"kind":"pgcheckpoint-export","format":3,`) || !strings.Contains(r.stderr, "exported thread") {
			t.Fatalf("export %s: %+v", thread, r)
		}
		exported[thread] = r.stdout
	}
	if !strings.Contains(exported["run-1"], `\u0000`) || !strings.Contains(exported["run-1"], `"rewound_to":`) ||
		!strings.Contains(exported["run-1"], `"merge_parent_id":`) || !strings.Contains(exported["run-1"], `"namespace":"sub"`) {
		t.Fatalf("the export lacks NULs, the rewind, the merge or the namespace:\n%s", exported["run-1"])
	}

	// Import into another database: from a file, and from stdin.
	dst := setup(t)
	dstEnv := []string{"DATABASE_URL=" + dst.db.URL}
	file := filepath.Join(t.TempDir(), "run-1.jsonl")
	if err := os.WriteFile(file, []byte(exported["run-1"]), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, bin, dstEnv, "import", file)
	if r.code != 0 || r.stdout != "imported 2 thread row(s), 5 checkpoint(s), 2 pending write(s)\n" {
		t.Fatalf("import file: %+v", r)
	}
	if r := runCLIStdin(t, bin, dstEnv, []byte(exported[branches[0].ThreadID]), "import", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"checkpoints": 2`) {
		t.Fatalf("import stdin: %+v", r)
	}

	// Every row is the same in both databases, stored the same way (deltas
	// as the same deltas; the digests, which an import computes itself, aside),
	// and exporting again gives the same bytes.
	for thread, want := range exported {
		if got, want := tableDump(t, dst.db.Pool, thread), tableDump(t, src.db.Pool, thread); got != want {
			t.Fatalf("rows of %s differ after the round trip:\n--- source\n%s\n--- imported\n%s", thread, want, got)
		}
		if r := runCLI(t, bin, dstEnv, "export", thread); r.code != 0 || r.stdout != want {
			t.Fatalf("re-export of %s differs:\n--- first\n%s\n--- again\n%s", thread, want, r.stdout)
		}
	}
	cp, err := dst.eng.Latest(dst.ctx, "run-1")
	if err != nil || !bytes.Contains(cp.Messages, []byte(`hi\u0000there \u0001`)) || len(cp.PendingWrites) != 2 {
		t.Fatalf("imported head: %+v %v", cp, err)
	}
	if !strings.Contains(exported["run-1"], `"storage":"delta"`) {
		t.Fatalf("the export holds no delta:\n%s", exported["run-1"])
	}

	// With --branches, one export carries the thread and its branch, and
	// an import gives back both, merge edge included.
	r = runCLI(t, bin, srcEnv, "export", "run-1", "--branches")
	if r.code != 0 || !strings.Contains(r.stderr, "3 thread row(s), 7 checkpoint(s)") {
		t.Fatalf("export --branches: %+v", r)
	}
	tree := setup(t)
	if r := runCLIStdin(t, bin, []string{"DATABASE_URL=" + tree.db.URL}, []byte(r.stdout), "import"); r.code != 0 {
		t.Fatalf("import of an export with branches: %+v", r)
	}
	for thread := range exported {
		if got, want := tableDump(t, tree.db.Pool, thread), tableDump(t, src.db.Pool, thread); got != want {
			t.Fatalf("rows of %s differ after a round trip with --branches:\n--- source\n%s\n--- imported\n%s", thread, want, got)
		}
	}

	// A second import of the same thread, or a broken file, writes nothing.
	before := dst.count(t)
	r = runCLI(t, bin, dstEnv, "import", file)
	if r.code != 1 || !strings.Contains(r.stderr, `thread "run-1" already exists`) || !strings.Contains(r.stderr, "nothing was imported") {
		t.Fatalf("import twice: %+v", r)
	}
	broken := strings.Replace(exported["run-1"], `"step":2,`, `"step":0,`, 1)
	other := setup(t)
	for _, bad := range []struct{ input, msg string }{
		{exported["run-1"][:len(exported["run-1"])-40], "record"},
		{broken, "step 0; both start at 1"},
		{`{"kind":"thread","thread_id":"x","namespace":"","metadata":{},"created_at":"2026-01-01T00:00:00Z"}` + "\n", "no export header"},
	} {
		r := runCLIStdin(t, bin, []string{"DATABASE_URL=" + other.db.URL}, []byte(bad.input), "import")
		noStackTrace(t, r)
		if r.code != 1 || !strings.Contains(r.stderr, bad.msg) {
			t.Fatalf("bad import: exit %d stderr %q, want %q", r.code, r.stderr, bad.msg)
		}
		if got := other.count(t); got != [3]int64{} {
			t.Fatalf("a failed import wrote %v", got)
		}
	}
	if got := dst.count(t); got != before {
		t.Fatalf("a refused import changed the rows: %v -> %v", before, got)
	}
	// Ids are global: the same checkpoints under a renamed thread conflict.
	renamed := enginetest.Reseal([]byte(strings.ReplaceAll(exported["run-1"], `"thread_id":"run-1"`, `"thread_id":"run-1-renamed"`)))
	r = runCLIStdin(t, bin, dstEnv, renamed, "import")
	if r.code != 1 || !strings.Contains(r.stderr, "already used") {
		t.Fatalf("import with used ids: %+v", r)
	}
	if got := dst.count(t); got != before {
		t.Fatalf("a conflicting import changed the rows: %v -> %v", before, got)
	}
}

func TestCkptDemo(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	d := pgtest.EmptyDB(t) // the demo migrates it
	env := []string{"DATABASE_URL=" + d.URL}
	r := runCLI(t, bin, env, "demo")
	if r.code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"schema    migrated: version", "CRASH", "task     search_flights skipped: its result is a pending write",
		"task     search_hotels  done", "rewind   to step 4: 2 steps back; nothing deleted",
		"branch   demo-trip-branch-hostel-", "merge    the branch into demo-trip: step 5",
		"prune    the merged branch keeps only its head: 3 checkpoints deleted",
		"*-.   step 5 manual (head)", "| *   step 8 tool_call [branch] (head) (earlier steps pruned)", "|   o step 6 tool_call", "*---' step 4 llm_call",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	// What it printed is what the database holds.
	pool := d.Pool
	var merges, branchRows int
	if err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM pgcheckpoint.checkpoints WHERE thread_id = 'demo-trip' AND merge_parent_id IS NOT NULL
		   AND checkpoint_id = pgcheckpoint.thread_head('demo-trip')),
		(SELECT count(*) FROM pgcheckpoint.checkpoints WHERE thread_id LIKE 'demo-trip-branch-hostel-%')`).Scan(&merges, &branchRows); err != nil {
		t.Fatal(err)
	}
	if merges != 1 || branchRows != 1 {
		t.Fatalf("after the demo: head is a merge %d, branch rows %d", merges, branchRows)
	}
	// It can run again on the same database.
	r = runCLI(t, bin, env, "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "(deleted 8 checkpoints of an earlier demo first)") {
		t.Fatalf("demo again: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// With no database and --container, the demo starts a container. It runs
// where the harness uses containers (PGCHECKPOINT_TEST_IMAGE set, as in
// CI's testcontainers pass).
func TestCkptDemoStartsAContainer(t *testing.T) {
	image := os.Getenv(pgtest.EnvImage)
	if image == "" {
		t.Skip("set " + pgtest.EnvImage + " to an image Docker can run (CI's testcontainers pass does)")
	}
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	r := runCLI(t, bin, envWithout("DATABASE_URL"), "demo", "--container")
	if r.code != 0 || !strings.Contains(r.stdout, "starting a throwaway Postgres container from "+image) ||
		!strings.Contains(r.stdout, "the container was removed") || !strings.Contains(r.stdout, "*-.   step 5 manual (head)") {
		t.Fatalf("demo with a container: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// With no database, the demo starts a throwaway Postgres from the server
// binaries installed here (found as a new user's machine would have them),
// and removes it at the end.
func TestCkptDemoStartsALocalPostgres(t *testing.T) {
	if _, err := localpg.Find(); err != nil {
		t.Fatalf("this test needs Postgres server binaries (CI installs postgresql-15): %v", err)
	}
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	r := runCLI(t, bin, envWithout("DATABASE_URL", localpg.EnvDirs), "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "starting a throwaway Postgres from the server binaries in") ||
		!strings.Contains(r.stdout, "database  postgres://") || !strings.Contains(r.stdout, fmt.Sprintf("schema    migrated: version %[1]d of %[1]d", schema.Latest())) ||
		!strings.Contains(r.stdout, "*-.   step 5 manual (head)") || !strings.Contains(r.stdout, "the throwaway Postgres was stopped and removed") {
		t.Fatalf("demo on a local Postgres: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// With no database, no Postgres binaries and no Docker image, the demo
// runs on a temporary SQLite file: the README's first command works on a
// machine with nothing installed but Go.
func TestCkptDemoWithNothingInstalled(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	env := append(envWithout("DATABASE_URL", localpg.EnvDirs, "PATH"), localpg.EnvDirs+"=", "PATH=/nonexistent")
	r := runCLI(t, bin, env, "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "no Postgres server installed: using a temporary SQLite file") ||
		!strings.Contains(r.stdout, "database  sqlite:") || !strings.Contains(r.stdout, "*-.   step 5 manual (head)") ||
		!strings.Contains(r.stdout, "the temporary SQLite file was removed") {
		t.Fatalf("demo with nothing installed: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	dir := strings.TrimSuffix(strings.TrimPrefix(lineWith(r.stdout, "database  sqlite:"), "database  sqlite:"), "/demo.db")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the demo left %s behind: %v", dir, err)
	}
}

// lineWith returns the first line of s that starts with prefix.
func lineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func TestCkptGC(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	b := setup(t)
	env := []string{"DATABASE_URL=" + b.db.URL}
	one := b.line(t, "one", 6)
	two := b.line(t, "two", 6)
	three := b.line(t, "three", 6)

	for _, args := range [][]string{
		{"gc"}, {"gc", "--policy", "keep_last_n:0"}, {"gc", "--policy", "shred"}, {"gc", "--policy", "keep_all", "--batch", "-1"},
		{"gc", "--policy", "keep_latest"}, {"gc", "--policy", "keep_none"}, // a sweep takes neither
	} {
		if r := runCLI(t, bin, env, args...); r.code != 2 || !strings.Contains(r.stderr, "gc") {
			t.Fatalf("%v: %+v, want exit 2", args, r)
		}
	}
	b.checkLine(t, "one", one, span(0, 6))

	r := runCLI(t, bin, env, "gc", "--policy", "keep_last_n:4", "--thread", "one")
	if r.code != 0 || r.stdout != "gc keep_last_n:4 on thread one: 2 checkpoint(s) deleted\n" {
		t.Fatalf("gc one thread: %+v", r)
	}
	b.checkLine(t, "one", one, span(2, 6))
	b.checkLine(t, "two", two, span(0, 6))

	// One thread, as JSON: the count and, for a policy that picks, which.
	r = runCLI(t, bin, env, "--json", "gc", "--policy", "keep_last_n:3", "--thread", "one")
	var picked struct {
		Policy      string `json:"policy"`
		Deleted     int64  `json:"deleted"`
		Checkpoints []struct {
			ID   uuid.UUID `json:"checkpoint_id"`
			Step int64     `json:"step"`
		} `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &picked); r.code != 0 || err != nil || picked.Policy != "keep_last_n:3" ||
		picked.Deleted != 1 || len(picked.Checkpoints) != 1 || picked.Checkpoints[0].ID != one[2] || picked.Checkpoints[0].Step != 3 {
		t.Fatalf("gc --json one thread: %+v %v", r, err)
	}
	b.checkLine(t, "one", one, span(3, 6))
	r = runCLI(t, bin, env, "--json", "gc", "--policy", "keep_latest", "--thread", "one")
	if r.code != 0 || !strings.Contains(r.stdout, `"deleted": 2`) || !strings.Contains(r.stdout, `"checkpoints": null`) {
		t.Fatalf("gc --json keep_latest: %+v", r)
	}
	b.checkLine(t, "one", one, span(5, 6))

	r = runCLI(t, bin, env, "--json", "gc", "--policy", "keep_last_n(2)", "--batch", "2")
	if r.code != 0 || !strings.Contains(r.stdout, `"deleted": 8`) || !strings.Contains(r.stdout, `"threads": 3`) || !strings.Contains(r.stdout, `"done": true`) {
		t.Fatalf("gc sweep: %+v", r)
	}
	b.checkLine(t, "one", one, span(5, 6))
	b.checkLine(t, "two", two, span(4, 6))
	b.checkLine(t, "three", three, span(4, 6))

	unreachable := []string{"DATABASE_URL=postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}
	if r := runCLI(t, bin, unreachable, "gc", "--policy", "keep_all"); r.code != 1 || strings.Contains(r.stderr, "goroutine") {
		t.Fatalf("unreachable database: %+v", r)
	}
}
