package integration

import (
	"encoding/json"
	"fmt"
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
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT (SELECT count(*) FROM pgcheckpoint.tree('main')),
		(SELECT count(*) FROM pgcheckpoint.lineage($1)),
		(SELECT count(*) FROM pgcheckpoint.tree('main') WHERE merge_parent_id = $2 AND checkpoint_id = $3)`,
		work.ID, work.ID, m.CheckpointID).Scan(&sqlNodes, &sqlLineage, &sqlMergeEdges); err != nil {
		t.Fatal(err)
	}
	if sqlNodes != len(tree.Nodes) || sqlLineage != len(lin) || sqlNodes != 7 || sqlLineage != 4 || sqlMergeEdges != 1 {
		t.Fatalf("SQL functions: %d nodes (engine %d), %d ancestors (engine %d), %d merge edges", sqlNodes, len(tree.Nodes), sqlLineage, len(lin), sqlMergeEdges)
	}
	b.checkTree(t)
}
