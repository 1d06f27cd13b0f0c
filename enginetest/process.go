package enginetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The suite runs the test binary as a child process (a writer, an agent)
// when these are set; Child reads them.
const (
	envChild   = "PGCHECKPOINT_ENGINETEST_CHILD" // "writer" or "agent"
	envURL     = "PGCHECKPOINT_ENGINETEST_URL"
	envThread  = "PGCHECKPOINT_ENGINETEST_THREAD"
	envCount   = "PGCHECKPOINT_ENGINETEST_COUNT"
	envWorkers = "PGCHECKPOINT_ENGINETEST_WORKERS"
	envConfig  = "PGCHECKPOINT_ENGINETEST_CONFIG" // "deltas" or "default"
)

// Child runs this process as the child process a conformance test started
// (a writer or an agent opening the test's database by URL), when it is
// one, and returns its exit code and true. Otherwise it returns 0 and
// false at once. A TestMain that cannot call Main calls Child first:
//
//	if code, ok := enginetest.Child(); ok {
//		os.Exit(code)
//	}
func Child() (code int, ok bool) {
	mode := os.Getenv(envChild)
	if mode == "" {
		return 0, false
	}
	var err error
	switch mode {
	case "writer":
		err = runWriter()
	case "agent":
		err = runAgent()
	default:
		err = fmt.Errorf("unknown child mode %q", mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "enginetest %s child: %v\n", mode, err)
		return 1, true
	}
	return 0, true
}

// Main is the body of a TestMain for a package that runs the suite: it
// runs the child process a test started (see Child), or else the tests.
//
//	func TestMain(m *testing.M) { os.Exit(enginetest.Main(m)) }
func Main(m *testing.M) int {
	if code, ok := Child(); ok {
		return code
	}
	return m.Run()
}

// childEngine opens the engine of a child process: the database its parent
// migrated, without migrating.
func childEngine(ctx context.Context) (*engine.Engine, error) {
	cfg := engine.Config{}
	if os.Getenv(envConfig) == "deltas" {
		cfg = deltas
	}
	return pgcheckpoint.Open(ctx, os.Getenv(envURL), pgcheckpoint.Options{Config: cfg})
}

// writerContent is what writer child w writes as its i-th snapshot: the
// state repeats the message's text, so a reader can tell a whole
// checkpoint from a torn one.
func writerContent(pid, w, i int) engine.SnapshotInput {
	echo := fmt.Sprintf("%d-%d-%d", pid, w, i)
	return engine.SnapshotInput{
		Messages: mustJSON([]map[string]string{{"role": "user", "content": echo}}),
		State:    mustJSON(map[string]any{"pid": pid, "worker": w, "i": i, "echo": echo}),
	}
}

// checkWriterContent checks a checkpoint written by a writer child.
func checkWriterContent(cp *engine.Checkpoint) error {
	var msgs []struct{ Content string }
	var state struct {
		Echo string `json:"echo"`
		PID  int    `json:"pid"`
	}
	if err := json.Unmarshal(cp.Messages, &msgs); err != nil {
		return fmt.Errorf("messages %s: %w", cp.Messages, err)
	}
	if err := json.Unmarshal(cp.State, &state); err != nil {
		return fmt.Errorf("state %s: %w", cp.State, err)
	}
	if len(msgs) != 1 || state.PID == 0 || msgs[0].Content != state.Echo {
		return fmt.Errorf("torn content: messages %s, state %s", cp.Messages, cp.State)
	}
	return nil
}

// runWriter writes snapshots on one thread from WORKERS goroutines, COUNT
// each (COUNT < 0: until killed), and prints "ok <id>" for each written.
func runWriter() error {
	ctx := context.Background()
	eng, err := childEngine(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	thread := os.Getenv(envThread)
	count, _ := strconv.Atoi(os.Getenv(envCount))
	workers, _ := strconv.Atoi(os.Getenv(envWorkers))
	var out sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := 0; count < 0 || i < count; i++ {
				in := writerContent(os.Getpid(), w, i)
				in.ThreadID = thread
				res, err := eng.Snapshot(ctx, in)
				if err != nil {
					errs <- err
					return
				}
				out.Lock()
				fmt.Fprintf(os.Stdout, "ok %s\n", res.ID)
				out.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(<-errs)
}

// agentTasks are the tasks of the agent child's one step.
var agentTasks = []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"}

// runAgent is a small agent loop: resume the thread (or start it), run
// every task not yet done, recording each result as a pending write, then
// write the step's checkpoint with all results. It prints "run T", "skip
// T" and "finished" lines.
func runAgent() error {
	ctx := context.Background()
	eng, err := childEngine(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	thread := os.Getenv(envThread)
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	r, err := eng.Resume(ctx, thread)
	if errors.Is(err, engine.ErrNotFound) {
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, State: json.RawMessage(`{"plan": "run t1..t8"}`), NextNode: "tasks"}); err != nil {
			return err
		}
		r, err = eng.Resume(ctx, thread)
	}
	if err != nil {
		return err
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
			return err
		}
		results[task] = v
	}
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Trigger: engine.TriggerTaskBoundary,
		State: mustJSON(map[string]any{"results": results}), NextNode: "done"}); err != nil {
		return err
	}
	say("finished")
	return nil
}

// child returns a command that runs the test binary as a child process in
// mode on the test's database, with the given settings. A child still
// running when the test ends is killed.
func (e *env) child(mode string, settings map[string]string) *exec.Cmd {
	e.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+mode, envURL+"="+e.url)
	for k, v := range settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	e.t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// ackLog collects the ids a writer child printed as written.
type ackLog struct {
	mu   sync.Mutex
	ids  []uuid.UUID
	done chan struct{} // closed when the child's output ends
}

// readAcks reads a writer child's "ok <id>" lines until r ends.
func readAcks(r io.Reader) *ackLog {
	a := &ackLog{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			text, ok := strings.CutPrefix(sc.Text(), "ok ")
			if id, err := uuid.Parse(text); ok && err == nil {
				a.mu.Lock()
				a.ids = append(a.ids, id)
				a.mu.Unlock()
			}
		}
	}()
	return a
}

// written returns the ids acknowledged so far.
func (a *ackLog) written() []uuid.UUID {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.ids)
}
