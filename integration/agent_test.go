package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
)

// agentSetup is setup with an engine made from cfg.
func agentSetup(t *testing.T, cfg engine.Config) *bundle {
	t.Helper()
	d := pgtest.NewDB(t)
	return &bundle{db: d, eng: engine.New(d.Pool, cfg), ctx: context.Background()}
}

// lockedBuffer is a log sink for the tests' slog handlers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestDisabledTriggerWritesNothing(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, engine.Config{Triggers: []engine.Trigger{engine.TriggerToolCall}})
	for _, tr := range []engine.Trigger{engine.TriggerLLMCall, engine.TriggerStateChange, engine.TriggerTaskBoundary, engine.TriggerInterval} {
		res, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", Trigger: tr, State: json.RawMessage(`{"a":1}`)})
		if err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		if !res.Skipped || !strings.Contains(res.SkipReason, string(tr)) || !strings.Contains(res.SkipReason, "not enabled") {
			t.Fatalf("%s: result %+v, want Skipped with a reason naming the trigger", tr, res)
		}
		if res.ID != [16]byte{} || res.Created {
			t.Fatalf("%s: a skipped snapshot has id %s, created %v", tr, res.ID, res.Created)
		}
	}
	if got := b.count(t); got != [3]int64{} {
		t.Fatalf("rows after disabled snapshots: %v, want none", got)
	}
	// Bad input is an error even when the trigger is off.
	if _, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", Trigger: engine.TriggerLLMCall, State: json.RawMessage(`[`)}); !errors.Is(err, engine.ErrInvalidJSON) {
		t.Fatalf("bad JSON with a disabled trigger: %v", err)
	}
	// The helpers honour the set too: a scope runs its function and writes
	// nothing; an interval starts no goroutine.
	ran := false
	if err := b.eng.Scope(b.ctx, "t", map[string]int{"x": 1}, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("scope: ran %v, err %v", ran, err)
	}
	iv, err := b.eng.StartInterval(b.ctx, engine.IntervalOptions{ThreadID: "t", Every: time.Millisecond,
		Capture: func(context.Context) (engine.SnapshotInput, error) { return engine.SnapshotInput{}, nil }})
	if err != nil || !iv.Disabled || !strings.Contains(iv.DisabledReason, "interval") {
		t.Fatalf("interval with the trigger off: %+v %v", iv, err)
	}
	_ = iv.Close()
	if got := b.count(t); got != [3]int64{} {
		t.Fatalf("rows after a disabled scope and interval: %v, want none", got)
	}
	// Enabled triggers write; manual always is.
	for _, tr := range []engine.Trigger{engine.TriggerToolCall, engine.TriggerManual, ""} {
		if res := b.snap(t, engine.SnapshotInput{ThreadID: "t", Trigger: tr}); res.Skipped || !res.Created {
			t.Fatalf("%q: %+v", tr, res)
		}
	}
	if b.eng.Enabled(engine.TriggerLLMCall) || !b.eng.Enabled(engine.TriggerManual) {
		t.Fatal("Enabled disagrees with Config.Triggers")
	}
	// The zero Config enables every trigger.
	all := engine.New(b.db.Pool, engine.Config{})
	if res, err := all.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", Trigger: engine.TriggerInterval}); err != nil || res.Skipped {
		t.Fatalf("zero config: %+v %v", res, err)
	}
}

func TestSnapshotSafeCountsAndLogsFailures(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	var hooked atomic.Int64
	var hookErr atomic.Value
	b := agentSetup(t, engine.Config{
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		OnSnapshotFailure: func(_ context.Context, in engine.SnapshotInput, err error) {
			hooked.Add(1)
			hookErr.Store(err)
		},
	})
	res := b.eng.SnapshotSafe(b.ctx, engine.SnapshotInput{ThreadID: "safe", Trigger: engine.TriggerToolCall, State: json.RawMessage(`{"unterminated": `)})
	if !errors.Is(res.Err, engine.ErrInvalidJSON) {
		t.Fatalf("SafeResult.Err = %v, want ErrInvalidJSON", res.Err)
	}
	if n := b.eng.SnapshotFailures(); n != 1 {
		t.Fatalf("failures = %d, want 1", n)
	}
	if hooked.Load() != 1 || !errors.Is(hookErr.Load().(error), engine.ErrInvalidJSON) {
		t.Fatalf("hook called %d times with %v", hooked.Load(), hookErr.Load())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(logs.String(), "\n", 2)[0]), &rec); err != nil {
		t.Fatalf("log line %q: %v", logs.String(), err)
	}
	if rec["level"] != "ERROR" || rec["thread_id"] != "safe" || rec["trigger"] != "tool_call" ||
		!strings.Contains(fmt.Sprint(rec["error"]), "state does not parse") || rec["failures"] != float64(1) {
		t.Fatalf("log record %v", rec)
	}
	if got := b.count(t); got != [3]int64{} {
		t.Fatalf("a failed safe snapshot wrote %v", got)
	}

	// A database failure: the pool is closed.
	pool, err := pgxpool.New(b.ctx, b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	closed := engine.New(pool, engine.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if r := closed.SnapshotSafe(b.ctx, engine.SnapshotInput{ThreadID: "safe"}); r.Err == nil || closed.SnapshotFailures() != 1 {
		t.Fatalf("closed pool: err %v, failures %d", r.Err, closed.SnapshotFailures())
	}
	if !strings.Contains(logs.String(), "closed pool") {
		t.Fatalf("the database failure was not logged:\n%s", logs.String())
	}

	// Success is not counted.
	if r := b.eng.SnapshotSafe(b.ctx, engine.SnapshotInput{ThreadID: "safe"}); r.Err != nil || !r.Created || b.eng.SnapshotFailures() != 1 {
		t.Fatalf("good snapshot: %+v, failures %d", r, b.eng.SnapshotFailures())
	}
}

type flightQuery struct {
	From, To string
}

type flightList struct {
	Flights []string `json:"flights"`
	Note    string   `json:"note"`
}

// content decodes a checkpoint's messages, state and tool results.
func content(t *testing.T, cp *engine.Checkpoint) (msgs []map[string]any, state, tools map[string]any) {
	t.Helper()
	if err := json.Unmarshal(cp.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(cp.State, &state); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(cp.ToolResults, &tools); err != nil {
		t.Fatal(err)
	}
	return msgs, state, tools
}

func TestWrapToolSnapshotsBeforeAndAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.snap(t, engine.SnapshotInput{ThreadID: "run", Trigger: engine.TriggerLLMCall,
		Messages: json.RawMessage(`[{"role":"user","content":"fly me to Lisbon"}]`), State: json.RawMessage(`{"plan":["search"]}`)})

	// A result far over 1,000 characters, with a NUL in it: stored whole.
	long := strings.Repeat("TP1234 ", 2000) + "\x00end"
	search := engine.WrapTool(b.eng, "run", "search", func(_ context.Context, q flightQuery) (flightList, error) {
		return flightList{Flights: []string{"TP1", "FR2"}, Note: long}, nil
	})
	got, err := search(b.ctx, flightQuery{From: "BER", To: "LIS"})
	if err != nil || len(got.Flights) != 2 {
		t.Fatalf("wrapped tool returned %v, %v", got, err)
	}
	page, err := b.eng.ListCheckpoints(b.ctx, "run", engine.ListOptions{})
	if err != nil || len(page) != 3 {
		t.Fatalf("%d checkpoints (%v), want the first + before + after", len(page), err)
	}
	before, after := page[1], page[0]
	if before.Trigger != engine.TriggerToolCall || after.Trigger != engine.TriggerToolCall ||
		before.Step != 2 || after.Step != 3 || before.NextNode != "search" {
		t.Fatalf("before %+v after %+v", before, after)
	}
	head, err := b.eng.Get(b.ctx, after.ID)
	if err != nil {
		t.Fatal(err)
	}
	msgs, state, tools := content(t, head)
	if len(msgs) != 3 || msgs[0]["content"] != "fly me to Lisbon" || msgs[1]["role"] != "tool_call" || msgs[2]["role"] != "tool" {
		t.Fatalf("messages %v", msgs)
	}
	if args := msgs[1]["args"].(map[string]any); args["From"] != "BER" || args["To"] != "LIS" {
		t.Fatalf("call args %v", args)
	}
	if fmt.Sprint(state["plan"]) != "[search]" {
		t.Fatalf("state not carried forward: %v", state)
	}
	res := tools["search"].(map[string]any)
	if res["note"] != long || msgs[2]["content"].(map[string]any)["note"] != long {
		t.Fatalf("the tool result was not stored whole (%d characters)", len(fmt.Sprint(res["note"])))
	}

	// A failing tool: its error is returned unchanged and recorded.
	errNoSeats := errors.New("no seats left")
	book := engine.WrapTool(b.eng, "run", "book", func(context.Context, string) (string, error) { return "", errNoSeats })
	if _, err := book(b.ctx, "TP1"); !errors.Is(err, errNoSeats) {
		t.Fatalf("wrapped error: %v", err)
	}
	head, err = b.eng.Latest(b.ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, tools = content(t, head)
	if head.Step != 5 || !strings.Contains(head.Summary, "no seats left") || !slicesContain(head.Tags, "error") ||
		msgs[len(msgs)-1]["error"] != "no seats left" || tools["book"].(map[string]any)["error"] != "no seats left" ||
		tools["search"] == nil || !bytes.Contains(head.Metadata, []byte(`"ok": false`)) {
		t.Fatalf("error checkpoint: step %d summary %q tags %v metadata %s tools %v", head.Step, head.Summary, head.Tags, head.Metadata, tools)
	}

	// A panicking tool: recorded, then re-raised.
	boom := engine.WrapTool(b.eng, "run", "boom", func(context.Context, int) (int, error) { panic("kaboom") })
	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Fatalf("recovered %v, want the tool's panic", p)
			}
		}()
		_, _ = boom(b.ctx, 1)
		t.Fatal("the panic did not propagate")
	}()
	head, err = b.eng.Latest(b.ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	if head.Step != 7 || !strings.Contains(head.Summary, "panic: kaboom") {
		t.Fatalf("panic checkpoint: step %d summary %q", head.Step, head.Summary)
	}
	if b.eng.SnapshotFailures() != 0 {
		t.Fatalf("%d snapshot failures", b.eng.SnapshotFailures())
	}
}

func slicesContain(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestScopeSnapshotsOnEnterAndExit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type progress struct {
		Done []string `json:"done"`
	}
	st := &progress{}

	// Success: the exit checkpoint holds the state as fn left it.
	err := b.eng.Scope(b.ctx, "job", st, func(ctx context.Context) error {
		st.Done = append(st.Done, "fetch")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	enter, exit := lastTwo(t, b, "job")
	if enter.Trigger != engine.TriggerTaskBoundary || string(enter.State) != `{"done": null}` ||
		string(exit.State) != `{"done": ["fetch"]}` || !bytes.Contains(exit.Metadata, []byte(`"outcome": "ok"`)) {
		t.Fatalf("ok scope: enter %s %s, exit %s %s", enter.Trigger, enter.State, exit.State, exit.Metadata)
	}

	// An error is returned unchanged and recorded.
	errDown := errors.New("upstream down")
	if err := b.eng.Scope(b.ctx, "job", st, func(context.Context) error { return fmt.Errorf("fetch: %w", errDown) }); !errors.Is(err, errDown) {
		t.Fatalf("scope error: %v", err)
	}
	_, exit = lastTwo(t, b, "job")
	if !bytes.Contains(exit.Metadata, []byte(`"outcome": "error"`)) || !bytes.Contains(exit.Metadata, []byte("fetch: upstream down")) ||
		!strings.Contains(exit.Summary, "upstream down") {
		t.Fatalf("error scope exit: %s %q", exit.Metadata, exit.Summary)
	}

	// A panic is recorded and re-raised.
	func() {
		defer func() {
			if p := recover(); p != "scope panic" {
				t.Fatalf("recovered %v", p)
			}
		}()
		_ = b.eng.Scope(b.ctx, "job", nil, func(context.Context) error { panic("scope panic") })
	}()
	enter, exit = lastTwo(t, b, "job")
	if !bytes.Contains(exit.Metadata, []byte(`"outcome": "panic"`)) || !bytes.Contains(exit.Metadata, []byte("scope panic")) {
		t.Fatalf("panic scope exit: %s", exit.Metadata)
	}
	// A nil state carries the head's forward.
	if string(enter.State) != `{"done": ["fetch"]}` || string(exit.State) != `{"done": ["fetch"]}` {
		t.Fatalf("nil state: enter %s exit %s", enter.State, exit.State)
	}

	// A cancelled context still gets its exit checkpoint.
	ctx, cancel := context.WithCancel(b.ctx)
	_ = b.eng.Scope(ctx, "job", st, func(ctx context.Context) error { cancel(); return ctx.Err() })
	_, exit = lastTwo(t, b, "job")
	if !bytes.Contains(exit.Metadata, []byte("context canceled")) {
		t.Fatalf("cancelled scope exit: %s", exit.Metadata)
	}
	if n, _ := b.eng.ListCheckpoints(b.ctx, "job", engine.ListOptions{}); len(n) != 8 {
		t.Fatalf("%d checkpoints, want 2 per scope", len(n))
	}
}

// lastTwo returns the two newest checkpoints of a thread, oldest first.
func lastTwo(t *testing.T, b *bundle, thread string) (*engine.Checkpoint, *engine.Checkpoint) {
	t.Helper()
	page, err := b.eng.ListCheckpoints(b.ctx, thread, engine.ListOptions{Limit: 2})
	if err != nil || len(page) != 2 {
		t.Fatalf("list: %d %v", len(page), err)
	}
	var out [2]*engine.Checkpoint
	for i, c := range page {
		cp, err := b.eng.Get(b.ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[1-i] = cp
	}
	return out[0], out[1]
}

// intervalGoroutines counts goroutines running an interval snapshotter.
func intervalGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "engine.(*Interval).loop")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Not parallel: it counts goroutines of the whole test binary.
func TestIntervalSnapshotterLeavesNoGoroutine(t *testing.T) {
	b := setup(t)
	if n := intervalGoroutines(); n != 0 {
		t.Fatalf("%d interval goroutines before the test", n)
	}
	var tick atomic.Int64
	capture := func(context.Context) (engine.SnapshotInput, error) {
		return engine.SnapshotInput{State: json.RawMessage(fmt.Sprintf(`{"tick": %d}`, tick.Add(1)))}, nil
	}
	iv, err := b.eng.StartInterval(b.ctx, engine.IntervalOptions{ThreadID: "iv", Every: 5 * time.Millisecond, Capture: capture})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 interval snapshots", func() bool { return iv.Written() >= 3 })
	if n := intervalGoroutines(); n != 1 {
		t.Fatalf("%d interval goroutines while running, want 1", n)
	}
	if err := iv.Close(); err != nil {
		t.Fatal(err)
	}
	if n := intervalGoroutines(); n != 0 {
		t.Fatalf("%d interval goroutines after Close", n)
	}
	_ = iv.Close() // twice is fine
	written := iv.Written()
	time.Sleep(30 * time.Millisecond)
	page, err := b.eng.ListCheckpoints(b.ctx, "iv", engine.ListOptions{})
	if err != nil || int64(len(page)) != written || iv.Written() != written {
		t.Fatalf("%d checkpoints (%v), %d written at Close, %d now", len(page), err, written, iv.Written())
	}
	for _, c := range page {
		if c.Trigger != engine.TriggerInterval {
			t.Fatalf("trigger %s", c.Trigger)
		}
	}

	// Cancelling the context stops it too; unchanged content is not
	// written again; failures are counted, not fatal.
	ctx, cancel := context.WithCancel(b.ctx)
	var calls atomic.Int64
	iv, err = b.eng.StartInterval(ctx, engine.IntervalOptions{ThreadID: "iv2", Every: 2 * time.Millisecond,
		Capture: func(context.Context) (engine.SnapshotInput, error) {
			if calls.Add(1) == 3 {
				return engine.SnapshotInput{}, errors.New("capture failed")
			}
			return engine.SnapshotInput{State: json.RawMessage(`{"same": true}`)}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "10 ticks", func() bool { return calls.Load() >= 10 })
	cancel()
	select {
	case <-iv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the snapshotter did not stop when its context ended")
	}
	if n := intervalGoroutines(); n != 0 {
		t.Fatalf("%d interval goroutines after cancel", n)
	}
	if iv.Written() != 1 || b.eng.SnapshotFailures() != 1 {
		t.Fatalf("written %d (want 1: the rest were unchanged), failures %d (want 1)", iv.Written(), b.eng.SnapshotFailures())
	}

	// Bad options are typed errors and start nothing.
	for _, o := range []engine.IntervalOptions{
		{ThreadID: "", Every: time.Second, Capture: capture},
		{ThreadID: "x", Every: 0, Capture: capture},
		{ThreadID: "x", Every: time.Second},
	} {
		if _, err := b.eng.StartInterval(b.ctx, o); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("%+v: %v", o, err)
		}
	}
	if n := intervalGoroutines(); n != 0 {
		t.Fatalf("%d interval goroutines after bad options", n)
	}
}
