package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgcheckpoint/pgcheckpoint/db"
	"github.com/pgcheckpoint/pgcheckpoint/internal/enginedb"
)

// DB is what the Postgres store needs of a connection source, and what
// pgx's pool, single connection and transaction all are: a *pgxpool.Pool
// (safe for any number of goroutines), a *pgx.Conn (one goroutine at a
// time), or a pgx.Tx (see Engine.WithTx). It is sqlc's DBTX and Begin.
//
// Behind PgBouncer in transaction mode, pgx needs
// default_query_exec_mode=exec (or simple_protocol), in the URL or
// ConnConfig.DefaultQueryExecMode: its default, cache_statement, prepares
// statements on one server connection and finds them missing, or already
// there, on the next ("prepared statement ... already exists", SQLSTATE
// 42P05, with PgBouncer 1.18); describe_exec fails too (it describes on one
// round trip and executes on the next, maybe on another server
// connection). Everything else works there unchanged: a write's lock and
// insert are one pipeline ending in one Sync, so one implicit transaction
// on one server connection; the thread lock is transaction-scoped; Export,
// Import and WithTx are transactions. With statements not prepared, set
// Config.SingleStatement: the pipelined insert is then parsed and planned
// on every write, and one call of pgcheckpoint.checkpoint_put, whose plans
// the server keeps, is faster (measured: 1.3 to 1.9 times the snapshots per
// second). Migrations need a direct connection (see package schema).
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// pgStore is the Postgres Store: a thin layer over the sqlc-generated
// queries of package db, which call the SQL functions of package schema,
// and of package internal/enginedb, the engine's own plumbing (cursors,
// the pipelined write, export and import). The rules (steps, heads,
// deltas, retention) live in those functions, so a psql session or a
// pg_cron job gets what the Engine gets.
type pgStore struct {
	db              DB
	q               *db.Queries       // the SQL API's typed form
	eq              *enginedb.Queries // the engine's internal queries
	singleStatement bool              // see Config.SingleStatement
	inTx            bool              // db is the caller's transaction
}

func newPGStore(conn DB, singleStatement bool) *pgStore {
	_, inTx := conn.(pgx.Tx)
	u := binaryUUIDs{conn}
	return &pgStore{db: conn, q: db.New(u), eq: enginedb.New(u), singleStatement: singleStatement, inTx: inTx}
}

// TxStore is a Store that can run inside a caller's pgx transaction: the
// Postgres store. See Engine.WithTx.
type TxStore interface {
	Store
	// WithTx returns the store bound to tx.
	WithTx(tx pgx.Tx) Store
}

// NewPostgresStore returns the Postgres Store over conn, for NewWithStore
// (New(conn, cfg) is the usual way to an Engine over Postgres). Its Close
// leaves conn open.
func NewPostgresStore(conn DB, cfg Config) TxStore {
	return newPGStore(conn, cfg.SingleStatement)
}

func (s *pgStore) WithTx(tx pgx.Tx) Store { return newPGStore(tx, s.singleStatement) }

func (s *pgStore) Close() error { return nil }

func nullUUID(id uuid.UUID) uuid.NullUUID {
	return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil}
}

func (s *pgStore) Put(ctx context.Context, p PutRequest) (SnapshotResult, error) {
	if err := s.checkJSONInTx(p.jsonFields()...); err != nil {
		return SnapshotResult{}, err
	}
	row, err := s.put(ctx, db.CheckpointPutParams{
		ThreadID:           p.ThreadID,
		Namespace:          p.Namespace,
		CheckpointID:       p.ID,
		ParentCheckpointID: nullUUID(p.ParentID),
		Trigger:            string(p.Trigger),
		Tags:               p.Tags,
		Summary:            p.Summary,
		Metadata:           p.Metadata,
		Messages:           p.Messages,
		State:              p.State,
		ToolResults:        p.ToolResults,
		NextNode:           p.NextNode,
		SizeBytes:          p.SizeBytes,
		DeltaRun:           int32(p.DeltaRun),
		MessageDigests:     p.MessageChain,
		StateDigests:       p.StateDigests,
		ToolResultsDigests: p.ToolResultsDigests,
	})
	if err != nil {
		return SnapshotResult{}, storeError(err)
	}
	return SnapshotResult{
		ID:        row.CheckpointID,
		ThreadID:  row.ThreadID,
		Namespace: row.Namespace,
		ParentID:  row.ParentCheckpointID,
		Step:      row.Step,
		CreatedAt: row.CreatedAt,
		Created:   row.Inserted,
	}, nil
}

// PutAppend is one call of pgcheckpoint.checkpoint_append, which takes
// the thread's and the id's locks and stores the change as a delta on the
// head when the head's run allows.
func (s *pgStore) PutAppend(ctx context.Context, a AppendRequest) (SnapshotResult, error) {
	if err := s.checkJSONInTx(a.jsonFields()...); err != nil {
		return SnapshotResult{}, err
	}
	row, err := s.q.CheckpointAppend(ctx, db.CheckpointAppendParams{
		ThreadID:              a.ThreadID,
		Namespace:             a.Namespace,
		CheckpointID:          a.ID,
		OnHead:                nullUUID(a.OnHead),
		Trigger:               string(a.Trigger),
		Tags:                  a.Tags,
		Summary:               a.Summary,
		Metadata:              a.Metadata,
		Messages:              a.Messages,
		SetState:              a.SetState,
		SetToolResults:        a.SetToolResults,
		RemoveState:           a.RemoveState,
		RemoveToolResults:     a.RemoveToolResults,
		NextNode:              a.NextNode,
		SizeBytes:             a.SizeBytes,
		DeltaRun:              int32(a.DeltaRun),
		MessageDigests:        a.MessageDigests,
		SetStateDigests:       a.SetStateDigests,
		SetToolResultsDigests: a.SetToolResultsDigests,
	})
	if err != nil {
		return SnapshotResult{}, storeError(err)
	}
	return SnapshotResult{
		ID: row.CheckpointID, ThreadID: row.ThreadID, Namespace: row.Namespace, ParentID: row.ParentCheckpointID,
		Step: row.Step, CreatedAt: row.CreatedAt, Created: row.Inserted,
	}, nil
}

// checkJSONInTx parses a write's JSON arguments when the store runs in the
// caller's transaction, where a statement the server refuses would abort
// that transaction: bad input is found here and leaves it usable.
// Elsewhere the server's parse is the only one (a refusal aborts the
// write's own transaction, and nameRefusedJSON names the field).
func (s *pgStore) checkJSONInTx(fields ...jsonField) error {
	if !s.inTx {
		return nil
	}
	return checkJSON(fields...)
}

// pgInfo is the one mapping from a row of pgcheckpoint.checkpoint_info,
// which every query that lists or reads checkpoints embeds, to
// CheckpointInfo. The row's ids are pgx UUIDs (NULL: uuid.Nil) and its
// metadata the JSON text Postgres wrote, taken as it is (see sqlc.yaml).
func pgInfo(r db.PgcheckpointCheckpointInfo) CheckpointInfo {
	return CheckpointInfo{
		ID: r.CheckpointID.Bytes, ThreadID: r.ThreadID, Namespace: r.Namespace, Seq: r.Seq,
		ParentID: r.ParentCheckpointID.Bytes, MergeParentID: r.MergeParentID.Bytes, Step: r.Step, CreatedAt: r.CreatedAt,
		Trigger: Trigger(r.Trigger), Tags: r.Tags, Summary: r.Summary,
		Metadata: r.Metadata, NextNode: r.NextNode, SizeBytes: r.SizeBytes,
		Format: r.Format,
	}
}

// pgCheckpoint maps a row with content and pending writes, as the Get and
// head queries return it. The content is JSON text as Postgres wrote it
// (see pgcheckpoint.checkpoint_materialize_json): taken as it is, not validated again.
func pgCheckpoint(r db.CheckpointGetHeadRow) (*Checkpoint, error) {
	c := &Checkpoint{
		CheckpointInfo: pgInfo(r.PgcheckpointCheckpointInfo),
		Messages:       r.Messages,
		State:          r.State,
		ToolResults:    r.ToolResults,
		PendingWrites:  []PendingWrite{},
	}
	if r.PendingWrites != "" {
		if err := json.Unmarshal([]byte(r.PendingWrites), &c.PendingWrites); err != nil {
			return nil, fmt.Errorf("decode pending writes of checkpoint %s: %w", c.ID, err)
		}
	}
	return c, nil
}

func (s *pgStore) Get(ctx context.Context, id uuid.UUID) (*Checkpoint, error) {
	// pgx encodes its own UUID directly; a google/uuid one goes through
	// its text form (sqlc types this parameter from the view's column).
	row, err := s.q.CheckpointGetByID(ctx, pgtype.UUID{Bytes: id, Valid: true})
	if err != nil {
		return nil, storeError(err)
	}
	return pgCheckpoint(db.CheckpointGetHeadRow(row))
}

func (s *pgStore) Head(ctx context.Context, threadID, namespace string) (*Checkpoint, error) {
	row, err := s.q.CheckpointGetHead(ctx, db.CheckpointGetHeadParams{ThreadID: threadID, Namespace: namespace})
	if err != nil {
		return nil, storeError(err)
	}
	return pgCheckpoint(row)
}

func (s *pgStore) ListCheckpoints(ctx context.Context, q ListQuery) ([]CheckpointInfo, error) {
	rows, err := s.q.CheckpointListByThread(ctx, db.CheckpointListByThreadParams{
		ThreadID:       q.ThreadID,
		Namespace:      q.Namespace,
		Before:         nullUUID(q.Before),
		MetadataFilter: q.Metadata,
		Tags:           q.Tags,
		MaxRows:        int32(q.Limit),
	})
	if err != nil {
		return nil, storeError(err)
	}
	if len(rows) == 0 && q.Before != uuid.Nil {
		// No rows: the end of the list, or a cursor that is not there.
		_, err := s.eq.CheckpointGetSeq(ctx, enginedb.CheckpointGetSeqParams{ThreadID: q.ThreadID, Namespace: q.Namespace, CheckpointID: q.Before})
		if err != nil {
			return nil, dbError(fmt.Sprintf("cursor %s", q.Before), err)
		}
	}
	out := make([]CheckpointInfo, len(rows))
	for i, r := range rows {
		out[i] = pgInfo(r.PgcheckpointCheckpointInfo)
	}
	return out, nil
}

func (s *pgStore) ListThreads(ctx context.Context, after string, limit int) ([]ThreadInfo, error) {
	rows, err := s.q.ThreadListHeads(ctx, db.ThreadListHeadsParams{After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, storeError(err)
	}
	out := make([]ThreadInfo, len(rows))
	for i, r := range rows {
		out[i] = ThreadInfo{
			ThreadID: r.ThreadID, Namespace: r.Namespace, HeadID: r.HeadCheckpointID,
			HeadStep: r.HeadStep, HeadSummary: r.HeadSummary, HeadCreatedAt: r.HeadCreatedAt,
			Metadata: r.Metadata, CreatedAt: r.CreatedAt,
		}
	}
	return out, nil
}

func (s *pgStore) PutWrites(ctx context.Context, id uuid.UUID, taskID string, writes []Write) (int64, error) {
	channels := make([]string, len(writes))
	values := make([]json.RawMessage, len(writes))
	for i, w := range writes {
		channels[i], values[i] = w.Channel, w.Value
	}
	row, err := s.q.PendingWritePutMany(ctx, db.PendingWritePutManyParams{
		CheckpointID: id, TaskID: taskID, Channels: channels, Vals: values,
	})
	if err != nil {
		return 0, storeError(err)
	}
	if row.Found == 0 {
		return 0, fmt.Errorf("checkpoint %s: %w", id, ErrNotFound)
	}
	return row.Inserted, nil
}

// DeleteCheckpoints is one call of pgcheckpoint.checkpoint_delete_before
// or delete_for_runs, which take the locks and say what goes.
func (s *pgStore) DeleteCheckpoints(ctx context.Context, q DeleteQuery) (int64, error) {
	if q.RunIDs != nil {
		n, err := s.q.CheckpointDeleteForRuns(ctx, q.RunIDs)
		return n, storeError(err)
	}
	n, err := s.q.CheckpointDeleteBefore(ctx, db.CheckpointDeleteBeforeParams{
		ThreadID: q.ThreadID, Namespace: q.Namespace, BeforeStep: q.BeforeStep,
	})
	return n, storeError(err)
}

// PruneThreads is one call of pgcheckpoint.prune for KeepLatest and
// KeepNone (every thread in one transaction), and one of gc_thread per
// thread for the retention policies, each a transaction of its own (so
// no thread's lock waits on another's); inside WithTx they all share the
// caller's.
func (s *pgStore) PruneThreads(ctx context.Context, threadIDs []string, p Policy) (DeleteResult, error) {
	switch p.Name() {
	case "keep_latest", "keep_none":
		n, err := s.q.ThreadPruneMany(ctx, db.ThreadPruneManyParams{ThreadIds: threadIDs, KeepLatest: p.Name() == "keep_latest"})
		if err != nil {
			return DeleteResult{}, storeError(err)
		}
		return DeleteResult{Deleted: n}, nil
	}
	var r DeleteResult
	for _, t := range threadIDs {
		rows, err := s.q.ThreadGc(ctx, db.ThreadGcParams{
			ThreadID: t, Policy: p.Name(), N: int32(p.N()), AgeSeconds: p.Age().Seconds(),
		})
		if err != nil {
			return r, storeError(err)
		}
		for _, row := range rows {
			r.IDs = append(r.IDs, Deleted{ThreadID: row.ThreadID, Namespace: row.Namespace, ID: row.CheckpointID, Step: row.Step})
		}
		r.Deleted += int64(len(rows))
	}
	return r, nil
}

func (s *pgStore) Rewind(ctx context.Context, id uuid.UUID, truncate bool) (*RewindResult, error) {
	r, err := s.q.CheckpointRewind(ctx, db.CheckpointRewindParams{CheckpointID: id, Truncate: truncate})
	if err != nil {
		return nil, storeError(err)
	}
	return &RewindResult{
		ThreadID: r.ThreadID, Namespace: r.Namespace,
		StepsBack: r.HeadStep - r.Step, Checkpoints: r.Checkpoints, Truncated: r.Truncated,
	}, nil
}

func (s *pgStore) FindOnHeadLine(ctx context.Context, threadID, namespace string, step int64) (uuid.UUID, error) {
	row, err := s.eq.CheckpointFindOnHeadLine(ctx, enginedb.CheckpointFindOnHeadLineParams{ThreadID: threadID, Namespace: namespace, MaxStep: step})
	if err != nil {
		return uuid.Nil, storeError(err)
	}
	return row.CheckpointID, nil
}

func (s *pgStore) Lineage(ctx context.Context, id uuid.UUID, limit int) ([]CheckpointInfo, error) {
	maxDepth := pgtype.Int4{}
	if limit > 0 {
		maxDepth = pgtype.Int4{Int32: int32(limit - 1), Valid: true}
	}
	rows, err := s.q.CheckpointLineage(ctx, db.CheckpointLineageParams{CheckpointID: id, MaxDepth: maxDepth})
	if err != nil {
		return nil, storeError(err)
	}
	out := make([]CheckpointInfo, len(rows))
	for i, r := range rows {
		out[i] = pgInfo(r.PgcheckpointCheckpointInfo)
	}
	return out, nil
}

func (s *pgStore) Tree(ctx context.Context, threadID string) ([]TreeNode, error) {
	rows, err := s.q.ThreadTree(ctx, threadID)
	if err != nil {
		return nil, storeError(err)
	}
	out := make([]TreeNode, len(rows))
	for i, r := range rows {
		out[i] = TreeNode{
			ID: r.CheckpointID, ThreadID: r.ThreadID, Namespace: r.Namespace, Seq: r.Seq, Step: r.Step,
			CreatedAt: r.CreatedAt, Trigger: Trigger(r.Trigger), Tags: r.Tags, Summary: r.Summary, IsHead: r.IsHead,
			ParentID: r.ParentCheckpointID, MergeParentID: r.MergeParentID,
		}
	}
	return out, nil
}

func (s *pgStore) Branch(ctx context.Context, fromID uuid.UUID, newThreadID, name string, id uuid.UUID) (BranchResult, error) {
	r, err := s.q.ThreadBranch(ctx, db.ThreadBranchParams{
		SourceCheckpointID: fromID, NewThreadID: newThreadID, BranchName: name, CheckpointID: id,
	})
	if err != nil {
		return BranchResult{}, storeError(err)
	}
	return BranchResult{ThreadID: r.ThreadID, CheckpointID: r.CheckpointID, Step: r.Step}, nil
}

func (s *pgStore) Branches(ctx context.Context, threadID string) ([]BranchInfo, error) {
	rows, err := s.q.ThreadListBranches(ctx, threadID)
	if err != nil {
		return nil, storeError(err)
	}
	out := make([]BranchInfo, len(rows))
	for i, r := range rows {
		out[i] = BranchInfo{ThreadID: r.ThreadID, Namespace: r.Namespace, Name: r.BranchName, FromID: r.BranchedFrom, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

func (s *pgStore) Merge(ctx context.Context, branchThread, intoThread, namespace string, id uuid.UUID) (MergeResult, error) {
	r, err := s.q.ThreadMerge(ctx, db.ThreadMergeParams{
		BranchThreadID: branchThread, IntoThreadID: intoThread, CheckpointID: id, Namespace: namespace,
	})
	if err != nil {
		return MergeResult{}, storeError(err)
	}
	return MergeResult{
		ThreadID: r.ThreadID, CheckpointID: r.CheckpointID, ParentID: r.ParentCheckpointID,
		MergeParentID: r.MergeParentID, Step: r.Step,
	}, nil
}

func (s *pgStore) CopyThread(ctx context.Context, src, dst string) ([]CopiedID, error) {
	rows, err := s.q.ThreadCopy(ctx, db.ThreadCopyParams{SourceThreadID: src, TargetThreadID: dst})
	if err != nil {
		return nil, storeError(err)
	}
	ids := make([]CopiedID, len(rows))
	for i, r := range rows {
		ids[i] = CopiedID{Old: r.OldCheckpointID, New: r.NewCheckpointID}
	}
	return ids, nil
}

func (s *pgStore) SweepBatch(ctx context.Context, p Policy, after string, size int) (SweepBatchResult, error) {
	b, err := s.q.ThreadGcBatch(ctx, db.ThreadGcBatchParams{
		Policy: p.Name(), N: int32(p.N()), AgeSeconds: p.Age().Seconds(), AfterThreadID: after, BatchSize: int32(size),
	})
	if err != nil {
		return SweepBatchResult{}, storeError(err)
	}
	return SweepBatchResult{
		LastThreadID: b.LastThreadID, Threads: int(b.Threads), Expired: int(b.Expired),
		Failed: int(b.Failed), Deleted: b.Deleted,
	}, nil
}

func (s *pgStore) SetExpiry(ctx context.Context, threadID string, at time.Time, p Policy) (int64, error) {
	n, err := s.q.ThreadSetExpiry(ctx, db.ThreadSetExpiryParams{
		ThreadID: threadID, ExpiresAt: pgtype.Timestamptz{Time: at, Valid: !at.IsZero()}, KeepLatest: p.Name() == "keep_latest",
	})
	return n, storeError(err)
}
