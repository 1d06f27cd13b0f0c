package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

func TestRetentionPolicies(t *testing.T) {
	milestones := []int{0, 19}
	for i := 1; i <= 3; i++ {
		milestones = append(milestones, int(math.Round(float64(i)*19/4)))
	}
	slices.Sort(milestones)
	for _, tc := range []struct {
		policy engine.Policy
		keep   []int
	}{
		{engine.KeepAll(), span(0, 20)},
		{engine.KeepLastN(5), span(15, 20)},
		{engine.KeepLastN(50), span(0, 20)},
		{engine.KeepMilestones(3), milestones},
		{engine.KeepMilestones(0), []int{0, 19}},
		{engine.KeepAge(time.Hour), span(10, 20)},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			b := setup(t)
			ids := b.line(t, "run", 20)
			other := b.line(t, "other", 5)
			var deltas int
			if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints WHERE format = 'delta'`).Scan(&deltas); err != nil || deltas < 10 {
				t.Fatalf("%d delta checkpoints (%v); the test needs delta chains", deltas, err)
			}
			// The first ten were written two hours ago, for KeepAge.
			if _, err := b.db.Pool.Exec(b.ctx, `UPDATE pgcheckpoint.checkpoints SET created_at = now() - interval '2 hours'
				WHERE thread_id = 'run' AND seq <= 10`); err != nil {
				t.Fatal(err)
			}
			deleted, err := b.eng.ApplyRetention(b.ctx, "run", tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			if len(deleted) != 20-len(tc.keep) {
				t.Fatalf("%d deleted, want %d", len(deleted), 20-len(tc.keep))
			}
			for _, d := range deleted {
				if i := slices.Index(ids, d.ID); i < 0 || slices.Contains(tc.keep, i) || d.Step != int64(i+1) || d.ThreadID != "run" {
					t.Fatalf("deleted %+v, which the policy keeps", d)
				}
			}
			b.checkLine(t, "run", ids, tc.keep)
			b.checkLine(t, "other", other, span(0, 5))
		})
	}
}

func TestRetentionKeepsHeadsAndBranchSources(t *testing.T) {
	b := setup(t)
	ids := b.line(t, "run", 20)
	if _, err := b.eng.Rewind(b.ctx, ids[3]); err != nil {
		t.Fatal(err)
	}
	br, err := b.eng.Branch(b.ctx, ids[7], "side")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.ApplyRetention(b.ctx, "run", engine.KeepLastN(2)); err != nil {
		t.Fatal(err)
	}
	b.checkLine(t, "run", ids, []int{3, 7, 18, 19})
	if got := b.left(t, br.ThreadID); len(got) != 1 || got[0] != br.CheckpointID {
		t.Fatalf("branch thread keeps %v", got)
	}
	if head := b.head(t, "run"); head.ID != ids[3] {
		t.Fatalf("head is %s after retention, want the rewound-to %s", head.ID, ids[3])
	}
	// Once the branch is gone, its source is just another old checkpoint.
	if _, err := b.eng.DeleteThread(b.ctx, br.ThreadID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.ApplyRetention(b.ctx, "run", engine.KeepLastN(2)); err != nil {
		t.Fatal(err)
	}
	b.checkLine(t, "run", ids, []int{3, 18, 19})
}

func TestRetentionAfterEachSnapshot(t *testing.T) {
	b := setup(t)
	b.eng = engine.New(b.db.Pool, engine.Config{Retention: engine.KeepLastN(3)})
	ids := b.line(t, "run", 10)
	b.checkLine(t, "run", ids, span(7, 10))

	before := b.count(t)
	bad := engine.New(b.db.Pool, engine.Config{Retention: engine.KeepLastN(0)})
	_, err := bad.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "run"})
	if !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("snapshot with a bad Config.Retention: %v, want ErrInvalidInput", err)
	}
	if after := b.count(t); after != before {
		t.Fatalf("rows %v after a refused snapshot, want %v", after, before)
	}
}

func TestRetentionBadInputDeletesNothing(t *testing.T) {
	b := setup(t)
	b.line(t, "run", 5)
	before := b.count(t)
	for _, p := range []engine.Policy{engine.KeepLastN(0), engine.KeepLastN(-2), engine.KeepAge(0), engine.KeepMilestones(-1)} {
		if _, err := b.eng.ApplyRetention(b.ctx, "run", p); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("%s: %v, want ErrInvalidInput", p, err)
		}
		if _, err := b.eng.Sweep(b.ctx, p, engine.SweepOptions{}); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("sweep %s: %v, want ErrInvalidInput", p, err)
		}
	}
	if _, err := b.eng.ApplyRetention(b.ctx, "", engine.KeepLastN(1)); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("empty thread id: %v", err)
	}
	if _, err := b.eng.Sweep(b.ctx, engine.KeepLastN(1), engine.SweepOptions{BatchSize: -1}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("negative batch: %v", err)
	}
	// The SQL functions check too.
	for _, q := range []string{
		`SELECT count(*) FROM pgcheckpoint.gc_thread('run', 'keep_everything_please')`,
		`SELECT count(*) FROM pgcheckpoint.gc_thread('run', 'keep_last_n', NULL)`,
		`SELECT count(*) FROM pgcheckpoint.gc_thread('run', 'keep_age', NULL, interval '-1 day')`,
		`SELECT count(*) FROM pgcheckpoint.gc_batch('keep_last_n', 1, NULL, '', 0)`,
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

func TestSweepAppliesPoliciesAndExpiry(t *testing.T) {
	b := setup(t)
	lines := map[string][]uuid.UUID{}
	for i := range 13 {
		thread := fmt.Sprintf("t%02d", i)
		lines[thread] = b.line(t, thread, 6)
	}
	past, future := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	for thread, at := range map[string]time.Time{"t03": past, "t04": past, "t05": future} {
		action := engine.ExpireDelete
		if thread == "t04" {
			action = engine.ExpireKeepLatest
		}
		if err := b.eng.SetExpiry(b.ctx, thread, at, action); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.eng.SetExpiry(b.ctx, "nope", past, engine.ExpireDelete); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("expiry of an unknown thread: %v", err)
	}

	// A time budget stops after a batch and says where to go on.
	res, err := b.eng.Sweep(b.ctx, engine.KeepLastN(2), engine.SweepOptions{BatchSize: 4, TimeBudget: time.Nanosecond})
	if err != nil || res.Done || res.Batches != 1 || res.Next != "t03" || res.Expired != 1 {
		t.Fatalf("budgeted sweep: %+v %v", res, err)
	}
	res, err = b.eng.Sweep(b.ctx, engine.KeepLastN(2), engine.SweepOptions{BatchSize: 4, After: res.Next})
	if err != nil || !res.Done || res.Threads != 9 || res.Expired != 1 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	for thread, ids := range lines {
		switch thread {
		case "t03":
			if left := b.left(t, thread); len(left) != 0 {
				t.Fatalf("expired thread %s keeps %v", thread, left)
			}
		case "t04":
			b.checkLine(t, thread, ids, []int{5})
		default:
			b.checkLine(t, thread, ids, []int{4, 5})
		}
	}

	// The procedure, as pg_cron would call it, goes through every thread.
	extra := b.line(t, "t99", 6)
	if _, err := b.db.Pool.Exec(b.ctx, `CALL pgcheckpoint.gc_sweep('keep_last_n', 1, NULL, 3)`); err != nil {
		t.Fatal(err)
	}
	b.checkLine(t, "t99", extra, []int{5})
	b.checkLine(t, "t00", lines["t00"], []int{5})
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
		{"one batch", `SELECT * FROM pgcheckpoint.gc_batch('keep_last_n', 2, NULL, '', 100)`, nil},
		{"procedure", `CALL pgcheckpoint.gc_sweep('keep_last_n', 2, NULL, 3)`, []string{"t0", "t1", "t2"}},
	} {
		// Another session holds t4's lock, so the sweep stops there.
		holder, err := b.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock(1885563760, hashtext('t4'))`); err != nil {
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
	var broken, unreadable int
	err := b.db.Pool.QueryRow(b.ctx, `SELECT
		(SELECT count(*) FROM pgcheckpoint.checkpoints c
		 WHERE c.format = 'delta' AND NOT EXISTS (
		     SELECT 1 FROM pgcheckpoint.checkpoints p
		     WHERE p.checkpoint_id = c.base_checkpoint_id AND p.thread_id = c.thread_id AND p.namespace = c.namespace)),
		(SELECT count(*) FROM pgcheckpoint.checkpoints c
		 WHERE NOT EXISTS (SELECT 1 FROM pgcheckpoint.materialize(c.checkpoint_id)))`).Scan(&broken, &unreadable)
	if err != nil {
		t.Fatalf("checking delta bases: %v", err)
	}
	if broken != 0 || unreadable != 0 {
		t.Fatalf("%d delta checkpoints lost their base, %d checkpoints do not read back", broken, unreadable)
	}
}

func TestDeletesClearARewindToWhatTheyDelete(t *testing.T) {
	b := setup(t)
	var ids []uuid.UUID
	for i := range 3 {
		ids = append(ids, b.snap(t, engine.SnapshotInput{ThreadID: "run",
			Metadata: json.RawMessage(fmt.Sprintf(`{"run_id": "r%d"}`, i)), State: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}).ID)
	}
	if _, err := b.eng.Rewind(b.ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if n, err := b.eng.DeleteForRuns(b.ctx, []string{"r0"}); err != nil || n != 1 {
		t.Fatalf("delete for runs: %d, %v", n, err)
	}
	// The rewound-to checkpoint is gone: the head is the newest again, and
	// the thread takes writes.
	if head := b.head(t, "run"); head.ID != ids[2] {
		t.Fatalf("head %s, want the newest %s", head.ID, ids[2])
	}
	res := b.snap(t, engine.SnapshotInput{ThreadID: "run"})
	if res.ParentID != ids[2] {
		t.Fatalf("next write's parent %s, want %s", res.ParentID, ids[2])
	}
}

// TestDeletesAndSweepsRaceWritersSafely runs writers, sweeps of several
// threads, deletes by run id across threads and prunes of thread pairs at
// the same time: no deadlock, no error, and afterwards every delta still
// has its base and every checkpoint reads back.
func TestDeletesAndSweepsRaceWritersSafely(t *testing.T) {
	b := setup(t)
	threads := []string{"ta", "tb", "tc", "td", "te", "tf"}
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	loop := func(seed uint64, f func(r *rand.Rand) error) {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, 9))
			for ctx.Err() == nil {
				if err := f(r); err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		})
	}
	msgs := map[string][]string{}
	var mu sync.Mutex
	for w := range 2 {
		loop(uint64(w), func(r *rand.Rand) error {
			thread := threads[r.IntN(len(threads))]
			mu.Lock()
			msgs[thread] = append(msgs[thread], fmt.Sprintf(`{"role":"user","content":"%d"}`, r.IntN(1000)))
			m := "[" + strings.Join(msgs[thread], ",") + "]"
			mu.Unlock()
			_, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(m),
				Metadata: json.RawMessage(fmt.Sprintf(`{"run_id": "r%d"}`, r.IntN(4)))})
			return err
		})
	}
	loop(10, func(r *rand.Rand) error {
		_, err := b.eng.Sweep(ctx, engine.KeepLastN(1+r.IntN(4)), engine.SweepOptions{BatchSize: 3})
		return err
	})
	loop(11, func(r *rand.Rand) error {
		_, err := b.eng.DeleteForRuns(ctx, []string{fmt.Sprintf("r%d", r.IntN(4))})
		return err
	})
	loop(12, func(r *rand.Rand) error {
		_, err := b.eng.Prune(ctx, []string{threads[r.IntN(6)], threads[r.IntN(6)]}, engine.PruneKeepLatest)
		return err
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent call failed: %v", err)
	}
	b.checkDeltaBases(t)
	for _, thread := range threads {
		b.snap(t, engine.SnapshotInput{ThreadID: thread})
	}
}
