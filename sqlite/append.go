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
// transaction (see engine.Store). On a head with digests, the digests go
// on from the head's and it is stored as appendStored decides, from the
// change and the head's run alone. On a head without digests it rebuilds
// the head's content, applies the change and writes the whole as Put does
// (which may still make it a delta on the run's anchor).
func (s *Store) PutAppend(ctx context.Context, a engine.AppendRequest) (engine.SnapshotResult, error) {
	if a.DeltaRun < 1 || len(a.MessageDigests)%jsontext.DigestSize != 0 || a.SetStateDigests == nil || a.SetToolResultsDigests == nil {
		return engine.SnapshotResult{}, fmt.Errorf("%w: an append needs a delta run and the digests of its change", engine.ErrInvalidInput)
	}
	if err := engine.CheckJSON(a.JSONFields()...); err != nil {
		return engine.SnapshotResult{}, err
	}
	var res engine.SnapshotResult
	err := s.write(ctx, func(q *queries, _ execer) error {
		var err error
		res, err = s.putAppend(ctx, q, a)
		return err
	})
	return res, err
}

// putAppend is PutAppend inside a write transaction.
func (s *Store) putAppend(ctx context.Context, q *queries, a engine.AppendRequest) (engine.SnapshotResult, error) {
	pl, ex, found, err := placeNew(ctx, q, a.ID, a.ThreadID, a.Namespace, uuid.Nil)
	if err != nil {
		return engine.SnapshotResult{}, err
	}
	if err := refusePlaintext(ctx, q, a.ThreadID, a.Sealed, pl.sealed); err != nil {
		return engine.SnapshotResult{}, err
	}
	if found {
		return appendRetried(ctx, q, ex, a)
	}
	head := pl.parent
	if head == nil {
		return engine.SnapshotResult{}, fmt.Errorf("thread %q namespace %q has no checkpoint to append to (write the first with Snapshot): %w",
			a.ThreadID, a.Namespace, engine.ErrNotFound)
	}
	if a.OnHead != uuid.Nil && a.OnHead != head.CheckpointID {
		return engine.SnapshotResult{}, fmt.Errorf("the head of thread %q namespace %q is %s, not %s: %w",
			a.ThreadID, a.Namespace, head.CheckpointID, a.OnHead, engine.ErrHeadMoved)
	}
	if a.SizeBytes, err = appendSize(ctx, q, head, a); err != nil {
		return engine.SnapshotResult{}, err
	}
	if !hasDigests(head) {
		return s.appendWhole(ctx, q, pl, a)
	}
	stateDigests, err := appendKeyDigests([]byte(head.StateDigests.String), a.SetStateDigests, a.RemoveState)
	if err != nil {
		return engine.SnapshotResult{}, fmt.Errorf("state: %w", err)
	}
	toolsDigests, err := appendKeyDigests([]byte(head.ToolResultsDigests.String), a.SetToolResultsDigests, a.RemoveToolResults)
	if err != nil {
		return engine.SnapshotResult{}, fmt.Errorf("tool results: %w", err)
	}
	st, err := appendStored(ctx, q, head, a, stateDigests, toolsDigests)
	if err != nil {
		return engine.SnapshotResult{}, err
	}
	listDigest := head.MessagesDigest
	if chain := jsontext.MessageChain(head.MessagesDigest, a.MessageDigests); len(chain) > 0 {
		listDigest = jsontext.ListDigest(chain)
	}
	summary := a.Summary
	if summary == "" {
		// The default summary needs the last message (the change's, else
		// the head's) and the number of state keys, which the new key
		// digests have.
		msgs := a.Messages
		if len(a.MessageDigests) == 0 {
			if msgs, err = lastMessage(ctx, q, head.CheckpointID); err != nil {
				return engine.SnapshotResult{}, err
			}
		}
		if summary, err = defaultSummary(msgs, stateDigests); err != nil {
			return engine.SnapshotResult{}, err
		}
	}
	row, err := pl.newRow(a.ID, a.Trigger, a.Tags, summary, a.NextNode, a.SizeBytes, a.Metadata, s.now())
	if err != nil {
		return engine.SnapshotResult{}, err
	}
	row.MessagesCount = sql.NullInt64{Int64: head.MessagesCount.Int64 + int64(len(a.MessageDigests)/jsontext.DigestSize), Valid: true}
	row.MessagesDigest = listDigest
	row.StateDigests = sql.NullString{String: string(stateDigests), Valid: true}
	row.ToolResultsDigests = sql.NullString{String: string(toolsDigests), Valid: true}
	setStored(&row, st)
	return pl.insert(ctx, q, row)
}

// appendSize is the size an append records and the size limit on it, as
// pgcheckpoint.checkpoint_append has them: a.ContentBytes when the engine
// measured the content; else the head's size plus the change's, a bound
// (a key the change sets again counts twice), or over a.MaxSizeBytes the
// size of the content the append makes, measured; which must be within
// a.MaxSizeBytes.
func appendSize(ctx context.Context, q *queries, head *link, a engine.AppendRequest) (int64, error) {
	size := head.SizeBytes + a.SizeBytes
	if a.ContentBytes > 0 {
		size = a.ContentBytes
	} else if a.MaxSizeBytes >= 0 && size > a.MaxSizeBytes {
		row, err := q.CheckpointGetByID(ctx, head.CheckpointID)
		if err != nil {
			return 0, dbError("read the head", err)
		}
		c, err := appended(ctx, q, row, a)
		if err != nil {
			return 0, err
		}
		size = c.Size()
	}
	if a.MaxSizeBytes >= 0 && size > a.MaxSizeBytes {
		return 0, fmt.Errorf("%w: the append makes %d bytes of messages, state and tool results on thread %q namespace %q, over the limit of %d",
			engine.ErrSnapshotTooLarge, size, a.ThreadID, a.Namespace, a.MaxSizeBytes)
	}
	return size, nil
}

// appendWhole writes an append on a head without digests: the head's
// content rebuilt, the change applied, written as Put writes it with
// digests computed (planDelta may still make it a delta on the run's
// anchor).
func (s *Store) appendWhole(ctx context.Context, q *queries, pl place, a engine.AppendRequest) (engine.SnapshotResult, error) {
	row, err := q.CheckpointGetByID(ctx, pl.parent.CheckpointID)
	if err != nil {
		return engine.SnapshotResult{}, dbError("read the head", err)
	}
	c, err := appended(ctx, q, row, a)
	if err != nil {
		return engine.SnapshotResult{}, err
	}
	p := engine.PutRequest{
		ThreadID: a.ThreadID, Namespace: a.Namespace, ID: a.ID, ParentID: pl.parent.CheckpointID, Trigger: a.Trigger,
		Tags: a.Tags, Summary: a.Summary, Metadata: a.Metadata, Messages: c.Messages, State: c.State,
		ToolResults: c.ToolResults, NextNode: a.NextNode, SizeBytes: a.SizeBytes, DeltaRun: a.DeltaRun,
	}
	if p.DeltaRun > 1 {
		if err := engine.ComputeDigests(&p); err != nil {
			return engine.SnapshotResult{}, err
		}
	}
	return s.putAt(ctx, q, pl, p)
}

// appended is the content of an append on parent: parent's content,
// rebuilt, with the change applied.
func appended(ctx context.Context, q *queries, parent sqlitedb.Checkpoint, a engine.AppendRequest) (content, error) {
	c, err := materialize(ctx, q, storedOf(parent))
	if err != nil {
		return content{}, err
	}
	return applyChange(c, a)
}

// applyChange is an append's change applied to whole content, the way
// materialize applies a delta (jsontext.Content.Apply).
func applyChange(c content, a engine.AppendRequest) (content, error) {
	return c.Apply(a.Change())
}

// appendKeyDigests returns the key digests of the head's object with the
// set keys' digests put in and the removed keys dropped.
func appendKeyDigests(headDigests, setDigests []byte, removed []string) (json.RawMessage, error) {
	var keys map[string]string
	if err := json.Unmarshal(headDigests, &keys); err != nil {
		return nil, err
	}
	for _, k := range removed {
		delete(keys, k)
	}
	if err := json.Unmarshal(setDigests, &keys); err != nil {
		return nil, err
	}
	return json.Marshal(keys)
}

// appendStored is how an append on head (which has digests) is stored,
// decided from the change and the run head ends, never from content before
// the run's anchor (see the top of delta.go): while head's run may grow, a
// delta on head made of the change; at the end of the run, a delta on its
// anchor made of the run's deltas and the change (what planDelta stores for
// the whole content there, without reading or hashing the whole); whole
// when the run has no anchor with digests (after DeltaRun-1 anchors), the
// head's content rebuilt. stateDigests and toolsDigests are the new
// checkpoint's. Unlike planDelta it stores a delta even when the delta is
// no smaller than the whole: the whole is not at hand to compare.
func appendStored(ctx context.Context, q *queries, head *link, a engine.AppendRequest, stateDigests, toolsDigests []byte) (stored, error) {
	base, continues := head, deltaRunContinues(head, a.DeltaRun)
	var run []sqlitedb.CheckpointRunRangeRow
	if !continues {
		var err error
		if run, base, err = runOf(ctx, q, head, a.DeltaRun); err != nil {
			return stored{}, err
		}
		if base == nil || !hasDigests(base) {
			row, err := q.CheckpointGetByID(ctx, head.CheckpointID)
			if err != nil {
				return stored{}, dbError("read the head", err)
			}
			c, err := appended(ctx, q, row, a)
			return storeWhole(c), err
		}
	}
	// What the run (oldest first) and then the change appended and set
	// since base.
	st := deltaOn(base, continues)
	arrays, state, tools, err := applyDeltas(nil, nil, len(run), func(i int) deltaCols {
		d := run[len(run)-1-i]
		return deltaCols{d.Messages, d.State, d.StateRemoved, d.ToolResults, d.ToolResultsRemoved}
	})
	if err != nil {
		return stored{}, err
	}
	st.messages = a.Messages
	if len(run) > 0 {
		if st.messages, err = jsontext.ConcatArrays(append(arrays, string(a.Messages))...); err != nil {
			return stored{}, err
		}
	}
	for _, part := range []struct {
		name               string
		ms                 []jsontext.Member
		set, digests, base []byte
		remove             []string
		changed, removed   *[]byte
	}{
		{"state", state, a.SetState, stateDigests, []byte(base.StateDigests.String), a.RemoveState, &st.state, &st.stateRemoved},
		{"tool results", tools, a.SetToolResults, toolsDigests, []byte(base.ToolResultsDigests.String), a.RemoveToolResults, &st.tools, &st.toolsRemoved},
	} {
		remove, err := json.Marshal(nonNil(part.remove))
		if err != nil {
			return stored{}, err
		}
		ms, err := jsontext.ApplyKeys(part.ms, part.set, remove)
		if err != nil {
			return stored{}, fmt.Errorf("%s: %w", part.name, err)
		}
		if *part.changed, *part.removed, err = keyDelta(jsontext.JoinObject(ms), part.digests, part.base); err != nil {
			return stored{}, fmt.Errorf("%s: %w", part.name, err)
		}
	}
	return st, nil
}

// lastMessage returns the last message of checkpoint id as a JSON array
// of it ("[]" when it has none), without rebuilding its messages: a
// checkpoint's messages are its delta chain's, oldest first (see
// materialize), so the last one is the last of the newest row of the chain
// that has any (pgcheckpoint.checkpoint_last_message on Postgres).
func lastMessage(ctx context.Context, q *queries, id uuid.UUID) ([]byte, error) {
	row, err := q.CheckpointGetByID(ctx, id)
	if err != nil {
		return nil, dbError("read the head", err)
	}
	rows := []sqlitedb.CheckpointDeltaChainRow{{Format: row.Format, Messages: row.Messages}}
	if row.Format != "full" {
		if rows, err = deltaChain(ctx, q, storedOf(row)); err != nil {
			return nil, err
		}
	}
	for _, r := range rows { // newest first
		msgs, err := jsontext.SplitArray([]byte(r.Messages))
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 {
			return jsontext.JoinArray(msgs[len(msgs)-1:]), nil
		}
	}
	return []byte("[]"), nil
}

// appendRetried answers an append whose id exists: a retry when the
// existing checkpoint is its parent's content with the same change (its
// parent deleted since: when it holds the change, see holdsChange), on the
// same thread and namespace (and on a.OnHead when set), with the same
// metadata and next node; anything else is a conflict.
func appendRetried(ctx context.Context, q *queries, ex sqlitedb.Checkpoint, a engine.AppendRequest) (engine.SnapshotResult, error) {
	same := sameRetry(ex, a.ThreadID, a.Namespace, a.NextNode, a.Metadata) &&
		ex.ParentCheckpointID.Valid && (a.OnHead == uuid.Nil || a.OnHead == ex.ParentCheckpointID.UUID)
	if same {
		parent, err := q.CheckpointGetByID(ctx, ex.ParentCheckpointID.UUID)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return engine.SnapshotResult{}, dbError("read the parent", err)
		}
		gone := errors.Is(err, sql.ErrNoRows)
		got, err := materialize(ctx, q, storedOf(ex))
		if err != nil {
			return engine.SnapshotResult{}, err
		}
		if gone {
			// Deleted since (a prune, retention): the change is what can
			// be checked.
			if same, err = holdsChange(got, a); err != nil {
				return engine.SnapshotResult{}, err
			}
		} else {
			want, err := appended(ctx, q, parent, a)
			if err != nil {
				return engine.SnapshotResult{}, err
			}
			same = bytes.Equal(got.Messages, want.Messages) || jsontext.Same(got.Messages, want.Messages)
			same = same && jsontext.Same(got.State, want.State) && jsontext.Same(got.ToolResults, want.ToolResults)
		}
	}
	if !same {
		return engine.SnapshotResult{}, fmt.Errorf("checkpoint %s already exists, and not as this append; use a new id for a new checkpoint: %w",
			a.ID, engine.ErrIDConflict)
	}
	return snapshotResult(ex, false), nil
}

// holdsChange reports whether content c holds an append's change: its
// messages end with the appended ones, each key the change sets holds the
// value set, and no key it removes is left.
func holdsChange(c content, a engine.AppendRequest) (bool, error) {
	have, err := jsontext.SplitArray(c.Messages)
	if err != nil {
		return false, err
	}
	added, err := jsontext.SplitArray(a.Messages)
	if err != nil {
		return false, err
	}
	if len(added) > len(have) {
		return false, nil
	}
	for i, m := range added {
		if !jsontext.Same(have[len(have)-len(added)+i], m) {
			return false, nil
		}
	}
	for _, part := range []struct {
		obj, set []byte
		removed  []string
	}{{c.State, a.SetState, a.RemoveState}, {c.ToolResults, a.SetToolResults, a.RemoveToolResults}} {
		ms, err := jsontext.ObjectMembers(part.obj)
		if err != nil {
			return false, err
		}
		vals := make(map[string][]byte, len(ms))
		for _, m := range ms {
			if !m.Gone {
				vals[m.Key] = m.Val
			}
		}
		for _, k := range part.removed {
			if _, ok := vals[k]; ok {
				return false, nil
			}
		}
		sets, err := jsontext.ObjectMembers(part.set)
		if err != nil {
			return false, err
		}
		for _, m := range sets {
			if v, ok := vals[m.Key]; !m.Gone && (!ok || !jsontext.Same(v, m.Val)) {
				return false, nil
			}
		}
	}
	return true, nil
}
