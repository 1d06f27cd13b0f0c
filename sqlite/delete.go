package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// sliceChunk bounds the ids one statement takes (in one JSON array, see
// idList), so that no statement builds an unbounded list in memory.
const sliceChunk = 500

// chunks calls fn with ids a chunk at a time.
func chunks[T any](ids []T, fn func([]T) error) error {
	for len(ids) > 0 {
		n := min(len(ids), sliceChunk)
		if err := fn(ids[:n]); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// deleteCheckpoints is the one way the store deletes some checkpoints of a
// thread and keeps others, inside a write transaction. A kept delta whose
// base is deleted is first rewritten whole (a rebase), from what the table
// holds before the delete, so every kept checkpoint stays readable; a
// thread rewound to a deleted checkpoint is no longer rewound. It returns
// how many it deleted; unknown ids are skipped.
func deleteCheckpoints(ctx context.Context, q *queries, ids []uuid.UUID) (int64, error) {
	var d doomedSet
	for _, id := range ids {
		if d.doomed[id] {
			continue
		}
		l, err := q.CheckpointLinkByID(ctx, id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		} else if err != nil {
			return 0, dbError("read a checkpoint to delete", err)
		}
		d.add(l.ThreadID, l.Namespace, id)
	}
	return d.delete(ctx, q)
}

// doomedSet is what deleteCheckpoints deletes: ids grouped by thread and
// namespace, in the order first seen. A caller that has just read the
// rows (retention) fills it without looking each id up again.
type doomedSet struct {
	doomed map[uuid.UUID]bool
	groups map[threadNamespace][]uuid.UUID
	order  []threadNamespace
}

type threadNamespace struct{ thread, namespace string }

// add puts checkpoint id, of thread and namespace, in the set.
func (d *doomedSet) add(thread, namespace string, id uuid.UUID) {
	if d.doomed == nil {
		d.doomed, d.groups = map[uuid.UUID]bool{}, map[threadNamespace][]uuid.UUID{}
	}
	if d.doomed[id] {
		return
	}
	d.doomed[id] = true
	k := threadNamespace{thread, namespace}
	if d.groups[k] == nil {
		d.order = append(d.order, k)
	}
	d.groups[k] = append(d.groups[k], id)
}

// delete is deleteCheckpoints of the set: its kept deltas rebased, its
// rewinds cleared, its rows deleted.
func (d *doomedSet) delete(ctx context.Context, q *queries) (int64, error) {
	doomed, groups, order := d.doomed, d.groups, d.order
	if len(doomed) == 0 {
		return 0, nil
	}
	// Every orphan is rebuilt before anything changes.
	type rebase struct {
		id uuid.UUID
		c  content
	}
	var rebases []rebase
	for _, k := range order {
		err := chunks(groups[k], func(part []uuid.UUID) error {
			orphans, err := q.CheckpointListDeltasOn(ctx, k.thread, k.namespace, part)
			if err != nil {
				return dbError("find deltas to rebase", err)
			}
			for _, o := range orphans {
				if doomed[o] || slices.ContainsFunc(rebases, func(r rebase) bool { return r.id == o }) {
					continue
				}
				row, err := q.CheckpointGetByID(ctx, o)
				if err != nil {
					return dbError("read a delta to rebase", err)
				}
				c, err := materialize(ctx, q, storedOf(row))
				if err != nil {
					return err
				}
				rebases = append(rebases, rebase{o, c})
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	for _, r := range rebases {
		if err := q.CheckpointRewriteWhole(ctx, sqlitedb.CheckpointRewriteWholeParams{
			CheckpointID: r.id, Messages: string(r.c.Messages), State: string(r.c.State), ToolResults: string(r.c.ToolResults),
		}); err != nil {
			return 0, dbError("rebase a delta", err)
		}
	}
	var n int64
	for _, k := range order {
		err := chunks(groups[k], func(part []uuid.UUID) error {
			if err := q.ThreadClearRewoundTo(ctx, k.thread, k.namespace, part); err != nil {
				return dbError("un-rewind threads", err)
			}
			d, err := q.CheckpointDeleteMany(ctx, part)
			if err != nil {
				return dbError("delete checkpoints", err)
			}
			n += d
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// idList is ids as the statements that take many ids bind them: a JSON
// array of their canonical text, the form the id columns hold.
func idList(ids []uuid.UUID) string {
	b := make([]byte, 0, 2+len(ids)*39)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, id.String()...)
		b = append(b, '"')
	}
	return string(append(b, ']'))
}

// deleteThread deletes every row of a thread inside a write transaction.
func deleteThread(ctx context.Context, q *queries, threadID string) (int64, error) {
	n, err := q.CheckpointDeleteByThread(ctx, threadID)
	if err != nil {
		return 0, dbError(fmt.Sprintf("delete the checkpoints of thread %q", threadID), err)
	}
	if err := q.ThreadDelete(ctx, threadID); err != nil {
		return 0, dbError(fmt.Sprintf("delete thread %q", threadID), err)
	}
	return n, nil
}

// DeleteCheckpoints deletes the checkpoints q names (see
// engine.DeleteQuery) in one transaction.
func (s *Store) DeleteCheckpoints(ctx context.Context, q engine.DeleteQuery) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *queries, _ execer) error {
		var ids []uuid.UUID
		var err error
		if q.RunIDs != nil {
			ids, err = runCheckpoints(ctx, tx, q.RunIDs)
		} else {
			ids, err = checkpointsBefore(ctx, tx, q.ThreadID, q.Namespace, q.BeforeStep)
		}
		if err != nil {
			return err
		}
		n, err = deleteCheckpoints(ctx, tx, ids)
		return err
	})
	return n, err
}

// checkpointsBefore lists the checkpoints of a thread and namespace whose
// step is below step, except the head.
func checkpointsBefore(ctx context.Context, q *queries, threadID, namespace string, step int64) ([]uuid.UUID, error) {
	head, err := q.CheckpointLinkHead(ctx, sqlitedb.CheckpointLinkHeadParams{ThreadID: threadID, Namespace: namespace})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, dbError("read the head", err)
	}
	rows, err := q.CheckpointListForRetention(ctx, threadID)
	if err != nil {
		return nil, dbError("list checkpoints", err)
	}
	var ids []uuid.UUID
	for _, r := range rows {
		if r.Namespace == namespace && r.Step < step && r.Seq != head.Seq {
			ids = append(ids, r.CheckpointID)
		}
	}
	return ids, nil
}

// runCheckpoints lists the checkpoints whose metadata contains
// {"run_id": r} for one of runIDs (stored form), as Postgres @> decides.
func runCheckpoints(ctx context.Context, q *queries, runIDs []string) ([]uuid.UUID, error) {
	rows, err := q.CheckpointListWithRunID(ctx)
	if err != nil {
		return nil, dbError("find checkpoints by run id", err)
	}
	var ids []uuid.UUID
	for _, r := range rows {
		doc, err := jsontext.Decode([]byte(r.Metadata))
		if err != nil {
			return nil, fmt.Errorf("metadata of checkpoint %s: %w", r.CheckpointID, err)
		}
		for _, run := range runIDs {
			if jsontext.Contains(doc, map[string]any{"run_id": run}) {
				ids = append(ids, r.CheckpointID)
				break
			}
		}
	}
	return ids, nil
}

// PruneThreads applies a policy to each of threadIDs, all in one
// transaction.
func (s *Store) PruneThreads(ctx context.Context, threadIDs []string, p engine.Policy) (engine.DeleteResult, error) {
	return s.prune(ctx, threadIDs, p, false)
}

// PreviewPrune returns what PruneThreads would delete, deleting nothing:
// the same deletes in a write transaction that is rolled back.
func (s *Store) PreviewPrune(ctx context.Context, threadIDs []string, p engine.Policy) (engine.DeleteResult, error) {
	return s.prune(ctx, threadIDs, p, true)
}

// errPreview rolls a preview's transaction back.
var errPreview = errors.New("sqlite: a preview rolls back")

// prune is PruneThreads, or with preview PreviewPrune.
func (s *Store) prune(ctx context.Context, threadIDs []string, p engine.Policy, preview bool) (engine.DeleteResult, error) {
	var r engine.DeleteResult
	// Alone, as a sweep's batch (see sweepBatch); alone, fn runs once, so
	// it may add to r.
	err := s.writeAlone(ctx, func(q *queries, _ execer) error {
		now := s.now()
		for _, t := range threadIDs {
			d, err := pruneThread(ctx, q, t, p, now)
			if err != nil {
				return err
			}
			r.Deleted += d.Deleted
			r.IDs = append(r.IDs, d.IDs...)
		}
		if preview {
			return errPreview
		}
		return nil
	})
	if err != nil && !(preview && errors.Is(err, errPreview)) {
		return engine.DeleteResult{}, err // rolled back: nothing was deleted
	}
	return r, nil
}

// pruneThread deletes from a thread what a checked policy does not keep,
// inside a write transaction: what every path that applies a policy
// (PruneThreads, a sweep, an expiry) calls.
func pruneThread(ctx context.Context, q *queries, threadID string, p engine.Policy, now time.Time) (engine.DeleteResult, error) {
	var n int64
	var err error
	switch p.Name() {
	case "keep_all":
		return engine.DeleteResult{}, nil
	case "keep_none":
		n, err = deleteThread(ctx, q, threadID)
	case "keep_latest":
		n, err = keepHeads(ctx, q, threadID)
	default:
		deleted, err := applyPolicy(ctx, q, threadID, p, now)
		return engine.DeleteResult{Deleted: int64(len(deleted)), IDs: deleted}, err
	}
	return engine.DeleteResult{Deleted: n}, err
}

// keepHeads deletes every checkpoint of a thread but the head of each
// namespace.
func keepHeads(ctx context.Context, q *queries, threadID string) (int64, error) {
	heads, err := headSeqs(ctx, q, threadID)
	if err != nil {
		return 0, err
	}
	rows, err := q.CheckpointListForRetention(ctx, threadID)
	if err != nil {
		return 0, dbError("list checkpoints", err)
	}
	var ids []uuid.UUID
	for _, r := range rows {
		if h, ok := heads[r.Namespace]; ok && h != r.Seq {
			ids = append(ids, r.CheckpointID)
		}
	}
	return deleteCheckpoints(ctx, q, ids)
}

// headSeqs returns the seq of the head of each namespace of a thread that
// has a thread row.
func headSeqs(ctx context.Context, q *queries, threadID string) (map[string]int64, error) {
	ths, err := q.ThreadListRows(ctx, threadID)
	if err != nil {
		return nil, dbError("read the thread", err)
	}
	heads := make(map[string]int64, len(ths))
	for _, t := range ths {
		h, err := q.CheckpointLinkHead(ctx, sqlitedb.CheckpointLinkHeadParams{ThreadID: threadID, Namespace: t.Namespace})
		if errors.Is(err, sql.ErrNoRows) {
			heads[t.Namespace] = 0
			continue
		} else if err != nil {
			return nil, dbError("read a head", err)
		}
		heads[t.Namespace] = h.Seq
	}
	return heads, nil
}
