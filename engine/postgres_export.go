package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func (s *pgStore) Export(ctx context.Context, threadID string, sink ExportSink) error {
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

	threads, err := pgExportThreads(ctx, tx, threadID)
	if err != nil {
		return err
	}
	if len(threads) == 0 {
		return ErrNotFound
	}
	for _, t := range threads {
		if err := sink.Thread(t); err != nil {
			return err
		}
	}

	rows, err := tx.Query(ctx, `
		SELECT c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id, c.step,
		       c.created_at, c.trigger, c.tags, c.summary, c.metadata,
		       m.messages, m.state, m.tool_results, c.next_node, c.size_bytes,
		       coalesce((SELECT jsonb_agg(jsonb_build_object('task_id', p.task_id, 'idx', p.idx,
		                        'channel', p.channel, 'value', p.value, 'created_at', p.created_at)
		                        ORDER BY p.task_id, p.idx)
		                 FROM pgcheckpoint.pending_writes p
		                 WHERE p.thread_id = c.thread_id AND p.namespace = c.namespace
		                   AND p.checkpoint_seq = c.seq), '[]')
		FROM pgcheckpoint.checkpoints c
		-- Whole content whatever the storage format, in this transaction.
		CROSS JOIN LATERAL pgcheckpoint.materialize(c.checkpoint_id) m
		WHERE c.thread_id = $1
		ORDER BY c.namespace, c.seq`, threadID)
	if err != nil {
		return dbError("read checkpoints", err)
	}
	defer rows.Close()
	for rows.Next() {
		c := ExportCheckpoint{ThreadID: threadID}
		var parent, merge uuid.NullUUID
		var writes []byte
		if err := rows.Scan(&c.Namespace, &c.Seq, &c.ID, &parent, &merge, &c.Step, &c.CreatedAt, &c.Trigger,
			&c.Tags, &c.Summary, &c.Metadata, &c.Messages, &c.State, &c.ToolResults, &c.NextNode,
			&c.SizeBytes, &writes); err != nil {
			return dbError("read checkpoints", err)
		}
		c.ParentID, c.MergeParentID = nullID(parent), nullID(merge)
		if err := json.Unmarshal(writes, &c.PendingWrites); err != nil {
			return fmt.Errorf("pending writes of checkpoint %s: %w", c.ID, err)
		}
		if err := sink.Checkpoint(c); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return dbError("read checkpoints", err)
	}
	return nil
}

func pgExportThreads(ctx context.Context, tx pgx.Tx, threadID string) ([]ExportThread, error) {
	rows, err := tx.Query(ctx, `
		SELECT namespace, rewound_to, metadata, created_at, branch_name, branched_from, branched_from_thread
		FROM pgcheckpoint.threads WHERE thread_id = $1 ORDER BY namespace`, threadID)
	if err != nil {
		return nil, dbError("read the thread", err)
	}
	defer rows.Close()
	var out []ExportThread
	for rows.Next() {
		t := ExportThread{ThreadID: threadID}
		var rewound, from uuid.NullUUID
		if err := rows.Scan(&t.Namespace, &rewound, &t.Metadata, &t.CreatedAt, &t.BranchName, &from, &t.BranchedFromThread); err != nil {
			return nil, dbError("read the thread", err)
		}
		t.RewoundTo, t.BranchedFrom = nullID(rewound), nullID(from)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("read the thread", err)
	}
	return out, nil
}

func (s *pgStore) Import(ctx context.Context, fn func(ImportWriter) error) error {
	tx, err := s.db.Begin(ctx) // a savepoint inside the caller's transaction
	if err != nil {
		return dbError("begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	w := &pgImport{tx: tx, batch: &pgx.Batch{}, threads: map[string]bool{}, seen: map[uuid.UUID]bool{}}
	if err := fn(w); err != nil {
		return err
	}
	if err := w.flush(ctx); err != nil {
		return err
	}
	return dbError("commit", tx.Commit(ctx))
}

// pgImport writes an import's rows, checkpoints in pipelined batches.
type pgImport struct {
	tx      pgx.Tx
	threads map[string]bool    // threads created by this import
	seen    map[uuid.UUID]bool // checkpoint ids of this import
	batch   *pgx.Batch
	ids     []uuid.UUID        // per queued statement: the checkpoint id, or uuid.Nil for pending writes
	rows    []ExportCheckpoint // per queued statement: its checkpoint, to name what a refusal is about
}

func (w *pgImport) Thread(ctx context.Context, t ExportThread) error {
	if !w.threads[t.ThreadID] {
		if _, err := w.tx.Exec(ctx, `SELECT pgcheckpoint.lock_thread($1)`, t.ThreadID); err != nil {
			return dbError("lock the thread", err)
		}
		var exists bool
		if err := w.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pgcheckpoint.threads WHERE thread_id = $1)
			OR EXISTS (SELECT 1 FROM pgcheckpoint.checkpoints WHERE thread_id = $1)`, t.ThreadID).Scan(&exists); err != nil {
			return dbError("look for the thread", err)
		}
		if exists {
			return fmt.Errorf("%w: thread %q already exists; delete it first, or import into another database", ErrInvalidInput, t.ThreadID)
		}
		w.threads[t.ThreadID] = true
	}
	_, err := w.tx.Exec(ctx, `
		INSERT INTO pgcheckpoint.threads (thread_id, namespace, rewound_to, metadata, created_at,
		                                  branch_name, branched_from, branched_from_thread)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		t.ThreadID, t.Namespace, optID(t.RewoundTo), t.Metadata, t.CreatedAt, t.BranchName, optID(t.BranchedFrom), t.BranchedFromThread)
	return pgImportError(err)
}

func (w *pgImport) Checkpoint(ctx context.Context, c ExportCheckpoint) error {
	if w.seen[c.ID] {
		return fmt.Errorf("%w: checkpoint %s appears twice in the import", ErrInvalidInput, c.ID)
	}
	w.seen[c.ID] = true
	w.batch.Queue(`
		INSERT INTO pgcheckpoint.checkpoints (thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id,
		    merge_parent_id, step, created_at, trigger, tags, summary, metadata, format, messages, state,
		    tool_results, next_node, size_bytes)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'full', $13, $14, $15, $16, $17
		WHERE NOT EXISTS (SELECT 1 FROM pgcheckpoint.checkpoints e WHERE e.checkpoint_id = $4)`,
		c.ThreadID, c.Namespace, c.Seq, c.ID, optID(c.ParentID), optID(c.MergeParentID), c.Step, c.CreatedAt,
		string(c.Trigger), c.Tags, c.Summary, c.Metadata, c.Messages, c.State, c.ToolResults, c.NextNode, c.SizeBytes)
	w.ids, w.rows = append(w.ids, c.ID), append(w.rows, c)
	if n := len(c.PendingWrites); n > 0 {
		tasks, channels, created := make([]string, n), make([]string, n), make([]time.Time, n)
		idxs, values := make([]int32, n), make([]string, n)
		for i, pw := range c.PendingWrites {
			tasks[i], channels[i], created[i], idxs[i], values[i] = pw.TaskID, pw.Channel, pw.CreatedAt, int32(pw.Index), string(pw.Value)
		}
		w.batch.Queue(`
			INSERT INTO pgcheckpoint.pending_writes (thread_id, namespace, checkpoint_seq, checkpoint_id,
			    task_id, idx, channel, value, created_at)
			SELECT $1, $2, $3, $4, w.task_id, w.idx, w.channel, w.value::jsonb, w.created_at
			FROM unnest($5::text[], $6::int[], $7::text[], $8::text[], $9::timestamptz[])
			     AS w(task_id, idx, channel, value, created_at)`,
			c.ThreadID, c.Namespace, c.Seq, c.ID, tasks, idxs, channels, values, created)
		w.ids, w.rows = append(w.ids, uuid.Nil), append(w.rows, c)
	}
	if len(w.ids) >= importBatch {
		return w.flush(ctx)
	}
	return nil
}

// flush sends the queued inserts in one round trip.
func (w *pgImport) flush(ctx context.Context) error {
	if w.batch.Len() == 0 {
		return nil
	}
	res := w.tx.SendBatch(ctx, w.batch)
	for i, id := range w.ids {
		tag, err := res.Exec()
		if err != nil {
			res.Close()
			c := w.rows[i]
			return fmt.Errorf("checkpoint %s: %w", c.ID, nameRefusedJSON(pgImportError(err), importJSONFields(c)...))
		}
		if id != uuid.Nil && tag.RowsAffected() != 1 {
			res.Close()
			return fmt.Errorf("checkpoint %s: %w", id, ErrIDConflict)
		}
	}
	if err := res.Close(); err != nil {
		return pgImportError(err)
	}
	w.batch, w.ids, w.rows = &pgx.Batch{}, w.ids[:0], w.rows[:0]
	return nil
}

// pgImportError maps a failed insert: a duplicate key means the export
// holds the same row twice.
func pgImportError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: a row appears twice (%s)", ErrInvalidInput, pgErr.Detail)
	}
	return storeError(err)
}
