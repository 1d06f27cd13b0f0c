package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// AppendInput is a change to the head of a thread: what a Snapshot of the
// whole new content would send, minus what the head holds already. Only
// ThreadID is required; an empty change writes a checkpoint with the
// head's content.
type AppendInput struct {
	// ThreadID, Namespace, ID, Trigger, Tags, Summary, Metadata and
	// NextNode are those of the new checkpoint, as in SnapshotInput (they
	// are not carried over from the head).
	ThreadID  string
	Namespace string
	ID        uuid.UUID
	Trigger   Trigger
	Tags      []string
	Summary   string
	Metadata  json.RawMessage
	NextNode  string
	// OnHead is the guard: zero appends to whatever the head is; a
	// checkpoint id appends only if that checkpoint is still the head
	// (ErrHeadMoved otherwise, with nothing written).
	OnHead uuid.UUID
	// Messages is a JSON array of the messages to append (default []).
	Messages json.RawMessage
	// SetState and SetToolResults are JSON objects of the top-level keys
	// to set (default {}): a key the head has keeps its place and takes
	// the new value; a new key comes after the head's.
	SetState       json.RawMessage
	SetToolResults json.RawMessage
	// RemoveState and RemoveToolResults are top-level keys to drop; a key
	// the head lacks is ignored. A key may not be both set and removed.
	RemoveState       []string
	RemoveToolResults []string
}

// Append writes one checkpoint on the head of in.ThreadID (and
// in.Namespace) from only what changed since the head: it reads back (Get,
// Latest, Diff) exactly as if its whole content had been sent to Snapshot.
// Its cost on the client, on the wire and in the database follows the size
// of the change: it is stored as a delta on the head whenever the head's
// run allows (Config.DeltaRun), at the end of a run as a delta on the run's
// anchor made of the run's changes and this one, and whole only after
// DeltaRun-1 anchors, where a Snapshot would be stored whole too (then the
// store rebuilds the head's content once).
// With Config.FullSnapshots every append is stored whole. The default
// summary needs the last message: an append without messages and without
// Summary makes the store read the head's content. Config.MaxSnapshotBytes
// bounds the checkpoint the append makes, as it bounds a Snapshot of the
// same content: the head's content (its SizeBytes) plus the change plus
// the new checkpoint's metadata, summary, next node and tags; when that
// sum is over, the content the change makes is measured (a key set again
// counts once) and refuses the append only if that is over too: by the
// SQLite store as the text it composes (each value as it was sent, the
// lists and objects around them compact), by the Postgres store as jsonb's
// text without the spaces it puts after colons and commas
// (pgcheckpoint.json_compact_size), and by an encrypting Engine itself, in
// plaintext, as SQLite composes it (a store holds only ciphertext,
// compressed). For compact JSON, what encoding/json writes, the stores
// agree; they differ where a store keeps the text and the other jsonb's
// spelling: whitespace inside a value and an escape such as \u00e9 count
// on SQLite as written, a number as the longer of its text and Postgres's
// spelling on SQLite and as Postgres spells it on Postgres.
// SizeBytes records the head's plus the change's, or what was measured.
// Retries (Config.Retry),
// Triggers and Retention apply as to Snapshot; a retried Append with the
// same ID returns the checkpoint it wrote.
//
// Errors: ErrInvalidInput (and ErrInvalidJSON, ErrSnapshotTooLarge) for bad
// input, including a key both set and removed, and a change that would
// make the head's content too large; ErrNotFound when the thread
// has no checkpoint in the namespace (write the first with Snapshot);
// ErrHeadMoved when in.OnHead is set and is not the head; ErrIDConflict when
// in.ID names another checkpoint; ErrTransient as for Snapshot, and from
// an encrypting Engine when other writers moved the head while the append
// waited for the thread's lock, ten times over or once in a caller's
// transaction (which that aborted: retry the transaction). Nothing is
// written when an error is returned, except for Retention's (see Snapshot).
func (e *Engine) Append(ctx context.Context, in AppendInput) (_ SnapshotResult, err error) {
	ctx, done := e.tel.call(ctx, "Append", attrThread.String(in.ThreadID), attrNamespace.String(in.Namespace))
	defer func() { done(err) }()
	a, err := e.appendParams(in)
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("append: %w", err)
	}
	if skipped, ok := e.skipDisabled(ctx, SnapshotInput{ThreadID: in.ThreadID, Namespace: in.Namespace, Trigger: in.Trigger}); ok {
		return skipped, nil
	}
	if e.retentionErr != nil {
		return SnapshotResult{}, fmt.Errorf("append: Config.Retention: %w", e.retentionErr)
	}
	var res SnapshotResult
	err = e.cfg.Retry.retry(ctx, func() (err error) {
		if e.crypt != nil {
			res, err = e.putAppendSealed(ctx, a)
		} else {
			res, err = e.store.PutAppend(ctx, a)
		}
		return err
	})
	if errors.Is(err, ErrSnapshotTooLarge) {
		err = fmt.Errorf("%w (Config.MaxSnapshotBytes less the new checkpoint's metadata, summary, next node and tags)", err)
	}
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("append: %w", NameRefusedJSON(err, a.JSONFields()...))
	}
	if err := e.retainAfter(ctx, "append", res); err != nil {
		return res, err
	}
	return res, nil
}

// appendParams checks an append with Snapshot's checks (the change as the
// snapshot's content) and computes the change's digests.
func (e *Engine) appendParams(in AppendInput) (AppendRequest, error) {
	p, err := e.snapshotParams(SnapshotInput{
		ThreadID: in.ThreadID, Namespace: in.Namespace, ID: in.ID, Trigger: in.Trigger, Tags: in.Tags,
		Summary: in.Summary, Metadata: in.Metadata, Messages: in.Messages, State: in.SetState,
		ToolResults: in.SetToolResults, NextNode: in.NextNode,
	}, "the change's messages, state and tool results")
	if err != nil {
		return AppendRequest{}, err
	}
	a := AppendRequest{
		ThreadID: p.ThreadID, Namespace: p.Namespace, ID: p.ID, OnHead: in.OnHead, Trigger: p.Trigger,
		Tags: p.Tags, Summary: p.Summary, Metadata: p.Metadata, NextNode: p.NextNode,
		Messages: p.Messages, SetState: p.State, SetToolResults: p.ToolResults,
		SizeBytes: p.SizeBytes, MaxSizeBytes: e.contentBudget(ownBytes(in.Metadata, in.Summary, in.NextNode, in.Tags)),
		DeltaRun:       p.DeltaRun,
		MessageDigests: jsontext.MessageDigests(p.Messages),
	}
	for _, part := range []struct {
		name    string
		set     json.RawMessage
		remove  []string
		digests *json.RawMessage
		removed *[]string
	}{
		{"state", p.State, in.RemoveState, &a.SetStateDigests, &a.RemoveState},
		{"tool results", p.ToolResults, in.RemoveToolResults, &a.SetToolResultsDigests, &a.RemoveToolResults},
	} {
		if *part.digests, err = jsontext.KeyDigests(part.set); err != nil {
			return AppendRequest{}, fmt.Errorf("%w (%v)", notJSON(part.name), err)
		}
		if *part.removed, err = appendRemovals(part.name, part.remove, *part.digests); err != nil {
			return AppendRequest{}, err
		}
	}
	return a, nil
}

// appendRemovals returns keys in stored form, sorted and without repeats,
// after checking that none is among the set keys (setDigests, whose keys
// are the set object's).
func appendRemovals(name string, keys []string, setDigests json.RawMessage) ([]string, error) {
	var set map[string]json.RawMessage
	if err := json.Unmarshal(setDigests, &set); err != nil {
		// The digests of text that does not parse (see ComputeDigests).
		return nil, notJSON(name)
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if !utf8.ValidString(k) { // a NUL is fine: a JSON key may hold one, stored escaped
			return nil, fmt.Errorf("%w: %s key to remove is not valid UTF-8", ErrInvalidInput, name)
		}
		k = storedString(k)
		if _, ok := set[k]; ok {
			return nil, fmt.Errorf("%w: %s key %q is both set and removed; do one or the other", ErrInvalidInput, name, k)
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
