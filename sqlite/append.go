package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// PutAppend writes the head's content with a change applied, in one write
// transaction (see engine.Store). On a head with digests whose run may
// grow, it stores a delta on the head made of the change alone, with
// digests continued from the head's: no content of the head is read. Else
// it rebuilds the head's content, applies the change and writes the whole
// as Put does (which may still make it a delta on the run's anchor).
func (s *Store) PutAppend(ctx context.Context, a engine.AppendRequest) (engine.SnapshotResult, error) {
	if a.DeltaRun < 1 || len(a.MessageDigests)%jsontext.DigestSize != 0 || a.SetStateDigests == nil || a.SetToolResultsDigests == nil {
		return engine.SnapshotResult{}, fmt.Errorf("%w: an append needs a delta run and the digests of its change", engine.ErrInvalidInput)
	}
	if err := checkJSON(namedJSON{"messages", a.Messages}, namedJSON{"state", a.SetState},
		namedJSON{"tool results", a.SetToolResults}, namedJSON{"metadata", a.Metadata}); err != nil {
		return engine.SnapshotResult{}, err
	}
	var res engine.SnapshotResult
	err := s.write(ctx, func(q *sqlitedb.Queries, _ *sql.Tx) error {
		var err error
		res, err = s.putAppend(ctx, q, a)
		return err
	})
	return res, err
}

func (s *Store) putAppend(ctx context.Context, q *sqlitedb.Queries, a engine.AppendRequest) (engine.SnapshotResult, error) {
	if ex, err := q.CheckpointGetByID(ctx, a.ID); err == nil {
		return appendRetried(ctx, q, ex, a)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return engine.SnapshotResult{}, dbError("look up the checkpoint id", err)
	}
	l, err := q.CheckpointLinkHead(ctx, sqlitedb.CheckpointLinkHeadParams{ThreadID: a.ThreadID, Namespace: a.Namespace})
	if errors.Is(err, sql.ErrNoRows) {
		return engine.SnapshotResult{}, fmt.Errorf("thread %q namespace %q has no checkpoint to append to (write the first with Snapshot): %w",
			a.ThreadID, a.Namespace, engine.ErrNotFound)
	} else if err != nil {
		return engine.SnapshotResult{}, dbError("read the head", err)
	}
	head := (*link)(&l)
	if a.OnHead != uuid.Nil && a.OnHead != head.CheckpointID {
		return engine.SnapshotResult{}, fmt.Errorf("the head of thread %q namespace %q is %s, not %s: %w",
			a.ThreadID, a.Namespace, head.CheckpointID, a.OnHead, engine.ErrHeadMoved)
	}
	if a.DeltaRun <= 1 || head.DeltaRun+1 >= int64(a.DeltaRun) || !head.MessagesCount.Valid ||
		len(head.MessagesDigest) != jsontext.ChainSize || !head.StateDigests.Valid || !head.ToolResultsDigests.Valid {
		return s.appendWhole(ctx, q, head, a)
	}
	th, err := q.ThreadGet(ctx, sqlitedb.ThreadGetParams{ThreadID: a.ThreadID, Namespace: a.Namespace})
	if err != nil {
		return engine.SnapshotResult{}, dbError("read the thread", err)
	}
	lastSeq, err := q.CheckpointMaxSeq(ctx, sqlitedb.CheckpointMaxSeqParams{ThreadID: a.ThreadID, Namespace: a.Namespace})
	if err != nil {
		return engine.SnapshotResult{}, dbError("read the last seq", err)
	}
	st := stored{format: "delta", base: uuid.NullUUID{UUID: head.CheckpointID, Valid: true},
		run: head.DeltaRun + 1, depth: head.DeltaDepth + 1,
		messages: a.Messages, state: a.SetState, tools: a.SetToolResults}
	stateDigests, stateRemoved, err := appendKeyDigests([]byte(head.StateDigests.String), a.SetStateDigests, a.RemoveState)
	if err != nil {
		return engine.SnapshotResult{}, fmt.Errorf("state: %w", err)
	}
	toolsDigests, toolsRemoved, err := appendKeyDigests([]byte(head.ToolResultsDigests.String), a.SetToolResultsDigests, a.RemoveToolResults)
	if err != nil {
		return engine.SnapshotResult{}, fmt.Errorf("tool results: %w", err)
	}
	if st.stateRemoved, err = json.Marshal(stateRemoved); err != nil {
		return engine.SnapshotResult{}, err
	}
	if st.toolsRemoved, err = json.Marshal(toolsRemoved); err != nil {
		return engine.SnapshotResult{}, err
	}
	listDigest := head.MessagesDigest
	if chain := jsontext.MessageChain(head.MessagesDigest, a.MessageDigests); len(chain) > 0 {
		listDigest = jsontext.ListDigest(chain)
	}
	summary := a.Summary
	if summary == "" {
		// The default summary needs the last message and the number of
		// state keys, which the new key digests have.
		msgs := a.Messages
		if len(a.MessageDigests) == 0 {
			if msgs, err = headMessages(ctx, q, head.CheckpointID); err != nil {
				return engine.SnapshotResult{}, err
			}
		}
		if summary, err = defaultSummary(msgs, stateDigests); err != nil {
			return engine.SnapshotResult{}, err
		}
	}
	tags, err := json.Marshal(nonNil(a.Tags))
	if err != nil {
		return engine.SnapshotResult{}, fmt.Errorf("tags: %w", err)
	}
	now := s.now().UnixMicro()
	row := sqlitedb.CheckpointInsertParams{
		ThreadID: a.ThreadID, Namespace: a.Namespace, Seq: lastSeq + 1, CheckpointID: a.ID,
		ParentCheckpointID: nullID(head.CheckpointID), Step: head.Step + 1, CreatedAt: now,
		Trigger: string(a.Trigger), Tags: string(tags), Summary: summary, NextNode: a.NextNode,
		SizeBytes: a.SizeBytes, Metadata: string(a.Metadata),
		MessagesCount:      sql.NullInt64{Int64: head.MessagesCount.Int64 + int64(len(a.MessageDigests)/jsontext.DigestSize), Valid: true},
		MessagesDigest:     listDigest,
		StateDigests:       sql.NullString{String: string(stateDigests), Valid: true},
		ToolResultsDigests: sql.NullString{String: string(toolsDigests), Valid: true},
	}
	setStored(&row, st)
	if err := q.CheckpointInsert(ctx, row); err != nil {
		return engine.SnapshotResult{}, dbError("insert the checkpoint", err)
	}
	if th.RewoundTo.Valid {
		if err := q.ThreadSetRewoundTo(ctx, sqlitedb.ThreadSetRewoundToParams{ThreadID: a.ThreadID, Namespace: a.Namespace}); err != nil {
			return engine.SnapshotResult{}, dbError("update the thread", err)
		}
	}
	return engine.SnapshotResult{
		ID: a.ID, ThreadID: a.ThreadID, Namespace: a.Namespace, ParentID: head.CheckpointID,
		Step: row.Step, CreatedAt: fromMicros(now), Created: true,
	}, nil
}

// appendWhole writes an append whole: the head's content rebuilt, the
// change applied, written as Put writes it, on the head.
func (s *Store) appendWhole(ctx context.Context, q *sqlitedb.Queries, head *link, a engine.AppendRequest) (engine.SnapshotResult, error) {
	row, err := q.CheckpointGetByID(ctx, head.CheckpointID)
	if err != nil {
		return engine.SnapshotResult{}, dbError("read the head", err)
	}
	c, err := materialize(ctx, q, row)
	if err != nil {
		return engine.SnapshotResult{}, err
	}
	if c, err = applyChange(c, a); err != nil {
		return engine.SnapshotResult{}, err
	}
	p := engine.PutRequest{
		ThreadID: a.ThreadID, Namespace: a.Namespace, ID: a.ID, ParentID: head.CheckpointID, Trigger: a.Trigger,
		Tags: a.Tags, Summary: a.Summary, Metadata: a.Metadata, Messages: c.messages, State: c.state,
		ToolResults: c.tools, NextNode: a.NextNode, SizeBytes: a.SizeBytes, DeltaRun: a.DeltaRun,
	}
	if p.DeltaRun > 1 {
		if err := engine.ComputeDigests(&p); err != nil {
			return engine.SnapshotResult{}, err
		}
	}
	return s.put(ctx, q, p, uuid.Nil)
}

// applyChange is an append's change applied to whole content, the way
// materialize applies a delta: messages appended, removed keys dropped,
// set keys replaced in place or added last.
func applyChange(c content, a engine.AppendRequest) (content, error) {
	msgs, err := splitArray(c.messages)
	if err != nil {
		return content{}, err
	}
	more, err := splitArray(a.Messages)
	if err != nil {
		return content{}, err
	}
	out := content{messages: joinArray(append(msgs, more...))}
	for _, part := range []struct {
		obj, set []byte
		removed  []string
		out      *[]byte
	}{{c.state, a.SetState, a.RemoveState, &out.state}, {c.tools, a.SetToolResults, a.RemoveToolResults, &out.tools}} {
		ms, err := objectMembers(part.obj)
		if err != nil {
			return content{}, err
		}
		removed, err := json.Marshal(nonNil(part.removed))
		if err != nil {
			return content{}, err
		}
		if ms, err = applyKeys(ms, part.set, removed); err != nil {
			return content{}, err
		}
		*part.out = joinObject(ms)
	}
	return out, nil
}

// appendKeyDigests returns the key digests of the head's object with the
// set keys' digests put in and the removed keys dropped, and the removed
// keys the head has (the others remove nothing).
func appendKeyDigests(headDigests, setDigests []byte, removed []string) (json.RawMessage, []string, error) {
	var keys map[string]string
	if err := json.Unmarshal(headDigests, &keys); err != nil {
		return nil, nil, err
	}
	had := []string{}
	for _, k := range removed {
		if _, ok := keys[k]; ok {
			had = append(had, k)
			delete(keys, k)
		}
	}
	if err := json.Unmarshal(setDigests, &keys); err != nil {
		return nil, nil, err
	}
	out, err := json.Marshal(keys)
	return out, had, err
}

// headMessages returns the messages of checkpoint id, whole.
func headMessages(ctx context.Context, q *sqlitedb.Queries, id uuid.UUID) ([]byte, error) {
	row, err := q.CheckpointGetByID(ctx, id)
	if err != nil {
		return nil, dbError("read the head", err)
	}
	c, err := materialize(ctx, q, row)
	return c.messages, err
}

// appendRetried answers an append whose id exists: a retry when the
// existing checkpoint is its parent's content with the same change, on the
// same thread and namespace (and on a.OnHead when set), with the same
// metadata and next node; anything else is a conflict.
func appendRetried(ctx context.Context, q *sqlitedb.Queries, ex sqlitedb.Checkpoint, a engine.AppendRequest) (engine.SnapshotResult, error) {
	same := ex.ThreadID == a.ThreadID && ex.Namespace == a.Namespace && ex.NextNode == a.NextNode &&
		ex.ParentCheckpointID.Valid && (a.OnHead == uuid.Nil || a.OnHead == ex.ParentCheckpointID.UUID) &&
		jsontext.Same([]byte(ex.Metadata), a.Metadata)
	if same {
		parent, err := q.CheckpointGetByID(ctx, ex.ParentCheckpointID.UUID)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return engine.SnapshotResult{}, dbError("read the parent", err)
		}
		same = err == nil
		if same {
			want, err := materialize(ctx, q, parent)
			if err != nil {
				return engine.SnapshotResult{}, err
			}
			if want, err = applyChange(want, a); err != nil {
				return engine.SnapshotResult{}, err
			}
			got, err := materialize(ctx, q, ex)
			if err != nil {
				return engine.SnapshotResult{}, err
			}
			same = bytes.Equal(got.messages, want.messages) || jsontext.Same(got.messages, want.messages)
			same = same && jsontext.Same(got.state, want.state) && jsontext.Same(got.tools, want.tools)
		}
	}
	if !same {
		return engine.SnapshotResult{}, fmt.Errorf("checkpoint %s already exists, and not as this append; use a new id for a new checkpoint: %w",
			a.ID, engine.ErrIDConflict)
	}
	return engine.SnapshotResult{
		ID: ex.CheckpointID, ThreadID: ex.ThreadID, Namespace: ex.Namespace, ParentID: ex.ParentCheckpointID.UUID,
		Step: ex.Step, CreatedAt: fromMicros(ex.CreatedAt), Created: false,
	}, nil
}
