package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/localpg"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// A server crash and restart while 4 writers run with Config.Retry: every
// write the engine acknowledged exists afterwards, none twice, each
// thread's steps one chain, and the same engine and pool serve on.
func TestRetryRidesThroughAServerRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Commits acknowledged only once their WAL is written: an immediate stop
	// must not lose what the server acknowledged.
	cluster, err := localpg.Start(ctx, localpg.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatalf("this test needs Postgres server binaries (CI installs postgresql-15): %v", err)
	}
	defer cluster.Stop(context.Background())
	if err := schema.Migrate(ctx, cluster.URL()); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(pool, engine.Config{Retry: engine.RetryPolicy{
		Attempts: 100, Backoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, MaxElapsed: time.Minute,
	}})

	const writers, writes = 4, 120
	acked := make([][]engine.SnapshotResult, writers)
	var total, found atomic.Int64
	crashed := make(chan error, 1)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			thread := fmt.Sprint("writer-", w)
			for i := range writes {
				res, err := eng.Snapshot(ctx, engine.SnapshotInput{ID: engine.NewCheckpointID(), ThreadID: thread,
					State: []byte(fmt.Sprintf(`{"i": %d}`, i))})
				if err != nil {
					t.Errorf("%s write %d: %v", thread, i, err)
					return
				}
				acked[w] = append(acked[w], res)
				if !res.Created {
					found.Add(1) // committed, acknowledgment lost: found by the retry
				}
				if total.Add(1) == writers*writes/4 {
					go func() { crashed <- cluster.Crash(ctx) }()
				}
			}
		}()
	}
	wg.Wait()
	if err := <-crashed; err != nil {
		t.Fatalf("crash and restart: %v", err)
	}
	for w := range writers {
		thread := fmt.Sprint("writer-", w)
		list, err := eng.ListCheckpoints(ctx, thread, engine.ListOptions{Limit: engine.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != len(acked[w]) || len(list) != writes {
			t.Fatalf("%s: %d checkpoints stored, %d acknowledged, want %d", thread, len(list), len(acked[w]), writes)
		}
		stored := map[string]int64{}
		for _, c := range list {
			stored[c.ID.String()] = c.Step
		}
		for i, a := range acked[w] {
			if step, ok := stored[a.ID.String()]; !ok || step != int64(i+1) || a.Step != step {
				t.Fatalf("%s: acknowledged write %d (%s, step %d) stored at step %d (%v)", thread, i, a.ID, a.Step, step, ok)
			}
		}
	}
	t.Logf("%d writes by %d writers through an immediate restart; %d found committed by their retry", writers*writes, writers, found.Load())
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "after"}); err != nil {
		t.Fatalf("the same engine after the restart: %v", err)
	}
}

// Without Config.Retry a transient failure is recognisable; bad input and
// a cancelled context are never retried.
func TestTransientFailuresAreTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := engine.New(pool, engine.Config{}).Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); !errors.Is(err, engine.ErrTransient) {
		t.Fatalf("no server: %v, want ErrTransient", err)
	}
	retrying := engine.New(pool, engine.Config{Retry: engine.RetryPolicy{Attempts: 1000, Backoff: time.Second, MaxElapsed: time.Hour}})
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := retrying.Snapshot(cctx, engine.SnapshotInput{ThreadID: "t"}); err == nil {
		t.Fatal("a write with no server succeeded")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("retries went on %v after the context ended", took)
	}
	start = time.Now()
	if _, err := retrying.Snapshot(ctx, engine.SnapshotInput{ThreadID: ""}); !errors.Is(err, engine.ErrInvalidInput) || time.Since(start) > time.Second {
		t.Fatalf("bad input: %v after %v, want ErrInvalidInput at once", err, time.Since(start))
	}

	// Bad input through a real store is not transient either.
	b := setup(t)
	if _, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", ParentID: engine.NewCheckpointID()}); !errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrTransient) {
		t.Fatalf("unknown parent: %v", err)
	}
}
