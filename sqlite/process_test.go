package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// The process tests run this test binary again as a writer: TestMain
// turns it into one when childEnv is set.
const childEnv = "PGCHECKPOINT_SQLITE_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		if err := child(role, os.Getenv("CHILD_PATH"), os.Getenv("CHILD_THREAD")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// bigContent is what the killed writer writes at a step: big enough that
// a write takes a while, and checkable.
func bigContent(step int64) (json.RawMessage, json.RawMessage) {
	pad := strings.Repeat(strconv.FormatInt(step%10, 10), 256<<10)
	return json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"step %d"}]`, step)),
		json.RawMessage(fmt.Sprintf(`{"step":%d,"pad":"%s"}`, step, pad))
}

func child(role, path, thread string) error {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{Migrate: true})
	if err != nil {
		return err
	}
	eng := engine.NewWithStore(s, engine.Config{})
	defer eng.Close()
	switch role {
	case "writer":
		for i := range 200 {
			if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread,
				State: json.RawMessage(fmt.Sprintf(`{"pid":%d,"i":%d}`, os.Getpid(), i))}); err != nil {
				return err
			}
		}
	case "endless":
		for {
			head, err := eng.Latest(ctx, thread)
			step := int64(1)
			if err == nil {
				step = head.Step + 1
			} else if !errors.Is(err, engine.ErrNotFound) {
				return err
			}
			m, st := bigContent(step)
			if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Messages: m, State: st}); err != nil {
				return err
			}
		}
	}
	return nil
}

func startChild(t *testing.T, role, path, thread string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "CHILD_PATH="+path, "CHILD_THREAD="+thread)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// TestProcesses: 4 processes write 200 checkpoints each on one thread of
// one file, all opening (and migrating) it at once.
func TestProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	var cmds []*exec.Cmd
	for range 4 {
		cmds = append(cmds, startChild(t, "writer", path, "procs"))
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer process: %v", err)
		}
	}
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.NewWithStore(s, engine.Config{})
	defer eng.Close()
	checkChain(t, eng, "procs", 800)
}

// TestKilledWriter: a writer killed with SIGKILL in the middle of its
// writes leaves whole checkpoints only, one chain, and a readable head.
func TestKilledWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "killed.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.NewWithStore(s, engine.Config{})
	defer eng.Close()
	cmd := startChild(t, "endless", path, "killed")
	deadline := time.Now().Add(30 * time.Second)
	for {
		head, err := eng.Latest(ctx, "killed")
		if err == nil && head.Step >= 5 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the writer wrote nothing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Duration(time.Now().UnixNano()%20) * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	head, err := eng.Latest(ctx, "killed")
	if err != nil {
		t.Fatalf("head after the kill: %v", err)
	}
	checkChain(t, eng, "killed", int(head.Step))
	list, _ := eng.ListCheckpoints(ctx, "killed", engine.ListOptions{Limit: engine.MaxListLimit})
	for _, c := range list {
		cp, err := eng.Get(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		m, st := bigContent(cp.Step)
		if string(cp.Messages) != string(m) || string(cp.State) != string(st) {
			t.Fatalf("checkpoint at step %d is not what was written (%d bytes of state)", cp.Step, len(cp.State))
		}
	}
	// The file takes new writes.
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "killed"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed after %d checkpoints", head.Step)
}
