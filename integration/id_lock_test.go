package integration

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// An id is unique in the whole table (the constraint
// checkpoints_checkpoint_id_key): while a transaction that branched or
// merged with an id is open, a Snapshot of that id on another thread waits
// for it, then gets ErrIDConflict; one checkpoint holds the id. (Snapshot
// itself is raced in the conformance suite, OneIDOneCheckpointAcrossThreads,
// and at every isolation level in TestIsolationOneIDOneCheckpoint.)
func TestIDOfAnOpenBranchOrMergeIsTaken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.snap(t, engine.SnapshotInput{ThreadID: "main", Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`)})
	b.snap(t, engine.SnapshotInput{ThreadID: "other"})
	if _, err := b.db.Pool.Exec(b.ctx, `SELECT * FROM pgcheckpoint.thread_branch($1, 'side', 'side', $2)`, src.ID, engine.NewCheckpointID()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, sql string }{
		{"branch", `SELECT * FROM pgcheckpoint.thread_branch($1, 'side2', 'side2', $2)`},
		{"merge", `SELECT * FROM pgcheckpoint.thread_merge('side', 'main', $2) WHERE $1::uuid IS NOT NULL`},
	} {
		id := engine.NewCheckpointID()
		holder, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback(b.ctx) // after a failure, so the pool can close
		if _, err := holder.Exec(b.ctx, c.sql, src.ID, id); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "other", ID: id})
			done <- err
		}()
		waitForLockWaiter(t, b, c.name)
		if err := holder.Commit(b.ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, engine.ErrIDConflict) {
			t.Fatalf("%s: a Snapshot of the same id on another thread: %v, want ErrIDConflict", c.name, err)
		}
		var n int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s: %d checkpoints hold the id (%v), want 1", c.name, n, err)
		}
	}
}

// waitForLockWaiter waits until a session of the test's database waits
// for a lock.
func waitForLockWaiter(t *testing.T, b *bundle, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		var waiting bool
		err := b.db.Pool.QueryRow(b.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the Snapshot of the same id never waited for the open transaction", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
