package engine

import (
	"context"
	"crypto/sha256"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/db"
)

// put writes one checkpoint. The common case (a thread with checkpoints, no
// rewind pending, a new id, the head as the parent) is one pipelined round
// trip: the thread lock, then db.CheckpointPutFast, in one implicit
// transaction, with no PL/pgSQL in the way. Every other case, or a
// CheckpointPutFast that finds the case is not the common one and writes
// nothing, goes to pgcheckpoint.checkpoint_put, which handles them all.
func (e *Engine) put(ctx context.Context, p db.CheckpointPutParams) (db.CheckpointPutRow, error) {
	if !e.cfg.SingleStatement {
		row, ok, err := e.putFast(ctx, p)
		if err != nil || ok {
			return row, err
		}
	}
	return e.q.CheckpointPut(ctx, p)
}

// putFast tries the common case; ok is false when the case was not the
// common one and nothing was written.
func (e *Engine) putFast(ctx context.Context, p db.CheckpointPutParams) (db.CheckpointPutRow, bool, error) {
	fp := db.CheckpointPutFastParams{
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
	}
	if p.DeltaRun > 1 {
		sum := sha256.Sum256(p.MessageDigests)
		fp.MessagesDigest = sum[:]
	}
	var (
		row db.CheckpointPutFastRow
		err error
	)
	res := db.New(lockFirst{DBTX: e.pool, threadID: p.ThreadID}).CheckpointPutFast(ctx, []db.CheckpointPutFastParams{fp})
	res.QueryRow(func(_ int, r db.CheckpointPutFastRow, qerr error) { row, err = r, qerr })
	// QueryRow closed the batch and dropped the error of its end, where the
	// implicit transaction commits: ask again.
	if cerr := res.Close(); cerr != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return db.CheckpointPutRow{}, false, nil
	}
	if err != nil {
		return db.CheckpointPutRow{}, false, err
	}
	return db.CheckpointPutRow{
		ThreadID:           row.ThreadID,
		Namespace:          row.Namespace,
		CheckpointID:       row.CheckpointID,
		ParentCheckpointID: row.ParentCheckpointID,
		Step:               row.Step,
		CreatedAt:          row.CreatedAt,
		Inserted:           true,
	}, true, nil
}

// lockFirst is a db.DBTX whose batches run under a thread's lock: it queues
// db.ThreadLock ahead of them, so the lock is taken in the batch's implicit
// transaction before any of the batch's statements takes its snapshot.
type lockFirst struct {
	db.DBTX
	threadID string
}

func (l lockFirst) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	locked := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	locked.Queue(db.ThreadLock, l.threadID)
	locked.QueuedQueries = append(locked.QueuedQueries, b.QueuedQueries...)
	br := l.DBTX.SendBatch(ctx, locked)
	// A lock that fails leaves its error in br, which the batch's own
	// results then report.
	_, _ = br.Exec()
	return br
}
