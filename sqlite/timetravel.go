package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// Rewind makes checkpoint id its thread's head; it deletes nothing unless
// truncate, which deletes only the checkpoints after id on the old head's
// line, in the same transaction. Errors: engine.ErrNotFound.
func (s *Store) Rewind(ctx context.Context, id uuid.UUID, truncate bool) (*engine.RewindResult, error) {
	var res *engine.RewindResult
	err := s.write(ctx, func(q *queries, _ execer) (err error) {
		res, err = rewind(ctx, q, id, truncate)
		return err
	})
	return res, err
}

// RewindToStep rewinds a thread and namespace to the checkpoint with the
// greatest step at or below step on its head's line (see findOnHeadLine),
// found in the rewind's write transaction. Errors: engine.ErrNotFound.
func (s *Store) RewindToStep(ctx context.Context, threadID, namespace string, step int64) (uuid.UUID, *engine.RewindResult, error) {
	var id uuid.UUID
	var res *engine.RewindResult
	err := s.write(ctx, func(q *queries, _ execer) (err error) {
		if id, err = findOnHeadLine(ctx, q, threadID, namespace, step); err != nil {
			return err
		}
		res, err = rewind(ctx, q, id, false)
		return err
	})
	return id, res, err
}

// rewind is Rewind inside a write transaction.
func rewind(ctx context.Context, q *queries, id uuid.UUID, truncate bool) (*engine.RewindResult, error) {
	l, err := q.CheckpointLinkByID(ctx, id)
	if err != nil {
		return nil, dbError(fmt.Sprintf("checkpoint %s", id), err)
	}
	head, err := q.CheckpointLinkHead(ctx, sqlitedb.CheckpointLinkHeadParams{ThreadID: l.ThreadID, Namespace: l.Namespace})
	if err != nil {
		return nil, dbError("read the head", err)
	}
	count, err := q.CheckpointCount(ctx, sqlitedb.CheckpointCountParams{ThreadID: l.ThreadID, Namespace: l.Namespace})
	if err != nil {
		return nil, dbError("count checkpoints", err)
	}
	var truncated int64
	if truncate && head.CheckpointID != id {
		// Steps fall by one per link: the target is at most this deep.
		line, err := q.CheckpointLineage(ctx, sqlitedb.CheckpointLineageParams{
			CheckpointID: head.CheckpointID, MaxDepth: max(head.Step-l.Step, 0),
		})
		if err != nil {
			return nil, dbError("read the head's line", err)
		}
		var ids []uuid.UUID // newest first
		for _, c := range line {
			if c.CheckpointID == id {
				if truncated, err = truncateLine(ctx, q, l.ThreadID, l.Namespace, ids); err != nil {
					return nil, err
				}
				break
			}
			if c.ThreadID == l.ThreadID && c.Namespace == l.Namespace {
				ids = append(ids, c.CheckpointID)
			}
		}
	}
	if err := q.ThreadSetRewoundTo(ctx, sqlitedb.ThreadSetRewoundToParams{
		RewoundTo: nullID(id), ThreadID: l.ThreadID, Namespace: l.Namespace,
	}); err != nil {
		return nil, dbError("rewind the thread", err)
	}
	return &engine.RewindResult{ThreadID: l.ThreadID, Namespace: l.Namespace, StepsBack: head.Step - l.Step,
		Checkpoints: count, Truncated: truncated}, nil
}

// truncateLine deletes line (checkpoints of a thread and namespace, newest
// first, down to a rewind's target) as checkpoint_rewind does: from the
// newest back to the newest one that another checkpoint of the thread has
// as parent or a branch was forked from, which stays with all that is
// older: other lines of the thread and its branches keep what they build
// on.
func truncateLine(ctx context.Context, q *queries, threadID, namespace string, line []uuid.UUID) (int64, error) {
	if len(line) == 0 {
		return 0, nil
	}
	used, err := q.CheckpointsBuiltOn(ctx, threadID, namespace, line)
	if err != nil {
		return 0, dbError("read what the thread builds on", err)
	}
	for i, id := range line {
		if slices.Contains(used, id.String()) { // used: a few of line
			line = line[:i]
			break
		}
	}
	return deleteCheckpoints(ctx, q, line)
}

// findOnHeadLine returns the checkpoint with the greatest step at or below
// step on the line from the head of a thread and namespace back to its
// first checkpoint, within that thread and namespace. Errors:
// engine.ErrNotFound.
func findOnHeadLine(ctx context.Context, q *queries, threadID, namespace string, step int64) (uuid.UUID, error) {
	head, err := q.CheckpointLinkHead(ctx, sqlitedb.CheckpointLinkHeadParams{ThreadID: threadID, Namespace: namespace})
	if err != nil {
		return uuid.Nil, dbError(fmt.Sprintf("thread %q namespace %q", threadID, namespace), err)
	}
	line, err := q.CheckpointLineage(ctx, sqlitedb.CheckpointLineageParams{
		CheckpointID: head.CheckpointID, MaxDepth: max(head.Step-step, 0),
	})
	if err != nil {
		return uuid.Nil, dbError("read the head's line", err)
	}
	for _, c := range line {
		if c.Step <= step && c.ThreadID == threadID && c.Namespace == namespace {
			return c.CheckpointID, nil
		}
	}
	return uuid.Nil, fmt.Errorf("thread %q namespace %q: no checkpoint at or below step %d on the head's line: %w",
		threadID, namespace, step, engine.ErrNotFound)
}

// Lineage returns checkpoint id and its ancestors, newest first, across
// branch threads, at most limit of them (limit <= 0: all); an unknown id
// gives an empty list. Format is left empty, as on Postgres. A page
// (limit > 0) is first read as a range of the thread's rows by seq, kept
// when engine.LinePage says it is the page; otherwise the parents are
// walked one by one.
func (s *Store) Lineage(ctx context.Context, id uuid.UUID, limit int) ([]engine.CheckpointInfo, error) {
	rq, err := s.readQueries()
	if err != nil {
		return nil, err
	}
	if limit > 0 {
		rows, err := rq.CheckpointLineRange(ctx, sqlitedb.CheckpointLineRangeParams{CheckpointID: id, MaxRows: int64(limit)})
		if err != nil {
			return nil, dbError(fmt.Sprintf("lineage of checkpoint %s", id), err)
		}
		if len(rows) == 0 {
			return nil, nil
		}
		out := make([]engine.CheckpointInfo, len(rows))
		for i, r := range rows {
			if out[i], err = checkpointInfo(r.ThreadID, r.Namespace, r.Seq, r.CheckpointID, r.ParentCheckpointID, r.MergeParentID,
				r.Step, r.CreatedAt, r.Trigger, r.Tags, r.Summary, r.Metadata, r.NextNode, r.SizeBytes, r.Format); err != nil {
				return nil, err
			}
		}
		if engine.LinePage(out, limit) {
			return out, nil
		}
	}
	maxDepth := int64(-1)
	if limit > 0 {
		maxDepth = int64(limit - 1)
	}
	rows, err := rq.CheckpointLineage(ctx, sqlitedb.CheckpointLineageParams{CheckpointID: id, MaxDepth: maxDepth})
	if err != nil {
		return nil, dbError(fmt.Sprintf("lineage of checkpoint %s", id), err)
	}
	out := make([]engine.CheckpointInfo, len(rows))
	for i, r := range rows {
		if out[i], err = checkpointInfo(r.ThreadID, r.Namespace, r.Seq, r.CheckpointID, r.ParentCheckpointID, r.MergeParentID,
			r.Step, r.CreatedAt, r.Trigger, r.Tags, r.Summary, r.Metadata, r.NextNode, r.SizeBytes, r.Format); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Tree returns the checkpoints of a thread and of the branches forked from
// it, recursively, in thread, namespace and write order.
func (s *Store) Tree(ctx context.Context, threadID string) ([]engine.TreeNode, error) {
	rq, err := s.readQueries()
	if err != nil {
		return nil, err
	}
	rows, err := rq.ThreadTree(ctx, threadID)
	if err != nil {
		return nil, dbError(fmt.Sprintf("tree of thread %q", threadID), err)
	}
	out := make([]engine.TreeNode, len(rows))
	for i, r := range rows {
		info, err := checkpointInfo(r.ThreadID, r.Namespace, r.Seq, r.CheckpointID, r.ParentCheckpointID, r.MergeParentID,
			r.Step, r.CreatedAt, r.Trigger, r.Tags, r.Summary, "{}", "", 0, "")
		if err != nil {
			return nil, err
		}
		out[i] = engine.TreeNode{
			ID: info.ID, ThreadID: info.ThreadID, Namespace: info.Namespace, Seq: info.Seq, Step: info.Step,
			CreatedAt: info.CreatedAt, Trigger: info.Trigger, Tags: info.Tags, Summary: info.Summary,
			IsHead: r.IsHead != 0, ParentID: info.ParentID, MergeParentID: info.MergeParentID,
		}
	}
	return out, nil
}

// Branch creates thread newThreadID whose first checkpoint, id, has the
// content of fromID (stored whole: deltas never cross threads) and fromID
// as parent. Errors: engine.ErrNotFound for an unknown source;
// engine.ErrInvalidInput when newThreadID exists; engine.ErrIDConflict
// when id is in use.
func (s *Store) Branch(ctx context.Context, fromID uuid.UUID, newThreadID, name string, id uuid.UUID) (engine.BranchResult, error) {
	var res engine.BranchResult
	err := s.write(ctx, func(q *queries, _ execer) error {
		src, err := q.CheckpointGetByID(ctx, fromID)
		if err != nil {
			return dbError(fmt.Sprintf("source checkpoint %s", fromID), err)
		}
		if err := threadIsNew(ctx, q, newThreadID); err != nil {
			return err
		}
		if err := branchKeys(ctx, q, src.ThreadID, newThreadID); err != nil {
			return err
		}
		if _, err := q.CheckpointLinkByID(ctx, id); err == nil {
			return fmt.Errorf("checkpoint %s already exists: %w", id, engine.ErrIDConflict)
		}
		c, err := materialize(ctx, q, storedOf(src))
		if err != nil {
			return err
		}
		now := s.now().UnixMicro()
		if err := q.ThreadInsert(ctx, sqlitedb.ThreadInsertParams{
			ThreadID: newThreadID, Namespace: src.Namespace, Metadata: "{}", CreatedAt: now,
			BranchName: sql.NullString{String: name, Valid: true}, BranchedFrom: nullID(fromID),
			BranchedFromThread: sql.NullString{String: src.ThreadID, Valid: true}, ExpireAction: "delete",
		}); err != nil {
			return dbError("insert the branch thread", err)
		}
		tags, _ := json.Marshal([]string{"branch", name})
		row := sqlitedb.CheckpointInsertParams{
			ThreadID: newThreadID, Namespace: src.Namespace, Seq: 1, CheckpointID: id, ParentCheckpointID: nullID(fromID),
			Step: src.Step + 1, CreatedAt: now, Trigger: string(engine.TriggerManual), Tags: string(tags),
			Summary: fmt.Sprintf("Branch %s from %s", quoteLiteral(name), fromID), NextNode: src.NextNode,
			SizeBytes: src.SizeBytes, MessagesCount: src.MessagesCount, MessagesDigest: src.MessagesDigest,
			StateDigests: src.StateDigests, ToolResultsDigests: src.ToolResultsDigests, Metadata: src.Metadata,
		}
		setStored(&row, storeWhole(c))
		if err := q.CheckpointInsert(ctx, row); err != nil {
			return dbError("insert the branch's first checkpoint", err)
		}
		res = engine.BranchResult{ThreadID: newThreadID, CheckpointID: id, Step: row.Step}
		return nil
	})
	return res, err
}

// threadIsNew returns engine.ErrInvalidInput when a thread exists.
func threadIsNew(ctx context.Context, q *queries, threadID string) error {
	found, err := q.ThreadExists(ctx, threadID)
	if err != nil {
		return dbError("look for the thread", err)
	}
	if found != 0 {
		return fmt.Errorf("%w: thread %q already exists", engine.ErrInvalidInput, threadID)
	}
	return nil
}

// quoteLiteral quotes s as Postgres quote_literal does, so branch
// summaries read the same on both stores.
func quoteLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		return "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}

// Branches lists the branches forked from a thread, oldest first.
func (s *Store) Branches(ctx context.Context, threadID string) ([]engine.BranchInfo, error) {
	rq, err := s.readQueries()
	if err != nil {
		return nil, err
	}
	rows, err := rq.ThreadListBranches(ctx, sql.NullString{String: threadID, Valid: true})
	if err != nil {
		return nil, dbError(fmt.Sprintf("branches of thread %q", threadID), err)
	}
	out := make([]engine.BranchInfo, len(rows))
	for i, r := range rows {
		out[i] = engine.BranchInfo{ThreadID: r.ThreadID, Namespace: r.Namespace, Name: r.BranchName.String, FromID: r.BranchedFrom.UUID,
			CreatedAt: fromMicros(r.CreatedAt)}
	}
	return out, nil
}

// Merge writes checkpoint id on intoThread, in namespace, with the content
// of branchThread's head in that namespace, intoThread's head there as
// parent and the branch head as merge parent; it is a write like Put (a
// retried id is a no-op). Errors: engine.ErrNotFound for a branch with no
// checkpoint in namespace; engine.ErrInvalidInput for a thread merged into
// itself; engine.ErrEncrypted for an encrypted branch or target (see
// refusePlaintext).
func (s *Store) Merge(ctx context.Context, branchThread, intoThread, namespace string, id uuid.UUID) (engine.MergeResult, error) {
	var res engine.MergeResult
	err := s.write(ctx, func(q *queries, _ execer) error {
		src, err := headRow(ctx, q, branchThread, namespace)
		if err != nil {
			return dbError(fmt.Sprintf("branch thread %q has no checkpoint in namespace %q", branchThread, namespace), err)
		}
		if branchThread == intoThread {
			return fmt.Errorf("%w: cannot merge thread %q into itself", engine.ErrInvalidInput, intoThread)
		}
		// Its values are bound to its checkpoints and key: copied as they
		// are, they would read nowhere in the target (an encrypting Engine
		// merges by a Put of the content sealed for the target).
		if keyed, err := hasDataKey(ctx, q, branchThread); err != nil {
			return err
		} else if keyed {
			return fmt.Errorf("%w: thread %q is encrypted: merge it through an engine opened with its key", engine.ErrEncrypted, branchThread)
		}
		c, err := materialize(ctx, q, storedOf(src))
		if err != nil {
			return err
		}
		p := engine.PutRequest{
			ThreadID: intoThread, Namespace: namespace, ID: id, Trigger: engine.TriggerManual, Tags: []string{"merge"},
			Summary: "Merge of " + branchThread, Metadata: json.RawMessage(src.Metadata), Messages: c.Messages,
			State: c.State, ToolResults: c.ToolResults, NextNode: src.NextNode, SizeBytes: src.SizeBytes, DeltaRun: 1,
			// Values copied as stored, sealed or not: an encrypted target
			// refuses them (see refusePlaintext). An encrypting Engine
			// merges by a Put of the content sealed for the target.
			Sealed: false,
			// Which put checks: the target has a head to merge onto.
			MergeParentID: src.CheckpointID,
			// Stored whole, without digests, as thread_merge stores it
			// (digests of the stored text, which SQL would compute, are
			// not the engine's; DeltaRun 1 above).
		}
		put, err := s.put(ctx, q, p)
		if err != nil {
			return err
		}
		res = engine.MergeResult{ThreadID: intoThread, CheckpointID: id, ParentID: put.ParentID,
			MergeParentID: src.CheckpointID, Step: put.Step}
		return nil
	})
	return res, err
}

// CopyThread copies every row of thread src to a new thread dst with new
// checkpoint ids (UUIDv7), parents, merge parents and delta bases mapped to
// them (links outside the thread kept), in one transaction. Deltas are
// copied as deltas. It returns each source id with its copy's, in namespace
// then write order. Errors: engine.ErrNotFound for an unknown src;
// engine.ErrInvalidInput when dst exists, is src or has a data key (see
// keylessTarget); engine.ErrEncrypted for an encrypted src.
func (s *Store) CopyThread(ctx context.Context, src, dst string) ([]engine.CopiedID, error) {
	if src == dst {
		return nil, fmt.Errorf("%w: cannot copy thread %q onto itself", engine.ErrInvalidInput, src)
	}
	var copied []engine.CopiedID
	err := s.write(ctx, func(q *queries, _ execer) error {
		threads, err := q.ThreadListRows(ctx, src)
		if err != nil {
			return dbError("read the thread", err)
		}
		if len(threads) == 0 {
			return fmt.Errorf("thread %q: %w", src, engine.ErrNotFound)
		}
		if err := threadIsNew(ctx, q, dst); err != nil {
			return err
		}
		// Values are copied as stored, bound to the source's checkpoints
		// and key: an encrypting Engine copies by sealing them again.
		if keyed, err := hasDataKey(ctx, q, src); err != nil {
			return err
		} else if keyed {
			return fmt.Errorf("%w: thread %q is encrypted: copy it through an engine opened with its key", engine.ErrEncrypted, src)
		}
		if err := keylessTarget(ctx, q, dst); err != nil {
			return err
		}
		rows, err := q.CheckpointListWhole(ctx, src)
		if err != nil {
			return dbError("read the checkpoints", err)
		}
		old := make([]uuid.UUID, len(rows))
		for i, r := range rows {
			old[i] = r.CheckpointID
		}
		ids := engine.NewCopyIDs(old)
		copied = ids.Pairs
		mapped := func(id uuid.NullUUID) uuid.NullUUID {
			if id.Valid {
				return nullID(ids.Link(id.UUID))
			}
			return id
		}
		for _, t := range threads {
			rewound := uuid.NullUUID{}
			if n, ok := ids.Lookup(t.RewoundTo.UUID); ok && t.RewoundTo.Valid {
				rewound = nullID(n)
			}
			if err := q.ThreadInsert(ctx, sqlitedb.ThreadInsertParams{
				ThreadID: dst, Namespace: t.Namespace, RewoundTo: rewound, Metadata: t.Metadata, CreatedAt: t.CreatedAt,
				BranchName: t.BranchName, BranchedFrom: t.BranchedFrom, BranchedFromThread: t.BranchedFromThread,
				ExpireAction: "delete",
			}); err != nil {
				return dbError("insert the thread copy", err)
			}
		}
		for _, r := range rows {
			c := sqlitedb.CheckpointInsertParams(r)
			c.ThreadID, c.CheckpointID = dst, ids.Link(r.CheckpointID)
			c.ParentCheckpointID, c.MergeParentID = mapped(r.ParentCheckpointID), mapped(r.MergeParentID)
			c.BaseCheckpointID = mapped(r.BaseCheckpointID) // a base is always in the thread
			if err := q.CheckpointInsert(ctx, c); err != nil {
				return dbError("insert a checkpoint copy", err)
			}
		}
		writes, err := q.PendingWriteListByThread(ctx, src)
		if err != nil {
			return dbError("read pending writes", err)
		}
		for _, w := range writes {
			if _, err := q.PendingWriteInsert(ctx, sqlitedb.PendingWriteInsertParams{
				ThreadID: dst, Namespace: w.Namespace, CheckpointSeq: w.CheckpointSeq, CheckpointID: ids.Link(w.CheckpointID),
				TaskID: w.TaskID, Idx: w.Idx, Channel: w.Channel, Value: w.Value, CreatedAt: w.CreatedAt,
			}); err != nil {
				return dbError("copy a pending write", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return copied, nil
}
