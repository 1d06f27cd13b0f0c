package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

type row struct {
	parent uuid.UUID
	step   int64
}

// checkLinearThread checks that a thread written only by Snapshot (no
// explicit parents) holds want checkpoints forming one unbroken chain from
// the head to the root, with steps want..1.
func checkLinearThread(t *testing.T, pool *pgxpool.Pool, thread string, want int) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT checkpoint_id, coalesce(parent_checkpoint_id, '00000000-0000-0000-0000-000000000000'), step
		FROM pgcheckpoint.checkpoints WHERE thread_id = $1`, thread)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[uuid.UUID]row{}
	steps := map[int64]bool{}
	for rows.Next() {
		var id uuid.UUID
		var r row
		if err := rows.Scan(&id, &r.parent, &r.step); err != nil {
			t.Fatal(err)
		}
		byID[id] = r
		steps[r.step] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(byID) != want || len(steps) != want {
		t.Fatalf("%d checkpoints with %d distinct steps, want %d of each", len(byID), len(steps), want)
	}
	var head uuid.UUID
	var headStep int64
	if err := pool.QueryRow(ctx, `SELECT c.checkpoint_id, c.step FROM pgcheckpoint.checkpoints c
		WHERE c.thread_id = $1 AND c.namespace = '' AND c.checkpoint_id = pgcheckpoint.thread_head($1)`, thread).Scan(&head, &headStep); err != nil {
		t.Fatal(err)
	}
	if headStep != int64(want) {
		t.Fatalf("head step %d, want %d", headStep, want)
	}
	walked := 0
	for id := head; id != uuid.Nil; walked++ {
		r, ok := byID[id]
		if !ok {
			t.Fatalf("chain broken: %s is missing after %d links", id, walked)
		}
		if r.step != int64(want-walked) {
			t.Fatalf("checkpoint %s has step %d, want %d", id, r.step, want-walked)
		}
		id = r.parent
	}
	if walked != want {
		t.Fatalf("chain from head has %d links, want %d", walked, want)
	}
}

// A connection killed after checkpoint_put ran but before its transaction
// committed leaves nothing: no checkpoint, no thread row, no moved head.
func TestKilledTransactionWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.snap(t, engine.SnapshotInput{ThreadID: "t"})

	conn, err := b.db.Pool.Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid int32
	if err := conn.QueryRow(b.ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, thread := range []string{"t", "new-thread"} {
		if _, err := tx.Exec(b.ctx, `SELECT * FROM pgcheckpoint.checkpoint_put($1, '', $2, NULL, 'manual', '{}', '', '{}', '[]', '{"half": true}', '{}', '', 0)`,
			thread, engine.NewCheckpointID()); err != nil {
			t.Fatal(err)
		}
	}
	var inside int64
	if err := tx.QueryRow(b.ctx, "SELECT count(*) FROM pgcheckpoint.checkpoints").Scan(&inside); err != nil || inside != 3 {
		t.Fatalf("inside the transaction: %d %v", inside, err)
	}
	var killed bool
	if err := b.db.Pool.QueryRow(b.ctx, "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate: %v %v", killed, err)
	}
	if got := b.count(t); got != [3]int64{1, 1, 0} {
		t.Fatalf("rows after the kill (threads, checkpoints, writes) = %v, want only the first checkpoint", got)
	}
	latest, err := b.eng.Latest(b.ctx, "t")
	if err != nil || latest.ID != first.ID {
		t.Fatalf("head moved: %v %v", latest, err)
	}
	conn.Conn().Close(b.ctx)
}

// A writer blocked on the thread lock and killed there writes nothing, and
// the lock holder's write goes through.
func TestWriterKilledWhileWaitingForTheThreadLock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.snap(t, engine.SnapshotInput{ThreadID: "t"})
	holder, err := b.db.Pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(b.ctx)
	if _, err := holder.Exec(b.ctx, `SELECT pgcheckpoint.thread_lock('t')`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"victim": true}`)})
		done <- err
	}()
	var pid int32
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := b.db.Pool.QueryRow(b.ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&pid)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer never waited on the thread lock: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.db.Pool.Exec(b.ctx, "SELECT pg_terminate_backend($1, 5000)", pid); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the killed writer reported success")
	}
	if err := holder.Rollback(b.ctx); err != nil {
		t.Fatal(err)
	}
	checkLinearThread(t, b.db.Pool, "t", 1)
}
