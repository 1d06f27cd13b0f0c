package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

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

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// content decodes a checkpoint's messages, state, tool results and
// metadata.
func content(t *testing.T, cp *engine.Checkpoint) (msgs []map[string]any, state, tools, meta map[string]any) {
	t.Helper()
	for _, f := range []struct {
		raw json.RawMessage
		v   any
	}{{cp.Messages, &msgs}, {cp.State, &state}, {cp.ToolResults, &tools}, {cp.Metadata, &meta}} {
		if err := json.Unmarshal(f.raw, f.v); err != nil {
			t.Fatalf("checkpoint %s: %s: %v", cp.ID, f.raw, err)
		}
	}
	return msgs, state, tools, meta
}

func testDisabledTrigger(t *testing.T, e *env) {
	eng := e.open(engine.Config{Triggers: []engine.Trigger{engine.TriggerToolCall}})
	for _, tr := range []engine.Trigger{engine.TriggerLLMCall, engine.TriggerStateChange, engine.TriggerTaskBoundary, engine.TriggerInterval} {
		res, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", Trigger: tr, State: json.RawMessage(`{"a":1}`)})
		if err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		if !res.Skipped || !strings.Contains(res.SkipReason, string(tr)) || !strings.Contains(res.SkipReason, "not enabled") {
			t.Fatalf("%s: result %+v, want Skipped with a reason naming the trigger", tr, res)
		}
		if res.ID != uuid.Nil || res.Created || res.ThreadID != "t" {
			t.Fatalf("%s: a skipped snapshot has id %s, created %v", tr, res.ID, res.Created)
		}
	}
	if got := e.inventory("t").counts(); got != [3]int{} {
		t.Fatalf("rows after disabled snapshots: %v, want none", got)
	}
	// Bad input is an error even when the trigger is off.
	if _, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", Trigger: engine.TriggerLLMCall, State: json.RawMessage(`[`)}); !errors.Is(err, engine.ErrInvalidJSON) {
		t.Fatalf("bad JSON with a disabled trigger: %v", err)
	}
	// The helpers honour the set too: a scope runs its function and writes
	// nothing; an interval starts no goroutine; SnapshotSafe skips.
	ran := false
	if err := eng.Scope(e.ctx, "t", map[string]int{"x": 1}, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("scope: ran %v, err %v", ran, err)
	}
	iv, err := eng.StartInterval(e.ctx, engine.IntervalOptions{ThreadID: "t", Every: time.Millisecond,
		Capture: func(context.Context) (engine.SnapshotInput, error) { return engine.SnapshotInput{}, nil }})
	if err != nil || !iv.Disabled || !strings.Contains(iv.DisabledReason, "interval") {
		t.Fatalf("interval with the trigger off: %+v %v", iv, err)
	}
	_ = iv.Close()
	<-iv.Done()
	if r := eng.SnapshotSafe(e.ctx, engine.SnapshotInput{ThreadID: "t", Trigger: engine.TriggerLLMCall}); r.Err != nil || !r.Skipped {
		t.Fatalf("safe snapshot with the trigger off: %+v", r)
	}
	noTools := e.open(engine.Config{Triggers: []engine.Trigger{engine.TriggerLLMCall}})
	double := engine.WrapTool(noTools, "t", "double", func(_ context.Context, n int) (int, error) { return 2 * n, nil })
	if got, err := double(e.ctx, 21); err != nil || got != 42 {
		t.Fatalf("wrapped tool with its trigger off: %d %v", got, err)
	}
	if got := e.inventory("t").counts(); got != [3]int{} || eng.SnapshotFailures() != 0 || noTools.SnapshotFailures() != 0 {
		t.Fatalf("rows after disabled helpers: %v, want none", got)
	}
	// Enabled triggers write; manual always is.
	for _, tr := range []engine.Trigger{engine.TriggerToolCall, engine.TriggerManual, ""} {
		if res := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "t", Trigger: tr}); res.Skipped || !res.Created {
			t.Fatalf("%q: %+v", tr, res)
		}
	}
	if eng.Enabled(engine.TriggerLLMCall) || !eng.Enabled(engine.TriggerManual) || !eng.Enabled("") || !eng.Enabled(engine.TriggerToolCall) {
		t.Fatal("Enabled disagrees with Config.Triggers")
	}
	// The zero Config enables every trigger.
	if res, err := e.eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", Trigger: engine.TriggerInterval}); err != nil || res.Skipped {
		t.Fatalf("zero config: %+v %v", res, err)
	}
	if got := listAll(t, e.ctx, e.eng, "t", ""); len(got) != 4 {
		t.Fatalf("%d checkpoints, want 4", len(got))
	}
}

func testSnapshotSafe(t *testing.T, e *env) {
	var logs lockedBuffer
	var hooked atomic.Int64
	var hookErr atomic.Value
	eng := e.open(engine.Config{
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		OnSnapshotFailure: func(_ context.Context, in engine.SnapshotInput, err error) {
			hooked.Add(1)
			hookErr.Store(err)
		},
	})
	res := eng.SnapshotSafe(e.ctx, engine.SnapshotInput{ThreadID: "safe", Trigger: engine.TriggerToolCall, State: json.RawMessage(`{"unterminated": `)})
	if !errors.Is(res.Err, engine.ErrInvalidJSON) || res.ThreadID != "safe" || res.Created {
		t.Fatalf("SafeResult = %+v, want Err ErrInvalidJSON", res)
	}
	if n := eng.SnapshotFailures(); n != 1 {
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
	if got := e.inventory("safe").counts(); got != [3]int{} {
		t.Fatalf("a failed safe snapshot wrote %v", got)
	}
	// Store failures count too: an unknown parent, and an engine whose store
	// is closed.
	if r := eng.SnapshotSafe(e.ctx, engine.SnapshotInput{ThreadID: "safe", ParentID: engine.NewCheckpointID()}); !errors.Is(r.Err, engine.ErrNotFound) || eng.SnapshotFailures() != 2 {
		t.Fatalf("unknown parent: %+v, failures %d", r, eng.SnapshotFailures())
	}
	closedLogs := lockedBuffer{}
	closed := openURL(t, e.url, pgcheckpoint.Options{Config: engine.Config{Logger: slog.New(slog.NewTextHandler(&closedLogs, nil))}})
	_ = closed.Close()
	r := closed.SnapshotSafe(e.ctx, engine.SnapshotInput{ThreadID: "closed"})
	if r.Err == nil || closed.SnapshotFailures() != 1 {
		t.Fatalf("closed store: err %v, failures %d", r.Err, closed.SnapshotFailures())
	}
	// The record names the trigger used: manual when the input gave none.
	if !strings.Contains(closedLogs.String(), "snapshot failed") || !strings.Contains(closedLogs.String(), "thread_id=closed") ||
		!strings.Contains(closedLogs.String(), "trigger=manual") {
		t.Fatalf("the store failure was not logged:\n%s", closedLogs.String())
	}
	// Success is not counted.
	if r := eng.SnapshotSafe(e.ctx, engine.SnapshotInput{ThreadID: "safe"}); r.Err != nil || !r.Created || eng.SnapshotFailures() != 2 || hooked.Load() != 2 {
		t.Fatalf("good snapshot: %+v, failures %d", r, eng.SnapshotFailures())
	}
	// The count is the operator's, every tenant's together; each failure's
	// log line names its tenant.
	acme, err := eng.ForTenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if r := acme.SnapshotSafe(e.ctx, engine.SnapshotInput{ThreadID: "safe", State: json.RawMessage(`{`)}); r.Err == nil ||
		acme.SnapshotFailures() != 3 || eng.SnapshotFailures() != 3 {
		t.Fatalf("a tenant's failure: %v, counted %d and %d, want 3 by both", r.Err, acme.SnapshotFailures(), eng.SnapshotFailures())
	}
	if err := json.Unmarshal([]byte(strings.SplitN(logs.String(), "\n", 2)[0]), &rec); err != nil || rec["tenant"] != "acme" {
		t.Fatalf("a tenant's failure logged as %v (%v), want tenant acme", rec, err)
	}
	// Agent text reaches the log line escaped: the JSON handler escapes C0
	// but passes C1, DEL and bidi overrides, which a terminal showing the
	// log acts on.
	logs.Reset()
	hostile := "t\x1b]0;owned\a\u0085\u202e\x7f"
	r = eng.SnapshotSafe(e.ctx, engine.SnapshotInput{ThreadID: hostile, Namespace: hostile, Trigger: engine.Trigger(hostile)})
	if r.Err == nil {
		t.Fatal("a snapshot with an unknown trigger succeeded")
	}
	if c := termsafe.First(logs.String()); c >= 0 {
		t.Fatalf("the log line holds %U: %q", c, logs.String())
	}
	rec = nil
	if err := json.Unmarshal([]byte(strings.TrimSpace(logs.String())), &rec); err != nil {
		t.Fatalf("log line %q: %v", logs.String(), err)
	}
	if want := termsafe.Text(hostile); rec["thread_id"] != want || rec["namespace"] != want || rec["trigger"] != want {
		t.Fatalf("log record %v, want each name as %q", rec, want)
	}
}

type flightQuery struct {
	From, To string
}

type flightList struct {
	Flights []string `json:"flights"`
	Note    string   `json:"note"`
}

func testWrapTool(t *testing.T, e *env) {
	e.snap(engine.SnapshotInput{ThreadID: "run", Trigger: engine.TriggerLLMCall,
		Messages: json.RawMessage(`[{"role":"user","content":"fly me to Lisbon"}]`), State: json.RawMessage(`{"plan":["search"]}`)})

	// A result far over 1,000 characters, with a NUL in it: stored whole.
	long := strings.Repeat("TP1234 ", 2000) + "\x00end"
	search := engine.WrapTool(e.eng, "run", "search", func(_ context.Context, q flightQuery) (flightList, error) {
		return flightList{Flights: []string{"TP1", "FR2"}, Note: long}, nil
	})
	got, err := search(e.ctx, flightQuery{From: "BER", To: "LIS"})
	if err != nil || len(got.Flights) != 2 {
		t.Fatalf("wrapped tool returned %v, %v", got, err)
	}
	page, err := e.eng.ListCheckpoints(e.ctx, "run", engine.ListOptions{})
	if err != nil || len(page) != 3 {
		t.Fatalf("%d checkpoints (%v), want the first + before + after", len(page), err)
	}
	before, after := page[1], page[0]
	if before.Trigger != engine.TriggerToolCall || after.Trigger != engine.TriggerToolCall ||
		before.Step != 2 || after.Step != 3 || before.NextNode != "search" || !slices.Contains(before.Tags, "before") ||
		!slices.Contains(after.Tags, "tool:search") || after.ParentID != before.ID {
		t.Fatalf("before %+v after %+v", before, after)
	}
	msgs, state, tools, meta := content(t, e.get(after.ID))
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
	if meta["tool"] != "search" || meta["phase"] != "after" || meta["ok"] != true {
		t.Fatalf("metadata %v", meta)
	}

	// A failing tool: its error is returned unchanged and recorded.
	errNoSeats := errors.New("no seats left")
	book := engine.WrapTool(e.eng, "run", "book", func(context.Context, string) (string, error) { return "", errNoSeats })
	if _, err := book(e.ctx, "TP1"); !errors.Is(err, errNoSeats) {
		t.Fatalf("wrapped error: %v", err)
	}
	head := e.head("run")
	msgs, _, tools, meta = content(t, head)
	if head.Step != 5 || !strings.Contains(head.Summary, "no seats left") || !slices.Contains(head.Tags, "error") ||
		msgs[len(msgs)-1]["error"] != "no seats left" || tools["book"].(map[string]any)["error"] != "no seats left" ||
		tools["search"] == nil || meta["ok"] != false {
		t.Fatalf("error checkpoint: step %d summary %q tags %v metadata %s tools %v", head.Step, head.Summary, head.Tags, head.Metadata, tools)
	}

	// A panicking tool: recorded, then re-raised from where it began (its
	// trace shows the tool's frame).
	boom := engine.WrapTool(e.eng, "run", "boom", explode)
	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Fatalf("recovered %v, want the tool's panic", p)
			}
			if stack := string(debug.Stack()); !strings.Contains(stack, "enginetest.explode") {
				t.Errorf("the tool's panic does not show where it began:\n%s", stack)
			}
		}()
		_, _ = boom(e.ctx, 1)
		t.Fatal("the panic did not propagate")
	}()
	head = e.head("run")
	if head.Step != 7 || !strings.Contains(head.Summary, "panic: kaboom") {
		t.Fatalf("panic checkpoint: step %d summary %q", head.Step, head.Summary)
	}
	// A tool that succeeds while its context is cancelled (a booking made
	// as the user gave up): its result is recorded (it was not written).
	ctx, cancel := context.WithCancel(e.ctx)
	booked := engine.WrapTool(e.eng, "run", "book", func(context.Context, string) (string, error) { cancel(); return "PNR42", nil })
	if out, err := booked(ctx, "TP1"); err != nil || out != "PNR42" {
		t.Fatalf("a tool cancelled as it succeeded: %q, %v", out, err)
	}
	if _, _, tools, _ = content(t, e.head("run")); e.head("run").Step != 9 || tools["book"] != "PNR42" {
		t.Fatalf("a tool cancelled as it succeeded: head at step %d, tool results %v; want step 9 holding its result", e.head("run").Step, tools)
	}
	// A tool that ends its goroutine (runtime.Goexit, as t.FailNow does):
	// recorded, and the goroutine exits, where a panic of nil crashed it.
	exited := engine.WrapTool(e.eng, "run", "quit", func(context.Context, int) (int, error) { runtime.Goexit(); return 0, nil })
	if p := goexitOf(func() { _, _ = exited(e.ctx, 1) }); p != nil {
		t.Fatalf("a tool that called runtime.Goexit: the goroutine ended with %v, want a quiet exit", p)
	}
	if head := e.head("run"); head.Step != 11 || !strings.Contains(head.Summary, "runtime.Goexit") {
		t.Fatalf("a tool that called runtime.Goexit: head at step %d, %q", head.Step, head.Summary)
	}
	// A wrapped tool on a new thread starts it.
	fresh := engine.WrapTool(e.eng, "fresh", "echo", func(_ context.Context, s string) (string, error) { return s, nil })
	if out, err := fresh(e.ctx, "hi\x00"); err != nil || out != "hi\x00" {
		t.Fatalf("fresh: %q %v", out, err)
	}
	msgs, _, tools, _ = content(t, e.head("fresh"))
	if len(msgs) != 2 || tools["echo"] != "hi\x00" || e.head("fresh").Step != 2 {
		t.Fatalf("fresh thread: messages %v tools %v", msgs, tools)
	}
	if e.eng.SnapshotFailures() != 0 {
		t.Fatalf("%d snapshot failures", e.eng.SnapshotFailures())
	}
}

func testScope(t *testing.T, e *env) {
	type progress struct {
		Done []string `json:"done"`
	}
	st := &progress{}

	// Success: the exit checkpoint holds the state as fn left it.
	err := e.eng.Scope(e.ctx, "job", st, func(ctx context.Context) error {
		st.Done = append(st.Done, "fetch")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	enter, exit := lastTwo(t, e, "job")
	_, _, _, meta := content(t, exit)
	if enter.Trigger != engine.TriggerTaskBoundary || exit.Trigger != engine.TriggerTaskBoundary || meta["outcome"] != "ok" || meta["scope"] != "exit" {
		t.Fatalf("ok scope: enter %s %s, exit %s %s", enter.Trigger, enter.State, exit.State, exit.Metadata)
	}
	jsonEqual(t, "enter state", enter.State, []byte(`{"done": null}`))
	jsonEqual(t, "exit state", exit.State, []byte(`{"done": ["fetch"]}`))

	// An error is returned unchanged and recorded.
	errDown := errors.New("upstream down")
	if err := e.eng.Scope(e.ctx, "job", st, func(context.Context) error { return fmt.Errorf("fetch: %w", errDown) }); !errors.Is(err, errDown) {
		t.Fatalf("scope error: %v", err)
	}
	_, exit = lastTwo(t, e, "job")
	if _, _, _, meta = content(t, exit); meta["outcome"] != "error" || meta["error"] != "fetch: upstream down" || !strings.Contains(exit.Summary, "upstream down") {
		t.Fatalf("error scope exit: %s %q", exit.Metadata, exit.Summary)
	}

	// A panic is recorded and re-raised.
	func() {
		defer func() {
			if p := recover(); p != "scope panic" {
				t.Fatalf("recovered %v", p)
			}
		}()
		_ = e.eng.Scope(e.ctx, "job", nil, func(context.Context) error { panic("scope panic") })
	}()
	enter, exit = lastTwo(t, e, "job")
	if _, _, _, meta = content(t, exit); meta["outcome"] != "panic" || meta["error"] != "scope panic" {
		t.Fatalf("panic scope exit: %s", exit.Metadata)
	}
	// A nil state carries the head's forward.
	jsonEqual(t, "nil state, enter", enter.State, []byte(`{"done": ["fetch"]}`))
	jsonEqual(t, "nil state, exit", exit.State, []byte(`{"done": ["fetch"]}`))

	// A cancelled context still gets its exit checkpoint.
	ctx, cancel := context.WithCancel(e.ctx)
	_ = e.eng.Scope(ctx, "job", st, func(ctx context.Context) error { cancel(); return ctx.Err() })
	_, exit = lastTwo(t, e, "job")
	if _, _, _, meta = content(t, exit); !strings.Contains(fmt.Sprint(meta["error"]), "context canceled") {
		t.Fatalf("cancelled scope exit: %s", exit.Metadata)
	}
	// A function that ends its goroutine (runtime.Goexit): recorded, and
	// the goroutine exits.
	if p := goexitOf(func() {
		_ = e.eng.Scope(e.ctx, "job", nil, func(context.Context) error { runtime.Goexit(); return nil })
	}); p != nil {
		t.Fatalf("a scope whose function called runtime.Goexit: the goroutine ended with %v, want a quiet exit", p)
	}
	if _, exit = lastTwo(t, e, "job"); !strings.Contains(exit.Summary, "goexit") {
		t.Fatalf("a scope whose function called runtime.Goexit: exit %q", exit.Summary)
	}
	if n := listAll(t, e.ctx, e.eng, "job", ""); len(n) != 10 {
		t.Fatalf("%d checkpoints, want 2 per scope", len(n))
	}
	if e.eng.SnapshotFailures() != 0 {
		t.Fatalf("%d snapshot failures", e.eng.SnapshotFailures())
	}
}

// explode is a tool that panics.
func explode(context.Context, int) (int, error) { panic("kaboom") }

// goexitOf runs f on a goroutine of its own and returns what ended it: nil
// for runtime.Goexit or a return, else the panic's value.
func goexitOf(f func()) (panicked any) {
	done := make(chan any)
	go func() {
		ok := false
		defer func() {
			if !ok {
				done <- recover()
			}
		}()
		f()
		ok = true
		done <- nil
	}()
	return <-done
}

// lastTwo returns the two newest checkpoints of a thread, oldest first.
func lastTwo(t *testing.T, e *env, thread string) (*engine.Checkpoint, *engine.Checkpoint) {
	t.Helper()
	page, err := e.eng.ListCheckpoints(e.ctx, thread, engine.ListOptions{Limit: 2})
	if err != nil || len(page) != 2 {
		t.Fatalf("list: %d %v", len(page), err)
	}
	return e.get(page[1].ID), e.get(page[0].ID)
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

// noIntervalGoroutines waits for every interval snapshotter's goroutine to
// have returned, failing the test if one is still there after waitFor's
// deadline. Close (or Done) reports a goroutine whose work is over, which
// may still be on its way out of loop for a moment (its deferred close of
// done is not its last instruction), so counting at once can see it.
func noIntervalGoroutines(t *testing.T, after string) {
	t.Helper()
	waitFor(t, "no interval goroutine "+after, func() bool { return intervalGoroutines() == 0 })
}

// Not parallel: it counts goroutines of the whole test binary.
func testInterval(t *testing.T, e *env) {
	if n := intervalGoroutines(); n != 0 {
		t.Fatalf("%d interval goroutines before the test", n)
	}
	var tick atomic.Int64
	capture := func(context.Context) (engine.SnapshotInput, error) {
		return engine.SnapshotInput{State: json.RawMessage(fmt.Sprintf(`{"tick": %d}`, tick.Add(1)))}, nil
	}
	iv, err := e.eng.StartInterval(e.ctx, engine.IntervalOptions{ThreadID: "iv", Every: 5 * time.Millisecond, Capture: capture})
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
	noIntervalGoroutines(t, "after Close")
	_ = iv.Close() // twice is fine
	written := iv.Written()
	time.Sleep(30 * time.Millisecond)
	page, err := e.eng.ListCheckpoints(e.ctx, "iv", engine.ListOptions{})
	if err != nil || int64(len(page)) != written || iv.Written() != written {
		t.Fatalf("%d checkpoints (%v), %d written at Close, %d now", len(page), err, written, iv.Written())
	}
	for _, c := range page {
		if c.Trigger != engine.TriggerInterval {
			t.Fatalf("trigger %s", c.Trigger)
		}
		var st struct{ Tick int64 }
		if err := json.Unmarshal(e.get(c.ID).State, &st); err != nil || st.Tick < 1 {
			t.Fatalf("state of an interval checkpoint: tick %d, %v", st.Tick, err)
		}
	}

	// Cancelling the context stops it too; unchanged content is not
	// written again; failures are counted, not fatal.
	ctx, cancel := context.WithCancel(e.ctx)
	var calls atomic.Int64
	iv, err = e.eng.StartInterval(ctx, engine.IntervalOptions{ThreadID: "iv2", Every: 2 * time.Millisecond,
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
	noIntervalGoroutines(t, "after cancel")
	if iv.Written() != 1 || e.eng.SnapshotFailures() != 1 {
		t.Fatalf("written %d (want 1: the rest were unchanged), failures %d (want 1)", iv.Written(), e.eng.SnapshotFailures())
	}
	if got := listAll(t, e.ctx, e.eng, "iv2", ""); len(got) != 1 {
		t.Fatalf("%d checkpoints of unchanged content, want 1", len(got))
	}

	// WriteUnchanged writes at every tick.
	iv, err = e.eng.StartInterval(e.ctx, engine.IntervalOptions{ThreadID: "iv3", Every: 2 * time.Millisecond, WriteUnchanged: true,
		Capture: func(context.Context) (engine.SnapshotInput, error) {
			return engine.SnapshotInput{State: json.RawMessage(`{"same": true}`)}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 unchanged snapshots", func() bool { return iv.Written() >= 3 })
	_ = iv.Close()
	if got := listAll(t, e.ctx, e.eng, "iv3", ""); int64(len(got)) != iv.Written() {
		t.Fatalf("%d checkpoints, %d written", len(got), iv.Written())
	}

	// Bad options are typed errors and start nothing.
	for _, o := range []engine.IntervalOptions{
		{ThreadID: "", Every: time.Second, Capture: capture},
		{ThreadID: "x", Every: 0, Capture: capture},
		{ThreadID: "x", Every: time.Second},
	} {
		if _, err := e.eng.StartInterval(e.ctx, o); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("%+v: %v", o, err)
		}
	}
	noIntervalGoroutines(t, "after bad options")
}

func testResume(t *testing.T, e *env) {
	if _, err := e.eng.Resume(e.ctx, "new"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("resume of a new thread: %v", err)
	}
	if _, err := e.eng.Resume(e.ctx, ""); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("resume of an empty thread id: %v", err)
	}
	first := e.snap(engine.SnapshotInput{ThreadID: "run", State: json.RawMessage(`{"n": 1}`), NextNode: "tasks"})
	if _, err := e.eng.PutWrites(e.ctx, first.ID, "b", []engine.Write{{Channel: "out", Value: json.RawMessage(`"b0"`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.PutWrites(e.ctx, first.ID, "a", []engine.Write{{Channel: "out", Value: json.RawMessage(`"a0"`)}, {Channel: "log", Value: json.RawMessage(`{"x": "\u0000"}`)}}); err != nil {
		t.Fatal(err)
	}
	r, err := e.eng.Resume(e.ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != first.ID || r.NextNode != "tasks" || !r.TaskDone("a") || !r.TaskDone("b") || r.TaskDone("c") || len(r.Done) != 2 ||
		len(r.Done["a"]) != 2 || r.Done["a"][0].Channel != "out" || r.Done["a"][1].Index != 1 {
		t.Fatalf("resume point: %+v", r)
	}
	jsonEqual(t, "task a's first write", r.Done["a"][0].Value, []byte(`"a0"`))
	jsonEqual(t, "task a's second write", r.Done["a"][1].Value, []byte(`{"x": "\u0000"}`))
	jsonEqual(t, "resumed state", r.State, []byte(`{"n": 1}`))
	// The next step's checkpoint has no finished tasks yet.
	second := e.snap(engine.SnapshotInput{ThreadID: "run", State: json.RawMessage(`{"n": 2}`), NextNode: "next"})
	if r, err = e.eng.Resume(e.ctx, "run"); err != nil || r.ID != second.ID || len(r.Done) != 0 || r.TaskDone("a") {
		t.Fatalf("resume after the next step: %+v %v", r, err)
	}
	// After a rewind, the rewound-to checkpoint's tasks are done again.
	if _, err := e.eng.Rewind(e.ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if r, err = e.eng.Resume(e.ctx, "run"); err != nil || r.ID != first.ID || !r.TaskDone("a") || !r.TaskDone("b") {
		t.Fatalf("resume after a rewind: %+v %v", r, err)
	}
}
