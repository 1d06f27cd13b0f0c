package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// triggerSet is the set of enabled triggers; nil means every trigger.
type triggerSet map[Trigger]bool

func newTriggerSet(ts []Trigger) triggerSet {
	if ts == nil {
		return nil
	}
	set := triggerSet{TriggerManual: true}
	for _, t := range ts {
		set[t] = true
	}
	return set
}

// Enabled reports whether snapshots with trigger t are written (see
// Config.Triggers). An empty trigger means TriggerManual.
func (e *Engine) Enabled(t Trigger) bool {
	return e.enabled == nil || e.enabled[t.orDefault()]
}

// skipDisabled returns the result of a snapshot whose trigger is disabled.
func (e *Engine) skipDisabled(ctx context.Context, in SnapshotInput) (SnapshotResult, bool) {
	if e.Enabled(in.Trigger) {
		return SnapshotResult{}, false
	}
	e.tel.skipped(ctx)
	return SnapshotResult{
		ThreadID:   in.ThreadID,
		Namespace:  in.Namespace,
		Skipped:    true,
		SkipReason: fmt.Sprintf("trigger %s is not enabled (Config.Triggers)", in.Trigger.orDefault()),
	}, true
}

// SafeResult is what SnapshotSafe returns: the snapshot's result, or the
// error that was logged and counted instead of returned.
type SafeResult struct {
	SnapshotResult
	// Err is the failure, already logged and counted; nil on success and
	// when the trigger is disabled (then Skipped is set).
	Err error
}

// SnapshotSafe is Snapshot for code that must not fail because a checkpoint
// could not be written: it never returns an error. Each failure is logged
// (Config.Logger, level error), counted (SnapshotFailures) and passed to
// Config.OnSnapshotFailure, and returned in SafeResult.Err for callers
// that want to look.
func (e *Engine) SnapshotSafe(ctx context.Context, in SnapshotInput) SafeResult {
	res, err := e.Snapshot(ctx, in)
	if err != nil {
		e.snapshotFailed(ctx, in, err)
		return SafeResult{SnapshotResult: SnapshotResult{ThreadID: in.ThreadID, Namespace: in.Namespace}, Err: err}
	}
	return SafeResult{SnapshotResult: res}
}

// SnapshotFailures returns how many snapshots failed in SnapshotSafe (and
// so in WrapTool, Scope and interval snapshots) since the Engine was made.
// The count is the operator's, of the Engine made by New (or Open) and
// of every Engine made from it (ForTenant's, WithTx's) together, whatever
// their tenants; each failure's log line names its tenant.
func (e *Engine) SnapshotFailures() int64 {
	return e.failures.Load()
}

func (e *Engine) snapshotFailed(ctx context.Context, in SnapshotInput, err error) {
	n := e.failures.Add(1)
	e.cfg.Logger.LogAttrs(ctx, slog.LevelError, "pgcheckpoint: snapshot failed; the agent goes on without it",
		slog.String("tenant", termsafe.Text(e.Tenant())),
		slog.String("thread_id", termsafe.Text(in.ThreadID)),
		slog.String("namespace", termsafe.Text(in.Namespace)),
		slog.String("trigger", termsafe.Text(string(in.Trigger.orDefault()))),
		slog.Int64("failures", n),
		slog.Any("error", loggedError{err}))
	if e.cfg.OnSnapshotFailure != nil {
		e.cfg.OnSnapshotFailure(ctx, in, err)
	}
}

// loggedError is an error as a log line shows it: its message through
// termsafe.Text, for an error may quote agent text (a key provider's, a
// driver's); errors.Is and errors.As see the error itself.
type loggedError struct{ err error }

func (e loggedError) Error() string { return termsafe.Text(e.err.Error()) }
func (e loggedError) Unwrap() error { return e.err }

// headEdit describes a checkpoint that extends a thread's head: its messages
// are appended to the head's, its tool results set over the head's, and
// State, when not nil, replaces the head's state.
type headEdit struct {
	trigger     Trigger
	tags        []string
	summary     string
	metadata    map[string]any
	messages    []any
	toolResults map[string]json.RawMessage
	state       json.RawMessage
	nextNode    string
}

// snapshotOnHead writes, as SnapshotSafe does (failures logged and counted,
// never returned as a panic or to the tool), a checkpoint with the content
// of the head of threadID's namespace (none for a new one) changed by ed,
// as a child of that head. An edit that keeps the head's state is an
// Append: it costs what it adds, whatever the conversation's length. One
// that replaces the state, or the first checkpoint of a namespace, reads
// the head and writes the whole. A disabled trigger reads nothing and
// writes nothing.
func (e *Engine) snapshotOnHead(ctx context.Context, threadID, namespace string, ed headEdit) SafeResult {
	in := SnapshotInput{ThreadID: threadID, Namespace: namespace, Trigger: ed.trigger, Tags: ed.tags,
		Summary: cleanSummary(ed.summary), NextNode: ed.nextNode}
	if !e.Enabled(ed.trigger) {
		res, _ := e.skipDisabled(ctx, in)
		return SafeResult{SnapshotResult: res}
	}
	if ed.state == nil {
		change := make([]json.RawMessage, 0, len(ed.messages))
		for _, m := range ed.messages {
			change = append(change, encodeJSON(m))
		}
		in.Messages, _ = json.Marshal(change) // elements are valid JSON
		in.ToolResults = json.RawMessage("{}")
		if ed.toolResults != nil {
			in.ToolResults, _ = json.Marshal(ed.toolResults)
		}
		in.Metadata = encodeJSON(ed.metadata)
		res, err := e.Append(ctx, AppendInput{ThreadID: threadID, Namespace: namespace, Trigger: in.Trigger, Tags: in.Tags,
			Summary: in.Summary, Metadata: in.Metadata, NextNode: in.NextNode, Messages: in.Messages,
			SetToolResults: in.ToolResults})
		switch {
		case err == nil:
			return SafeResult{SnapshotResult: res}
		case !errors.Is(err, ErrNotFound): // not found: the namespace's first checkpoint, written whole below
			e.snapshotFailed(ctx, in, err)
			return SafeResult{SnapshotResult: SnapshotResult{ThreadID: threadID, Namespace: namespace}, Err: err}
		}
	}
	var messages []json.RawMessage
	tools := map[string]json.RawMessage{}
	state := ed.state
	head, err := e.LatestIn(ctx, threadID, namespace)
	switch {
	case err == nil:
		in.ParentID = head.ID
		if err := json.Unmarshal(head.Messages, &messages); err != nil {
			e.snapshotFailed(ctx, in, fmt.Errorf("read the head's messages: %w", err))
			return SafeResult{Err: err}
		}
		if err := json.Unmarshal(head.ToolResults, &tools); err != nil {
			e.snapshotFailed(ctx, in, fmt.Errorf("read the head's tool results: %w", err))
			return SafeResult{Err: err}
		}
		if state == nil {
			state = head.State
		}
	case errors.Is(err, ErrNotFound):
	default:
		e.snapshotFailed(ctx, in, err)
		return SafeResult{SnapshotResult: SnapshotResult{ThreadID: threadID, Namespace: namespace}, Err: err}
	}
	for _, m := range ed.messages {
		messages = append(messages, encodeJSON(m))
	}
	for k, v := range ed.toolResults {
		tools[k] = v
	}
	if messages == nil {
		messages = []json.RawMessage{}
	}
	in.Messages, _ = json.Marshal(messages) // elements are valid JSON
	in.ToolResults, _ = json.Marshal(tools)
	in.State = state
	in.Metadata = encodeJSON(ed.metadata)
	return e.SnapshotSafe(ctx, in)
}

// encodeJSON marshals v; a value that cannot be encoded (a channel, a
// function, a NaN) is recorded as an object saying why, not dropped.
func encodeJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"unencodable": fmt.Sprintf("%T: %v", v, err)})
	}
	return b
}

// cleanSummary makes s fit a summary: valid UTF-8, no NUL, at most 200
// characters. Only the summary is shortened; content is stored whole.
func cleanSummary(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if utf8.RuneCountInString(s) > 200 {
		s = string([]rune(s)[:199]) + "…"
	}
	return s
}

// WrapTool returns tool wrapped so that every call writes two checkpoints
// on threadID's root namespace (see WrapToolIn; trigger TriggerToolCall,
// through SnapshotSafe): one before, whose last message is the call and its
// arguments, and one after, whose last message is the whole result (or the
// error) and whose tool results hold it under name. Both carry the head's messages, state and tool
// results forward. The wrapper returns what tool returns; a failed snapshot
// never fails the call. A panic in tool is recorded, then re-raised. The
// after checkpoint's summary names the error too, except under encryption,
// where it says EncryptedSummary (the error stays in the encrypted content).
func WrapTool[A, R any](e *Engine, threadID, name string, tool func(context.Context, A) (R, error)) func(context.Context, A) (R, error) {
	return WrapToolIn(e, threadID, "", name, tool)
}

// WrapToolIn is WrapTool writing on one namespace of the thread (the head
// it carries forward is that namespace's). A malformed namespace fails
// each snapshot with ErrInvalidInput, as a malformed thread id does: the
// failure is counted and logged (see SnapshotSafe), nothing is written, and
// the tool still runs.
func WrapToolIn[A, R any](e *Engine, threadID, namespace, name string, tool func(context.Context, A) (R, error)) func(context.Context, A) (R, error) {
	return func(ctx context.Context, args A) (result R, err error) {
		e.snapshotOnHead(ctx, threadID, namespace, headEdit{
			trigger:  TriggerToolCall,
			tags:     []string{"tool:" + name, "before"},
			summary:  "tool " + name + ": call",
			metadata: map[string]any{"tool": name, "phase": "before"},
			messages: []any{map[string]any{"role": "tool_call", "name": name, "args": encodeJSON(args)}},
			nextNode: name,
		})
		// The after checkpoint is written whatever became of ctx: a tool
		// that ended, well or not, while it was cancelled did what it did.
		after := context.WithoutCancel(ctx)
		recorded := false
		defer func() {
			if !recorded { // runtime.Goexit: recorded, and the goroutine goes on ending
				e.snapshotOnHead(after, threadID, namespace, e.toolAfter(name, nil, goexitFailure))
			}
		}()
		onPanic := func(p any) {
			recorded = true
			e.snapshotOnHead(after, threadID, namespace, e.toolAfter(name, nil, fmt.Sprint("panic: ", p)))
		}
		if caught(func() { result, err = tool(ctx, args) }, onPanic) {
			onPanic(nil)
			panic(nil)
		}
		recorded = true
		if err != nil {
			e.snapshotOnHead(after, threadID, namespace, e.toolAfter(name, nil, err.Error()))
			return result, err
		}
		e.snapshotOnHead(after, threadID, namespace, e.toolAfter(name, encodeJSON(result), ""))
		return result, nil
	}
}

// caught runs f, the caller's code. A panic in f is given to onPanic and
// raised again at once, from f's deferred call, so that its trace still
// shows f's frames. caught returns true for a panic whose value recover
// gives as nil (a panic(nil) under GODEBUG=panicnil=1), which it stopped:
// the caller records it and raises it again. A runtime.Goexit in f (t.FailNow,
// say), which recover also gives as nil, does not return here: the
// caller's deferred function tells it by that, not by what recover gives.
func caught(f func(), onPanic func(p any)) (nilPanic bool) {
	returned := false
	defer func() {
		if !returned {
			if p := recover(); p != nil {
				onPanic(p)
				panic(p)
			}
			nilPanic = true // a Goexit goes on ending, and returns nothing
		}
	}()
	f()
	returned = true
	return false
}

// goexitFailure is what a wrapped tool or a scope's function that ended
// its goroutine (runtime.Goexit) records: a recover there returns nil, and
// raising that as a panic would crash the program.
const goexitFailure = "the goroutine exited (runtime.Goexit)"

// toolAfter is the checkpoint after a tool call. Its failure's text is
// content (an error quoting the call's arguments, a panic's value): it goes
// into the messages and tool results, and into the summary only when the
// Engine does not encrypt (summaries and metadata are stored as given).
func (e *Engine) toolAfter(name string, result json.RawMessage, failure string) headEdit {
	ed := headEdit{
		trigger:  TriggerToolCall,
		tags:     []string{"tool:" + name, "after"},
		metadata: map[string]any{"tool": name, "phase": "after", "ok": failure == ""},
	}
	if failure != "" {
		ed.tags = append(ed.tags, "error")
		ed.summary = "tool " + name + ": " + e.shownFailure(failure)
		ed.messages = []any{map[string]any{"role": "tool", "name": name, "error": failure}}
		ed.toolResults = map[string]json.RawMessage{name: encodeJSON(map[string]string{"error": failure})}
		return ed
	}
	ed.summary = "tool " + name + ": ok"
	ed.messages = []any{map[string]any{"role": "tool", "name": name, "content": result}}
	ed.toolResults = map[string]json.RawMessage{name: result}
	return ed
}

// Scope runs fn between two checkpoints on threadID's root namespace (see
// ScopeIn; trigger TriggerTaskBoundary, through SnapshotSafe): one on enter
// and one on exit, whatever the outcome. state is encoded as JSON at each of the two (so a
// pointer shows what fn changed); nil carries the head's state forward.
// The exit checkpoint's metadata says how fn ended: {"scope": "exit",
// "outcome": "ok" | "error" | "panic" | "goexit", "error": ...}, and its summary
// names the error too; under encryption both say EncryptedSummary instead
// of the error's text (summaries and metadata are stored as given). Scope
// returns fn's error unchanged; a panic in fn is recorded, then re-raised;
// a runtime.Goexit is recorded and goes on.
// A failed snapshot never fails the scope.
func (e *Engine) Scope(ctx context.Context, threadID string, state any, fn func(context.Context) error) (err error) {
	return e.ScopeIn(ctx, threadID, "", state, fn)
}

// ScopeIn is Scope writing on one namespace of the thread (the head it
// carries forward is that namespace's). A malformed namespace fails both
// snapshots with ErrInvalidInput, as a malformed thread id does: counted and
// logged (see SnapshotSafe), nothing written, and fn still runs.
func (e *Engine) ScopeIn(ctx context.Context, threadID, namespace string, state any, fn func(context.Context) error) (err error) {
	enc := func() json.RawMessage {
		if state == nil {
			return nil
		}
		return encodeJSON(state)
	}
	e.snapshotOnHead(ctx, threadID, namespace, headEdit{
		trigger:  TriggerTaskBoundary,
		tags:     []string{"scope", "enter"},
		summary:  "scope: enter",
		metadata: map[string]any{"scope": "enter"},
		state:    enc(),
	})
	exit := func(outcome, failure string) {
		meta := map[string]any{"scope": "exit", "outcome": outcome}
		summary := "scope: exit, " + outcome
		if failure != "" {
			meta["error"] = e.shownFailure(failure)
			summary += ": " + e.shownFailure(failure)
		}
		e.snapshotOnHead(context.WithoutCancel(ctx), threadID, namespace, headEdit{
			trigger:  TriggerTaskBoundary,
			tags:     []string{"scope", "exit", outcome},
			summary:  summary,
			metadata: meta,
			state:    enc(),
		})
	}
	recorded := false
	defer func() {
		if !recorded { // runtime.Goexit: recorded, and the goroutine goes on ending
			exit("goexit", goexitFailure)
		}
	}()
	onPanic := func(p any) {
		recorded = true
		exit("panic", fmt.Sprint(p))
	}
	if caught(func() { err = fn(ctx) }, onPanic) {
		onPanic(nil)
		panic(nil)
	}
	recorded = true
	if err != nil {
		exit("error", err.Error())
		return err
	}
	exit("ok", "")
	return nil
}

// shownFailure is a failure's text as a summary or metadata may hold it:
// as it is, or under encryption EncryptedSummary, as summaries and
// metadata other than Encryption.MetadataKeys are not encrypted.
func (e *Engine) shownFailure(failure string) string {
	if e.Encrypted() {
		return EncryptedSummary
	}
	return failure
}

// ResumePoint is where a run picks up after a crash: the head of its
// thread, and the tasks that finished after it.
type ResumePoint struct {
	*Checkpoint
	// Done maps each task that recorded writes after the head (PutWrites)
	// to its writes, in order: the run can use them instead of running the
	// task again.
	Done map[string][]PendingWrite
}

// TaskDone reports whether task recorded writes after the head.
func (r *ResumePoint) TaskDone(task string) bool {
	_, ok := r.Done[task]
	return ok
}

// Resume is ResumeIn for the thread's root namespace.
func (e *Engine) Resume(ctx context.Context, threadID string) (*ResumePoint, error) {
	return e.ResumeIn(ctx, threadID, "")
}

// ResumeIn returns the head of one namespace of threadID with the pending
// writes recorded after it, grouped by task. A loop (or sub-graph) resumed
// after a crash continues from the head's state and next node, and skips
// the tasks in Done. Errors: ErrNotFound for a namespace with no checkpoint
// (a new run); ErrInvalidInput for a malformed thread id or namespace.
func (e *Engine) ResumeIn(ctx context.Context, threadID, namespace string) (*ResumePoint, error) {
	head, err := e.LatestIn(ctx, threadID, namespace)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	r := &ResumePoint{Checkpoint: head, Done: map[string][]PendingWrite{}}
	for _, w := range head.PendingWrites {
		r.Done[w.TaskID] = append(r.Done[w.TaskID], w)
	}
	return r, nil
}
