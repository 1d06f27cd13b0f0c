package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// RewindResult describes a rewind.
type RewindResult struct {
	ThreadID  string
	Namespace string
	// Checkpoint is the target, now the thread's head: the next Snapshot
	// on the thread takes it as parent.
	Checkpoint *Checkpoint
	// StepsBack is the old head's step minus the target's.
	StepsBack int64
	// Checkpoints is how many checkpoints the thread (namespace) had.
	Checkpoints int64
	// Truncated is how many checkpoints RewindAndTruncate deleted (0 for
	// Rewind).
	Truncated int64
}

// Rewind makes checkpoint id the head of its thread and namespace (the
// checkpoint's own; other namespaces keep their heads), so the next Snapshot
// there builds on it and history becomes a tree. It deletes nothing: every
// checkpoint stays readable, and a later Rewind can return to the old line.
// It takes the lock of the thread the checkpoint is in. Errors:
// ErrNotFound; ErrTransient (retry it; Config.Retry does) under REPEATABLE READ or
// SERIALIZABLE when the thread changed after the transaction's snapshot,
// or, on Postgres, when the checkpoint's id moved to another thread while
// the call waited for the lock (deleted, then written there by an import).
func (e *Engine) Rewind(ctx context.Context, id uuid.UUID) (_ *RewindResult, err error) {
	ctx, done := e.tel.callID(ctx, "Rewind", id)
	defer func() { done(err) }()
	return e.rewind(ctx, id, false)
}

// RewindAndTruncate is Rewind, and it also deletes the checkpoints after the
// target on the head's line (the old head and its ancestors down to the
// target), in the same transaction, as far as nothing else builds on them:
// the deletion stops at the newest of them that another checkpoint of the
// thread has as parent (another line) or a branch was forked from, which
// stays, with what is older. Other lines of the thread, its branches and
// other threads are untouched. Errors: as Rewind's.
func (e *Engine) RewindAndTruncate(ctx context.Context, id uuid.UUID) (_ *RewindResult, err error) {
	ctx, done := e.tel.callID(ctx, "RewindAndTruncate", id)
	defer func() { done(err) }()
	return e.rewind(ctx, id, true)
}

func (e *Engine) rewind(ctx context.Context, id uuid.UUID, truncate bool) (*RewindResult, error) {
	var r *RewindResult
	err := e.cfg.Retry.retry(ctx, func() (err error) {
		r, err = e.store.Rewind(ctx, id, truncate)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rewind to checkpoint %s: %w", id, err)
	}
	return e.withTarget(ctx, id, r)
}

// withTarget is r with its target, checkpoint id, read.
func (e *Engine) withTarget(ctx context.Context, id uuid.UUID, r *RewindResult) (*RewindResult, error) {
	var err error
	if r.Checkpoint, err = e.Get(ctx, id); err != nil {
		return nil, fmt.Errorf("rewind: read the target: %w", err)
	}
	return r, nil
}

// RewindToStep is RewindToStepIn for the thread's root namespace.
func (e *Engine) RewindToStep(ctx context.Context, threadID string, step int64) (_ *RewindResult, err error) {
	ctx, done := e.tel.call(ctx, "RewindToStep", attrThread.String(threadID))
	defer func() { done(err) }()
	return e.rewindToStep(ctx, threadID, "", step)
}

// RewindToStepIn rewinds one namespace of a thread to the checkpoint with
// the greatest step at or below step on that namespace's head line, the
// line the agent is on, not on other branches; other namespaces keep their
// heads. Errors: ErrInvalidInput for a step below 1 or a malformed thread
// id or namespace; ErrNotFound when the namespace has no checkpoint at or
// below step on that line; ErrTransient as for Rewind. The line is read
// under the thread's lock, in the rewind's transaction: a rewind or write
// committed meanwhile is on it.
func (e *Engine) RewindToStepIn(ctx context.Context, threadID, namespace string, step int64) (_ *RewindResult, err error) {
	ctx, done := e.tel.call(ctx, "RewindToStepIn", attrThread.String(threadID), attrNamespace.String(namespace))
	defer func() { done(err) }()
	return e.rewindToStep(ctx, threadID, namespace, step)
}

func (e *Engine) rewindToStep(ctx context.Context, threadID, namespace string, step int64) (*RewindResult, error) {
	if err := checkID("thread id", threadID, false); err != nil {
		return nil, fmt.Errorf("rewind to step: %w", err)
	}
	if err := checkNamespace(namespace); err != nil {
		return nil, fmt.Errorf("rewind to step: %w", err)
	}
	if step < 1 {
		return nil, fmt.Errorf("rewind to step: %w: step %d; steps start at 1", ErrInvalidInput, step)
	}
	var id uuid.UUID
	var r *RewindResult
	err := e.cfg.Retry.retry(ctx, func() (err error) {
		id, r, err = e.store.RewindToStep(ctx, threadID, namespace, step)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("rewind thread %q namespace %q to step %d: no checkpoint at or below it on the current line: %w",
			threadID, namespace, step, err)
	}
	if err != nil {
		return nil, fmt.Errorf("rewind thread %q namespace %q to step %d: %w", threadID, namespace, step, err)
	}
	return e.withTarget(ctx, id, r)
}

// PointsOptions pages TimeTravelPoints.
type PointsOptions struct {
	// Namespace whose line to list; "" is the root graph.
	Namespace string
	// Limit is the page size: default 100, at most MaxListLimit.
	Limit int
	// Before is the cursor: the page starts at this checkpoint's parent.
	// Pass the last ID of a page to get the next one. A cursor that is not
	// a checkpoint of the thread and Namespace gives ErrNotFound.
	Before uuid.UUID
}

// TimeTravelPoints lists the checkpoints a thread can be rewound to along
// the current line of one namespace (opts.Namespace, the root by default):
// its head, its parent, and so on back to the thread's first checkpoint,
// newest first, a page at a time. A branch's list ends at its first
// checkpoint: the ones before it belong to its source thread (Lineage
// shows them), and a Rewind to one would move the source's head. Errors:
// ErrNotFound for a namespace with no checkpoint or a cursor that is not
// one of the thread and namespace; ErrInvalidInput for a malformed thread
// id or namespace or a bad limit.
func (e *Engine) TimeTravelPoints(ctx context.Context, threadID string, opts PointsOptions) (_ []CheckpointInfo, err error) {
	ctx, done := e.tel.call(ctx, "TimeTravelPoints", attrThread.String(threadID))
	defer func() { done(err) }()
	if err := checkID("thread id", threadID, false); err != nil {
		return nil, fmt.Errorf("time travel points: %w", err)
	}
	if err := checkNamespace(opts.Namespace); err != nil {
		return nil, fmt.Errorf("time travel points: %w", err)
	}
	limit, err := pageSize(opts.Limit)
	if err != nil {
		return nil, fmt.Errorf("time travel points: %w", err)
	}
	start := opts.Before
	skip := 1 // the cursor itself was on the previous page
	if start == uuid.Nil {
		// The head's id alone: its content (the whole conversation) is
		// not needed to list the line.
		head, err := e.store.HeadID(ctx, threadID, opts.Namespace)
		if err != nil {
			return nil, fmt.Errorf("time travel points: %w", err)
		}
		start, skip = head, 0
	}
	points, err := e.lineage(ctx, start, limit+skip)
	if err != nil {
		return nil, fmt.Errorf("time travel points: %w", err)
	}
	// The lineage of a cursor from another thread or namespace is not
	// this line; the lineage of the thread's own checkpoint leaves it at
	// its first checkpoint, into a branch's source.
	if len(points) == 0 || points[0].ThreadID != threadID || points[0].Namespace != opts.Namespace {
		return nil, fmt.Errorf("time travel points: cursor %s is not a checkpoint of thread %q in namespace %q: %w", start, threadID, opts.Namespace, ErrNotFound)
	}
	for i, p := range points {
		if p.ThreadID != threadID {
			points = points[:i]
			break
		}
	}
	return points[skip:], nil
}

// Lineage returns checkpoint id and its ancestors back to the root, newest
// first, across threads where a branch was forked. Errors: ErrNotFound.
func (e *Engine) Lineage(ctx context.Context, id uuid.UUID) (_ []CheckpointInfo, err error) {
	ctx, done := e.tel.callID(ctx, "Lineage", id)
	defer func() { done(err) }()
	points, err := e.lineage(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	if len(points) == 0 {
		return nil, fmt.Errorf("lineage of checkpoint %s: %w", id, ErrNotFound)
	}
	return points, nil
}

// lineage reads up to n checkpoints of the lineage (n <= 0: all).
func (e *Engine) lineage(ctx context.Context, id uuid.UUID, n int) ([]CheckpointInfo, error) {
	infos, err := e.store.Lineage(ctx, id, n)
	if err != nil {
		return nil, fmt.Errorf("lineage of checkpoint %s: %w", id, err)
	}
	if err := e.openInfosOfThreads(ctx, infos); err != nil {
		return nil, fmt.Errorf("lineage of checkpoint %s: %w", id, err)
	}
	for i := range infos {
		unescapeInfo(&infos[i])
	}
	return infos, nil
}

// LinePage reports whether infos, a checkpoint and the checkpoints written
// before it in its thread and namespace, newest first, read for a page of
// its lineage of at most limit checkpoints, are that page: each the parent
// of the one before, and the walk ending there (limit of them, or a first
// checkpoint with no parent). A store reads a page of a lineage so where
// it can (one range of an index, where a walk looks each parent up), and
// walks the parents when LinePage says no: a rewind within the range, a
// deleted parent, a lineage that goes on into a branch's source.
func LinePage(infos []CheckpointInfo, limit int) bool {
	if len(infos) == 0 {
		return false
	}
	for i := 1; i < len(infos); i++ {
		if infos[i-1].ParentID != infos[i].ID {
			return false
		}
	}
	return len(infos) == limit || infos[len(infos)-1].ParentID == uuid.Nil
}

// BranchResult describes a new branch.
type BranchResult struct {
	// ThreadID is the branch's thread: "<source thread>-branch-<name>-<12 hex>".
	ThreadID string
	// CheckpointID is the branch's first checkpoint: the source's content,
	// with the source as parent.
	CheckpointID uuid.UUID
	Step         int64
}

// Branch forks a new thread from checkpoint fromID. Its first checkpoint
// has the source's content and the source as parent, in the source's
// namespace (merge it back with MergeBranchIn in that namespace); the
// thread records the branch name and the source. It holds the source's
// thread while it writes (on Postgres, that thread's lock too), so a
// retention policy applied meanwhile either sees the branch and keeps its
// source or deletes the source first. A branch of an encrypted thread gets
// its own data key first (its content is its source's, sealed), so a
// client without the key cannot write plaintext into it (see
// ErrEncrypted); the stores, and thread_branch from SQL, refuse such a
// branch to an id without a key. Errors: ErrNotFound for an unknown
// source (or one deleted meanwhile); ErrEncrypted from an Engine without
// Config.Encryption for a source in an encrypted thread; ErrInvalidInput for an empty or
// over-long name; ErrTransient (retry it) under REPEATABLE READ or
// SERIALIZABLE when the source's thread changed after the transaction's
// snapshot, or, on Postgres, when the source's id moved to another thread
// while the call waited for its lock.
func (e *Engine) Branch(ctx context.Context, fromID uuid.UUID, name string) (_ BranchResult, err error) {
	ctx, done := e.tel.call(ctx, "Branch")
	defer func() { done(err) }()
	if err := checkID("branch name", name, false); err != nil {
		return BranchResult{}, fmt.Errorf("branch: %w", err)
	}
	// The source's thread names the branch; its content is not needed here.
	line, err := e.lineage(ctx, fromID, 1)
	if err != nil {
		return BranchResult{}, fmt.Errorf("branch: source: %w", err)
	}
	if len(line) == 0 {
		return BranchResult{}, fmt.Errorf("branch: source checkpoint %s: %w", fromID, ErrNotFound)
	}
	src := line[0]
	// Whether the source's thread is encrypted: an Engine without the key
	// would leave a branch holding its sealed values that it then writes
	// plaintext onto; an encrypting one gives such a branch its key.
	keyed, sealed, err := e.sourceSealed(ctx, src.ThreadID, fromID)
	switch {
	case err != nil:
		return BranchResult{}, fmt.Errorf("branch: source: %w", err)
	case sealed && e.crypt == nil:
		return BranchResult{}, fmt.Errorf("branch: %w", threadEncrypted(src.ThreadID))
	}
	suffix := make([]byte, 6) // thousands of branches of a thread: no two alike
	_, _ = rand.Read(suffix)
	tail := "-branch-" + name + "-" + hex.EncodeToString(suffix)
	prefix := src.ThreadID
	for utf8.RuneCountInString(prefix+tail) > maxIDLength && prefix != "" {
		_, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
	}
	if utf8.RuneCountInString(prefix+tail) > maxIDLength {
		return BranchResult{}, fmt.Errorf("branch: %w: name %q is too long for a thread id", ErrInvalidInput, name)
	}
	newID := prefix + tail
	if keyed {
		// The branch holds its source's sealed values: encrypted from its
		// first checkpoint on, which no client without the key writes
		// plaintext onto, its key made first (the stores refuse a branch
		// of an encrypted thread to an id without one). Should the branch
		// then fail, the key's row stays, as a deleted thread's does.
		if _, err := e.dataKey(ctx, newID, true); err != nil {
			return BranchResult{}, fmt.Errorf("branch %q from checkpoint %s: data key: %w", name, fromID, err)
		}
	}
	r, err := e.store.Branch(ctx, fromID, newID, name, NewCheckpointID())
	if err != nil {
		return BranchResult{}, fmt.Errorf("branch %q from checkpoint %s: %w", name, fromID, err)
	}
	if sealed && !keyed {
		// Ciphertext in a thread without a key of its own: the branch's
		// key now, not at its first write. Should that fail, the first
		// encrypted write makes it. (A branch of a thread written before
		// encryption was on gets none: an Engine without encryption
		// reads and goes on with it.)
		if _, err := e.dataKey(ctx, r.ThreadID, true); err != nil {
			e.crypt.log.LogAttrs(ctx, slog.LevelWarn, "pgcheckpoint: a new branch's data key was not made; its first encrypted write will make it",
				slog.String("thread_id", termsafe.Text(r.ThreadID)), slog.Any("error", loggedError{err}))
		}
	}
	return r, nil
}

// BranchInfo is a branch forked from a thread.
type BranchInfo struct {
	ThreadID string
	// Namespace is the source checkpoint's, where the branch's line is
	// (see MergeBranchIn).
	Namespace string
	Name      string
	FromID    uuid.UUID // the checkpoint it was forked from
	CreatedAt time.Time
}

// Branches lists the branches forked from a thread, from any of its
// namespaces, oldest first.
func (e *Engine) Branches(ctx context.Context, threadID string) (_ []BranchInfo, err error) {
	ctx, done := e.tel.call(ctx, "Branches", attrThread.String(threadID))
	defer func() { done(err) }()
	if err := checkID("thread id", threadID, false); err != nil {
		return nil, fmt.Errorf("branches: %w", err)
	}
	branches, err := e.store.Branches(ctx, threadID)
	if err != nil {
		return nil, fmt.Errorf("branches of thread %q: %w", threadID, err)
	}
	return branches, nil
}

// MergeResult describes a merge checkpoint.
type MergeResult struct {
	ThreadID      string
	CheckpointID  uuid.UUID
	ParentID      uuid.UUID // the target thread's head before the merge
	MergeParentID uuid.UUID // the branch's head, whose content was merged
	Step          int64
}

// MergeBranch is MergeBranchIn for the root namespace.
func (e *Engine) MergeBranch(ctx context.Context, branchThread, intoThread string) (_ MergeResult, err error) {
	ctx, done := e.tel.call(ctx, "MergeBranch")
	defer func() { done(err) }()
	return e.mergeBranch(ctx, branchThread, intoThread, "")
}

// MergeBranchIn writes, on intoThread's namespace, a checkpoint with the
// content of branchThread's head in that same namespace. Its parent is
// intoThread's head there and its merge parent the branch head, so the tree
// shows both; other namespaces are untouched. Errors: ErrNotFound for a
// branch with no checkpoint in namespace, or an intoThread with none there
// (a merge creates no thread, and writes nothing then); ErrInvalidInput for
// a merge of a thread into itself or a malformed thread id or namespace.
// Under encryption the engine reads the branch head and writes its content
// sealed under intoThread's own key (see Config.Encryption), so the merge
// reads on after the branch is deleted; ErrEncrypted when the head does not
// open, ErrSnapshotTooLarge when its content with the merge's own summary
// ("Merge of ...") and tag is over Config.MaxSnapshotBytes (the limit of
// any write).
func (e *Engine) MergeBranchIn(ctx context.Context, branchThread, intoThread, namespace string) (_ MergeResult, err error) {
	ctx, done := e.tel.call(ctx, "MergeBranchIn", attrNamespace.String(namespace))
	defer func() { done(err) }()
	return e.mergeBranch(ctx, branchThread, intoThread, namespace)
}

func (e *Engine) mergeBranch(ctx context.Context, branchThread, intoThread, namespace string) (MergeResult, error) {
	for _, t := range []string{branchThread, intoThread} {
		if err := checkID("thread id", t, false); err != nil {
			return MergeResult{}, fmt.Errorf("merge: %w", err)
		}
	}
	if err := checkNamespace(namespace); err != nil {
		return MergeResult{}, fmt.Errorf("merge: %w", err)
	}
	// One id for every attempt: a retried merge whose first attempt
	// committed finds it (a write of that id is a no-op).
	id := NewCheckpointID()
	var r MergeResult
	err := e.cfg.Retry.retry(ctx, func() (err error) {
		if e.crypt != nil {
			r, err = e.mergeSealed(ctx, branchThread, intoThread, namespace, id)
		} else {
			r, err = e.store.Merge(ctx, branchThread, intoThread, namespace, id)
		}
		return err
	})
	if errors.Is(err, ErrIDConflict) {
		// The id is this call's own: a conflict on it is an attempt that
		// committed unacknowledged, then a retry that read another
		// branch head. The merge stands.
		if line, lerr := e.store.Lineage(ctx, id, 1); lerr == nil && len(line) == 1 && line[0].ThreadID == intoThread && line[0].MergeParentID != uuid.Nil {
			c := line[0]
			return MergeResult{ThreadID: intoThread, CheckpointID: id, ParentID: c.ParentID, MergeParentID: c.MergeParentID, Step: c.Step}, nil
		}
	}
	if err != nil {
		return MergeResult{}, fmt.Errorf("merge thread %q into %q (namespace %q): %w", branchThread, intoThread, namespace, err)
	}
	return r, nil
}

// Tree is a thread's checkpoints and those of the branches forked from it.
type Tree struct {
	ThreadID string
	Nodes    []TreeNode
	Edges    []TreeEdge
}

// TreeNode is one checkpoint of a Tree.
type TreeNode struct {
	ID        uuid.UUID
	ThreadID  string
	Namespace string
	Seq       int64
	Step      int64
	CreatedAt time.Time
	Trigger   Trigger
	Tags      []string
	Summary   string
	IsHead    bool      // the head of its thread and namespace
	ParentID  uuid.UUID // zero for a thread's first checkpoint
	// MergeParentID is, for a merge checkpoint, the head of the branch
	// merged in; zero otherwise.
	MergeParentID uuid.UUID
}

// TreeEdge links a parent to a child. Merge marks the edge from a merged
// branch's head to the merge checkpoint.
type TreeEdge struct {
	From, To uuid.UUID
	Merge    bool
}

// Tree returns every checkpoint of a thread and of the branches forked from
// it (recursively), in every namespace (each node names its own), with the
// edges between them, read in one query. An edge
// whose parent lies outside the tree (the source of a branch whose tree is
// asked for) is left out. Errors: ErrNotFound for a thread with no
// checkpoint.
func (e *Engine) Tree(ctx context.Context, threadID string) (_ *Tree, err error) {
	ctx, done := e.tel.call(ctx, "Tree", attrThread.String(threadID))
	defer func() { done(err) }()
	if err := checkID("thread id", threadID, false); err != nil {
		return nil, fmt.Errorf("tree: %w", err)
	}
	nodes, err := e.store.Tree(ctx, threadID)
	if err != nil {
		return nil, fmt.Errorf("tree of thread %q: %w", threadID, err)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("tree of thread %q: %w", threadID, ErrNotFound)
	}
	t := &Tree{ThreadID: threadID, Nodes: nodes}
	in := make(map[uuid.UUID]bool, len(nodes))
	for _, n := range nodes {
		in[n.ID] = true
	}
	for _, n := range nodes {
		if in[n.ParentID] {
			t.Edges = append(t.Edges, TreeEdge{From: n.ParentID, To: n.ID})
		}
		if in[n.MergeParentID] {
			t.Edges = append(t.Edges, TreeEdge{From: n.MergeParentID, To: n.ID, Merge: true})
		}
	}
	return t, nil
}

// ClearMemory is ClearMemoryIn for the thread's root namespace.
func (e *Engine) ClearMemory(ctx context.Context, threadID string) (_ SnapshotResult, err error) {
	ctx, done := e.tel.call(ctx, "ClearMemory", attrThread.String(threadID))
	defer func() { done(err) }()
	return e.clearMemory(ctx, threadID, "")
}

// ClearMemoryIn appends to one namespace of a thread an empty checkpoint
// (no messages, empty state and tool results) whose metadata is
// {"memory_cleared": true}. It deletes nothing; ListCheckpoints with that
// namespace, metadata filter and Limit 1 finds the latest marker. Errors:
// those of Snapshot (ErrInvalidInput for a malformed thread id or
// namespace, with nothing written).
func (e *Engine) ClearMemoryIn(ctx context.Context, threadID, namespace string) (_ SnapshotResult, err error) {
	ctx, done := e.tel.call(ctx, "ClearMemoryIn", attrThread.String(threadID), attrNamespace.String(namespace))
	defer func() { done(err) }()
	return e.clearMemory(ctx, threadID, namespace)
}

func (e *Engine) clearMemory(ctx context.Context, threadID, namespace string) (SnapshotResult, error) {
	return e.Snapshot(ctx, SnapshotInput{
		ThreadID:  threadID,
		Namespace: namespace,
		Trigger:   TriggerManual,
		Tags:      []string{"memory_cleared"},
		Summary:   "Memory cleared",
		Metadata:  json.RawMessage(`{"memory_cleared": true}`),
	})
}

// Diff is what changed from one checkpoint to another.
type Diff struct {
	From, To uuid.UUID
	// MessagesAdded are the messages of To after the longest prefix the two
	// share; MessagesRemoved those of From after it (empty for an append).
	MessagesAdded   []json.RawMessage
	MessagesRemoved []json.RawMessage
	State           KeyDiff
	ToolResults     KeyDiff
}

// KeyDiff lists the top-level keys of a JSON object that were added,
// removed, or changed value, each sorted.
type KeyDiff struct {
	Added, Removed, Changed []string
}

// Diff compares checkpoint a with checkpoint b. Errors: ErrNotFound.
func (e *Engine) Diff(ctx context.Context, a, b uuid.UUID) (_ *Diff, err error) {
	ctx, done := e.tel.call(ctx, "Diff")
	defer func() { done(err) }()
	from, err := e.Get(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	to, err := e.Get(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	var am, bm []json.RawMessage
	if err := json.Unmarshal(from.Messages, &am); err != nil {
		return nil, fmt.Errorf("diff: messages of %s: %w", a, err)
	}
	if err := json.Unmarshal(to.Messages, &bm); err != nil {
		return nil, fmt.Errorf("diff: messages of %s: %w", b, err)
	}
	common := 0
	for common < len(am) && common < len(bm) && jsontext.Same(am[common], bm[common]) {
		common++
	}
	d := &Diff{From: a, To: b, MessagesAdded: bm[common:], MessagesRemoved: am[common:]}
	if d.State, err = keyDiff(from.State, to.State); err != nil {
		return nil, fmt.Errorf("diff: state: %w", err)
	}
	if d.ToolResults, err = keyDiff(from.ToolResults, to.ToolResults); err != nil {
		return nil, fmt.Errorf("diff: tool results: %w", err)
	}
	return d, nil
}

// keyDiff compares two JSON objects key by key; values are compared as
// JSON (jsontext.Same), whatever their spelling.
func keyDiff(a, b json.RawMessage) (KeyDiff, error) {
	var am, bm map[string]json.RawMessage
	if err := json.Unmarshal(a, &am); err != nil {
		return KeyDiff{}, err
	}
	if err := json.Unmarshal(b, &bm); err != nil {
		return KeyDiff{}, err
	}
	var d KeyDiff
	for k, bv := range bm {
		av, ok := am[k]
		switch {
		case !ok:
			d.Added = append(d.Added, k)
		case !jsontext.Same(av, bv):
			d.Changed = append(d.Changed, k)
		}
	}
	for k := range am {
		if _, ok := bm[k]; !ok {
			d.Removed = append(d.Removed, k)
		}
	}
	slices.Sort(d.Added)
	slices.Sort(d.Removed)
	slices.Sort(d.Changed)
	return d, nil
}

// CopyResult says what CopyThread copied.
type CopyResult struct {
	// Copied is the number of checkpoints copied, len(IDs).
	Copied int64
	// IDs pairs every checkpoint of the source with its copy, in namespace
	// then write order (the order of the source's rows).
	IDs []CopiedID
}

// CopiedID is one checkpoint copied by CopyThread: Old in the source
// thread, New its copy in the new thread.
type CopiedID struct {
	Old, New uuid.UUID
}

// CopyIDs is the id rule of a thread copy, shared by the stores'
// CopyThread and the Engine's copy of an encrypted thread: each checkpoint
// of the source gets a new id (ids are global), and a link (parent, merge
// parent, delta base, rewind target) to a checkpoint of the source goes to
// its copy, while a link out of the source (a branch's source, a merged
// branch's head) is kept. The Postgres store applies the same rule in SQL
// (pgcheckpoint.thread_copy).
type CopyIDs struct {
	ids map[uuid.UUID]uuid.UUID
	// Pairs is every source id with its copy's, in the order given to
	// NewCopyIDs.
	Pairs []CopiedID
}

// NewCopyIDs gives each of old, the checkpoints of the source in namespace
// then write order, a new id (NewCheckpointID, so the copies keep that
// order).
func NewCopyIDs(old []uuid.UUID) CopyIDs {
	m := CopyIDs{ids: make(map[uuid.UUID]uuid.UUID, len(old)), Pairs: make([]CopiedID, len(old))}
	for i, id := range old {
		m.ids[id] = NewCheckpointID()
		m.Pairs[i] = CopiedID{Old: id, New: m.ids[id]}
	}
	return m
}

// Lookup returns the id of the copy of checkpoint id, and false when id is
// not a checkpoint of the source.
func (m CopyIDs) Lookup(id uuid.UUID) (uuid.UUID, bool) {
	n, ok := m.ids[id]
	return n, ok
}

// Link returns what a link to id becomes in the copy: the copy's id for a
// checkpoint of the source, id itself for any other (uuid.Nil included).
func (m CopyIDs) Link(id uuid.UUID) uuid.UUID {
	if n, ok := m.ids[id]; ok {
		return n
	}
	return id
}

// NewID returns the id of the copy of checkpoint old, and false when old
// was not copied (it is not in the source thread).
func (r CopyResult) NewID(old uuid.UUID) (uuid.UUID, bool) {
	for _, p := range r.IDs {
		if p.Old == old {
			return p.New, true
		}
	}
	return uuid.UUID{}, false
}

// CopyThread copies thread src, all of it, to a new thread dst: checkpoints
// in the same order with the same steps, content, metadata and pending
// writes. The copies get new checkpoint ids, because ids are global (Get and
// retried writes look them up alone); parent, merge parent and delta base
// links inside src are mapped to the new ids, links outside it (a branch's
// source) are kept. src is not changed. It returns every old id with its
// copy's. All of it is copied in one transaction, or nothing.
//
// An Engine that encrypts copies through itself (see copySealed): every
// value is opened with src's data key and sealed again under a new data key
// of dst, bound to dst and to the copy of the checkpoint that wrote it, so
// the copy reads as src does, and a ciphertext moved between the two
// threads still fails with ErrEncrypted. Deltas stay deltas.
//
// Errors: ErrNotFound for an unknown src; ErrInvalidInput when dst exists
// (or had a data key, shredded since) or is src; ErrEncrypted, with nothing
// written, when src's content does not open under its key; ErrPermission
// for a database role that may not write.
func (e *Engine) CopyThread(ctx context.Context, src, dst string) (_ CopyResult, err error) {
	ctx, done := e.tel.call(ctx, "CopyThread")
	defer func() { done(err) }()
	for _, t := range []string{src, dst} {
		if err := checkID("thread id", t, false); err != nil {
			return CopyResult{}, fmt.Errorf("copy thread: %w", err)
		}
	}
	copyThread := e.store.CopyThread
	if e.crypt != nil {
		copyThread = e.copySealed
	}
	ids, err := copyThread(ctx, src, dst)
	if err != nil {
		return CopyResult{}, fmt.Errorf("copy thread %q to %q: %w", src, dst, err)
	}
	return CopyResult{Copied: int64(len(ids)), IDs: ids}, nil
}
