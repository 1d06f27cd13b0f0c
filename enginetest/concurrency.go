package enginetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// 16 goroutines x 50 snapshots on one thread, through an engine storing
// deltas and one storing whole snapshots: 800 checkpoints each time, steps
// 1..800, one unbroken chain, every one whole.
func testConcurrentWritersOneThread(t *testing.T, e *env) {
	const writers, each = 16, 50
	for _, thread := range []string{"deltas", "whole"} {
		eng := e.eng
		if thread == "whole" {
			eng = e.open(engine.Config{})
		}
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					in := writerContent(os.Getpid(), w, i)
					in.ThreadID = thread
					if _, err := eng.Snapshot(e.ctx, in); err != nil {
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
		checkChain(t, e.ctx, eng, thread, writers*each)
	}
	checkWriters(t, e)
}

// checkWriters checks that every checkpoint of the database, all written
// by writerContent, reads back whole.
func checkWriters(t *testing.T, e *env) {
	t.Helper()
	inv := checkReadable(t, e.ctx, e.eng)
	for id := range inv.checkpoints {
		if err := checkWriterContent(e.get(id)); err != nil {
			t.Fatalf("checkpoint %s: %v", id, err)
		}
	}
}

// Writers on distinct threads at once: each thread one chain of its own.
func testConcurrentWritersDistinctThreads(t *testing.T, e *env) {
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	whole := e.open(engine.Config{})
	for w := range writers {
		eng := e.eng
		if w%2 == 1 {
			eng = whole
		}
		wg.Go(func() {
			for i := range each {
				in := writerContent(os.Getpid(), w, i)
				in.ThreadID = fmt.Sprintf("thread-%d", w)
				if _, err := eng.Snapshot(e.ctx, in); err != nil {
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
	for w := range writers {
		byID := checkChain(t, e.ctx, e.eng, fmt.Sprintf("thread-%d", w), each)
		for id := range byID {
			cp := e.get(id)
			var st struct{ Worker int }
			if err := json.Unmarshal(cp.State, &st); err != nil || st.Worker != w {
				t.Fatalf("thread-%d holds a checkpoint of worker %d (%v)", w, st.Worker, err)
			}
		}
	}
	if threads := listThreads(t, e.ctx, e.eng); len(threads) != writers {
		t.Fatalf("%d threads, want %d", len(threads), writers)
	}
	checkWriters(t, e)
}

// 4 processes x 200 snapshots (4 goroutines each) on one thread, two of
// them storing deltas: 800 checkpoints, steps 1..800, one chain.
func testWriterProcesses(t *testing.T, e *env) {
	const procs, workers, each = 4, 4, 50
	var cmds []*exec.Cmd
	for p := range procs {
		cfg := "default"
		if p%2 == 0 {
			cfg = "deltas"
		}
		cmd := e.child("writer", map[string]string{envThread: "shared", envCount: strconv.Itoa(each),
			envWorkers: strconv.Itoa(workers), envConfig: cfg})
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
	checkChain(t, e.ctx, e.eng, "shared", procs*workers*each)
	checkWriters(t, e)
}

// Two writer processes on one thread, each killed (SIGKILL) while writing
// (4 goroutines each, whose writes share transactions where the store
// does), leave whole checkpoints only: every acknowledged write is there,
// every listed checkpoint reads back whole, the chain from the head is
// unbroken, and the thread takes new writes where it left off.
func testKilledWriter(t *testing.T, e *env) {
	for round, cfg := range []string{"deltas", "default"} {
		thread := "crashy-" + cfg
		var cmds []*exec.Cmd
		var logs []*ackLog
		for range 2 {
			cmd := e.child("writer", map[string]string{envThread: thread, envCount: "-1", envWorkers: "4", envConfig: cfg})
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, logs = append(cmds, cmd), append(logs, readAcks(stdout))
		}
		// Each is killed once it has written 50, at a moment of its own
		// (the two wait at once: neither writes on while the other is
		// awaited).
		var wg sync.WaitGroup
		waitErrs := make([]error, len(cmds))
		for i, cmd := range cmds {
			wg.Go(func() {
				for deadline := time.Now().Add(20 * time.Second); len(logs[i].written()) < 50; {
					if time.Now().After(deadline) {
						waitErrs[i] = fmt.Errorf("writer %d: %d acknowledged writes in 20 s", i, len(logs[i].written()))
						break
					}
					time.Sleep(time.Millisecond)
				}
				_ = cmd.Process.Signal(syscall.SIGKILL)
				err := cmd.Wait()
				var exitErr *exec.ExitError
				if waitErrs[i] == nil && (!errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL) {
					waitErrs[i] = fmt.Errorf("writer %d was not killed mid-run: %v", i, err)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(waitErrs...); err != nil {
			t.Fatal(err)
		}
		var acked []uuid.UUID
		for _, log := range logs {
			<-log.done
			acked = append(acked, log.written()...)
		}
		// A server may still finish a write the dead process sent: wait
		// until the count stays put.
		n, stable := -1, 0
		for deadline := time.Now().Add(10 * time.Second); stable < 5 && time.Now().Before(deadline); {
			got := len(listAll(t, e.ctx, e.eng, thread, ""))
			if got == n {
				stable++
			} else {
				n, stable = got, 0
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n < len(acked) {
			t.Fatalf("%d checkpoints listed, %d were acknowledged", n, len(acked))
		}
		byID := checkChain(t, e.ctx, e.eng, thread, n)
		for _, id := range acked {
			if _, ok := byID[id]; !ok {
				t.Fatalf("acknowledged checkpoint %s is missing", id)
			}
		}
		for id := range byID {
			if err := checkWriterContent(e.get(id)); err != nil {
				t.Fatalf("checkpoint %s: %v", id, err)
			}
		}
		head := e.head(thread)
		if err := checkWriterContent(head); err != nil || head.Step != int64(n) {
			t.Fatalf("head: step %d, %v", head.Step, err)
		}
		res := e.snap(engine.SnapshotInput{ThreadID: thread})
		if res.Step != int64(n+1) || res.ParentID != head.ID {
			t.Fatalf("next write after the kill: %+v, want step %d after %s", res, n+1, head.ID)
		}
		t.Logf("round %d: killed after %d acknowledged writes; %d checkpoints", round, len(acked), n)
	}
	checkReadable(t, e.ctx, e.eng)
}

// An agent process is killed (SIGKILL) in the middle of a step; a second
// process resumes the thread, skips exactly the tasks whose results were
// saved as pending writes, runs the rest, and finishes the step.
func testResumeAfterKill(t *testing.T, e *env) {
	first := e.child("agent", map[string]string{envThread: "agent"})
	var firstOut strings.Builder
	first.Stdout = &firstOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 finished tasks", func() bool {
		cp, err := e.eng.Latest(e.ctx, "agent")
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil && len(cp.PendingWrites) >= 3
	})
	_ = first.Process.Signal(syscall.SIGKILL)
	err := first.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the first agent was not killed mid-run: %v\n%s", err, firstOut.String())
	}

	r, err := e.eng.Resume(e.ctx, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if r.Step != 1 || r.NextNode != "tasks" {
		t.Fatalf("after the kill the head is step %d (%s), want the step-1 checkpoint", r.Step, r.NextNode)
	}
	var done, todo []string
	for _, task := range agentTasks {
		if r.TaskDone(task) {
			done = append(done, task)
		} else {
			todo = append(todo, task)
		}
	}
	if len(done) < 3 || len(todo) == 0 {
		t.Fatalf("done %v, to do %v: the kill did not land mid-run", done, todo)
	}

	second := e.child("agent", map[string]string{envThread: "agent"})
	var secondOut strings.Builder
	second.Stdout = &secondOut
	if err := second.Run(); err != nil {
		t.Fatalf("resumed agent: %v\n%s", err, secondOut.String())
	}
	var ran, skipped []string
	for _, line := range strings.Split(strings.TrimSpace(secondOut.String()), "\n") {
		if task, ok := strings.CutPrefix(line, "run "); ok {
			ran = append(ran, task)
		} else if task, ok := strings.CutPrefix(line, "skip "); ok {
			skipped = append(skipped, task)
		}
	}
	if !slices.Equal(ran, todo) || !slices.Equal(skipped, done) || !strings.HasSuffix(secondOut.String(), "finished\n") {
		t.Fatalf("resumed agent ran %v and skipped %v; want ran %v, skipped %v\n%s", ran, skipped, todo, done, secondOut.String())
	}

	head := e.head("agent")
	var st struct {
		Results map[string]struct {
			Task string `json:"task"`
			PID  int    `json:"pid"`
		} `json:"results"`
	}
	if err := json.Unmarshal(head.State, &st); err != nil {
		t.Fatal(err)
	}
	if head.Step != 2 || len(st.Results) != len(agentTasks) || head.NextNode != "done" || len(head.PendingWrites) != 0 {
		t.Fatalf("final head: step %d, %d results, next %q, %d pending writes", head.Step, len(st.Results), head.NextNode, len(head.PendingWrites))
	}
	for _, task := range agentTasks {
		want := second.Process.Pid
		if slices.Contains(done, task) {
			want = first.Process.Pid
		}
		if got := st.Results[task]; got.Task != task || got.PID != want {
			t.Fatalf("result of %s: %+v, want it from pid %d", task, got, want)
		}
	}
	// The step-1 checkpoint keeps the pending writes of both processes.
	if step1 := e.get(r.ID); len(step1.PendingWrites) != len(agentTasks) {
		t.Fatalf("step 1 has %d pending writes, want %d", len(step1.PendingWrites), len(agentTasks))
	}
}

// waitFor polls cond for up to 20 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
