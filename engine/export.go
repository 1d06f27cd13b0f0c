package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// ExportFormat is the version of the export format that Export writes, in
// its header line. Import reads it and every earlier version.
const ExportFormat = 2

// An export is JSON lines: a header, then for each thread (the thread, and
// with ExportOptions.Branches every thread forked from it, recursively) its
// rows (one per namespace) and its checkpoints in write order, each with its
// pending writes. Everything a reader sees is kept, so an import puts back
// exactly what was exported: ids, parents, merge parents, steps, seqs,
// times, content (NUL characters included).
//
// Format 2 keeps how content is stored: a checkpoint stored whole
// ("storage": "full") carries its whole content; a delta ("storage":
// "delta") carries its delta as stored (the messages appended to its
// base's, the state and tool result keys set, the keys removed), its base
// (base_id, a checkpoint earlier in the same thread and namespace, before
// it in the file), its run and its depth. An import writes the same rows,
// so a thread takes the same storage after a round trip. Digests, with which
// a store tells an append from an edit, are not in the file: an import
// computes them from the content it stores, so a file cannot make a later
// write store a wrong delta.
//
// Format 1 held every checkpoint whole, without a storage field; an import
// stores such checkpoints whole.

// Storage formats of a checkpoint row (ExportCheckpoint.Storage).
const (
	StorageFull  = "full"
	StorageDelta = "delta"
)

// ExportHeader is the first line of an export.
type ExportHeader struct {
	Kind     string `json:"kind"` // "pgcheckpoint-export"
	Format   int    `json:"format"`
	ThreadID string `json:"thread_id"`
	// Branches: the export holds the threads forked from ThreadID too.
	Branches bool `json:"branches,omitempty"`
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

// ExportCheckpoint is a checkpoint of an export as stored, with its pending
// writes. For a delta (Storage StorageDelta), Messages, State and
// ToolResults hold the delta against BaseID, and the removed keys are JSON
// arrays of keys; for a whole one, the whole content.
type ExportCheckpoint struct {
	Kind          string     `json:"kind"` // "checkpoint"
	ThreadID      string     `json:"thread_id"`
	Namespace     string     `json:"namespace"`
	Seq           int64      `json:"seq"`
	ID            uuid.UUID  `json:"id"`
	ParentID      *uuid.UUID `json:"parent_id,omitempty"`
	MergeParentID *uuid.UUID `json:"merge_parent_id,omitempty"`
	Step          int64      `json:"step"`
	CreatedAt     time.Time  `json:"created_at"`
	Trigger       Trigger    `json:"trigger"`
	Tags          []string   `json:"tags"`
	Summary       string     `json:"summary"`
	// Storage is StorageFull or StorageDelta (absent in format 1: full).
	Storage string `json:"storage,omitempty"`
	// BaseID, DeltaRun and DeltaDepth are a delta's base_checkpoint_id,
	// delta_run and delta_depth (see the checkpoints table).
	BaseID             *uuid.UUID           `json:"base_id,omitempty"`
	DeltaRun           int64                `json:"delta_run,omitempty"`
	DeltaDepth         int64                `json:"delta_depth,omitempty"`
	Metadata           json.RawMessage      `json:"metadata"`
	Messages           json.RawMessage      `json:"messages"`
	State              json.RawMessage      `json:"state"`
	ToolResults        json.RawMessage      `json:"tool_results"`
	StateRemoved       json.RawMessage      `json:"state_removed,omitempty"`
	ToolResultsRemoved json.RawMessage      `json:"tool_results_removed,omitempty"`
	NextNode           string               `json:"next_node"`
	SizeBytes          int64                `json:"size_bytes"`
	PendingWrites      []ExportPendingWrite `json:"pending_writes"`
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
	Threads       int64 // thread rows (one per thread and namespace)
	Checkpoints   int64
	Deltas        int64 // of Checkpoints, those stored as deltas
	PendingWrites int64
}

// ExportOptions tunes Export.
type ExportOptions struct {
	// Branches: export the threads forked from the thread too, and those
	// forked from them, and so on, so that an import gives back the whole
	// tree, branch and merge edges included.
	Branches bool
}

// Export writes thread threadID (every namespace; with opts.Branches, its
// branches too, which are threads of their own) to w as JSON lines, read in
// one consistent snapshot of the database. It streams: it holds a few rows
// in memory at a time, however long the thread. opts is at most one
// ExportOptions (none: the thread alone). Errors: ErrNotFound for an unknown
// thread; ErrInvalidInput for a malformed thread id or more than one opts;
// w's write errors.
func (e *Engine) Export(ctx context.Context, threadID string, w io.Writer, opts ...ExportOptions) (_ ExportStats, err error) {
	ctx, done := e.tel.call(ctx, "Export", attrThread.String(threadID))
	defer func() { done(err) }()
	var st ExportStats
	if err := checkID("thread id", threadID, false); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	var o ExportOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return st, fmt.Errorf("export: %w: %d ExportOptions; give at most one", ErrInvalidInput, len(opts))
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	err = e.store.Export(ctx, threadID, o, ExportSink{
		Thread: func(t ExportThread) error {
			if st.Threads == 0 {
				h := ExportHeader{Kind: "pgcheckpoint-export", Format: ExportFormat, ThreadID: threadID, Branches: o.Branches}
				if err := enc.Encode(h); err != nil {
					return err
				}
			}
			t.Kind = "thread"
			t.Metadata = unescapeNUL(t.Metadata)
			t.CreatedAt = t.CreatedAt.UTC()
			st.Threads++
			return enc.Encode(t)
		},
		Checkpoint: func(c ExportCheckpoint) error {
			c.Kind = "checkpoint"
			c.CreatedAt = c.CreatedAt.UTC()
			c.Metadata = unescapeNUL(c.Metadata)
			c.Messages, c.State, c.ToolResults = unescapeNUL(c.Messages), unescapeNUL(c.State), unescapeNUL(c.ToolResults)
			c.StateRemoved, c.ToolResultsRemoved = removedKeys(c.StateRemoved), removedKeys(c.ToolResultsRemoved)
			if c.Storage != StorageDelta {
				c.BaseID, c.DeltaRun, c.DeltaDepth = nil, 0, 0
			}
			for i := range c.PendingWrites {
				c.PendingWrites[i].Value = unescapeNUL(c.PendingWrites[i].Value)
				c.PendingWrites[i].CreatedAt = c.PendingWrites[i].CreatedAt.UTC()
			}
			st.Checkpoints++
			if c.Storage == StorageDelta {
				st.Deltas++
			}
			st.PendingWrites += int64(len(c.PendingWrites))
			return enc.Encode(c)
		},
	})
	if err != nil {
		return st, fmt.Errorf("export thread %q: %w", threadID, err)
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	return st, nil
}

// removedKeys is a row's removed keys as exported: none (an empty list) is
// left out, whatever the store's spelling of it.
func removedKeys(keys json.RawMessage) json.RawMessage {
	t := trimJSON(keys)
	if len(t) == 0 || string(t) == "[]" {
		return nil
	}
	return unescapeNUL(t)
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
	// Progress, when set, is called after every batch of checkpoints read
	// (a few hundred), with the running totals.
	Progress func(ExportStats)
}

// importBatch is how many checkpoints a store may hold before it writes
// them; importBatchBytes bounds their content.
const (
	importBatch      = 200
	importBatchBytes = 4 << 20
)

// Import reads the JSON lines of one or more exports (of any format up to
// ExportFormat) from r and writes them, in one transaction: all of it is
// imported, or nothing. It streams: it reads line by line and writes in
// batches, holding a few hundred rows and, per checkpoint, the little its
// checks and digests need (id, step, delta depth, a list digest and the keys
// its delta changed). Threads must not exist yet, and
// checkpoint ids must not be in use (ids are global). A delta is written as
// the same delta: its base must be a checkpoint of the same thread and
// namespace, written before it and imported before it. Errors:
// ErrInvalidInput (ErrInvalidJSON) for a line that is not a valid export
// record, naming the line; ErrInvalidInput for a thread that exists
// already, a delta whose base is missing or does not fit; ErrIDConflict for
// a checkpoint id in use. An error about a checkpoint names its record and
// id ("record 7: checkpoint <id>: ..."), also when the store refuses it in
// a batch written later. On error nothing is written.
func (e *Engine) Import(ctx context.Context, r io.Reader, opts ImportOptions) (_ ExportStats, err error) {
	ctx, done := e.tel.call(ctx, "Import")
	defer func() { done(err) }()
	var st ExportStats
	links := importLinks{ids: map[uuid.UUID]importedCheckpoint{}, branchedFrom: map[string]uuid.UUID{},
		unresolved: map[uuid.UUID][]importedCheckpoint{}, keptDigests: map[uuid.UUID]*importedDigests{}}
	err = e.store.Import(ctx, func(w ImportWriter) error {
		dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
		threads := map[string]bool{} // thread ids with a thread line
		format := 0                  // of the last header; 0: none yet
		for line := 1; ; line++ {
			var l exportLine
			if err := dec.Decode(&l); err == io.EOF {
				return links.checkUnresolved()
			} else if err != nil {
				return fmt.Errorf("record %d: %w: %v", line, ErrInvalidJSON, err)
			}
			switch l.Kind {
			case "pgcheckpoint-export":
				if l.Format < 1 || l.Format > ExportFormat {
					return fmt.Errorf("record %d: %w: export format %d; this version reads formats 1 to %d", line, ErrInvalidInput, l.Format, ExportFormat)
				}
				format = l.Format
			case "thread":
				if format == 0 {
					return fmt.Errorf("record %d: %w: no export header before it; is this a pgcheckpoint export?", line, ErrInvalidInput)
				}
				t, err := checkImportThread(l)
				if err == nil {
					err = nameRefusedJSON(w.Thread(ctx, t), jsonField{"thread metadata", t.Metadata})
				}
				if err != nil {
					return fmt.Errorf("record %d: %w", line, err)
				}
				threads[t.ThreadID] = true
				if t.BranchedFrom != nil {
					links.branchedFrom[t.ThreadID] = *t.BranchedFrom
				}
				st.Threads++
			case "checkpoint":
				c := l.ExportCheckpoint
				if !threads[c.ThreadID] {
					return fmt.Errorf("record %d: %w: checkpoint of thread %q comes before that thread's record", line, ErrInvalidInput, c.ThreadID)
				}
				err := checkImportCheckpoint(&c, format)
				if err == nil {
					err = links.checkNew(c)
				}
				if err == nil {
					err = links.checkBase(c)
				}
				if err == nil {
					err = e.checkImportParent(ctx, links, c, line)
				}
				var d ImportDigests
				if err == nil {
					d, err = links.digests(c)
				}
				if err == nil {
					err = w.Checkpoint(ctx, c, d)
				}
				if err != nil {
					return links.recordError(err, line, c.ID)
				}
				links.add(c, line)
				st.Checkpoints++
				if c.Storage == StorageDelta {
					st.Deltas++
				}
				st.PendingWrites += int64(len(c.PendingWrites))
				if opts.Progress != nil && st.Checkpoints%importBatch == 0 {
					opts.Progress(st)
				}
			default:
				return fmt.Errorf("record %d: %w: unknown kind %q", line, ErrInvalidInput, l.Kind)
			}
		}
	})
	if err != nil {
		// The store's last batch, written after the last record.
		var row *importRowError
		if errors.As(err, &row) {
			err = links.recordError(err, 0, uuid.Nil)
		}
		return ExportStats{}, fmt.Errorf("import: %w", err)
	}
	if opts.Progress != nil {
		opts.Progress(st)
	}
	return st, nil
}

// importLinks is what an import has seen so far, to check each
// checkpoint's parent and base: the checkpoints imported, each thread's
// branch source, and the children whose parent was not seen (yet).
type importLinks struct {
	ids          map[uuid.UUID]importedCheckpoint
	branchedFrom map[string]uuid.UUID
	unresolved   map[uuid.UUID][]importedCheckpoint // by parent id
	keptDigests  map[uuid.UUID]*importedDigests
}

// importedCheckpoint is what later lines of an import need of a checkpoint.
type importedCheckpoint struct {
	id                uuid.UUID
	record            int // its record (line) in the import
	thread, namespace string
	seq, step         int64
	depth             int64 // 0: stored whole
}

func (links importLinks) add(c ExportCheckpoint, record int) {
	links.ids[c.ID] = importedCheckpoint{id: c.ID, record: record, thread: c.ThreadID, namespace: c.Namespace,
		seq: c.Seq, step: c.Step, depth: c.DeltaDepth}
}

// importRowError is a store's error about one checkpoint of an import,
// found when it wrote a batch of them: not necessarily the checkpoint of
// the ImportWriter.Checkpoint call (or Store.Import) that returns it.
type importRowError struct {
	id  uuid.UUID
	err error
}

func (e *importRowError) Error() string { return fmt.Sprintf("checkpoint %s: %v", e.id, e.err) }
func (e *importRowError) Unwrap() error { return e.err }

// recordError names what an import error is about, once: the record
// (line) and id of the checkpoint the store refused (importRowError),
// else those of the checkpoint id of record line, which the check or the
// write of that record refused.
func (links importLinks) recordError(err error, line int, id uuid.UUID) error {
	var row *importRowError
	if errors.As(err, &row) && row.id != id {
		refused, ok := links.ids[row.id]
		if !ok {
			return err // not one of the import's records: the error names its id
		}
		line, id, err = refused.record, row.id, row.err
	} else if row != nil {
		err = row.err
	}
	return fmt.Errorf("record %d: checkpoint %s: %w", line, id, err)
}

// checkNew refuses a checkpoint that the import holds twice.
func (links importLinks) checkNew(c ExportCheckpoint) error {
	if first, ok := links.ids[c.ID]; ok {
		return fmt.Errorf("%w: it appears twice in the import (first in record %d)", ErrInvalidInput, first.record)
	}
	return nil
}

// checkBase is the rule for a delta's base, which is what keeps a delta
// readable and retention right after an import: the base is a checkpoint
// imported before the delta (so it is in this import: the thread is new),
// of the same thread and namespace, written before it (a lower seq: the
// stores' retention looks for the deltas on a checkpoint among later
// rows), and the delta's depth bounds its chain (at least the base's plus
// one; after a rebase by retention it may be more). Run and depth beyond
// that are the writer's plan for later writes, not checked.
func (links importLinks) checkBase(c ExportCheckpoint) error {
	if c.Storage != StorageDelta {
		return nil
	}
	base, ok := links.ids[*c.BaseID]
	switch {
	case !ok:
		return fmt.Errorf("%w: its base %s is not a checkpoint imported before it", ErrInvalidInput, *c.BaseID)
	case base.thread != c.ThreadID || base.namespace != c.Namespace:
		return fmt.Errorf("%w: its base %s belongs to thread %q namespace %q, not to this checkpoint's thread %q namespace %q",
			ErrInvalidInput, base.id, base.thread, base.namespace, c.ThreadID, c.Namespace)
	case base.seq >= c.Seq:
		return fmt.Errorf("%w: its base %s (seq %d) was not written before it (seq %d)", ErrInvalidInput, base.id, base.seq, c.Seq)
	case c.DeltaDepth <= base.depth:
		return fmt.Errorf("%w: delta depth %d; its base %s has depth %d", ErrInvalidInput, c.DeltaDepth, base.id, base.depth)
	}
	return nil
}

// checkImportParent checks that a checkpoint's parent is one a write could
// have given it (see parentFits). A parent found neither in the import so
// far nor in the database is remembered: it may come later in the import
// (checked by checkUnresolved at the end), or have been deleted by
// retention, which leaves children pointing at it. Merge parents come from
// other threads by design and are not checked.
func (e *Engine) checkImportParent(ctx context.Context, links importLinks, c ExportCheckpoint, record int) error {
	if c.ParentID == nil {
		return nil
	}
	p := *c.ParentID
	child := importedCheckpoint{id: c.ID, record: record, thread: c.ThreadID, namespace: c.Namespace, seq: c.Seq, step: c.Step}
	if parent, ok := links.ids[p]; ok {
		return links.parentFits(child, p, parent)
	}
	found, err := e.store.Lineage(ctx, p, 1)
	if err != nil {
		return fmt.Errorf("look up parent %s: %w", p, err)
	}
	if len(found) == 0 {
		links.unresolved[p] = append(links.unresolved[p], child)
		return nil
	}
	return links.parentFits(child, p, importedCheckpoint{id: p, thread: found[0].ThreadID, namespace: found[0].Namespace, step: found[0].Step})
}

// ImportDigests are the digests an import stores with a checkpoint (see
// PutRequest), so that the next write after it may be a delta, as it may
// after the same checkpoint in the exporting database. They are not read
// from the file (a digest that does not match the content would make a
// later write a wrong delta): the import computes them from the content it
// stores, as a write computes them, a delta's from its base's and its own.
type ImportDigests struct {
	MessagesCount      int64
	MessagesDigest     []byte // the list digest, jsontext.ListDigest of the message chain
	StateDigests       json.RawMessage
	ToolResultsDigests json.RawMessage
}

// importedDigests is what an import keeps of a checkpoint's digests for
// the deltas on it, about as much as its row holds: its list digest (so a
// delta's list digest goes on from its base's), its message count, and its key digests as its row stores keys
// (all of them for a checkpoint stored whole; for a delta, the keys it sets
// and removes, on its base's).
type importedDigests struct {
	listDigest   []byte // jsontext.ListDigest of its whole message chain
	count        int64
	base         uuid.UUID // uuid.Nil: stored whole
	state, tools keyDigestDelta
}

type keyDigestDelta struct {
	set     json.RawMessage // jsontext.KeyDigests of the row's object
	removed []string
}

// digests computes the digests of a checked checkpoint line, whose base (if
// it is a delta) was imported before it, and keeps what later deltas need.
func (links importLinks) digests(c ExportCheckpoint) (ImportDigests, error) {
	msgs := jsontext.MessageDigests(c.Messages)
	rec := &importedDigests{count: int64(len(msgs) / jsontext.DigestSize), listDigest: jsontext.ListDigestAt(nil, 0)}
	if c.Storage == StorageDelta {
		base := links.keptDigests[*c.BaseID]
		rec.listDigest = base.listDigest
		rec.count += base.count
		rec.base = *c.BaseID
	}
	if chain := jsontext.MessageChain(rec.listDigest, msgs); len(chain) > 0 {
		rec.listDigest = jsontext.ListDigest(chain)
	}
	d := ImportDigests{MessagesCount: rec.count, MessagesDigest: rec.listDigest}
	var err error
	for _, part := range []struct {
		name    string
		obj     json.RawMessage
		removed json.RawMessage
		delta   *keyDigestDelta
		out     *json.RawMessage
	}{
		{"state", c.State, c.StateRemoved, &rec.state, &d.StateDigests},
		{"tool results", c.ToolResults, c.ToolResultsRemoved, &rec.tools, &d.ToolResultsDigests},
	} {
		if part.delta.set, err = jsontext.KeyDigests(part.obj); err != nil {
			return ImportDigests{}, fmt.Errorf("%w: %s: %v", ErrInvalidJSON, part.name, err)
		}
		if err := json.Unmarshal(part.removed, &part.delta.removed); err != nil {
			return ImportDigests{}, fmt.Errorf("%w: %s removed: %v", ErrInvalidJSON, part.name, err)
		}
	}
	links.keptDigests[c.ID] = rec
	if rec.base == uuid.Nil {
		d.StateDigests, d.ToolResultsDigests = rec.state.set, rec.tools.set
		return d, nil
	}
	if d.StateDigests, err = links.wholeKeyDigests(rec, func(r *importedDigests) keyDigestDelta { return r.state }); err != nil {
		return ImportDigests{}, err
	}
	if d.ToolResultsDigests, err = links.wholeKeyDigests(rec, func(r *importedDigests) keyDigestDelta { return r.tools }); err != nil {
		return ImportDigests{}, err
	}
	return d, nil
}

// wholeKeyDigests rebuilds a delta's key digests from its chain, as
// materializing rebuilds its object: the whole checkpoint's keys, then each
// delta's, oldest first, without its removed keys and with its set ones.
func (links importLinks) wholeKeyDigests(rec *importedDigests, part func(*importedDigests) keyDigestDelta) (json.RawMessage, error) {
	var chain []keyDigestDelta
	for r := rec; ; r = links.keptDigests[r.base] {
		chain = append(chain, part(r))
		if r.base == uuid.Nil {
			break
		}
	}
	keys := map[string]string{}
	for i := len(chain) - 1; i >= 0; i-- {
		for _, k := range chain[i].removed {
			delete(keys, k)
		}
		if err := json.Unmarshal(chain[i].set, &keys); err != nil {
			return nil, err
		}
	}
	return json.Marshal(keys)
}

// checkUnresolved checks, at the end of an import, the children whose
// parent came after them.
func (links importLinks) checkUnresolved() error {
	for p, children := range links.unresolved {
		parent, ok := links.ids[p]
		if !ok {
			continue // deleted before the export
		}
		for _, c := range children {
			if err := links.parentFits(c, p, parent); err != nil {
				return fmt.Errorf("record %d: checkpoint %s: %w", c.record, c.id, err)
			}
			// A branch may be imported before the thread it was forked
			// from; within a thread, parents come first.
			if links.branchedFrom[c.thread] != p {
				return fmt.Errorf("record %d: checkpoint %s: %w: its parent %s comes after it in the import (in record %d)",
					c.record, c.id, ErrInvalidInput, p, parent.record)
			}
		}
	}
	return nil
}

// parentFits is the rule: the parent is a checkpoint of the same thread and
// namespace (or, for a branch, the checkpoint it was forked from), one step
// before the child.
func (links importLinks) parentFits(c importedCheckpoint, p uuid.UUID, parent importedCheckpoint) error {
	fromBranch := links.branchedFrom[c.thread] == p
	if !fromBranch && (parent.thread != c.thread || parent.namespace != c.namespace) {
		return fmt.Errorf("%w: parent %s belongs to thread %q namespace %q, not to this checkpoint's thread %q namespace %q",
			ErrInvalidInput, p, parent.thread, parent.namespace, c.thread, c.namespace)
	}
	if c.step != parent.step+1 {
		return fmt.Errorf("%w: step %d does not follow its parent %s at step %d", ErrInvalidInput, c.step, p, parent.step)
	}
	return nil
}

// checkImportThread validates a thread line and returns its row, JSON in
// stored form.
func checkImportThread(l exportLine) (ExportThread, error) {
	if err := checkID("thread id", l.ThreadID, false); err != nil {
		return ExportThread{}, err
	}
	if err := checkID("namespace", l.Namespace, true); err != nil {
		return ExportThread{}, err
	}
	meta, err := jsonArg("thread metadata", l.Metadata, '{')
	if err != nil {
		return ExportThread{}, err
	}
	if l.BranchName != nil {
		if err := checkID("branch name", *l.BranchName, false); err != nil {
			return ExportThread{}, err
		}
	}
	if l.BranchedFromThread != nil {
		if err := checkID("branched-from thread", *l.BranchedFromThread, false); err != nil {
			return ExportThread{}, err
		}
	}
	if l.CreatedAt.IsZero() {
		return ExportThread{}, fmt.Errorf("%w: thread %q has no created_at", ErrInvalidInput, l.ThreadID)
	}
	return ExportThread{
		Kind: "thread", ThreadID: l.ThreadID, Namespace: l.Namespace, RewoundTo: l.RewoundTo, Metadata: meta,
		CreatedAt: l.CreatedAt, BranchName: l.BranchName, BranchedFrom: l.BranchedFrom, BranchedFromThread: l.BranchedFromThread,
	}, nil
}

// checkImportCheckpoint validates a checkpoint line of an export of the
// given format, on its own, and puts it in stored form: JSON NUL-escaped,
// Storage set, removed keys a JSON array of strings ("[]" for none). A delta
// is held to every rule a whole one is, and to its own: a base, a depth of
// at least 1, content that is a delta's (appended messages, set keys).
func checkImportCheckpoint(c *ExportCheckpoint, format int) error {
	if !isUUIDv7(c.ID) {
		return fmt.Errorf("%w: its id is not a UUIDv7 (version %d, variant %s)", ErrInvalidInput, c.ID.Version(), c.ID.Variant())
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
	if err := checkImportStorage(c, format); err != nil {
		return err
	}
	var err error
	if c.Tags, err = checkTexts("tag", c.Tags); err != nil {
		return err
	}
	for name, s := range map[string]string{"summary": c.Summary, "next node": c.NextNode} {
		if err := checkText(name, s); err != nil {
			return err
		}
	}
	if c.Metadata, err = jsonArg("metadata", c.Metadata, '{'); err != nil {
		return err
	}
	if c.Messages, err = jsonArg("messages", c.Messages, '['); err != nil {
		return err
	}
	if c.State, err = jsonArg("state", c.State, '{'); err != nil {
		return err
	}
	if c.ToolResults, err = jsonArg("tool results", c.ToolResults, '{'); err != nil {
		return err
	}
	if c.StateRemoved, err = removedArg("state removed", c.StateRemoved); err != nil {
		return err
	}
	if c.ToolResultsRemoved, err = removedArg("tool results removed", c.ToolResultsRemoved); err != nil {
		return err
	}
	for i, w := range c.PendingWrites {
		if err := checkID("task id", w.TaskID, false); err != nil {
			return err
		}
		if err := checkID("channel", w.Channel, false); err != nil {
			return err
		}
		if w.Index < 0 || w.Index > math.MaxInt32 {
			return fmt.Errorf("%w: pending write index %d", ErrInvalidInput, w.Index)
		}
		if c.PendingWrites[i].Value, err = jsonArg("pending write value", w.Value, 0); err != nil {
			return err
		}
	}
	return nil
}

// checkImportStorage checks how a checkpoint line says it is stored.
func checkImportStorage(c *ExportCheckpoint, format int) error {
	if format == 1 {
		// Format 1 held every checkpoint whole, and had no such fields.
		if c.Storage != "" || c.BaseID != nil || c.DeltaRun != 0 || c.DeltaDepth != 0 || c.StateRemoved != nil || c.ToolResultsRemoved != nil {
			return fmt.Errorf("%w: a format 1 export stores every checkpoint whole; this line has delta fields", ErrInvalidInput)
		}
		c.Storage = StorageFull
		return nil
	}
	switch c.Storage {
	case StorageFull:
		if c.BaseID != nil || c.DeltaRun != 0 || c.DeltaDepth != 0 || len(removedKeys(c.StateRemoved)) > 0 || len(removedKeys(c.ToolResultsRemoved)) > 0 {
			return fmt.Errorf("%w: a checkpoint stored whole has no base, run, depth or removed keys", ErrInvalidInput)
		}
	case StorageDelta:
		if c.BaseID == nil {
			return fmt.Errorf("%w: a delta without a base", ErrInvalidInput)
		}
		if *c.BaseID == c.ID {
			return fmt.Errorf("%w: a delta on itself", ErrInvalidInput)
		}
		if c.DeltaDepth < 1 || c.DeltaRun < 0 || c.DeltaDepth > math.MaxInt32 || c.DeltaRun > math.MaxInt32 {
			return fmt.Errorf("%w: a delta with depth %d, run %d; depth starts at 1, run at 0 (both below 2^31)", ErrInvalidInput, c.DeltaDepth, c.DeltaRun)
		}
	default:
		return fmt.Errorf("%w: storage %q; want %q or %q", ErrInvalidInput, c.Storage, StorageFull, StorageDelta)
	}
	return nil
}

// removedArg checks removed keys (a JSON array of strings; absent: none)
// and returns them in stored form.
func removedArg(name string, v json.RawMessage) (json.RawMessage, error) {
	v, err := jsonArg(name, v, '[')
	if err != nil {
		return nil, err
	}
	var keys []string
	if err := json.Unmarshal(v, &keys); err != nil {
		return nil, fmt.Errorf("%w: %s must be an array of strings", ErrInvalidJSON, name)
	}
	return v, nil
}

func optID(id *uuid.UUID) uuid.NullUUID {
	if id == nil {
		return uuid.NullUUID{}
	}
	return uuid.NullUUID{UUID: *id, Valid: true}
}

func nullID(n uuid.NullUUID) *uuid.UUID {
	if !n.Valid {
		return nil
	}
	return &n.UUID
}
