package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// left returns a thread's checkpoint ids in write order.
func (b *bundle) left(t *testing.T, thread string) []uuid.UUID {
	t.Helper()
	rows, err := b.db.Pool.Query(b.ctx, `SELECT checkpoint_id FROM pgcheckpoint.checkpoints WHERE thread_id = $1 ORDER BY namespace, seq`, thread)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// checkLine checks that the checkpoints of a thread written by line() are
// exactly want (indexes into ids) and that each reads back whole.
func (b *bundle) checkLine(t *testing.T, thread string, ids []uuid.UUID, want []int) {
	t.Helper()
	var wantIDs []uuid.UUID
	for _, i := range want {
		wantIDs = append(wantIDs, ids[i])
	}
	b.checkDeltaBases(t)
	if got := b.left(t, thread); !slices.Equal(got, wantIDs) {
		t.Fatalf("thread %s keeps %d checkpoints %v, want %d: %v", thread, len(got), got, len(wantIDs), want)
	}
	for _, i := range want {
		cp, err := b.eng.Get(b.ctx, ids[i])
		if err != nil {
			t.Fatalf("get checkpoint %d of %s: %v", i, thread, err)
		}
		var msgs []map[string]string
		var state struct{ I int }
		if err := json.Unmarshal(cp.Messages, &msgs); err != nil || len(msgs) != i+1 || msgs[i]["content"] != fmt.Sprintf("m%d", i) {
			t.Fatalf("checkpoint %d of %s reads messages %s (%v)", i, thread, cp.Messages, err)
		}
		if err := json.Unmarshal(cp.State, &state); err != nil || state.I != i {
			t.Fatalf("checkpoint %d of %s reads state %s (%v)", i, thread, cp.State, err)
		}
	}
}

func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestRetentionSQLFunctionsRefuseBadInput: the SQL functions a DBA or a
// pg_cron job calls check their arguments as the engine does (the
// conformance suite checks the engine's), and delete nothing.
func TestRetentionSQLFunctionsRefuseBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.line(t, "run", 5)
	before := b.count(t)
	for _, q := range []string{
		`SELECT count(*) FROM pgcheckpoint.thread_gc('run', 'keep_everything_please')`,
		`SELECT count(*) FROM pgcheckpoint.thread_gc('run', 'keep_last_n', NULL)`,
		`SELECT count(*) FROM pgcheckpoint.thread_gc('run', 'keep_age', NULL, interval '-1 day')`,
		`SELECT count(*) FROM pgcheckpoint.thread_gc_batch('keep_last_n', 1, NULL, '', 0)`,
	} {
		var n int
		var pe *pgconn.PgError
		if err := b.db.Pool.QueryRow(b.ctx, q).Scan(&n); !errors.As(err, &pe) || pe.Code != "PC003" {
			t.Fatalf("%s: %v, want SQLSTATE PC003", q, err)
		}
	}
	if after := b.count(t); after != before {
		t.Fatalf("rows %v after refused calls, want %v", after, before)
	}
}

// TestSweepProcedureGoesThroughEveryThread: the procedure, as pg_cron
// would call it, applies expiry and a policy to every thread, batch by
// batch, and marks each swept (the conformance suite checks Engine.Sweep).
func TestSweepProcedureGoesThroughEveryThread(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lines := map[string][]uuid.UUID{}
	for i := range 7 {
		thread := fmt.Sprintf("t%02d", i)
		lines[thread] = b.line(t, thread, 6)
	}
	if err := b.eng.SetThreadExpiry(b.ctx, "t03", time.Now().Add(-time.Minute), engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `CALL pgcheckpoint.thread_gc_sweep('keep_last_n', 1, NULL, 3)`); err != nil {
		t.Fatal(err)
	}
	for thread, ids := range lines {
		if thread == "t03" {
			if left := b.left(t, thread); len(left) != 0 {
				t.Fatalf("expired thread %s keeps %v", thread, left)
			}
			continue
		}
		b.checkLine(t, thread, ids, []int{5})
	}
	var unswept int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.threads WHERE swept_at IS NULL`).Scan(&unswept); err != nil || unswept != 0 {
		t.Fatalf("%d threads never swept after a whole sweep (%v)", unswept, err)
	}
}

// TestSweepKilledMidBatchLeavesThreadsReadable kills the connection of a
// sweep while it waits for a thread lock in the middle of a batch: that
// batch rolls back whole, earlier (committed) batches stay done, and every
// checkpoint still reads back.
func TestSweepKilledMidBatchLeavesThreadsReadable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lines := map[string][]uuid.UUID{}
	for i := range 9 {
		thread := fmt.Sprintf("t%d", i)
		lines[thread] = b.line(t, thread, 8)
	}
	ctx := b.ctx
	for _, tc := range []struct {
		name string
		sql  string
		done []string // threads whose batch committed before the kill
	}{
		{"one batch", `SELECT * FROM pgcheckpoint.thread_gc_batch('keep_last_n', 2, NULL, '', 100)`, nil},
		{"procedure", `CALL pgcheckpoint.thread_gc_sweep('keep_last_n', 2, NULL, 3)`, []string{"t0", "t1", "t2"}},
	} {
		// Another session holds t4's lock, so the sweep stops there.
		holder, err := b.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec(ctx, `SELECT pgcheckpoint.thread_lock('t4')`); err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, b.db.URL)
		if err != nil {
			t.Fatal(err)
		}
		pid := conn.PgConn().PID()
		done := make(chan error, 1)
		go func() {
			_, err := conn.Exec(ctx, tc.sql)
			done <- err
		}()
		waitFor(t, "the sweep to wait for t4's lock", func() bool {
			var waiting bool
			_ = b.db.Pool.QueryRow(ctx, `SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting)
			return waiting
		})
		if _, err := b.db.Pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err == nil {
			t.Fatalf("%s: the killed sweep returned no error", tc.name)
		}
		_ = holder.Rollback(ctx)
		conn.Close(ctx)
		for thread, ids := range lines {
			if slices.Contains(tc.done, thread) {
				b.checkLine(t, thread, ids, []int{6, 7})
			} else {
				b.checkLine(t, thread, ids, span(0, 8))
			}
		}
	}
}

// checkDeltaBases checks, table-wide, that every delta checkpoint's base
// exists in its thread and namespace, and that every checkpoint reads back.
func (b *bundle) checkDeltaBases(t *testing.T) {
	t.Helper()
	checkDeltaBases(t, b.db.Pool)
}

// checkDeltaBases is bundle.checkDeltaBases for any database.
func checkDeltaBases(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	var broken, unreadable int
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM pgcheckpoint.checkpoints c
		 WHERE c.format = 'delta' AND NOT EXISTS (
		     SELECT 1 FROM pgcheckpoint.checkpoints p
		     WHERE p.checkpoint_id = c.base_checkpoint_id AND p.thread_id = c.thread_id AND p.namespace = c.namespace)),
		(SELECT count(*) FROM pgcheckpoint.checkpoints c
		 WHERE NOT EXISTS (SELECT 1 FROM pgcheckpoint.checkpoint_materialize(c.checkpoint_id)))`).Scan(&broken, &unreadable)
	if err != nil {
		t.Fatalf("checking delta bases: %v", err)
	}
	if broken != 0 || unreadable != 0 {
		t.Fatalf("%d delta checkpoints lost their base, %d checkpoints do not read back", broken, unreadable)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
