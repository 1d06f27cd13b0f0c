package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/localpg"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// A server crash and restart while 4 writers run with Config.Retry: every
// write the engine acknowledged exists afterwards, none twice, each
// thread's steps one chain, and the same engine and pool serve on. The
// failed attempts are counted from the engine's own spans (one
// pgcheckpoint.store.Put span per attempt), so the test also shows that the
// crash did hit the writers.
func TestRetryRidesThroughAServerRestart(t *testing.T) {
	t.Parallel()
	enginetest.SkipLong(t, "writers through a server crash and restart")
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
	spans := tracetest.NewInMemoryExporter()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)),
		Retry: engine.RetryPolicy{
			Attempts: 100, Backoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, MaxElapsed: time.Minute,
		},
	})

	// Each writer writes at least `before` checkpoints, then the server
	// crashes and restarts under them, and each writes `after` more.
	const writers, before, after = 4, 30, 30
	acked := make([][]engine.SnapshotResult, writers)
	var found atomic.Int64
	var ready sync.WaitGroup
	ready.Add(writers)
	restarted := make(chan struct{})
	var wg sync.WaitGroup
	began := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			thread := fmt.Sprint("writer-", w)
			sinceRestart := 0
			for i := 0; sinceRestart < after; i++ {
				res, err := eng.Snapshot(ctx, engine.SnapshotInput{ID: engine.NewCheckpointID(), ThreadID: thread,
					State: []byte(fmt.Sprintf(`{"i": %d}`, i))})
				if err != nil {
					t.Errorf("%s write %d: %v", thread, i, err)
					if i < before {
						ready.Done()
					}
					return
				}
				acked[w] = append(acked[w], res)
				if !res.Created {
					found.Add(1) // committed, acknowledgment lost: found by the retry
				}
				if i == before-1 {
					ready.Done()
				}
				select {
				case <-restarted:
					sinceRestart++
				default:
				}
			}
		}()
	}
	ready.Wait()
	crashAt := time.Now()
	if err := cluster.Crash(ctx); err != nil {
		t.Fatalf("crash and restart: %v", err)
	}
	restartTook := time.Since(crashAt)
	close(restarted)
	wg.Wait()
	took := time.Since(began)
	if t.Failed() {
		return
	}

	total := 0
	for w := range writers {
		thread := fmt.Sprint("writer-", w)
		list, err := eng.ListCheckpoints(ctx, thread, engine.ListOptions{Limit: engine.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		total += len(acked[w])
		if len(list) != len(acked[w]) {
			t.Fatalf("%s: %d checkpoints stored, %d acknowledged", thread, len(list), len(acked[w]))
		}
		stored := map[uuid.UUID]engine.CheckpointInfo{}
		for _, c := range list {
			stored[c.ID] = c
		}
		if len(stored) != len(list) {
			t.Fatalf("%s: an id listed twice", thread)
		}
		var parent uuid.UUID
		for i, a := range acked[w] {
			c, ok := stored[a.ID]
			if !ok || c.Step != int64(i+1) || a.Step != c.Step || c.ParentID != parent || a.ParentID != parent {
				t.Fatalf("%s: acknowledged write %d (%s, step %d, parent %s) stored as %+v (%v); want step %d on %s",
					thread, i, a.ID, a.Step, a.ParentID, c, ok, i+1, parent)
			}
			parent = a.ID
		}
	}
	var attempts, failed int
	for _, s := range spans.GetSpans() {
		if s.Name == "pgcheckpoint.store.Put" {
			attempts++
			if s.Status.Code == codes.Error {
				failed++
			}
		}
	}
	if failed == 0 {
		t.Fatalf("no write failed: the crash (%v) did not hit the writers", restartTook)
	}
	if attempts != total+failed {
		t.Errorf("%d store calls for %d writes and %d failed attempts", attempts, total, failed)
	}
	t.Logf("%d writers, %d writes acknowledged in %v, all stored once; the immediate stop and restart took %v; "+
		"%d attempts failed and were retried; %d writes found committed by their retry (acknowledgment lost)",
		writers, total, took.Round(time.Millisecond), restartTook.Round(time.Millisecond), failed, found.Load())
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
	if _, err := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{}).Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); !errors.Is(err, engine.ErrTransient) {
		t.Fatalf("no server: %v, want ErrTransient", err)
	}
	retrying := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{Retry: engine.RetryPolicy{Attempts: 1000, Backoff: time.Second, MaxElapsed: time.Hour}})
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

// A write that waits past the session's lock_timeout for a thread another
// client holds fails with ErrTransient (SQLSTATE 55P03), and Config.Retry
// retries it until the holder is done.
func TestLockTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "100ms"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	holder, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.WithoutCancel(ctx))
	if _, err := holder.Exec(ctx, `SELECT pgcheckpoint.thread_lock('t')`); err != nil {
		t.Fatal(err)
	}
	once := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})
	for name, call := range map[string]func() error{
		"Snapshot": func() error {
			_, err := once.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
			return err
		},
		"Append": func() error {
			_, err := once.Append(ctx, engine.AppendInput{ThreadID: "t", SetState: json.RawMessage(`{"a":1}`)})
			return err
		},
		"Rewind": func() error {
			_, err := once.Rewind(ctx, first.ID)
			return err
		},
		"PruneThreads": func() error {
			_, err := once.PruneThreads(ctx, engine.KeepLatest(), "t")
			return err
		},
	} {
		if err := call(); !errors.Is(err, engine.ErrTransient) {
			t.Errorf("%s on a thread held past lock_timeout: %v, want ErrTransient", name, err)
		}
	}
	retrying := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{Retry: engine.RetryPolicy{Attempts: 100, Backoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}})
	done := make(chan error, 1)
	go func() {
		_, err := retrying.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
		done <- err
	}()
	time.Sleep(400 * time.Millisecond) // a few attempts time out
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the retried write: %v", err)
	}
}
