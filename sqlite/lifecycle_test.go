package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// A write whose context ends while its BEGIN runs leaves no transaction
// open: the driver reports the context's end even when BEGIN ran, and the
// held connection then kept the file's write lock, so every later write
// of the process failed ("cannot start a transaction within a
// transaction") and other processes' met a locked file.
func TestAWriteCancelledInItsBeginLeavesNoTransaction(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cancel.db")
	store, err := sqlite.Open(context.Background(), path, sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	eng := engine.New(store, engine.Config{})
	ctx := context.Background()
	cancelled := 0
	for i := range 400 {
		short, cancel := context.WithTimeout(ctx, time.Duration(i%200)*time.Microsecond)
		_, err := eng.Snapshot(short, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"i":1}`)})
		cancel()
		if err != nil {
			cancelled++
		}
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
			t.Fatalf("round %d, after %d cancelled writes: a write with a live context: %v", i, cancelled, err)
		}
	}
	if cancelled == 0 {
		t.Fatal("no write was cancelled: the test needs deadlines that end mid-write")
	}
	// Another store on the file writes too: no write lock was left behind.
	other, err := sqlite.Open(ctx, path, sqlite.Options{BusyTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := engine.New(other, engine.Config{}).Snapshot(ctx, engine.SnapshotInput{ThreadID: "u"}); err != nil {
		t.Fatalf("another store's write: %v", err)
	}
}

// Close while writes are in flight: each write either commits (and reads
// back after the file is opened again) or fails; none runs on the
// statements Close finalized (the process crashed: SIGSEGV in the driver).
func TestCloseWhileWritesAreInFlight(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("close-%d.db", round))
		store, err := sqlite.Open(context.Background(), path, sqlite.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		eng := engine.New(store, engine.Config{})
		var mu sync.Mutex
		var written []uuid.UUID
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					res, err := eng.Snapshot(context.Background(), engine.SnapshotInput{ThreadID: fmt.Sprintf("t%d", g), State: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
					if err != nil {
						return
					}
					mu.Lock()
					written = append(written, res.ID)
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(20+30*round) * time.Millisecond)
		if err := eng.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		wg.Wait()
		if _, err := eng.Snapshot(context.Background(), engine.SnapshotInput{ThreadID: "after"}); err == nil {
			t.Fatal("a write after Close succeeded")
		}
		reopened, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		again := engine.New(reopened, engine.Config{})
		for _, id := range written {
			if _, err := again.Get(context.Background(), id); err != nil {
				t.Fatalf("an acknowledged write after Close: %v", err)
			}
		}
		reopened.Close()
		if len(written) == 0 {
			t.Fatal("nothing was written before Close: the test needs writes in flight")
		}
	}
}

// Stores opening a new file together (as processes starting at once do)
// all open it: the journal mode's change, for which SQLite does not wait,
// is tried again within the busy timeout (one of them failed at once with
// "database is locked", untyped).
func TestANewFileOpenedByManyAtOnce(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("new-%d.db", round))
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := sqlite.Open(context.Background(), path, sqlite.Options{Migrate: true, BusyTimeout: 5 * time.Second})
				if err == nil {
					_, err = engine.New(s, engine.Config{}).Snapshot(context.Background(), engine.SnapshotInput{ThreadID: "t"})
					s.Close()
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v (transient: %v)", round, err, errors.Is(err, engine.ErrTransient))
			}
		}
	}
}
