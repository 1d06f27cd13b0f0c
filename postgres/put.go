package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/db"
	"github.com/pgcheckpoint/pgcheckpoint/internal/enginedb"
)

// put writes one checkpoint. The common case (a thread with checkpoints, no
// rewind pending, a new id, a parent in the thread) is one pipelined round
// trip: the thread's lock, then one INSERT ... SELECT, in one implicit
// transaction, with no PL/pgSQL in the way:
// enginedb.CheckpointPutWhole for a snapshot stored whole (p.DeltaRun 1),
// enginedb.CheckpointPutFast, which decides on a delta, for the rest. Both apply the rules of
// pgcheckpoint.checkpoint_put through the same SQL functions. Every other
// case (a merge among them), or an insert that finds the case is not the
// common one and writes nothing, goes to checkpoint_put, which handles them
// all.
func (s *Store) put(ctx context.Context, p db.CheckpointPutParams) (db.CheckpointPutRow, error) {
	if !s.singleStatement && !p.MergeParentID.Valid {
		var (
			row enginedb.CheckpointPutFastRow
			ok  bool
			err error
		)
		q := enginedb.New(lockFirst{DBTX: binaryUUIDs{s.db}, threadID: p.ThreadID})
		if p.DeltaRun == 1 {
			var whole enginedb.CheckpointPutWholeRow
			whole, ok, err = oneRow(q.CheckpointPutWhole(ctx, []enginedb.CheckpointPutWholeParams{wholeParams(p)}))
			row = enginedb.CheckpointPutFastRow(whole)
		} else {
			row, ok, err = oneRow(q.CheckpointPutFast(ctx, []enginedb.CheckpointPutFastParams{fastParams(p)}))
		}
		if err != nil {
			return db.CheckpointPutRow{}, err
		}
		if ok {
			return db.CheckpointPutRow{
				ThreadID:           p.ThreadID,
				Namespace:          p.Namespace,
				CheckpointID:       p.CheckpointID,
				ParentCheckpointID: row.ParentCheckpointID,
				Step:               row.Step,
				CreatedAt:          row.CreatedAt,
				Inserted:           true,
			}, nil
		}
	}
	return s.q.CheckpointPut(ctx, p)
}

func wholeParams(p db.CheckpointPutParams) enginedb.CheckpointPutWholeParams {
	return enginedb.CheckpointPutWholeParams{
		ThreadID:           p.ThreadID,
		Namespace:          p.Namespace,
		CheckpointID:       p.CheckpointID,
		ParentCheckpointID: p.ParentCheckpointID,
		Trigger:            p.Trigger,
		Tags:               p.Tags,
		Summary:            p.Summary,
		Metadata:           p.Metadata,
		Messages:           p.Messages,
		State:              p.State,
		ToolResults:        p.ToolResults,
		NextNode:           p.NextNode,
		SizeBytes:          p.SizeBytes,
		Sealed:             p.Sealed,
	}
}

func fastParams(p db.CheckpointPutParams) enginedb.CheckpointPutFastParams {
	return enginedb.CheckpointPutFastParams{
		ThreadID:           p.ThreadID,
		Namespace:          p.Namespace,
		CheckpointID:       p.CheckpointID,
		ParentCheckpointID: p.ParentCheckpointID,
		Trigger:            p.Trigger,
		Tags:               p.Tags,
		Summary:            p.Summary,
		Metadata:           p.Metadata,
		Messages:           p.Messages,
		State:              p.State,
		ToolResults:        p.ToolResults,
		NextNode:           p.NextNode,
		SizeBytes:          p.SizeBytes,
		DeltaRun:           p.DeltaRun,
		MessageDigests:     p.MessageDigests,
		StateDigests:       p.StateDigests,
		ToolResultsDigests: p.ToolResultsDigests,
		Sealed:             p.Sealed,
	}
}

// batchOne is the result of a sqlc :batchone query sent with one set of
// arguments.
type batchOne[R any] interface {
	QueryRow(func(int, R, error))
	Close() error
}

// oneRow reads the row of a one-query batch; ok is false when the query
// returned none.
func oneRow[R any](res batchOne[R]) (row R, ok bool, err error) {
	res.QueryRow(func(_ int, r R, qerr error) { row, err = r, qerr })
	// QueryRow closed the batch and dropped the error of its end, where the
	// implicit transaction commits: ask again.
	if cerr := res.Close(); cerr != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return row, false, nil
	}
	return row, err == nil, err
}

// lockFirst is an enginedb.DBTX whose batches run under the lock of a
// write's thread: it queues enginedb.CheckpointWriteLock ahead of them, so
// the lock is taken in the batch's implicit transaction before any of the
// batch's statements takes its snapshot (at READ COMMITTED; see
// CheckpointWriteLock for the other levels).
type lockFirst struct {
	enginedb.DBTX
	threadID string
}

func (l lockFirst) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	locked := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	locked.Queue(enginedb.CheckpointWriteLock, l.threadID)
	locked.QueuedQueries = append(locked.QueuedQueries, b.QueuedQueries...)
	br := l.DBTX.SendBatch(ctx, locked)
	// A lock that fails leaves its error in br, which the batch's own
	// results then report.
	_, _ = br.Exec()
	return br
}
