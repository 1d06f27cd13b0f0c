package engine

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
)

// The deletes, one family. A caller says what goes (DeleteThreads,
// DeleteCheckpoints with a Selection) or what stays (PruneThreads with a
// Policy; Config.Retention, Sweep and SetThreadExpiry take one too), and
// every call that deletes returns a DeleteResult. Sweep and
// RewindAndTruncate, which do more than delete, count what they deleted in
// their own results (SweepResult.Deleted, RewindResult.Truncated).

// DeleteResult says what a delete took.
type DeleteResult struct {
	// Deleted is how many checkpoints were deleted, each with its pending
	// writes (which go with their checkpoint and are not counted apart).
	Deleted int64
	// IDs lists the checkpoints deleted when a policy picked them by
	// position or age (PruneThreads, Config.Retention with KeepLastN,
	// KeepAge or KeepMilestones), which the caller cannot tell beforehand:
	// len(IDs) == Deleted, sorted by thread, namespace, step and id. The
	// other deletes take what the caller named (whole threads, all but the
	// heads, steps below one, runs) and leave IDs nil.
	IDs []Deleted
}

// Deleted is a checkpoint a delete took (see DeleteResult.IDs).
type Deleted struct {
	ThreadID  string
	Namespace string
	ID        uuid.UUID
	Step      int64
}

// sortDeleted puts checkpoints in DeleteResult.IDs's order, the same on
// every store.
func sortDeleted(ds []Deleted) {
	slices.SortFunc(ds, func(a, b Deleted) int {
		return cmp.Or(cmp.Compare(a.ThreadID, b.ThreadID), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Step, b.Step), bytes.Compare(a.ID[:], b.ID[:]))
	})
}

// DeleteThreads deletes threads whole (thread rows of every namespace,
// checkpoints, pending writes): PruneThreads with KeepNone. An encrypted
// thread's data key stays (an encrypting writer may hold it cached, and
// write with it again): ShredThread erases it; an Import of the thread's
// own export takes it back as it is. A thread that does not exist deletes
// nothing, so a retried delete is harmless. Errors: ErrInvalidInput for a
// bad thread id, with nothing deleted.
func (e *Engine) DeleteThreads(ctx context.Context, threadIDs ...string) (_ DeleteResult, err error) {
	ctx, done := e.tel.call(ctx, "DeleteThreads", threadsAttrs(threadIDs)...)
	defer func() { done(err) }()
	return e.prune(ctx, "delete threads", KeepNone(), threadIDs, e.store.PruneThreads)
}

// threadsAttrs names the thread of a call on threads when there is one.
func threadsAttrs(threadIDs []string) []attribute.KeyValue {
	if len(threadIDs) != 1 {
		return nil
	}
	return []attribute.KeyValue{attrThread.String(threadIDs[0])}
}

// Selection names the checkpoints DeleteCheckpoints deletes: BeforeStep,
// BeforeStepIn and ForRuns make one. The zero Selection names none and is
// ErrInvalidInput.
type Selection struct {
	q    DeleteQuery
	kind int // 0: none; selectBefore, selectRuns
}

const (
	selectBefore = iota + 1
	selectRuns
)

// BeforeStep is BeforeStepIn for the thread's root namespace.
func BeforeStep(threadID string, step int64) Selection {
	return BeforeStepIn(threadID, "", step)
}

// BeforeStepIn selects the checkpoints of one namespace of a thread whose
// step is below step (1 or more), except the head, whatever its step.
// Other namespaces and threads are untouched; a checkpoint a branch was
// forked from goes like any other.
func BeforeStepIn(threadID, namespace string, step int64) Selection {
	return Selection{q: DeleteQuery{ThreadID: threadID, Namespace: namespace, BeforeStep: step}, kind: selectBefore}
}

// ForRuns selects the checkpoints, of any thread and namespace, whose
// metadata has a top-level "run_id" that is one of runIDs: all of them,
// heads included (a namespace rewound to one is no longer rewound; one
// left with none has no head until its next write). No run ids select
// nothing.
func ForRuns(runIDs ...string) Selection {
	return Selection{q: DeleteQuery{RunIDs: slices.Clone(runIDs)}, kind: selectRuns}
}

// String describes the selection, e.g. `steps below 4 of thread "run-42"
// namespace ""`.
func (s Selection) String() string {
	switch s.kind {
	case selectBefore:
		return fmt.Sprintf("steps below %d of thread %q namespace %q", s.q.BeforeStep, s.q.ThreadID, s.q.Namespace)
	case selectRuns:
		return fmt.Sprintf("runs %q", s.q.RunIDs)
	}
	return "no selection"
}

// query checks s and returns it as a store takes it.
func (s Selection) query() (DeleteQuery, error) {
	switch s.kind {
	case selectBefore:
		if err := checkID("thread id", s.q.ThreadID, false); err != nil {
			return DeleteQuery{}, err
		}
		if err := checkNamespace(s.q.Namespace); err != nil {
			return DeleteQuery{}, err
		}
		if s.q.BeforeStep < 1 {
			return DeleteQuery{}, fmt.Errorf("%w: step %d; steps start at 1", ErrInvalidInput, s.q.BeforeStep)
		}
		return s.q, nil
	case selectRuns:
		ids, err := checkTexts("run id", s.q.RunIDs)
		if err != nil {
			return DeleteQuery{}, err
		}
		stored := make([]string, len(ids))
		for i, id := range ids {
			stored[i] = storedString(id)
		}
		return DeleteQuery{RunIDs: stored}, nil
	}
	return DeleteQuery{}, fmt.Errorf("%w: the zero Selection names no checkpoint; use BeforeStep, BeforeStepIn or ForRuns", ErrInvalidInput)
}

func (s Selection) attrs() []attribute.KeyValue {
	if s.kind != selectBefore {
		return nil
	}
	return s.q.attrs()
}

// DeleteCheckpoints deletes the checkpoints sel names, with their pending
// writes, in one transaction, under the lock of each thread it touches. A
// kept delta whose base goes is first rewritten whole; a namespace rewound
// to a deleted checkpoint is no longer rewound. Errors: ErrInvalidInput for
// a bad selection, with nothing deleted.
func (e *Engine) DeleteCheckpoints(ctx context.Context, sel Selection) (_ DeleteResult, err error) {
	ctx, done := e.tel.call(ctx, "DeleteCheckpoints", sel.attrs()...)
	defer func() { done(err) }()
	q, err := sel.query()
	if err != nil {
		return DeleteResult{}, fmt.Errorf("delete checkpoints: %w", err)
	}
	if q.RunIDs != nil && len(q.RunIDs) == 0 {
		return DeleteResult{}, nil
	}
	n, err := e.store.DeleteCheckpoints(ctx, q)
	if err != nil {
		return DeleteResult{}, fmt.Errorf("delete checkpoints (%s): %w", sel, err)
	}
	return DeleteResult{Deleted: n}, nil
}
