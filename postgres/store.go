package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/db"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
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
// Options.SingleStatement: the pipelined insert is then parsed and planned
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

// Store is the Postgres store: a thin layer over the sqlc-generated
// queries of package db, which call the SQL functions of package schema,
// and of package internal/enginedb, the engine's own plumbing (cursors,
// the pipelined write, export and import). The rules (steps, heads,
// deltas, retention) live in those functions, so a psql session or a
// pg_cron job gets what the Engine gets. Its methods implement
// engine.Store and engine.TxStore; applications call them through an
// engine.Engine:
//
//	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})
type Store struct {
	conn            DB                // what the store was made over (see DB)
	tenant          string            // see ForTenant
	db              DB                // conn, in the tenant (tenantDB)
	q               *db.Queries       // the SQL API's typed form
	eq              *enginedb.Queries // the engine's internal queries
	singleStatement bool              // see Options.SingleStatement
	sessionTenant   bool              // see Options.SessionTenant
	inTx            bool              // db is the caller's transaction
	close           func()            // closes a pool the store owns (Open's)
}

// Options tunes a Store. The zero value is ready to use.
type Options struct {
	// SingleStatement makes every Snapshot one call of
	// pgcheckpoint.checkpoint_put. By default the common case (a thread
	// with checkpoints, no rewind pending, the head as the parent) is two
	// statements pipelined in one round trip and one implicit transaction:
	// the thread lock, then the insert, which costs the database about two
	// thirds of what the function call does. Set it behind a connection
	// pooler in statement mode, or any proxy that does not keep a pipeline
	// on one connection, and when pgx does not prepare statements
	// (default_query_exec_mode exec or simple_protocol, as behind
	// PgBouncer in transaction mode; see DB): then the function call is
	// the faster.
	SingleStatement bool
	// ClosePool makes the store's Close close the pool it is made over
	// (a *pgxpool.Pool): for a pool made for the store alone, as
	// pgcheckpoint.Open makes one. By default Close leaves it open.
	ClosePool bool
	// SessionTenant, over a *pgxpool.Pool, sets the tenant for a server
	// connection's whole session (set_config's is_local false), ahead of
	// the first statement the store sends on it in that tenant, and
	// remembers it with the connection: the store's later statements on
	// that connection in the same tenant go alone, without the setting's
	// statement ahead of them in their batch (a Get's server work is
	// about 5% less; see BenchmarkTenantCost). The tenant then stays set
	// on the connection after the store's statements, for whoever uses it
	// next: so give the store a pool of its own (pgcheckpoint.Open's),
	// with nothing else on it that sets pgcheckpoint.tenant, connected to
	// Postgres directly. Behind a pooler in transaction or statement mode
	// a statement could run on a server connection whose session another
	// client set to another tenant, and a client cannot tell a pooler's
	// mode: so the store checks each connection once, before its first
	// statement, and refuses any that goes through a pooler
	// (ErrPooledSession, nothing else sent). Over a connection or a
	// transaction it does nothing; transactions (Begin, WithTx) set the
	// tenant in the transaction as without it, but begin on a session
	// whose last tenant is still set: a transaction begun on the pool
	// for Engine.WithTx runs its own statements before the Engine's
	// first in that tenant, seeing its rows. Begin those on another pool,
	// or set the tenant in them first.
	SessionTenant bool
}

// NewStore returns the Postgres store over conn: a *pgxpool.Pool (safe for
// any number of goroutines), a *pgx.Conn (one goroutine at a time), or a
// pgx.Tx, which is what Engine.WithTx does (see there). The database must
// be migrated (see package schema). Close leaves conn open unless
// opts.ClosePool says otherwise.
//
// The store reads and writes the rows of tenant engine.DefaultTenant, as
// an installation without tenants does; ForTenant binds a copy to another.
func NewStore(conn DB, opts Options) *Store {
	s := (&Store{singleStatement: opts.SingleStatement, sessionTenant: opts.SessionTenant}).over(conn, engine.DefaultTenant)
	if pool, ok := conn.(*pgxpool.Pool); ok && opts.ClosePool {
		s.close = pool.Close
	}
	return s
}

// over returns a store with s's options over conn, in tenant. Its Close
// does nothing: the pool is the store's that NewStore made.
func (s *Store) over(conn DB, tenant string) *Store {
	_, inTx := conn.(pgx.Tx)
	t := tenantDB{DB: conn, tenant: tenant}
	if pool, ok := conn.(*pgxpool.Pool); ok && s.sessionTenant {
		t.pool = pool
	}
	if err := engine.CheckTenant(tenant); err != nil {
		t.err = fmt.Errorf("postgres store: %w", err)
	}
	u := binaryUUIDs{t}
	return &Store{conn: conn, tenant: tenant, db: t, q: db.New(u), eq: enginedb.New(u),
		singleStatement: s.singleStatement, sessionTenant: s.sessionTenant, inTx: inTx, close: func() {}}
}

// DB returns what the store runs its statements on: the pool, connection
// or transaction it was made over. An application reaches the pool of an
// Engine that pgcheckpoint.Open made with
// eng.Store().(*postgres.Store).DB().(*pgxpool.Pool), to begin the
// transactions it hands to Engine.WithTx.
func (s *Store) DB() DB { return s.conn }

// WithTx returns the store bound to the caller's transaction tx, with s's
// options and tenant (see engine.Engine.WithTx). Its statements set the
// tenant in tx (pgcheckpoint.tenant, transaction-local), where it stays
// set until tx ends: the caller's own statements after them run in it too.
func (s *Store) WithTx(tx pgx.Tx) engine.Store {
	return s.over(tx, s.tenant)
}

// InTx reports whether the store runs in a caller's transaction.
func (s *Store) InTx() bool { return s.inTx }

// Close closes the pool with Options.ClosePool, and does nothing
// otherwise.
func (s *Store) Close() error {
	s.close()
	return nil
}

func nullUUID(id uuid.UUID) uuid.NullUUID {
	return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil}
}

// Put implements engine.Store.
func (s *Store) Put(ctx context.Context, p engine.PutRequest) (engine.SnapshotResult, error) {
	if err := s.checkJSONInTx(p.JSONFields()...); err != nil {
		return engine.SnapshotResult{}, err
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
		Sealed:             p.Sealed,
		MergeParentID:      nullUUID(p.MergeParentID),
	})
	if err != nil {
		return engine.SnapshotResult{}, storeError(err)
	}
	return engine.SnapshotResult{
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
func (s *Store) PutAppend(ctx context.Context, a engine.AppendRequest) (engine.SnapshotResult, error) {
	if err := s.checkJSONInTx(a.JSONFields()...); err != nil {
		return engine.SnapshotResult{}, err
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
		MaxSizeBytes:          pgtype.Int8{Int64: a.MaxSizeBytes, Valid: a.MaxSizeBytes >= 0},
		ContentBytes:          pgtype.Int8{Int64: a.ContentBytes, Valid: a.ContentBytes > 0},
		Sealed:                a.Sealed,
	})
	if err != nil {
		return engine.SnapshotResult{}, storeError(err)
	}
	return engine.SnapshotResult{
		ID: row.CheckpointID, ThreadID: row.ThreadID, Namespace: row.Namespace, ParentID: row.ParentCheckpointID,
		Step: row.Step, CreatedAt: row.CreatedAt, Created: row.Inserted,
	}, nil
}

// checkJSONInTx parses a write's JSON arguments when the store runs in the
// caller's transaction, where a statement the server refuses would abort
// that transaction: bad input is found here and leaves it usable.
// Elsewhere the server's parse is the only one (a refusal aborts the
// write's own transaction, and NameRefusedJSON names the field).
func (s *Store) checkJSONInTx(fields ...engine.JSONField) error {
	if !s.inTx {
		return nil
	}
	return engine.CheckJSON(fields...)
}

// pgInfo is the one mapping from a row of pgcheckpoint.checkpoint_info,
// which every query that lists or reads checkpoints embeds, to
// CheckpointInfo. The row's ids are pgx UUIDs (NULL: uuid.Nil) and its
// metadata the JSON text Postgres wrote, taken as it is (see sqlc.yaml).
func pgInfo(r db.PgcheckpointTenantCheckpointInfo) engine.CheckpointInfo {
	return engine.CheckpointInfo{
		ID: r.CheckpointID.Bytes, ThreadID: r.ThreadID, Namespace: r.Namespace, Seq: r.Seq,
		ParentID: r.ParentCheckpointID.Bytes, MergeParentID: r.MergeParentID.Bytes, Step: r.Step, CreatedAt: r.CreatedAt,
		Trigger: engine.Trigger(r.Trigger), Tags: r.Tags, Summary: r.Summary,
		Metadata: r.Metadata, NextNode: r.NextNode, SizeBytes: r.SizeBytes,
		Format: r.Format,
	}
}

// pgCheckpoint maps a row with content and pending writes, as the Get and
// head queries return it. The content is {messages, state, tool_results}
// as JSON text Postgres wrote (see pgcheckpoint.checkpoint_content_json):
// taken as it is, not validated again.
func pgCheckpoint(r db.CheckpointGetHeadRow) (*engine.Checkpoint, error) {
	c := &engine.Checkpoint{
		CheckpointInfo: pgInfo(r.PgcheckpointTenantCheckpointInfo),
		PendingWrites:  []engine.PendingWrite{},
	}
	if len(r.Content) != 3 {
		return nil, fmt.Errorf("content of checkpoint %s: %d parts, want 3 (messages, state, tool results)", c.ID, len(r.Content))
	}
	c.Messages, c.State, c.ToolResults = r.Content[0], r.Content[1], r.Content[2]
	if r.PendingWrites != "" {
		if err := json.Unmarshal([]byte(r.PendingWrites), &c.PendingWrites); err != nil {
			return nil, fmt.Errorf("decode pending writes of checkpoint %s: %w", c.ID, err)
		}
	}
	return c, nil
}

// Get implements engine.Store.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (*engine.Checkpoint, error) {
	// pgx encodes its own UUID directly; a google/uuid one goes through
	// its text form (sqlc types this parameter from the view's column).
	row, err := s.q.CheckpointGetByID(ctx, pgtype.UUID{Bytes: id, Valid: true})
	if err != nil {
		return nil, storeError(err)
	}
	return pgCheckpoint(db.CheckpointGetHeadRow(row))
}

// HeadID implements engine.Store.
func (s *Store) HeadID(ctx context.Context, threadID, namespace string) (uuid.UUID, error) {
	id, err := s.eq.CheckpointHeadID(ctx, enginedb.CheckpointHeadIDParams{ThreadID: threadID, Namespace: namespace})
	if err != nil {
		return uuid.Nil, fmt.Errorf("head of thread %q namespace %q: %w", threadID, namespace, storeError(err))
	}
	return id, nil
}

// Head implements engine.Store.
func (s *Store) Head(ctx context.Context, threadID, namespace string) (*engine.Checkpoint, error) {
	row, err := s.q.CheckpointGetHead(ctx, db.CheckpointGetHeadParams{ThreadID: threadID, Namespace: namespace})
	if err != nil {
		return nil, storeError(err)
	}
	return pgCheckpoint(row)
}

// ListCheckpoints implements engine.Store.
func (s *Store) ListCheckpoints(ctx context.Context, q engine.ListQuery) ([]engine.CheckpointInfo, error) {
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
	out := make([]engine.CheckpointInfo, len(rows))
	for i, r := range rows {
		out[i] = pgInfo(r.PgcheckpointTenantCheckpointInfo)
	}
	return out, nil
}

// ListThreads implements engine.Store.
func (s *Store) ListThreads(ctx context.Context, after string, limit int) ([]engine.ThreadInfo, error) {
	rows, err := s.q.ThreadListHeads(ctx, db.ThreadListHeadsParams{After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, storeError(err)
	}
	out := make([]engine.ThreadInfo, len(rows))
	for i, r := range rows {
		out[i] = engine.ThreadInfo{
			ThreadID: r.ThreadID, Namespace: r.Namespace, HeadID: r.HeadCheckpointID,
			HeadStep: r.HeadStep, HeadSummary: r.HeadSummary, HeadCreatedAt: r.HeadCreatedAt,
			Metadata: r.Metadata, CreatedAt: r.CreatedAt,
		}
	}
	return out, nil
}

// PutWrites implements engine.Store.
func (s *Store) PutWrites(ctx context.Context, w engine.WritesRequest) (int64, error) {
	channels := make([]string, len(w.Writes))
	values := make([]json.RawMessage, len(w.Writes))
	for i, wr := range w.Writes {
		channels[i], values[i] = wr.Channel, wr.Value
	}
	row, err := s.q.PendingWritePutMany(ctx, db.PendingWritePutManyParams{
		CheckpointID: w.ID, TaskID: w.TaskID, Channels: channels, Vals: values, Sealed: w.Sealed,
	})
	if err != nil {
		return 0, storeError(err)
	}
	if row.Found == 0 {
		return 0, fmt.Errorf("checkpoint %s: %w", w.ID, engine.ErrNotFound)
	}
	return row.Inserted, nil
}

// DeleteCheckpoints is one call of pgcheckpoint.checkpoint_delete_before
// or checkpoint_delete_for_runs, which take the locks and say what goes.
func (s *Store) DeleteCheckpoints(ctx context.Context, q engine.DeleteQuery) (int64, error) {
	if q.RunIDs != nil {
		n, err := s.q.CheckpointDeleteForRuns(ctx, q.RunIDs)
		return n, storeError(err)
	}
	n, err := s.q.CheckpointDeleteBefore(ctx, db.CheckpointDeleteBeforeParams{
		ThreadID: q.ThreadID, Namespace: q.Namespace, BeforeStep: q.BeforeStep,
	})
	return n, storeError(err)
}

// PruneThreads is one call of pgcheckpoint.thread_prune_many for KeepLatest and
// KeepNone (every thread in one transaction), and one of thread_gc per
// thread for the retention policies, each a transaction of its own (so
// no thread's lock waits on another's); inside WithTx they all share the
// caller's.
func (s *Store) PruneThreads(ctx context.Context, threadIDs []string, p engine.Policy) (engine.DeleteResult, error) {
	switch p.Name() {
	case "keep_latest", "keep_none":
		n, err := s.q.ThreadPruneMany(ctx, db.ThreadPruneManyParams{ThreadIds: threadIDs, KeepLatest: p.Name() == "keep_latest"})
		if err != nil {
			return engine.DeleteResult{}, storeError(err)
		}
		return engine.DeleteResult{Deleted: n}, nil
	}
	var r engine.DeleteResult
	for _, t := range threadIDs {
		rows, err := s.q.ThreadGc(ctx, db.ThreadGcParams{
			ThreadID: t, Policy: p.Name(), N: int32(p.N()), AgeSeconds: p.Age().Seconds(),
		})
		if err != nil {
			return r, storeError(err)
		}
		for _, row := range rows {
			r.IDs = append(r.IDs, engine.Deleted{ThreadID: row.ThreadID, Namespace: row.Namespace, ID: row.CheckpointID, Step: row.Step})
		}
		r.Deleted += int64(len(rows))
	}
	return r, nil
}

// PreviewPrune implements engine.Store: PruneThreads in a transaction
// (inside a caller's transaction, a savepoint) that it rolls back.
func (s *Store) PreviewPrune(ctx context.Context, threadIDs []string, p engine.Policy) (engine.DeleteResult, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return engine.DeleteResult{}, storeError(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return s.over(tx, s.tenant).PruneThreads(ctx, threadIDs, p)
}

// Rewind implements engine.Store.
func (s *Store) Rewind(ctx context.Context, id uuid.UUID, truncate bool) (*engine.RewindResult, error) {
	r, err := s.q.CheckpointRewind(ctx, db.CheckpointRewindParams{CheckpointID: id, Truncate: truncate})
	if err != nil {
		return nil, storeError(err)
	}
	return rewindResult(db.ThreadRewindToStepRow(r)), nil
}

// RewindToStep implements engine.Store: one call of
// pgcheckpoint.thread_rewind_to_step.
func (s *Store) RewindToStep(ctx context.Context, threadID, namespace string, step int64) (uuid.UUID, *engine.RewindResult, error) {
	r, err := s.q.ThreadRewindToStep(ctx, db.ThreadRewindToStepParams{ThreadID: threadID, Namespace: namespace, Step: step})
	if err != nil {
		return uuid.Nil, nil, storeError(err)
	}
	return r.CheckpointID, rewindResult(r), nil
}

// rewindResult is the one mapping of a rewind's row (checkpoint_rewind's
// columns, which thread_rewind_to_step returns too).
func rewindResult(r db.ThreadRewindToStepRow) *engine.RewindResult {
	return &engine.RewindResult{
		ThreadID: r.ThreadID, Namespace: r.Namespace,
		StepsBack: r.HeadStep - r.Step, Checkpoints: r.Checkpoints, Truncated: r.Truncated,
	}
}

// Lineage implements engine.Store. A page (limit > 0) is first read as a
// range of the thread's key, kept when engine.LinePage says it is the
// page; otherwise pgcheckpoint.checkpoint_lineage walks the parents.
func (s *Store) Lineage(ctx context.Context, id uuid.UUID, limit int) ([]engine.CheckpointInfo, error) {
	if limit > 0 {
		rows, err := s.eq.CheckpointLineRange(ctx, enginedb.CheckpointLineRangeParams{CheckpointID: id, MaxRows: int32(limit)})
		if err != nil {
			return nil, storeError(err)
		}
		if len(rows) == 0 {
			return nil, nil
		}
		out := make([]engine.CheckpointInfo, len(rows))
		for i, r := range rows {
			out[i] = pgInfo(db.PgcheckpointTenantCheckpointInfo(r))
		}
		if engine.LinePage(out, limit) {
			return out, nil
		}
	}
	maxDepth := pgtype.Int4{}
	if limit > 0 {
		maxDepth = pgtype.Int4{Int32: int32(limit - 1), Valid: true}
	}
	rows, err := s.q.CheckpointLineage(ctx, db.CheckpointLineageParams{CheckpointID: id, MaxDepth: maxDepth})
	if err != nil {
		return nil, storeError(err)
	}
	out := make([]engine.CheckpointInfo, len(rows))
	for i, r := range rows {
		out[i] = pgInfo(r.PgcheckpointTenantCheckpointInfo)
	}
	return out, nil
}

// Tree implements engine.Store.
func (s *Store) Tree(ctx context.Context, threadID string) ([]engine.TreeNode, error) {
	rows, err := s.q.ThreadTree(ctx, threadID)
	if err != nil {
		return nil, storeError(err)
	}
	out := make([]engine.TreeNode, len(rows))
	for i, r := range rows {
		out[i] = engine.TreeNode{
			ID: r.CheckpointID, ThreadID: r.ThreadID, Namespace: r.Namespace, Seq: r.Seq, Step: r.Step,
			CreatedAt: r.CreatedAt, Trigger: engine.Trigger(r.Trigger), Tags: r.Tags, Summary: r.Summary, IsHead: r.IsHead,
			ParentID: r.ParentCheckpointID, MergeParentID: r.MergeParentID,
		}
	}
	return out, nil
}

// Branch implements engine.Store.
func (s *Store) Branch(ctx context.Context, fromID uuid.UUID, newThreadID, name string, id uuid.UUID) (engine.BranchResult, error) {
	r, err := s.q.ThreadBranch(ctx, db.ThreadBranchParams{
		SourceCheckpointID: fromID, NewThreadID: newThreadID, BranchName: name, CheckpointID: id,
	})
	if err != nil {
		return engine.BranchResult{}, storeError(err)
	}
	return engine.BranchResult{ThreadID: r.ThreadID, CheckpointID: r.CheckpointID, Step: r.Step}, nil
}

// Branches implements engine.Store.
func (s *Store) Branches(ctx context.Context, threadID string) ([]engine.BranchInfo, error) {
	rows, err := s.q.ThreadListBranches(ctx, threadID)
	if err != nil {
		return nil, storeError(err)
	}
	out := make([]engine.BranchInfo, len(rows))
	for i, r := range rows {
		out[i] = engine.BranchInfo{ThreadID: r.ThreadID, Namespace: r.Namespace, Name: r.BranchName, FromID: r.BranchedFrom, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// Merge implements engine.Store.
func (s *Store) Merge(ctx context.Context, branchThread, intoThread, namespace string, id uuid.UUID) (engine.MergeResult, error) {
	r, err := s.q.ThreadMerge(ctx, db.ThreadMergeParams{
		BranchThreadID: branchThread, IntoThreadID: intoThread, CheckpointID: id, Namespace: namespace,
	})
	if err != nil {
		return engine.MergeResult{}, storeError(err)
	}
	return engine.MergeResult{
		ThreadID: r.ThreadID, CheckpointID: r.CheckpointID, ParentID: r.ParentCheckpointID,
		MergeParentID: r.MergeParentID, Step: r.Step,
	}, nil
}

// CopyThread implements engine.Store.
func (s *Store) CopyThread(ctx context.Context, src, dst string) ([]engine.CopiedID, error) {
	rows, err := s.q.ThreadCopy(ctx, db.ThreadCopyParams{SourceThreadID: src, TargetThreadID: dst})
	if err != nil {
		return nil, storeError(err)
	}
	ids := make([]engine.CopiedID, len(rows))
	for i, r := range rows {
		ids[i] = engine.CopiedID{Old: r.OldCheckpointID, New: r.NewCheckpointID}
	}
	return ids, nil
}

// SweepBatch implements engine.Store.
func (s *Store) SweepBatch(ctx context.Context, p engine.Policy, after string, size int) (engine.SweepBatchResult, error) {
	b, err := s.q.ThreadGcBatch(ctx, db.ThreadGcBatchParams{
		Policy: p.Name(), N: int32(p.N()), AgeSeconds: p.Age().Seconds(), AfterThreadID: after, BatchSize: int32(size),
	})
	if err != nil {
		return engine.SweepBatchResult{}, storeError(err)
	}
	return engine.SweepBatchResult{
		LastThreadID: b.LastThreadID, Threads: int(b.Threads), Expired: int(b.Expired),
		Failed: int(b.Failed), Deleted: b.Deleted,
	}, nil
}

// PreviewSweepBatch implements engine.Store: SweepBatch in a transaction
// (a savepoint in a caller's) that it rolls back.
func (s *Store) PreviewSweepBatch(ctx context.Context, p engine.Policy, after string, size int) (engine.SweepBatchResult, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return engine.SweepBatchResult{}, storeError(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return s.over(tx, s.tenant).SweepBatch(ctx, p, after, size)
}

// Expiry implements engine.Store.
func (s *Store) Expiry(ctx context.Context, threadID string) (time.Time, bool, error) {
	r, err := s.q.ThreadGetExpiry(ctx, threadID)
	if err != nil {
		return time.Time{}, false, storeError(err)
	}
	at := r.ExpiresAt.Time
	if r.ExpiresAt.Valid && r.ExpiresAt.InfinityModifier != pgtype.Infinity && at.IsZero() {
		// -infinity or year 1's first instant, set by a bare UPDATE
		// (thread_set_expiry refuses both): expired, as a sweep takes it,
		// not the zero time of "does not expire". (+infinity never
		// expires: the zero time.)
		at = time.Time{}.Add(time.Microsecond)
	}
	return at, r.ExpireAction == "keep_latest", nil
}

// SetExpiry implements engine.Store.
func (s *Store) SetExpiry(ctx context.Context, threadID string, at time.Time, p engine.Policy) (int64, error) {
	n, err := s.q.ThreadSetExpiry(ctx, db.ThreadSetExpiryParams{
		ThreadID: threadID, ExpiresAt: pgtype.Timestamptz{Time: at, Valid: !at.IsZero()}, KeepLatest: p.Name() == "keep_latest",
	})
	return n, storeError(err)
}
