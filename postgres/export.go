package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/enginedb"
)

// exportPage is how many checkpoints an export reads per query: its memory
// is about this many rows as stored.
const exportPage = 64

// Export implements engine.Store.
func (s *Store) Export(ctx context.Context, threadID string, opts engine.ExportOptions, sink engine.ExportSink) error {
	// One snapshot of the database: a repeatable-read transaction of its
	// own, or, inside the caller's transaction, a savepoint of it (which
	// sees what the caller's isolation level lets it see).
	var tx pgx.Tx
	var err error
	if b, ok := s.db.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	}); ok && !s.inTx {
		tx, err = b.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	} else {
		tx, err = s.db.Begin(ctx)
	}
	if err != nil {
		return dbError("begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := enginedb.New(binaryUUIDs{tx})

	threads, err := q.ThreadExportTree(ctx, enginedb.ThreadExportTreeParams{ThreadID: threadID, Branches: opts.Branches})
	if err != nil {
		return dbError("list the threads", err)
	}
	if len(threads) == 0 {
		return engine.ErrNotFound
	}
	for _, thread := range threads {
		if err := pgExportThread(ctx, q, thread, sink); err != nil {
			return err
		}
	}
	return nil
}

// pgThreadRows reads a thread's rows, one per namespace, as an export has
// them.
func pgThreadRows(ctx context.Context, q *enginedb.Queries, threadID string) ([]engine.ExportThread, error) {
	rows, err := q.ThreadExportRows(ctx, threadID)
	if err != nil {
		return nil, dbError("read the thread", err)
	}
	out := make([]engine.ExportThread, len(rows))
	for i, r := range rows {
		out[i] = engine.ExportThread{ThreadID: threadID, Namespace: r.Namespace, RewoundTo: nullID(r.RewoundTo), Metadata: r.Metadata,
			CreatedAt: r.CreatedAt, BranchName: textPtr(r.BranchName), BranchedFrom: nullID(r.BranchedFrom),
			BranchedFromThread: textPtr(r.BranchedFromThread)}
	}
	return out, nil
}

// pgExportThread hands sink one thread's rows, a page of checkpoints at a
// time.
func pgExportThread(ctx context.Context, q *enginedb.Queries, threadID string, sink engine.ExportSink) error {
	threads, err := pgThreadRows(ctx, q, threadID)
	if err != nil {
		return err
	}
	for _, t := range threads {
		if err := sink.Thread(t); err != nil {
			return err
		}
	}
	page := enginedb.CheckpointExportPageParams{ThreadID: threadID, MaxRows: exportPage}
	for {
		cps, err := q.CheckpointExportPage(ctx, page)
		if err != nil {
			return dbError("read checkpoints", err)
		}
		for _, r := range cps {
			c := engine.ExportCheckpoint{
				ThreadID: threadID, Namespace: r.Namespace, Seq: r.Seq, ID: r.CheckpointID,
				ParentID: nullID(r.ParentCheckpointID), MergeParentID: nullID(r.MergeParentID), Step: r.Step,
				CreatedAt: r.CreatedAt, Trigger: engine.Trigger(r.Trigger), Tags: r.Tags, Summary: r.Summary,
				Storage: r.Format, BaseID: nullID(r.BaseCheckpointID), DeltaRun: int64(r.DeltaRun), DeltaDepth: int64(r.DeltaDepth),
				Metadata: r.Metadata, Messages: r.Messages, State: r.State, ToolResults: r.ToolResults,
				StateRemoved: r.StateRemoved, ToolResultsRemoved: r.ToolResultsRemoved,
				NextNode: r.NextNode, SizeBytes: r.SizeBytes,
			}
			if err := json.Unmarshal(r.PendingWrites, &c.PendingWrites); err != nil {
				return fmt.Errorf("pending writes of checkpoint %s: %w", c.ID, err)
			}
			if err := sink.Checkpoint(c); err != nil {
				return err
			}
		}
		if len(cps) < exportPage {
			return nil
		}
		last := cps[len(cps)-1]
		page.AfterNamespace, page.AfterSeq = last.Namespace, last.Seq
	}
}

func textPtr(t pgtype.Text) *string {
	if !t.Valid {
		return nil
	}
	return &t.String
}

func optText(s *string) pgtype.Text {
	if s == nil {
		return pgtype.Text{}
	}
	return pgtype.Text{String: *s, Valid: true}
}

// Import implements engine.Store.
func (s *Store) Import(ctx context.Context, fn func(engine.ImportWriter) error) error {
	tx, err := s.db.Begin(ctx) // a savepoint inside the caller's transaction
	if err != nil {
		return dbError("begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	w := &pgImport{tx: tx, q: enginedb.New(binaryUUIDs{tx}), threads: map[string]bool{}}
	if err := fn(w); err != nil {
		return err
	}
	if err := w.flush(ctx); err != nil {
		return err
	}
	return dbError("commit", tx.Commit(ctx))
}

// pgImport writes an import's rows: thread rows at once, checkpoints and
// pending writes by pipelined INSERTs in batches of engine.ImportBatch rows (or
// engine.ImportBatchBytes of content), so that its memory does not grow with the
// import.
type pgImport struct {
	tx      pgx.Tx // the import's transaction
	q       *enginedb.Queries
	threads map[string]bool // threads created by this import
	rows    []enginedb.CheckpointImportParams
	writes  []enginedb.PendingWriteImportParams
	bytes   int
}

func (w *pgImport) Thread(ctx context.Context, t engine.ExportThread) error {
	if !w.threads[t.ThreadID] {
		if err := w.q.ThreadImportLock(ctx, t.ThreadID); err != nil {
			return dbError("lock the thread", err)
		}
		exists, err := w.q.ThreadImportExists(ctx, t.ThreadID)
		if err != nil {
			return dbError("look for the thread", err)
		}
		if exists {
			return fmt.Errorf("%w: thread %q already exists; delete it first, or import into another database", engine.ErrInvalidInput, t.ThreadID)
		}
		w.threads[t.ThreadID] = true
	}
	return pgImportError(w.q.ThreadImport(ctx, enginedb.ThreadImportParams{
		ThreadID: t.ThreadID, Namespace: t.Namespace, RewoundTo: optID(t.RewoundTo), Metadata: t.Metadata,
		CreatedAt: t.CreatedAt, BranchName: optText(t.BranchName), BranchedFrom: optID(t.BranchedFrom),
		BranchedFromThread: optText(t.BranchedFromThread),
	}))
}

// Find implements engine.ImportWriter.
func (w *pgImport) Find(ctx context.Context, id uuid.UUID) (engine.CheckpointInfo, bool, error) {
	r, err := w.q.CheckpointImportFind(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.CheckpointInfo{}, false, nil
	}
	if err != nil {
		return engine.CheckpointInfo{}, false, dbError(fmt.Sprintf("look up checkpoint %s", id), err)
	}
	return engine.CheckpointInfo{ID: id, ThreadID: r.ThreadID, Namespace: r.Namespace, Step: r.Step}, true, nil
}

// HasDataKey implements engine.ImportWriter.
func (w *pgImport) HasDataKey(ctx context.Context, threadID string) (bool, error) {
	sealed, err := w.q.ThreadImportSealed(ctx, threadID)
	return sealed, dbError("look for the thread's data key", err)
}

// HoldThread implements engine.ImportWriter: the thread's lock
// (ThreadImportLock), then its rows, in the import's transaction.
func (w *pgImport) HoldThread(ctx context.Context, threadID string) ([]engine.ExportThread, error) {
	if err := w.q.ThreadImportLock(ctx, threadID); err != nil {
		return nil, dbError("lock the thread", err)
	}
	return pgThreadRows(ctx, w.q, threadID)
}

func (w *pgImport) Checkpoint(ctx context.Context, c engine.ExportCheckpoint, d engine.ImportDigests) error {
	row := enginedb.CheckpointImportParams{
		ThreadID: c.ThreadID, Namespace: c.Namespace, Seq: c.Seq, CheckpointID: c.ID,
		ParentCheckpointID: optID(c.ParentID), MergeParentID: optID(c.MergeParentID), Step: c.Step,
		CreatedAt: c.CreatedAt, Trigger: string(c.Trigger), Tags: c.Tags, Summary: c.Summary, Metadata: c.Metadata,
		Format: c.Storage, BaseCheckpointID: optID(c.BaseID), DeltaRun: int32(c.DeltaRun), DeltaDepth: int32(c.DeltaDepth),
		Messages: c.Messages, State: c.State, ToolResults: c.ToolResults,
		StateRemoved: []string{}, ToolResultsRemoved: []string{}, NextNode: c.NextNode, SizeBytes: c.SizeBytes,
	}
	// Checked by the engine: JSON arrays of strings.
	if err := json.Unmarshal(c.StateRemoved, &row.StateRemoved); err != nil {
		return fmt.Errorf("%w: state removed: %v", engine.ErrInvalidJSON, err)
	}
	if err := json.Unmarshal(c.ToolResultsRemoved, &row.ToolResultsRemoved); err != nil {
		return fmt.Errorf("%w: tool results removed: %v", engine.ErrInvalidJSON, err)
	}
	row.MessagesCount = pgtype.Int4{Int32: int32(d.MessagesCount), Valid: true}
	row.MessagesDigest, row.StateDigests, row.ToolResultsDigests = d.MessagesDigest, d.StateDigests, d.ToolResultsDigests
	w.rows = append(w.rows, row)
	w.bytes += len(c.Messages) + len(c.State) + len(c.ToolResults) + len(c.Metadata)
	for _, pw := range c.PendingWrites {
		w.writes = append(w.writes, enginedb.PendingWriteImportParams{
			ThreadID: c.ThreadID, Namespace: c.Namespace, CheckpointSeq: c.Seq, CheckpointID: c.ID,
			TaskID: pw.TaskID, Idx: int32(pw.Index), Channel: pw.Channel, Value: pw.Value, CreatedAt: pw.CreatedAt,
		})
		w.bytes += len(pw.Value)
	}
	if len(w.rows) >= engine.ImportBatch || w.bytes >= engine.ImportBatchBytes {
		return w.flush(ctx)
	}
	return nil
}

// flush writes the rows held: after a check that none of their ids is in
// use, the checkpoints, then their pending writes, each an INSERT per row
// in one pipeline (COPY FROM refuses a table under row-level security), in
// a savepoint. The first row refused is the import's error, named.
func (w *pgImport) flush(ctx context.Context) error {
	if len(w.rows) == 0 {
		return nil
	}
	ids := make([]string, len(w.rows))
	for i, r := range w.rows {
		ids[i] = r.CheckpointID.String()
	}
	used, err := w.q.CheckpointImportIDsInUse(ctx, ids)
	if err != nil {
		return dbError("look up checkpoint ids", err)
	}
	if len(used) > 0 {
		return &engine.ImportRowError{ID: used[0], Err: fmt.Errorf("%w: its id is in use", engine.ErrIDConflict)}
	}
	sp, err := w.tx.Begin(ctx)
	if err != nil {
		return dbError("begin", err)
	}
	defer sp.Rollback(context.WithoutCancel(ctx))
	q := w.q.WithTx(sp)
	if i, err := refusedRow(q.CheckpointImport(ctx, w.rows)); err != nil {
		if i < 0 {
			return pgImportError(err)
		}
		r := w.rows[i]
		return &engine.ImportRowError{ID: r.CheckpointID, Err: engine.NameRefusedJSON(pgImportError(err),
			engine.JSONField{Name: "metadata", Text: r.Metadata}, engine.JSONField{Name: "messages", Text: r.Messages}, engine.JSONField{Name: "state", Text: r.State}, engine.JSONField{Name: "tool results", Text: r.ToolResults})}
	}
	if len(w.writes) > 0 {
		if i, err := refusedRow(q.PendingWriteImport(ctx, w.writes)); err != nil {
			if i < 0 {
				return pgImportError(err)
			}
			pw := w.writes[i]
			return &engine.ImportRowError{ID: pw.CheckpointID,
				Err: engine.NameRefusedJSON(pgImportError(err), engine.JSONField{Name: fmt.Sprintf("pending write %d value", pw.Idx), Text: pw.Value})}
		}
	}
	if err := sp.Commit(ctx); err != nil {
		return dbError("release the savepoint", err)
	}
	w.rows, w.writes, w.bytes = w.rows[:0], w.writes[:0], 0
	return nil
}

// refusedRow runs a batch of one INSERT per row and returns the first row
// the server refused, with its error; -1 and the error when the failure was
// not a row's (a lost connection, a context that ended), -1 and nil when
// none failed. In a transaction, the rows after a refused one are not run.
func refusedRow(b interface {
	Exec(func(int, error))
	Close() error
}) (int, error) {
	refused, first := -1, error(nil)
	b.Exec(func(i int, err error) {
		if err != nil && first == nil {
			first = err
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				refused = i
			}
		}
	})
	if err := b.Close(); first == nil {
		first = err
	}
	return refused, first
}

// pgImportError maps a failed insert: a checkpoint id that the table holds
// (stored by a write that committed after CheckpointImportIDsInUse looked:
// the engine refuses an import that holds one twice) is ErrIDConflict; any
// other duplicate key means the export holds the same row twice.
func pgImportError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		if pgErr.ConstraintName == constraintCheckpointID {
			return fmt.Errorf("%w: its id is in use", engine.ErrIDConflict)
		}
		return fmt.Errorf("%w: a row appears twice (%s)", engine.ErrInvalidInput, pgErr.Detail)
	}
	return storeError(err)
}

func optID(id *uuid.UUID) uuid.NullUUID {
	if id == nil {
		return uuid.NullUUID{}
	}
	return uuid.NullUUID{UUID: *id, Valid: true}
}

func nullID(n uuid.NullUUID) *uuid.UUID {
	if !n.Valid {
		return nil
	}
	return &n.UUID
}
