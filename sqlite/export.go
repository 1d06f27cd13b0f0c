package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// exportPage is how many checkpoints an export reads per query: its memory
// is about this many rows as stored.
const exportPage = 64

// Export reads a thread (with opts.Branches, its branches too, recursively)
// in one read transaction (one snapshot of the file) and hands sink, for
// each thread, its thread rows, then its checkpoints as stored, in
// namespace then write order, a page at a time. Errors:
// engine.ErrNotFound for an unknown thread; sink's errors.
func (s *Store) Export(ctx context.Context, threadID string, opts engine.ExportOptions, sink engine.ExportSink) error {
	return s.read(ctx, func(q *queries) error {
		var branches int64
		if opts.Branches {
			branches = 1
		}
		threads, err := q.ThreadExportTree(ctx, sqlitedb.ThreadExportTreeParams{ThreadID: threadID, Branches: branches})
		if err != nil {
			return dbError("list the threads", err)
		}
		if len(threads) == 0 {
			return fmt.Errorf("thread %q: %w", threadID, engine.ErrNotFound)
		}
		for _, thread := range threads {
			if err := exportThread(ctx, q, thread, sink); err != nil {
				return err
			}
		}
		return nil
	})
}

// threadRows reads a thread's rows, one per namespace, as an export has
// them.
func threadRows(ctx context.Context, q *queries, threadID string) ([]engine.ExportThread, error) {
	threads, err := q.ThreadListRows(ctx, threadID)
	if err != nil {
		return nil, dbError("read the thread", err)
	}
	out := make([]engine.ExportThread, len(threads))
	for i, t := range threads {
		out[i] = engine.ExportThread{
			ThreadID: threadID, Namespace: t.Namespace, RewoundTo: optID(t.RewoundTo),
			Metadata: json.RawMessage(t.Metadata), CreatedAt: fromMicros(t.CreatedAt),
			BranchName: optString(t.BranchName), BranchedFrom: optID(t.BranchedFrom),
			BranchedFromThread: optString(t.BranchedFromThread),
		}
	}
	return out, nil
}

// exportThread hands sink one thread's rows.
func exportThread(ctx context.Context, q *queries, threadID string, sink engine.ExportSink) error {
	threads, err := threadRows(ctx, q, threadID)
	if err != nil {
		return err
	}
	for _, t := range threads {
		if err := sink.Thread(t); err != nil {
			return err
		}
	}
	page := sqlitedb.CheckpointExportPageParams{ThreadID: threadID, MaxRows: exportPage}
	for {
		rows, err := q.CheckpointExportPage(ctx, page)
		if err != nil {
			return dbError("read checkpoints", err)
		}
		for _, row := range rows {
			if err := exportCheckpoint(ctx, q, row, sink); err != nil {
				return err
			}
		}
		if len(rows) < exportPage {
			return nil
		}
		last := rows[len(rows)-1]
		page.AfterNamespace, page.AfterSeq = last.Namespace, last.Seq
	}
}

// exportCheckpoint hands sink one row as stored, with its pending writes.
func exportCheckpoint(ctx context.Context, q *queries, row sqlitedb.Checkpoint, sink engine.ExportSink) error {
	var tags []string
	if err := json.Unmarshal([]byte(row.Tags), &tags); err != nil {
		return fmt.Errorf("tags of checkpoint %s: %w", row.CheckpointID, err)
	}
	ws, err := q.PendingWriteListByCheckpoint(ctx, sqlitedb.PendingWriteListByCheckpointParams{
		ThreadID: row.ThreadID, Namespace: row.Namespace, CheckpointSeq: row.Seq,
	})
	if err != nil {
		return dbError("read pending writes", err)
	}
	ec := engine.ExportCheckpoint{
		ThreadID: row.ThreadID, Namespace: row.Namespace, Seq: row.Seq, ID: row.CheckpointID,
		ParentID: optID(row.ParentCheckpointID), MergeParentID: optID(row.MergeParentID), Step: row.Step,
		CreatedAt: fromMicros(row.CreatedAt), Trigger: engine.Trigger(row.Trigger), Tags: tags, Summary: row.Summary,
		Storage: row.Format, BaseID: optID(row.BaseCheckpointID), DeltaRun: row.DeltaRun, DeltaDepth: row.DeltaDepth,
		Metadata: json.RawMessage(row.Metadata), Messages: json.RawMessage(row.Messages), State: json.RawMessage(row.State),
		ToolResults: json.RawMessage(row.ToolResults), StateRemoved: json.RawMessage(row.StateRemoved),
		ToolResultsRemoved: json.RawMessage(row.ToolResultsRemoved), NextNode: row.NextNode, SizeBytes: row.SizeBytes,
		PendingWrites: make([]engine.ExportPendingWrite, len(ws)),
	}
	for i, w := range ws {
		ec.PendingWrites[i] = engine.ExportPendingWrite{TaskID: w.TaskID, Index: int(w.Idx), Channel: w.Channel,
			Value: json.RawMessage(w.Value), CreatedAt: fromMicros(w.CreatedAt)}
	}
	return sink.Checkpoint(ec)
}

func optID(id uuid.NullUUID) *uuid.UUID {
	if !id.Valid {
		return nil
	}
	return &id.UUID
}

func optString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

func fromOptID(id *uuid.UUID) uuid.NullUUID {
	if id == nil {
		return uuid.NullUUID{}
	}
	return uuid.NullUUID{UUID: *id, Valid: true}
}

func fromOptString(s *string) sql.NullString {
	if s == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *s, Valid: true}
}

// Import calls fn with a writer inside one write transaction, committed
// when fn returns nil and rolled back otherwise.
func (s *Store) Import(ctx context.Context, fn func(engine.ImportWriter) error) error {
	// Alone: fn reads its source once, so it cannot run again.
	return s.writeAlone(ctx, func(q *queries, _ execer) error {
		return fn(&importWriter{q: q, threads: map[string]bool{}})
	})
}

// importWriter writes an import's rows inside its transaction, one
// statement per row (a local file has no round trips to save).
type importWriter struct {
	q       *queries
	threads map[string]bool // threads this import created
}

// Find implements engine.ImportWriter.
func (w *importWriter) Find(ctx context.Context, id uuid.UUID) (engine.CheckpointInfo, bool, error) {
	l, err := w.q.CheckpointLinkByID(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return engine.CheckpointInfo{}, false, nil
	}
	if err != nil {
		return engine.CheckpointInfo{}, false, dbError(fmt.Sprintf("look up checkpoint %s", id), err)
	}
	return engine.CheckpointInfo{ID: id, ThreadID: l.ThreadID, Namespace: l.Namespace, Step: l.Step}, true, nil
}

// HasDataKey implements engine.ImportWriter.
func (w *importWriter) HasDataKey(ctx context.Context, threadID string) (bool, error) {
	return hasDataKey(ctx, w.q, threadID)
}

// HoldThread implements engine.ImportWriter: the import's write
// transaction holds the database's write lock, every thread's.
func (w *importWriter) HoldThread(ctx context.Context, threadID string) ([]engine.ExportThread, error) {
	return threadRows(ctx, w.q, threadID)
}

// Thread writes a thread row; the first of a thread fails with
// engine.ErrInvalidInput when the thread exists.
func (w *importWriter) Thread(ctx context.Context, t engine.ExportThread) error {
	if !w.threads[t.ThreadID] {
		if err := threadIsNew(ctx, w.q, t.ThreadID); errors.Is(err, engine.ErrInvalidInput) {
			return fmt.Errorf("%w; delete it first, or import into another database", err)
		} else if err != nil {
			return err
		}
		w.threads[t.ThreadID] = true
	}
	meta := string(t.Metadata)
	if meta == "" {
		meta = "{}"
	}
	if err := engine.CheckJSON(engine.JSONField{Name: "thread metadata", Text: json.RawMessage(meta)}); err != nil {
		return err
	}
	err := w.q.ThreadInsert(ctx, sqlitedb.ThreadInsertParams{
		ThreadID: t.ThreadID, Namespace: t.Namespace, RewoundTo: fromOptID(t.RewoundTo), Metadata: meta,
		CreatedAt: t.CreatedAt.UnixMicro(), BranchName: fromOptString(t.BranchName), BranchedFrom: fromOptID(t.BranchedFrom),
		BranchedFromThread: fromOptString(t.BranchedFromThread), ExpireAction: "delete",
	})
	if err != nil {
		return importError(fmt.Sprintf("thread %q namespace %q", t.ThreadID, t.Namespace), err)
	}
	return nil
}

// Checkpoint writes a row as the export stored it (whole or the same
// delta on the same base), with d's digests and its pending writes.
func (w *importWriter) Checkpoint(ctx context.Context, c engine.ExportCheckpoint, d engine.ImportDigests) error {
	if _, err := w.q.CheckpointLinkByID(ctx, c.ID); err == nil {
		return fmt.Errorf("%w: its id is in use", engine.ErrIDConflict)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return dbError("look up the checkpoint id", err)
	}
	fields := []engine.JSONField{{Name: "metadata", Text: c.Metadata}, {Name: "messages", Text: c.Messages}, {Name: "state", Text: c.State},
		{Name: "tool results", Text: c.ToolResults}, {Name: "state removed", Text: c.StateRemoved}, {Name: "tool results removed", Text: c.ToolResultsRemoved}}
	for _, pw := range c.PendingWrites {
		fields = append(fields, engine.JSONField{Name: fmt.Sprintf("pending write %d value", pw.Index), Text: pw.Value})
	}
	if err := engine.CheckJSON(fields...); err != nil {
		return err
	}
	tags, err := storedTags(c.Tags)
	if err != nil {
		return err
	}
	row := sqlitedb.CheckpointInsertParams{
		ThreadID: c.ThreadID, Namespace: c.Namespace, Seq: c.Seq, CheckpointID: c.ID,
		ParentCheckpointID: fromOptID(c.ParentID), MergeParentID: fromOptID(c.MergeParentID), Step: c.Step,
		CreatedAt: c.CreatedAt.UnixMicro(), Trigger: string(c.Trigger), Tags: tags, Summary: c.Summary,
		NextNode: c.NextNode, SizeBytes: c.SizeBytes, Metadata: string(c.Metadata),
	}
	setStored(&row, stored{format: c.Storage, base: fromOptID(c.BaseID), run: c.DeltaRun, depth: c.DeltaDepth,
		messages: c.Messages, state: c.State, tools: c.ToolResults,
		stateRemoved: c.StateRemoved, toolsRemoved: c.ToolResultsRemoved})
	row.MessagesCount = sql.NullInt64{Int64: d.MessagesCount, Valid: true}
	row.MessagesDigest = d.MessagesDigest
	row.StateDigests = sql.NullString{String: string(d.StateDigests), Valid: true}
	row.ToolResultsDigests = sql.NullString{String: string(d.ToolResultsDigests), Valid: true}
	if err := w.q.CheckpointInsert(ctx, row); err != nil {
		return importError("write the checkpoint", err)
	}
	for _, pw := range c.PendingWrites {
		n, err := w.q.PendingWriteInsert(ctx, sqlitedb.PendingWriteInsertParams{
			ThreadID: c.ThreadID, Namespace: c.Namespace, CheckpointSeq: c.Seq, CheckpointID: c.ID,
			TaskID: pw.TaskID, Idx: int64(pw.Index), Channel: pw.Channel, Value: string(pw.Value),
			CreatedAt: pw.CreatedAt.UnixMicro(),
		})
		if err != nil {
			return importError(fmt.Sprintf("pending write %q/%d", pw.TaskID, pw.Index), err)
		}
		if n == 0 {
			return fmt.Errorf("%w: pending write %q/%d appears twice", engine.ErrInvalidInput, pw.TaskID, pw.Index)
		}
	}
	return nil
}

// importError maps a failed insert: a key in use means the import holds
// the same row twice.
func importError(what string, err error) error {
	if err == nil {
		return nil
	}
	return dbError(what+": a row appears twice, or breaks a constraint", err)
}
