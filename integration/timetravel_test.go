package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// line writes n snapshots on thread, the i-th with state {"i": i} and one
// more message each time, and returns their ids.
func (b *bundle) line(t *testing.T, thread string, n int) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	var msgs []map[string]string
	for i := range n {
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("m%d", i)})
		m, _ := json.Marshal(msgs)
		ids = append(ids, b.snap(t, engine.SnapshotInput{
			ThreadID: thread, Messages: m, State: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)),
		}).ID)
	}
	return ids
}

func (b *bundle) head(t *testing.T, thread string) *engine.Checkpoint {
	t.Helper()
	cp, err := b.eng.Latest(b.ctx, thread)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// checkTree checks, for every checkpoint of every thread, that its parent
// exists and that its step is the parent's step + 1, and that every
// thread's head exists.
func (b *bundle) checkTree(t *testing.T) {
	t.Helper()
	var broken int
	err := b.db.Pool.QueryRow(b.ctx, `
		SELECT count(*) FROM pgcheckpoint.checkpoints c
		LEFT JOIN pgcheckpoint.checkpoints p ON p.checkpoint_id = c.parent_checkpoint_id
		WHERE c.parent_checkpoint_id IS NOT NULL AND (p.checkpoint_id IS NULL OR c.step <> p.step + 1)`).Scan(&broken)
	if err != nil {
		t.Fatal(err)
	}
	if broken != 0 {
		t.Fatalf("%d checkpoints with a missing parent or a wrong step", broken)
	}
	var headless int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.threads t
		WHERE pgcheckpoint.head(t.thread_id, t.namespace) IS NULL`).Scan(&headless); err != nil {
		t.Fatal(err)
	}
	if headless != 0 {
		t.Fatalf("%d threads without a head", headless)
	}
}

func TestRewindMovesTheHeadAndDeletesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.line(t, "t", 5)
	res, err := b.eng.Rewind(b.ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if res.ThreadID != "t" || res.Checkpoint.ID != ids[1] || res.StepsBack != 3 || res.Checkpoints != 5 || res.Truncated != 0 {
		t.Fatalf("rewind result: %+v", res)
	}
	jsonEqual(t, "rewound state", res.Checkpoint.State, []byte(`{"i": 1}`))
	if b.head(t, "t").ID != ids[1] {
		t.Fatal("head did not move to the target")
	}
	// The next writes build on the target: history is now a tree.
	next := b.snap(t, engine.SnapshotInput{ThreadID: "t"})
	if next.ParentID != ids[1] || next.Step != 3 {
		t.Fatalf("write after rewind: %+v", next)
	}
	b.snap(t, engine.SnapshotInput{ThreadID: "t"})
	if got := b.count(t)[1]; got != 7 {
		t.Fatalf("%d checkpoints, want 7: rewind deletes nothing", got)
	}
	for _, id := range ids {
		if _, err := b.eng.Get(b.ctx, id); err != nil {
			t.Fatalf("old line checkpoint %s: %v", id, err)
		}
	}
	// Back to the old line.
	res, err = b.eng.Rewind(b.ctx, ids[4])
	if err != nil || res.Checkpoints != 7 || res.StepsBack != -1 {
		t.Fatalf("rewind to the old line: %+v %v", res, err)
	}
	after := b.snap(t, engine.SnapshotInput{ThreadID: "t"})
	if after.ParentID != ids[4] || after.Step != 6 {
		t.Fatalf("write on the old line: %+v", after)
	}
	if got := b.count(t)[1]; got != 8 {
		t.Fatalf("%d checkpoints, want 8", got)
	}
	b.checkTree(t)
}

func TestRewindAndTruncateDeletesOnlyTheHeadLineAfterTheTarget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.line(t, "t", 5)
	// A side line from step 2, then back to the main line's end.
	if _, err := b.eng.Rewind(b.ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	side := b.snap(t, engine.SnapshotInput{ThreadID: "t"}).ID
	if _, err := b.eng.Rewind(b.ctx, ids[4]); err != nil {
		t.Fatal(err)
	}
	other := b.line(t, "other", 2)

	res, err := b.eng.RewindAndTruncate(b.ctx, ids[2])
	if err != nil {
		t.Fatal(err)
	}
	if res.Truncated != 2 || res.Checkpoints != 6 {
		t.Fatalf("truncate result: %+v, want 2 deleted of 6", res)
	}
	for i, id := range ids {
		_, err := b.eng.Get(b.ctx, id)
		if deleted := i > 2; deleted != errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("checkpoint step %d: %v", i+1, err)
		}
	}
	for _, id := range append([]uuid.UUID{side}, other...) {
		if _, err := b.eng.Get(b.ctx, id); err != nil {
			t.Fatalf("checkpoint %s off the truncated line: %v", id, err)
		}
	}
	if b.head(t, "t").ID != ids[2] {
		t.Fatal("head is not the target")
	}
	// Truncating to a checkpoint that is not on the head's line deletes
	// nothing.
	res, err = b.eng.RewindAndTruncate(b.ctx, side)
	if err != nil || res.Truncated != 0 {
		t.Fatalf("truncate to another line: %+v %v", res, err)
	}
	b.checkTree(t)
}

func TestRewindToStepFollowsTheHeadLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.line(t, "t", 600) // far past the old 500-row limit
	if _, err := b.eng.Rewind(b.ctx, ids[3]); err != nil {
		t.Fatal(err)
	}
	side := b.line(t, "t", 3) // steps 5, 6, 7 on a new line
	if _, err := b.eng.Rewind(b.ctx, side[2]); err != nil {
		t.Fatal(err)
	}
	// Step 6 on the head's line is side[1], not ids[5].
	res, err := b.eng.RewindToStep(b.ctx, "t", 6)
	if err != nil || res.Checkpoint.ID != side[1] {
		t.Fatalf("rewind to step 6: %+v %v, want %s", res, err, side[1])
	}
	// From the old line's end, step 3 is found 597 links back.
	if _, err := b.eng.Rewind(b.ctx, ids[599]); err != nil {
		t.Fatal(err)
	}
	if res, err = b.eng.RewindToStep(b.ctx, "t", 3); err != nil || res.Checkpoint.ID != ids[2] || res.StepsBack != 597 {
		t.Fatalf("rewind to step 3: %+v %v", res, err)
	}
	// A step above the head gives the head.
	if res, err = b.eng.RewindToStep(b.ctx, "t", 10_000); err != nil || res.Checkpoint.ID != ids[2] {
		t.Fatalf("rewind to a step above the head: %+v %v", res, err)
	}
	if _, err := b.eng.RewindToStep(b.ctx, "t", 0); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("step 0: %v", err)
	}
	if _, err := b.eng.RewindToStep(b.ctx, "nobody", 1); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unknown thread: %v", err)
	}
	// Below the first checkpoint left on the line.
	if _, err := b.eng.DeleteBefore(b.ctx, "t", 3); err != nil {
		t.Fatal(err)
	}
	before := b.count(t)
	if _, err := b.eng.RewindToStep(b.ctx, "t", 2); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("step below the first: %v", err)
	}
	if after := b.count(t); after != before || b.head(t, "t").ID != ids[2] {
		t.Fatalf("a failed rewind changed something: %v -> %v", before, after)
	}
}

func TestTimeTravelPointsPageThroughTheHeadLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.line(t, "t", 25)
	if _, err := b.eng.Rewind(b.ctx, ids[19]); err != nil {
		t.Fatal(err)
	}
	var got []uuid.UUID
	var cursor uuid.UUID
	for {
		page, err := b.eng.TimeTravelPoints(b.ctx, "t", engine.PointsOptions{Limit: 7, Before: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, p := range page {
			got = append(got, p.ID)
		}
		cursor = page[len(page)-1].ID
	}
	want := slices.Clone(ids[:20])
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("points: got %d, want the 20 of the head's line, newest first", len(got))
	}
	if _, err := b.eng.TimeTravelPoints(b.ctx, "t", engine.PointsOptions{Before: engine.NewCheckpointID()}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unknown cursor: %v", err)
	}
}

func TestBranchMergeTreeAndLineage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	main := b.line(t, "main", 4)
	src, _ := b.eng.Get(b.ctx, main[1])

	br, err := b.eng.Branch(b.ctx, main[1], "experiment")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(br.ThreadID, "main-branch-experiment-") || br.Step != 3 {
		t.Fatalf("branch: %+v", br)
	}
	first, err := b.eng.Get(b.ctx, br.CheckpointID)
	if err != nil {
		t.Fatal(err)
	}
	if first.ParentID != main[1] || first.ThreadID != br.ThreadID {
		t.Fatalf("branch's first checkpoint: %+v", first.CheckpointInfo)
	}
	jsonEqual(t, "branch messages", first.Messages, src.Messages)
	jsonEqual(t, "branch state", first.State, src.State)
	branches, err := b.eng.Branches(b.ctx, "main")
	if err != nil || len(branches) != 1 || branches[0].ThreadID != br.ThreadID || branches[0].Name != "experiment" || branches[0].FromID != main[1] {
		t.Fatalf("branches: %+v %v", branches, err)
	}
	// Work on the branch, then merge it back.
	work := b.snap(t, engine.SnapshotInput{ThreadID: br.ThreadID, State: json.RawMessage(`{"found": "it"}`)})
	m, err := b.eng.MergeBranch(b.ctx, br.ThreadID, "main")
	if err != nil {
		t.Fatal(err)
	}
	if m.ParentID != main[3] || m.MergeParentID != work.ID || m.Step != 5 {
		t.Fatalf("merge: %+v", m)
	}
	merged := b.head(t, "main")
	if merged.ID != m.CheckpointID || merged.MergeParentID != work.ID {
		t.Fatalf("main head after merge: %+v", merged.CheckpointInfo)
	}
	jsonEqual(t, "merged state", merged.State, []byte(`{"found": "it"}`))

	tree, err := b.eng.Tree(b.ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.Nodes) != 7 {
		t.Fatalf("tree has %d nodes, want 4 + 2 on the branch + the merge", len(tree.Nodes))
	}
	edges := map[string]bool{}
	for _, e := range tree.Edges {
		edges[fmt.Sprintf("%s>%s/%v", e.From, e.To, e.Merge)] = true
	}
	for _, want := range []string{
		fmt.Sprintf("%s>%s/false", main[1], br.CheckpointID), // fork
		fmt.Sprintf("%s>%s/false", main[3], m.CheckpointID),  // merge, first parent
		fmt.Sprintf("%s>%s/true", work.ID, m.CheckpointID),   // merge, second parent
	} {
		if !edges[want] {
			t.Fatalf("tree lacks edge %s; has %v", want, edges)
		}
	}
	if len(tree.Edges) != 7 {
		t.Fatalf("%d edges, want 7", len(tree.Edges))
	}
	heads := 0
	for _, n := range tree.Nodes {
		if n.IsHead {
			heads++
		}
	}
	if heads != 2 {
		t.Fatalf("%d heads in the tree, want one per thread", heads)
	}

	// Lineage crosses from the branch into main.
	lin, err := b.eng.Lineage(b.ctx, work.ID)
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
	// The SQL functions give DBAs the same answers.
	var sqlNodes, sqlLineage int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT (SELECT count(*) FROM pgcheckpoint.tree('main')),
		(SELECT count(*) FROM pgcheckpoint.lineage($1))`, work.ID).Scan(&sqlNodes, &sqlLineage); err != nil {
		t.Fatal(err)
	}
	if sqlNodes != len(tree.Nodes) || sqlLineage != len(lin) {
		t.Fatalf("SQL functions: %d nodes, %d ancestors", sqlNodes, sqlLineage)
	}
	b.checkTree(t)
}

func TestTimeTravelBadInputIsTypedAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.line(t, "t", 3)
	if _, err := b.eng.DeleteBefore(b.ctx, "t", 2); err != nil {
		t.Fatal(err)
	}
	unknown := engine.NewCheckpointID()
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"rewind to an unknown id", func() error { _, err := b.eng.Rewind(b.ctx, unknown); return err }, engine.ErrNotFound},
		{"truncate to an unknown id", func() error { _, err := b.eng.RewindAndTruncate(b.ctx, unknown); return err }, engine.ErrNotFound},
		{"branch of an unknown id", func() error { _, err := b.eng.Branch(b.ctx, unknown, "x"); return err }, engine.ErrNotFound},
		{"branch of a deleted checkpoint", func() error { _, err := b.eng.Branch(b.ctx, ids[0], "x"); return err }, engine.ErrNotFound},
		{"branch with no name", func() error { _, err := b.eng.Branch(b.ctx, ids[2], ""); return err }, engine.ErrInvalidInput},
		{"branch name with NUL", func() error { _, err := b.eng.Branch(b.ctx, ids[2], "a\x00"); return err }, engine.ErrInvalidInput},
		{"lineage of an unknown id", func() error { _, err := b.eng.Lineage(b.ctx, unknown); return err }, engine.ErrNotFound},
		{"tree of an unknown thread", func() error { _, err := b.eng.Tree(b.ctx, "nobody"); return err }, engine.ErrNotFound},
		{"merge of an empty branch", func() error { _, err := b.eng.MergeBranch(b.ctx, "nobody", "t"); return err }, engine.ErrNotFound},
		{"merge into itself", func() error { _, err := b.eng.MergeBranch(b.ctx, "t", "t"); return err }, engine.ErrInvalidInput},
		{"diff with an unknown id", func() error { _, err := b.eng.Diff(b.ctx, ids[2], unknown); return err }, engine.ErrNotFound},
		{"copy of an unknown thread", func() error { _, err := b.eng.CopyThread(b.ctx, "nobody", "x"); return err }, engine.ErrNotFound},
		{"copy onto an existing thread", func() error { _, err := b.eng.CopyThread(b.ctx, "t", "t"); return err }, engine.ErrInvalidInput},
		{"prune with no strategy", func() error { _, err := b.eng.Prune(b.ctx, []string{"t"}, 0); return err }, engine.ErrInvalidInput},
		{"points of an unknown thread", func() error {
			_, err := b.eng.TimeTravelPoints(b.ctx, "nobody", engine.PointsOptions{})
			return err
		}, engine.ErrNotFound},
	}
	for _, c := range cases {
		before := b.count(t)
		head := b.head(t, "t").ID
		if err := c.call(); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if after := b.count(t); after != before || b.head(t, "t").ID != head {
			t.Errorf("%s: something changed: %v -> %v", c.name, before, after)
		}
	}
}

// Writers and a rewinder work on one thread at once: no checkpoint is lost,
// every parent link holds, and the head is always a real checkpoint.
func TestConcurrentSnapshotAndRewind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.line(t, "t", 5)
	const writers, each = 6, 40
	var written atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t"}); err != nil {
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
			if _, err := b.eng.Rewind(b.ctx, ids[i%len(ids)]); err != nil {
				errs <- err
				return
			}
			rewinds.Add(1)
			if _, err := b.eng.Latest(b.ctx, "t"); err != nil {
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
	if got := b.count(t)[1]; got != int64(5+writers*each) {
		t.Fatalf("%d checkpoints, want %d", got, 5+writers*each)
	}
	if rewinds.Load() == 0 {
		t.Fatal("the rewinder never ran")
	}
	b.checkTree(t)
}

func TestClearMemoryAppendsAMarker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.line(t, "t", 3)
	cleared, err := b.eng.ClearMemory(b.ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	b.line(t, "t", 2)
	if got := b.count(t)[1]; got != 6 {
		t.Fatalf("%d checkpoints, want 6: clearing deletes nothing", got)
	}
	found, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Metadata: json.RawMessage(`{"memory_cleared": true}`), Limit: 1})
	if err != nil || len(found) != 1 || found[0].ID != cleared.ID {
		t.Fatalf("marker: %+v %v", found, err)
	}
	marker, _ := b.eng.Get(b.ctx, cleared.ID)
	if string(marker.Messages) != "[]" || string(marker.State) != "{}" {
		t.Fatalf("marker content: %s %s", marker.Messages, marker.State)
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.snap(t, engine.SnapshotInput{ThreadID: "t",
		Messages:    json.RawMessage(`[{"role":"user","content":"hi"}]`),
		State:       json.RawMessage(`{"keep": 1, "change": "a", "drop": true}`),
		ToolResults: json.RawMessage(`{"search": {"n": 1}}`)})
	c := b.snap(t, engine.SnapshotInput{ThreadID: "t",
		Messages:    json.RawMessage(`[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`),
		State:       json.RawMessage(`{"keep": 1, "change": "b", "new": [1]}`),
		ToolResults: json.RawMessage(`{"search": {"n": 2}, "book": {}}`)})
	d, err := b.eng.Diff(b.ctx, a.ID, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.MessagesAdded) != 1 || len(d.MessagesRemoved) != 0 {
		t.Fatalf("messages: +%d -%d", len(d.MessagesAdded), len(d.MessagesRemoved))
	}
	jsonEqual(t, "added message", d.MessagesAdded[0], []byte(`{"role":"assistant","content":"hello"}`))
	if fmt.Sprint(d.State) != "{[new] [drop] [change]}" || fmt.Sprint(d.ToolResults) != "{[book] [] [search]}" {
		t.Fatalf("keys: state %v tool results %v", d.State, d.ToolResults)
	}
	// Backwards, the message was removed.
	back, err := b.eng.Diff(b.ctx, c.ID, a.ID)
	if err != nil || len(back.MessagesRemoved) != 1 || len(back.MessagesAdded) != 0 {
		t.Fatalf("reverse diff: %+v %v", back, err)
	}
}

func TestCopyThread(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.line(t, "src", 4)
	if _, err := b.eng.PutWrites(b.ctx, ids[3], "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`{"v": "\u0000"}`)}}); err != nil {
		t.Fatal(err)
	}
	srcTree, _ := b.eng.Tree(b.ctx, "src")
	n, err := b.eng.CopyThread(b.ctx, "src", "dst")
	if err != nil || n != 4 {
		t.Fatalf("copy: %d %v", n, err)
	}
	srcList, _ := b.eng.ListCheckpoints(b.ctx, "src", engine.ListOptions{})
	dstList, _ := b.eng.ListCheckpoints(b.ctx, "dst", engine.ListOptions{})
	if len(dstList) != 4 {
		t.Fatalf("%d copies", len(dstList))
	}
	for i := range srcList {
		s, d := srcList[i], dstList[i]
		if s.Step != d.Step || s.Seq != d.Seq || s.Summary != d.Summary || s.ID == d.ID {
			t.Fatalf("copy %d: %+v of %+v", i, d, s)
		}
		sc, _ := b.eng.Get(b.ctx, s.ID)
		dc, _ := b.eng.Get(b.ctx, d.ID)
		jsonEqual(t, "copied messages", dc.Messages, sc.Messages)
		jsonEqual(t, "copied state", dc.State, sc.State)
		if len(dc.PendingWrites) != len(sc.PendingWrites) {
			t.Fatalf("copy %d: %d pending writes, want %d", i, len(dc.PendingWrites), len(sc.PendingWrites))
		}
		for j := range dc.PendingWrites {
			jsonEqual(t, "copied write", dc.PendingWrites[j].Value, sc.PendingWrites[j].Value)
		}
		if i < 3 && d.ParentID != dstList[i+1].ID {
			t.Fatalf("copy %d: parent %s, want the copy %s", i, d.ParentID, dstList[i+1].ID)
		}
	}
	// The source is unchanged and the copy is independent of it.
	if after, _ := b.eng.Tree(b.ctx, "src"); len(after.Nodes) != len(srcTree.Nodes) {
		t.Fatal("source changed")
	}
	b.snap(t, engine.SnapshotInput{ThreadID: "dst"})
	if got, _ := b.eng.ListCheckpoints(b.ctx, "src", engine.ListOptions{}); len(got) != 4 {
		t.Fatal("a write to the copy reached the source")
	}
	b.checkTree(t)
}

func TestDeleteForRunsAndPrune(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 6 {
		run := []string{"r1", "r2", "r3"}[i%3]
		res := b.snap(t, engine.SnapshotInput{ThreadID: "a", Metadata: json.RawMessage(`{"run_id": "` + run + `"}`)})
		if _, err := b.eng.PutWrites(b.ctx, res.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
			t.Fatal(err)
		}
	}
	b.snap(t, engine.SnapshotInput{ThreadID: "b", Metadata: json.RawMessage(`{"run_id": "r1"}`)})
	b.snap(t, engine.SnapshotInput{ThreadID: "b", Metadata: json.RawMessage(`{"run_id": "r9"}`)})
	n, err := b.eng.DeleteForRuns(b.ctx, []string{"r1", "r2"})
	if err != nil || n != 5 {
		t.Fatalf("delete for runs: %d %v, want 5", n, err)
	}
	var left []string
	rows, _ := b.db.Pool.Query(b.ctx, `SELECT thread_id || ':' || (metadata->>'run_id') FROM pgcheckpoint.checkpoints ORDER BY 1`)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		left = append(left, s)
	}
	if strings.Join(left, " ") != "a:r3 a:r3 b:r9" {
		t.Fatalf("left: %v", left)
	}
	if got := b.count(t)[2]; got != 2 {
		t.Fatalf("%d pending writes left, want the 2 of run r3", got)
	}

	b.line(t, "c", 5)
	n, err = b.eng.Prune(b.ctx, []string{"a", "c"}, engine.PruneKeepLatest)
	if err != nil || n != 5 {
		t.Fatalf("prune keep latest: %d %v, want 5", n, err)
	}
	for _, th := range []string{"a", "c"} {
		if list, _ := b.eng.ListCheckpoints(b.ctx, th, engine.ListOptions{}); len(list) != 1 || list[0].ID != b.head(t, th).ID {
			t.Fatalf("thread %s after prune: %+v", th, list)
		}
	}
	n, err = b.eng.Prune(b.ctx, []string{"c"}, engine.PruneDeleteAll)
	if err != nil || n != 1 {
		t.Fatalf("prune delete all: %d %v", n, err)
	}
	if _, err := b.eng.Latest(b.ctx, "c"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("pruned thread: %v", err)
	}
	if _, err := b.eng.Latest(b.ctx, "b"); err != nil {
		t.Fatalf("unnamed thread touched: %v", err)
	}
}
