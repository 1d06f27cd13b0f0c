package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// groupStore opens a store on a file, with a way to write one checkpoint
// inside a write and to count a thread's checkpoints.
func groupStore(t *testing.T) (s *Store, snap func(context.Context, *queries, string) error, count func(string) int) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "g.db"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	snap = func(ctx context.Context, q *queries, thread string) error {
		_, err := s.put(ctx, q, engine.PutRequest{ThreadID: thread, ID: engine.NewCheckpointID(),
			Messages: json.RawMessage(`[]`), State: json.RawMessage(`{}`), ToolResults: json.RawMessage(`{}`),
			Metadata: json.RawMessage(`{}`), DeltaRun: 1, Trigger: engine.TriggerManual})
		return err
	}
	count = func(thread string) int {
		t.Helper()
		var n int
		if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM checkpoints WHERE thread_id = ?`, thread).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	return s, snap, count
}

// untilWaiting blocks until n writers wait for the writer connection.
func untilWaiting(t *testing.T, s *Store, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.wc.waiting.Load() < n {
		if time.Now().After(deadline) {
			t.Error("no writer came to wait")
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// writer runs writes in goroutines one at a time: each starts once the
// write before holds the connection, so the order they take it is known.
type writer struct {
	wg      sync.WaitGroup
	started chan struct{}
}

// start runs write in a goroutine, after the previous write's fn started,
// and returns once write waits for the connection or holds it. write's fn
// must call w.hold first.
func (w *writer) start(write func() error, res *error) {
	if w.started != nil {
		<-w.started
	}
	w.started = make(chan struct{})
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				*res = fmt.Errorf("panicked: %v", r)
			}
		}()
		*res = write()
	}()
}

// hold marks the current write's fn as started.
func (w *writer) hold() { close(w.started) }

// A write that finds another waiting leaves its transaction to it and
// returns with that write's commit, not before; a write in a shared
// transaction that fails takes back its own work alone, and one that
// panics too; the writes after them still commit.
func TestWritesWaitingShareACommit(t *testing.T) {
	ctx := context.Background()
	s, snap, count := groupStore(t)
	boom := errors.New("boom")
	w := &writer{}
	var lastRan, aAfterLast atomic.Bool
	results := make([]error, 4)
	// Each writes, then waits for the next to queue before its fn returns:
	// a; b fails; c panics; d is the last.
	step := func(i int, thread string, end func() error) {
		w.start(func() error {
			err := s.write(ctx, func(q *queries, _ execer) error {
				w.hold()
				if err := snap(ctx, q, thread); err != nil {
					return err
				}
				if end == nil {
					lastRan.Store(true)
					return nil
				}
				untilWaiting(t, s, 1)
				return end()
			})
			if i == 0 {
				aAfterLast.Store(lastRan.Load())
			}
			return err
		}, &results[i])
	}
	step(0, "a", func() error { return nil })
	step(1, "b", func() error { return boom })
	step(2, "c", func() error { panic(boom) })
	step(3, "d", nil)
	w.wg.Wait()
	if !aAfterLast.Load() {
		t.Error("a returned before the last write of its transaction ran: it did not wait for the shared commit")
	}
	if results[0] != nil || results[3] != nil {
		t.Errorf("a: %v, d: %v; want both written", results[0], results[3])
	}
	if !errors.Is(results[1], boom) || results[2] == nil || !strings.HasPrefix(results[2].Error(), "panicked") {
		t.Errorf("b: %v, c: %v; want boom and a panic", results[1], results[2])
	}
	for thread, want := range map[string]int{"a": 1, "b": 0, "c": 0, "d": 1} {
		if n := count(thread); n != want {
			t.Errorf("thread %s: %d checkpoints, want %d", thread, n, want)
		}
	}
}

// interrupted writes a checkpoint on thread, then runs a write statement
// until ctx is cancelled: SQLite then takes back the whole transaction.
func interrupted(ctx context.Context, q *queries, tx execer, snap func(context.Context, *queries, string) error, thread string) error {
	if err := snap(ctx, q, thread); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE threads SET metadata = metadata WHERE (
		WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000000000)
		SELECT count(*) FROM r) < 0`)
	return err
}

// When a write's statement is interrupted by its context, SQLite takes
// back the whole transaction, the earlier writes in it too: those run
// again, once each, and commit; the interrupted write returns its error.
// A write that cannot run twice (an import) shares no transaction, so a
// later write's failure never takes it back.
func TestSharedTransactionTakenBackRunsItsWritesAgain(t *testing.T) {
	ctx := context.Background()
	s, snap, count := groupStore(t)
	w := &writer{}
	var aRuns, impRuns atomic.Int32
	var aErr, bErr, impErr, cErr error
	// interruptedWrite starts a write on thread whose statement runs until
	// its context is cancelled, 300 ms on.
	interruptedWrite := func(thread string, res *error) {
		w.start(func() error {
			c, cancel := context.WithCancel(ctx)
			t.Cleanup(cancel)
			time.AfterFunc(300*time.Millisecond, cancel)
			return s.write(c, func(q *queries, tx execer) error {
				w.hold()
				return interrupted(c, q, tx, snap, thread)
			})
		}, res)
	}
	w.start(func() error {
		return s.write(ctx, func(q *queries, _ execer) error {
			if aRuns.Add(1) == 1 {
				w.hold()
			}
			if err := snap(ctx, q, "a"); err != nil {
				return err
			}
			if aRuns.Load() == 1 {
				untilWaiting(t, s, 1)
			}
			return nil
		})
	}, &aErr)
	interruptedWrite("b", &bErr)
	w.wg.Wait() // a ran again and committed alone
	w.started = nil
	w.start(func() error {
		return s.Import(ctx, func(iw engine.ImportWriter) error {
			if impRuns.Add(1) == 1 {
				w.hold()
			}
			if err := iw.Thread(ctx, engine.ExportThread{ThreadID: "imported", CreatedAt: time.Now()}); err != nil {
				return err
			}
			untilWaiting(t, s, 1)
			return nil
		})
	}, &impErr)
	interruptedWrite("c", &cErr)
	w.wg.Wait()
	if bErr == nil || cErr == nil {
		t.Fatalf("b: %v, c: %v; want both interrupted", bErr, cErr)
	}
	if aErr != nil || impErr != nil {
		t.Fatalf("a: %v, import: %v; want both written", aErr, impErr)
	}
	if s.wc.group != nil {
		t.Error("a transaction is still open")
	}
	if n := aRuns.Load(); n != 2 {
		t.Errorf("a ran %d times; want 2 (once more after its transaction was taken back)", n)
	}
	if n := impRuns.Load(); n != 1 {
		t.Errorf("the import ran %d times, want 1", n)
	}
	var threads int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM threads WHERE thread_id = 'imported'`).Scan(&threads); err != nil {
		t.Fatal(err)
	}
	if a, b, c := count("a"), count("b"), count("c"); a != 1 || b != 0 || c != 0 || threads != 1 {
		t.Errorf("a: %d checkpoints, b: %d, c: %d, imported threads: %d; want 1, 0, 0 and 1", a, b, c, threads)
	}
}

// A run alone that follows another at once (a sweep's next batch) lets the
// write that queued behind the first go before it, every time: a Mutex
// alone lets the goroutine that just unlocked it take it again before the
// writer it woke.
func TestRunAloneLetsQueuedWritesGoFirst(t *testing.T) {
	s, snap, _ := groupStore(t)
	// No time limit on the courtesy: the order is then the same on a
	// machine too loaded to wake the writer within maxYield.
	s.wc.yieldMax = time.Minute
	ctx := context.Background()
	for round := range 20 {
		var mu sync.Mutex
		var order []string
		note := func(what string) {
			mu.Lock()
			order = append(order, what)
			mu.Unlock()
		}
		holding, release := make(chan struct{}), make(chan struct{})
		sweep := make(chan error, 1)
		go func() {
			err := s.writeAlone(ctx, func(*queries, execer) error {
				close(holding)
				<-release
				return nil
			})
			if err == nil {
				err = s.writeAlone(ctx, func(q *queries, _ execer) error {
					note("alone")
					return snap(ctx, q, "alone")
				})
			}
			sweep <- err
		}()
		<-holding
		write := make(chan error, 1)
		go func() {
			write <- s.write(ctx, func(q *queries, _ execer) error {
				note("write")
				return snap(ctx, q, "write")
			})
		}()
		untilWaiting(t, s, 1)
		close(release)
		if err := errors.Join(<-sweep, <-write); err != nil {
			t.Fatal(err)
		}
		if strings.Join(order, ",") != "write,alone" {
			t.Fatalf("round %d: ran %v; want the queued write before the second run alone", round, order)
		}
	}
}
