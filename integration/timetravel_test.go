package integration

import (
	"encoding/json"
	"fmt"
	"strings"
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
		WHERE pgcheckpoint.thread_head(t.thread_id, t.namespace) IS NULL`).Scan(&headless); err != nil {
		t.Fatal(err)
	}
	if headless != 0 {
		t.Fatalf("%d threads without a head", headless)
	}
}

// TestTreeAndLineageSQLFunctions: the SQL functions give a psql session
// the same tree and lineage the engine gives (which the conformance suite
// checks), and the table-wide parent links hold.
func TestTreeAndLineageSQLFunctions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	main := b.line(t, "main", 4)
	br, err := b.eng.Branch(b.ctx, main[1], "experiment")
	if err != nil {
		t.Fatal(err)
	}
	work := b.snap(t, engine.SnapshotInput{ThreadID: br.ThreadID, State: json.RawMessage(`{"found": "it"}`)})
	m, err := b.eng.MergeBranch(b.ctx, br.ThreadID, "main")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := b.eng.Tree(b.ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	lin, err := b.eng.Lineage(b.ctx, work.ID)
	if err != nil {
		t.Fatal(err)
	}
	var sqlNodes, sqlLineage, sqlMergeEdges int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT (SELECT count(*) FROM pgcheckpoint.thread_tree('main')),
		(SELECT count(*) FROM pgcheckpoint.checkpoint_lineage($1)),
		(SELECT count(*) FROM pgcheckpoint.thread_tree('main') WHERE merge_parent_id = $2 AND checkpoint_id = $3)`,
		work.ID, work.ID, m.CheckpointID).Scan(&sqlNodes, &sqlLineage, &sqlMergeEdges); err != nil {
		t.Fatal(err)
	}
	if sqlNodes != len(tree.Nodes) || sqlLineage != len(lin) || sqlNodes != 7 || sqlLineage != 4 || sqlMergeEdges != 1 {
		t.Fatalf("SQL functions: %d nodes (engine %d), %d ancestors (engine %d), %d merge edges", sqlNodes, len(tree.Nodes), sqlLineage, len(lin), sqlMergeEdges)
	}
	b.checkTree(t)
}

// pgcheckpoint.thread_merge from SQL: the three-argument call merges in the
// root namespace, as before 000007; a fourth argument names the namespace, where
// the branch head is read and the merge written, and the other namespace's
// head stays where it was.
func TestMergeSQLFunctionTakesANamespace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rootHead := b.snap(t, engine.SnapshotInput{ThreadID: "m"})
	subHead := b.snap(t, engine.SnapshotInput{ThreadID: "m", Namespace: "sub"})
	br, err := b.eng.Branch(b.ctx, subHead.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	brHead := b.snap(t, engine.SnapshotInput{ThreadID: br.ThreadID, Namespace: "sub", State: json.RawMessage(`{"b": 1}`)})

	// The branch has no root checkpoint: PC001, nothing written.
	_, err = b.db.Pool.Exec(b.ctx, `SELECT * FROM pgcheckpoint.thread_merge($1, 'm', pgcheckpoint.uuid_v7())`, br.ThreadID)
	if err == nil || !strings.Contains(err.Error(), "PC001") {
		t.Fatalf("three-argument merge of a sub branch: %v, want PC001", err)
	}
	var parent, mergeParent uuid.UUID
	var step int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT parent_checkpoint_id, merge_parent_id, step
		FROM pgcheckpoint.thread_merge($1, 'm', pgcheckpoint.uuid_v7(), 'sub')`, br.ThreadID).Scan(&parent, &mergeParent, &step); err != nil {
		t.Fatal(err)
	}
	if parent != subHead.ID || mergeParent != brHead.ID || step != 2 {
		t.Fatalf("merge in sub: parent %s merge parent %s step %d; want %s, %s, 2", parent, mergeParent, step, subHead.ID, brHead.ID)
	}
	if got := b.head(t, "m"); got.ID != rootHead.ID {
		t.Fatalf("root head moved to %s", got.ID)
	}
	if got, err := b.eng.LatestIn(b.ctx, "m", "sub"); err != nil || got.MergeParentID != brHead.ID {
		t.Fatalf("sub head after the merge: %+v %v", got, err)
	}

	// The three-argument call still merges a root branch into the root.
	rootBr, err := b.eng.Branch(b.ctx, rootHead.ID, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT parent_checkpoint_id, merge_parent_id, step
		FROM pgcheckpoint.thread_merge($1, 'm', pgcheckpoint.uuid_v7())`, rootBr.ThreadID).Scan(&parent, &mergeParent, &step); err != nil {
		t.Fatal(err)
	}
	if parent != rootHead.ID || mergeParent != rootBr.CheckpointID || step != 2 {
		t.Fatalf("merge in the root: parent %s merge parent %s step %d", parent, mergeParent, step)
	}
	b.checkTree(t)
}
