package engine

import (
	"context"
	"fmt"
	"time"
)

// The forms of the deletes before they became one family (see
// DeleteResult), each a call of its new form, kept for one release.

// DeleteThread deletes a thread from every table and returns how many
// checkpoints it deleted.
//
// Deprecated: use DeleteThreads(ctx, threadID), which returns a
// DeleteResult (its Deleted is this count).
func (e *Engine) DeleteThread(ctx context.Context, threadID string) (int64, error) {
	r, err := e.DeleteThreads(ctx, threadID)
	return r.Deleted, err
}

// DeleteBefore deletes the checkpoints of a thread's root namespace whose
// step is below step, except the head, and returns how many.
//
// Deprecated: use DeleteCheckpoints(ctx, BeforeStep(threadID, step)).
func (e *Engine) DeleteBefore(ctx context.Context, threadID string, step int64) (int64, error) {
	r, err := e.DeleteCheckpoints(ctx, BeforeStep(threadID, step))
	return r.Deleted, err
}

// DeleteBeforeIn deletes the checkpoints of one namespace of a thread
// whose step is below step, except the head, and returns how many.
//
// Deprecated: use DeleteCheckpoints(ctx, BeforeStepIn(threadID, namespace, step)).
func (e *Engine) DeleteBeforeIn(ctx context.Context, threadID, namespace string, step int64) (int64, error) {
	r, err := e.DeleteCheckpoints(ctx, BeforeStepIn(threadID, namespace, step))
	return r.Deleted, err
}

// DeleteForRuns deletes every checkpoint whose metadata run_id is one of
// runIDs and returns how many.
//
// Deprecated: use DeleteCheckpoints(ctx, ForRuns(runIDs...)).
func (e *Engine) DeleteForRuns(ctx context.Context, runIDs []string) (int64, error) {
	r, err := e.DeleteCheckpoints(ctx, ForRuns(runIDs...))
	return r.Deleted, err
}

// PruneStrategy says what Prune keeps.
//
// Deprecated: Prune's strategies are policies: KeepLatest and KeepNone,
// for PruneThreads.
type PruneStrategy int

const (
	// PruneKeepLatest keeps each thread's heads.
	//
	// Deprecated: use KeepLatest.
	PruneKeepLatest PruneStrategy = iota + 1
	// PruneDeleteAll deletes the threads whole.
	//
	// Deprecated: use KeepNone, or DeleteThreads.
	PruneDeleteAll
)

// policy is the Policy a strategy stands for; an unknown strategy gives a
// policy that fails its check.
func (s PruneStrategy) policy() Policy {
	switch s {
	case PruneKeepLatest:
		return KeepLatest()
	case PruneDeleteAll:
		return KeepNone()
	}
	return Policy{name: fmt.Sprintf("PruneStrategy(%d)", int(s))}
}

// Prune applies strategy to each of threadIDs and returns how many
// checkpoints it deleted.
//
// Deprecated: use PruneThreads(ctx, KeepLatest(), threadIDs...) or
// DeleteThreads(ctx, threadIDs...).
func (e *Engine) Prune(ctx context.Context, threadIDs []string, strategy PruneStrategy) (int64, error) {
	r, err := e.PruneThreads(ctx, strategy.policy(), threadIDs...)
	return r.Deleted, err
}

// ApplyRetention applies p to one thread and returns what it deleted.
//
// Deprecated: use PruneThreads(ctx, p, threadID), whose DeleteResult.IDs
// is this list.
func (e *Engine) ApplyRetention(ctx context.Context, threadID string, p Policy) ([]Deleted, error) {
	r, err := e.PruneThreads(ctx, p, threadID)
	return r.IDs, err
}

// ExpireAction is what happens to a thread when it expires.
//
// Deprecated: an expiry's action is a policy, KeepNone or KeepLatest, for
// SetThreadExpiry.
type ExpireAction string

// The expire actions.
//
// Deprecated: use KeepNone and KeepLatest.
const (
	ExpireDelete     ExpireAction = "delete"      // delete the thread
	ExpireKeepLatest ExpireAction = "keep_latest" // keep only its head(s)
)

// policy is the Policy an action stands for ("" is ExpireDelete); an
// unknown action gives a policy that fails its check.
func (a ExpireAction) policy() Policy {
	switch a {
	case "", ExpireDelete:
		return KeepNone()
	case ExpireKeepLatest:
		return KeepLatest()
	}
	return Policy{name: fmt.Sprintf("ExpireAction(%s)", string(a))}
}

// SetExpiry makes a thread expire at at (zero: clears its expiry); the
// next sweep after that applies action.
//
// Deprecated: use SetThreadExpiry(ctx, threadID, at, KeepNone()) (or
// KeepLatest()).
func (e *Engine) SetExpiry(ctx context.Context, threadID string, at time.Time, action ExpireAction) error {
	return e.SetThreadExpiry(ctx, threadID, at, action.policy())
}
