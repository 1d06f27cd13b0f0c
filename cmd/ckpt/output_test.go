package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// hostileText drives a terminal as it is: C1 CSI, a bidi override, a tag
// character (above U+FFFF), DEL, ESC, a tab and a newline.
const hostileText = "csi\u009b31m bidi\u202e tag\U000E0041 del\x7f esc\x1b tab\tnl\n"

// hostileDB is a SQLite file holding thread "t" (and a thread whose id
// could draw a row of its own) with hostileText in every text field.
func hostileDB(t *testing.T) (url string, written *engine.Checkpoint) {
	t.Helper()
	ctx := context.Background()
	url = "sqlite:" + filepath.Join(t.TempDir(), "hostile.db")
	eng, err := pgcheckpoint.Open(ctx, url, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	text, _ := json.Marshal(hostileText)
	res, err := eng.Snapshot(ctx, engine.SnapshotInput{
		ThreadID: "t", Summary: hostileText, Tags: []string{hostileText}, NextNode: hostileText,
		Messages:    json.RawMessage(`[{"role": "tool", "content": ` + string(text) + `}]`),
		State:       json.RawMessage(`{` + string(text) + `: ` + string(text) + `}`),
		ToolResults: json.RawMessage(`{"r": ` + string(text) + `}`),
		Metadata:    json.RawMessage(`{"m": ` + string(text) + `}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "forged\t1\tx\ny\t2"}); err != nil {
		t.Fatal(err)
	}
	written, err = eng.Get(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	return url, written
}

func runCkpt(t *testing.T, tty terminals, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), args, &out, &errOut, tty); err != nil {
		t.Fatalf("ckpt %q: %v\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// Every --json output is free of what a terminal acts on and decodes to
// what was written; a table draws one row per thread, whatever its id.
func TestOutputIsEscapedWithTheSameValues(t *testing.T) {
	t.Parallel()
	url, written := hostileDB(t)
	id := written.ID.String()
	for _, args := range [][]string{
		{"threads"}, {"log", "t"}, {"log", "t", "--graph"}, {"show", id}, {"diff", id, id}, {"tree", "t"},
	} {
		out, _ := runCkpt(t, terminals{}, append([]string{"--database", url, "--json"}, args...)...)
		if r := termsafe.First(out); r >= 0 {
			t.Errorf("ckpt --json %q writes %U:\n%q", args, r, out)
		}
		if !json.Valid([]byte(out)) {
			t.Errorf("ckpt --json %q is not JSON:\n%s", args, out)
		}
	}
	out, _ := runCkpt(t, terminals{}, "--database", url, "--json", "show", id)
	var shown struct {
		Summary     string          `json:"summary"`
		Tags        []string        `json:"tags"`
		NextNode    string          `json:"next_node"`
		Metadata    json.RawMessage `json:"metadata"`
		Messages    json.RawMessage `json:"messages"`
		State       json.RawMessage `json:"state"`
		ToolResults json.RawMessage `json:"tool_results"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Summary != hostileText || shown.NextNode != hostileText || !reflect.DeepEqual(shown.Tags, []string{hostileText}) {
		t.Errorf("show --json changed the text: %+v", shown)
	}
	for name, pair := range map[string][2]json.RawMessage{
		"metadata": {shown.Metadata, written.Metadata}, "messages": {shown.Messages, written.Messages},
		"state": {shown.State, written.State}, "tool results": {shown.ToolResults, written.ToolResults},
	} {
		if !sameJSON(pair[0], pair[1]) {
			t.Errorf("show --json: %s %s, written %s", name, pair[0], pair[1])
		}
	}
	out, _ = runCkpt(t, terminals{}, "--json", "--database", url, "threads")
	var threads []struct {
		ThreadID string `json:"thread_id"`
	}
	if err := json.Unmarshal([]byte(out), &threads); err != nil || len(threads) != 2 || threads[0].ThreadID != "forged\t1\tx\ny\t2" {
		t.Errorf("threads --json: %+v %v", threads, err)
	}

	// The table: a header and one row per thread, the id's tab and
	// newline shown as escapes.
	out, _ = runCkpt(t, terminals{}, "--database", url, "threads")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || strings.Contains(out, "\t") || !strings.Contains(lines[1], `forged\u00091\u0009x\u000ay\u00092`) {
		t.Errorf("threads draws %d lines, want a header and 2 rows:\n%s", len(lines), out)
	}
	out, _ = runCkpt(t, terminals{}, "--database", url, "diff", id, id)
	if r := termsafe.First(out); r >= 0 {
		t.Errorf("diff writes %U:\n%q", r, out)
	}
}

// An export to a file or a pipe is exact and imports as the same content;
// to a terminal it is escaped for reading, which its trailer's digest (taken
// over the exact bytes) then refuses as an import.
func TestExportToATerminalIsEscaped(t *testing.T) {
	t.Parallel()
	url, written := hostileDB(t)
	exact, _ := runCkpt(t, terminals{}, "--database", url, "export", "t")
	if !strings.Contains(exact, "csi\u009b31m bidi\u202e") {
		t.Errorf("an export to a pipe is not exact:\n%q", exact)
	}
	shown, _ := runCkpt(t, terminals{stdout: true, stderr: true}, "--database", url, "export", "t")
	if r := termsafe.First(shown); r >= 0 {
		t.Fatalf("an export to a terminal writes %U:\n%q", r, shown)
	}
	if shown == exact {
		t.Fatal("an export to a terminal is not escaped")
	}
	dir := t.TempDir()
	shownFile, exactFile := filepath.Join(dir, "shown.jsonl"), filepath.Join(dir, "exact.jsonl")
	if err := os.WriteFile(shownFile, []byte(shown), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exactFile, []byte(exact), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := "sqlite:" + filepath.Join(t.TempDir(), "dst.db")
	eng, err := pgcheckpoint.Open(context.Background(), dst, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	var refusal bytes.Buffer
	if err := run(context.Background(), []string{"--database", dst, "import", shownFile}, io.Discard, &refusal, terminals{}); err == nil ||
		!strings.Contains(err.Error()+refusal.String(), "SHA-256") {
		t.Errorf("the export escaped for a terminal imports: %v\n%s", err, refusal.String())
	}
	runCkpt(t, terminals{}, "--database", dst, "import", exactFile)
	out, _ := runCkpt(t, terminals{}, "--database", dst, "--json", "show", written.ID.String())
	var got engine.Checkpoint
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw["summary"], &got.Summary)
	json.Unmarshal(raw["next_node"], &got.NextNode)
	if got.Summary != hostileText || got.NextNode != hostileText || !sameJSON(raw["messages"], written.Messages) ||
		!sameJSON(raw["state"], written.State) || !sameJSON(raw["metadata"], written.Metadata) || !sameJSON(raw["tool_results"], written.ToolResults) {
		t.Errorf("the export imports as other content:\n%s", out)
	}
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// A trigger is one of six words when the engine or a SQL function writes
// it, but a row changed by hand may hold anything: the table and the
// Mermaid flowchart show it on its line, escaped, like every other field.
func TestForgedTriggerStaysOnItsLine(t *testing.T) {
	t.Parallel()
	url, _ := hostileDB(t)
	conn, err := sql.Open("sqlite", strings.TrimPrefix(url, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	conn.SetMaxOpenConns(1) // one connection: the pragma holds for the update
	forged := "manual\"]\n  click c0 href \"https://example.invalid/\"\n  fake[\"\tx\x1b[2J"
	// The file's check refuses it; a file from elsewhere, or a Postgres
	// table changed by hand (it has no such check), may hold it.
	if _, err := conn.Exec(`PRAGMA ignore_check_constraints = ON`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(`UPDATE checkpoints SET "trigger" = ? WHERE thread_id = 't'`, forged); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	out, _ := runCkpt(t, terminals{}, "--database", url, "log", "t")
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 2 || termsafe.First(out) >= 0 || strings.Contains(out, "\t") {
		t.Errorf("log draws %d lines, want a header and a row, escaped:\n%q", len(lines), out)
	}
	out, _ = runCkpt(t, terminals{}, "--database", url, "tree", "t", "--format", "mermaid")
	if strings.Contains(out, "\n  click") || strings.Contains(out, "\n  fake") || termsafe.First(out) >= 0 {
		t.Errorf("the Mermaid flowchart holds the forged trigger's lines:\n%s", out)
	}
}

// gc's hint to go on after --budget stops it is a command a user pastes
// into a shell: each thread id (agent text) must stay one word there and
// run nothing, whatever the locale, and the hint keeps the database, the
// tenant, --dry-run and the batch and budget (without them it would sweep
// another tenant, or delete). Here bash itself splits each hint into words.
func TestGCHintIsOneShellWordPerArgument(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, id := range []string{
		"b; touch pwned #",
		"b'q\\ $x `y` \"z\" * !!",
		"b\x1b[2J\u202e\u0085 tab\there \U000e0001 \ufffd",
		"b\nnewline",
	} {
		ctx := context.Background()
		url := "sqlite:" + filepath.Join(t.TempDir(), "gc'; touch pwned; '.db")
		eng, err := pgcheckpoint.Open(ctx, url, pgcheckpoint.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		acme, err := eng.ForTenant("acme")
		if err != nil {
			t.Fatal(err)
		}
		for _, thread := range []string{"a", id, "c"} {
			if _, err := acme.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread}); err != nil {
				t.Fatalf("thread %q: %v", thread, err)
			}
		}
		eng.Close()
		out, _ := runCkpt(t, terminals{}, "--database", url, "--tenant", "acme", "gc", "--policy", "keep_last_n:1", "--after", "a", "--batch", "1", "--budget", "1ns", "--dry-run")
		_, hint, ok := strings.Cut(out, "to go on: ")
		if !ok {
			t.Fatalf("no hint for %q:\n%s", id, out)
		}
		hint = strings.TrimSuffix(hint, "\n")
		if strings.Contains(hint, "\n") || termsafe.First(hint) >= 0 {
			t.Errorf("the hint for %q is not one safe line: %q", id, hint)
		}
		want := []string{"ckpt", "--database", url, "--tenant", "acme", "gc", "--policy", "keep_last_n:1", "--after", id, "--batch", "1", "--budget", "1ns", "--dry-run"}
		for _, env := range [][]string{{"LANG=C.UTF-8"}, {"LC_ALL=C"}, {}} {
			dir := t.TempDir()
			cmd := exec.Command(bash, "-c", "set -- "+hint+"\nprintf '%s\\0' \"$@\"")
			cmd.Dir, cmd.Env = dir, env
			words, err := cmd.Output()
			if err != nil {
				t.Fatalf("bash on %q: %v", hint, err)
			}
			if got := strings.Split(strings.TrimSuffix(string(words), "\x00"), "\x00"); !slices.Equal(got, want) {
				t.Errorf("bash (%v) reads the hint %q as %q; want %q", env, hint, got, want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Errorf("the hint %q ran something: %v", hint, entries)
			}
		}
	}
}

// gc --thread prunes a thread whose checkpoints are all in a sub-graph's
// namespace (it said "not found", looking for a head in the root one), and
// still says not found for a thread that does not exist.
func TestGCThreadOfSubGraphsAlone(t *testing.T) {
	ctx := context.Background()
	url := "sqlite:" + filepath.Join(t.TempDir(), "gc.db")
	eng, err := pgcheckpoint.Open(ctx, url, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "nsonly", Namespace: "sub"}); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := runCkpt(t, terminals{}, "--database", url, "gc", "--policy", "keep_last_n:1", "--thread", "nsonly", "--yes")
	if !strings.Contains(out, "4 checkpoint(s) deleted") {
		t.Errorf("gc --thread nsonly:\n%s", out)
	}
	list, err := eng.ListCheckpoints(ctx, "nsonly", engine.ListOptions{Namespace: "sub"})
	if err != nil || len(list) != 1 {
		t.Errorf("after gc the namespace holds %d checkpoints (%v); want 1", len(list), err)
	}
	eng.Close()
	var errOut bytes.Buffer
	err = run(ctx, []string{"--database", url, "gc", "--policy", "keep_last_n:1", "--thread", "nothere", "--yes"}, io.Discard, &errOut, terminals{})
	if !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("gc --thread of an unknown thread: %v", err)
	}
}
