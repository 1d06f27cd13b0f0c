package engine

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// The size limit, Config.MaxSnapshotBytes, is one rule for every write
// path, and this file holds it: what it counts, and the bounds of the
// text fields that have natural ones. Snapshot, Append, PutWrites and
// Import call these checks; a store enforces the limit on what only it
// sees, the head an Append builds on (AppendRequest.MaxSizeBytes).

// Bounds of a checkpoint's text fields, whatever Config.MaxSnapshotBytes
// is. A tag and the next node, like a thread id, are at most 255
// characters.
const (
	// MaxTags is the most tags a checkpoint may carry.
	MaxTags = 256
	// MaxSummaryLength is the longest summary, in characters: a summary
	// is shown in every listing of its checkpoint.
	MaxSummaryLength = 4096
)

// checkCheckpointText checks a checkpoint's own text fields (tags, summary,
// next node), for Snapshot, Append and Import alike, and returns the tags
// ready for a store (never nil).
func checkCheckpointText(tags []string, summary, nextNode string) ([]string, error) {
	if len(tags) > MaxTags {
		return nil, fmt.Errorf("%w: %d tags; at most %d", ErrInvalidInput, len(tags), MaxTags)
	}
	for _, t := range tags {
		if err := checkID("tag", t, true); err != nil {
			return nil, err
		}
	}
	if n := utf8.RuneCountInString(summary); n > MaxSummaryLength {
		return nil, fmt.Errorf("%w: summary is %d characters; at most %d", ErrInvalidInput, n, MaxSummaryLength)
	}
	if err := checkText("summary", summary); err != nil {
		return nil, err
	}
	if err := checkID("next node", nextNode, true); err != nil {
		return nil, err
	}
	if tags == nil {
		return []string{}, nil // nil would be SQL NULL
	}
	return tags, nil
}

// contentBytes is the size of a checkpoint's content (messages, state and
// tool results) as the limit counts it: in bytes as sent, each number at
// the longer of its text and Postgres's spelling of it (jsontext.Bytes).
func contentBytes(messages, state, toolResults json.RawMessage) int64 {
	return jsontext.Content{Messages: messages, State: state, ToolResults: toolResults}.Size()
}

// ownBytes is the size of what a checkpoint holds besides its content
// (messages, state and tool results): its metadata (as jsontext.Bytes
// counts it), summary, next node and tags, in bytes as sent.
func ownBytes(metadata json.RawMessage, summary, nextNode string, tags []string) int64 {
	n := jsontext.Bytes(metadata) + int64(len(summary)+len(nextNode))
	for _, t := range tags {
		n += int64(len(t))
	}
	return n
}

// unsentBytes is what a write stores of a checkpoint's content but does
// not count in its size: "[]", "{}" and "{}" for the messages, state and
// tool results it was not sent. So a checkpoint's content, as sent, is at
// most its SizeBytes plus unsentBytes, which an import checks.
const unsentBytes = int64(len("[]") + len("{}") + len("{}"))

// checkCheckpointSize is the limit on one checkpoint as a reader gets it:
// content bytes of messages, state and tool results and own bytes of the
// rest (see ownBytes), together at most limit (Config.MaxSnapshotBytes;
// negative: no limit). what names the content ("messages, state and tool
// results", or an append's change).
func checkCheckpointSize(limit int64, what string, content, own int64) error {
	if limit >= 0 && content+own > limit {
		return fmt.Errorf("%w: %d bytes (%s %d; metadata, summary, next node and tags %d), over the limit of %d (Config.MaxSnapshotBytes)",
			ErrSnapshotTooLarge, content+own, what, content, own, limit)
	}
	return nil
}

// contentBudget is the most a checkpoint's content may hold next to own
// bytes of its own fields (see ownBytes): what a store checks an append's
// whole content against (AppendRequest.MaxSizeBytes); negative when there
// is no limit.
func (e *Engine) contentBudget(own int64) int64 {
	if e.cfg.MaxSnapshotBytes < 0 {
		return -1
	}
	return max(e.cfg.MaxSnapshotBytes-own, 0)
}

// writeBytes is the size of a pending write: its channel and its value,
// in bytes as sent (the value as jsontext.Bytes counts it).
func writeBytes(channel string, value json.RawMessage) int64 {
	return int64(len(channel)) + jsontext.Bytes(value)
}

// checkWriteSize is the limit on one pending write (what names it).
func checkWriteSize(limit int64, what string, n int64) error {
	if limit >= 0 && n > limit {
		return fmt.Errorf("%w: %s is %d bytes (channel and value), over the limit of %d (Config.MaxSnapshotBytes)", ErrSnapshotTooLarge, what, n, limit)
	}
	return nil
}

// checkWritesSize is the limit on one PutWrites call: its channels and
// values, each and all together, at most limit. It reads lengths only, so
// a call over the limit costs no parse.
func checkWritesSize(limit int64, writes []Write) error {
	var total int64
	for i, w := range writes {
		n := writeBytes(w.Channel, w.Value)
		if err := checkWriteSize(limit, fmt.Sprintf("write %d", i), n); err != nil {
			return err
		}
		total += n
	}
	if limit >= 0 && total > limit {
		return fmt.Errorf("%w: %d writes of %d bytes in all, over the limit of %d for one call (Config.MaxSnapshotBytes); record them in several tasks",
			ErrSnapshotTooLarge, len(writes), total, limit)
	}
	return nil
}

// checkImportThreadSize holds a thread record's metadata to the limit.
func checkImportThreadSize(limit int64, t ExportThread) error {
	if n := jsontext.Bytes(t.Metadata); limit >= 0 && n > limit {
		return fmt.Errorf("%w: thread metadata is %d bytes, over the limit of %d (Config.MaxSnapshotBytes)", ErrSnapshotTooLarge, n, limit)
	}
	return nil
}
