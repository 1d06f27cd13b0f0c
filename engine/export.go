package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ExportFormat is the version of the export format, in its header line.
const ExportFormat = 1

// An export is JSON lines: a header, then one line per thread row (one per
// namespace), then one per checkpoint in write order, each with its pending
// writes. Everything a reader sees is kept, so an import puts back exactly
// what was exported: ids, parents, steps, seqs, times, content (NUL
// characters included). How content was stored is not: an export holds each
// checkpoint's whole content, and an import stores each one whole (format
// 'full', without digests, so the next write after it is whole too).

// ExportHeader is the first line of an export.
type ExportHeader struct {
	Kind     string `json:"kind"` // "pgcheckpoint-export"
	Format   int    `json:"format"`
	ThreadID string `json:"thread_id"`
}

// ExportThread is a thread row of an export.
type ExportThread struct {
	Kind               string          `json:"kind"` // "thread"
	ThreadID           string          `json:"thread_id"`
	Namespace          string          `json:"namespace"`
	RewoundTo          *uuid.UUID      `json:"rewound_to,omitempty"`
	Metadata           json.RawMessage `json:"metadata"`
	CreatedAt          time.Time       `json:"created_at"`
	BranchName         *string         `json:"branch_name,omitempty"`
	BranchedFrom       *uuid.UUID      `json:"branched_from,omitempty"`
	BranchedFromThread *string         `json:"branched_from_thread,omitempty"`
}

// ExportCheckpoint is a checkpoint of an export, with its pending writes.
type ExportCheckpoint struct {
	Kind          string               `json:"kind"` // "checkpoint"
	ThreadID      string               `json:"thread_id"`
	Namespace     string               `json:"namespace"`
	Seq           int64                `json:"seq"`
	ID            uuid.UUID            `json:"id"`
	ParentID      *uuid.UUID           `json:"parent_id,omitempty"`
	MergeParentID *uuid.UUID           `json:"merge_parent_id,omitempty"`
	Step          int64                `json:"step"`
	CreatedAt     time.Time            `json:"created_at"`
	Trigger       Trigger              `json:"trigger"`
	Tags          []string             `json:"tags"`
	Summary       string               `json:"summary"`
	Metadata      json.RawMessage      `json:"metadata"`
	Messages      json.RawMessage      `json:"messages"`
	State         json.RawMessage      `json:"state"`
	ToolResults   json.RawMessage      `json:"tool_results"`
	NextNode      string               `json:"next_node"`
	SizeBytes     int64                `json:"size_bytes"`
	PendingWrites []ExportPendingWrite `json:"pending_writes"`
}

// ExportPendingWrite is a pending write of an exported checkpoint.
type ExportPendingWrite struct {
	TaskID    string          `json:"task_id"`
	Index     int             `json:"idx"`
	Channel   string          `json:"channel"`
	Value     json.RawMessage `json:"value"`
	CreatedAt time.Time       `json:"created_at"`
}

// ExportStats counts what an export or import moved.
type ExportStats struct {
	Threads       int64 // thread rows (one per namespace)
	Checkpoints   int64
	PendingWrites int64
}

// Export writes thread threadID (every namespace; not its branches, which
// are threads of their own) to w as JSON lines, read in one consistent
// snapshot of the database. Errors: ErrNotFound for an unknown thread;
// ErrInvalidInput for a malformed thread id; w's write errors.
func (e *Engine) Export(ctx context.Context, threadID string, w io.Writer) (ExportStats, error) {
	var st ExportStats
	if err := checkID("thread id", threadID, false); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	tx, err := e.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return st, dbError("export: begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)

	threads, err := exportThreads(ctx, tx, threadID)
	if err != nil {
		return st, err
	}
	if len(threads) == 0 {
		return st, fmt.Errorf("export: thread %q: %w", threadID, ErrNotFound)
	}
	if err := enc.Encode(ExportHeader{Kind: "pgcheckpoint-export", Format: ExportFormat, ThreadID: threadID}); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	for _, t := range threads {
		if err := enc.Encode(t); err != nil {
			return st, fmt.Errorf("export: %w", err)
		}
		st.Threads++
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
		return st, dbError("export: read checkpoints", err)
	}
	defer rows.Close()
	for rows.Next() {
		c := ExportCheckpoint{Kind: "checkpoint", ThreadID: threadID}
		var parent, merge uuid.NullUUID
		var writes []byte
		if err := rows.Scan(&c.Namespace, &c.Seq, &c.ID, &parent, &merge, &c.Step, &c.CreatedAt, &c.Trigger,
			&c.Tags, &c.Summary, &c.Metadata, &c.Messages, &c.State, &c.ToolResults, &c.NextNode,
			&c.SizeBytes, &writes); err != nil {
			return st, dbError("export: read checkpoints", err)
		}
		c.ParentID, c.MergeParentID = nullID(parent), nullID(merge)
		c.CreatedAt = c.CreatedAt.UTC()
		c.Metadata = unescapeNUL(c.Metadata)
		if err := json.Unmarshal(unescapeNUL(writes), &c.PendingWrites); err != nil {
			return st, fmt.Errorf("export: pending writes of checkpoint %s: %w", c.ID, err)
		}
		for i := range c.PendingWrites {
			c.PendingWrites[i].CreatedAt = c.PendingWrites[i].CreatedAt.UTC()
		}
		st.PendingWrites += int64(len(c.PendingWrites))
		c.Messages, c.State, c.ToolResults = unescapeNUL(c.Messages), unescapeNUL(c.State), unescapeNUL(c.ToolResults)
		if err := enc.Encode(c); err != nil {
			return st, fmt.Errorf("export: %w", err)
		}
		st.Checkpoints++
	}
	if err := rows.Err(); err != nil {
		return st, dbError("export: read checkpoints", err)
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	return st, nil
}

func exportThreads(ctx context.Context, tx pgx.Tx, threadID string) ([]ExportThread, error) {
	rows, err := tx.Query(ctx, `
		SELECT namespace, rewound_to, metadata, created_at, branch_name, branched_from, branched_from_thread
		FROM pgcheckpoint.threads WHERE thread_id = $1 ORDER BY namespace`, threadID)
	if err != nil {
		return nil, dbError("export: read the thread", err)
	}
	defer rows.Close()
	var out []ExportThread
	for rows.Next() {
		t := ExportThread{Kind: "thread", ThreadID: threadID}
		var rewound, from uuid.NullUUID
		if err := rows.Scan(&t.Namespace, &rewound, &t.Metadata, &t.CreatedAt, &t.BranchName, &from, &t.BranchedFromThread); err != nil {
			return nil, dbError("export: read the thread", err)
		}
		t.RewoundTo, t.BranchedFrom = nullID(rewound), nullID(from)
		t.Metadata = unescapeNUL(t.Metadata)
		t.CreatedAt = t.CreatedAt.UTC()
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("export: read the thread", err)
	}
	return out, nil
}

func nullID(n uuid.NullUUID) *uuid.UUID {
	if !n.Valid {
		return nil
	}
	return &n.UUID
}

// exportLine is any line of an export, for decoding.
type exportLine struct {
	ExportCheckpoint
	Format             int        `json:"format"`
	RewoundTo          *uuid.UUID `json:"rewound_to"`
	BranchName         *string    `json:"branch_name"`
	BranchedFrom       *uuid.UUID `json:"branched_from"`
	BranchedFromThread *string    `json:"branched_from_thread"`
}

// ImportOptions tunes Import.
type ImportOptions struct {
	// Progress, when set, is called after each batch of checkpoints is
	// sent, with the running totals.
	Progress func(ExportStats)
}

const importBatch = 200

// Import reads the JSON lines of one or more exports from r and writes
// them, in one transaction: all of it is imported, or nothing. Threads must
// not exist yet, and checkpoint ids must not be in use (ids are global).
// Errors: ErrInvalidInput (ErrInvalidJSON) for a line that is not a valid
// export record, naming the line; ErrInvalidInput for a thread that exists
// already; ErrIDConflict for a checkpoint id in use. On error nothing is
// written.
func (e *Engine) Import(ctx context.Context, r io.Reader, opts ImportOptions) (ExportStats, error) {
	var st ExportStats
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return st, dbError("import: begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	threads := map[string]bool{} // thread ids with a thread line
	seenHeader := false
	batch := &pgx.Batch{}
	var batchIDs []uuid.UUID
	flush := func() error {
		if batch.Len() == 0 {
			return nil
		}
		res := tx.SendBatch(ctx, batch)
		for _, id := range batchIDs {
			tag, err := res.Exec()
			if err != nil {
				res.Close()
				return importDBError(err)
			}
			if id != uuid.Nil && tag.RowsAffected() != 1 {
				res.Close()
				return fmt.Errorf("import: checkpoint %s: %w", id, ErrIDConflict)
			}
		}
		if err := res.Close(); err != nil {
			return importDBError(err)
		}
		batch, batchIDs = &pgx.Batch{}, batchIDs[:0]
		if opts.Progress != nil {
			opts.Progress(st)
		}
		return nil
	}

	for line := 1; ; line++ {
		var l exportLine
		if err := dec.Decode(&l); err == io.EOF {
			break
		} else if err != nil {
			return ExportStats{}, fmt.Errorf("import: record %d: %w: %v", line, ErrInvalidJSON, err)
		}
		switch l.Kind {
		case "pgcheckpoint-export":
			if l.Format != ExportFormat {
				return ExportStats{}, fmt.Errorf("import: record %d: %w: export format %d; this version reads format %d", line, ErrInvalidInput, l.Format, ExportFormat)
			}
			seenHeader = true
		case "thread":
			if !seenHeader {
				return ExportStats{}, fmt.Errorf("import: record %d: %w: no export header before it; is this a pgcheckpoint export?", line, ErrInvalidInput)
			}
			if err := importThread(ctx, tx, threads, l); err != nil {
				return ExportStats{}, fmt.Errorf("import: record %d: %w", line, err)
			}
			st.Threads++
		case "checkpoint":
			c := l.ExportCheckpoint
			if !threads[c.ThreadID] {
				return ExportStats{}, fmt.Errorf("import: record %d: %w: checkpoint of thread %q comes before that thread's record", line, ErrInvalidInput, c.ThreadID)
			}
			if err := queueCheckpoint(batch, &batchIDs, c); err != nil {
				return ExportStats{}, fmt.Errorf("import: record %d: checkpoint %s: %w", line, c.ID, err)
			}
			st.Checkpoints++
			st.PendingWrites += int64(len(c.PendingWrites))
			if len(batchIDs) >= importBatch {
				if err := flush(); err != nil {
					return ExportStats{}, err
				}
			}
		default:
			return ExportStats{}, fmt.Errorf("import: record %d: %w: unknown kind %q", line, ErrInvalidInput, l.Kind)
		}
	}
	if err := flush(); err != nil {
		return ExportStats{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return ExportStats{}, dbError("import: commit", err)
	}
	return st, nil
}

func importThread(ctx context.Context, tx pgx.Tx, threads map[string]bool, l exportLine) error {
	if err := checkID("thread id", l.ThreadID, false); err != nil {
		return err
	}
	if err := checkID("namespace", l.Namespace, true); err != nil {
		return err
	}
	meta, err := jsonArg("thread metadata", l.Metadata, '{')
	if err != nil {
		return err
	}
	if l.BranchName != nil {
		if err := checkID("branch name", *l.BranchName, false); err != nil {
			return err
		}
	}
	if l.BranchedFromThread != nil {
		if err := checkID("branched-from thread", *l.BranchedFromThread, false); err != nil {
			return err
		}
	}
	if l.CreatedAt.IsZero() {
		return fmt.Errorf("%w: thread %q has no created_at", ErrInvalidInput, l.ThreadID)
	}
	if !threads[l.ThreadID] {
		if _, err := tx.Exec(ctx, `SELECT pgcheckpoint.lock_thread($1)`, l.ThreadID); err != nil {
			return dbError("lock the thread", err)
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pgcheckpoint.threads WHERE thread_id = $1)
			OR EXISTS (SELECT 1 FROM pgcheckpoint.checkpoints WHERE thread_id = $1)`, l.ThreadID).Scan(&exists); err != nil {
			return dbError("look for the thread", err)
		}
		if exists {
			return fmt.Errorf("%w: thread %q already exists; delete it first, or import into another database", ErrInvalidInput, l.ThreadID)
		}
		threads[l.ThreadID] = true
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO pgcheckpoint.threads (thread_id, namespace, rewound_to, metadata, created_at,
		                                  branch_name, branched_from, branched_from_thread)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		l.ThreadID, l.Namespace, optID(l.RewoundTo), meta, l.CreatedAt, l.BranchName, optID(l.BranchedFrom), l.BranchedFromThread)
	if err != nil {
		return importDBError(err)
	}
	return nil
}

// queueCheckpoint validates c and adds its inserts to batch. ids gets one
// entry per statement: the checkpoint id for the checkpoint's insert (which
// must insert one row), uuid.Nil for the pending writes'.
func queueCheckpoint(batch *pgx.Batch, ids *[]uuid.UUID, c ExportCheckpoint) error {
	if c.ID.Version() != 7 {
		return fmt.Errorf("%w: id %s is not a UUIDv7", ErrInvalidInput, c.ID)
	}
	if c.Seq < 1 || c.Step < 1 {
		return fmt.Errorf("%w: seq %d, step %d; both start at 1", ErrInvalidInput, c.Seq, c.Step)
	}
	if err := checkID("namespace", c.Namespace, true); err != nil {
		return err
	}
	if !c.Trigger.Valid() {
		return fmt.Errorf("%w: unknown trigger %q", ErrInvalidInput, c.Trigger)
	}
	if c.CreatedAt.IsZero() {
		return fmt.Errorf("%w: no created_at", ErrInvalidInput)
	}
	tags, err := checkTexts("tag", c.Tags)
	if err != nil {
		return err
	}
	for name, s := range map[string]string{"summary": c.Summary, "next node": c.NextNode} {
		if err := checkText(name, s); err != nil {
			return err
		}
	}
	meta, err := jsonArg("metadata", c.Metadata, '{')
	if err != nil {
		return err
	}
	messages, err := jsonArg("messages", c.Messages, '[')
	if err != nil {
		return err
	}
	state, err := jsonArg("state", c.State, '{')
	if err != nil {
		return err
	}
	tools, err := jsonArg("tool results", c.ToolResults, '{')
	if err != nil {
		return err
	}
	batch.Queue(`
		INSERT INTO pgcheckpoint.checkpoints (thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id,
		    merge_parent_id, step, created_at, trigger, tags, summary, metadata, format, messages, state,
		    tool_results, next_node, size_bytes)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'full', $13, $14, $15, $16, $17
		WHERE NOT EXISTS (SELECT 1 FROM pgcheckpoint.checkpoints e WHERE e.checkpoint_id = $4)`,
		c.ThreadID, c.Namespace, c.Seq, c.ID, optID(c.ParentID), optID(c.MergeParentID), c.Step, c.CreatedAt,
		string(c.Trigger), tags, c.Summary, meta, messages, state, tools, c.NextNode, c.SizeBytes)
	*ids = append(*ids, c.ID)
	if len(c.PendingWrites) == 0 {
		return nil
	}
	n := len(c.PendingWrites)
	tasks, channels, created := make([]string, n), make([]string, n), make([]time.Time, n)
	idxs, values := make([]int32, n), make([]string, n)
	for i, w := range c.PendingWrites {
		if err := checkID("task id", w.TaskID, false); err != nil {
			return err
		}
		if err := checkID("channel", w.Channel, false); err != nil {
			return err
		}
		if w.Index < 0 {
			return fmt.Errorf("%w: pending write index %d", ErrInvalidInput, w.Index)
		}
		v, err := jsonArg("pending write value", w.Value, 0)
		if err != nil {
			return err
		}
		tasks[i], channels[i], created[i], idxs[i], values[i] = w.TaskID, w.Channel, w.CreatedAt, int32(w.Index), string(v)
	}
	batch.Queue(`
		INSERT INTO pgcheckpoint.pending_writes (thread_id, namespace, checkpoint_seq, checkpoint_id,
		    task_id, idx, channel, value, created_at)
		SELECT $1, $2, $3, $4, w.task_id, w.idx, w.channel, w.value::jsonb, w.created_at
		FROM unnest($5::text[], $6::int[], $7::text[], $8::text[], $9::timestamptz[])
		     AS w(task_id, idx, channel, value, created_at)`,
		c.ThreadID, c.Namespace, c.Seq, c.ID, tasks, idxs, channels, values, created)
	*ids = append(*ids, uuid.Nil)
	return nil
}

func optID(id *uuid.UUID) uuid.NullUUID {
	if id == nil {
		return uuid.NullUUID{}
	}
	return uuid.NullUUID{UUID: *id, Valid: true}
}

// importDBError maps a failed insert: a duplicate key means the export
// holds the same row twice.
func importDBError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("import: %w: a row appears twice (%s)", ErrInvalidInput, pgErr.Detail)
	}
	return dbError("import", err)
}
