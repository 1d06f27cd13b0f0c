package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// Put writes one checkpoint in one write transaction (see engine.Store).
// The parent, step and seq are read and assigned under the database's
// write lock, so concurrent writers, in this process or others, queue and
// each builds on the one before.
func (s *Store) Put(ctx context.Context, p engine.PutRequest) (engine.SnapshotResult, error) {
	if err := checkPut(p); err != nil {
		return engine.SnapshotResult{}, err
	}
	if p.Summary == "" {
		// Made before the write begins, outside the writer's lock, where
		// other writers wait.
		var err error
		if p.Summary, err = defaultSummary(p.Messages, p.State); err != nil {
			return engine.SnapshotResult{}, err
		}
	}
	var res engine.SnapshotResult
	err := s.write(ctx, func(q *queries, _ execer) error {
		var err error
		res, err = s.put(ctx, q, p)
		return err
	})
	return res, err
}

// checkPut checks what the engine leaves to the store: the JSON (see
// engine.CheckJSON; the engine does not parse it, on Postgres the server
// does), and the digests' shape.
func checkPut(p engine.PutRequest) error {
	if p.DeltaRun < 1 {
		return fmt.Errorf("%w: delta run %d; it must be 1 or more", engine.ErrInvalidInput, p.DeltaRun)
	}
	if err := engine.CheckJSON(p.JSONFields()...); err != nil {
		return err
	}
	if p.MessageChain != nil && (len(p.MessageChain)%jsontext.ChainSize != 0 || p.StateDigests == nil || p.ToolResultsDigests == nil) {
		return fmt.Errorf("%w: the message chain must hold %d bytes per message, with state and tool result digests", engine.ErrInvalidInput, jsontext.ChainSize)
	}
	return nil
}

// put is Put inside a write transaction.
func (s *Store) put(ctx context.Context, q *queries, p engine.PutRequest) (engine.SnapshotResult, error) {
	pl, ex, found, err := placeNew(ctx, q, p.ID, p.ThreadID, p.Namespace, p.ParentID)
	if err != nil {
		return engine.SnapshotResult{}, err
	}
	if err := refusePlaintext(ctx, q, p.ThreadID, p.Sealed, pl.sealed); err != nil {
		return engine.SnapshotResult{}, err
	}
	if found {
		return retried(ctx, q, ex, p)
	}
	if p.MergeParentID != uuid.Nil {
		// A merge: on the thread's head (a merge creates no thread), of a
		// checkpoint of another thread in the same namespace.
		if pl.parent == nil {
			return engine.SnapshotResult{}, fmt.Errorf("thread %q has no checkpoint in namespace %q to merge into: %w", p.ThreadID, p.Namespace, engine.ErrNotFound)
		}
		if l, err := q.CheckpointLinkByID(ctx, p.MergeParentID); err != nil || l.ThreadID == p.ThreadID || l.Namespace != p.Namespace {
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return engine.SnapshotResult{}, dbError("read the merge parent", err)
			}
			return engine.SnapshotResult{}, fmt.Errorf("merge parent %s is not a checkpoint of another thread in namespace %q: %w", p.MergeParentID, p.Namespace, engine.ErrNotFound)
		}
	}
	return s.putAt(ctx, q, pl, p)
}

// putAt writes p at pl (see placeNew), stored as planDelta decides.
func (s *Store) putAt(ctx context.Context, q *queries, pl place, p engine.PutRequest) (engine.SnapshotResult, error) {
	c := content{Messages: p.Messages, State: p.State, ToolResults: p.ToolResults}
	d := digests{chain: p.MessageChain, state: p.StateDigests, tools: p.ToolResultsDigests,
		messagesCount: int64(len(p.MessageChain) / jsontext.ChainSize)}
	st, err := planDelta(ctx, q, pl.parent, c, d, p.DeltaRun)
	if err != nil {
		return engine.SnapshotResult{}, err
	}
	summary := p.Summary
	if summary == "" {
		if summary, err = defaultSummary(p.Messages, p.State); err != nil {
			return engine.SnapshotResult{}, err
		}
	}
	row, err := pl.newRow(p.ID, p.Trigger, p.Tags, summary, p.NextNode, p.SizeBytes, p.Metadata, s.now())
	if err != nil {
		return engine.SnapshotResult{}, err
	}
	row.MergeParentID = nullID(p.MergeParentID)
	if p.MessageChain != nil {
		row.MessagesCount = sql.NullInt64{Int64: d.messagesCount, Valid: true}
		row.MessagesDigest = jsontext.ListDigest(p.MessageChain)
		row.StateDigests = sql.NullString{String: string(p.StateDigests), Valid: true}
		row.ToolResultsDigests = sql.NullString{String: string(p.ToolResultsDigests), Valid: true}
	}
	setStored(&row, st)
	return pl.insert(ctx, q, row)
}

// setStored puts a storage decision into a row.
func setStored(row *sqlitedb.CheckpointInsertParams, st stored) {
	row.Format, row.BaseCheckpointID, row.DeltaRun, row.DeltaDepth = st.format, st.base, st.run, st.depth
	row.Messages, row.State, row.ToolResults = string(st.messages), string(st.state), string(st.tools)
	row.StateRemoved, row.ToolResultsRemoved = string(st.stateRemoved), string(st.toolsRemoved)
}

// retried answers a write whose id exists: the same thread, namespace,
// content (JSON-equal, as Postgres compares jsonb), merge parent and the
// parent it names, if it names one, is a retry that changes nothing;
// anything else is a conflict. (Tags, summary and trigger are the first
// write's.)
func retried(ctx context.Context, q *queries, ex sqlitedb.Checkpoint, p engine.PutRequest) (engine.SnapshotResult, error) {
	// A merge's retry names the same merge parent, and a write that names
	// its parent the same parent, as checkpoint_put compares.
	same := sameRetry(ex, p.ThreadID, p.Namespace, p.NextNode, p.Metadata) && ex.MergeParentID == nullID(p.MergeParentID) &&
		(p.ParentID == uuid.Nil || ex.ParentCheckpointID == nullID(p.ParentID))
	if same {
		c, err := materialize(ctx, q, storedOf(ex))
		if err != nil {
			return engine.SnapshotResult{}, err
		}
		same = jsontext.Same(c.Messages, p.Messages) && jsontext.Same(c.State, p.State) && jsontext.Same(c.ToolResults, p.ToolResults)
	}
	if !same {
		return engine.SnapshotResult{}, fmt.Errorf("checkpoint %s already exists with other content; use a new id for a new checkpoint: %w",
			p.ID, engine.ErrIDConflict)
	}
	return snapshotResult(ex, false), nil
}

// defaultSummary is "[role] content", each cut to its first 100
// characters, of the last message when it is an object, else "State: N keys", as
// pgcheckpoint.checkpoint_default_summary makes it. It shows the text as
// written, not as stored (messages are NUL-escaped): U+0001 as itself and
// U+0000, which Postgres text cannot hold, as U+FFFD. A role or content
// that is not a string is shown as JSON text, as written.
func defaultSummary(messages, state []byte) (string, error) {
	msgs, err := jsontext.SplitArray(messages)
	if err != nil {
		return "", err
	}
	if n := len(msgs); n > 0 && msgs[n-1][0] == '{' {
		ms, err := jsontext.SplitObject(jsontext.UnescapeNUL(msgs[n-1]))
		if err != nil {
			return "", err
		}
		role, text := "unknown", ""
		for _, m := range ms {
			switch m.Key {
			case "role":
				role = textOf(m.Val, "unknown")
			case "content":
				text = textOf(m.Val, "")
			}
		}
		role, text = strings.ReplaceAll(role, "\x00", "\uFFFD"), strings.ReplaceAll(text, "\x00", "\uFFFD")
		return fmt.Sprintf("[%s] %s", firstRunes(role, 100), firstRunes(text, 100)), nil
	}
	ms, err := jsontext.SplitObject(state)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("State: %d keys", len(jsontext.LastByKey(ms))), nil
}

// textOf is Postgres ->> of a JSON value: a string's text, null as def,
// anything else as written.
func textOf(v []byte, def string) string {
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
	case 'n':
		return def
	}
	return string(v)
}

func nullID(id uuid.UUID) uuid.NullUUID { return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil} }

// firstRunes is s cut to its first n characters.
func firstRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}
