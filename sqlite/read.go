package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// Get returns a checkpoint whole, with its pending writes, read in one
// snapshot. A checkpoint stored whole without pending writes is one
// statement, consistent on its own; the others are read in a transaction.
// Errors: engine.ErrNotFound.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (*engine.Checkpoint, error) {
	rq, err := s.readQueries()
	if err != nil {
		return nil, err
	}
	row, err := rq.CheckpointRead(ctx, id)
	if err != nil {
		return nil, storeError(dbError(fmt.Sprintf("checkpoint %s", id), err))
	}
	if row.Format == "full" && !row.HasPendingWrites {
		return wholeCheckpoint(ctx, nil, row)
	}
	var cp *engine.Checkpoint
	err = s.read(ctx, func(q *queries) error {
		row, err := q.CheckpointRead(ctx, id)
		if err != nil {
			return dbError(fmt.Sprintf("checkpoint %s", id), err)
		}
		cp, err = wholeCheckpoint(ctx, q, row)
		return err
	})
	return cp, err
}

// HeadID returns the id of the head of a thread and namespace
// (CheckpointLinkHead has the rule), reading none of its content. Errors:
// engine.ErrNotFound when the thread has no checkpoint there.
func (s *Store) HeadID(ctx context.Context, threadID, namespace string) (uuid.UUID, error) {
	// One statement, consistent on its own: no transaction around it.
	rq, err := s.readQueries()
	if err != nil {
		return uuid.Nil, err
	}
	head, err := rq.CheckpointLinkHead(ctx, sqlitedb.CheckpointLinkHeadParams{ThreadID: threadID, Namespace: namespace})
	if err != nil {
		return uuid.Nil, storeError(dbError(fmt.Sprintf("head of thread %q namespace %q", threadID, namespace), err))
	}
	return head.CheckpointID, nil
}

// Head returns the head of a thread and namespace, whole. Errors:
// engine.ErrNotFound when the thread has no checkpoint there.
func (s *Store) Head(ctx context.Context, threadID, namespace string) (*engine.Checkpoint, error) {
	var cp *engine.Checkpoint
	err := s.read(ctx, func(q *queries) error {
		head, err := q.CheckpointLinkHead(ctx, sqlitedb.CheckpointLinkHeadParams{ThreadID: threadID, Namespace: namespace})
		if err != nil {
			return dbError(fmt.Sprintf("head of thread %q namespace %q", threadID, namespace), err)
		}
		row, err := q.CheckpointRead(ctx, head.CheckpointID)
		if err != nil {
			return dbError(fmt.Sprintf("head of thread %q namespace %q", threadID, namespace), err)
		}
		cp, err = wholeCheckpoint(ctx, q, row)
		return err
	})
	return cp, err
}

// headRow returns the whole row of the head of a thread and namespace
// (CheckpointLinkHead has the rule), or sql.ErrNoRows when the thread has
// no checkpoint there.
func headRow(ctx context.Context, q *queries, threadID, namespace string) (sqlitedb.Checkpoint, error) {
	head, err := q.CheckpointLinkHead(ctx, sqlitedb.CheckpointLinkHeadParams{ThreadID: threadID, Namespace: namespace})
	if err != nil {
		return sqlitedb.Checkpoint{}, err
	}
	return q.CheckpointGetByID(ctx, head.CheckpointID)
}

// wholeCheckpoint is the one converter of a checkpoint row: content
// rebuilt, pending writes read when it has any. q reads what the row
// needs more (its delta chain, its pending writes) in the row's snapshot;
// it may be nil for a full row without pending writes, which needs
// nothing more.
func wholeCheckpoint(ctx context.Context, q *queries, r sqlitedb.CheckpointReadRow) (*engine.Checkpoint, error) {
	c, err := materialize(ctx, q, storedRow{id: r.CheckpointID, threadID: r.ThreadID, namespace: r.Namespace,
		format: r.Format, messages: r.Messages, state: r.State, tools: r.ToolResults})
	if err != nil {
		return nil, err
	}
	info, err := checkpointInfo(r.ThreadID, r.Namespace, r.Seq, r.CheckpointID, r.ParentCheckpointID, r.MergeParentID,
		r.Step, r.CreatedAt, r.Trigger, r.Tags, r.Summary, r.Metadata, r.NextNode, r.SizeBytes, r.Format)
	if err != nil {
		return nil, err
	}
	var ws []sqlitedb.PendingWriteListByCheckpointRow
	if r.HasPendingWrites {
		ws, err = q.PendingWriteListByCheckpoint(ctx, sqlitedb.PendingWriteListByCheckpointParams{
			ThreadID: r.ThreadID, Namespace: r.Namespace, CheckpointSeq: r.Seq,
		})
		if err != nil {
			return nil, dbError("read pending writes", err)
		}
	}
	cp := &engine.Checkpoint{CheckpointInfo: info, Messages: c.Messages, State: c.State, ToolResults: c.ToolResults,
		PendingWrites: make([]engine.PendingWrite, len(ws))}
	for i, w := range ws {
		cp.PendingWrites[i] = engine.PendingWrite{TaskID: w.TaskID, Index: int(w.Idx), Channel: w.Channel, Value: json.RawMessage(w.Value)}
	}
	return cp, nil
}

// checkpointInfo is the one converter of a checkpoint's columns without
// content.
func checkpointInfo(threadID, namespace string, seq int64, id uuid.UUID, parent, merge uuid.NullUUID, step, createdAt int64,
	trigger, tags, summary, metadata, nextNode string, size int64, format string) (engine.CheckpointInfo, error) {
	var ts []string
	if err := unmarshalTags(tags, &ts); err != nil {
		return engine.CheckpointInfo{}, fmt.Errorf("tags of checkpoint %s: %w", id, err)
	}
	return engine.CheckpointInfo{
		ID: id, ThreadID: threadID, Namespace: namespace, Seq: seq, ParentID: parent.UUID, MergeParentID: merge.UUID,
		Step: step, CreatedAt: fromMicros(createdAt), Trigger: engine.Trigger(trigger), Tags: nonNil(ts),
		Summary: summary, Metadata: json.RawMessage(metadata), NextNode: nextNode, SizeBytes: size, Format: format,
	}, nil
}

// unmarshalTags decodes a tags column; "[]", most rows' tags, without
// encoding/json.
func unmarshalTags(tags string, ts *[]string) error {
	if tags == "[]" {
		return nil
	}
	return json.Unmarshal([]byte(tags), ts)
}

// listChunk is how many rows a filtered listing reads at a time.
const listChunk = 256

// ListCheckpoints lists checkpoints newest first without content. The
// metadata (containment, see jsonContains) and tag filters are applied in
// Go, on rows read newest first a chunk at a time, until the page is full.
// Errors: engine.ErrNotFound for a cursor that is not a checkpoint of the
// thread and namespace.
func (s *Store) ListCheckpoints(ctx context.Context, lq engine.ListQuery) ([]engine.CheckpointInfo, error) {
	var pat any
	if len(lq.Metadata) > 0 {
		if err := engine.CheckJSON(engine.JSONField{Name: "metadata filter", Text: lq.Metadata}); err != nil {
			return nil, err
		}
		var err error
		if pat, err = jsontext.Decode(lq.Metadata); err != nil {
			return nil, fmt.Errorf("%w: metadata filter: %v", engine.ErrInvalidJSON, err)
		}
	}
	limit := lq.Limit
	if limit <= 0 {
		limit = 100
	}
	filtered := pat != nil || len(lq.Tags) > 0
	out := []engine.CheckpointInfo{}
	err := s.read(ctx, func(q *queries) error {
		before := int64(math.MaxInt64)
		if lq.Before != uuid.Nil {
			l, err := linkIn(ctx, q, lq.Before, lq.ThreadID, lq.Namespace)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("cursor %s is not a checkpoint of thread %q namespace %q: %w", lq.Before, lq.ThreadID, lq.Namespace, engine.ErrNotFound)
			} else if err != nil {
				return dbError("read the cursor", err)
			}
			before = l.Seq
		}
		chunk := int64(limit)
		if filtered {
			chunk = max(chunk, listChunk)
		}
		for {
			rows, err := q.CheckpointListByThread(ctx, sqlitedb.CheckpointListByThreadParams{
				ThreadID: lq.ThreadID, Namespace: lq.Namespace, BeforeSeq: before, MaxRows: chunk,
			})
			if err != nil {
				return dbError("list checkpoints", err)
			}
			for _, r := range rows {
				before = r.Seq
				info, err := checkpointInfo(r.ThreadID, r.Namespace, r.Seq, r.CheckpointID, r.ParentCheckpointID, r.MergeParentID,
					r.Step, r.CreatedAt, r.Trigger, r.Tags, r.Summary, r.Metadata, r.NextNode, r.SizeBytes, r.Format)
				if err != nil {
					return err
				}
				if ok, err := matches(info, pat, lq.Tags); err != nil {
					return err
				} else if !ok {
					continue
				}
				out = append(out, info)
				if len(out) == limit {
					return nil
				}
			}
			if int64(len(rows)) < chunk {
				return nil
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// matches applies ListCheckpoints' filters: metadata contains pat (nil: no
// filter) and the tags include every one of tags.
func matches(info engine.CheckpointInfo, pat any, tags []string) (bool, error) {
	for _, t := range tags {
		if !slices.Contains(info.Tags, t) {
			return false, nil
		}
	}
	if pat == nil {
		return true, nil
	}
	doc, err := jsontext.Decode(info.Metadata)
	if err != nil {
		return false, fmt.Errorf("metadata of checkpoint %s: %w", info.ID, err)
	}
	return jsontext.Contains(doc, pat), nil
}

// ListThreads lists threads in id order with the head of their root
// namespace (or first namespace).
func (s *Store) ListThreads(ctx context.Context, after string, limit int) ([]engine.ThreadInfo, error) {
	if limit <= 0 {
		limit = 100
	}
	rq, err := s.readQueries()
	if err != nil {
		return nil, err
	}
	rows, err := rq.ThreadListHeads(ctx, sqlitedb.ThreadListHeadsParams{After: after, MaxRows: int64(limit)})
	if err != nil {
		return nil, dbError("list threads", err)
	}
	out := make([]engine.ThreadInfo, len(rows))
	for i, r := range rows {
		out[i] = engine.ThreadInfo{
			ThreadID: r.ThreadID, Namespace: r.Namespace, HeadID: r.HeadCheckpointID, HeadStep: r.HeadStep.Int64,
			HeadSummary: r.HeadSummary.String, HeadCreatedAt: fromMicros(r.CreatedAt),
			Metadata: json.RawMessage(r.Metadata), CreatedAt: fromMicros(r.CreatedAt),
		}
		if r.HeadCreatedAt.Valid {
			out[i].HeadCreatedAt = fromMicros(r.HeadCreatedAt.Int64)
		}
	}
	return out, nil
}

// PutWrites records a task's writes after a checkpoint, in one write
// transaction; positions already recorded keep their values. Errors:
// engine.ErrNotFound for an unknown checkpoint; engine.ErrEncrypted for
// values that are not sealed after a checkpoint of an encrypted thread
// (see refusePlaintext); engine.ErrInvalidJSON for a
// value that breaks engine.CheckJSON's rule, with nothing written.
func (s *Store) PutWrites(ctx context.Context, req engine.WritesRequest) (int64, error) {
	id, taskID, writes := req.ID, req.TaskID, req.Writes
	for i, w := range writes {
		if err := engine.CheckJSON(engine.JSONField{Name: fmt.Sprintf("write %d of task %q", i, taskID), Text: w.Value}); err != nil {
			return 0, err
		}
	}
	var n int64
	err := s.write(ctx, func(q *queries, _ execer) error {
		n = 0 // a write may run again (see writeConn.run)
		l, err := q.CheckpointLinkByID(ctx, id)
		if err != nil {
			return dbError(fmt.Sprintf("checkpoint %s", id), err)
		}
		if err := refusePlaintext(ctx, q, l.ThreadID, req.Sealed, sql.NullBool{}); err != nil {
			return err
		}
		now := s.now().UnixMicro()
		for i, w := range writes {
			k, err := q.PendingWriteInsert(ctx, sqlitedb.PendingWriteInsertParams{
				ThreadID: l.ThreadID, Namespace: l.Namespace, CheckpointSeq: l.Seq, CheckpointID: id,
				TaskID: taskID, Idx: int64(i), Channel: w.Channel, Value: string(w.Value), CreatedAt: now,
			})
			if err != nil {
				return dbError("record a pending write", err)
			}
			n += k
		}
		return nil
	})
	return n, err
}
