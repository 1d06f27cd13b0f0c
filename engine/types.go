package engine

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Trigger says what caused a snapshot.
type Trigger string

// The snapshot triggers.
const (
	TriggerToolCall     Trigger = "tool_call"     // before or after a tool call
	TriggerLLMCall      Trigger = "llm_call"      // before or after an LLM call
	TriggerStateChange  Trigger = "state_change"  // the agent's state changed
	TriggerTaskBoundary Trigger = "task_boundary" // a task started or ended
	TriggerManual       Trigger = "manual"        // an explicit call (the default)
	TriggerInterval     Trigger = "interval"      // a timer
)

// orDefault is t, or TriggerManual for the empty trigger: what an
// explicit call means.
func (t Trigger) orDefault() Trigger {
	if t == "" {
		return TriggerManual
	}
	return t
}

// Valid reports whether t is one of the defined triggers.
func (t Trigger) Valid() bool {
	switch t {
	case TriggerToolCall, TriggerLLMCall, TriggerStateChange, TriggerTaskBoundary, TriggerManual, TriggerInterval:
		return true
	}
	return false
}

// SnapshotInput is one checkpoint to write. Only ThreadID is required.
type SnapshotInput struct {
	// ThreadID names the agent run, 1 to 255 characters.
	ThreadID string
	// Namespace is the sub-graph; "" (the default) is the root graph. Each
	// namespace has its own head.
	Namespace string
	// ID is the checkpoint id. Leave it zero and the engine makes a UUIDv7;
	// set it (to a UUIDv7, see NewCheckpointID) to make a retried write
	// idempotent.
	ID uuid.UUID
	// ParentID overrides the parent. Zero means the thread's head, which is
	// what an agent loop wants; a checkpoint of the same thread and
	// namespace starts a new line from there (like Rewind, then Snapshot).
	ParentID uuid.UUID
	// Trigger defaults to TriggerManual.
	Trigger Trigger
	// Tags are free-form labels, usable as a ListCheckpoints filter: at
	// most MaxTags, each at most 255 characters.
	Tags []string
	// Summary defaults to "[role] content" of the last message, each cut to
	// its first 100 characters,
	// else "State: N keys", a string content's text as written (a U+0000,
	// which a summary cannot hold, shown as U+FFFD); content that is not a
	// string (a list of parts, a number) as the store holds its JSON: on
	// Postgres jsonb's text (see docs/design.md on reads), on SQLite as
	// sent. At most MaxSummaryLength characters.
	Summary string
	// Metadata is a JSON object (default {}), usable as a containment filter.
	Metadata json.RawMessage
	// Messages is a JSON array (default []).
	Messages json.RawMessage
	// State is a JSON object (default {}).
	State json.RawMessage
	// ToolResults is a JSON object (default {}), stored whole.
	ToolResults json.RawMessage
	// NextNode is the node the agent runs next when resumed from here, at
	// most 255 characters.
	NextNode string
}

// SnapshotResult describes a written checkpoint.
type SnapshotResult struct {
	ID        uuid.UUID
	ThreadID  string
	Namespace string
	ParentID  uuid.UUID // zero for a thread's first checkpoint
	Step      int64
	CreatedAt time.Time
	// Created is false when the checkpoint already existed: the call was a
	// retry of an earlier identical write and changed nothing.
	Created bool
	// Skipped is true when nothing was written because the trigger is not
	// enabled (Config.Triggers); SkipReason then says so, and ID is zero.
	Skipped    bool
	SkipReason string
}

// CheckpointInfo is a checkpoint without its content, as ListCheckpoints
// returns it.
type CheckpointInfo struct {
	ID        uuid.UUID
	ThreadID  string
	Namespace string
	// Seq is the checkpoint's place in its thread's write order, from 1.
	Seq      int64
	ParentID uuid.UUID // zero for a thread's first checkpoint
	// MergeParentID is, for a merge checkpoint, the head of the branch
	// merged in; zero otherwise.
	MergeParentID uuid.UUID
	Step          int64
	CreatedAt     time.Time
	Trigger       Trigger
	Tags          []string
	Summary       string
	Metadata      json.RawMessage
	NextNode      string
	// SizeBytes is the size of messages + state + tool results in bytes
	// as sent (by Snapshot; for Append, the head's plus the change's, or
	// the content measured when that sum was over Config.MaxSnapshotBytes).
	SizeBytes int64
	// Format is how the content is stored: "full", or "delta" (only the
	// changes since the parent; see Config.FullSnapshots). Reads return
	// whole content either way.
	Format string
}

// Checkpoint is a whole checkpoint: what was written, exactly, and the
// pending writes recorded after it.
type Checkpoint struct {
	CheckpointInfo
	Messages      json.RawMessage
	State         json.RawMessage
	ToolResults   json.RawMessage
	PendingWrites []PendingWrite
}

// Write is one value a task wrote to a channel.
type Write struct {
	Channel string
	Value   json.RawMessage
}

// PendingWrite is a Write recorded after a checkpoint by a task that
// finished inside the step.
type PendingWrite struct {
	TaskID  string          `json:"task_id"`
	Index   int             `json:"idx"`
	Channel string          `json:"channel"`
	Value   json.RawMessage `json:"value"`
}

// ListOptions filters and pages ListCheckpoints.
type ListOptions struct {
	// Namespace to list; "" is the root graph.
	Namespace string
	// Limit is the page size: default 100, at most MaxListLimit.
	Limit int
	// Before is the keyset cursor: only checkpoints written before this one.
	// Pass the last ID of a page to get the next page. A cursor that is not
	// a checkpoint of the thread and namespace gives ErrNotFound.
	Before uuid.UUID
	// Metadata keeps checkpoints whose metadata contains this JSON object
	// (Postgres @>), e.g. {"memory_cleared": true}. A key of
	// Encryption.MetadataKeys cannot be filtered on (its values are stored
	// encrypted): ErrInvalidInput.
	Metadata json.RawMessage
	// Tags keeps checkpoints that carry every one of these tags.
	Tags []string
}

// ThreadListOptions pages ListThreads.
type ThreadListOptions struct {
	// Limit is the page size: default 100, at most MaxListLimit.
	Limit int
	// After is the keyset cursor: only threads whose id sorts after it.
	// Pass the last ThreadID of a page to get the next page. Thread ids
	// (and namespaces) sort by their bytes, as Go compares strings, on
	// every store whatever the database's collation: "B" before "a".
	After string
}

// ThreadInfo is a thread and its head, as ListThreads returns it.
type ThreadInfo struct {
	ThreadID      string
	Namespace     string // the namespace whose head is shown: "" when the thread has one
	HeadID        uuid.UUID
	HeadStep      int64
	HeadSummary   string
	HeadCreatedAt time.Time
	Metadata      json.RawMessage
	CreatedAt     time.Time // when the thread's first checkpoint was written
}
