package enginetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// testNoSilentMisreadings: input that is almost right is either refused
// with a typed error or taken exactly, never quietly read as something
// else.
func testNoSilentMisreadings(t *testing.T, e *env) {
	e.snap(engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"a":1}`)})
	before := e.inventory("t")

	// Whitespace JSON does not know (vertical tab, form feed, NBSP) is not
	// trimmed away into an empty value: the value does not parse.
	for _, v := range []string{"\v", "\f", "\u00a0", "\v{}", "{}\f", " \u0085 "} {
		_, err := e.eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(v)})
		if !errors.Is(err, engine.ErrInvalidJSON) {
			t.Errorf("state %q: %v, want ErrInvalidJSON", v, err)
		}
		_, err = e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Metadata: json.RawMessage(v)})
		if !errors.Is(err, engine.ErrInvalidJSON) {
			t.Errorf("metadata filter %q: %v, want ErrInvalidJSON", v, err)
		}
	}
	e.unchanged("refused whitespace", before, "t")
	// JSON's own whitespace is fine, and an all-space value is the default.
	r := e.snap(engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(" \t\r\n{\"b\":2}\n "), ToolResults: json.RawMessage(" \n\t")})
	got := e.get(r.ID)
	jsonEqual(t, "state", got.State, []byte(`{"b":2}`))
	jsonEqual(t, "tool results", got.ToolResults, []byte(`{}`))

	// A bad namespace or cursor is bad input, not "invalid JSON".
	for name, call := range map[string]func() error{
		"list namespace": func() error {
			_, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Namespace: "a\x00b"})
			return err
		},
		"latest namespace": func() error { _, err := e.eng.LatestIn(e.ctx, "t", "bad\xff"); return err },
		"thread cursor":    func() error { _, err := e.eng.ListThreads(e.ctx, engine.ThreadListOptions{After: "x\x00"}); return err },
	} {
		if err := call(); !errors.Is(err, engine.ErrInvalidInput) || errors.Is(err, engine.ErrInvalidJSON) {
			t.Errorf("%s: %v, want ErrInvalidInput that is not ErrInvalidJSON", name, err)
		}
	}

	// Run ids with U+0001 (which the stores escape in JSON) find their
	// checkpoints.
	for _, run := range []string{"run\x01x", "\x01", "plain"} {
		meta, _ := json.Marshal(map[string]string{"run_id": run})
		e.snap(engine.SnapshotInput{ThreadID: "runs", Metadata: meta})
		e.snap(engine.SnapshotInput{ThreadID: "runs", Metadata: meta})
	}
	del, err := e.eng.DeleteCheckpoints(e.ctx, engine.ForRuns("run\x01x", "\x01"))
	if err != nil || del.Deleted != 4 {
		t.Fatalf("delete for runs with U+0001: %d deleted, %v; want 4", del.Deleted, err)
	}
	left, err := e.eng.ListCheckpoints(e.ctx, "runs", engine.ListOptions{})
	if err != nil || len(left) != 2 {
		t.Fatalf("after the delete: %d left, %v; want the 2 of run \"plain\"", len(left), err)
	}
}
