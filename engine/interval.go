package engine

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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
	// WriteUnchanged writes a checkpoint at every tick; by default a tick
	// whose messages, state and tool results equal the last written ones
	// writes nothing.
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
// ErrInvalidInput for a bad thread id or namespace, a non-positive Every or
// a nil Capture.
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
	if opts.Capture == nil {
		return nil, fmt.Errorf("start interval: %w: Capture is nil", ErrInvalidInput)
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
		in, err := opts.Capture(ctx)
		in.ThreadID, in.Namespace, in.Trigger = opts.ThreadID, opts.Namespace, TriggerInterval
		if err != nil {
			if ctx.Err() == nil {
				e.snapshotFailed(ctx, in, fmt.Errorf("interval capture: %w", err))
			}
			continue
		}
		content := bytes.Join([][]byte{in.Messages, in.State, in.ToolResults}, []byte{0})
		if !opts.WriteUnchanged && last != nil && bytes.Equal(content, last) {
			continue
		}
		// A write under way finishes even if Close comes meanwhile: a
		// cancelled write may have committed, and Written must not lie.
		res, err := e.Snapshot(context.WithoutCancel(ctx), in)
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
