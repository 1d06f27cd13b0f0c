package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// IntervalOptions configures StartInterval.
type IntervalOptions struct {
	// ThreadID is the thread to snapshot.
	ThreadID string
	// Namespace is the thread's namespace to snapshot; "" is the root graph.
	Namespace string
	// Every is the time between snapshots; it must be positive.
	Every time.Duration
	// Capture returns what to write at a tick (ThreadID, Namespace and
	// Trigger are set by the snapshotter). It runs on the snapshotter's
	// goroutine, so it must be safe to call alongside the agent. An error skips the tick and
	// counts as a failed snapshot.
	Capture func(ctx context.Context) (SnapshotInput, error)
	// CaptureChange, set instead of Capture, returns what changed since
	// the last tick, which the snapshotter writes with Append (ThreadID,
	// Namespace and Trigger set by the snapshotter): each tick then costs
	// what it adds, however long the thread. The thread must have a
	// checkpoint already (write the first with Snapshot); until it has,
	// each tick fails with ErrNotFound, counted as a failed snapshot.
	CaptureChange func(ctx context.Context) (AppendInput, error)
	// WriteUnchanged writes a checkpoint at every tick; by default a tick
	// whose messages, state and tool results equal the last written ones
	// (with CaptureChange: whose change is empty) writes nothing.
	WriteUnchanged bool
}

// Interval is a background snapshotter of one thread, started by
// StartInterval. Close stops it.
type Interval struct {
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
	written atomic.Int64
	// Disabled is set when TriggerInterval is not enabled: no goroutine was
	// started and nothing is ever written. DisabledReason says why.
	Disabled       bool
	DisabledReason string
}

// StartInterval starts a goroutine that snapshots opts.ThreadID (in
// opts.Namespace) every opts.Every with TriggerInterval until Close is
// called or ctx ends. A failed snapshot is logged and counted as in
// SnapshotSafe, never fatal. When TriggerInterval is not enabled it starts
// nothing and returns an Interval with Disabled set. Errors:
// ErrInvalidInput for a bad thread id or namespace, a non-positive Every, or
// not exactly one of Capture and CaptureChange.
func (e *Engine) StartInterval(ctx context.Context, opts IntervalOptions) (*Interval, error) {
	if err := checkID("thread id", opts.ThreadID, false); err != nil {
		return nil, fmt.Errorf("start interval: %w", err)
	}
	if err := checkNamespace(opts.Namespace); err != nil {
		return nil, fmt.Errorf("start interval: %w", err)
	}
	if opts.Every <= 0 {
		return nil, fmt.Errorf("start interval: %w: every %v; it must be positive", ErrInvalidInput, opts.Every)
	}
	if (opts.Capture == nil) == (opts.CaptureChange == nil) {
		return nil, fmt.Errorf("start interval: %w: set one of Capture and CaptureChange", ErrInvalidInput)
	}
	iv := &Interval{done: make(chan struct{})}
	if !e.Enabled(TriggerInterval) {
		iv.Disabled = true
		iv.DisabledReason = fmt.Sprintf("trigger %s is not enabled (Config.Triggers)", TriggerInterval)
		iv.cancel = func() {}
		close(iv.done)
		return iv, nil
	}
	ctx, iv.cancel = context.WithCancel(ctx)
	go iv.loop(ctx, e, opts)
	return iv, nil
}

func (iv *Interval) loop(ctx context.Context, e *Engine, opts IntervalOptions) {
	defer close(iv.done)
	ticker := time.NewTicker(opts.Every)
	defer ticker.Stop()
	var last []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		var (
			in     SnapshotInput
			change AppendInput
			err    error
		)
		if opts.CaptureChange != nil {
			change, err = opts.CaptureChange(ctx)
			change.ThreadID, change.Namespace, change.Trigger = opts.ThreadID, opts.Namespace, TriggerInterval
			// What a failure report shows of an append.
			in = SnapshotInput{ThreadID: opts.ThreadID, Namespace: opts.Namespace, Trigger: TriggerInterval,
				Messages: change.Messages, State: change.SetState, ToolResults: change.SetToolResults}
		} else {
			in, err = opts.Capture(ctx)
			in.ThreadID, in.Namespace, in.Trigger = opts.ThreadID, opts.Namespace, TriggerInterval
		}
		if err != nil {
			if ctx.Err() == nil {
				e.snapshotFailed(ctx, in, fmt.Errorf("interval capture: %w", err))
			}
			continue
		}
		content := bytes.Join([][]byte{in.Messages, in.State, in.ToolResults}, []byte{0})
		var res SnapshotResult
		// A write under way finishes even if Close comes meanwhile: a
		// cancelled write may have committed, and Written must not lie.
		if opts.CaptureChange != nil {
			if !opts.WriteUnchanged && change.empty() {
				continue
			}
			res, err = e.Append(context.WithoutCancel(ctx), change)
		} else {
			if !opts.WriteUnchanged && last != nil && bytes.Equal(content, last) {
				continue
			}
			res, err = e.Snapshot(context.WithoutCancel(ctx), in)
		}
		switch {
		case err != nil:
			e.snapshotFailed(ctx, in, err)
		case !res.Skipped:
			iv.written.Add(1)
			last = content
		}
	}
}

// Close stops the snapshotter and waits for its goroutine to end, which
// lets a snapshot being written finish. It is safe to call more than once
// and always returns nil.
func (iv *Interval) Close() error {
	iv.once.Do(iv.cancel)
	<-iv.done
	return nil
}

// Done is closed when the snapshotter's goroutine has ended (after Close,
// or when the context given to StartInterval ends).
func (iv *Interval) Done() <-chan struct{} { return iv.done }

// Written returns how many checkpoints the snapshotter wrote.
func (iv *Interval) Written() int64 { return iv.written.Load() }

// empty reports whether a changes nothing: no message to append, no key to
// set or remove. JSON that does not parse is not empty (Append reports it).
func (a AppendInput) empty() bool {
	if len(a.RemoveState) > 0 || len(a.RemoveToolResults) > 0 {
		return false
	}
	if m := trimJSON(a.Messages); len(m) > 0 && !(json.Valid(m) && m[0] == '[' && len(jsontext.MessageDigests(m)) == 0) {
		return false
	}
	for _, obj := range []json.RawMessage{a.SetState, a.SetToolResults} {
		if o := trimJSON(obj); len(o) > 0 && !(json.Valid(o) && o[0] == '{' && len(trimJSON(o[1:len(o)-1])) == 0) {
			return false
		}
	}
	return true
}
