package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// A write that ends any way but a COMMIT (an error, its context cancelled
// inside the transaction, a panic) is rolled back on the held writer
// connection: nothing it wrote stays, and the next write begins and
// commits on that connection.
func TestWriteEndedEarlyRollsBack(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "w.db"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(s, engine.Config{})
	defer eng.Close()
	snap := func(ctx context.Context, q *queries) error {
		_, err := s.put(ctx, q, engine.PutRequest{ThreadID: "t", ID: engine.NewCheckpointID(),
			Messages: json.RawMessage(`[]`), State: json.RawMessage(`{}`), ToolResults: json.RawMessage(`{}`),
			Metadata: json.RawMessage(`{}`), DeltaRun: 1, Trigger: engine.TriggerManual})
		return err
	}
	boom := errors.New("boom")
	cctx, cancel := context.WithCancel(ctx)
	ends := map[string]func(){
		"error": func() {
			if err := s.write(ctx, func(q *queries, _ execer) error {
				if err := snap(ctx, q); err != nil {
					return err
				}
				return boom
			}); !errors.Is(err, boom) {
				t.Errorf("write: %v, want boom", err)
			}
		},
		"cancelled": func() {
			if err := s.write(cctx, func(q *queries, _ execer) error {
				if err := snap(cctx, q); err != nil {
					return err
				}
				cancel()
				return nil // the COMMIT meets the cancelled context
			}); !errors.Is(err, context.Canceled) {
				t.Errorf("write: %v, want context.Canceled", err)
			}
		},
		"panic": func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			_ = s.write(ctx, func(q *queries, _ execer) error {
				if err := snap(ctx, q); err != nil {
					return err
				}
				panic(boom)
			})
		},
	}
	count := func() int {
		t.Helper()
		l, err := eng.ListCheckpoints(ctx, "t", engine.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	for name, end := range ends {
		end()
		if n := count(); n != 0 {
			t.Errorf("after a write ended by %s: %d checkpoints, want 0", name, n)
		}
	}
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatalf("a write after those: %v", err)
	}
	if n := count(); n != 1 {
		t.Errorf("%d checkpoints, want 1", n)
	}
}

// A thread whose sweep fails is rolled back to its savepoint, left as it
// was (the rebase of its kept delta undone), and counted; the batch's
// other threads are swept and committed.
func TestSweepFailedThreadLeftAsItWas(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sweep.db"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(s, engine.Config{})
	defer eng.Close()
	for _, th := range []string{"bad", "good"} {
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: th, State: json.RawMessage(`{"a":1}`)}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			in := engine.AppendInput{ThreadID: th, Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`),
				SetState: json.RawMessage(fmt.Sprintf(`{"b":%d}`, i))}
			if _, err := eng.Append(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The delete of bad's rows fails, after its kept delta was rebased.
	if _, err := s.w.ExecContext(ctx, `CREATE TRIGGER refuse_bad BEFORE DELETE ON checkpoints
		WHEN old.thread_id = 'bad' BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	rows := func(th string) (n, deltas int) {
		if err := s.w.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE format = 'delta')
			FROM checkpoints WHERE thread_id = ?`, th).Scan(&n, &deltas); err != nil {
			t.Fatal(err)
		}
		return n, deltas
	}
	n0, d0 := rows("bad")
	if d0 == 0 {
		t.Fatalf("bad has no delta to rebase (%d rows)", n0)
	}
	res, err := eng.Sweep(ctx, engine.KeepLastN(1), engine.SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 1 || res.Deleted != 2 {
		t.Errorf("sweep: %+v; want 1 thread failed and 2 checkpoints deleted", res)
	}
	if n, d := rows("bad"); n != n0 || d != d0 {
		t.Errorf("bad after its failed sweep: %d rows, %d deltas; want %d and %d as before", n, d, n0, d0)
	}
	if n, d := rows("good"); n != 1 || d != 0 {
		t.Errorf("good after the sweep: %d rows, %d deltas; want its head alone, rebased whole", n, d)
	}
	// Both were swept, the one that failed too.
	var unswept int
	if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM threads WHERE swept_at IS NULL`).Scan(&unswept); err != nil || unswept != 0 {
		t.Errorf("%d threads not marked swept (%v)", unswept, err)
	}
}

// A run whose anchor is in another thread or namespace (as a forged row
// could make it) has no anchor for a new delta, whose chain must stay in
// its thread and namespace, and neither has a run whose base is missing:
// runOf says none.
func TestRunAnchoredElsewhereHasNoAnchor(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "run.db"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(s, engine.Config{DeltaMinBytes: -1}) // every write a delta that can be
	defer eng.Close()
	ids := map[string]uuid.UUID{}
	for _, th := range []string{"a", "b"} {
		res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: th, State: json.RawMessage(`{"k":0}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids[th] = res.ID
	}
	head, err := eng.Append(ctx, engine.AppendInput{ThreadID: "b", SetState: json.RawMessage(`{"k":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	q := &queries{db: s.wc.q, tenant: s.tenant}
	l, err := q.CheckpointLinkByID(ctx, head.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, anchor, err := runOf(ctx, q, &l, 2); err != nil || anchor == nil || anchor.CheckpointID != ids["b"] {
		t.Fatalf("the run of b's head: anchor %v, %v; want b's first checkpoint", anchor, err)
	}
	// As a forged row could have it: b's head a delta on a's checkpoint.
	if _, err := s.w.ExecContext(ctx, `UPDATE checkpoints SET base_checkpoint_id = ? WHERE checkpoint_id = ?`,
		ids["a"].String(), head.ID.String()); err != nil {
		t.Fatal(err)
	}
	if _, anchor, err := runOf(ctx, q, &l, 2); err != nil || anchor != nil {
		t.Fatalf("a run anchored in another thread: anchor %v, %v; want none", anchor, err)
	}
	// A broken run: the base is no row at all.
	if _, err := s.w.ExecContext(ctx, `UPDATE checkpoints SET base_checkpoint_id = ? WHERE checkpoint_id = ?`,
		uuid.New().String(), head.ID.String()); err != nil {
		t.Fatal(err)
	}
	if _, anchor, err := runOf(ctx, q, &l, 50); err != nil || anchor != nil {
		t.Fatalf("a run whose base is missing: anchor %v, %v; want none", anchor, err)
	}
}

// A run whose deltas are not the rows just before its last one (a rewind
// in the middle left rows of another line between them) is still walked
// whole, a segment of rows at a time: the deltas in order, then the
// anchor (what the write at its end is stored on: RunEndAcrossARewind in
// enginetest, on both stores). A cycle of forged bases is a broken run,
// not an endless walk.
func TestRunAcrossARewind(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "run.db"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	const deltaRun = 10
	eng := engine.New(s, engine.Config{DeltaRun: deltaRun, DeltaMinBytes: -1})
	defer eng.Close()
	step := 0
	write := func() uuid.UUID {
		t.Helper()
		step++
		res, err := eng.Append(ctx, engine.AppendInput{ThreadID: "t",
			Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"turn %d"}]`, step)),
			SetState: json.RawMessage(fmt.Sprintf(`{"k%d":%d}`, step%3, step))})
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	first, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`[{"role":"user","content":"turn 0"}]`),
		State: json.RawMessage(`{"k0":0}`)})
	if err != nil {
		t.Fatal(err)
	}
	var line []uuid.UUID // the head's line after the anchor, oldest first
	for range 3 {
		line = append(line, write())
	}
	write() // two rows of a line left by the rewind below
	write()
	if _, err := eng.Rewind(ctx, line[2]); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		line = append(line, write())
	}
	q := &queries{db: s.wc.q, tenant: s.tenant}
	head, err := q.CheckpointLinkByID(ctx, line[len(line)-1])
	if err != nil {
		t.Fatal(err)
	}
	if head.DeltaRun != deltaRun-1 {
		t.Fatalf("the head's delta_run is %d, want %d (a run as long as allowed)", head.DeltaRun, deltaRun-1)
	}
	run, anchor, err := runOf(ctx, q, &head, deltaRun)
	if err != nil || anchor == nil || anchor.CheckpointID != first.ID {
		t.Fatalf("the run of the head: anchor %v, %v; want the thread's first checkpoint %s", anchor, err, first.ID)
	}
	if len(run) != len(line) {
		t.Fatalf("the run of the head has %d deltas, want %d", len(run), len(line))
	}
	for i, r := range run {
		if want := line[len(line)-1-i]; r.CheckpointID != want {
			t.Fatalf("delta %d of the run is %s, want %s", i, r.CheckpointID, want)
		}
	}
	// As a forged row could have it: the run's first delta based on the
	// run's last.
	if _, err := s.w.ExecContext(ctx, `UPDATE checkpoints SET base_checkpoint_id = ? WHERE checkpoint_id = ?`,
		head.CheckpointID.String(), line[0].String()); err != nil {
		t.Fatal(err)
	}
	if _, anchor, err := runOf(ctx, q, &head, deltaRun); err != nil || anchor != nil {
		t.Fatalf("a run whose bases make a cycle: anchor %v, %v; want none", anchor, err)
	}
}
