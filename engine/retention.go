package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Policy says what to keep of a thread, in each of its namespaces, in
// write order; whatever is not kept goes. It is the one way to say it, and
// each call that takes one takes those that make sense there:
// PruneThreads every policy, Config.Retention all but KeepNone, Sweep the
// four retention policies, SetThreadExpiry KeepNone and KeepLatest; any
// other is ErrInvalidInput, with nothing deleted.
//
// The retention policies, KeepAll, KeepLastN, KeepAge and KeepMilestones,
// never delete a thread's head (the rewound-to checkpoint after a rewind),
// nor a checkpoint a branch was forked from while the branch exists; they
// are the SQL functions' own (see pgcheckpoint.thread_gc), and Sweep and
// the SQL sweep apply them. KeepLatest keeps the heads alone: a branch's
// source goes too (the branch's first checkpoint holds its content, and
// its parent link then names a checkpoint that is gone). KeepNone keeps
// nothing: the thread is deleted whole, thread rows and all. No policy
// touches another thread, and a kept delta whose base goes is first
// rewritten whole, in the same transaction. The zero Policy is KeepAll.
type Policy struct {
	name string
	n    int
	age  time.Duration
}

// KeepAll keeps every checkpoint: nothing is deleted.
func KeepAll() Policy { return Policy{name: "keep_all"} }

// KeepLastN keeps the n newest checkpoints (n >= 1).
func KeepLastN(n int) Policy { return Policy{name: "keep_last_n", n: n} }

// KeepAge keeps the checkpoints written within d of now (d at least a
// microsecond, the precision of Postgres intervals).
func KeepAge(d time.Duration) Policy { return Policy{name: "keep_age", age: d} }

// KeepMilestones keeps the first and the newest checkpoint and n evenly
// spaced between them (n >= 0): positions 1 + round(i*(total-1)/(n+1)) in
// write order, for i = 1..n.
func KeepMilestones(n int) Policy { return Policy{name: "keep_milestones", n: n} }

// KeepLatest keeps the head of each namespace and nothing else, branch
// sources included: what an expiry with the SQL expire_action
// 'keep_latest' and pgcheckpoint.thread_prune_many(threads, true) do.
func KeepLatest() Policy { return Policy{name: "keep_latest"} }

// KeepNone keeps nothing: the thread is deleted from every table, as
// DeleteThreads does.
func KeepNone() Policy { return Policy{name: "keep_none"} }

// String writes the policy as every surface spells it: its name as the
// SQL functions take it (see Name), then a colon and its argument, e.g.
// "keep_last_n:10", "keep_age:72h0m0s", "keep_all". Errors, ckpt (its
// --policy flag, output and help) and ckpt web write policies so, and
// ParsePolicy reads it back.
func (p Policy) String() string {
	switch p.Name() {
	case "keep_all", "keep_latest", "keep_none":
		return p.Name()
	case "keep_age":
		return fmt.Sprintf("keep_age:%s", p.age)
	}
	return fmt.Sprintf("%s:%d", p.name, p.n)
}

func (p Policy) keepsAll() bool { return p.Name() == "keep_all" }

// Name is the policy's name: keep_all, keep_last_n, keep_age,
// keep_milestones (the SQL functions' spelling), keep_latest or
// keep_none.
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

// check validates a policy's arguments: the one check of every call that
// takes a Policy (see checkFor for which it takes).
func (p Policy) check() error {
	if p.n > math.MaxInt32 {
		return fmt.Errorf("%w: %s: n is over %d", ErrInvalidInput, p, math.MaxInt32)
	}
	switch p.Name() {
	case "keep_all", "keep_latest", "keep_none":
	case "keep_last_n":
		if p.n < 1 {
			return fmt.Errorf("%w: %s: n must be 1 or more", ErrInvalidInput, p)
		}
	case "keep_milestones":
		if p.n < 0 {
			return fmt.Errorf("%w: %s: n must be 0 or more", ErrInvalidInput, p)
		}
	case "keep_age":
		if p.age < time.Microsecond {
			return fmt.Errorf("%w: %s: the age must be at least 1µs", ErrInvalidInput, p)
		}
	default:
		return fmt.Errorf("%w: unknown policy %q", ErrInvalidInput, p.name)
	}
	return nil
}

// policyUse is a place that takes a Policy.
type policyUse int

const (
	usePrune     policyUse = iota // PruneThreads: every policy
	useRetention                  // Config.Retention: all but KeepNone
	useSweep                      // Sweep: the retention policies
	useExpiry                     // SetThreadExpiry: KeepNone and KeepLatest
)

// checkFor checks p and that use takes it: the one statement of which
// policy goes where.
func (p Policy) checkFor(use policyUse) error {
	if err := p.check(); err != nil {
		return err
	}
	name := p.Name()
	switch use {
	case useRetention:
		if name == "keep_none" {
			return fmt.Errorf("%w: keep_none would delete the thread after each write", ErrInvalidInput)
		}
	case useSweep:
		if name == "keep_latest" || name == "keep_none" {
			return fmt.Errorf("%w: %s: a sweep applies keep_all, keep_last_n, keep_age or keep_milestones; "+
				"for the others use PruneThreads, or SetThreadExpiry and a sweep", ErrInvalidInput, p)
		}
	case useExpiry:
		if name != "keep_none" && name != "keep_latest" {
			return fmt.Errorf("%w: %s: an expiry keeps nothing (keep_none) or the heads (keep_latest)", ErrInvalidInput, p)
		}
	}
	return nil
}

// PruneThreads deletes from each of threadIDs (every namespace) what keep
// does not keep, and returns what it deleted: DeleteResult.IDs too for
// KeepLastN, KeepAge and KeepMilestones, which pick checkpoints by
// position or age. It takes every Policy; KeepAll deletes nothing and
// KeepNone deletes the threads whole (DeleteThreads is that). Each thread
// is pruned in one transaction, under its lock (a store may put several in
// one); an error stops at its thread and the result counts what was
// deleted before it, so a retry is harmless. An unknown thread deletes
// nothing. With delta storage, deleting the base of a kept delta rewrites
// that delta whole: Config.Retention with KeepLastN does so for one
// checkpoint per Snapshot, a periodic Sweep once per thread and sweep.
//
// Errors: ErrInvalidInput for a bad policy or thread id, with nothing
// deleted.
func (e *Engine) PruneThreads(ctx context.Context, keep Policy, threadIDs ...string) (_ DeleteResult, err error) {
	ctx, done := e.tel.call(ctx, "PruneThreads", threadsAttrs(threadIDs)...)
	defer func() { done(err) }()
	if err := keep.checkFor(usePrune); err != nil {
		return DeleteResult{}, fmt.Errorf("prune threads: %w", err)
	}
	return e.prune(ctx, "prune threads "+keep.String(), keep, threadIDs, e.store.PruneThreads)
}

// PreviewPrune returns what PruneThreads(ctx, keep, threadIDs...) would
// delete now, and deletes nothing: the store applies the policy as
// PruneThreads does, in a transaction it then rolls back, so the answer
// comes from the one rule that deletes (on Postgres the SQL functions,
// under the threads' locks for that long). Writers that commit after it
// can change what a PruneThreads then deletes.
//
// Errors: as PruneThreads's; ErrPermission where the database may not be
// written (the preview writes, then rolls back).
func (e *Engine) PreviewPrune(ctx context.Context, keep Policy, threadIDs ...string) (_ DeleteResult, err error) {
	ctx, done := e.tel.call(ctx, "PreviewPrune", threadsAttrs(threadIDs)...)
	defer func() { done(err) }()
	if err := keep.checkFor(usePrune); err != nil {
		return DeleteResult{}, fmt.Errorf("preview prune: %w", err)
	}
	return e.prune(ctx, "preview prune "+keep.String(), keep, threadIDs, e.store.PreviewPrune)
}

// prune is PruneThreads, PreviewPrune and DeleteThreads after their own
// checks; apply is the store's call.
func (e *Engine) prune(ctx context.Context, what string, keep Policy, threadIDs []string,
	apply func(context.Context, []string, Policy) (DeleteResult, error)) (DeleteResult, error) {
	ids, err := checkThreadIDs(threadIDs)
	if err != nil {
		return DeleteResult{}, fmt.Errorf("%s: %w", what, err)
	}
	if keep.keepsAll() || len(ids) == 0 {
		return DeleteResult{}, nil
	}
	r, err := apply(ctx, ids, keep)
	sortDeleted(r.IDs)
	switch {
	case err != nil && r.Deleted > 0:
		return r, fmt.Errorf("%s, after deleting %d checkpoint(s): %w", what, r.Deleted, err)
	case err != nil:
		return r, fmt.Errorf("%s: %w", what, err)
	}
	return r, nil
}

// retainAfter applies Config.Retention to the thread of a write that
// succeeded (what names it: snapshot, append).
func (e *Engine) retainAfter(ctx context.Context, what string, res SnapshotResult) error {
	if e.cfg.Retention.keepsAll() {
		return nil
	}
	if _, err := e.PruneThreads(ctx, e.cfg.Retention, res.ThreadID); err != nil {
		return fmt.Errorf("%s %s was written, then Config.Retention: %w (a retry with the same ID is safe)", what, res.ID, err)
	}
	return nil
}

// checkThreadIDs checks thread ids and returns them sorted, each once.
func checkThreadIDs(threadIDs []string) ([]string, error) {
	for _, t := range threadIDs {
		if err := checkID("thread id", t, false); err != nil {
			return nil, err
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(threadIDs))), nil
}

// DefaultSweepBatch is the default SweepOptions.BatchSize.
const DefaultSweepBatch = 5

// SweepOptions tunes Sweep.
type SweepOptions struct {
	// BatchSize is how many threads one transaction handles (default
	// DefaultSweepBatch, at most MaxListLimit). Their locks are held until
	// it commits, so a Snapshot on one of them waits that long: keep it
	// small.
	BatchSize int
	// TimeBudget stops the sweep after the batch during which it runs out;
	// zero means no limit. SweepResult.Next says where to go on.
	TimeBudget time.Duration
	// After starts the sweep after this thread id ("" from the first),
	// in the order of ListThreads (by the id's bytes).
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

// Sweep applies thread expiry (see SetThreadExpiry) and then p to every
// thread, in thread id order, BatchSize threads per transaction; in each
// batch every due expiry first, then p (on both stores), so a branch that
// expires no longer protects its source from p when the two share a batch;
// when the source came in an earlier batch, the next sweep trims it. It takes
// the retention policies (KeepAll: expiry alone, KeepLastN, KeepAge,
// KeepMilestones), which the SQL sweep applies too. A crash or a cancelled
// context loses at most the batch in flight, which rolls back whole: every
// thread stays readable. A thread that cannot be cleaned (a damaged chain;
// on Postgres one another transaction holds past lock_timeout) is left as
// it was and counted (Failed); a serialization failure (under REPEATABLE
// READ or SERIALIZABLE) fails its batch instead, which Config.Retry runs
// again. Errors:
// ErrInvalidInput for a bad policy or options; ErrTransient when a batch
// failed so and was not retried (SweepResult.Next goes on from there).
func (e *Engine) Sweep(ctx context.Context, p Policy, opts SweepOptions) (_ SweepResult, err error) {
	ctx, done := e.tel.call(ctx, "Sweep")
	defer func() { done(err) }()
	return e.sweep(ctx, "sweep", p, opts, e.store.SweepBatch)
}

// PreviewSweep returns what Sweep(ctx, p, opts) would do now, and deletes
// nothing: the store runs each batch as Sweep does (expiry, then p, the
// same rule) in a transaction it then rolls back, and the next batch goes
// on after it. The counts are Sweep's: threads seen, expired, failed,
// checkpoints deleted; a sweep lists no checkpoint ids. Writers that
// commit in between can change what a Sweep then does, and a preview holds
// each batch's thread locks as long as Sweep would.
//
// Errors: as Sweep's; ErrPermission where the database may not be written
// (the preview writes, then rolls back).
func (e *Engine) PreviewSweep(ctx context.Context, p Policy, opts SweepOptions) (_ SweepResult, err error) {
	ctx, done := e.tel.call(ctx, "PreviewSweep")
	defer func() { done(err) }()
	return e.sweep(ctx, "preview sweep", p, opts, e.store.PreviewSweepBatch)
}

// sweep is Sweep and PreviewSweep; batch is the store's call.
func (e *Engine) sweep(ctx context.Context, what string, p Policy, opts SweepOptions,
	batch func(ctx context.Context, p Policy, after string, size int) (SweepBatchResult, error)) (SweepResult, error) {
	if err := p.checkFor(useSweep); err != nil {
		return SweepResult{}, fmt.Errorf("%s: %w", what, err)
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = DefaultSweepBatch
	}
	if opts.BatchSize < 0 || opts.TimeBudget < 0 || opts.Pause < 0 {
		return SweepResult{}, fmt.Errorf("%s: %w: batch size %d, time budget %s and pause %s must not be negative",
			what, ErrInvalidInput, opts.BatchSize, opts.TimeBudget, opts.Pause)
	}
	if opts.BatchSize > MaxListLimit {
		// A page of threads, as a listing's (the Postgres store passed a
		// larger one on as a 32-bit integer: 2^32+1 became 1, and the
		// sweep ended after one thread, Done).
		return SweepResult{}, fmt.Errorf("%s: %w: batch size %d; at most %d", what, ErrInvalidInput, opts.BatchSize, MaxListLimit)
	}
	if err := checkText("after", opts.After); err != nil { // a thread id, as ListThreads' cursor
		return SweepResult{}, fmt.Errorf("%s: %w", what, err)
	}
	var res SweepResult
	start := time.Now()
	after := opts.After
	for {
		t0 := time.Now()
		var b SweepBatchResult
		// A batch rolls back whole on failure: Config.Retry runs it again
		// (a serialization failure fails the batch rather than skipping a
		// thread, which REPEATABLE READ would skip again).
		err := e.cfg.Retry.retry(ctx, func() (err error) {
			b, err = batch(ctx, p, after, opts.BatchSize)
			return err
		})
		if err != nil {
			res.Next = after
			return res, fmt.Errorf("%s %s after thread %q: %w", what, p, after, err)
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

// SetThreadExpiry makes a thread, every namespace of it, expire at at:
// the first Sweep (or SQL thread_gc_sweep) after that applies keep to it, KeepNone
// (the thread is deleted) or KeepLatest (its heads are kept, and the
// expiry cleared). A zero at clears the expiry; a time finer than a
// microsecond is kept as the next microsecond. It deletes nothing itself.
// It takes the thread's lock, so a sweep expiring the thread meanwhile
// either finished first (ErrNotFound) or sees the new expiry.
// Errors: ErrNotFound for a thread that does not exist; ErrInvalidInput for
// another policy, a time outside years 1 to 9999 in UTC or a bad thread id, with
// nothing changed; ErrTransient under REPEATABLE READ or SERIALIZABLE when
// the thread changed after the transaction's snapshot (retry it).
func (e *Engine) SetThreadExpiry(ctx context.Context, threadID string, at time.Time, keep Policy) (err error) {
	ctx, done := e.tel.call(ctx, "SetThreadExpiry", attrThread.String(threadID))
	defer func() { done(err) }()
	if err := checkID("thread id", threadID, false); err != nil {
		return fmt.Errorf("set thread expiry: %w", err)
	}
	if err := keep.checkFor(useExpiry); err != nil {
		return fmt.Errorf("set thread expiry: %w", err)
	}
	if !at.IsZero() {
		if err := checkYears("expiry", at); err != nil {
			return fmt.Errorf("set thread expiry: %w", err)
		}
		// The stores keep microseconds: the next one, never before the
		// time asked, nor the zero time ("does not expire"). Checked
		// again: the next microsecond may be in year 10000.
		if us := at.Truncate(time.Microsecond); !us.Equal(at) {
			at = us.Add(time.Microsecond)
			if err := checkYears("expiry", at); err != nil {
				return fmt.Errorf("set thread expiry: %w", err)
			}
		}
	}
	var n int64
	err = e.cfg.Retry.retry(ctx, func() (err error) {
		n, err = e.store.SetExpiry(ctx, threadID, at, keep)
		return err
	})
	if err != nil {
		return fmt.Errorf("set the expiry of thread %q: %w", threadID, err)
	}
	if n == 0 {
		return fmt.Errorf("set thread expiry: thread %q: %w", threadID, ErrNotFound)
	}
	return nil
}

// ThreadExpiry returns when a thread expires (the zero time: it does not)
// and what its expiry keeps: KeepNone or KeepLatest (see SetThreadExpiry).
//
// Errors: ErrInvalidInput for a bad thread id; ErrNotFound for an unknown
// thread.
func (e *Engine) ThreadExpiry(ctx context.Context, threadID string) (_ time.Time, _ Policy, err error) {
	ctx, done := e.tel.call(ctx, "ThreadExpiry", attrThread.String(threadID))
	defer func() { done(err) }()
	if err := checkID("thread id", threadID, false); err != nil {
		return time.Time{}, Policy{}, fmt.Errorf("thread expiry: %w", err)
	}
	at, keepLatest, err := e.store.Expiry(ctx, threadID)
	if err != nil {
		return time.Time{}, Policy{}, fmt.Errorf("the expiry of thread %q: %w", threadID, err)
	}
	if keepLatest {
		return at, KeepLatest(), nil
	}
	return at, KeepNone(), nil
}

// PolicySyntax lists the policies as ParsePolicy reads them, for help
// texts and errors.
const PolicySyntax = "keep_all, keep_last_n:N, keep_age:DURATION, keep_milestones:N, keep_latest or keep_none"

// ParsePolicy reads a policy as String writes it: "keep_last_n:10",
// "keep_age:24h" (a Go duration), "keep_milestones:5", "keep_all",
// "keep_latest" or "keep_none"; the argument may also come in parentheses,
// "keep_last_n(10)", as in a SQL call. A name has one spelling, the SQL
// functions' (underscores): "keep-last-n:10" is not a policy. Errors:
// ErrInvalidInput, with a message that lists the policies.
func ParsePolicy(s string) (Policy, error) {
	name, arg := strings.TrimSpace(s), ""
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
	case "keep_all", "keep_latest", "keep_none":
		if arg != "" {
			return Policy{}, fmt.Errorf("%w: policy %q: %s takes no argument", ErrInvalidInput, s, name)
		}
		p = Policy{name: name}
	case "keep_last_n", "keep_milestones":
		n, err := strconv.Atoi(arg)
		if err != nil {
			return Policy{}, fmt.Errorf("%w: policy %q: want a whole number, e.g. %s:10", ErrInvalidInput, s, name)
		}
		p = Policy{name: name, n: n}
	case "keep_age":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return Policy{}, fmt.Errorf("%w: policy %q: want a duration, e.g. keep_age:72h", ErrInvalidInput, s)
		}
		p = KeepAge(d)
	default:
		return Policy{}, fmt.Errorf("%w: unknown policy %q; use %s", ErrInvalidInput, s, PolicySyntax)
	}
	if err := p.check(); err != nil {
		return Policy{}, err
	}
	return p, nil
}
