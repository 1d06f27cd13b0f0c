package db

import "context"

// The query methods below kept their old names one release after the SQL
// functions they call were renamed (migration 12: entity first). Each is
// its new form under the old name; they go in the next major release.

// GcThreadParams is ThreadGcParams.
//
// Deprecated: use ThreadGcParams.
type GcThreadParams = ThreadGcParams

// GcThreadRow is ThreadGcRow.
//
// Deprecated: use ThreadGcRow.
type GcThreadRow = ThreadGcRow

// GcThread calls pgcheckpoint.thread_gc.
//
// Deprecated: use ThreadGc.
func (q *Queries) GcThread(ctx context.Context, arg ThreadGcParams) ([]ThreadGcRow, error) {
	return q.ThreadGc(ctx, arg)
}

// GcBatchParams is ThreadGcBatchParams.
//
// Deprecated: use ThreadGcBatchParams.
type GcBatchParams = ThreadGcBatchParams

// GcBatchRow is ThreadGcBatchRow.
//
// Deprecated: use ThreadGcBatchRow.
type GcBatchRow = ThreadGcBatchRow

// GcBatch calls pgcheckpoint.thread_gc_batch.
//
// Deprecated: use ThreadGcBatch.
func (q *Queries) GcBatch(ctx context.Context, arg ThreadGcBatchParams) (ThreadGcBatchRow, error) {
	return q.ThreadGcBatch(ctx, arg)
}

// CheckpointTreeRow is ThreadTreeRow.
//
// Deprecated: use ThreadTreeRow.
type CheckpointTreeRow = ThreadTreeRow

// CheckpointTree calls pgcheckpoint.thread_tree.
//
// Deprecated: use ThreadTree.
func (q *Queries) CheckpointTree(ctx context.Context, threadID string) ([]ThreadTreeRow, error) {
	return q.ThreadTree(ctx, threadID)
}

// ThreadPruneParams is ThreadPruneManyParams.
//
// Deprecated: use ThreadPruneManyParams.
type ThreadPruneParams = ThreadPruneManyParams

// ThreadPrune calls pgcheckpoint.thread_prune_many.
//
// Deprecated: use ThreadPruneMany.
func (q *Queries) ThreadPrune(ctx context.Context, arg ThreadPruneManyParams) (int64, error) {
	return q.ThreadPruneMany(ctx, arg)
}
