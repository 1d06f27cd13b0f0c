package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Store is where an Engine keeps checkpoints. Two stores exist, each a
// package of its own: Postgres (package postgres, over the SQL functions
// of package schema) and SQLite (package sqlite, for local development and
// tests). Every behaviour
// of the Engine's API is the same on both; what only Postgres offers (SQL
// functions for psql, pg_cron sweeps, the thread locks' table) is outside
// this interface.
//
// The division of work: the Engine validates every argument, fills in
// defaults, NUL-escapes JSON before it calls a Store and unescapes what a
// Store returns (see escapeNUL), so JSON crossing this interface is in its
// stored form, valid and of the right shape (messages an array; state, tool
// results and metadata objects). A Store assigns steps, parents and write
// order, decides what to store as a delta, enforces retention, and keeps
// every invariant of DESIGN.md with its own means: each write one
// transaction, serialized per thread; a retried id changes nothing. It
// returns the package's sentinel errors (ErrNotFound, ErrInvalidInput,
// ErrIDConflict), wrapped with context, and every time in UTC.
//
// A Store is safe for concurrent use. Implementations outside this module
// are possible, but the interface may grow with the Engine's API.
type Store interface {
	// Put writes one checkpoint and makes it the head of its thread and
	// namespace: parent the head (or p.ParentID, which must be a checkpoint
	// of the same thread and namespace: ErrNotFound otherwise), step the
	// parent's + 1, seq the next in the thread and namespace. A p.ID that
	// exists with the same thread, namespace and content returns that
	// checkpoint with Created false; with other content, ErrIDConflict.
	// ErrEncrypted, nothing written, when p.Sealed is false and the thread
	// is encrypted (has a data key, shredded or not): see PutRequest.Sealed.
	Put(ctx context.Context, p PutRequest) (SnapshotResult, error)
	// PutAppend writes one checkpoint whose content is the head's (of the
	// thread and namespace) with a change applied (see AppendRequest), and
	// makes it the head: parent the head, step the head's + 1. When the
	// head has digests it is stored from the change and the head's run
	// alone, reading nothing before the run's anchor: a delta on the head
	// while its run may grow, a delta on the run's anchor (the run's
	// deltas and the change) at the end of the run, and whole only where
	// the run has no anchor (after DeltaRun-1 anchors: the store then
	// rebuilds the head's content). On a head without digests, whole.
	// ErrNotFound when the thread has no checkpoint in the
	// namespace; ErrHeadMoved when a.OnHead is set and is not the head.
	// ErrSnapshotTooLarge when its content would be over a.MaxSizeBytes.
	// ErrEncrypted as Put's, for a.Sealed.
	// A.ID that exists is a retry when it was written by the same append
	// (same thread, namespace, metadata, next node, and content equal to
	// its parent's with the change applied): that checkpoint is returned
	// with Created false; otherwise ErrIDConflict.
	PutAppend(ctx context.Context, a AppendRequest) (SnapshotResult, error)
	// Get returns a checkpoint whole (content rebuilt from deltas) with
	// its pending writes; ErrNotFound for an unknown id.
	Get(ctx context.Context, id uuid.UUID) (*Checkpoint, error)
	// Head returns the head of a thread and namespace: the rewound-to
	// checkpoint when the thread was rewound, else the newest. ErrNotFound
	// when the thread has no checkpoint.
	Head(ctx context.Context, threadID, namespace string) (*Checkpoint, error)
	// HeadID returns the id of Head's checkpoint, reading none of its
	// content. ErrNotFound when the thread has no checkpoint.
	HeadID(ctx context.Context, threadID, namespace string) (uuid.UUID, error)
	// ListCheckpoints returns checkpoints without content, newest first
	// (see ListQuery). ErrNotFound for a Before cursor that is not a
	// checkpoint of the thread and namespace.
	ListCheckpoints(ctx context.Context, q ListQuery) ([]CheckpointInfo, error)
	// ListThreads returns up to limit threads whose id sorts after after,
	// in thread id order, each with the head of its root namespace (or of
	// its first namespace when it has no root one).
	ListThreads(ctx context.Context, after string, limit int) ([]ThreadInfo, error)
	// PutWrites records writes at positions 0..len-1 of task taskID after
	// checkpoint id; positions already recorded keep their values. It
	// returns how many were new; ErrNotFound for an unknown checkpoint;
	// ErrEncrypted, nothing written, for values that are not sealed
	// (w.Sealed false) after a checkpoint of an encrypted thread.
	PutWrites(ctx context.Context, w WritesRequest) (int64, error)

	// DeleteCheckpoints deletes the checkpoints q names, with their
	// pending writes, in one transaction under the lock of each thread it
	// touches (see DeleteQuery), and returns how many it deleted.
	DeleteCheckpoints(ctx context.Context, q DeleteQuery) (int64, error)
	// PruneThreads deletes from each of threadIDs (checked, sorted, each
	// once) what p (checked, not KeepAll) does not keep, and returns what
	// it deleted: with IDs for KeepLastN, KeepAge and KeepMilestones, the
	// count alone for KeepLatest and KeepNone (see Policy, DeleteResult).
	// Each thread is pruned in one transaction, several may share one; on
	// an error the result counts what was deleted and committed before it.
	PruneThreads(ctx context.Context, threadIDs []string, p Policy) (DeleteResult, error)
	// PreviewPrune returns what PruneThreads would delete now, and
	// deletes nothing: it applies p as PruneThreads does, in a
	// transaction it rolls back.
	PreviewPrune(ctx context.Context, threadIDs []string, p Policy) (DeleteResult, error)

	// Rewind makes checkpoint id its thread's head; with truncate it also
	// deletes the old head's line down to (not including) id. The result's
	// Checkpoint is left nil. ErrNotFound for an unknown id.
	Rewind(ctx context.Context, id uuid.UUID, truncate bool) (*RewindResult, error)
	// RewindToStep is Rewind (without truncate) to the checkpoint with the
	// greatest step at or below step on the line from the head of a thread
	// and namespace back to its first checkpoint, within that thread and
	// namespace, found under the thread's lock in the rewind's transaction
	// (so on the line of the head it moves); it returns that checkpoint's
	// id. ErrNotFound if there is none.
	RewindToStep(ctx context.Context, threadID, namespace string, step int64) (uuid.UUID, *RewindResult, error)
	// Lineage returns checkpoint id and its ancestors, newest first,
	// following parents across branch threads; at most limit of them
	// (limit <= 0: all). An unknown id gives an empty list.
	Lineage(ctx context.Context, id uuid.UUID, limit int) ([]CheckpointInfo, error)
	// Tree returns every checkpoint of a thread and of the branches forked
	// from it, recursively, with ParentID and MergeParentID set, in thread
	// then write order.
	Tree(ctx context.Context, threadID string) ([]TreeNode, error)
	// Branch creates thread newThreadID whose first checkpoint (id) has
	// the content of checkpoint fromID and fromID as parent, and records
	// the branch name and source on the thread. ErrNotFound for an unknown
	// source; ErrInvalidInput when newThreadID exists or has a data key
	// (left by a deleted encrypted thread) while the source's thread has
	// none; ErrEncrypted when the source's thread has a data key and
	// newThreadID none (make the branch's key first: it holds sealed
	// values).
	Branch(ctx context.Context, fromID uuid.UUID, newThreadID, name string, id uuid.UUID) (BranchResult, error)
	// Branches lists the branches forked from a thread, oldest first.
	Branches(ctx context.Context, threadID string) ([]BranchInfo, error)
	// Merge writes checkpoint id on intoThread with the content of
	// branchThread's head, intoThread's head as parent and the branch head
	// as merge parent, all three in namespace. ErrNotFound, writing
	// nothing, for a branch or an intoThread with no checkpoint in
	// namespace; ErrInvalidInput for a thread merged into itself;
	// ErrEncrypted for an encrypted branch or intoThread (values are
	// copied as stored: an encrypting Engine merges by a Put with
	// MergeParentID).
	Merge(ctx context.Context, branchThread, intoThread, namespace string, id uuid.UUID) (MergeResult, error)
	// CopyThread copies every row of thread src to a new thread dst with
	// new checkpoint ids, and returns one pair per checkpoint copied, in
	// namespace then write order. ErrNotFound for an unknown src;
	// ErrInvalidInput when dst exists or has a data key; ErrEncrypted for
	// an encrypted src (an encrypting Engine copies by sealing again).
	CopyThread(ctx context.Context, src, dst string) ([]CopiedID, error)

	// SweepBatch applies expiry (see SetExpiry) and then p (a checked
	// retention policy, see Sweep) to up to size
	// threads whose id sorts after after, in thread id order, in one
	// transaction. A thread that fails is counted and left as it was.
	SweepBatch(ctx context.Context, p Policy, after string, size int) (SweepBatchResult, error)
	// PreviewSweepBatch returns what SweepBatch would do now, and changes
	// nothing: it runs SweepBatch's rule in a transaction it rolls back.
	PreviewSweepBatch(ctx context.Context, p Policy, after string, size int) (SweepBatchResult, error)
	// SetExpiry sets (zero at: clears) the expiry of every namespace of a
	// thread: what a sweep after at keeps of it, p (checked: KeepNone or
	// KeepLatest). It returns how many thread rows it changed.
	SetExpiry(ctx context.Context, threadID string, at time.Time, p Policy) (int64, error)
	// Expiry returns when a thread expires (the zero time: it does not)
	// and whether its expiry keeps the heads (KeepLatest) rather than
	// nothing (KeepNone). ErrNotFound for an unknown thread.
	Expiry(ctx context.Context, threadID string) (at time.Time, keepLatest bool, err error)

	// Export reads a thread (every namespace) and, with opts.Branches, the
	// threads forked from it recursively, oldest first, in one consistent
	// snapshot, and hands their rows to sink as it reads them, holding a
	// page of rows at a time: for each thread its thread rows, then its
	// checkpoints as stored (a delta as its delta), in namespace then write
	// order. ErrNotFound for an unknown thread.
	Export(ctx context.Context, threadID string, opts ExportOptions, sink ExportSink) error
	// Import calls fn with a writer inside one transaction, which commits
	// when fn returns nil and rolls back otherwise.
	Import(ctx context.Context, fn func(ImportWriter) error) error

	// DataKey returns the wrapped data key of a thread (see Encryption),
	// shredded or not; ErrNotFound when the thread has none.
	DataKey(ctx context.Context, threadID string) (WrappedKey, error)
	// PutDataKey stores k as its thread's data key unless the thread has
	// one (or had one, shredded), and returns the thread's key as stored:
	// k, or the one that was there.
	PutDataKey(ctx context.Context, k WrappedKey) (WrappedKey, error)
	// DataKeys returns up to limit data keys whose thread id sorts after
	// after, in thread id order, shredded ones included.
	DataKeys(ctx context.Context, after string, limit int) ([]WrappedKey, error)
	// RewrapDataKey replaces the wrapped key of old.ThreadID by k's if it
	// is still old's (same KEK id and bytes, not shredded), and reports
	// whether it did.
	RewrapDataKey(ctx context.Context, old, k WrappedKey) (bool, error)
	// ShredDataKey deletes the wrapped data key of old.ThreadID if it is
	// still old's (same KEK id and bytes), keeping a record of when (its
	// Wrapped nil), so the thread cannot get a new key; for an old with no
	// Wrapped it writes that record if the thread has no key row. It
	// reports whether it did: false when the row is not old (re-wrapped,
	// made or shredded meanwhile).
	ShredDataKey(ctx context.Context, old WrappedKey) (bool, error)
	// BranchSource returns the thread a branch was forked from ("" for a
	// thread that is not a branch): where the keys of what its first
	// checkpoint copied are, once the source checkpoint is deleted.
	BranchSource(ctx context.Context, threadID string) (string, error)

	// Close releases what the store holds (a pool it opened, a file).
	Close() error
}

// PutRequest is a checkpoint as an Engine hands it to a Store: checked,
// defaults filled in, JSON in stored form.
type PutRequest struct {
	ThreadID    string
	Namespace   string
	ID          uuid.UUID // a UUIDv7
	ParentID    uuid.UUID // zero: the head
	Trigger     Trigger
	Tags        []string // never nil
	Summary     string   // "": the store's default summary
	Metadata    json.RawMessage
	Messages    json.RawMessage
	State       json.RawMessage
	ToolResults json.RawMessage
	NextNode    string
	SizeBytes   int64 // messages + state + tool results as sent
	// DeltaRun is Config.DeltaRun, or 1 when this checkpoint is to be
	// stored whole (FullSnapshots, or under Config.DeltaMinBytes); then
	// the digests are nil.
	DeltaRun int
	// MessageChain holds the running list digest after each message
	// (jsontext.MessageChain, 32 bytes per message); StateDigests and
	// ToolResultsDigests a digest per top-level key (see package
	// internal/jsontext). A store compares them with the base's to find what
	// changed: the base's list digest with the chain's value at the base's
	// message count.
	MessageChain       []byte
	StateDigests       json.RawMessage
	ToolResultsDigests json.RawMessage
	// Sealed says the content is sealed by the thread's data key (an
	// encrypting Engine's). A store refuses content that is not
	// (ErrEncrypted) for a thread that has a data key: plaintext there
	// would be refused by every encrypting reader, and outlive a shred.
	Sealed bool
	// MergeParentID, when set, makes the checkpoint a merge of that
	// checkpoint (an encrypting Engine's merge, whose content it sealed
	// again for this thread): the thread must have a checkpoint in the
	// namespace, and MergeParentID must be a checkpoint of another thread
	// in that namespace; ErrNotFound otherwise, nothing written.
	MergeParentID uuid.UUID
}

// WritesRequest is a PutWrites as an Engine hands it to a Store: writes at
// positions 0..len(Writes)-1 of task TaskID after checkpoint ID, checked,
// values in stored form.
type WritesRequest struct {
	ID     uuid.UUID
	TaskID string
	Writes []Write
	Sealed bool // the values are sealed (see PutRequest.Sealed)
}

// AppendRequest is an Append as an Engine hands it to a Store: checked,
// JSON in stored form (see PutRequest). The new checkpoint's content is
// the head's with Messages appended, RemoveState keys dropped from the
// state and SetState's members set (a key present keeps its place and
// takes the new value, a new key comes last, in SetState's order; a key
// given twice takes its last value); tool results likewise.
type AppendRequest struct {
	ThreadID  string
	Namespace string
	ID        uuid.UUID // a UUIDv7
	OnHead    uuid.UUID // zero: whatever the head is
	Trigger   Trigger
	Tags      []string // never nil
	Summary   string   // "": the store's default summary
	Metadata  json.RawMessage
	NextNode  string
	// Messages is a JSON array of the messages appended; SetState and
	// SetToolResults JSON objects of the top-level keys set.
	Messages       json.RawMessage
	SetState       json.RawMessage
	SetToolResults json.RawMessage
	// RemoveState and RemoveToolResults are the keys dropped, in stored
	// form (see storedString), sorted, none of them set too. A key the
	// head lacks is ignored.
	RemoveState       []string
	RemoveToolResults []string
	SizeBytes         int64 // messages + set state + set tool results as sent
	// MaxSizeBytes is the most the new checkpoint's whole content may
	// hold (Config.MaxSnapshotBytes less the bytes of its own metadata,
	// summary, next node and tags); negative: no limit. The store records
	// as the checkpoint's size the head's plus SizeBytes, a bound that
	// counts a replaced key twice; where that bound is over MaxSizeBytes,
	// it measures the content the append makes and records that, and
	// refuses the append (ErrSnapshotTooLarge) when that is over too.
	MaxSizeBytes int64
	// ContentBytes, when positive, is the size of the content the append
	// makes (jsontext.Content.Size of it), measured by an encrypting
	// engine, the only one that sees that content: the store records it
	// and holds it to MaxSizeBytes in place of its own bound and measure.
	ContentBytes int64
	DeltaRun     int // Config.DeltaRun: 1 stores the checkpoint whole
	// MessageDigests holds 16 bytes per appended message
	// (jsontext.MessageDigests); SetStateDigests and SetToolResultsDigests
	// jsontext.KeyDigests of the set objects. A store continues the head's
	// digests with them.
	MessageDigests        []byte
	SetStateDigests       json.RawMessage
	SetToolResultsDigests json.RawMessage
	Sealed                bool // see PutRequest.Sealed
}

// ListQuery is a checked ListCheckpoints request.
type ListQuery struct {
	ThreadID  string
	Namespace string
	Before    uuid.UUID       // zero: from the newest
	Metadata  json.RawMessage // nil: no filter; else a JSON object the metadata must contain
	Tags      []string        // every one must be present
	Limit     int             // 1 to MaxListLimit
}

// DeleteQuery is a checked DeleteCheckpoints request (see Selection):
// the checkpoints of ThreadID and Namespace whose step is below BeforeStep,
// except the head; or, when RunIDs is set (never empty; stored form),
// those of any thread and namespace whose metadata "run_id" is one of
// them, heads included.
type DeleteQuery struct {
	ThreadID   string
	Namespace  string
	BeforeStep int64
	RunIDs     []string
}

// SweepBatchResult is what one Store.SweepBatch did.
type SweepBatchResult struct {
	LastThreadID string // the last thread seen; "" when none was left
	Threads      int
	Expired      int
	Failed       int
	Deleted      int64
}

// ExportSink receives the rows of an export, JSON in stored form.
type ExportSink struct {
	Thread     func(ExportThread) error
	Checkpoint func(ExportCheckpoint) error
}

// ImportWriter writes the rows of an import inside the import's
// transaction. Its arguments are checked, JSON in stored form.
type ImportWriter interface {
	// Thread writes a thread row. The first row of a thread fails with
	// ErrInvalidInput when the thread exists already.
	Thread(ctx context.Context, t ExportThread) error
	// Checkpoint writes a checkpoint as c says it is stored (c.Storage,
	// its base, run and depth, content as given), with d's digests and its
	// pending writes. A store may hold a batch of rows (see ImportBatch)
	// and write them later in the transaction. ErrIDConflict when its id is
	// in use; ErrInvalidInput when the import holds the same row twice. The
	// Engine names c (its record and id) in the error; an error need not.
	// (The Postgres store, which writes batches, names the checkpoint it
	// refused, which may be an earlier call's.)
	Checkpoint(ctx context.Context, c ExportCheckpoint, d ImportDigests) error
	// DataKey writes the data key of a thread the import wrote (k
	// checked: wrapped, or shredded with ShreddedAt set).
	// ErrInvalidInput when the thread has another key already.
	DataKey(ctx context.Context, k WrappedKey) error
	// HasDataKey reports whether a thread has a data key in the database
	// (shredded or not), read in the import's transaction.
	HasDataKey(ctx context.Context, threadID string) (bool, error)
	// Find returns the thread, namespace and step of checkpoint id of the
	// database (ID, ThreadID, Namespace and Step set), read in the import's
	// transaction; ok is false when there is none. (An import reads the
	// database only so: a read through the Store outside its transaction
	// would wait for a second connection, which an import holding the only
	// one never gets.)
	Find(ctx context.Context, id uuid.UUID) (c CheckpointInfo, ok bool, err error)
	// HoldThread takes the lock of a thread of the database until the
	// import ends (its writers and deleters wait for the import) and
	// returns its rows as they are then, as an export has them; none for
	// a thread that does not exist. Call it before writing.
	HoldThread(ctx context.Context, threadID string) ([]ExportThread, error)
}

// TxStore is a Store that can run inside a caller's pgx transaction: the
// Postgres store. See Engine.WithTx.
type TxStore interface {
	Store
	// WithTx returns the store bound to tx.
	WithTx(tx pgx.Tx) Store
	// InTx reports whether the store runs in a caller's transaction,
	// where a failed statement aborts the transaction and nothing is
	// retried.
	InTx() bool
}
