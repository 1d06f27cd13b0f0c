package enginetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// A checkpoint id names one checkpoint in the whole store: writers that
// race to use one new id on different threads, through engines with pools
// of their own (separate connections) and through each write path (a
// thread's first checkpoint, a later one stored whole, a later one stored
// as a delta), leave exactly one checkpoint. One write gets it, the others
// ErrIDConflict, and the losers' threads are as they were (a new thread is
// not created). A retry of the winner's write, on its thread, changes
// nothing and says Created false.
func testOneIDOneCheckpoint(t *testing.T, e *env) {
	const writers = 9
	rounds := Rounds(40, 10)
	engines := []*engine.Engine{e.eng, e.open(engine.Config{FullSnapshots: true}), e.open(engine.Config{})}
	for r := range rounds {
		id := engine.NewCheckpointID()
		// Every other round the threads have a checkpoint already, so the
		// write is not a thread's first.
		seeded := r%2 == 0
		threads := make([]string, writers)
		for w := range writers {
			threads[w] = fmt.Sprintf("r%02d-w%d", r, w)
			if seeded {
				e.snap(engine.SnapshotInput{ThreadID: threads[w], Messages: json.RawMessage(`[{"role":"user","content":"seed"}]`)})
			}
		}
		input := func(w int) engine.SnapshotInput {
			return engine.SnapshotInput{ThreadID: threads[w], ID: id,
				Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"seed"},{"role":"assistant","content":"writer %d"}]`, w))}
		}
		start := make(chan struct{})
		results := make([]engine.SnapshotResult, writers)
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				<-start
				results[w], errs[w] = engines[w%len(engines)].Snapshot(e.ctx, input(w))
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for w := range writers {
			switch {
			case errs[w] == nil && results[w].Created && winner < 0:
				winner = w
			case errs[w] == nil:
				t.Errorf("round %d: writers %d and %d both wrote checkpoint %s (threads %q and %q)", r, winner, w, id, threads[winner], threads[w])
			case !errors.Is(errs[w], engine.ErrIDConflict):
				t.Errorf("round %d: writer %d: %v, want ErrIDConflict", r, w, errs[w])
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer wrote checkpoint %s: %v", r, id, errs)
		}
		if cp := e.get(id); cp.ThreadID != threads[winner] {
			t.Fatalf("round %d: checkpoint %s is on %q, the winner wrote %q", r, id, cp.ThreadID, threads[winner])
		}
		for w := range writers {
			want := map[bool]int{true: 1, false: 0}[seeded]
			if w == winner {
				want++
			}
			got := listAll(t, e.ctx, e.eng, threads[w], "")
			if len(got) != want {
				t.Errorf("round %d: thread %q has %d checkpoints, want %d", r, threads[w], len(got), want)
			}
			for _, c := range got {
				if c.ID == id && w != winner {
					t.Errorf("round %d: loser thread %q holds checkpoint %s", r, threads[w], id)
				}
			}
		}
		if t.Failed() {
			t.FailNow()
		}

		// The winner's write again, twice at once: a retry.
		for range 2 {
			wg.Go(func() {
				res, err := engines[(winner+1)%len(engines)].Snapshot(e.ctx, input(winner))
				if err != nil || res.Created || res.ID != id || res.Step != results[winner].Step {
					t.Errorf("round %d: retry of the winner's write: %+v, %v; want Created false, step %d", r, res, err, results[winner].Step)
				}
			})
		}
		wg.Wait()
	}
	// Nothing else anywhere: the seeds and one checkpoint per round.
	inv := e.inventory()
	if n, want := len(inv.checkpoints), rounds/2*writers+rounds; n != want {
		t.Fatalf("%d checkpoints in the store, want %d", n, want)
	}
	seen := map[uuid.UUID]bool{}
	for _, th := range listThreads(t, e.ctx, e.eng) {
		for _, c := range listAll(t, e.ctx, e.eng, th.ThreadID, "") {
			if seen[c.ID] {
				t.Fatalf("checkpoint %s listed twice", c.ID)
			}
			seen[c.ID] = true
		}
	}
}

// An import holds ids too: an import of a checkpoint and writers that race
// to use its id on other threads leave exactly one checkpoint with it. The
// import checks its ids when it writes them and again just before it
// commits, with writes held off, so a writer that committed between the
// two is seen; the loser gets ErrIDConflict and leaves nothing.
func testImportAndWritersShareOneID(t *testing.T, e *env) {
	const writers = 4
	rounds := Rounds(30, 8)
	imported, written := 0, 0
	for r := range rounds {
		// The file: a thread with one checkpoint, exported and deleted, so
		// its id is free again.
		src := fmt.Sprintf("imp-%02d", r)
		res := e.snap(engine.SnapshotInput{ThreadID: src, Messages: json.RawMessage(`[{"role":"user","content":"import me"}]`)})
		var file bytes.Buffer
		if _, err := e.eng.Export(e.ctx, src, &file); err != nil {
			t.Fatal(err)
		}
		if _, err := e.eng.DeleteThreads(e.ctx, src); err != nil {
			t.Fatal(err)
		}
		threads := make([]string, writers)
		for w := range threads {
			threads[w] = fmt.Sprintf("imp-%02d-w%d", r, w)
			if w%2 == 0 {
				e.snap(engine.SnapshotInput{ThreadID: threads[w]})
			}
		}
		start := make(chan struct{})
		errs := make([]error, writers+1)
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			_, errs[writers] = e.eng.Import(e.ctx, bytes.NewReader(file.Bytes()), engine.ImportOptions{})
		})
		for w := range writers {
			wg.Go(func() {
				<-start
				_, errs[w] = e.eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: threads[w], ID: res.ID})
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
				if i == writers {
					imported++
				} else {
					written++
				}
			case !errors.Is(err, engine.ErrIDConflict):
				t.Fatalf("round %d: %v, want ErrIDConflict", r, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d writes of checkpoint %s succeeded (the import's error: %v)", r, won, res.ID, errs[writers])
		}
		holders := 0
		for _, th := range append(threads, src) {
			for _, c := range listAll(t, e.ctx, e.eng, th, "") {
				if c.ID == res.ID {
					holders++
				}
			}
		}
		if holders != 1 {
			t.Fatalf("round %d: %d threads hold checkpoint %s", r, holders, res.ID)
		}
	}
	t.Logf("%d rounds won by the import, %d by a writer", imported, written)
}
