package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// DefaultMaxSnapshotBytes is the default Config.MaxSnapshotBytes: 10 MiB.
const DefaultMaxSnapshotBytes = 10 << 20

// DefaultDeltaRun is the default Config.DeltaRun.
const DefaultDeltaRun = 50

// MaxDeltaRun is the most Config.DeltaRun takes: chains of 2*(MaxDeltaRun-1)
// links stay within the 65,536 a read of a delta follows, and the run
// within the stores' 32-bit columns.
const MaxDeltaRun = 1 << 15

// DefaultDeltaMinBytes is the default Config.DeltaMinBytes: 8 KiB.
const DefaultDeltaMinBytes = 8 << 10

// MaxListLimit is the largest page ListCheckpoints and ListThreads return.
const MaxListLimit = 10000

const (
	defaultListLimit = 100
	maxIDLength      = 255
)

// Config tunes an Engine. The zero value is ready to use.
type Config struct {
	// MaxSnapshotBytes is the size limit, the one every write path
	// applies, in bytes as sent (each JSON number at the longer of its
	// text and Postgres's spelling of it, which has no exponent: 1e5 is
	// 100000, and 1e131071 the 131,072 bytes a Postgres store returns for
	// it): a checkpoint as a reader gets it
	// (messages + state + tool results + metadata + summary + next node +
	// tags) from Snapshot; from Append the head's content plus the change
	// plus the new checkpoint's own fields (a key the change replaces
	// counts once: the store measures the result when the sum is over);
	// from PutWrites one call's channels and values, together; from Import
	// each record as the write that made it (a checkpoint, each pending
	// write, a thread's metadata). Over it a call returns
	// ErrSnapshotTooLarge and writes nothing. Branch, MergeBranch and
	// CopyThread are not held to it: they move content a write stored (as
	// the limit was then), a branch and a merge adding their own summary
	// and tags. Text fields have bounds of
	// their own too: thread id, namespace, task id, channel, next node and
	// each tag at most 255 characters; at most MaxTags tags; a summary at
	// most MaxSummaryLength characters (ErrInvalidInput). Zero means
	// DefaultMaxSnapshotBytes; a negative value disables the limit (the
	// bounds stay).
	MaxSnapshotBytes int64
	// FullSnapshots turns delta storage off: every checkpoint is stored
	// whole. By default a checkpoint whose messages extend its parent's is
	// stored, from DeltaMinBytes up, as a delta (the appended messages, the state and tool result
	// keys changed or removed), which reads back exactly the same.
	FullSnapshots bool
	// DeltaRun bounds the chains a read follows. After DeltaRun-1 deltas in
	// a row on their parents, a checkpoint is stored as a delta against
	// where that run started (an anchor); after DeltaRun-1 anchors in a
	// row, whole. A read follows at most 2*(DeltaRun-1) links; storage grows
	// with what changed. Zero means DefaultDeltaRun; 1 is the same as
	// FullSnapshots; more than MaxDeltaRun is MaxDeltaRun.
	DeltaRun int
	// DeltaMinBytes is the size (messages + state + tool results, in bytes
	// as sent) below which a snapshot is stored whole even with delta
	// storage on, and the engine computes no digests for it. A delta row
	// carries a digest per state and tool result key (about 35 bytes
	// each), so below a few KB a whole row, compressed, is as small or
	// smaller (the benchmarks' 3.9 KB, 32-key state: 567 bytes whole, 1,421
	// as a delta) and cheaper to write. A conversation crosses 8 KiB within
	// a few steps; from then on its checkpoints are deltas. Zero means
	// DefaultDeltaMinBytes; a negative value has no minimum.
	DeltaMinBytes int64

	// Triggers lists the enabled snapshot triggers; nil enables them all.
	// A Snapshot whose trigger is not listed writes nothing and returns a
	// result with Skipped set. TriggerManual is always enabled: it is what
	// an explicit call means.
	Triggers []Trigger

	// Logger receives the failures of SnapshotSafe, WrapTool, Scope and
	// interval snapshots, and (level warn) a KeyShredder's failure to
	// destroy a new data key that lost the race to be its thread's first;
	// nil means slog.Default(). A record's thread id, namespace, trigger,
	// tenant and error message are agent text shown escaped: control and
	// format characters (C0, DEL, C1, bidi overrides) as \uXXXX, bytes that
	// are not UTF-8 as \xXX; the error attribute is still the error for
	// errors.Is.
	Logger *slog.Logger

	// OnSnapshotFailure, when set, is called after each failure that
	// SnapshotSafe logs and counts (a hook for metrics, e.g. an
	// OpenTelemetry counter). It must not block.
	OnSnapshotFailure func(ctx context.Context, in SnapshotInput, err error)

	// Retry retries writes that fail with ErrTransient (see RetryPolicy);
	// the zero value does not.
	Retry RetryPolicy

	// TracerProvider and MeterProvider receive the Engine's OpenTelemetry
	// spans and metrics; nil means OpenTelemetry's global providers, which
	// do nothing unless the application installs some. Every Engine call
	// is a span, "pgcheckpoint.<Method>" (e.g. pgcheckpoint.Snapshot), a
	// child of the span in its ctx, with its error recorded; under it each
	// store call (one per attempt when Retry retries) is a span
	// "pgcheckpoint.store.<Operation>" with the attributes it knows:
	// pgcheckpoint.thread_id, .namespace, .checkpoint_id, .step, .format,
	// .bytes. Metrics: pgcheckpoint.snapshots (by pgcheckpoint.result:
	// written, existing, skipped), pgcheckpoint.stored.bytes,
	// pgcheckpoint.failures and pgcheckpoint.duration (seconds), the last
	// two by pgcheckpoint.operation. A pgx tracer on the pool (e.g.
	// otelpgx in ConnConfig.Tracer) adds the SQL statements as children of
	// the store spans.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider

	// Encryption, when its Keys are set, encrypts the content of every
	// checkpoint and pending write before it reaches the store (see
	// Encryption). The zero value encrypts nothing.
	Encryption Encryption

	// Retention, when set, is applied to the thread after each Snapshot
	// and Append (one more round trip and transaction; see Policy and
	// PruneThreads). It takes every Policy but KeepNone. The zero Policy
	// keeps everything.
	Retention Policy
}

// Engine is the agent-facing API over a Store: Postgres (package postgres) or SQLite
// (package sqlite). It is safe for concurrent use, by
// any number of goroutines and processes: state lives in the database, not
// in the Engine.
type Engine struct {
	store Store // base, with telemetry around every call
	base  Store
	tel   *telemetry
	cfg   Config
	crypt *crypter // nil: no encryption

	enabled      triggerSet    // from cfg.Triggers
	retentionErr error         // cfg.Retention checked once, in New
	failures     *atomic.Int64 // SnapshotSafe failures, see SnapshotFailures; shared with the engines made from this one
}

// New returns an Engine over store: the Postgres store
// (postgres.NewStore, over a pgx pool, connection or transaction) or the
// SQLite store (sqlite.Open). To open either from a URL, use
// pgcheckpoint.Open. Close closes the store; a Postgres store leaves the
// caller's pool open. Over a store that runs in the caller's transaction
// (postgres.NewStore of a pgx.Tx) Config.Retry is ignored, as in WithTx.
func New(store Store, cfg Config) *Engine {
	if ts, ok := store.(TxStore); ok && ts.InTx() {
		cfg.Retry = RetryPolicy{} // see WithTx
	}
	if cfg.MaxSnapshotBytes == 0 {
		cfg.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	if cfg.DeltaRun <= 0 {
		cfg.DeltaRun = DefaultDeltaRun
	}
	cfg.DeltaRun = min(cfg.DeltaRun, MaxDeltaRun)
	if cfg.FullSnapshots {
		cfg.DeltaRun = 1
	}
	if cfg.DeltaMinBytes == 0 {
		cfg.DeltaMinBytes = DefaultDeltaMinBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tel := newTelemetry(cfg)
	return &Engine{store: tracedStore{store, tel}, base: store, tel: tel, cfg: cfg, crypt: newCrypter(cfg.Encryption, cfg.Logger), enabled: newTriggerSet(cfg.Triggers),
		retentionErr: cfg.Retention.checkFor(useRetention), failures: new(atomic.Int64)}
}

// WithTx returns an Engine that runs every call inside the caller's
// transaction tx, with e's configuration: a checkpoint then commits with
// the caller's own rows or not at all, and nothing is visible to others
// before the commit. WithTx neither commits nor rolls back tx. The Engine
// returned is for tx's lifetime and, like tx, for one goroutine at a time.
//
// Each write takes its thread's lock, which is held until tx ends: other
// writers of that thread (in or out of transactions) wait for the caller's
// commit or rollback, so keep such transactions short. A call that fails in
// the database (ErrNotFound or ErrIDConflict found by a SQL function, an
// Append's head grown over Config.MaxSnapshotBytes, a driver error) aborts
// tx, as any failed statement does; bad input found before the database is
// reached (ErrInvalidInput) leaves tx usable.
// Config.Retry does not apply inside tx: retry the whole transaction.
// So when tx is RepeatableRead or Serializable and a write's thread
// changed after tx's snapshot was taken (by its first statement): the
// write fails with ErrTransient (SQLSTATE 40001) rather than act on what
// the snapshot shows.
//
// Export and Import run in a savepoint of tx, not in a transaction of their
// own. An Export or Import that fails rolls back to its savepoint, and tx
// goes on.
// An Export sees what tx's isolation level shows: under Read Committed (the
// default) each of its statements takes a new snapshot, so a thread
// written by others during the export can come out mixed; begin tx as
// Repeatable Read for one consistent snapshot, as Export has outside a
// transaction.
//
// Under a KeyShredder (HeldKeys), RewrapKeys, ShredThread and PruneKeys
// return ErrInvalidInput inside tx: the provider destroys keys at once,
// and a rollback would leave committed rows naming destroyed keys. Call
// them outside the transaction.
//
// Errors: ErrInvalidInput when e's store is not Postgres.
func (e *Engine) WithTx(tx pgx.Tx) (*Engine, error) {
	ts, ok := e.base.(TxStore)
	if !ok {
		return nil, fmt.Errorf("with tx: %w: the caller's transaction is a Postgres feature; this engine's store is %T", ErrInvalidInput, e.base)
	}
	out := e.withStore(ts.WithTx(tx))
	out.cfg.Retry = RetryPolicy{}
	return out, nil
}

// withStore returns an Engine like e over store (a form of e's store: bound
// to a transaction or a tenant).
func (e *Engine) withStore(store Store) *Engine {
	return &Engine{store: tracedStore{store, e.tel}, base: store, tel: e.tel, cfg: e.cfg, crypt: e.crypt, enabled: e.enabled,
		retentionErr: e.retentionErr, failures: e.failures}
}

// Store returns the store the Engine was made over, for what only that
// store offers: for example the pgx pool of a Postgres store that
// pgcheckpoint.Open made (see postgres.Store.DB).
func (e *Engine) Store() Store { return e.base }

// Close releases the Engine's store: the pool or file it opened. An Engine
// made by New leaves the caller's pool open.
func (e *Engine) Close() error {
	return e.store.Close()
}

// NewCheckpointID returns a new time-ordered checkpoint id (UUIDv7). Make
// the id before the first attempt and reuse it on retries, and a retried
// Snapshot is a no-op.
func NewCheckpointID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}

// isUUIDv7 reports whether id is a UUIDv7: version 7 and the variant of
// RFC 9562 (RFC 4122's), as NewCheckpointID makes them and as the SQL
// functions that write a checkpoint require (PC003).
func isUUIDv7(id uuid.UUID) bool {
	return id.Version() == 7 && id.Variant() == uuid.RFC4122
}

// Snapshot writes one checkpoint on in.ThreadID and makes it the thread's
// head, in one transaction. It takes one round trip (see
// postgres.Options.SingleStatement); two for a thread's first checkpoint, the first
// after a rewind or with an explicit ParentID other than the head, a retry
// of an existing ID, and, with deltas, the write that ends a run (one in
// DeltaRun-1). When in.Trigger is not
// enabled (Config.Triggers) it writes nothing and returns a result with
// Skipped set. Its parent is the head (or
// in.ParentID) and its step the parent's step + 1, both assigned in the
// database under the thread lock, so any number of writers may share a
// thread.
//
// Errors: ErrInvalidInput (and ErrInvalidJSON, ErrSnapshotTooLarge, which
// wrap it) for bad input, with nothing written; ErrNotFound when ParentID
// does not exist in the thread; ErrIDConflict when in.ID already names other
// content. With Config.Retention set, the policy is then applied to the
// thread; if that fails, the checkpoint stays written, the result is
// returned with the error, and retrying with the same ID is safe.
// ErrTransient: the database failed for a reason that passes (the write
// may have committed; retry with the same ID), after Config.Retry's
// attempts when it is set.
func (e *Engine) Snapshot(ctx context.Context, in SnapshotInput) (_ SnapshotResult, err error) {
	ctx, done := e.tel.call(ctx, "Snapshot", attrThread.String(in.ThreadID), attrNamespace.String(in.Namespace))
	defer func() { done(err) }()
	p, err := e.snapshotParams(in, "messages, state and tool results")
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("snapshot: %w", err)
	}
	if skipped, ok := e.skipDisabled(ctx, in); ok {
		return skipped, nil
	}
	if e.retentionErr != nil {
		return SnapshotResult{}, fmt.Errorf("snapshot: Config.Retention: %w", e.retentionErr)
	}
	plain := p
	if e.crypt != nil {
		err = e.sealPut(ctx, &p)
	} else {
		err = e.addDigests(&p)
	}
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("snapshot: %w", err)
	}
	var res SnapshotResult
	err = e.cfg.Retry.retry(ctx, func() (err error) {
		res, err = e.store.Put(ctx, p)
		return err
	})
	if errors.Is(err, ErrIDConflict) && e.crypt != nil {
		if r, ok := e.sealedRetry(ctx, plain); ok {
			res, err = r, nil
		}
	}
	if err != nil {
		return SnapshotResult{}, fmt.Errorf("snapshot: %w", NameRefusedJSON(err, p.JSONFields()...))
	}
	if err := e.retainAfter(ctx, "snapshot", res); err != nil {
		return res, err
	}
	return res, nil
}

// snapshotParams checks a snapshot, or an append's change (what names its
// content in an error), and returns it as a store takes it.
func (e *Engine) snapshotParams(in SnapshotInput, what string) (PutRequest, error) {
	if err := checkID("thread id", in.ThreadID, false); err != nil {
		return PutRequest{}, err
	}
	if err := checkNamespace(in.Namespace); err != nil {
		return PutRequest{}, err
	}
	id := in.ID
	if id == uuid.Nil {
		id = NewCheckpointID()
	} else if !isUUIDv7(id) {
		return PutRequest{}, fmt.Errorf("%w: checkpoint id %s is not a UUIDv7 (version %d, variant %s); ids must be UUIDv7 (time-ordered): use NewCheckpointID",
			ErrInvalidInput, id, id.Version(), id.Variant())
	}
	trigger := in.Trigger.orDefault()
	if !trigger.Valid() {
		return PutRequest{}, fmt.Errorf("%w: unknown trigger %q", ErrInvalidInput, trigger)
	}
	tags, err := checkCheckpointText(in.Tags, in.Summary, in.NextNode)
	if err != nil {
		return PutRequest{}, err
	}
	size := contentBytes(in.Messages, in.State, in.ToolResults)
	if err := checkCheckpointSize(e.cfg.MaxSnapshotBytes, what, size, ownBytes(in.Metadata, in.Summary, in.NextNode, in.Tags)); err != nil {
		return PutRequest{}, err
	}
	// The JSON is parsed once, by the store (Postgres rejects what does not
	// parse before anything is written, see NameRefusedJSON; the SQLite
	// store checks it); the engine reads it only to compute digests (see
	// ComputeDigests).
	messages, err := jsonText("messages", in.Messages, '[')
	if err != nil {
		return PutRequest{}, err
	}
	state, err := jsonText("state", in.State, '{')
	if err != nil {
		return PutRequest{}, err
	}
	toolResults, err := jsonText("tool results", in.ToolResults, '{')
	if err != nil {
		return PutRequest{}, err
	}
	metadata, err := jsonText("metadata", in.Metadata, '{')
	if err != nil {
		return PutRequest{}, err
	}
	return PutRequest{
		ThreadID:    in.ThreadID,
		Namespace:   in.Namespace,
		ID:          id,
		ParentID:    in.ParentID,
		Trigger:     trigger,
		Tags:        tags,
		Summary:     in.Summary,
		Metadata:    metadata,
		Messages:    messages,
		State:       state,
		ToolResults: toolResults,
		NextNode:    in.NextNode,
		SizeBytes:   size,
		DeltaRun:    e.cfg.DeltaRun,
	}, nil
}

// addDigests adds to the parameters the digests of their content, from
// which the database tells what changed since the base. A snapshot stored
// whole (every one with FullSnapshots, or one under DeltaMinBytes) needs
// none: its DeltaRun becomes 1.
func (e *Engine) addDigests(p *PutRequest) error {
	if p.DeltaRun <= 1 || p.SizeBytes < e.cfg.DeltaMinBytes {
		p.DeltaRun = 1
		return nil
	}
	return ComputeDigests(p)
}

// ComputeDigests sets p's digests from its content: the one way a whole
// checkpoint's digests are computed, by the engine and by a store for
// content it rebuilt itself (a merge, an append stored whole). The text is
// not parsed here: the store does that once (Postgres refuses what does not
// parse, the SQLite store checks it), and the digests of text that does
// not parse are never used. Errors: ErrInvalidJSON, for text that is not
// even shaped like an object.
func ComputeDigests(p *PutRequest) error {
	var err error
	p.MessageChain = jsontext.MessageChain(nil, jsontext.MessageDigests(p.Messages))
	if p.StateDigests, err = jsontext.KeyDigests(p.State); err != nil {
		return fmt.Errorf("%w (%v)", notJSON("state"), err)
	}
	if p.ToolResultsDigests, err = jsontext.KeyDigests(p.ToolResults); err != nil {
		return fmt.Errorf("%w (%v)", notJSON("tool results"), err)
	}
	return nil
}

// Get returns the checkpoint with the given id, with its pending writes.
// Errors: ErrNotFound.
func (e *Engine) Get(ctx context.Context, id uuid.UUID) (_ *Checkpoint, err error) {
	ctx, done := e.tel.callID(ctx, "Get", id)
	defer func() { done(err) }()
	c, err := e.store.Get(ctx, id)
	if err == nil {
		err = e.openCheckpoint(ctx, c)
	}
	if err != nil {
		return nil, fmt.Errorf("get checkpoint %s: %w", id, err)
	}
	return unescapeCheckpoint(c), nil
}

// Latest returns the head of a thread's root namespace: the checkpoint the
// next Snapshot builds on (after a Rewind, the rewound-to checkpoint, not the
// highest step). Errors: ErrNotFound when the thread has no checkpoint;
// ErrInvalidInput for a malformed thread id.
func (e *Engine) Latest(ctx context.Context, threadID string) (_ *Checkpoint, err error) {
	ctx, done := e.tel.call(ctx, "Latest", attrThread.String(threadID))
	defer func() { done(err) }()
	return e.LatestIn(ctx, threadID, "")
}

// LatestIn is Latest for a namespace of the thread ("" is the root).
// Errors: ErrNotFound when the namespace has no checkpoint;
// ErrInvalidInput for a malformed thread id or namespace.
func (e *Engine) LatestIn(ctx context.Context, threadID, namespace string) (_ *Checkpoint, err error) {
	ctx, done := e.tel.call(ctx, "LatestIn", attrThread.String(threadID), attrNamespace.String(namespace))
	defer func() { done(err) }()
	if err := checkID("thread id", threadID, false); err != nil {
		return nil, fmt.Errorf("latest: %w", err)
	}
	if err := checkNamespace(namespace); err != nil {
		return nil, fmt.Errorf("latest: %w", err)
	}
	c, err := e.store.Head(ctx, threadID, namespace)
	if err == nil {
		err = e.openCheckpoint(ctx, c)
	}
	if err != nil {
		return nil, fmt.Errorf("latest checkpoint of thread %q: %w", threadID, err)
	}
	return unescapeCheckpoint(c), nil
}

// ListCheckpoints returns a thread's checkpoints newest first, without their
// content, one page at a time (see ListOptions). An unknown thread gives an
// empty list. Errors: ErrInvalidInput, ErrInvalidJSON (for the metadata
// filter).
func (e *Engine) ListCheckpoints(ctx context.Context, threadID string, opts ListOptions) (_ []CheckpointInfo, err error) {
	ctx, done := e.tel.call(ctx, "ListCheckpoints", attrThread.String(threadID))
	defer func() { done(err) }()
	if err := checkID("thread id", threadID, false); err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	if err := checkNamespace(opts.Namespace); err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	limit, err := pageSize(opts.Limit)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	tags, err := checkTexts("tag", opts.Tags)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var filter json.RawMessage
	if len(opts.Metadata) > 0 {
		if filter, err = jsonArg("metadata filter", opts.Metadata, '{'); err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", err)
		}
		if err := e.filterableMetadata(filter); err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", err)
		}
	}
	infos, err := e.store.ListCheckpoints(ctx, ListQuery{
		ThreadID: threadID, Namespace: opts.Namespace, Before: opts.Before,
		Metadata: filter, Tags: tags, Limit: limit,
	})
	if err == nil {
		err = e.openInfos(ctx, threadID, infos)
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", NameRefusedJSON(err, JSONField{"metadata filter", filter}))
	}
	for i := range infos {
		unescapeInfo(&infos[i])
	}
	return infos, nil
}

// ListThreads returns threads in thread id order with their heads, one page
// at a time (see ThreadListOptions). A page costs about Limit index reads,
// however many checkpoints the threads hold.
func (e *Engine) ListThreads(ctx context.Context, opts ThreadListOptions) (_ []ThreadInfo, err error) {
	ctx, done := e.tel.call(ctx, "ListThreads")
	defer func() { done(err) }()
	limit, err := pageSize(opts.Limit)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	if err := checkText("after", opts.After); err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	threads, err := e.store.ListThreads(ctx, opts.After, limit)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	for i := range threads {
		threads[i].Metadata = unescapeNUL(threads[i].Metadata)
	}
	return threads, nil
}

// PutWrites records the writes a task made after checkpoint id, in one
// statement, at positions 0..len(writes)-1. Get and Latest return them with
// the checkpoint, so a resumed run can skip the task. A retried PutWrites of
// the same task keeps the first values. It returns how many writes were new.
// Config.MaxSnapshotBytes bounds one call: its channels and values
// together, in bytes as sent.
// The writes go to that checkpoint or nowhere: one deleted meanwhile is
// ErrNotFound, even where a newer checkpoint took its place in the thread.
// Errors: ErrNotFound for an unknown checkpoint; ErrInvalidInput,
// ErrInvalidJSON, ErrSnapshotTooLarge for bad input, with nothing written;
// ErrTransient under REPEATABLE READ or SERIALIZABLE when the checkpoint
// was deleted after the transaction's snapshot.
func (e *Engine) PutWrites(ctx context.Context, id uuid.UUID, taskID string, writes []Write) (_ int64, err error) {
	ctx, done := e.tel.callID(ctx, "PutWrites", id)
	defer func() { done(err) }()
	if err := checkID("task id", taskID, false); err != nil {
		return 0, fmt.Errorf("put writes: %w", err)
	}
	if err := checkWritesSize(e.cfg.MaxSnapshotBytes, writes); err != nil {
		return 0, fmt.Errorf("put writes: %w", err)
	}
	stored := make([]Write, len(writes))
	values := make([]JSONField, len(writes))
	for i, w := range writes {
		name := fmt.Sprintf("write %d of task %q", i, taskID)
		if err := checkID("channel", w.Channel, false); err != nil {
			return 0, fmt.Errorf("put writes: %s: %w", name, err)
		}
		v, err := jsonArg("value", w.Value, 0)
		if err != nil {
			return 0, fmt.Errorf("put writes: %s: %w", name, err)
		}
		stored[i] = Write{Channel: w.Channel, Value: v}
		values[i] = JSONField{name, v}
	}
	if e.crypt != nil {
		if err := e.sealWrites(ctx, id, taskID, stored); err != nil {
			return 0, fmt.Errorf("put writes after checkpoint %s: %w", id, err)
		}
	}
	var n int64
	err = e.cfg.Retry.retry(ctx, func() (err error) {
		n, err = e.store.PutWrites(ctx, WritesRequest{ID: id, TaskID: taskID, Writes: stored, Sealed: e.crypt != nil})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("put writes after checkpoint %s: %w", id, NameRefusedJSON(err, values...))
	}
	return n, nil
}

// unescapeInfo turns a CheckpointInfo from a store into what was written.
func unescapeInfo(c *CheckpointInfo) {
	c.Metadata = unescapeNUL(c.Metadata)
}

// unescapeCheckpoint turns a Checkpoint from a store into what was written.
func unescapeCheckpoint(c *Checkpoint) *Checkpoint {
	unescapeInfo(&c.CheckpointInfo)
	c.Messages = unescapeNUL(c.Messages)
	c.State = unescapeNUL(c.State)
	c.ToolResults = unescapeNUL(c.ToolResults)
	for i := range c.PendingWrites {
		c.PendingWrites[i].Value = unescapeNUL(c.PendingWrites[i].Value)
	}
	return c
}

// jsonArg validates a JSON argument and escapes it for jsonb. want is the
// first byte the value must start with ('[' array, '{' object, 0 any); an
// empty value becomes the empty array or object.
func jsonArg(name string, v json.RawMessage, want byte) (json.RawMessage, error) {
	if t := trimJSON(v); len(t) > 0 && !jsontext.Valid(t) {
		return nil, notJSON(name)
	}
	return jsonText(name, v, want)
}

// jsonText is jsonArg for text that Postgres will parse, and reject if
// need be, before it writes anything: the kind is told from the first
// byte, which is enough for JSON that parses.
func jsonText(name string, v json.RawMessage, want byte) (json.RawMessage, error) {
	trimmed := trimJSON(v)
	if len(trimmed) == 0 {
		switch want {
		case '[':
			return json.RawMessage("[]"), nil
		case '{':
			return json.RawMessage("{}"), nil
		}
		return nil, fmt.Errorf("%w: %s is empty", ErrInvalidJSON, name)
	}
	if want != 0 && trimmed[0] != want {
		kind := "an array"
		if want == '{' {
			kind = "an object"
		}
		return nil, fmt.Errorf("%w: %s must be %s", ErrInvalidJSON, name, kind)
	}
	return escapeNUL(trimmed), nil
}

// trimJSON drops the JSON whitespace (space, tab, newline, carriage
// return) around v, and nothing else: "\v" is not JSON whitespace, and
// text that starts with it does not parse.
func trimJSON(v []byte) []byte {
	return jsontext.TrimRight(v[jsontext.SkipSpace(v, 0):])
}

func notJSON(name string) error {
	return fmt.Errorf("%w: %s does not parse as JSON", ErrInvalidJSON, name)
}

// JSONField is a JSON argument as the engine hands it to a store, with
// the name an error message gives it: what a store passes to CheckJSON
// and NameRefusedJSON.
type JSONField struct {
	Name string
	Text json.RawMessage
}

// JSONFields are a snapshot's JSON arguments.
func (p *PutRequest) JSONFields() []JSONField {
	return []JSONField{{"messages", p.Messages}, {"state", p.State}, {"tool results", p.ToolResults}, {"metadata", p.Metadata}}
}

// JSONFields are an append's JSON arguments.
func (a *AppendRequest) JSONFields() []JSONField {
	return []JSONField{{"messages", a.Messages}, {"state", a.SetState}, {"tool results", a.SetToolResults}, {"metadata", a.Metadata}}
}

// Change is the change an append makes, for jsontext.Content.Apply.
func (a *AppendRequest) Change() jsontext.Change {
	return jsontext.Change{
		Messages: a.Messages, SetState: a.SetState, SetToolResults: a.SetToolResults,
		RemoveState: a.RemoveState, RemoveToolResults: a.RemoveToolResults,
	}
}

// CheckJSON is the rule for the JSON a store keeps: text that parses and
// that Postgres jsonb holds as it is (see jsontext.JSONBRefusal: UTF-8
// only, no unpaired surrogate escape, no \u0000, which the engine escapes,
// numbers within numeric's range). It returns ErrInvalidJSON naming the
// first field that breaks it, or nil. Postgres applies the rule itself
// before it writes. The SQLite store calls CheckJSON on every JSON value
// it is handed (writes, imports, the metadata filter), so both stores keep
// the same values and an export of either imports into the other; the
// Postgres store calls it inside a caller's transaction, which a refused
// statement would abort.
func CheckJSON(fields ...JSONField) error {
	for _, f := range fields {
		if !jsontext.Valid(f.Text) {
			return notJSON(f.Name)
		}
		if why := jsontext.JSONBRefusal(f.Text); why != "" {
			return namedRefusal{fmt.Errorf("%s: %w: %s, which Postgres jsonb cannot hold", f.Name, ErrInvalidJSON, why)}
		}
	}
	return nil
}

// namedRefusal is CheckJSON's error for JSON that parses and that jsonb
// cannot hold: it names its field already, so NameRefusedJSON leaves it.
type namedRefusal struct{ error }

func (e namedRefusal) Unwrap() error { return e.error }

// NameRefusedJSON names the field a store's ErrInvalidJSON is about. The
// engine sends most JSON unparsed, and Postgres refuses what does not
// parse, or parses but jsonb cannot hold (see jsontext.JSONBRefusal), with
// a message that names neither the field nor the argument. The first of
// fields that does not parse gives notJSON's error; the first that jsonb
// cannot hold is named before err. A single field is named whatever the
// reason. Other errors, refusals this cannot place and CheckJSON's
// refusals, which name their field, come back as they are.
func NameRefusedJSON(err error, fields ...JSONField) error {
	if !errors.Is(err, ErrInvalidJSON) || errors.As(err, new(namedRefusal)) {
		return err
	}
	for _, f := range fields {
		if len(f.Text) == 0 {
			continue // absent
		}
		if !jsontext.Valid(f.Text) {
			return notJSON(f.Name)
		}
		if jsontext.JSONBRefusal(f.Text) != "" {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	if len(fields) == 1 {
		return fmt.Errorf("%s: %w", fields[0].Name, err)
	}
	return err
}

// checkNamespace validates a namespace ("" is the root graph): the one
// check of every call that takes one.
func checkNamespace(namespace string) error {
	return checkID("namespace", namespace, true)
}

// checkID validates an identifier: valid UTF-8 with no NUL (Postgres text
// cannot hold it), at most 255 characters, non-empty unless allowEmpty.
func checkID(name, s string, allowEmpty bool) error {
	if s == "" && !allowEmpty {
		return fmt.Errorf("%w: %s is empty", ErrInvalidInput, name)
	}
	if utf8.RuneCountInString(s) > maxIDLength {
		return fmt.Errorf("%w: %s is %d characters; at most %d", ErrInvalidInput, name, utf8.RuneCountInString(s), maxIDLength)
	}
	return checkText(name, s)
}

func checkText(name, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidInput, name)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %s contains a NUL character", ErrInvalidInput, name)
	}
	return nil
}

func checkTexts(name string, ss []string) ([]string, error) {
	for _, s := range ss {
		if err := checkText(name, s); err != nil {
			return nil, err
		}
	}
	if ss == nil {
		return []string{}, nil // nil would be SQL NULL
	}
	return ss, nil
}

func pageSize(limit int) (int, error) {
	switch {
	case limit == 0:
		return defaultListLimit, nil
	case limit < 0 || limit > MaxListLimit:
		return 0, fmt.Errorf("%w: limit %d; use 1 to %d (0 means %d)", ErrInvalidInput, limit, MaxListLimit, defaultListLimit)
	}
	return limit, nil
}
