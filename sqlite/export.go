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

// Export reads a thread in one read transaction (one snapshot of the
// file) and hands sink its thread rows, then its checkpoints whole, in
// namespace then write order. Errors: engine.ErrNotFound for an unknown
// thread; sink's errors.
func (s *Store) Export(ctx context.Context, threadID string, sink engine.ExportSink) error {
	return s.read(ctx, func(q *sqlitedb.Queries) error {
		threads, err := q.ThreadListRows(ctx, threadID)
		if err != nil {
			return dbError("read the thread", err)
		}
		if len(threads) == 0 {
			return fmt.Errorf("thread %q: %w", threadID, engine.ErrNotFound)
		}
		for _, t := range threads {
			et := engine.ExportThread{
				ThreadID: threadID, Namespace: t.Namespace, RewoundTo: optID(t.RewoundTo),
				Metadata: json.RawMessage(t.Metadata), CreatedAt: fromMicros(t.CreatedAt),
				BranchName: optString(t.BranchName), BranchedFrom: optID(t.BranchedFrom),
				BranchedFromThread: optString(t.BranchedFromThread),
			}
			if err := sink.Thread(et); err != nil {
				return err
			}
		}
		// One checkpoint at a time: a thread's content need not fit in
		// memory at once.
		rows, err := q.CheckpointListForRetention(ctx, threadID)
		if err != nil {
			return dbError("list checkpoints", err)
		}
		for _, r := range rows {
			row, err := q.CheckpointGetByID(ctx, r.CheckpointID)
			if err != nil {
				return dbError("read a checkpoint", err)
			}
			cp, err := wholeCheckpoint(ctx, q, row)
			if err != nil {
				return err
			}
			ws, err := q.PendingWriteListByCheckpoint(ctx, sqlitedb.PendingWriteListByCheckpointParams{
				ThreadID: row.ThreadID, Namespace: row.Namespace, CheckpointSeq: row.Seq,
			})
			if err != nil {
				return dbError("read pending writes", err)
			}
			ec := engine.ExportCheckpoint{
				ThreadID: threadID, Namespace: cp.Namespace, Seq: cp.Seq, ID: cp.ID,
				ParentID: optID(row.ParentCheckpointID), MergeParentID: optID(row.MergeParentID), Step: cp.Step,
				CreatedAt: cp.CreatedAt, Trigger: cp.Trigger, Tags: cp.Tags, Summary: cp.Summary, Metadata: cp.Metadata,
				Messages: cp.Messages, State: cp.State, ToolResults: cp.ToolResults, NextNode: cp.NextNode,
				SizeBytes: cp.SizeBytes, PendingWrites: make([]engine.ExportPendingWrite, len(ws)),
			}
			for i, w := range ws {
				ec.PendingWrites[i] = engine.ExportPendingWrite{TaskID: w.TaskID, Index: int(w.Idx), Channel: w.Channel,
					Value: json.RawMessage(w.Value), CreatedAt: fromMicros(w.CreatedAt)}
			}
			if err := sink.Checkpoint(ec); err != nil {
				return err
			}
		}
		return nil
	})
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
	return s.write(ctx, func(q *sqlitedb.Queries, _ *sql.Tx) error {
		return fn(&importWriter{q: q, threads: map[string]bool{}, ids: map[uuid.UUID]bool{}})
	})
}

// importWriter writes an import's rows inside its transaction.
type importWriter struct {
	q       *sqlitedb.Queries
	threads map[string]bool    // threads this import created
	ids     map[uuid.UUID]bool // checkpoints this import wrote
}

// Thread writes a thread row; the first of a thread fails with
// engine.ErrInvalidInput when the thread exists.
func (w *importWriter) Thread(ctx context.Context, t engine.ExportThread) error {
	if !w.threads[t.ThreadID] {
		if err := threadIsNew(ctx, w.q, t.ThreadID); err != nil {
			return fmt.Errorf("%w; delete it first, or import into another database", err)
		}
		w.threads[t.ThreadID] = true
	}
	meta := string(t.Metadata)
	if meta == "" {
		meta = "{}"
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

// Checkpoint writes a checkpoint whole (no digests: the next write after
// it is whole too), with its pending writes.
func (w *importWriter) Checkpoint(ctx context.Context, c engine.ExportCheckpoint) error {
	if w.ids[c.ID] {
		return fmt.Errorf("%w: checkpoint %s appears twice", engine.ErrInvalidInput, c.ID)
	}
	if _, err := w.q.CheckpointLinkByID(ctx, c.ID); err == nil {
		return fmt.Errorf("checkpoint %s: id in use: %w", c.ID, engine.ErrIDConflict)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return dbError("look up the checkpoint id", err)
	}
	tags, err := json.Marshal(nonNil(c.Tags))
	if err != nil {
		return fmt.Errorf("tags: %w", err)
	}
	row := sqlitedb.CheckpointInsertParams{
		ThreadID: c.ThreadID, Namespace: c.Namespace, Seq: c.Seq, CheckpointID: c.ID,
		ParentCheckpointID: fromOptID(c.ParentID), MergeParentID: fromOptID(c.MergeParentID), Step: c.Step,
		CreatedAt: c.CreatedAt.UnixMicro(), Trigger: string(c.Trigger), Tags: string(tags), Summary: c.Summary,
		NextNode: c.NextNode, SizeBytes: c.SizeBytes, Metadata: string(c.Metadata),
	}
	setStored(&row, storeWhole(content{c.Messages, c.State, c.ToolResults}))
	if err := w.q.CheckpointInsert(ctx, row); err != nil {
		return importError(fmt.Sprintf("checkpoint %s", c.ID), err)
	}
	w.ids[c.ID] = true
	for _, pw := range c.PendingWrites {
		n, err := w.q.PendingWriteInsert(ctx, sqlitedb.PendingWriteInsertParams{
			ThreadID: c.ThreadID, Namespace: c.Namespace, CheckpointSeq: c.Seq, CheckpointID: c.ID,
			TaskID: pw.TaskID, Idx: int64(pw.Index), Channel: pw.Channel, Value: string(pw.Value),
			CreatedAt: pw.CreatedAt.UnixMicro(),
		})
		if err != nil {
			return importError(fmt.Sprintf("pending write of checkpoint %s", c.ID), err)
		}
		if n == 0 {
			return fmt.Errorf("%w: pending write %s/%d of checkpoint %s appears twice", engine.ErrInvalidInput, pw.TaskID, pw.Index, c.ID)
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
