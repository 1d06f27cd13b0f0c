package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The test binary runs itself as an agent process when these are set.
const (
	agentHelperURLEnv    = "PGCHECKPOINT_TEST_AGENT_URL"
	agentHelperThreadEnv = "PGCHECKPOINT_TEST_AGENT_THREAD"
)

var agentTasks = []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"}

// The agent helper is dispatched from init, before TestMain, so it needs no
// change to the package's TestMain.
func init() {
	if os.Getenv(agentHelperURLEnv) != "" {
		os.Exit(runAgentHelper())
	}
}

// runAgentHelper is a small agent loop: resume the thread (or start it),
// run every task not yet done, recording each result as a pending write,
// then write the step's checkpoint with all results. It prints "run T",
// "skip T" and "finished" lines on stdout.
func runAgentHelper() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(agentHelperURLEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	eng := engine.New(pool, engine.Config{})
	thread := os.Getenv(agentHelperThreadEnv)
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	r, err := eng.Resume(ctx, thread)
	if errors.Is(err, engine.ErrNotFound) {
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, State: json.RawMessage(`{"plan": "run t1..t8"}`), NextNode: "tasks"}); err != nil {
			return fail(err)
		}
		r, err = eng.Resume(ctx, thread)
	}
	if err != nil {
		return fail(err)
	}
	results := map[string]json.RawMessage{}
	for _, task := range agentTasks {
		if r.TaskDone(task) {
			results[task] = r.Done[task][0].Value
			say("skip %s", task)
			continue
		}
		say("run %s", task)
		time.Sleep(150 * time.Millisecond) // the work
		v := json.RawMessage(fmt.Sprintf(`{"task": %q, "pid": %d}`, task, os.Getpid()))
		if _, err := eng.PutWrites(ctx, r.ID, task, []engine.Write{{Channel: "result", Value: v}}); err != nil {
			return fail(err)
		}
		results[task] = v
	}
	state, _ := json.Marshal(map[string]any{"results": results})
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Trigger: engine.TriggerTaskBoundary, State: state, NextNode: "done"}); err != nil {
		return fail(err)
	}
	say("finished")
	return 0
}

func agentCommand(url, thread string) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), agentHelperURLEnv+"="+url, agentHelperThreadEnv+"="+thread)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	return cmd, &out
}

// An agent process is killed (SIGKILL) in the middle of a step; a second
// process resumes the thread, skips exactly the tasks whose results were
// saved as pending writes, runs the rest, and finishes the step.
func TestResumeAfterKilledProcessSkipsFinishedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, firstOut := agentCommand(b.db.URL, "agent")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 finished tasks", func() bool {
		var n int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.pending_writes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n >= 3
	})
	_ = first.Process.Signal(syscall.SIGKILL)
	err := first.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the first agent was not killed mid-run: %v\n%s", err, firstOut)
	}

	r, err := b.eng.Resume(b.ctx, "agent")
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

	second, secondOut := agentCommand(b.db.URL, "agent")
	if err := second.Run(); err != nil {
		t.Fatalf("resumed agent: %v\n%s", err, secondOut)
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
		t.Fatalf("resumed agent ran %v and skipped %v; want ran %v, skipped %v\n%s", ran, skipped, todo, done, secondOut)
	}

	head, err := b.eng.Latest(b.ctx, "agent")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Results map[string]struct {
			Task string `json:"task"`
			PID  int    `json:"pid"`
		} `json:"results"`
	}
	if err := json.Unmarshal(head.State, &st); err != nil {
		t.Fatal(err)
	}
	if head.Step != 2 || len(st.Results) != len(agentTasks) {
		t.Fatalf("final head: step %d, %d results", head.Step, len(st.Results))
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
}
