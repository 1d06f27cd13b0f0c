package engine

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Policy says which checkpoints of a thread retention keeps, in each
// namespace, in write order. Whatever the policy, retention never deletes a
// thread's head (the rewound-to checkpoint after a rewind), nor a
// checkpoint a branch was forked from while the branch exists, nor another
// thread's rows; a kept checkpoint stored as a delta whose base goes is
// first rewritten whole, in the same transaction. The zero Policy keeps
// everything. The same policies are SQL functions: see pgcheckpoint.thread_gc.
type Policy struct {
	name string
	n    int
	age  time.Duration
}

// KeepAll keeps every checkpoint: retention deletes nothing.
func KeepAll() Policy { return Policy{name: "keep_all"} }

// KeepLastN keeps the n newest checkpoints (n >= 1).
func KeepLastN(n int) Policy { return Policy{name: "keep_last_n", n: n} }

// KeepAge keeps the checkpoints written within d of now (d > 0).
func KeepAge(d time.Duration) Policy { return Policy{name: "keep_age", age: d} }

// KeepMilestones keeps the first and the newest checkpoint and n evenly
// spaced between them (n >= 0): positions 1 + round(i*(total-1)/(n+1)) in
// write order, for i = 1..n.
func KeepMilestones(n int) Policy { return Policy{name: "keep_milestones", n: n} }

// String spells the policy as the SQL functions name it, e.g.
// "keep_last_n(10)".
func (p Policy) String() string {
	switch p.name {
	case "", "keep_all":
		return "keep_all"
	case "keep_age":
		return fmt.Sprintf("keep_age(%s)", p.age)
	}
	return fmt.Sprintf("%s(%d)", p.name, p.n)
}

func (p Policy) keepsAll() bool { return p.name == "" || p.name == "keep_all" }

// Name is the policy's name as the SQL functions spell it: keep_all,
// keep_last_n, keep_age or keep_milestones.
func (p Policy) Name() string {
	if p.name == "" {
		return "keep_all"
	}
	return p.name
}

// N is the count of keep_last_n and keep_milestones (0 for the others).
func (p Policy) N() int { return p.n }

// Age is the age of keep_age (0 for the others).
func (p Policy) Age() time.Duration { return p.age }

func (p Policy) check() error {
	if p.n > math.MaxInt32 {
		return fmt.Errorf("%w: %s: n is over %d", ErrInvalidInput, p, math.MaxInt32)
	}
	switch p.name {
	case "", "keep_all":
	case "keep_last_n":
		if p.n < 1 {
			return fmt.Errorf("%w: KeepLastN(%d); n must be 1 or more", ErrInvalidInput, p.n)
		}
	case "keep_milestones":
		if p.n < 0 {
			return fmt.Errorf("%w: KeepMilestones(%d); n must be 0 or more", ErrInvalidInput, p.n)
		}
	case "keep_age":
		if p.age <= 0 {
			return fmt.Errorf("%w: KeepAge(%s); the age must be positive", ErrInvalidInput, p.age)
		}
	default:
		return fmt.Errorf("%w: unknown policy %q", ErrInvalidInput, p.name)
	}
	return nil
}

// Deleted is a checkpoint that retention deleted.
type Deleted struct {
	ThreadID  string
	Namespace string
	ID        uuid.UUID
	Step      int64
}

// ApplyRetention applies p to one thread (every namespace), under the
// thread lock, in one transaction, and returns what it deleted. With delta
// storage, deleting the base of a kept delta rewrites that delta whole: a
// KeepLastN applied after every Snapshot (Config.Retention) does so for one
// checkpoint per Snapshot, where a periodic Sweep does it once per thread
// and sweep. Errors:
// ErrInvalidInput for a bad policy or thread id, with nothing deleted.
func (e *Engine) ApplyRetention(ctx context.Context, threadID string, p Policy) (_ []Deleted, err error) {
	ctx, done := e.tel.call(ctx, "ApplyRetention", attrThread.String(threadID))
	defer func() { done(err) }()
	if err := checkID("thread id", threadID, false); err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	if p.keepsAll() {
		return nil, nil
	}
	deleted, err := e.store.ApplyRetention(ctx, threadID, p)
	if err != nil {
		return nil, fmt.Errorf("retention %s on thread %q: %w", p, threadID, err)
	}
	return deleted, nil
}

// DefaultSweepBatch is the default SweepOptions.BatchSize.
const DefaultSweepBatch = 5

// SweepOptions tunes Sweep.
type SweepOptions struct {
	// BatchSize is how many threads one transaction handles (default
	// DefaultSweepBatch). Their locks are held until it commits, so a
	// Snapshot on one of them waits that long: keep it small.
	BatchSize int
	// TimeBudget stops the sweep after the batch during which it runs out;
	// zero means no limit. SweepResult.Next says where to go on.
	TimeBudget time.Duration
	// After starts the sweep after this thread id ("" from the first).
	After string
	// Pause is a sleep between batches, which leaves the server's CPU to
	// the application's writes: a sweep on a busy, small server is gentler
	// with a Pause of about one batch's duration (a few milliseconds).
	Pause time.Duration
	// Progress, when set, is called after each batch with the totals so
	// far.
	Progress func(SweepResult)
}

// SweepResult says what a Sweep did.
type SweepResult struct {
	Threads int   // threads seen
	Expired int   // threads whose expiry was applied
	Deleted int64 // checkpoints deleted
	// Failed counts the threads the sweep could not clean (left as they
	// were; the server logs a WARNING naming each and why).
	Failed  int
	Batches int // transactions
	// LongestBatch is the longest single transaction, as the client timed
	// it (one round trip each).
	LongestBatch time.Duration
	// Done is true when the sweep reached the last thread; otherwise Next
	// is the SweepOptions.After that goes on from where it stopped.
	Done bool
	Next string
}

// Sweep applies thread expiry (see SetExpiry) and then p to every thread,
// in thread id order, BatchSize threads per transaction. A crash or a
// cancelled context loses at most the batch in flight, which rolls back
// whole: every thread stays readable. Errors: ErrInvalidInput for a bad
// policy or options.
func (e *Engine) Sweep(ctx context.Context, p Policy, opts SweepOptions) (_ SweepResult, err error) {
	ctx, done := e.tel.call(ctx, "Sweep")
	defer func() { done(err) }()
	if err := p.check(); err != nil {
		return SweepResult{}, fmt.Errorf("sweep: %w", err)
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = DefaultSweepBatch
	}
	if opts.BatchSize < 0 || opts.TimeBudget < 0 || opts.Pause < 0 {
		return SweepResult{}, fmt.Errorf("sweep: %w: batch size %d, time budget %s and pause %s must not be negative",
			ErrInvalidInput, opts.BatchSize, opts.TimeBudget, opts.Pause)
	}
	var res SweepResult
	start := time.Now()
	after := opts.After
	for {
		t0 := time.Now()
		b, err := e.store.SweepBatch(ctx, p, after, opts.BatchSize)
		if err != nil {
			res.Next = after
			return res, fmt.Errorf("sweep %s after thread %q: %w", p, after, err)
		}
		res.LongestBatch = max(res.LongestBatch, time.Since(t0))
		res.Batches++
		res.Threads += b.Threads
		res.Expired += b.Expired
		res.Failed += b.Failed
		res.Deleted += b.Deleted
		if opts.Progress != nil {
			opts.Progress(res)
		}
		if b.Threads < opts.BatchSize {
			res.Done = true
			return res, nil
		}
		after = b.LastThreadID
		if opts.TimeBudget > 0 && time.Since(start) >= opts.TimeBudget {
			res.Next = after
			return res, nil
		}
		if opts.Pause > 0 {
			select {
			case <-ctx.Done():
				res.Next = after
				return res, ctx.Err()
			case <-time.After(opts.Pause):
			}
		}
	}
}

// ExpireAction is what happens to a thread when it expires.
type ExpireAction string

// The expire actions.
const (
	ExpireDelete     ExpireAction = "delete"      // delete the thread
	ExpireKeepLatest ExpireAction = "keep_latest" // keep only its head(s)
)

// SetExpiry makes a thread, every namespace of it, expire at at: the next
// Sweep (or SQL thread_gc_sweep) after that applies action. A zero at
// clears the expiry. Errors: ErrNotFound for a thread that does not
// exist; ErrInvalidInput.
func (e *Engine) SetExpiry(ctx context.Context, threadID string, at time.Time, action ExpireAction) (err error) {
	ctx, done := e.tel.call(ctx, "SetExpiry", attrThread.String(threadID))
	defer func() { done(err) }()
	if err := checkID("thread id", threadID, false); err != nil {
		return fmt.Errorf("set expiry: %w", err)
	}
	if action == "" {
		action = ExpireDelete
	}
	if action != ExpireDelete && action != ExpireKeepLatest {
		return fmt.Errorf("set expiry: %w: unknown action %q", ErrInvalidInput, action)
	}
	if !at.IsZero() && (at.Year() < 1 || at.Year() > 9999) {
		return fmt.Errorf("set expiry: %w: %s is outside years 1 to 9999", ErrInvalidInput, at.Format(time.RFC3339))
	}
	n, err := e.store.SetExpiry(ctx, threadID, at, action)
	if err != nil {
		return fmt.Errorf("set expiry of thread %q: %w", threadID, err)
	}
	if n == 0 {
		return fmt.Errorf("set expiry: thread %q: %w", threadID, ErrNotFound)
	}
	return nil
}

// ParsePolicy reads a policy as String spells it, "keep_last_n(10)", or in
// the shell-friendly form "keep-last-n:10"; likewise "keep_age(24h)" (a Go
// duration), "keep_milestones(5)" and "keep_all". Errors: ErrInvalidInput.
func ParsePolicy(s string) (Policy, error) {
	name, arg := strings.ReplaceAll(strings.TrimSpace(s), "-", "_"), ""
	if open := strings.IndexByte(name, '('); open >= 0 {
		if !strings.HasSuffix(name, ")") {
			return Policy{}, fmt.Errorf("%w: policy %q: no closing parenthesis", ErrInvalidInput, s)
		}
		name, arg = name[:open], name[open+1:len(name)-1]
	} else if colon := strings.IndexByte(name, ':'); colon >= 0 {
		name, arg = name[:colon], name[colon+1:]
	}
	var p Policy
	switch name {
	case "keep_all":
		if arg != "" {
			return Policy{}, fmt.Errorf("%w: policy %q: keep_all takes no argument", ErrInvalidInput, s)
		}
		p = KeepAll()
	case "keep_last_n", "keep_milestones":
		n, err := strconv.Atoi(arg)
		if err != nil {
			return Policy{}, fmt.Errorf("%w: policy %q: want a whole number, e.g. %s(10)", ErrInvalidInput, s, name)
		}
		p = Policy{name: name, n: n}
	case "keep_age":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return Policy{}, fmt.Errorf("%w: policy %q: want a duration, e.g. keep_age(72h)", ErrInvalidInput, s)
		}
		p = KeepAge(d)
	default:
		return Policy{}, fmt.Errorf("%w: unknown policy %q; use keep_all, keep_last_n(N), keep_age(DURATION) or keep_milestones(N)", ErrInvalidInput, s)
	}
	if err := p.check(); err != nil {
		return Policy{}, err
	}
	return p, nil
}
