package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// TestSweepBatchKeepsHeadsSourcesAndBases sweeps several threads in one
// thread_gc_many call (the statement a sweep's batch runs): a plain
// thread, a rewound one, one with a branch and one whose namespace has no
// thread row each keep what keep_last_n keeps plus their head and their
// branch's source, every kept delta reads back whole (its base, if
// deleted, rewritten first), the same-named thread of another tenant is
// left alone, and thread_gc_doomed_many named beforehand exactly what
// went.
func TestSweepBatchKeepsHeadsSourcesAndBases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lines := map[string][]uuid.UUID{}
	for _, thread := range []string{"plain", "rewound", "source", "loaded"} {
		lines[thread] = b.line(t, thread, 8)
	}
	if _, err := b.eng.Rewind(b.ctx, lines["rewound"][2]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Branch(b.ctx, lines["source"][1], "fork"); err != nil {
		t.Fatal(err)
	}
	// A bulk load leaves checkpoints without their thread row: the newest
	// is still the head.
	if _, err := b.db.Pool.Exec(b.ctx, `DELETE FROM pgcheckpoint.threads WHERE thread_id = 'loaded'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE pgcheckpoint.checkpoints SET created_at = now() - interval '1 day' WHERE thread_id = 'loaded'`); err != nil {
		t.Fatal(err)
	}
	other := tenantEngine(t, b.db.Pool, postgres.Options{}, "other")
	for i := range 8 {
		if _, err := other.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "plain", State: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	threads := []string{"plain", "rewound", "source", "fork"}
	want := map[string][]int{"plain": {6, 7}, "rewound": {2, 6, 7}, "source": {1, 6, 7}}

	rows, err := b.db.Pool.Query(b.ctx, `SELECT checkpoint_id FROM pgcheckpoint.thread_gc_doomed_many($1, 'keep_last_n', 2, NULL)`, threads)
	if err != nil {
		t.Fatal(err)
	}
	previewed, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	before := map[string][]uuid.UUID{}
	for _, thread := range threads {
		before[thread] = b.left(t, thread)
	}

	var n, expired, failed int
	var deleted int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT * FROM pgcheckpoint.thread_gc_many($1, 'keep_last_n', 2, NULL)`, threads).
		Scan(&n, &expired, &failed, &deleted); err != nil {
		t.Fatal(err)
	}
	if n != len(threads) || expired != 0 || failed != 0 || deleted != 6+5+5 {
		t.Fatalf("thread_gc_many: %d threads, %d expired, %d failed, %d deleted; want %d, 0, 0, 16", n, expired, failed, deleted, len(threads))
	}
	var gone []uuid.UUID
	for _, thread := range threads {
		left := b.left(t, thread)
		for _, id := range before[thread] {
			if !slices.Contains(left, id) {
				gone = append(gone, id)
			}
		}
	}
	slices.SortFunc(previewed, func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) })
	slices.SortFunc(gone, func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) })
	if !slices.Equal(previewed, gone) {
		t.Fatalf("thread_gc_doomed_many named %d checkpoints, the sweep deleted %d:\n%v\n%v", len(previewed), len(gone), previewed, gone)
	}

	var others int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints WHERE tenant_id = 'other'`).Scan(&others); err != nil || others != 8 {
		t.Fatalf("the other tenant's thread keeps %d checkpoints of 8 (%v)", others, err)
	}
	// checkLine reads every checkpoint in this session's tenant.
	if _, err := b.db.Pool.Exec(b.ctx, `DELETE FROM pgcheckpoint.checkpoints WHERE tenant_id = 'other'`); err != nil {
		t.Fatal(err)
	}
	for thread, keep := range want {
		b.checkLine(t, thread, lines[thread], keep)
	}
	// keep_age on the loaded thread: all eight are old, the newest stays.
	if _, err := b.db.Pool.Exec(b.ctx, `SELECT * FROM pgcheckpoint.thread_gc_many(ARRAY['loaded'], 'keep_age', NULL, interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	b.checkLine(t, "loaded", lines["loaded"], []int{7})

}

// TestSweepBatchSkipsOnlyTheThreadThatFails: when one thread of a batch
// cannot be swept (here a trigger refuses to delete its rows), the others
// are swept all the same, that thread is left whole and counted failed,
// and every thread is marked swept.
func TestSweepBatchSkipsOnlyTheThreadThatFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lines := map[string][]uuid.UUID{}
	for _, thread := range []string{"a", "b", "c"} {
		lines[thread] = b.line(t, thread, 6)
	}
	for _, q := range []string{
		`CREATE FUNCTION public.refuse_b() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN IF OLD.thread_id = 'b' THEN RAISE EXCEPTION 'thread b may not lose a checkpoint'; END IF; RETURN OLD; END $$`,
		`CREATE TRIGGER refuse_b BEFORE DELETE ON pgcheckpoint.checkpoints FOR EACH ROW EXECUTE FUNCTION public.refuse_b()`,
	} {
		if _, err := b.db.Pool.Exec(b.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var n, expired, failed int
	var deleted int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT * FROM pgcheckpoint.thread_gc_many(ARRAY['a', 'b', 'c'], 'keep_last_n', 1, NULL)`).
		Scan(&n, &expired, &failed, &deleted); err != nil {
		t.Fatal(err)
	}
	if n != 3 || expired != 0 || failed != 1 || deleted != 10 {
		t.Fatalf("thread_gc_many: %d threads, %d expired, %d failed, %d deleted; want 3, 0, 1, 10", n, expired, failed, deleted)
	}
	b.checkLine(t, "a", lines["a"], []int{5})
	b.checkLine(t, "b", lines["b"], span(0, 6))
	b.checkLine(t, "c", lines["c"], []int{5})
	var unswept int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.threads WHERE swept_at IS NULL`).Scan(&unswept); err != nil || unswept != 0 {
		t.Fatalf("%d threads not marked swept (%v)", unswept, err)
	}
}

// TestCheckpointDeleteManyInKeepsToItsThreads calls
// checkpoint_delete_many_in (the deletion a sweep's batch runs, told the
// threads it locked) with ids of two threads and one thread named: it
// waits for that thread's lock, deletes that thread's checkpoint, rebasing
// the kept deltas built on it, and leaves the other thread's, whose lock
// it was not told to take.
func TestCheckpointDeleteManyInKeepsToItsThreads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, other := b.line(t, "a", 4), b.line(t, "other", 4)
	ids := []uuid.UUID{a[1], other[1]}

	// Thread a's lock held elsewhere: the call waits for it.
	holder, err := b.db.Pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(b.ctx)
	if _, err := holder.Exec(b.ctx, `SELECT pgcheckpoint.thread_lock('a')`); err != nil {
		t.Fatal(err)
	}
	tx, err := b.db.Pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.ctx)
	if _, err := tx.Exec(b.ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(b.ctx, `SELECT pgcheckpoint.checkpoint_delete_many_in(ARRAY['a'], $1)`, ids)
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "55P03" {
		t.Fatalf("checkpoint_delete_many_in with thread a's lock held elsewhere: %v; want it to wait (55P03 at the lock timeout)", err)
	}
	tx.Rollback(b.ctx)
	if err := holder.Rollback(b.ctx); err != nil {
		t.Fatal(err)
	}

	var n int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT pgcheckpoint.checkpoint_delete_many_in(ARRAY['a'], $1)`, ids).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("checkpoint_delete_many_in deleted %d, want 1 (thread a's)", n)
	}
	b.checkLine(t, "a", a, []int{0, 2, 3})
	b.checkLine(t, "other", other, []int{0, 1, 2, 3})
}

// TestCheckpointDeleteKeysDeletesOnlyWhereTheIDIs calls
// checkpoint_delete_keys (what a sweep's batch deletes through, given the
// keys it read) with a key that holds another checkpoint than the id given
// with it: nothing is deleted, no delta rebased, the thread's rewind to
// that id kept. Given the right key (twice), it deletes that checkpoint
// once, rebases the delta built on it and clears the rewind.
func TestCheckpointDeleteKeysDeletesOnlyWhereTheIDIs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.line(t, "a", 4)
	if _, err := b.eng.Rewind(b.ctx, a[1]); err != nil {
		t.Fatal(err)
	}
	seq := func(id uuid.UUID) int64 {
		t.Helper()
		var s int64
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT seq FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	rewoundTo := func() *uuid.UUID {
		t.Helper()
		var r *uuid.UUID
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT rewound_to FROM pgcheckpoint.threads WHERE thread_id = 'a' AND namespace = ''`).Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	del := func(seqs []int64, ids []uuid.UUID) int64 {
		t.Helper()
		threads, namespaces := make([]string, len(ids)), make([]string, len(ids))
		for i := range ids {
			threads[i] = "a"
		}
		var n int64
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT pgcheckpoint.checkpoint_delete_keys($1, $2, $3, $4)`,
			threads, namespaces, seqs, ids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// a[1]'s id at a[2]'s key.
	if n := del([]int64{seq(a[2])}, []uuid.UUID{a[1]}); n != 0 {
		t.Fatalf("an id given with another checkpoint's key: %d deleted, want 0", n)
	}
	if r := rewoundTo(); r == nil || *r != a[1] {
		t.Fatalf("rewound to %v after deleting nothing, want %s", r, a[1])
	}
	b.checkLine(t, "a", a, []int{0, 1, 2, 3})

	if n := del([]int64{seq(a[1]), seq(a[1])}, []uuid.UUID{a[1], a[1]}); n != 1 {
		t.Fatalf("a[1] at its key, given twice: %d deleted, want 1", n)
	}
	if r := rewoundTo(); r != nil {
		t.Fatalf("rewound to %s after deleting it, want no rewind", *r)
	}
	b.checkLine(t, "a", a, []int{0, 2, 3})
}

// thread_gc_many locks every thread of its batch once, and again (in
// checkpoint_delete_keys) only those it deletes from: each lock taken
// is a row version of thread_locks, and most threads of a steady sweep
// have nothing to delete.
func TestSweepBatchLocksAgainOnlyThreadsItDeletesFrom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.line(t, "doomed", 4)
	b.line(t, "kept", 2)
	taken := func() (doomed, kept int64) {
		t.Helper()
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT
			(SELECT taken FROM pgcheckpoint.thread_locks WHERE thread_id = 'doomed'),
			(SELECT taken FROM pgcheckpoint.thread_locks WHERE thread_id = 'kept')`).Scan(&doomed, &kept); err != nil {
			t.Fatal(err)
		}
		return doomed, kept
	}
	d0, k0 := taken()
	var deleted int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT deleted FROM pgcheckpoint.thread_gc_many(ARRAY['doomed', 'kept'], 'keep_last_n', 2, NULL)`).Scan(&deleted); err != nil {
		t.Fatal(err)
	}
	d1, k1 := taken()
	if deleted != 2 || d1-d0 != 2 || k1-k0 != 1 {
		t.Fatalf("deleted %d, locks taken: doomed %d, kept %d; want 2 deleted, doomed's lock taken twice and kept's once", deleted, d1-d0, k1-k0)
	}
}
