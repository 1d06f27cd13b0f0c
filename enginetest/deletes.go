package enginetest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The delete family (DeleteThreads, DeleteCheckpoints, PruneThreads)
// against a model: the test's own reading of what each selection and
// policy takes, computed from an inventory of the database before the
// call.

// deleteFixture writes threads with what the deletes must tell apart:
// namespaces, a rewound head that is not the newest checkpoint, a line
// left by a rewind, a branch (whose source a retention policy keeps),
// delta chains, pending writes, and run ids across threads. It returns the
// branch thread's id.
func deleteFixture(t *testing.T, e *env) string {
	t.Helper()
	var msgs []string
	write := func(thread, ns string, run int) uuid.UUID {
		t.Helper()
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"m%d"}`, len(msgs)))
		res := e.snap(engine.SnapshotInput{
			ThreadID: thread, Namespace: ns,
			Messages: json.RawMessage("[" + joinJSON(msgs) + "]"),
			State:    json.RawMessage(fmt.Sprintf(`{"n": %d}`, len(msgs))),
			Metadata: json.RawMessage(fmt.Sprintf(`{"run_id": "r%d"}`, run)),
		})
		return res.ID
	}
	var a []uuid.UUID
	for i := range 8 {
		a = append(a, write("a", "", i%3)) // steps 1..8, runs r0 r1 r2 r0 ...
	}
	if _, err := e.eng.Rewind(e.ctx, a[4]); err != nil {
		t.Fatal(err)
	}
	write("a", "", 1) // steps 6 and 7 on a second line
	write("a", "", 2)
	if _, err := e.eng.Rewind(e.ctx, a[6]); err != nil { // the head: step 7, not the newest
		t.Fatal(err)
	}
	for i := range 4 {
		write("a", "sub", i%2)
	}
	br, err := e.eng.Branch(e.ctx, a[2], "side")
	if err != nil {
		t.Fatal(err)
	}
	write(br.ThreadID, "", 1)
	for i := range 5 {
		write("b", "", (i+1)%3)
	}
	write("b", "sub", 2)
	write("b", "sub", 1) // the head of b/sub has run r1
	for range 3 {
		write("c", "", 4)
	}
	for _, id := range []uuid.UUID{a[0], a[3], a[6]} {
		if _, err := e.eng.PutWrites(e.ctx, id, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
			t.Fatal(err)
		}
	}
	return br.ThreadID
}

func joinJSON(items []string) string {
	var b bytes.Buffer
	for i, s := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}

// place is a thread and namespace: one line of heads.
type place struct{ thread, namespace string }

// lines returns each place's checkpoints in write order.
func (inv *inventory) lines() map[place][]engine.ExportCheckpoint {
	out := map[place][]engine.ExportCheckpoint{}
	for _, c := range inv.checkpoints {
		k := place{c.ThreadID, c.Namespace}
		out[k] = append(out[k], c)
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b engine.ExportCheckpoint) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	return out
}

// head is a place's head: the rewound-to checkpoint, else the newest.
func (inv *inventory) head(k place) uuid.UUID {
	for _, r := range inv.threads {
		if r.ThreadID == k.thread && r.Namespace == k.namespace && r.RewoundTo != nil {
			return *r.RewoundTo
		}
	}
	l := inv.lines()[k]
	return l[len(l)-1].ID
}

// branchSource reports whether a branch thread of the inventory was
// forked from checkpoint id.
func (inv *inventory) branchSource(id uuid.UUID) bool {
	return slices.ContainsFunc(inv.threads, func(r engine.ExportThread) bool {
		return r.BranchedFrom != nil && *r.BranchedFrom == id
	})
}

// modelPrune is what keep deletes from threads, as Policy's
// documentation says.
func modelPrune(inv *inventory, keep engine.Policy, threads ...string) []uuid.UUID {
	var doomed []uuid.UUID
	for k, line := range inv.lines() {
		if !slices.Contains(threads, k.thread) {
			continue
		}
		head, total := inv.head(k), len(line)
		marks := map[int]bool{}
		for i := 1; i <= keep.N() && keep.Name() == "keep_milestones"; i++ {
			marks[1+int(math.Round(float64(i)*float64(total-1)/float64(keep.N()+1)))] = true
		}
		for i, c := range line {
			pos := i + 1
			var kept bool
			switch keep.Name() {
			case "keep_none":
			case "keep_latest":
				kept = c.ID == head
			case "keep_all":
				kept = true
			case "keep_last_n":
				kept = pos > total-keep.N()
			case "keep_milestones":
				kept = pos == 1 || pos == total || marks[pos]
			case "keep_age":
				kept = time.Since(c.CreatedAt) < keep.Age()
			}
			if keep.Name() != "keep_none" && keep.Name() != "keep_latest" {
				kept = kept || c.ID == head || inv.branchSource(c.ID)
			}
			if !kept {
				doomed = append(doomed, c.ID)
			}
		}
	}
	return doomed
}

// modelBefore is what BeforeStepIn deletes.
func modelBefore(inv *inventory, thread, namespace string, step int64) []uuid.UUID {
	k := place{thread, namespace}
	var doomed []uuid.UUID
	for _, c := range inv.lines()[k] {
		if c.Step < step && c.ID != inv.head(k) {
			doomed = append(doomed, c.ID)
		}
	}
	return doomed
}

// modelRuns is what ForRuns deletes.
func modelRuns(t *testing.T, inv *inventory, runs ...string) []uuid.UUID {
	var doomed []uuid.UUID
	for id, c := range inv.checkpoints {
		var meta map[string]any
		if err := json.Unmarshal(c.Metadata, &meta); err != nil {
			t.Fatal(err)
		}
		if run, ok := meta["run_id"].(string); ok && slices.Contains(runs, run) {
			doomed = append(doomed, id)
		}
	}
	return doomed
}

// checkDeleted checks a delete against the model: it took exactly want
// (listed in res.IDs when listed), each with its pending writes, and the
// threads whole when threadsGone; everything else reads back as before.
func (e *env) checkDeleted(what string, before *inventory, want []uuid.UUID, res engine.DeleteResult, listed bool, threadsGone ...string) {
	e.t.Helper()
	if res.Deleted != int64(len(want)) {
		e.t.Fatalf("%s: Deleted %d, the model says %d", what, res.Deleted, len(want))
	}
	if listed {
		var ds []engine.Deleted
		for _, id := range want {
			c := before.checkpoints[id]
			ds = append(ds, engine.Deleted{ThreadID: c.ThreadID, Namespace: c.Namespace, ID: c.ID, Step: c.Step})
		}
		slices.SortFunc(ds, func(a, b engine.Deleted) int {
			return cmp.Or(cmp.Compare(a.ThreadID, b.ThreadID), cmp.Compare(a.Namespace, b.Namespace),
				cmp.Compare(a.Step, b.Step), bytes.Compare(a.ID[:], b.ID[:]))
		})
		if !slices.Equal(res.IDs, ds) {
			e.t.Fatalf("%s: IDs\n%+v\nthe model says\n%+v", what, res.IDs, ds)
		}
	} else if res.IDs != nil {
		e.t.Fatalf("%s: IDs %+v, want nil: this delete does not list them", what, res.IDs)
	}
	after := checkReadable(e.t, e.ctx, e.eng)
	writes := before.writes
	for _, id := range want {
		writes -= len(before.checkpoints[id].PendingWrites)
	}
	for id, c := range before.checkpoints {
		got, ok := after.checkpoints[id]
		if slices.Contains(want, id) {
			if ok {
				e.t.Fatalf("%s: checkpoint %s (thread %q step %d) is still there", what, id, c.ThreadID, c.Step)
			}
			continue
		}
		if !ok {
			e.t.Fatalf("%s: checkpoint %s (thread %q namespace %q step %d) was deleted; the model keeps it", what, id, c.ThreadID, c.Namespace, c.Step)
		}
		if got.Seq != c.Seq || got.Step != c.Step || len(got.PendingWrites) != len(c.PendingWrites) {
			e.t.Fatalf("%s: kept checkpoint %s changed: %+v, was %+v", what, id, got, c)
		}
		jsonEqual(e.t, what+": messages of "+id.String(), got.Messages, c.Messages)
		jsonEqual(e.t, what+": state of "+id.String(), got.State, c.State)
	}
	if len(after.checkpoints) != len(before.checkpoints)-len(want) || after.writes != writes {
		e.t.Fatalf("%s: %d checkpoints and %d writes left, the model says %d and %d",
			what, len(after.checkpoints), after.writes, len(before.checkpoints)-len(want), writes)
	}
	rows := before.threadRows
	for _, r := range before.threads {
		if slices.Contains(threadsGone, r.ThreadID) {
			rows--
		}
	}
	if after.threadRows != rows {
		e.t.Fatalf("%s: %d thread rows left, want %d", what, after.threadRows, rows)
	}
}

func testDeletesMatchTheModel(t *testing.T, e *env) {
	for _, tc := range []struct {
		name string
		// call runs the delete; model says what it takes, whether it
		// lists it, and which threads go whole.
		call  func(e *env, branch string) (engine.DeleteResult, error)
		model func(t *testing.T, inv *inventory, branch string) (want []uuid.UUID, listed bool, gone []string)
	}{
		{"DeleteThreads",
			func(e *env, _ string) (engine.DeleteResult, error) {
				return e.eng.DeleteThreads(e.ctx, "c", "a", "nobody", "a")
			},
			func(_ *testing.T, inv *inventory, _ string) ([]uuid.UUID, bool, []string) {
				return modelPrune(inv, engine.KeepNone(), "a", "c"), false, []string{"a", "c"}
			}},
		{"DeleteCheckpoints/BeforeStep",
			func(e *env, _ string) (engine.DeleteResult, error) {
				return e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("a", 8))
			},
			func(_ *testing.T, inv *inventory, _ string) ([]uuid.UUID, bool, []string) {
				return modelBefore(inv, "a", "", 8), false, nil
			}},
		{"DeleteCheckpoints/BeforeStepIn",
			func(e *env, _ string) (engine.DeleteResult, error) {
				return e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStepIn("a", "sub", 4))
			},
			func(_ *testing.T, inv *inventory, _ string) ([]uuid.UUID, bool, []string) {
				return modelBefore(inv, "a", "sub", 4), false, nil
			}},
		{"DeleteCheckpoints/ForRuns",
			func(e *env, _ string) (engine.DeleteResult, error) {
				return e.eng.DeleteCheckpoints(e.ctx, engine.ForRuns("r1", "r9", "r2"))
			},
			func(t *testing.T, inv *inventory, _ string) ([]uuid.UUID, bool, []string) {
				return modelRuns(t, inv, "r1", "r2"), false, nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, e.h)
			branch := deleteFixture(t, e)
			before := e.inventory()
			want, listed, gone := tc.model(t, before, branch)
			if len(want) == 0 {
				t.Fatal("the model deletes nothing: the test would prove nothing")
			}
			res, err := tc.call(e, branch)
			if err != nil {
				t.Fatal(err)
			}
			e.checkDeleted(tc.name, before, want, res, listed, gone...)
			// Again: nothing is left to take.
			before = e.inventory()
			res, err = tc.call(e, branch)
			if err != nil || res.Deleted != 0 || len(res.IDs) != 0 {
				t.Fatalf("second call: %+v %v", res, err)
			}
			e.unchanged(tc.name+" again", before)
		})
	}
}

func testPruneThreadsMatchesTheModel(t *testing.T, e *env) {
	for _, keep := range []engine.Policy{
		engine.KeepLastN(2), engine.KeepLastN(1), engine.KeepMilestones(1), engine.KeepMilestones(0),
		engine.KeepAge(time.Millisecond), engine.KeepLatest(), engine.KeepNone(),
	} {
		t.Run(keep.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, e.h)
			branch := deleteFixture(t, e)
			time.Sleep(10 * time.Millisecond) // every checkpoint is older than KeepAge's millisecond
			before := e.inventory()
			threads := []string{"a", "b", branch}
			want := modelPrune(before, keep, threads...)
			if len(want) == 0 {
				t.Fatal("the model deletes nothing: the test would prove nothing")
			}
			res, err := e.eng.PruneThreads(e.ctx, keep, "b", branch, "a", "nobody", "b")
			if err != nil {
				t.Fatal(err)
			}
			var gone []string
			if keep.Name() == "keep_none" {
				gone = threads
			}
			listed := keep.Name() != "keep_latest" && keep.Name() != "keep_none"
			e.checkDeleted("PruneThreads "+keep.String(), before, want, res, listed, gone...)
			// The threads go on from their heads.
			if keep.Name() != "keep_none" {
				if res := e.snap(engine.SnapshotInput{ThreadID: "a"}); res.ParentID != before.head(place{"a", ""}) {
					t.Fatalf("write after the prune: parent %s, want the head", res.ParentID)
				}
			}
		})
	}
	// KeepAll deletes nothing.
	e.line("t", 3)
	before := e.inventory()
	if res, err := e.eng.PruneThreads(e.ctx, engine.KeepAll(), "t"); err != nil || res.Deleted != 0 || res.IDs != nil {
		t.Fatalf("keep all: %+v %v", res, err)
	}
	e.unchanged("PruneThreads keep_all", before)
}

// Bad input to the family is ErrInvalidInput, and nothing is deleted or
// written: a bad selection, thread id or policy, and a policy where it is
// not taken (Sweep: the retention policies; SetThreadExpiry: KeepNone and
// KeepLatest; Config.Retention: all but KeepNone).
func testDeletesBadInput(t *testing.T, e *env) {
	deleteFixture(t, e)
	before := e.inventory("x")
	past := time.Now().Add(-time.Hour)
	for name, call := range map[string]func() error{
		"DeleteThreads with an empty id": func() error { _, err := e.eng.DeleteThreads(e.ctx, "a", ""); return err },
		"DeleteThreads with a NUL":       func() error { _, err := e.eng.DeleteThreads(e.ctx, "a", "x\x00"); return err },
		"DeleteThreads too long":         func() error { _, err := e.eng.DeleteThreads(e.ctx, strings.Repeat("x", 256)); return err },
		"the zero Selection":             func() error { _, err := e.eng.DeleteCheckpoints(e.ctx, engine.Selection{}); return err },
		"BeforeStep 0":                   func() error { _, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("a", 0)); return err },
		"BeforeStep -1":                  func() error { _, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("a", -1)); return err },
		"BeforeStep of no thread":        func() error { _, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("", 3)); return err },
		"BeforeStepIn a bad namespace": func() error {
			_, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStepIn("a", "s\xff", 3))
			return err
		},
		"ForRuns with a NUL":              func() error { _, err := e.eng.DeleteCheckpoints(e.ctx, engine.ForRuns("r1", "r\x00")); return err },
		"PruneThreads KeepLastN(0)":       func() error { _, err := e.eng.PruneThreads(e.ctx, engine.KeepLastN(0), "a"); return err },
		"PruneThreads KeepMilestones(-1)": func() error { _, err := e.eng.PruneThreads(e.ctx, engine.KeepMilestones(-1), "a"); return err },
		"PruneThreads KeepAge(0)":         func() error { _, err := e.eng.PruneThreads(e.ctx, engine.KeepAge(0), "a"); return err },
		"PruneThreads KeepAge(500ns)":     func() error { _, err := e.eng.PruneThreads(e.ctx, engine.KeepAge(500), "a"); return err },
		"PruneThreads with an empty id":   func() error { _, err := e.eng.PruneThreads(e.ctx, engine.KeepLatest(), "a", ""); return err },
		"PruneThreads KeepNone, a bad id": func() error { _, err := e.eng.PruneThreads(e.ctx, engine.KeepNone(), "b", "\xff"); return err },
		"Sweep KeepLatest":                func() error { _, err := e.eng.Sweep(e.ctx, engine.KeepLatest(), engine.SweepOptions{}); return err },
		"Sweep KeepNone":                  func() error { _, err := e.eng.Sweep(e.ctx, engine.KeepNone(), engine.SweepOptions{}); return err },
		"SetThreadExpiry KeepLastN":       func() error { return e.eng.SetThreadExpiry(e.ctx, "a", past, engine.KeepLastN(3)) },
		"SetThreadExpiry KeepAll":         func() error { return e.eng.SetThreadExpiry(e.ctx, "a", past, engine.KeepAll()) },
		"SetThreadExpiry KeepAge":         func() error { return e.eng.SetThreadExpiry(e.ctx, "a", past, engine.KeepAge(time.Hour)) },
		"SetThreadExpiry of no thread":    func() error { return e.eng.SetThreadExpiry(e.ctx, "", past, engine.KeepNone()) },
		"SetThreadExpiry in year 300000": func() error {
			return e.eng.SetThreadExpiry(e.ctx, "a", time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), engine.KeepNone())
		},
		// Years are counted in UTC: 9999-12-31 23:00 at UTC-12 is 10000 there.
		"SetThreadExpiry in year 10000 UTC": func() error {
			return e.eng.SetThreadExpiry(e.ctx, "a", time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -12*3600)), engine.KeepNone())
		},
		"SetThreadExpiry in year 0 UTC": func() error {
			return e.eng.SetThreadExpiry(e.ctx, "a", time.Date(1, 1, 1, 2, 0, 0, 0, time.FixedZone("", 14*3600)), engine.KeepNone())
		},
		"Config.Retention KeepNone": func() error {
			_, err := e.open(engine.Config{Retention: engine.KeepNone()}).Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "x"})
			return err
		},
		"Config.Retention KeepLastN(0)": func() error {
			_, err := e.open(engine.Config{Retention: engine.KeepLastN(0)}).Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "x"})
			return err
		},
		"ParsePolicy keep_latest(2)": func() error { _, err := engine.ParsePolicy("keep_latest(2)"); return err },
		"ParsePolicy keep_none:1":    func() error { _, err := engine.ParsePolicy("keep_none:1"); return err },
	} {
		if err := call(); !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
	e.unchanged("refused deletes", before, "x")
	// A sweep after the refused expiries finds none to apply.
	if res, err := e.eng.Sweep(e.ctx, engine.KeepAll(), engine.SweepOptions{}); err != nil || res.Expired != 0 || res.Deleted != 0 {
		t.Fatalf("sweep after refused expiries: %+v %v", res, err)
	}
	for _, p := range []engine.Policy{engine.KeepLatest(), engine.KeepNone(), engine.KeepLastN(3), engine.KeepAge(90 * time.Minute)} {
		if got, err := engine.ParsePolicy(p.String()); err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
}

// An expiry keeps what its policy says: KeepNone deletes the thread
// whole, KeepLatest keeps its heads alone (branch sources go) and clears
// the expiry; a sweep applies it before its own policy.
func testExpiryPolicies(t *testing.T, e *env) {
	branch := deleteFixture(t, e)
	past := time.Now().Add(-time.Minute)
	if err := e.eng.SetThreadExpiry(e.ctx, "a", past, engine.KeepLatest()); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.SetThreadExpiry(e.ctx, "c", past, engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.SetThreadExpiry(e.ctx, "b", time.Now().Add(time.Hour), engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	before := e.inventory()
	want := append(modelPrune(before, engine.KeepLatest(), "a"), modelPrune(before, engine.KeepNone(), "c")...)
	res, err := e.eng.Sweep(e.ctx, engine.KeepAll(), engine.SweepOptions{})
	if err != nil || res.Expired != 2 || res.Failed != 0 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	e.checkDeleted("expiry", before, want, engine.DeleteResult{Deleted: res.Deleted}, false, "c")
	// The keep-latest expiry was cleared, b's is not due: a second sweep
	// expires nothing.
	before = e.inventory()
	if res, err := e.eng.Sweep(e.ctx, engine.KeepAll(), engine.SweepOptions{}); err != nil || res.Expired != 0 || res.Deleted != 0 {
		t.Fatalf("second sweep: %+v %v", res, err)
	}
	e.unchanged("a second sweep", before)
	// A zero time clears an expiry, whatever the policy given.
	if err := e.eng.SetThreadExpiry(e.ctx, branch, past, engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.SetThreadExpiry(e.ctx, branch, time.Time{}, engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	if res, err := e.eng.Sweep(e.ctx, engine.KeepAll(), engine.SweepOptions{}); err != nil || res.Expired != 0 {
		t.Fatalf("sweep after a cleared expiry: %+v %v", res, err)
	}
	e.unchanged("a cleared expiry", before)
	if err := e.eng.SetThreadExpiry(e.ctx, "nobody", past, engine.KeepNone()); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("expiry of an unknown thread: %v", err)
	}
}

// Config.Retention takes KeepLatest: after each write only the heads are
// left, a branch's source too goes.
func testRetentionKeepLatestAfterEachWrite(t *testing.T, e *env) {
	ids := e.line("run", 4)
	br, err := e.eng.Branch(e.ctx, ids[1], "side")
	if err != nil {
		t.Fatal(err)
	}
	eng := e.open(engine.Config{Retention: engine.KeepLatest(), DeltaMinBytes: -1})
	e.snap(engine.SnapshotInput{ThreadID: "run", Namespace: "sub"})
	msgs, state := lineContent(4)
	res := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "run", Messages: msgs, State: state})
	if left := oldestFirst(listAll(t, e.ctx, e.eng, "run", "")); !slices.Equal(left, []uuid.UUID{res.ID}) {
		t.Fatalf("after a write with KeepLatest: %v, want only the new head %s", left, res.ID)
	}
	if left := listAll(t, e.ctx, e.eng, "run", "sub"); len(left) != 1 {
		t.Fatalf("the sub-graph keeps %d, want its head", len(left))
	}
	head := e.head("run")
	jsonEqual(t, "head's messages", head.Messages, msgs)
	jsonEqual(t, "head's state", head.State, state)
	if got := e.get(br.CheckpointID); got.ParentID != ids[1] {
		t.Fatalf("the branch's first checkpoint: parent %s", got.ParentID)
	}
	checkReadable(t, e.ctx, e.eng)
}

// A preview deletes nothing and says what PruneThreads then deletes,
// which is what the model says.
func testPreviewPrune(t *testing.T, e *env) {
	deleteFixture(t, e)
	for _, tc := range []struct {
		keep    engine.Policy
		threads []string
		listed  bool
	}{
		{engine.KeepLastN(1), []string{"a"}, true},
		{engine.KeepMilestones(1), []string{"b", "a"}, true},
		{engine.KeepLatest(), []string{"b"}, false},
		{engine.KeepNone(), []string{"c"}, false},
	} {
		what := fmt.Sprintf("%s of %v", tc.keep, tc.threads)
		before := e.inventory()
		want := modelPrune(before, tc.keep, tc.threads...)
		if len(want) == 0 {
			t.Fatalf("%s: the fixture gives the policy nothing to delete", what)
		}
		preview, err := e.eng.PreviewPrune(e.ctx, tc.keep, tc.threads...)
		if err != nil {
			t.Fatalf("preview %s: %v", what, err)
		}
		e.unchanged("a preview of "+what, before)
		var gone []string
		if tc.keep.Name() == "keep_none" {
			gone = tc.threads
		}
		pruned, err := e.eng.PruneThreads(e.ctx, tc.keep, tc.threads...)
		if err != nil {
			t.Fatalf("prune %s: %v", what, err)
		}
		if !reflect.DeepEqual(preview, pruned) {
			t.Fatalf("%s: the preview said %+v, the prune deleted %+v", what, preview, pruned)
		}
		e.checkDeleted("prune "+what, before, want, pruned, tc.listed, gone...)
	}
	before := e.inventory()
	if _, err := e.eng.PreviewPrune(e.ctx, engine.KeepLastN(0), "a"); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("a preview of KeepLastN(0): %v, want ErrInvalidInput", err)
	}
	e.unchanged("a refused preview", before)
}

// A sweep's preview deletes nothing, clears no expiry, and says what the
// sweep then does, batch by batch: expiries applied, the policy on the
// rest, the same counts.
func testPreviewSweep(t *testing.T, e *env) {
	deleteFixture(t, e)
	past := time.Now().Add(-time.Minute)
	if err := e.eng.SetThreadExpiry(e.ctx, "a", past, engine.KeepLatest()); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.SetThreadExpiry(e.ctx, "c", past, engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	opts := engine.SweepOptions{BatchSize: 2}
	before := e.inventory()
	preview, err := e.eng.PreviewSweep(e.ctx, engine.KeepLastN(2), opts)
	if err != nil {
		t.Fatalf("preview sweep: %v", err)
	}
	e.unchanged("a preview of a sweep", before)
	if preview.Expired != 2 || preview.Deleted == 0 || preview.Batches < 2 || !preview.Done {
		t.Fatalf("preview sweep: %+v; want 2 expired, checkpoints deleted, in batches of 2", preview)
	}
	swept, err := e.eng.Sweep(e.ctx, engine.KeepLastN(2), opts)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	preview.LongestBatch, swept.LongestBatch = 0, 0
	if preview != swept {
		t.Fatalf("the preview said %+v, the sweep did %+v", preview, swept)
	}
	if after := e.inventory(); reflect.DeepEqual(after, before) {
		t.Fatal("the sweep after the preview deleted nothing")
	}
	before = e.inventory()
	if _, err := e.eng.PreviewSweep(e.ctx, engine.KeepLatest(), opts); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("a preview sweep of KeepLatest: %v, want ErrInvalidInput", err)
	}
	e.unchanged("a refused preview sweep", before)
}

// ThreadExpiry reads what SetThreadExpiry set: the time (to the
// microsecond) and the policy; the zero time once cleared; ErrNotFound for
// an unknown thread.
func testThreadExpiry(t *testing.T, e *env) {
	e.snap(engine.SnapshotInput{ThreadID: "x"})
	e.snap(engine.SnapshotInput{ThreadID: "x", Namespace: "sub"})
	if at, _, err := e.eng.ThreadExpiry(e.ctx, "x"); err != nil || !at.IsZero() {
		t.Fatalf("a thread without an expiry: %v %v", at, err)
	}
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	for _, keep := range []engine.Policy{engine.KeepLatest(), engine.KeepNone()} {
		if err := e.eng.SetThreadExpiry(e.ctx, "x", at, keep); err != nil {
			t.Fatal(err)
		}
		got, gotKeep, err := e.eng.ThreadExpiry(e.ctx, "x")
		if err != nil || !got.Equal(at) || gotKeep.String() != keep.String() {
			t.Fatalf("expiry set to %v, %s: read %v, %s, %v", at, keep, got, gotKeep, err)
		}
	}
	if err := e.eng.SetThreadExpiry(e.ctx, "x", time.Time{}, engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	if got, _, err := e.eng.ThreadExpiry(e.ctx, "x"); err != nil || !got.IsZero() {
		t.Fatalf("a cleared expiry reads %v, %v", got, err)
	}
	// A time finer than a microsecond is kept as the next microsecond, the
	// same on both stores (Postgres rounded it, SQLite cut it): never
	// before the time asked, and never the zero time, which reads as "does
	// not expire" (a nanosecond after it did, and a sweep expired the
	// thread all the same).
	for _, at := range []time.Time{time.Time{}.Add(time.Nanosecond), time.Now().Add(time.Hour).Truncate(time.Microsecond).Add(999 * time.Nanosecond)} {
		if err := e.eng.SetThreadExpiry(e.ctx, "x", at, engine.KeepNone()); err != nil {
			t.Fatal(err)
		}
		want := at.Truncate(time.Microsecond).Add(time.Microsecond)
		if got, _, err := e.eng.ThreadExpiry(e.ctx, "x"); err != nil || !got.Equal(want) {
			t.Fatalf("expiry set to %v: read %v (%v), want %v", at, got, err, want)
		}
	}
	if err := e.eng.SetThreadExpiry(e.ctx, "x", time.Date(9999, 12, 31, 23, 59, 59, 999999500, time.UTC), engine.KeepNone()); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("an expiry the microsecond takes past year 9999: %v, want ErrInvalidInput", err)
	}
	if err := e.eng.SetThreadExpiry(e.ctx, "x", time.Time{}.Add(-500*time.Nanosecond), engine.KeepNone()); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("an expiry in year 0 that the microsecond takes to the zero time: %v, want ErrInvalidInput", err)
	}
	if res, err := e.eng.Sweep(e.ctx, engine.KeepAll(), engine.SweepOptions{}); err != nil || res.Expired != 0 {
		t.Fatalf("a sweep before the expiry: %+v, %v", res, err)
	}
	if err := e.eng.SetThreadExpiry(e.ctx, "x", time.Time{}.Add(time.Nanosecond), engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	if res, err := e.eng.Sweep(e.ctx, engine.KeepAll(), engine.SweepOptions{}); err != nil || res.Expired != 1 {
		t.Fatalf("a sweep after an expiry in year 1: %+v, %v", res, err)
	}
	// A namespace first written after the expiry was set has none of its
	// own: the thread's is the one a sweep applies (it read as "does not
	// expire" when that namespace sorted first, and a sweep then expired
	// the thread).
	e.snap(engine.SnapshotInput{ThreadID: "y", Namespace: "sub"})
	soon := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	if err := e.eng.SetThreadExpiry(e.ctx, "y", soon, engine.KeepLatest()); err != nil {
		t.Fatal(err)
	}
	e.snap(engine.SnapshotInput{ThreadID: "y"})
	if got, keep, err := e.eng.ThreadExpiry(e.ctx, "y"); err != nil || !got.Equal(soon) || keep.String() != engine.KeepLatest().String() {
		t.Fatalf("the expiry after a new namespace was written: %v, %s, %v; want %v, keep_latest", got, keep, err, soon)
	}
	if _, _, err := e.eng.ThreadExpiry(e.ctx, "nobody"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the expiry of an unknown thread: %v, want ErrNotFound", err)
	}
	if _, _, err := e.eng.ThreadExpiry(e.ctx, ""); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("the expiry of an empty thread id: %v, want ErrInvalidInput", err)
	}
}
