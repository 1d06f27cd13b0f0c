package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
)

// ExportFormat is the version of the export format, in its header line.
const ExportFormat = 1

// An export is JSON lines: a header, then one line per thread row (one per
// namespace), then one per checkpoint in write order, each with its pending
// writes. Everything a reader sees is kept, so an import puts back exactly
// what was exported: ids, parents, steps, seqs, times, content (NUL
// characters included). How content was stored is not: an export holds each
// checkpoint's whole content, and an import stores each one whole (format
// 'full', without digests, so the next write after it is whole too).

// ExportHeader is the first line of an export.
type ExportHeader struct {
	Kind     string `json:"kind"` // "pgcheckpoint-export"
	Format   int    `json:"format"`
	ThreadID string `json:"thread_id"`
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

// ExportCheckpoint is a checkpoint of an export, with its pending writes.
type ExportCheckpoint struct {
	Kind          string               `json:"kind"` // "checkpoint"
	ThreadID      string               `json:"thread_id"`
	Namespace     string               `json:"namespace"`
	Seq           int64                `json:"seq"`
	ID            uuid.UUID            `json:"id"`
	ParentID      *uuid.UUID           `json:"parent_id,omitempty"`
	MergeParentID *uuid.UUID           `json:"merge_parent_id,omitempty"`
	Step          int64                `json:"step"`
	CreatedAt     time.Time            `json:"created_at"`
	Trigger       Trigger              `json:"trigger"`
	Tags          []string             `json:"tags"`
	Summary       string               `json:"summary"`
	Metadata      json.RawMessage      `json:"metadata"`
	Messages      json.RawMessage      `json:"messages"`
	State         json.RawMessage      `json:"state"`
	ToolResults   json.RawMessage      `json:"tool_results"`
	NextNode      string               `json:"next_node"`
	SizeBytes     int64                `json:"size_bytes"`
	PendingWrites []ExportPendingWrite `json:"pending_writes"`
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
	Threads       int64 // thread rows (one per namespace)
	Checkpoints   int64
	PendingWrites int64
}

// Export writes thread threadID (every namespace; not its branches, which
// are threads of their own) to w as JSON lines, read in one consistent
// snapshot of the database. Errors: ErrNotFound for an unknown thread;
// ErrInvalidInput for a malformed thread id; w's write errors.
func (e *Engine) Export(ctx context.Context, threadID string, w io.Writer) (_ ExportStats, err error) {
	ctx, done := e.tel.call(ctx, "Export", attrThread.String(threadID))
	defer func() { done(err) }()
	var st ExportStats
	if err := checkID("thread id", threadID, false); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	err = e.store.Export(ctx, threadID, ExportSink{
		Thread: func(t ExportThread) error {
			if st.Threads == 0 {
				if err := enc.Encode(ExportHeader{Kind: "pgcheckpoint-export", Format: ExportFormat, ThreadID: threadID}); err != nil {
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
			for i := range c.PendingWrites {
				c.PendingWrites[i].Value = unescapeNUL(c.PendingWrites[i].Value)
				c.PendingWrites[i].CreatedAt = c.PendingWrites[i].CreatedAt.UTC()
			}
			st.Checkpoints++
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

const importBatch = 200

// Import reads the JSON lines of one or more exports from r and writes
// them, in one transaction: all of it is imported, or nothing. Threads must
// not exist yet, and checkpoint ids must not be in use (ids are global).
// Errors: ErrInvalidInput (ErrInvalidJSON) for a line that is not a valid
// export record, naming the line; ErrInvalidInput for a thread that exists
// already; ErrIDConflict for a checkpoint id in use. On error nothing is
// written.
func (e *Engine) Import(ctx context.Context, r io.Reader, opts ImportOptions) (_ ExportStats, err error) {
	ctx, done := e.tel.call(ctx, "Import")
	defer func() { done(err) }()
	var st ExportStats
	err = e.store.Import(ctx, func(w ImportWriter) error {
		dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
		threads := map[string]bool{} // thread ids with a thread line
		links := importLinks{ids: map[uuid.UUID]importedCheckpoint{}, branchedFrom: map[string]uuid.UUID{},
			unresolved: map[uuid.UUID][]importedCheckpoint{}}
		seenHeader := false
		for line := 1; ; line++ {
			var l exportLine
			if err := dec.Decode(&l); err == io.EOF {
				return links.checkUnresolved()
			} else if err != nil {
				return fmt.Errorf("record %d: %w: %v", line, ErrInvalidJSON, err)
			}
			switch l.Kind {
			case "pgcheckpoint-export":
				if l.Format != ExportFormat {
					return fmt.Errorf("record %d: %w: export format %d; this version reads format %d", line, ErrInvalidInput, l.Format, ExportFormat)
				}
				seenHeader = true
			case "thread":
				if !seenHeader {
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
				err := checkImportCheckpoint(&c)
				if err == nil {
					err = e.checkImportParent(ctx, links, c)
				}
				if err == nil {
					err = nameRefusedJSON(w.Checkpoint(ctx, c), importJSONFields(c)...)
					links.ids[c.ID] = importedCheckpoint{id: c.ID, thread: c.ThreadID, namespace: c.Namespace, step: c.Step}
				}
				if err != nil {
					return fmt.Errorf("record %d: checkpoint %s: %w", line, c.ID, err)
				}
				st.Checkpoints++
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
		return ExportStats{}, fmt.Errorf("import: %w", err)
	}
	if opts.Progress != nil {
		opts.Progress(st)
	}
	return st, nil
}

// importLinks is what an import has seen so far, to check each
// checkpoint's parent: the checkpoints imported, each thread's branch
// source, and the children whose parent was not seen (yet).
type importLinks struct {
	ids          map[uuid.UUID]importedCheckpoint
	branchedFrom map[string]uuid.UUID
	unresolved   map[uuid.UUID][]importedCheckpoint // by parent id
}

type importedCheckpoint struct {
	id                uuid.UUID
	thread, namespace string
	step              int64
}

// checkImportParent checks that a checkpoint's parent is one a write could
// have given it (see parentFits). A parent found neither in the import so
// far nor in the database is remembered: it may come later in the import
// (checked by checkUnresolved at the end), or have been deleted by
// retention, which leaves children pointing at it. Merge parents come from
// other threads by design and are not checked.
func (e *Engine) checkImportParent(ctx context.Context, links importLinks, c ExportCheckpoint) error {
	if c.ParentID == nil {
		return nil
	}
	p := *c.ParentID
	child := importedCheckpoint{id: c.ID, thread: c.ThreadID, namespace: c.Namespace, step: c.Step}
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
				return fmt.Errorf("checkpoint %s: %w", c.id, err)
			}
			// A branch may be imported before the thread it was forked
			// from; within a thread, parents come first.
			if links.branchedFrom[c.thread] != p {
				return fmt.Errorf("checkpoint %s: %w: its parent %s comes after it in the import", c.id, ErrInvalidInput, p)
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

// checkImportCheckpoint validates a checkpoint line and puts its JSON in
// stored form.
func checkImportCheckpoint(c *ExportCheckpoint) error {
	if c.ID.Version() != 7 {
		return fmt.Errorf("%w: id %s is not a UUIDv7", ErrInvalidInput, c.ID)
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
	for i, w := range c.PendingWrites {
		if err := checkID("task id", w.TaskID, false); err != nil {
			return err
		}
		if err := checkID("channel", w.Channel, false); err != nil {
			return err
		}
		if w.Index < 0 {
			return fmt.Errorf("%w: pending write index %d", ErrInvalidInput, w.Index)
		}
		if c.PendingWrites[i].Value, err = jsonArg("pending write value", w.Value, 0); err != nil {
			return err
		}
	}
	return nil
}

// importJSONFields are the JSON fields of a checkpoint line, named as
// checkImportCheckpoint names them.
func importJSONFields(c ExportCheckpoint) []jsonField {
	fields := []jsonField{{"metadata", c.Metadata}, {"messages", c.Messages}, {"state", c.State}, {"tool results", c.ToolResults}}
	for i, w := range c.PendingWrites {
		fields = append(fields, jsonField{fmt.Sprintf("pending write %d value", i), w.Value})
	}
	return fields
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
