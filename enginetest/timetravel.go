package enginetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// line writes n snapshots on thread, the i-th with state {"i": i} and
// messages m0..mi, and returns their ids.
func (e *env) line(thread string, n int) []uuid.UUID {
	e.t.Helper()
	return writeLine(e.t, e, e.eng, thread, n)
}

func writeLine(t testing.TB, e *env, eng *engine.Engine, thread string, n int) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	var msgs []map[string]string
	for i := range n {
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("m%d", i)})
		ids = append(ids, snapWith(t, e.ctx, eng, engine.SnapshotInput{
			ThreadID: thread, Messages: mustJSON(msgs), State: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)),
		}).ID)
	}
	return ids
}

// lineContent is what checkpoint i of a line reads back as.
func lineContent(i int) (msgs, state json.RawMessage) {
	var m []map[string]string
	for j := range i + 1 {
		m = append(m, map[string]string{"role": "user", "content": fmt.Sprintf("m%d", j)})
	}
	return mustJSON(m), json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))
}

// checkpoints returns how many checkpoints the database holds.
func (e *env) checkpoints() int {
	e.t.Helper()
	return len(e.inventory().checkpoints)
}

func testRewind(t *testing.T, e *env) {
	ids := e.line("t", 5)
	other := e.line("other", 2)
	res, err := e.eng.Rewind(e.ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if res.ThreadID != "t" || res.Namespace != "" || res.Checkpoint.ID != ids[1] || res.StepsBack != 3 || res.Checkpoints != 5 || res.Truncated != 0 {
		t.Fatalf("rewind result: %+v", res)
	}
	msgs, state := lineContent(1)
	jsonEqual(t, "rewound state", res.Checkpoint.State, state)
	jsonEqual(t, "rewound messages", res.Checkpoint.Messages, msgs)
	head := e.head("t")
	if head.ID != ids[1] {
		t.Fatal("head did not move to the target")
	}
	jsonEqual(t, "head state", head.State, state)
	if threads := listThreads(t, e.ctx, e.eng); threads[1].ThreadID != "t" || threads[1].HeadID != ids[1] || threads[1].HeadStep != 2 {
		t.Fatalf("ListThreads after the rewind: %+v", threads)
	}
	// The next writes build on the target: history is now a tree.
	next := e.snap(engine.SnapshotInput{ThreadID: "t"})
	if next.ParentID != ids[1] || next.Step != 3 {
		t.Fatalf("write after rewind: %+v", next)
	}
	e.snap(engine.SnapshotInput{ThreadID: "t"})
	if got := e.checkpoints(); got != 9 {
		t.Fatalf("%d checkpoints, want 9: rewind deletes nothing", got)
	}
	for _, id := range append(ids, other...) {
		e.get(id)
	}
	// A rewind to the head is harmless.
	if res, err = e.eng.Rewind(e.ctx, e.head("t").ID); err != nil || res.StepsBack != 0 {
		t.Fatalf("rewind to the head: %+v %v", res, err)
	}
	// Back to the old line.
	res, err = e.eng.Rewind(e.ctx, ids[4])
	if err != nil || res.Checkpoints != 7 || res.StepsBack != -1 {
		t.Fatalf("rewind to the old line: %+v %v", res, err)
	}
	after := e.snap(engine.SnapshotInput{ThreadID: "t"})
	if after.ParentID != ids[4] || after.Step != 6 {
		t.Fatalf("write on the old line: %+v", after)
	}
	if got := e.checkpoints(); got != 10 {
		t.Fatalf("%d checkpoints, want 10", got)
	}
	if e.head("other").ID != other[1] {
		t.Fatal("another thread's head moved")
	}
	e.checkTree()
}

func testRewindAndTruncate(t *testing.T, e *env) {
	ids := e.line("t", 5)
	// A side line from step 2, then back to the main line's end.
	if _, err := e.eng.Rewind(e.ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	side := e.snap(engine.SnapshotInput{ThreadID: "t"}).ID
	if _, err := e.eng.Rewind(e.ctx, ids[4]); err != nil {
		t.Fatal(err)
	}
	other := e.line("other", 2)
	sub := e.snap(engine.SnapshotInput{ThreadID: "t", Namespace: "sub"}).ID

	res, err := e.eng.RewindAndTruncate(e.ctx, ids[2])
	if err != nil {
		t.Fatal(err)
	}
	if res.Truncated != 2 || res.Checkpoints != 6 || res.StepsBack != 2 || res.Checkpoint.ID != ids[2] {
		t.Fatalf("truncate result: %+v, want 2 deleted of 6", res)
	}
	for i, id := range ids {
		_, err := e.eng.Get(e.ctx, id)
		if deleted := i > 2; deleted != errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("checkpoint step %d: %v", i+1, err)
		}
	}
	for _, id := range append([]uuid.UUID{side, sub}, other...) {
		e.get(id)
	}
	if e.head("t").ID != ids[2] {
		t.Fatal("head is not the target")
	}
	if got := e.checkpoints(); got != 7 {
		t.Fatalf("%d checkpoints left, want 7", got)
	}
	next := e.snap(engine.SnapshotInput{ThreadID: "t"})
	if next.ParentID != ids[2] || next.Step != 4 {
		t.Fatalf("write after the truncate: %+v", next)
	}
	// Truncating to a checkpoint that is not on the head's line deletes
	// nothing but moves the head.
	res, err = e.eng.RewindAndTruncate(e.ctx, side)
	if err != nil || res.Truncated != 0 {
		t.Fatalf("truncate to another line: %+v %v", res, err)
	}
	if e.head("t").ID != side {
		t.Fatal("head is not the side line")
	}
	if got := e.checkpoints(); got != 8 {
		t.Fatalf("%d checkpoints left, want 8", got)
	}
	e.checkTree()

	// The head's line shares a checkpoint with an older line of the
	// thread, and a branch was forked from it: the truncation stops below
	// it. Lines 1-2-3-4 and 1-2-3'-4' (rewound to 2), a branch from 2;
	// RewindAndTruncate to 1 deletes 4' and 3' alone.
	m := e.line("m", 4)
	br, err := e.eng.Branch(e.ctx, m[1], "keep")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.Rewind(e.ctx, m[1]); err != nil {
		t.Fatal(err)
	}
	newer := e.line("m", 2)
	res, err = e.eng.RewindAndTruncate(e.ctx, m[0])
	if err != nil || res.Truncated != 2 {
		t.Fatalf("truncate a line shared with another: %+v %v, want 2 deleted", res, err)
	}
	for _, id := range newer {
		if _, err := e.eng.Get(e.ctx, id); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("checkpoint %s of the truncated line: %v, want ErrNotFound", id, err)
		}
	}
	for _, id := range m {
		e.get(id)
	}
	if line, err := e.eng.Lineage(e.ctx, m[3]); err != nil || len(line) != 4 {
		t.Fatalf("the older line's lineage: %d checkpoints, %v; want 4", len(line), err)
	}
	if b := e.head(br.ThreadID); b.ParentID != m[1] {
		t.Fatalf("the branch's first checkpoint has parent %s, want %s", b.ParentID, m[1])
	}
	if e.head("m").ID != m[0] {
		t.Fatal("head is not the target")
	}
	// With only the branch building on 2 (the older line deleted), the
	// truncation stops at 2 too.
	n := e.line("n", 3)
	if _, err := e.eng.Branch(e.ctx, n[1], "keep"); err != nil {
		t.Fatal(err)
	}
	res, err = e.eng.RewindAndTruncate(e.ctx, n[0])
	if err != nil || res.Truncated != 1 {
		t.Fatalf("truncate below a branch's source: %+v %v, want 1 deleted", res, err)
	}
	e.get(n[1])
	e.checkTree()
}

func testRewindToStep(t *testing.T, e *env) {
	ids := e.line("t", 600) // far past the old 500-row limit
	if _, err := e.eng.Rewind(e.ctx, ids[3]); err != nil {
		t.Fatal(err)
	}
	side := e.line("t", 3) // steps 5, 6, 7 on a new line
	if _, err := e.eng.Rewind(e.ctx, side[2]); err != nil {
		t.Fatal(err)
	}
	// Step 6 on the head's line is side[1], not ids[5].
	res, err := e.eng.RewindToStep(e.ctx, "t", 6)
	if err != nil || res.Checkpoint.ID != side[1] || res.StepsBack != 1 {
		t.Fatalf("rewind to step 6: %+v %v, want %s", res, err, side[1])
	}
	// From the old line's end, step 3 is found 597 links back.
	if _, err := e.eng.Rewind(e.ctx, ids[599]); err != nil {
		t.Fatal(err)
	}
	if res, err = e.eng.RewindToStep(e.ctx, "t", 3); err != nil || res.Checkpoint.ID != ids[2] || res.StepsBack != 597 {
		t.Fatalf("rewind to step 3: %+v %v", res, err)
	}
	msgs, state := lineContent(2)
	jsonEqual(t, "messages of step 3", res.Checkpoint.Messages, msgs)
	jsonEqual(t, "state of step 3", res.Checkpoint.State, state)
	// A step above the head gives the head.
	if res, err = e.eng.RewindToStep(e.ctx, "t", 10_000); err != nil || res.Checkpoint.ID != ids[2] {
		t.Fatalf("rewind to a step above the head: %+v %v", res, err)
	}
	if _, err := e.eng.RewindToStep(e.ctx, "t", 0); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("step 0: %v", err)
	}
	if _, err := e.eng.RewindToStep(e.ctx, "nobody", 1); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unknown thread: %v", err)
	}
	// Below the first checkpoint left on the line.
	if _, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("t", 3)); err != nil {
		t.Fatal(err)
	}
	before := e.inventory()
	if _, err := e.eng.RewindToStep(e.ctx, "t", 2); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("step below the first: %v", err)
	}
	e.unchanged("a failed rewind", before)
	if e.head("t").ID != ids[2] {
		t.Fatal("a failed rewind moved the head")
	}
}

func testTimeTravelPoints(t *testing.T, e *env) {
	line := e.line("t", 25)
	if _, err := e.eng.Rewind(e.ctx, line[19]); err != nil {
		t.Fatal(err)
	}
	// Rewound, not written since: the head is the rewound-to checkpoint,
	// not the newest, for the points and for the thread listing.
	rewound := slices.Clone(line[:20])
	slices.Reverse(rewound)
	if page, err := e.eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{}); err != nil {
		t.Fatal(err)
	} else if got := ids(page); !slices.Equal(got, rewound) {
		t.Fatalf("points of the rewound thread: got %d %v, want the 20 from the rewound-to checkpoint back", len(got), got)
	}
	if threads, err := e.eng.ListThreads(e.ctx, engine.ThreadListOptions{}); err != nil {
		t.Fatal(err)
	} else if len(threads) != 1 || threads[0].HeadID != line[19] || threads[0].HeadStep != 20 {
		t.Fatalf("thread listing of the rewound thread: %+v, want its head %s at step 20", threads, line[19])
	}
	side := e.snap(engine.SnapshotInput{ThreadID: "t"}).ID // the head: a new line from step 20
	for _, limit := range []int{7, 1, 21, 0} {
		var got []uuid.UUID
		var cursor uuid.UUID
		for pages := 0; ; pages++ {
			page, err := e.eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{Limit: limit, Before: cursor})
			if err != nil {
				t.Fatal(err)
			}
			if pages > 30 || (limit > 0 && len(page) > limit) {
				t.Fatalf("limit %d: page of %d", limit, len(page))
			}
			if len(page) == 0 {
				break
			}
			for _, p := range page {
				got = append(got, p.ID)
			}
			cursor = page[len(page)-1].ID
		}
		want := append(slices.Clone(line[:20]), side)
		slices.Reverse(want)
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: points: got %d %v, want the 21 of the head's line, newest first", limit, len(got), got)
		}
	}
	if _, err := e.eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{Before: engine.NewCheckpointID()}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unknown cursor: %v", err)
	}
	if _, err := e.eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{Limit: -1}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("negative limit: %v", err)
	}
}

// The points of a thread are its own checkpoints: a cursor from another
// thread (or from a branch of it, whose lineage runs into the thread) is
// ErrNotFound, as it is for ListCheckpoints, and a branch's points stop at
// its first checkpoint, since what precedes it is its source thread's.
func testTimeTravelPointsStayInTheThread(t *testing.T, e *env) {
	a := e.line("a", 4)
	b := e.line("b", 3)
	br, err := e.eng.Branch(e.ctx, a[1], "side")
	if err != nil {
		t.Fatal(err)
	}
	brWork := e.snap(engine.SnapshotInput{ThreadID: br.ThreadID, Summary: "on the branch"}).ID
	for _, c := range []struct {
		thread string
		cursor uuid.UUID
	}{
		{"a", b[2]},            // another thread
		{"b", a[3]},            // and the other way
		{"a", brWork},          // a branch of the thread: its lineage reaches a[1]
		{"a", br.CheckpointID}, // the branch's first checkpoint, whose parent is a[1]
		{br.ThreadID, a[1]},    // the branch's source thread
		{"nobody", b[2]},       // a thread with no checkpoint
		{"a", engine.NewCheckpointID()},
	} {
		points, err := e.eng.TimeTravelPoints(e.ctx, c.thread, engine.PointsOptions{Before: c.cursor})
		if !errors.Is(err, engine.ErrNotFound) || len(points) != 0 {
			t.Errorf("points of %q before %s: %d points, err %v; want ErrNotFound and none", c.thread, c.cursor, len(points), err)
		}
	}
	// A branch's points are its own checkpoints, paged to its first.
	var got []uuid.UUID
	var cursor uuid.UUID
	for range 4 {
		page, err := e.eng.TimeTravelPoints(e.ctx, br.ThreadID, engine.PointsOptions{Limit: 1, Before: cursor})
		if err != nil {
			t.Fatalf("points of the branch before %s: %v", cursor, err)
		}
		if len(page) == 0 {
			break
		}
		for _, p := range page {
			if p.ThreadID != br.ThreadID {
				t.Fatalf("points of the branch list %s of thread %q", p.ID, p.ThreadID)
			}
			got = append(got, p.ID)
		}
		cursor = page[len(page)-1].ID
	}
	if want := []uuid.UUID{brWork, br.CheckpointID}; !slices.Equal(got, want) {
		t.Fatalf("points of the branch: %v, want %v", got, want)
	}
	// The thread's own cursors still page.
	if page, err := e.eng.TimeTravelPoints(e.ctx, "a", engine.PointsOptions{Before: a[2]}); err != nil || len(page) != 2 || page[0].ID != a[1] || page[1].ID != a[0] {
		t.Fatalf("points of a before a[2]: %+v %v", page, err)
	}
}

// The id of a deleted checkpoint written again (a retry that comes after
// retention, with the id it was given) is a new checkpoint on the head,
// not the parent of the deleted one's children: their lineage ends where
// their parent was deleted, as it did before, in this thread, in another
// namespace and in another thread. (It went on into the new checkpoint,
// whose own lineage led back to them: Lineage never returned, and
// TimeTravelPoints listed the thread again and again.)
func testReusedIDIsNoOnesParent(t *testing.T, e *env) {
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second) // a lineage cycle must not hang the suite
	defer cancel()
	for _, again := range []engine.SnapshotInput{
		{ThreadID: "t"},
		{ThreadID: "t", Namespace: "sub"},
		{ThreadID: "u"},
	} {
		thread := fmt.Sprintf("t-%s-%s", again.ThreadID, again.Namespace)
		c := e.line(thread, 3)
		if again.ThreadID == "t" {
			again.ThreadID = thread
		}
		if n, err := e.eng.DeleteCheckpoints(ctx, engine.BeforeStep(thread, 2)); err != nil || n.Deleted != 1 {
			t.Fatalf("delete step 1 of %s: %d, %v", thread, n.Deleted, err)
		}
		again.ID = c[0]
		where := fmt.Sprintf("step 1 of %s written again in thread %q namespace %q", thread, again.ThreadID, again.Namespace)
		if r, err := e.eng.Snapshot(ctx, again); err != nil || !r.Created {
			t.Fatalf("%s: %+v, %v", where, r, err)
		}
		line, err := e.eng.Lineage(ctx, c[2])
		var ids []uuid.UUID
		for _, l := range line {
			ids = append(ids, l.ID)
		}
		if want := []uuid.UUID{c[2], c[1]}; err != nil || !slices.Equal(ids, want) {
			t.Errorf("%s: the lineage of the head: %v, %v; want %v", where, ids, err, want)
		}
		points, err := e.eng.TimeTravelPoints(ctx, thread, engine.PointsOptions{Limit: 10})
		var steps []int64
		for _, p := range points {
			steps = append(steps, p.Step)
		}
		if want := map[bool][]int64{true: {4, 3, 2}, false: {3, 2}}[again.ThreadID == thread && again.Namespace == ""]; err != nil || !slices.Equal(steps, want) {
			t.Errorf("%s: the thread's points: steps %v, %v; want %v", where, steps, err, want)
		}
	}
}

func testBranchMergeTreeLineage(t *testing.T, e *env) {
	main := e.line("main", 4)
	if _, err := e.eng.PutWrites(e.ctx, main[1], "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	src := e.get(main[1])

	br, err := e.eng.Branch(e.ctx, main[1], "experiment")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(br.ThreadID, "main-branch-experiment-") || br.Step != 3 {
		t.Fatalf("branch: %+v", br)
	}
	first := e.get(br.CheckpointID)
	if first.ParentID != main[1] || first.ThreadID != br.ThreadID || first.Step != 3 || first.Seq != 1 || first.Namespace != "" {
		t.Fatalf("branch's first checkpoint: %+v", first.CheckpointInfo)
	}
	jsonEqual(t, "branch messages", first.Messages, src.Messages)
	jsonEqual(t, "branch state", first.State, src.State)
	jsonEqual(t, "branch tool results", first.ToolResults, src.ToolResults)
	if e.head(br.ThreadID).ID != br.CheckpointID {
		t.Fatal("the branch's head is not its first checkpoint")
	}
	branches, err := e.eng.Branches(e.ctx, "main")
	if err != nil || len(branches) != 1 || branches[0].ThreadID != br.ThreadID || branches[0].Name != "experiment" ||
		branches[0].FromID != main[1] || branches[0].CreatedAt.IsZero() {
		t.Fatalf("branches: %+v %v", branches, err)
	}
	if bb, err := e.eng.Branches(e.ctx, br.ThreadID); err != nil || len(bb) != 0 {
		t.Fatalf("branches of the branch: %+v %v", bb, err)
	}
	// Work on the branch, then merge it back.
	work := e.snap(engine.SnapshotInput{ThreadID: br.ThreadID, State: json.RawMessage(`{"found": "it"}`),
		Messages: json.RawMessage(`[{"role":"assistant","content":"found it"}]`), ToolResults: json.RawMessage(`{"probe": {"ok": true}}`)})
	if work.ParentID != br.CheckpointID || work.Step != 4 {
		t.Fatalf("write on the branch: %+v", work)
	}
	m, err := e.eng.MergeBranch(e.ctx, br.ThreadID, "main")
	if err != nil {
		t.Fatal(err)
	}
	if m.ThreadID != "main" || m.ParentID != main[3] || m.MergeParentID != work.ID || m.Step != 5 {
		t.Fatalf("merge: %+v", m)
	}
	merged := e.head("main")
	if merged.ID != m.CheckpointID || merged.MergeParentID != work.ID || merged.ParentID != main[3] || merged.Step != 5 {
		t.Fatalf("main head after merge: %+v", merged.CheckpointInfo)
	}
	jsonEqual(t, "merged state", merged.State, []byte(`{"found": "it"}`))
	jsonEqual(t, "merged messages", merged.Messages, []byte(`[{"role":"assistant","content":"found it"}]`))
	jsonEqual(t, "merged tool results", merged.ToolResults, []byte(`{"probe": {"ok": true}}`))
	if next := e.snap(engine.SnapshotInput{ThreadID: "main"}); next.ParentID != m.CheckpointID || next.Step != 6 {
		t.Fatalf("write after the merge: %+v", next)
	}

	tree, err := e.eng.Tree(e.ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if tree.ThreadID != "main" || len(tree.Nodes) != 8 {
		t.Fatalf("tree has %d nodes, want 4 + the merge + 1 on main and 2 on the branch", len(tree.Nodes))
	}
	edges := map[string]bool{}
	for _, ed := range tree.Edges {
		edges[fmt.Sprintf("%s>%s/%v", ed.From, ed.To, ed.Merge)] = true
	}
	for _, want := range []string{
		fmt.Sprintf("%s>%s/false", main[0], main[1]),
		fmt.Sprintf("%s>%s/false", main[1], br.CheckpointID), // fork
		fmt.Sprintf("%s>%s/false", br.CheckpointID, work.ID),
		fmt.Sprintf("%s>%s/false", main[3], m.CheckpointID), // merge, first parent
		fmt.Sprintf("%s>%s/true", work.ID, m.CheckpointID),  // merge, second parent
	} {
		if !edges[want] {
			t.Fatalf("tree lacks edge %s; has %v", want, edges)
		}
	}
	if len(tree.Edges) != 8 {
		t.Fatalf("%d edges, want 8", len(tree.Edges))
	}
	heads := map[uuid.UUID]bool{}
	for _, n := range tree.Nodes {
		if n.IsHead {
			heads[n.ID] = true
		}
		if n.ID == m.CheckpointID && (n.MergeParentID != work.ID || n.ParentID != main[3]) {
			t.Fatalf("merge node: %+v", n)
		}
		if n.ID == br.CheckpointID && (n.ThreadID != br.ThreadID || n.ParentID != main[1] || n.Step != 3) {
			t.Fatalf("fork node: %+v", n)
		}
	}
	if len(heads) != 2 || !heads[work.ID] || heads[m.CheckpointID] {
		t.Fatalf("heads in the tree %v, want one per thread", heads)
	}
	// A branch's own tree leaves out the edge from its source, outside it.
	btree, err := e.eng.Tree(e.ctx, br.ThreadID)
	if err != nil || len(btree.Nodes) != 2 || len(btree.Edges) != 1 {
		t.Fatalf("branch tree: %+v %v", btree, err)
	}

	// Lineage crosses from the branch into main.
	lin, err := e.eng.Lineage(e.ctx, work.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []uuid.UUID
	for _, c := range lin {
		got = append(got, c.ID)
	}
	if want := []uuid.UUID{work.ID, br.CheckpointID, main[1], main[0]}; !slices.Equal(got, want) {
		t.Fatalf("lineage %v, want %v", got, want)
	}
	if lin[2].ThreadID != "main" || lin[0].ThreadID != br.ThreadID || lin[3].Step != 1 {
		t.Fatalf("lineage entries: %+v", lin)
	}
	// The merge checkpoint's lineage follows its first parent.
	if lin, err = e.eng.Lineage(e.ctx, m.CheckpointID); err != nil || len(lin) != 5 || lin[1].ID != main[3] {
		t.Fatalf("lineage of the merge: %+v %v", lin, err)
	}
	// A second branch gets a name of its own.
	br2, err := e.eng.Branch(e.ctx, main[1], "experiment")
	if err != nil || br2.ThreadID == br.ThreadID {
		t.Fatalf("second branch: %+v %v", br2, err)
	}
	if branches, _ := e.eng.Branches(e.ctx, "main"); len(branches) != 2 || branches[0].ThreadID != br.ThreadID {
		t.Fatalf("branches, oldest first: %+v", branches)
	}
	e.checkTree()
}

func testTimeTravelBadInput(t *testing.T, e *env) {
	ids := e.line("t", 3)
	if _, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("t", 2)); err != nil {
		t.Fatal(err)
	}
	e.snap(engine.SnapshotInput{ThreadID: "y", Namespace: "sub"}) // a branch head in "sub", where t has none
	unknown := engine.NewCheckpointID()
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"rewind to an unknown id", func() error { _, err := e.eng.Rewind(e.ctx, unknown); return err }, engine.ErrNotFound},
		{"rewind to a deleted checkpoint", func() error { _, err := e.eng.Rewind(e.ctx, ids[0]); return err }, engine.ErrNotFound},
		{"truncate to an unknown id", func() error { _, err := e.eng.RewindAndTruncate(e.ctx, unknown); return err }, engine.ErrNotFound},
		{"branch of an unknown id", func() error { _, err := e.eng.Branch(e.ctx, unknown, "x"); return err }, engine.ErrNotFound},
		{"branch of a deleted checkpoint", func() error { _, err := e.eng.Branch(e.ctx, ids[0], "x"); return err }, engine.ErrNotFound},
		{"branch with no name", func() error { _, err := e.eng.Branch(e.ctx, ids[2], ""); return err }, engine.ErrInvalidInput},
		{"branch name with NUL", func() error { _, err := e.eng.Branch(e.ctx, ids[2], "a\x00"); return err }, engine.ErrInvalidInput},
		{"branch name too long", func() error { _, err := e.eng.Branch(e.ctx, ids[2], strings.Repeat("n", 250)); return err }, engine.ErrInvalidInput},
		{"lineage of an unknown id", func() error { _, err := e.eng.Lineage(e.ctx, unknown); return err }, engine.ErrNotFound},
		{"tree of an unknown thread", func() error { _, err := e.eng.Tree(e.ctx, "nobody"); return err }, engine.ErrNotFound},
		{"merge of an empty branch", func() error { _, err := e.eng.MergeBranch(e.ctx, "nobody", "t"); return err }, engine.ErrNotFound},
		{"merge into itself", func() error { _, err := e.eng.MergeBranch(e.ctx, "t", "t"); return err }, engine.ErrInvalidInput},
		{"merge into a thread that does not exist", func() error { _, err := e.eng.MergeBranch(e.ctx, "t", "x"); return err }, engine.ErrNotFound},
		{"merge into a namespace the thread does not use", func() error { _, err := e.eng.MergeBranchIn(e.ctx, "y", "t", "sub"); return err }, engine.ErrNotFound},
		{"merge with an empty thread id", func() error { _, err := e.eng.MergeBranch(e.ctx, "", "t"); return err }, engine.ErrInvalidInput},
		{"diff with an unknown id", func() error { _, err := e.eng.Diff(e.ctx, ids[2], unknown); return err }, engine.ErrNotFound},
		{"copy of an unknown thread", func() error { _, err := e.eng.CopyThread(e.ctx, "nobody", "x"); return err }, engine.ErrNotFound},
		{"copy onto an existing thread", func() error { _, err := e.eng.CopyThread(e.ctx, "t", "t"); return err }, engine.ErrInvalidInput},
		{"copy to a bad thread id", func() error { _, err := e.eng.CopyThread(e.ctx, "t", "a\x00"); return err }, engine.ErrInvalidInput},
		{"prune with a bad policy", func() error { _, err := e.eng.PruneThreads(e.ctx, engine.KeepLastN(0), "t"); return err }, engine.ErrInvalidInput},
		{"prune of a bad thread id", func() error { _, err := e.eng.PruneThreads(e.ctx, engine.KeepNone(), "t", ""); return err }, engine.ErrInvalidInput},
		{"delete for runs with NUL", func() error { _, err := e.eng.DeleteCheckpoints(e.ctx, engine.ForRuns("r\x00")); return err }, engine.ErrInvalidInput},
		{"points of an unknown thread", func() error {
			_, err := e.eng.TimeTravelPoints(e.ctx, "nobody", engine.PointsOptions{})
			return err
		}, engine.ErrNotFound},
		{"branches of an empty thread id", func() error { _, err := e.eng.Branches(e.ctx, ""); return err }, engine.ErrInvalidInput},
	}
	for _, c := range cases {
		before := e.inventory("x")
		head := e.head("t").ID
		if err := c.call(); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		e.unchanged(c.name, before, "x")
		if e.head("t").ID != head {
			t.Errorf("%s: the head moved", c.name)
		}
	}
}

// Writers and a rewinder work on one thread at once: no checkpoint is
// lost, every parent link holds, and the head is always a real checkpoint.
func testConcurrentSnapshotAndRewind(t *testing.T, e *env) {
	ids := e.line("t", 5)
	const writers, each = 6, 40
	var written atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := e.eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t"}); err != nil {
					errs <- err
					return
				}
				written.Add(1)
			}
		})
	}
	stop := make(chan struct{})
	var rewinds atomic.Int64
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.eng.Rewind(e.ctx, ids[i%len(ids)]); err != nil {
				errs <- err
				return
			}
			rewinds.Add(1)
			if _, err := e.eng.Latest(e.ctx, "t"); err != nil {
				errs <- fmt.Errorf("head missing during the run: %w", err)
				return
			}
		}
	})
	for written.Load() < writers*each && len(errs) == 0 {
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := e.checkpoints(); got != 5+writers*each {
		t.Fatalf("%d checkpoints, want %d", got, 5+writers*each)
	}
	if rewinds.Load() == 0 {
		t.Fatal("the rewinder never ran")
	}
	e.checkTree()
}

func testClearMemory(t *testing.T, e *env) {
	e.line("t", 3)
	cleared, err := e.eng.ClearMemory(e.ctx, "t")
	if err != nil || cleared.Step != 4 || !cleared.Created {
		t.Fatalf("clear memory: %+v %v", cleared, err)
	}
	e.line("t", 2)
	if got := e.checkpoints(); got != 6 {
		t.Fatalf("%d checkpoints, want 6: clearing deletes nothing", got)
	}
	found, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Metadata: json.RawMessage(`{"memory_cleared": true}`), Limit: 1})
	if err != nil || len(found) != 1 || found[0].ID != cleared.ID {
		t.Fatalf("marker: %+v %v", found, err)
	}
	marker := e.get(cleared.ID)
	jsonEqual(t, "marker messages", marker.Messages, []byte(`[]`))
	jsonEqual(t, "marker state", marker.State, []byte(`{}`))
	jsonEqual(t, "marker tool results", marker.ToolResults, []byte(`{}`))
	jsonEqual(t, "marker metadata", marker.Metadata, []byte(`{"memory_cleared": true}`))
	if marker.Summary != "Memory cleared" || !slices.Equal(marker.Tags, []string{"memory_cleared"}) {
		t.Fatalf("marker: %+v", marker.CheckpointInfo)
	}
	// A second marker is the one found.
	again, err := e.eng.ClearMemory(e.ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if found, _ := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Metadata: json.RawMessage(`{"memory_cleared": true}`), Limit: 1}); len(found) != 1 || found[0].ID != again.ID {
		t.Fatalf("latest marker: %+v", found)
	}
	if byTag, _ := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Tags: []string{"memory_cleared"}}); len(byTag) != 2 {
		t.Fatalf("markers by tag: %d", len(byTag))
	}
}

func testDiff(t *testing.T, e *env) {
	a := e.snap(engine.SnapshotInput{ThreadID: "t",
		Messages:    json.RawMessage(`[{"role":"user","content":"hi"}]`),
		State:       json.RawMessage(`{"keep": 1, "change": "a", "drop": true, "same": {"x": 1, "y": [1, 2]}}`),
		ToolResults: json.RawMessage(`{"search": {"n": 1}}`)})
	c := e.snap(engine.SnapshotInput{ThreadID: "t",
		Messages:    json.RawMessage(`[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`),
		State:       json.RawMessage(`{"keep": 1, "change": "b", "new": [1], "same": {"x": 1, "y": [1, 2]}}`),
		ToolResults: json.RawMessage(`{"search": {"n": 2}, "book": {}}`)})
	d, err := e.eng.Diff(e.ctx, a.ID, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.From != a.ID || d.To != c.ID || len(d.MessagesAdded) != 1 || len(d.MessagesRemoved) != 0 {
		t.Fatalf("messages: +%d -%d", len(d.MessagesAdded), len(d.MessagesRemoved))
	}
	jsonEqual(t, "added message", d.MessagesAdded[0], []byte(`{"role":"assistant","content":"hello"}`))
	if fmt.Sprint(d.State) != "{[new] [drop] [change]}" || fmt.Sprint(d.ToolResults) != "{[book] [] [search]}" {
		t.Fatalf("keys: state %v tool results %v", d.State, d.ToolResults)
	}
	// Backwards, the message was removed.
	back, err := e.eng.Diff(e.ctx, c.ID, a.ID)
	if err != nil || len(back.MessagesRemoved) != 1 || len(back.MessagesAdded) != 0 {
		t.Fatalf("reverse diff: %+v %v", back, err)
	}
	if fmt.Sprint(back.State) != "{[drop] [new] [change]}" {
		t.Fatalf("reverse state keys: %v", back.State)
	}
	// A checkpoint against itself: nothing changed.
	if self, err := e.eng.Diff(e.ctx, c.ID, c.ID); err != nil || len(self.MessagesAdded)+len(self.MessagesRemoved) != 0 ||
		fmt.Sprint(self.State, self.ToolResults) != "{[] [] []} {[] [] []}" {
		t.Fatalf("diff with itself: %+v %v", self, err)
	}
	// An edit of an earlier message: the rest counts as removed and added.
	edited := e.snap(engine.SnapshotInput{ThreadID: "t",
		Messages: json.RawMessage(`[{"role":"user","content":"hey"},{"role":"assistant","content":"hello"}]`)})
	if d, err = e.eng.Diff(e.ctx, c.ID, edited.ID); err != nil || len(d.MessagesAdded) != 2 || len(d.MessagesRemoved) != 2 {
		t.Fatalf("diff after an edit: %+v %v", d, err)
	}
	// Values are compared, not their spelling.
	respelled := e.snap(engine.SnapshotInput{ThreadID: "t",
		Messages:    json.RawMessage(`[ {"content":"hey", "role":"user"}, {"role":"assistant","content":"hello"}, {"role":"user","content":"more"} ]`),
		State:       json.RawMessage(`{"same": {"y": [1,2], "x": 1}, "keep": 1}`),
		ToolResults: json.RawMessage(`{"search": {"n":2}, "book": { }}`)})
	if d, err = e.eng.Diff(e.ctx, c.ID, respelled.ID); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(d.State) != "{[] [change new] []}" || fmt.Sprint(d.ToolResults) != "{[] [] []}" {
		t.Errorf("diff of values spelled otherwise: state %v, tool results %v; want only change and new removed", d.State, d.ToolResults)
	}
	if d, err = e.eng.Diff(e.ctx, edited.ID, respelled.ID); err != nil || len(d.MessagesRemoved) != 0 || len(d.MessagesAdded) != 1 {
		t.Errorf("diff of messages spelled otherwise: +%d -%d (%v), want +1 -0", len(d.MessagesAdded), len(d.MessagesRemoved), err)
	}
}

func testCopyThread(t *testing.T, e *env) {
	ids := e.line("src", 4)
	if _, err := e.eng.PutWrites(e.ctx, ids[3], "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`{"v": "\u0000"}`)}, {Channel: "d", Value: json.RawMessage(`2`)}}); err != nil {
		t.Fatal(err)
	}
	e.snap(engine.SnapshotInput{ThreadID: "src", Namespace: "sub", State: json.RawMessage(`{"sub": true}`), Tags: []string{"s"},
		Metadata: json.RawMessage(`{"run_id": "r"}`), Trigger: engine.TriggerLLMCall, NextNode: "n"})
	before := e.inventory()
	r, err := e.eng.CopyThread(e.ctx, "src", "dst")
	if err != nil || r.Copied != 5 {
		t.Fatalf("copy: %d %v, want 5", r.Copied, err)
	}
	for _, ns := range []string{"", "sub"} {
		srcList := listAll(t, e.ctx, e.eng, "src", ns)
		dstList := listAll(t, e.ctx, e.eng, "dst", ns)
		if len(dstList) != len(srcList) {
			t.Fatalf("namespace %q: %d copies of %d", ns, len(dstList), len(srcList))
		}
		for i := range srcList {
			s, d := srcList[i], dstList[i]
			if s.Step != d.Step || s.Seq != d.Seq || s.Summary != d.Summary || s.ID == d.ID || d.ThreadID != "dst" || d.Namespace != ns ||
				s.Trigger != d.Trigger || !slices.Equal(s.Tags, d.Tags) || s.NextNode != d.NextNode || s.SizeBytes != d.SizeBytes {
				t.Fatalf("copy %d: %+v of %+v", i, d, s)
			}
			jsonEqual(t, "copied metadata", d.Metadata, s.Metadata)
			sc, dc := e.get(s.ID), e.get(d.ID)
			jsonEqual(t, "copied messages", dc.Messages, sc.Messages)
			jsonEqual(t, "copied state", dc.State, sc.State)
			jsonEqual(t, "copied tool results", dc.ToolResults, sc.ToolResults)
			if len(dc.PendingWrites) != len(sc.PendingWrites) {
				t.Fatalf("copy %d: %d pending writes, want %d", i, len(dc.PendingWrites), len(sc.PendingWrites))
			}
			for j := range dc.PendingWrites {
				if dc.PendingWrites[j].TaskID != sc.PendingWrites[j].TaskID || dc.PendingWrites[j].Channel != sc.PendingWrites[j].Channel {
					t.Fatalf("copied write %d: %+v", j, dc.PendingWrites[j])
				}
				jsonEqual(t, "copied write", dc.PendingWrites[j].Value, sc.PendingWrites[j].Value)
			}
			if i < len(srcList)-1 && d.ParentID != dstList[i+1].ID {
				t.Fatalf("copy %d: parent %s, want the copy %s", i, d.ParentID, dstList[i+1].ID)
			}
		}
		sh, _ := e.eng.LatestIn(e.ctx, "src", ns)
		dh, err := e.eng.LatestIn(e.ctx, "dst", ns)
		if err != nil || sh == nil || dh.Step != sh.Step || dh.ID == sh.ID {
			t.Fatalf("namespace %q: copy's head %+v, source's %+v (%v)", ns, dh, sh, err)
		}
	}
	// The source is unchanged and the copy is independent of it.
	after := e.inventory()
	for id, c := range before.checkpoints {
		if a, ok := after.checkpoints[id]; !ok || string(mustJSON(a)) != string(mustJSON(c)) {
			t.Fatalf("source checkpoint %s changed", id)
		}
	}
	if len(after.checkpoints) != 10 {
		t.Fatalf("%d checkpoints after the copy, want 10", len(after.checkpoints))
	}
	e.snap(engine.SnapshotInput{ThreadID: "dst"})
	if got := listAll(t, e.ctx, e.eng, "src", ""); len(got) != 4 {
		t.Fatal("a write to the copy reached the source")
	}
	if _, err := e.eng.DeleteThreads(e.ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, e.ctx, e.eng, "dst", ""); len(got) != 5 {
		t.Fatalf("deleting the source changed the copy: %d", len(got))
	}
	e.checkTree()
}

// CopyThread's result maps every source checkpoint to its copy: a thread
// with a rewound line, a merge from a branch, deltas and a second namespace.
func testCopyThreadMapsIDs(t *testing.T, e *env) {
	ids := e.line("src", 4)
	if _, err := e.eng.Rewind(e.ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	e.line("src", 2) // a second line from ids[1]: parents are not the previous write
	b, err := e.eng.Branch(e.ctx, ids[2], "b")
	if err != nil {
		t.Fatal(err)
	}
	e.snap(engine.SnapshotInput{ThreadID: b.ThreadID, State: json.RawMessage(`{"b": 1}`)})
	if _, err := e.eng.MergeBranch(e.ctx, b.ThreadID, "src"); err != nil {
		t.Fatal(err)
	}
	e.snap(engine.SnapshotInput{ThreadID: "src", Namespace: "sub", State: json.RawMessage(`{"sub": true}`)})
	e.snap(engine.SnapshotInput{ThreadID: "src", Namespace: "sub", State: json.RawMessage(`{"sub": 2}`)})

	var src []engine.CheckpointInfo // namespace then write order, as the result is
	for _, ns := range []string{"", "sub"} {
		l := listAll(t, e.ctx, e.eng, "src", ns)
		slices.Reverse(l)
		src = append(src, l...)
	}
	r, err := e.eng.CopyThread(e.ctx, "src", "dst")
	if err != nil {
		t.Fatal(err)
	}
	if r.Copied != int64(len(src)) || len(r.IDs) != len(src) {
		t.Fatalf("copied %d, %d pairs; the source has %d checkpoints", r.Copied, len(r.IDs), len(src))
	}
	copies := map[uuid.UUID]bool{}
	for _, ns := range []string{"", "sub"} {
		for _, c := range listAll(t, e.ctx, e.eng, "dst", ns) {
			copies[c.ID] = true
		}
	}
	newIDs := map[uuid.UUID]bool{}
	for i, p := range r.IDs {
		if p.Old != src[i].ID {
			t.Fatalf("pair %d: old %s, want %s (namespace then write order)", i, p.Old, src[i].ID)
		}
		if newIDs[p.New] || !copies[p.New] {
			t.Fatalf("pair %d: new id %s repeated or not a checkpoint of the copy", i, p.New)
		}
		newIDs[p.New] = true
		if n, ok := r.NewID(p.Old); !ok || n != p.New {
			t.Fatalf("NewID(%s) = %s %v, want %s", p.Old, n, ok, p.New)
		}
		old, cp := e.get(p.Old), e.get(p.New)
		if cp.ThreadID != "dst" || cp.Namespace != old.Namespace || cp.Step != old.Step || cp.Seq != old.Seq || cp.Summary != old.Summary {
			t.Fatalf("pair %d: copy %+v of %+v", i, cp.CheckpointInfo, old.CheckpointInfo)
		}
		jsonEqual(t, "copied messages", cp.Messages, old.Messages)
		jsonEqual(t, "copied state", cp.State, old.State)
		jsonEqual(t, "copied tool results", cp.ToolResults, old.ToolResults)
		jsonEqual(t, "copied metadata", cp.Metadata, old.Metadata)
		// Links inside the source go to the copies; links outside it (the
		// merged branch's head) stay.
		through := func(id uuid.UUID) uuid.UUID {
			if n, ok := r.NewID(id); ok {
				return n
			}
			return id
		}
		if cp.ParentID != through(old.ParentID) || cp.MergeParentID != through(old.MergeParentID) {
			t.Fatalf("pair %d: copy's parents %s %s, source's %s %s", i, cp.ParentID, cp.MergeParentID, old.ParentID, old.MergeParentID)
		}
	}
	if len(copies) != len(newIDs) {
		t.Fatalf("the copy holds %d checkpoints, the result names %d", len(copies), len(newIDs))
	}
	if _, ok := r.NewID(b.CheckpointID); ok {
		t.Fatal("NewID maps a checkpoint of another thread")
	}
	e.checkTree()
}

func testForRunsAndPruneThreads(t *testing.T, e *env) {
	for i := range 6 {
		run := []string{"r1", "r2", "r3"}[i%3]
		res := e.snap(engine.SnapshotInput{ThreadID: "a", Metadata: json.RawMessage(`{"run_id": "` + run + `"}`)})
		if _, err := e.eng.PutWrites(e.ctx, res.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
			t.Fatal(err)
		}
	}
	e.snap(engine.SnapshotInput{ThreadID: "b", Metadata: json.RawMessage(`{"run_id": "r1"}`)})
	e.snap(engine.SnapshotInput{ThreadID: "b", Metadata: json.RawMessage(`{"run_id": "r9"}`)})
	e.snap(engine.SnapshotInput{ThreadID: "b", Namespace: "sub", Metadata: json.RawMessage(`{"run_id": "r2", "other": 1}`)})
	e.snap(engine.SnapshotInput{ThreadID: "b", Metadata: json.RawMessage(`{"run": "r1", "x": {"run_id": "r1"}}`)})
	r, err := e.eng.DeleteCheckpoints(e.ctx, engine.ForRuns("r1", "r2"))
	if err != nil || r.Deleted != 6 {
		t.Fatalf("delete for runs: %d %v, want 6", r.Deleted, err)
	}
	var left []string
	for _, th := range []string{"a", "b"} {
		for _, ns := range []string{"", "sub"} {
			for _, c := range listAll(t, e.ctx, e.eng, th, ns) {
				var meta struct {
					RunID string `json:"run_id"`
				}
				if err := json.Unmarshal(c.Metadata, &meta); err != nil {
					t.Fatal(err)
				}
				left = append(left, th+ns+":"+meta.RunID)
			}
		}
	}
	slices.Sort(left)
	if strings.Join(left, " ") != "a:r3 a:r3 b: b:r9" {
		t.Fatalf("left: %v", left)
	}
	if got := e.inventory().counts(); got[2] != 2 {
		t.Fatalf("%d pending writes left, want the 2 of run r3", got[2])
	}
	if r, err := e.eng.DeleteCheckpoints(e.ctx, engine.ForRuns("r1", "nope")); err != nil || r.Deleted != 0 {
		t.Fatalf("a second delete: %d %v", r.Deleted, err)
	}
	if r, err := e.eng.DeleteCheckpoints(e.ctx, engine.ForRuns()); err != nil || r.Deleted != 0 {
		t.Fatalf("no runs: %d %v", r.Deleted, err)
	}

	e.line("c", 5)
	e.snap(engine.SnapshotInput{ThreadID: "c", Namespace: "sub"})
	e.snap(engine.SnapshotInput{ThreadID: "c", Namespace: "sub"})
	r, err = e.eng.PruneThreads(e.ctx, engine.KeepLatest(), "a", "c", "nobody")
	if err != nil || r.Deleted != 6 {
		t.Fatalf("prune keep latest: %d %v, want 6", r.Deleted, err)
	}
	for _, th := range []string{"a", "c"} {
		if list := listAll(t, e.ctx, e.eng, th, ""); len(list) != 1 || list[0].ID != e.head(th).ID {
			t.Fatalf("thread %s after prune: %+v", th, list)
		}
	}
	if list := listAll(t, e.ctx, e.eng, "c", "sub"); len(list) != 1 {
		t.Fatalf("sub-graph of c after prune: %+v", list)
	}
	msgs, state := lineContent(4)
	jsonEqual(t, "kept head's messages", e.head("c").Messages, msgs)
	jsonEqual(t, "kept head's state", e.head("c").State, state)
	if res := e.snap(engine.SnapshotInput{ThreadID: "c"}); res.Step != 6 {
		t.Fatalf("write after prune: %+v", res)
	}
	r, err = e.eng.PruneThreads(e.ctx, engine.KeepNone(), "c")
	if err != nil || r.Deleted != 3 {
		t.Fatalf("prune delete all: %d %v, want 3", r.Deleted, err)
	}
	if _, err := e.eng.Latest(e.ctx, "c"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("pruned thread: %v", err)
	}
	if _, err := e.eng.LatestIn(e.ctx, "c", "sub"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("pruned thread's sub-graph: %v", err)
	}
	if got := listAll(t, e.ctx, e.eng, "b", ""); len(got) != 2 {
		t.Fatalf("unnamed thread touched: %d", len(got))
	}
}

func testDeletesClearARewind(t *testing.T, e *env) {
	var ids []uuid.UUID
	for i := range 3 {
		ids = append(ids, e.snap(engine.SnapshotInput{ThreadID: "run",
			Metadata: json.RawMessage(fmt.Sprintf(`{"run_id": "r%d"}`, i)), State: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}).ID)
	}
	if _, err := e.eng.Rewind(e.ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if r, err := e.eng.DeleteCheckpoints(e.ctx, engine.ForRuns("r0")); err != nil || r.Deleted != 1 {
		t.Fatalf("delete for runs: %d, %v", r.Deleted, err)
	}
	// The rewound-to checkpoint is gone: the head is the newest again, and
	// the thread takes writes.
	if head := e.head("run"); head.ID != ids[2] {
		t.Fatalf("head %s, want the newest %s", head.ID, ids[2])
	}
	res := e.snap(engine.SnapshotInput{ThreadID: "run"})
	if res.ParentID != ids[2] || res.Step != 4 {
		t.Fatalf("next write: %+v, want parent %s", res, ids[2])
	}
}

// testListingsFillEveryField: every call that lists checkpoints
// (ListCheckpoints, Lineage, TimeTravelPoints) fills every field of
// CheckpointInfo, the same as Get.
func testListingsFillEveryField(t *testing.T, e *env) {
	eng := e.open(deltas)
	for i := range 4 {
		msgs := fmt.Sprintf(`[{"role":"user","content":"m%d"}]`, i)
		if i > 0 {
			msgs = fmt.Sprintf(`[{"role":"user","content":"m0"},{"role":"assistant","content":"m%d"}]`, i)
		}
		if _, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", Trigger: engine.TriggerToolCall, Tags: []string{"a", "b"},
			Metadata: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)), Messages: json.RawMessage(msgs),
			State: json.RawMessage(fmt.Sprintf(`{"k": %d, "big": "%s"}`, i, strings.Repeat("x", 100))), NextNode: "n"}); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	points, err := eng.TimeTravelPoints(e.ctx, "t", engine.PointsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	line, err := eng.Lineage(e.ctx, listed[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	formats := map[string]bool{}
	for i, want := range listed {
		got, err := eng.Get(e.ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		formats[want.Format] = true
		for name, info := range map[string]engine.CheckpointInfo{"Get": got.CheckpointInfo, "Lineage": line[i], "TimeTravelPoints": points[i]} {
			if diff := infoDiff(info, want); diff != "" {
				t.Errorf("%s of step %d differs from ListCheckpoints: %s", name, want.Step, diff)
			}
		}
	}
	if !formats["full"] || !formats["delta"] {
		t.Errorf("formats %v: the test wants both full and delta checkpoints", formats)
	}
}

// infoDiff names the fields in which a and b differ ("" when none).
func infoDiff(a, b engine.CheckpointInfo) string {
	var d []string
	if a.ID != b.ID || a.ThreadID != b.ThreadID || a.Namespace != b.Namespace || a.Seq != b.Seq {
		d = append(d, "identity")
	}
	if a.ParentID != b.ParentID || a.MergeParentID != b.MergeParentID || a.Step != b.Step {
		d = append(d, "links or step")
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		d = append(d, "created at")
	}
	if a.Trigger != b.Trigger || !slices.Equal(a.Tags, b.Tags) || a.Summary != b.Summary || a.NextNode != b.NextNode {
		d = append(d, "trigger, tags, summary or next node")
	}
	if jsonDiff(a.Metadata, b.Metadata) != nil {
		d = append(d, "metadata")
	}
	if a.SizeBytes != b.SizeBytes {
		d = append(d, "size")
	}
	if a.Format != b.Format {
		d = append(d, fmt.Sprintf("format %q vs %q", a.Format, b.Format))
	}
	return strings.Join(d, ", ")
}
