package integration

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// closeCountingPool is a pool whose batches' results count the calls of
// their Close.
type closeCountingPool struct {
	*pgxpool.Pool
	mu      sync.Mutex
	results []*closeCounted
}

type closeCounted struct {
	pgx.BatchResults
	sql    string // the batch's last statement
	closes int
	err    error // the first Close's
}

func (r *closeCounted) Close() error {
	r.closes++
	err := r.BatchResults.Close()
	if r.closes == 1 {
		r.err = err
	}
	return err
}

func (p *closeCountingPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	r := &closeCounted{BatchResults: p.Pool.SendBatch(ctx, b), sql: b.QueuedQueries[len(b.QueuedQueries)-1].SQL}
	p.mu.Lock()
	p.results = append(p.results, r)
	p.mu.Unlock()
	return r
}

// The store closes the results of every batch it sends over a pool once:
// pgx's Close hands the connection back to the pool, and a second Close
// still touches that connection, by then another caller's (after a failed
// batch it edits the connection's statement cache: a data race that go
// test -race found in the conformance suite's concurrent writers). A
// successful write, a write that fails (an id used in another thread) and
// a read each close theirs once.
func TestStoreClosesEveryBatchOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	pool := &closeCountingPool{Pool: d.Pool}
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})
	id := engine.NewCheckpointID()
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "a", ID: id, State: benchratio.State()}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "b", ID: id, State: benchratio.State()}); !errors.Is(err, engine.ErrIDConflict) {
		t.Fatalf("the same id in another thread: %v, want ErrIDConflict", err)
	}
	if _, err := eng.Get(ctx, id); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i, r := range pool.results {
		if r.closes != 1 {
			t.Errorf("batch %d (%.60q...) closed %d times, want once", i, r.sql, r.closes)
		}
		if r.err != nil {
			failed++
		}
	}
	if len(pool.results) < 3 || failed == 0 {
		t.Fatalf("%d batches, %d failed: the test wants a failed one among them", len(pool.results), failed)
	}
}
