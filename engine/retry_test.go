package engine_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// flakyStore is a real store whose Put and PutWrites calls are counted and,
// as fail says, made to fail: fail(n) for the n-th call (from 1) returns the
// error to return instead of the store's result, and whether the call
// reaches the store first (a commit whose acknowledgment is lost).
type flakyStore struct {
	engine.Store
	puts, putWrites atomic.Int32
	fail            func(ctx context.Context, n int32) (commit bool, err error)
}

func (s *flakyStore) Put(ctx context.Context, p engine.PutRequest) (engine.SnapshotResult, error) {
	n := s.puts.Add(1)
	if s.fail != nil {
		if commit, err := s.fail(ctx, n); err != nil {
			if commit {
				if _, err := s.Store.Put(ctx, p); err != nil {
					return engine.SnapshotResult{}, fmt.Errorf("flakyStore: the commit failed: %v", err)
				}
			}
			return engine.SnapshotResult{}, err
		}
	}
	return s.Store.Put(ctx, p)
}

func (s *flakyStore) PutWrites(ctx context.Context, w engine.WritesRequest) (int64, error) {
	n := s.putWrites.Add(1)
	if s.fail != nil {
		if commit, err := s.fail(ctx, n); err != nil {
			if commit {
				if _, err := s.Store.PutWrites(ctx, w); err != nil {
					return 0, fmt.Errorf("flakyStore: the commit failed: %v", err)
				}
			}
			return 0, err
		}
	}
	return s.Store.PutWrites(ctx, w)
}

// errLost is a transient failure as a store reports it.
var errLost = fmt.Errorf("put: %w: %w", engine.ErrTransient, io.ErrUnexpectedEOF)

// failFirst fails the first n calls with errLost; commit: after writing.
func failFirst(n int32, commit bool) func(context.Context, int32) (bool, error) {
	return func(_ context.Context, call int32) (bool, error) {
		if call <= n {
			return commit, errLost
		}
		return false, nil
	}
}

// fastRetry retries quickly, up to attempts in all.
func fastRetry(attempts int) engine.RetryPolicy {
	return engine.RetryPolicy{Attempts: attempts, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
}

func newFlaky(t *testing.T, retry engine.RetryPolicy, fail func(context.Context, int32) (bool, error)) (*engine.Engine, *flakyStore) {
	t.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	flaky := &flakyStore{Store: store, fail: fail}
	eng := engine.New(flaky, engine.Config{Retry: retry})
	t.Cleanup(func() { eng.Close() })
	return eng, flaky
}

func countCheckpoints(t *testing.T, eng *engine.Engine, thread string) int {
	t.Helper()
	list, err := eng.ListCheckpoints(context.Background(), thread, engine.ListOptions{Limit: engine.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// Config.Retry retries transient failures of Snapshot, PutWrites and
// SnapshotSafe with the same checkpoint id, and a write that committed
// before its acknowledgment was lost is found, not stored twice.
func TestRetryTransientWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("failed before writing", func(t *testing.T) {
		t.Parallel()
		eng, flaky := newFlaky(t, fastRetry(5), failFirst(2, false))
		res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
		if err != nil || !res.Created || res.Step != 1 {
			t.Fatalf("%+v, %v; want created at step 1", res, err)
		}
		if n := flaky.puts.Load(); n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
		if n := countCheckpoints(t, eng, "t"); n != 1 {
			t.Errorf("%d checkpoints stored, want 1", n)
		}
	})

	t.Run("committed, acknowledgment lost", func(t *testing.T) {
		t.Parallel()
		eng, flaky := newFlaky(t, fastRetry(5), failFirst(1, true))
		id := engine.NewCheckpointID()
		res, err := eng.Snapshot(ctx, engine.SnapshotInput{ID: id, ThreadID: "t", State: json.RawMessage(`{"a":1}`)})
		if err != nil || res.Created || res.ID != id || res.Step != 1 {
			t.Fatalf("%+v, %v; want the committed checkpoint %s, found (Created false) at step 1", res, err, id)
		}
		if n := flaky.puts.Load(); n != 2 {
			t.Errorf("%d attempts, want 2", n)
		}
		next, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
		if err != nil || next.Step != 2 || next.ParentID != id {
			t.Fatalf("the next snapshot: %+v, %v; want step 2 on %s", next, err, id)
		}
		if n := countCheckpoints(t, eng, "t"); n != 2 {
			t.Errorf("%d checkpoints stored, want 2", n)
		}
	})

	t.Run("gives up after Attempts", func(t *testing.T) {
		t.Parallel()
		eng, flaky := newFlaky(t, fastRetry(3), failFirst(1000, false))
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); !errors.Is(err, engine.ErrTransient) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%v, want ErrTransient wrapping the store's error", err)
		}
		if n := flaky.puts.Load(); n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
	})

	t.Run("retries off", func(t *testing.T) {
		t.Parallel()
		eng, flaky := newFlaky(t, engine.RetryPolicy{}, failFirst(1, false))
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); !errors.Is(err, engine.ErrTransient) {
			t.Fatalf("%v, want ErrTransient", err)
		}
		if n := flaky.puts.Load(); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
	})

	t.Run("PutWrites", func(t *testing.T) {
		t.Parallel()
		eng, flaky := newFlaky(t, fastRetry(5), nil)
		res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		flaky.fail = failFirst(2, true) // the first attempt commits, the second finds it
		writes := []engine.Write{{Channel: "out", Value: json.RawMessage(`1`)}, {Channel: "out", Value: json.RawMessage(`2`)}}
		if _, err := eng.PutWrites(ctx, res.ID, "task", writes); err != nil {
			t.Fatal(err)
		}
		if n := flaky.putWrites.Load(); n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
		c, err := eng.Get(ctx, res.ID)
		if err != nil || len(c.PendingWrites) != 2 {
			t.Fatalf("%d writes stored (%v), want 2", len(c.PendingWrites), err)
		}
	})

	t.Run("SnapshotSafe", func(t *testing.T) {
		t.Parallel()
		eng, flaky := newFlaky(t, fastRetry(5), failFirst(2, false))
		if r := eng.SnapshotSafe(ctx, engine.SnapshotInput{ThreadID: "t", Trigger: engine.TriggerToolCall}); r.Err != nil || !r.Created {
			t.Fatalf("%+v", r)
		}
		if n, f := flaky.puts.Load(), eng.SnapshotFailures(); n != 3 || f != 0 {
			t.Errorf("%d attempts, %d failures counted; want 3 and 0", n, f)
		}
	})
}

// Bad input, a conflicting id, an unknown checkpoint and a cancelled or
// expired context are never retried.
func TestRetryNeverRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	forever := engine.RetryPolicy{Attempts: 1000, Backoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxElapsed: time.Minute}

	eng, flaky := newFlaky(t, forever, nil)
	first, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		in    engine.SnapshotInput
		want  error
		calls int32 // store calls: 0 when the engine refuses before any I/O
	}{
		{"empty thread id", engine.SnapshotInput{}, engine.ErrInvalidInput, 0},
		{"not a UUIDv7", engine.SnapshotInput{ThreadID: "t", ID: uuid.New()}, engine.ErrInvalidInput, 0},
		{"JSON that does not parse", engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"a":}`)}, engine.ErrInvalidJSON, 1},
		{"id used for other content", engine.SnapshotInput{ThreadID: "t", ID: first.ID, State: json.RawMessage(`{"a":2}`)}, engine.ErrIDConflict, 1},
		{"unknown parent", engine.SnapshotInput{ThreadID: "t", ParentID: engine.NewCheckpointID()}, engine.ErrNotFound, 1},
	} {
		before := flaky.puts.Load()
		if _, err := eng.Snapshot(ctx, c.in); !errors.Is(err, c.want) || errors.Is(err, engine.ErrTransient) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if calls := flaky.puts.Load() - before; calls > c.calls {
			t.Errorf("%s: %d store calls, want %d", c.name, calls, c.calls)
		}
	}
	if _, err := eng.PutWrites(ctx, engine.NewCheckpointID(), "task", nil); !errors.Is(err, engine.ErrNotFound) || flaky.putWrites.Load() != 1 {
		t.Errorf("PutWrites after an unknown checkpoint: %v after %d calls, want ErrNotFound after 1", err, flaky.putWrites.Load())
	}

	t.Run("context cancelled during the call", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		eng, flaky := newFlaky(t, forever, func(context.Context, int32) (bool, error) {
			cancel()
			return false, errLost
		})
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); err == nil {
			t.Fatal("no error")
		}
		if n := flaky.puts.Load(); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
	})

	t.Run("deadline passes during a backoff", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		eng, flaky := newFlaky(t, engine.RetryPolicy{Attempts: 1000, Backoff: 10 * time.Second, MaxElapsed: time.Hour}, failFirst(1000, false))
		start := time.Now()
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); !errors.Is(err, engine.ErrTransient) {
			t.Fatalf("%v, want the last ErrTransient", err)
		}
		if n, took := flaky.puts.Load(), time.Since(start); n != 1 || took > 2*time.Second {
			t.Errorf("%d attempts in %v, want 1, ended with the context", n, took)
		}
	})
}

// A SQLite file another process holds past the busy timeout fails with
// ErrTransient, and Config.Retry waits it out.
func TestSQLiteBusyIsTransient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	store, err := sqlite.Open(ctx, path, sqlite.Options{Migrate: true, BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(store, engine.Config{})
	defer eng.Close()
	retrying := engine.New(store, engine.Config{Retry: engine.RetryPolicy{Attempts: 50, Backoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}})

	other, err := sql.Open("sqlite", path) // another writer of the file
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	holder, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); !errors.Is(err, engine.ErrTransient) {
		t.Fatalf("a busy file: %v, want ErrTransient", err)
	}
	release := time.AfterFunc(200*time.Millisecond, func() { holder.ExecContext(ctx, "ROLLBACK") })
	defer release.Stop()
	res, err := retrying.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
	if err != nil || !res.Created || res.Step != 1 {
		t.Fatalf("with retries, once the file is free: %+v, %v", res, err)
	}
	if n := countCheckpoints(t, eng, "t"); n != 1 {
		t.Errorf("%d checkpoints stored, want 1", n)
	}
}

// A merge whose first attempt committed but was not acknowledged, while
// the branch moved before the retry: the retry writes other content under
// the call's own id (ErrIDConflict), so the merge that stands is returned,
// plain and under encryption (whose merge is a Put).
func TestMergeRetriedAfterALostAcknowledgment(t *testing.T) {
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	for _, encrypted := range []bool{false, true} {
		store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), sqlite.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		cfg := engine.Config{}
		if encrypted {
			cfg.Encryption = engine.Encryption{Keys: keys}
		}
		direct := engine.New(store, cfg)
		ctx := context.Background()
		head, err := direct.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["one"]`)})
		if err != nil {
			t.Fatal(err)
		}
		br, err := direct.Branch(ctx, head.ID, "b")
		if err != nil {
			t.Fatal(err)
		}
		// The first merge commits, then the branch moves, then the
		// acknowledgment is lost.
		moved := func() {
			if _, err := direct.Snapshot(ctx, engine.SnapshotInput{ThreadID: br.ThreadID, Messages: json.RawMessage(`["one","two"]`)}); err != nil {
				t.Fatal(err)
			}
		}
		flaky := &mergeFlaky{Store: store, after: moved, put: encrypted}
		cfg.Retry = fastRetry(3)
		eng := engine.New(flaky, cfg)
		m, err := eng.MergeBranch(ctx, br.ThreadID, "t")
		if err != nil {
			t.Fatalf("encrypted %v: a merge retried after its lost acknowledgment: %v", encrypted, err)
		}
		if c, err := direct.Get(ctx, m.CheckpointID); err != nil || c.ThreadID != "t" || c.MergeParentID != m.MergeParentID || c.ParentID != head.ID {
			t.Fatalf("encrypted %v: the merge returned %+v reads %+v, %v", encrypted, m, c, err)
		}
		if n := countCheckpoints(t, direct, "t"); n != 2 {
			t.Errorf("encrypted %v: %d checkpoints on the target, want the head and one merge", encrypted, n)
		}
		store.Close()
	}
}

// mergeFlaky is a real store whose first merge (a Merge, or under
// encryption the merge's Put) commits, runs after, and then reports a
// lost acknowledgment.
type mergeFlaky struct {
	engine.Store
	after func()
	put   bool
	calls atomic.Int32
}

func (s *mergeFlaky) Merge(ctx context.Context, branch, into, ns string, id uuid.UUID) (engine.MergeResult, error) {
	if !s.put && s.calls.Add(1) == 1 {
		if _, err := s.Store.Merge(ctx, branch, into, ns, id); err != nil {
			return engine.MergeResult{}, err
		}
		s.after()
		return engine.MergeResult{}, errLost
	}
	return s.Store.Merge(ctx, branch, into, ns, id)
}

func (s *mergeFlaky) Put(ctx context.Context, p engine.PutRequest) (engine.SnapshotResult, error) {
	if s.put && p.MergeParentID != uuid.Nil && s.calls.Add(1) == 1 {
		if _, err := s.Store.Put(ctx, p); err != nil {
			return engine.SnapshotResult{}, err
		}
		s.after()
		return engine.SnapshotResult{}, errLost
	}
	return s.Store.Put(ctx, p)
}
