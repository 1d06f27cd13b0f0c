package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// hostile is agent text that would drive a terminal if printed as it is.
var hostile = []string{
	"\x1b]0;owned\x07\x1b[2J\x1b[H", // retitle, clear, home
	"over\rwritten",                 // carriage return
	"\u202etxt.exe",                 // right-to-left override
	"\u2066isolate\u2069",           // bidi isolate
	"csi\u009b31m",                  // C1 control
	"zero\u200bwidth",               // invisible
	"bell\x07del\x7fbs\x08",         // C0 and DEL
	"line\u2028separator",           // Unicode line separator
}

// terminalUnsafe returns the first byte sequence in out that a terminal
// would act on or hide: C0 controls but tab and newline, DEL, C1, bidi and
// other format characters, line separators, invalid UTF-8.
func terminalUnsafe(out string) string {
	for i, r := range out {
		switch {
		case r == utf8.RuneError:
			return fmt.Sprintf("invalid UTF-8 at %d", i)
		case r == '\t' || r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
			r == 0x2028, r == 0x2029, r == 0xfeff, r == 0x061c:
			return fmt.Sprintf("%U at %d", r, i)
		}
	}
	return ""
}

// Agent text with terminal controls, written through the engine into
// every field ckpt shows, reaches no terminal as it is: every human-facing
// output shows it escaped; --json gives back the same values, the
// characters a terminal acts on written as JSON escapes.
func TestCkptEscapesAgentText(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	url := "sqlite:" + filepath.Join(t.TempDir(), "hostile.db")
	ctx := context.Background()
	eng, err := pgcheckpoint.Open(ctx, url, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	thread := "run-" + hostile[0]
	var ids []string
	for i, h := range hostile {
		msgs, _ := json.Marshal([]map[string]string{{"role": "tool" + h, "content": h}})
		state, _ := json.Marshal(map[string]string{"key" + h: h, fmt.Sprint("n", i): h})
		in := engine.SnapshotInput{ThreadID: thread, Messages: msgs, State: state, Tags: []string{"tag" + h}, NextNode: "node" + h}
		if i%2 == 1 {
			in.Summary = "summary " + h
		}
		res, err := eng.Snapshot(ctx, in)
		if err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
		ids = append(ids, res.ID.String())
	}
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Namespace: "ns" + hostile[2]}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Branch(ctx, uuid.MustParse(ids[3]), "b"+hostile[4]); err != nil {
		t.Fatal(err)
	}
	// A thread id that would draw a row of its own in a table.
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "tab\tand\nforged\t9\trow"}); err != nil {
		t.Fatal(err)
	}
	eng.Close()

	env := envWithout("DATABASE_URL")
	human := [][]string{
		{"threads"},
		{"log", thread},
		{"log", thread, "--graph"},
		{"show", ids[1]},
		{"diff", ids[0], ids[len(ids)-1]},
		{"tree", thread},
		{"tree", thread, "--format", "mermaid"},
		{"log", thread + "-missing\x1b[2J"}, // an error that names the thread
		{"branch", ids[2], "x" + hostile[1]},
		{"rewind", ids[4]},
	}
	for _, args := range human {
		r := runCLI(t, bin, env, append([]string{"--database", url}, args...)...)
		if bad := terminalUnsafe(r.stdout + r.stderr); bad != "" {
			t.Errorf("ckpt %q writes %s:\n%q\n%q", args, bad, r.stdout, r.stderr)
		}
		if args[0] == "threads" && (strings.Count(r.stdout, "\n") != 4 || strings.Contains(r.stdout, "\nforged")) {
			t.Errorf("ckpt threads draws other rows than a header and one per thread (3):\n%s", r.stdout)
		}
		if r.code == 0 && !strings.Contains(r.stdout, `\u`) && args[0] != "rewind" {
			t.Errorf("ckpt %q shows no escape at all:\n%s", args, r.stdout)
		}
	}

	// --json holds the same values: the strings decode to what was written,
	// and nothing a terminal acts on is written as it is.
	r := runCLI(t, bin, env, "--database", url, "--json", "show", ids[1])
	var shown struct {
		Summary  string          `json:"summary"`
		NextNode string          `json:"next_node"`
		Tags     []string        `json:"tags"`
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatalf("show --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	if bad := terminalUnsafe(r.stdout); bad != "" {
		t.Errorf("show --json writes %s:\n%q", bad, r.stdout)
	}
	if shown.Summary != "summary "+hostile[1] || shown.NextNode != "node"+hostile[1] || len(shown.Tags) != 1 || shown.Tags[0] != "tag"+hostile[1] {
		t.Errorf("show --json changed the text: %+v", shown)
	}
	r = runCLI(t, bin, env, "--database", url, "--json", "threads")
	if bad := terminalUnsafe(r.stdout); bad != "" {
		t.Errorf("threads --json writes %s:\n%q", bad, r.stdout)
	}
	var threads []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &threads); err != nil {
		t.Fatalf("threads --json: %v\n%s", err, r.stdout)
	}
	found := false
	for _, th := range threads {
		found = found || fmt.Sprint(th["thread_id"]) == thread
	}
	if !found {
		t.Errorf("threads --json does not give back thread %q exactly:\n%s", thread, r.stdout)
	}
}
