package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The test binary runs itself as a writer process when these are set.
const (
	helperProcessEnv = "PGCHECKPOINT_TEST_HELPER"
	helperURLEnv     = "PGCHECKPOINT_TEST_HELPER_URL"
	helperThreadEnv  = "PGCHECKPOINT_TEST_HELPER_THREAD"
	helperCountEnv   = "PGCHECKPOINT_TEST_HELPER_COUNT"
)

// runHelperProcess writes snapshots from a separate process: 4 goroutines,
// COUNT snapshots each (COUNT < 0: until killed).
func runHelperProcess() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(helperURLEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	eng := engine.New(pool, engine.Config{})
	thread := os.Getenv(helperThreadEnv)
	count, _ := strconv.Atoi(os.Getenv(helperCountEnv))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; count < 0 || i < count; i++ {
				state := fmt.Sprintf(`{"pid": %d, "worker": %d, "i": %d}`, os.Getpid(), w, i)
				if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, State: json.RawMessage(state)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func helperCommand(t *testing.T, url, thread string, count int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		helperProcessEnv+"=writer", helperURLEnv+"="+url,
		helperThreadEnv+"="+thread, helperCountEnv+"="+strconv.Itoa(count))
	cmd.Stderr = os.Stderr
	return cmd
}

type row struct {
	parent uuid.UUID
	step   int64
}

// checkLinearThread checks that a thread written only by Snapshot (no
// explicit parents) holds want checkpoints forming one unbroken chain from
// the head to the root, with steps want..1.
func checkLinearThread(t *testing.T, pool *pgxpool.Pool, thread string, want int) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT checkpoint_id, coalesce(parent_checkpoint_id, '00000000-0000-0000-0000-000000000000'), step
		FROM pgcheckpoint.checkpoints WHERE thread_id = $1`, thread)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[uuid.UUID]row{}
	steps := map[int64]bool{}
	for rows.Next() {
		var id uuid.UUID
		var r row
		if err := rows.Scan(&id, &r.parent, &r.step); err != nil {
			t.Fatal(err)
		}
		byID[id] = r
		steps[r.step] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(byID) != want || len(steps) != want {
		t.Fatalf("%d checkpoints with %d distinct steps, want %d of each", len(byID), len(steps), want)
	}
	var head uuid.UUID
	var headStep int64
	if err := pool.QueryRow(ctx, `SELECT c.checkpoint_id, c.step FROM pgcheckpoint.checkpoints c
		WHERE c.thread_id = $1 AND c.namespace = '' AND c.checkpoint_id = pgcheckpoint.head($1)`, thread).Scan(&head, &headStep); err != nil {
		t.Fatal(err)
	}
	if headStep != int64(want) {
		t.Fatalf("head step %d, want %d", headStep, want)
	}
	walked := 0
	for id := head; id != uuid.Nil; walked++ {
		r, ok := byID[id]
		if !ok {
			t.Fatalf("chain broken: %s is missing after %d links", id, walked)
		}
		if r.step != int64(want-walked) {
			t.Fatalf("checkpoint %s has step %d, want %d", id, r.step, want-walked)
		}
		id = r.parent
	}
	if walked != want {
		t.Fatalf("chain from head has %d links, want %d", walked, want)
	}
}

// TestConcurrentWritersOneThread runs 16 goroutines x 50 snapshots on one
// thread through each pipelined insert: the delta one (every write a delta
// candidate) and the whole one (the default for small snapshots, which the
// writer processes below use too).
func TestConcurrentWritersOneThread(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const writers, each = 16, 50
	for _, thread := range []string{"deltas", "whole"} {
		eng := engine.New(b.db.Pool, deltas)
		if thread == "whole" {
			eng = engine.New(b.db.Pool, engine.Config{})
		}
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					state := json.RawMessage(fmt.Sprintf(`{"w": %d, "i": %d}`, w, i))
					if _, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread, State: state}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		checkLinearThread(t, b.db.Pool, thread, writers*each)
	}
}

func TestConcurrentWriterProcessesOneThread(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const procs, each = 4, 50 // each process runs 4 goroutines
	var cmds []*exec.Cmd
	for range procs {
		cmd := helperCommand(t, b.db.URL, "shared", each)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer process: %v", err)
		}
	}
	checkLinearThread(t, b.db.Pool, "shared", procs*4*each)
}

// A writer process killed (SIGKILL) while writing leaves whole checkpoints
// only: the chain from the head is unbroken and the head's step matches.
func TestKilledWriterProcessLeavesWholeCheckpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd := helperCommand(t, b.db.URL, "crashy", -1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int64
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n >= 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writer wrote only %d checkpoints in 20s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	// Wait for the dead process's connections to end: a backend finishes
	// (and commits) what it was sent before it reads the end of the
	// connection and exits.
	for range 100 {
		var backends int32
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND backend_type = 'client backend'`).Scan(&backends); err != nil {
			t.Fatal(err)
		}
		if backends <= b.db.Pool.Stat().TotalConns() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints WHERE thread_id = 'crashy'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	checkLinearThread(t, b.db.Pool, "crashy", n)
	// And the thread takes new writes where it left off.
	res := b.snap(t, engine.SnapshotInput{ThreadID: "crashy"})
	if res.Step != int64(n+1) {
		t.Fatalf("next step %d, want %d", res.Step, n+1)
	}
}

// A connection killed after checkpoint_put ran but before its transaction
// committed leaves nothing: no checkpoint, no thread row, no moved head.
func TestKilledTransactionWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.snap(t, engine.SnapshotInput{ThreadID: "t"})

	conn, err := b.db.Pool.Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid int32
	if err := conn.QueryRow(b.ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, thread := range []string{"t", "new-thread"} {
		if _, err := tx.Exec(b.ctx, `SELECT * FROM pgcheckpoint.checkpoint_put($1, '', $2, NULL, 'manual', '{}', '', '{}', '[]', '{"half": true}', '{}', '', 0)`,
			thread, engine.NewCheckpointID()); err != nil {
			t.Fatal(err)
		}
	}
	var inside int64
	if err := tx.QueryRow(b.ctx, "SELECT count(*) FROM pgcheckpoint.checkpoints").Scan(&inside); err != nil || inside != 3 {
		t.Fatalf("inside the transaction: %d %v", inside, err)
	}
	var killed bool
	if err := b.db.Pool.QueryRow(b.ctx, "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate: %v %v", killed, err)
	}
	if got := b.count(t); got != [3]int64{1, 1, 0} {
		t.Fatalf("rows after the kill (threads, checkpoints, writes) = %v, want only the first checkpoint", got)
	}
	latest, err := b.eng.Latest(b.ctx, "t")
	if err != nil || latest.ID != first.ID {
		t.Fatalf("head moved: %v %v", latest, err)
	}
	conn.Conn().Close(b.ctx)
}

// A writer blocked on the thread lock and killed there writes nothing, and
// the lock holder's write goes through.
func TestWriterKilledWhileWaitingForTheThreadLock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.snap(t, engine.SnapshotInput{ThreadID: "t"})
	holder, err := b.db.Pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(b.ctx)
	if _, err := holder.Exec(b.ctx, `SELECT pgcheckpoint.lock_thread('t')`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"victim": true}`)})
		done <- err
	}()
	var pid int32
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := b.db.Pool.QueryRow(b.ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&pid)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer never waited on the thread lock: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.db.Pool.Exec(b.ctx, "SELECT pg_terminate_backend($1, 5000)", pid); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the killed writer reported success")
	}
	if err := holder.Rollback(b.ctx); err != nil {
		t.Fatal(err)
	}
	checkLinearThread(t, b.db.Pool, "t", 1)
}
