package enginetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The tests of this file hold every thread-level call that takes a
// namespace to it: on a thread with checkpoints in the root namespace and
// in "sub", the call given "sub" acts on "sub" alone, the root form on the
// root alone, and a malformed namespace writes nothing.

// twoLines writes n checkpoints in the root namespace of thread and n in
// "sub", alternately, so both hold steps 1..n; checkpoint i of namespace ns
// has state {"ns": ns, "i": i} and messages ns0..nsi. It returns the ids
// of each line, oldest first.
func (e *env) twoLines(thread string, n int) (root, sub []uuid.UUID) {
	e.t.Helper()
	for i := range n {
		for _, ns := range []string{"", "sub"} {
			msgs, state := nsContent(ns, i)
			res := e.snap(engine.SnapshotInput{ThreadID: thread, Namespace: ns, Messages: msgs, State: state})
			if res.Namespace != ns || res.Step != int64(i+1) {
				e.t.Fatalf("checkpoint %d of namespace %q: %+v", i, ns, res)
			}
			if ns == "" {
				root = append(root, res.ID)
			} else {
				sub = append(sub, res.ID)
			}
		}
	}
	return root, sub
}

// nsContent is what checkpoint i of namespace ns of twoLines holds.
func nsContent(ns string, i int) (msgs, state json.RawMessage) {
	var m []map[string]string
	for j := range i + 1 {
		m = append(m, map[string]string{"role": "user", "content": fmt.Sprintf("%s%d", ns, j)})
	}
	return mustJSON(m), mustJSON(map[string]any{"ns": ns, "i": i})
}

// lineOf describes one namespace of a thread, its head and its checkpoints
// with their steps and content, so that a test can tell it was left as it
// was.
func (e *env) lineOf(thread, namespace string) string {
	e.t.Helper()
	var b strings.Builder
	head, err := e.eng.LatestIn(e.ctx, thread, namespace)
	switch {
	case err == nil:
		fmt.Fprintf(&b, "head %s\n", head.ID)
	case errors.Is(err, engine.ErrNotFound):
		b.WriteString("no head\n")
	default:
		e.t.Fatalf("head of %q/%q: %v", thread, namespace, err)
	}
	for _, c := range listAll(e.t, e.ctx, e.eng, thread, namespace) {
		cp := e.get(c.ID)
		fmt.Fprintf(&b, "%s step %d parent %s %s %s\n", c.ID, c.Step, c.ParentID, cp.Messages, cp.State)
	}
	return b.String()
}

// sameLine fails the test unless namespace's line is still before.
func (e *env) sameLine(what, thread, namespace, before string) {
	e.t.Helper()
	if after := e.lineOf(thread, namespace); after != before {
		e.t.Fatalf("%s changed namespace %q of %q:\n--- before\n%s--- after\n%s", what, namespace, thread, before, after)
	}
}

// headIn returns the head of a namespace; any error is fatal.
func (e *env) headIn(thread, namespace string) *engine.Checkpoint {
	e.t.Helper()
	cp, err := e.eng.LatestIn(e.ctx, thread, namespace)
	if err != nil {
		e.t.Fatalf("latest of %q/%q: %v", thread, namespace, err)
	}
	return cp
}

func testRewindToStepIn(t *testing.T, e *env) {
	root, sub := e.twoLines("t", 4)
	rootLine := e.lineOf("t", "")
	res, err := e.eng.RewindToStepIn(e.ctx, "t", "sub", 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Checkpoint.ID != sub[1] || res.Namespace != "sub" || res.StepsBack != 2 || res.Checkpoints != 4 {
		t.Fatalf("rewind of sub to step 2: %+v, want checkpoint %s", res, sub[1])
	}
	if got := e.headIn("t", "sub"); got.ID != sub[1] {
		t.Fatalf("head of sub: %s, want %s", got.ID, sub[1])
	}
	e.sameLine("RewindToStepIn sub", "t", "", rootLine)

	// The step is looked for on sub's head line: after a write from the
	// rewound-to checkpoint, step 3 is that write, not sub[2].
	msgs, state := nsContent("sub", 9)
	fork := e.snap(engine.SnapshotInput{ThreadID: "t", Namespace: "sub", Messages: msgs, State: state})
	if res, err = e.eng.RewindToStepIn(e.ctx, "t", "sub", 3); err != nil || res.Checkpoint.ID != fork.ID {
		t.Fatalf("rewind of sub to step 3 after a fork: %+v %v, want %s", res, err, fork.ID)
	}
	e.sameLine("RewindToStepIn sub", "t", "", rootLine)

	// The root form acts on the root alone.
	subLine := e.lineOf("t", "sub")
	if res, err = e.eng.RewindToStep(e.ctx, "t", 3); err != nil || res.Checkpoint.ID != root[2] || res.Namespace != "" {
		t.Fatalf("rewind of the root to step 3: %+v %v, want %s", res, err, root[2])
	}
	if got := e.head("t"); got.ID != root[2] {
		t.Fatalf("root head: %s, want %s", got.ID, root[2])
	}
	e.sameLine("RewindToStep", "t", "sub", subLine)

	// A namespace with no checkpoint has no line to rewind.
	if _, err := e.eng.RewindToStepIn(e.ctx, "t", "empty", 1); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("rewind of an empty namespace: %v", err)
	}
}

func testTimeTravelPointsIn(t *testing.T, e *env) {
	root, sub := e.twoLines("t", 5)
	ids := func(infos []engine.CheckpointInfo) []uuid.UUID {
		out := make([]uuid.UUID, len(infos))
		for i, c := range infos {
			if c.Namespace != infos[0].Namespace {
				t.Fatalf("points of two namespaces: %+v", infos)
			}
			out[i] = c.ID
		}
		return out
	}
	newestFirst := func(line []uuid.UUID) []uuid.UUID {
		out := make([]uuid.UUID, len(line))
		for i, id := range line {
			out[len(line)-1-i] = id
		}
		return out
	}
	for _, c := range []struct {
		ns   string
		want []uuid.UUID
	}{{"", newestFirst(root)}, {"sub", newestFirst(sub)}} {
		var got []uuid.UUID
		var before uuid.UUID
		for range 3 { // pages of 2: 2, 2, 1
			page, err := e.eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{Namespace: c.ns, Limit: 2, Before: before})
			if err != nil {
				t.Fatalf("points of %q: %v", c.ns, err)
			}
			got = append(got, ids(page)...)
			before = page[len(page)-1].ID
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("points of %q:\n got  %v\n want %v", c.ns, got, c.want)
		}
	}
	// The call without a namespace lists the root's line.
	page, err := e.eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{})
	if err != nil || len(page) != 5 || page[0].ID != root[4] {
		t.Fatalf("points with no namespace: %v %v", ids(page), err)
	}
	if _, err := e.eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{Namespace: "empty"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("points of an empty namespace: %v", err)
	}
	// A cursor from the other namespace is not on the line.
	if _, err := e.eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{Namespace: "sub", Before: root[4]}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("points of sub before a root checkpoint: %v", err)
	}
	if _, err := e.eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{Before: sub[4]}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("points of the root before a sub checkpoint: %v", err)
	}
}

func testResumeIn(t *testing.T, e *env) {
	root, sub := e.twoLines("t", 2)
	if _, err := e.eng.PutWrites(e.ctx, sub[1], "s", []engine.Write{{Channel: "out", Value: json.RawMessage(`"sub"`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.PutWrites(e.ctx, root[1], "r", []engine.Write{{Channel: "out", Value: json.RawMessage(`"root"`)}}); err != nil {
		t.Fatal(err)
	}
	r, err := e.eng.ResumeIn(e.ctx, "t", "sub")
	if err != nil {
		t.Fatal(err)
	}
	_, state := nsContent("sub", 1)
	if r.ID != sub[1] || r.Namespace != "sub" || !r.TaskDone("s") || r.TaskDone("r") || len(r.Done) != 1 {
		t.Fatalf("resume of sub: %+v", r)
	}
	jsonEqual(t, "state resumed in sub", r.State, state)
	if r, err = e.eng.Resume(e.ctx, "t"); err != nil || r.ID != root[1] || !r.TaskDone("r") || r.TaskDone("s") {
		t.Fatalf("resume of the root: %+v %v", r, err)
	}
	if _, err := e.eng.ResumeIn(e.ctx, "t", "empty"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("resume of an empty namespace: %v", err)
	}
}

func testMergeBranchIn(t *testing.T, e *env) {
	root, sub := e.twoLines("t", 3)
	// A branch forked from sub lives in sub; it gets a checkpoint of its own.
	br, err := e.eng.Branch(e.ctx, sub[1], "b")
	if err != nil {
		t.Fatal(err)
	}
	brState := json.RawMessage(`{"ns": "sub", "branch": true}`)
	brHead := e.snap(engine.SnapshotInput{ThreadID: br.ThreadID, Namespace: "sub", State: brState})
	if brHead.ParentID != br.CheckpointID {
		t.Fatalf("branch checkpoint in sub: %+v, want parent %s", brHead, br.CheckpointID)
	}

	// The root form finds no branch head in the root, and writes nothing.
	before := e.inventory()
	if _, err := e.eng.MergeBranch(e.ctx, br.ThreadID, "t"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("merge of a branch with no root checkpoint: %v", err)
	}
	e.unchanged("MergeBranch of a sub branch", before)

	rootLine := e.lineOf("t", "")
	m, err := e.eng.MergeBranchIn(e.ctx, br.ThreadID, "t", "sub")
	if err != nil {
		t.Fatal(err)
	}
	if m.ThreadID != "t" || m.ParentID != sub[2] || m.MergeParentID != brHead.ID || m.Step != 4 {
		t.Fatalf("merge in sub: %+v, want parent %s, merge parent %s, step 4", m, sub[2], brHead.ID)
	}
	got := e.headIn("t", "sub")
	if got.ID != m.CheckpointID || got.Namespace != "sub" || got.MergeParentID != brHead.ID {
		t.Fatalf("head of sub after the merge: %+v", got.CheckpointInfo)
	}
	jsonEqual(t, "merged state", got.State, brState)
	e.sameLine("MergeBranchIn sub", "t", "", rootLine)

	// The root form merges a root branch into the root alone.
	rootBr, err := e.eng.Branch(e.ctx, root[2], "r")
	if err != nil {
		t.Fatal(err)
	}
	subLine := e.lineOf("t", "sub")
	if m, err = e.eng.MergeBranch(e.ctx, rootBr.ThreadID, "t"); err != nil || m.ParentID != root[2] || m.MergeParentID != rootBr.CheckpointID {
		t.Fatalf("merge in the root: %+v %v", m, err)
	}
	if got := e.head("t"); got.ID != m.CheckpointID {
		t.Fatalf("root head after the merge: %s, want %s", got.ID, m.CheckpointID)
	}
	e.sameLine("MergeBranch", "t", "sub", subLine)
	e.checkTree()

	// Branches lists both, each with the namespace its line is in.
	branches, err := e.eng.Branches(e.ctx, "t")
	if err != nil || len(branches) != 2 {
		t.Fatalf("branches: %+v %v", branches, err)
	}
	for _, b := range branches {
		want := map[string]string{br.ThreadID: "sub", rootBr.ThreadID: ""}[b.ThreadID]
		if b.Namespace != want {
			t.Fatalf("branch %q: namespace %q, want %q", b.ThreadID, b.Namespace, want)
		}
	}
}

func testClearMemoryIn(t *testing.T, e *env) {
	_, sub := e.twoLines("t", 2)
	rootLine := e.lineOf("t", "")
	res, err := e.eng.ClearMemoryIn(e.ctx, "t", "sub")
	if err != nil {
		t.Fatal(err)
	}
	if res.Namespace != "sub" || res.ParentID != sub[1] || res.Step != 3 {
		t.Fatalf("marker in sub: %+v", res)
	}
	marker := e.headIn("t", "sub")
	if marker.ID != res.ID {
		t.Fatalf("head of sub: %s, want the marker %s", marker.ID, res.ID)
	}
	jsonEqual(t, "marker messages", marker.Messages, []byte(`[]`))
	jsonEqual(t, "marker state", marker.State, []byte(`{}`))
	found, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Namespace: "sub", Metadata: json.RawMessage(`{"memory_cleared": true}`), Limit: 1})
	if err != nil || len(found) != 1 || found[0].ID != res.ID {
		t.Fatalf("marker found in sub: %v %v", found, err)
	}
	e.sameLine("ClearMemoryIn sub", "t", "", rootLine)

	subLine := e.lineOf("t", "sub")
	res, err = e.eng.ClearMemory(e.ctx, "t")
	if err != nil || res.Namespace != "" || e.head("t").ID != res.ID {
		t.Fatalf("marker in the root: %+v %v", res, err)
	}
	e.sameLine("ClearMemory", "t", "sub", subLine)
}

func testBeforeStepIn(t *testing.T, e *env) {
	root, sub := e.twoLines("t", 4)
	rootLine := e.lineOf("t", "")
	r, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStepIn("t", "sub", 3))
	if err != nil || r.Deleted != 2 {
		t.Fatalf("delete before step 3 of sub: %d %v, want 2", r.Deleted, err)
	}
	left := oldestFirst(listAll(t, e.ctx, e.eng, "t", "sub"))
	if fmt.Sprint(left) != fmt.Sprint(sub[2:]) {
		t.Fatalf("sub after the delete: %v, want %v", left, sub[2:])
	}
	for i, id := range sub[2:] {
		msgs, state := nsContent("sub", i+2)
		cp := e.get(id)
		jsonEqual(t, "messages of a kept sub checkpoint", cp.Messages, msgs)
		jsonEqual(t, "state of a kept sub checkpoint", cp.State, state)
	}
	e.sameLine("BeforeStepIn sub", "t", "", rootLine)

	subLine := e.lineOf("t", "sub")
	if r, err = e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("t", 4)); err != nil || r.Deleted != 3 {
		t.Fatalf("delete before step 4 of the root: %d %v, want 3", r.Deleted, err)
	}
	if left := oldestFirst(listAll(t, e.ctx, e.eng, "t", "")); len(left) != 1 || left[0] != root[3] {
		t.Fatalf("root after the delete: %v, want %v", left, root[3:])
	}
	e.sameLine("DeleteBefore", "t", "sub", subLine)
}

func testAgentHelpersIn(t *testing.T, e *env) {
	_, sub := e.twoLines("t", 2)
	rootLine := e.lineOf("t", "")

	ran := false
	if err := e.eng.ScopeIn(e.ctx, "t", "sub", map[string]int{"k": 1}, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("scope in sub: %v, ran %v", err, ran)
	}
	echo := engine.WrapToolIn(e.eng, "t", "sub", "echo", func(_ context.Context, s string) (string, error) { return s, nil })
	if out, err := echo(e.ctx, "hi"); err != nil || out != "hi" {
		t.Fatalf("tool in sub: %q %v", out, err)
	}
	got := oldestFirst(listAll(t, e.ctx, e.eng, "t", "sub"))
	if len(got) != 6 || got[1] != sub[1] {
		t.Fatalf("sub after a scope and a tool call: %d checkpoints, want 6", len(got))
	}
	// Each carries sub's head forward: its messages, then the call's.
	prev := sub[1]
	for i, id := range got[2:] {
		cp := e.get(id)
		if cp.ParentID != prev || cp.Namespace != "sub" {
			t.Fatalf("checkpoint %d in sub: parent %s namespace %q, want parent %s", i, cp.ParentID, cp.Namespace, prev)
		}
		var msgs []map[string]any
		if err := json.Unmarshal(cp.Messages, &msgs); err != nil || len(msgs) < 2 || msgs[0]["content"] != "sub0" {
			t.Fatalf("messages of checkpoint %d in sub: %s", i, cp.Messages)
		}
		prev = id
	}
	e.sameLine("ScopeIn and WrapToolIn", "t", "", rootLine)

	iv, err := e.eng.StartInterval(e.ctx, engine.IntervalOptions{ThreadID: "t", Namespace: "sub", Every: 2 * time.Millisecond,
		Capture: func(context.Context) (engine.SnapshotInput, error) {
			// The snapshotter sets the namespace, whatever Capture says.
			return engine.SnapshotInput{Namespace: "elsewhere", State: json.RawMessage(`{"tick": true}`)}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an interval snapshot", func() bool { return iv.Written() >= 1 })
	if err := iv.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(listAll(t, e.ctx, e.eng, "t", "sub")); int64(n) != 6+iv.Written() {
		t.Fatalf("sub after %d interval snapshots: %d checkpoints", iv.Written(), n)
	}
	if n := len(listAll(t, e.ctx, e.eng, "t", "elsewhere")); n != 0 {
		t.Fatalf("interval snapshots went to Capture's namespace: %d", n)
	}
	e.sameLine("StartInterval in sub", "t", "", rootLine)

	// The forms without a namespace write on the root.
	subLine := e.lineOf("t", "sub")
	if err := e.eng.Scope(e.ctx, "t", nil, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.WrapTool(e.eng, "t", "echo", func(_ context.Context, s string) (string, error) { return s, nil })(e.ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if n := len(listAll(t, e.ctx, e.eng, "t", "")); n != 6 {
		t.Fatalf("root after a scope and a tool call: %d checkpoints, want 6", n)
	}
	e.sameLine("Scope and WrapTool", "t", "sub", subLine)
}

// Every call that takes a namespace refuses a malformed one with
// ErrInvalidInput and writes nothing; the agent helpers, which never fail
// their caller, count and report the failure instead.
func testNamespaceBadInput(t *testing.T, e *env) {
	_, sub := e.twoLines("t", 3)
	br, err := e.eng.Branch(e.ctx, sub[1], "b")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var failures []error
	eng := e.open(engine.Config{
		DeltaMinBytes: -1,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnSnapshotFailure: func(_ context.Context, _ engine.SnapshotInput, err error) {
			mu.Lock()
			defer mu.Unlock()
			failures = append(failures, err)
		},
	})
	for _, ns := range []string{"a\x00b", strings.Repeat("n", 256), "\xff"} {
		cases := []struct {
			name string
			call func() error
		}{
			{"LatestIn", func() error { _, err := eng.LatestIn(e.ctx, "t", ns); return err }},
			{"ListCheckpoints", func() error {
				_, err := eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Namespace: ns})
				return err
			}},
			{"RewindToStepIn", func() error { _, err := eng.RewindToStepIn(e.ctx, "t", ns, 1); return err }},
			{"TimeTravelPoints", func() error {
				_, err := eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{Namespace: ns})
				return err
			}},
			{"ResumeIn", func() error { _, err := eng.ResumeIn(e.ctx, "t", ns); return err }},
			{"MergeBranchIn", func() error { _, err := eng.MergeBranchIn(e.ctx, br.ThreadID, "t", ns); return err }},
			{"ClearMemoryIn", func() error { _, err := eng.ClearMemoryIn(e.ctx, "t", ns); return err }},
			{"BeforeStepIn", func() error { _, err := eng.DeleteCheckpoints(e.ctx, engine.BeforeStepIn("t", ns, 3)); return err }},
			{"StartInterval", func() error {
				iv, err := eng.StartInterval(e.ctx, engine.IntervalOptions{ThreadID: "t", Namespace: ns, Every: time.Millisecond,
					Capture: func(context.Context) (engine.SnapshotInput, error) { return engine.SnapshotInput{}, nil }})
				if err == nil {
					iv.Close()
				}
				return err
			}},
			{"Snapshot", func() error {
				_, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", Namespace: ns})
				return err
			}},
		}
		for _, c := range cases {
			before := e.inventory()
			if err := c.call(); !errors.Is(err, engine.ErrInvalidInput) {
				t.Errorf("%s with namespace %q: err = %v, want ErrInvalidInput", c.name, ns, err)
			}
			e.unchanged(fmt.Sprintf("%s with namespace %q", c.name, ns), before)
		}

		// ScopeIn and WrapToolIn run their function and report each of
		// their two snapshots as a failure.
		before := e.inventory()
		mu.Lock()
		failures = nil
		mu.Unlock()
		count := eng.SnapshotFailures()
		ran := 0
		if err := eng.ScopeIn(e.ctx, "t", ns, nil, func(context.Context) error { ran++; return nil }); err != nil {
			t.Errorf("scope with namespace %q: %v", ns, err)
		}
		if _, err := engine.WrapToolIn(eng, "t", ns, "echo", func(_ context.Context, s string) (string, error) { ran++; return s, nil })(e.ctx, "x"); err != nil {
			t.Errorf("tool with namespace %q: %v", ns, err)
		}
		e.unchanged(fmt.Sprintf("ScopeIn and WrapToolIn with namespace %q", ns), before)
		mu.Lock()
		if ran != 2 || eng.SnapshotFailures()-count != 4 || len(failures) != 4 {
			t.Errorf("namespace %q: ran %d, %d failures counted, %d reported; want 2, 4, 4", ns, ran, eng.SnapshotFailures()-count, len(failures))
		}
		for _, err := range failures {
			if !errors.Is(err, engine.ErrInvalidInput) {
				t.Errorf("namespace %q: failure %v, want ErrInvalidInput", ns, err)
			}
		}
		mu.Unlock()
	}
}
