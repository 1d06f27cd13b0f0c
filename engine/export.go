package engine

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// ExportFormat is the version of the export format that Export writes, in
// its header line. Import reads this version only.
const ExportFormat = 3

// An export is JSON lines, each ended by a line feed: a header, then for
// each thread (the thread, and with ExportOptions.Branches every thread
// forked from it, recursively) its rows (one per namespace) and its
// checkpoints in write order, each with its pending writes, then a trailer
// (ExportTrailer) that counts what the export holds and gives the SHA-256
// of its bytes. Everything a reader sees is kept, so an import puts back
// exactly what was exported: ids, parents, merge parents, steps, seqs,
// times, content (NUL characters included).
//
// A checkpoint keeps how its content is stored: one stored whole
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
// An export's rows carry no tenant. Import writes every row into the
// tenant of the Engine it is called on (see Engine.ForTenant), and never
// into another: an export made by tenant A imports into tenant B as B's
// rows, with the same thread and checkpoint ids, apart from A's; but an
// encrypted thread's data key, whose wrapping names its tenant, names it
// in the file too (ExportDataKey.Tenant), and imports into that tenant
// alone.
// An encrypted thread (see Encryption) is exported as stored: its content
// as ciphertexts, never decrypted, and after the checkpoints of the
// export's threads, one "data_key" line (ExportDataKey) per thread that has
// a data key: the key wrapped by its key-encryption key, or the time it
// was shredded. Only a holder of the key-encryption key reads such an
// export; an export made after ShredThread holds no key for the thread. A
// file without data_key lines reads as format 3 always did.
//
// History: format 1 held every checkpoint whole; format 2 added the
// storage fields; format 3 added the trailer. Formats 1 and 2 came from
// development versions, before any release, and had no trailer, so a file
// cut short read as a shorter thread: Import refuses them (export the
// threads again).

// Storage formats of a checkpoint row (ExportCheckpoint.Storage).
const (
	StorageFull  = "full"
	StorageDelta = "delta"
)

// The kinds of export lines (the "kind" field).
const (
	kindHeader     = "pgcheckpoint-export"
	kindThread     = "thread"
	kindCheckpoint = "checkpoint"
	kindTrailer    = "trailer"
	kindDataKey    = "data_key"
)

// MaxImportSeq is the largest seq or step an import takes: 2^53 - 1. A
// write gives the next checkpoint seq + 1 and step + 1, so a file could
// otherwise leave a thread whose next write overflows; and up to this value
// every JSON reader (JavaScript's too) reads the number exactly. No thread
// reaches it by writing.
const MaxImportSeq = 1<<53 - 1

// ExportHeader is the first line of an export.
type ExportHeader struct {
	Kind     string `json:"kind"` // "pgcheckpoint-export"
	Format   int    `json:"format"`
	ThreadID string `json:"thread_id"`
	// Branches: the export holds the threads forked from ThreadID too.
	Branches bool `json:"branches,omitempty"`
}

// ExportTrailer is the last line of an export: by it an import tells a
// whole export from one cut short (at a line end or inside a line) or
// changed after it was written.
type ExportTrailer struct {
	Kind   string      `json:"kind"` // "trailer"
	Counts ExportStats `json:"counts"`
	// SHA256 is the SHA-256, in lower-case hex, of the export's bytes from
	// the first byte of its header line to the line feed that ends the
	// line before the trailer.
	SHA256 string `json:"sha256"`
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
	// Storage is StorageFull or StorageDelta.
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
	Threads       int64 `json:"threads"` // thread rows (one per thread and namespace)
	Checkpoints   int64 `json:"checkpoints"`
	Deltas        int64 `json:"deltas"` // of Checkpoints, those stored as deltas
	PendingWrites int64 `json:"pending_writes"`
	DataKeys      int64 `json:"data_keys,omitempty"` // data_key lines: encrypted threads
}

// ExportDataKey is the data key of an encrypted thread in an export:
// wrapped by the key-encryption key KEKID of the application's
// KeyProvider, bound to the tenant and the thread; or, for a thread shredded
// before the export, no key and the time of the shredding.
type ExportDataKey struct {
	Kind     string `json:"kind"` // "data_key"
	ThreadID string `json:"thread_id"`
	// Tenant is the tenant the wrapping is bound to: the key opens there
	// alone, so an import into another tenant is refused. (Absent in
	// files of earlier versions: not checked.)
	Tenant     string     `json:"tenant,omitempty"`
	KEKID      string     `json:"kek_id,omitempty"`
	WrappedKey []byte     `json:"wrapped_key,omitempty"` // standard base64 in the file
	ShreddedAt *time.Time `json:"shredded_at,omitempty"`
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
// one consistent snapshot of the database, and ends them with the trailer.
// It streams: it holds a few rows in memory at a time, however long the
// thread. opts is at most one ExportOptions (none: the thread alone).
// Errors: ErrNotFound for an unknown thread; ErrInvalidInput for a
// malformed thread id or more than one opts; w's write errors. After an
// error, what was written to w has no trailer, and no import takes it.
func (e *Engine) Export(ctx context.Context, threadID string, w io.Writer, opts ...ExportOptions) (st ExportStats, err error) {
	ctx, done := e.tel.call(ctx, "Export", attrThread.String(threadID))
	returned := false // w is the caller's
	defer endUnlessReturned(done, &err, &returned)
	st, err = e.export(ctx, threadID, w, opts...)
	returned = true
	return st, err
}

// export is Export, its span apart.
func (e *Engine) export(ctx context.Context, threadID string, w io.Writer, opts ...ExportOptions) (_ ExportStats, err error) {
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
	sum := sha256.New()
	enc := json.NewEncoder(io.MultiWriter(bw, sum))
	enc.SetEscapeHTML(false)
	var threads []string // in export order, each once
	var sources []string // the threads branches were forked from
	err = e.store.Export(ctx, threadID, o, ExportSink{
		Thread: func(t ExportThread) error {
			if len(threads) == 0 || threads[len(threads)-1] != t.ThreadID {
				threads = append(threads, t.ThreadID)
			}
			if t.BranchedFromThread != nil && !slices.Contains(sources, *t.BranchedFromThread) {
				sources = append(sources, *t.BranchedFromThread)
			}
			if st.Threads == 0 {
				h := ExportHeader{Kind: kindHeader, Format: ExportFormat, ThreadID: threadID, Branches: o.Branches}
				if err := enc.Encode(h); err != nil {
					return err
				}
			}
			t.Kind = kindThread
			t.Metadata = unescapeNUL(t.Metadata)
			t.CreatedAt = t.CreatedAt.UTC()
			st.Threads++
			return enc.Encode(t)
		},
		Checkpoint: func(c ExportCheckpoint) error {
			c.Kind = kindCheckpoint
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
	if err == nil {
		// The keys of the sources the export does not hold too: a
		// branch's first checkpoint holds its source's values, sealed
		// under the source's key.
		for _, src := range sources {
			if !slices.Contains(threads, src) {
				threads = append(threads, src)
			}
		}
		err = e.exportDataKeys(ctx, enc, threads, &st)
	}
	if err != nil {
		return st, fmt.Errorf("export thread %q: %w", threadID, err)
	}
	trailer := ExportTrailer{Kind: kindTrailer, Counts: st, SHA256: hex.EncodeToString(sum.Sum(nil))}
	if err := json.NewEncoder(bw).Encode(trailer); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	return st, nil
}

// exportDataKeys writes the data_key lines of the encrypted threads among
// threads.
func (e *Engine) exportDataKeys(ctx context.Context, enc *json.Encoder, threads []string, st *ExportStats) error {
	for _, thread := range threads {
		k, err := e.store.DataKey(ctx, thread)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		line := ExportDataKey{Kind: kindDataKey, ThreadID: thread, Tenant: e.Tenant(), KEKID: k.KEKID, WrappedKey: k.Wrapped}
		if !k.ShreddedAt.IsZero() {
			at := k.ShreddedAt.UTC()
			line.ShreddedAt, line.KEKID, line.WrappedKey = &at, "", nil
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
		st.DataKeys++
	}
	return nil
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
	// A data key's (ExportDataKey).
	Tenant     string     `json:"tenant"`
	KEKID      string     `json:"kek_id"`
	WrappedKey []byte     `json:"wrapped_key"`
	ShreddedAt *time.Time `json:"shredded_at"`
	// A trailer's.
	Counts *ExportStats `json:"counts"`
	SHA256 string       `json:"sha256"`
}

// ImportOptions tunes Import.
type ImportOptions struct {
	// Progress, when set, is called after every batch of checkpoints read
	// (a few hundred), with the running totals. It runs inside the import's
	// transaction: it must not write through, or close, the store.
	Progress func(ExportStats)
}

// ImportBatch is how many checkpoints an ImportWriter may hold before it
// writes them; ImportBatchBytes bounds their content. An import's memory
// is about one batch.
const (
	ImportBatch      = 200
	ImportBatchBytes = 4 << 20
)

// importLineBytes is the longest line (its line feed included) an import
// reads under Config.MaxSnapshotBytes limit: 4 times the limit, plus 64
// KiB; no bound when the limit is off. A checkpoint's line holds what the
// write of its row sent, which the limit caps, and its pending writes, each
// value under the limit too: the bound leaves room for the row and three
// times as much of pending writes, and 64 KiB for the ids, times and keys
// around them.
func importLineBytes(limit int64) int64 {
	const around = 64 << 10
	if limit <= 0 || limit > (math.MaxInt64-around)/4 {
		return -1
	}
	return 4*limit + around
}

// Import reads the JSON lines of one or more exports of format
// ExportFormat from r and writes them, in one transaction: all of it is
// imported, or nothing. It streams: it reads a line at a time, at most
// 4 * Config.MaxSnapshotBytes + 64 KiB of one line (none with the limit
// off), and writes in batches, holding a few hundred rows and, per
// checkpoint, the little its checks and digests need (its id and links,
// step, delta depth, a list digest and the keys its delta changed).
//
// It takes only what writes could have made: each export whole, as its
// trailer counts and digests it; threads that do not exist yet, one row per
// namespace, made before their checkpoints; checkpoint ids not in use (ids
// are global); per thread and namespace, seqs rising in file order, from 1
// to MaxImportSeq, and one first checkpoint (no parent, at step 1; for a
// branch, the checkpoint it was forked from, which its thread row names);
// every other parent a checkpoint of the same thread and namespace, written
// before it, one step below; a merge parent the head of another thread in
// the same namespace; no cycle through parents and merge parents; a delta's
// base earlier in the same thread and namespace; a rewind to a checkpoint
// of the row's own thread and namespace; within Config.MaxSnapshotBytes as
// a write is: a checkpoint's whole content (messages, state and tool
// results: size_bytes, as its writer recorded it, or the least the content
// took when sent, escapes at their shortest and each number one byte, a
// delta's rebuilt from its chain, where that is more than size_bytes and
// the 6 bytes of "[]", "{}", "{}" a write does not count; the import then
// records that, so no later Append starts from an understated size; for
// sealed content, the least plaintext it holds, see below) with
// its metadata, summary, next node and tags, each pending write, a thread
// row's metadata; tags, summary and next node within their own bounds
// (see Config.MaxSnapshotBytes). Sealed values (an encrypting Engine's
// content, pending writes and encrypted metadata), whose plaintext only
// the exporter saw, count as the least plaintext that seals to their
// length (sealedPlainBytes: 3/4 of it after 71 bytes a value), and content
// that holds any must be of a thread whose data key line the file
// carries, as an encrypted thread's export does. A thread that has a data key in the
// database (an encrypted thread of that id was deleted; DeleteThreads
// keeps its key) imports only from a file that carries that key. Every
// time (created_at, shredded_at) within years 1 to 9999 in UTC, what an
// export spells; a delta's run below 2^31-1 and its depth at most what a
// read here follows, 2*(Config.DeltaRun-1), its run starting (depth less
// run) at most Config.DeltaRun-1 deep, as writes start runs, so that later
// appends stay within that bound (of the default's DeltaRun at least;
// raise DeltaRun to import deeper chains); a key-encryption key's
// id valid UTF-8 without NUL; a data key's tenant, when the file names it,
// this Engine's.
//
// Errors: ErrIDConflict for a checkpoint id in use; ErrInvalidInput for
// anything else refused (ErrInvalidJSON for a line that is not JSON or
// content that is not valid JSON, ErrSnapshotTooLarge for a line or content
// over the limits, both wrapping it), naming the record (the line, from 1),
// what is wrong and what to do. An error about a checkpoint names its
// record and id ("record 7: checkpoint <id>: ..."), also when the store
// refuses it in a batch written later. On error nothing is written.
func (e *Engine) Import(ctx context.Context, r io.Reader, opts ImportOptions) (st ExportStats, err error) {
	ctx, done := e.tel.call(ctx, "Import")
	returned := false // r and opts.Progress are the caller's
	defer endUnlessReturned(done, &err, &returned)
	st, err = e.importAll(ctx, r, opts)
	returned = true
	return st, err
}

// importAll is Import, its span apart.
func (e *Engine) importAll(ctx context.Context, r io.Reader, opts ImportOptions) (_ ExportStats, err error) {
	im := &importer{e: e, limit: e.cfg.MaxSnapshotBytes, progress: opts.Progress,
		threads: map[string]bool{}, keyed: map[string]bool{}, sources: map[string]bool{}, sealed: map[string]sealedRecord{}, rows: map[threadNamespace]*importedRow{}, branchedFrom: map[string]uuid.UUID{},
		ids: map[uuid.UUID]importedCheckpoint{}, unresolved: map[uuid.UUID][]importedCheckpoint{},
		keptDigests: map[uuid.UUID]*importedDigests{}}
	err = e.store.Import(ctx, func(w ImportWriter) error { return im.read(ctx, w, r) })
	if err != nil {
		// The store's last batch, written after the last record.
		var row *ImportRowError
		if errors.As(err, &row) {
			err = im.recordError(err, 0, uuid.Nil)
		}
		return ExportStats{}, fmt.Errorf("import: %w", err)
	}
	if opts.Progress != nil {
		opts.Progress(im.st)
	}
	return im.st, nil
}

// importer is what an import has read so far, to check each line against
// the ones before it, and at the end against all of them.
type importer struct {
	e        *Engine
	limit    int64 // Config.MaxSnapshotBytes; negative: none
	progress func(ExportStats)
	st       ExportStats

	threads      map[string]bool // thread ids with a row
	keyed        map[string]bool // thread ids with a data key line
	sources      map[string]bool // the threads the import's branches were forked from
	rows         map[threadNamespace]*importedRow
	rowOrder     []*importedRow       // in record order
	branchedFrom map[string]uuid.UUID // a branch thread's source checkpoint
	ids          map[uuid.UUID]importedCheckpoint
	unresolved   map[uuid.UUID][]importedCheckpoint // children by parent id, the parent not seen (yet)
	mergeLater   []importedCheckpoint               // merge parent not seen (yet)
	keptDigests  map[uuid.UUID]*importedDigests
	// Of each thread, its first checkpoint that holds sealed values, whose
	// size the limit takes as the exporter measured it (its plaintext's):
	// the import must carry that thread's data key, as its export does.
	sealed map[string]sealedRecord
}

// sealedRecord names a checkpoint of an import that holds sealed values.
type sealedRecord struct {
	record int
	id     uuid.UUID
	thread string
}

type threadNamespace struct{ thread, namespace string }

// importedRow is what an import keeps of a thread row, and of the
// checkpoints of its thread and namespace read so far.
type importedRow struct {
	record             int
	key                threadNamespace
	rewoundTo          *uuid.UUID
	branchedFrom       *uuid.UUID
	branchedFromThread string
	lastSeq            int64 // of the thread and namespace's last checkpoint so far
	lastRecord         int   // its record; 0: none yet
	firstRecord        int   // the record of its first checkpoint (see checkFirst); 0: none yet
}

// importedCheckpoint is what later lines of an import need of a checkpoint.
type importedCheckpoint struct {
	id                  uuid.UUID
	record              int // its record (line) in the import
	thread, namespace   string
	step                int64
	depth               int64     // 0: stored whole
	parent, mergeParent uuid.UUID // uuid.Nil: none
}

// exportRead is the export an import is reading, from its header to its
// trailer: what the trailer must count and digest.
type exportRead struct {
	record int // of its header
	sum    hash.Hash
	st     ExportStats
}

// lineReader reads an import's input a line at a time, holding at most max
// bytes of a line (max < 0: no bound).
type lineReader struct {
	r    *bufio.Reader
	max  int64
	line []byte
}

var (
	errLineTooLong = errors.New("line too long")
	errNoLineEnd   = errors.New("no line end")
)

// next returns the next line, its line feed included: io.EOF at the end of
// the input, errNoLineEnd (with the line) for a last line without a line
// feed, errLineTooLong once the line is longer than max, read no further.
// The line is valid until the next call.
func (lr *lineReader) next() ([]byte, error) {
	lr.line = lr.line[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if lr.max >= 0 && int64(len(lr.line)+len(chunk)) > lr.max {
			return nil, errLineTooLong
		}
		lr.line = append(lr.line, chunk...)
		switch {
		case err == nil:
			return lr.line, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			if len(lr.line) == 0 {
				return nil, io.EOF
			}
			return lr.line, errNoLineEnd
		default:
			return nil, err
		}
	}
}

// read reads r to its end and writes what it holds with w, or returns the
// first thing wrong.
func (im *importer) read(ctx context.Context, w ImportWriter, r io.Reader) error {
	lines := lineReader{r: bufio.NewReaderSize(r, 64<<10), max: importLineBytes(im.limit)}
	var ex *exportRead    // nil between exports
	record, ended := 0, 0 // ended: the record of the last trailer
	for {
		line, err := lines.next()
		if err == io.EOF {
			break
		}
		record++
		if err != nil {
			return im.lineError(record, err, lines.max)
		}
		var l exportLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("record %d: %w: %v", record, ErrInvalidJSON, err)
		}
		switch {
		case l.Kind == kindHeader:
			if ex != nil {
				return fmt.Errorf("record %d: %w: a header, but the export that begins at record %d has no trailer yet, so it is incomplete (cut short); export it again",
					record, ErrInvalidInput, ex.record)
			}
			if err := checkImportFormat(l.Format); err != nil {
				return fmt.Errorf("record %d: %w", record, err)
			}
			ex = &exportRead{record: record, sum: sha256.New()}
		case ex == nil && ended > 0:
			return fmt.Errorf("record %d: %w: after the trailer of record %d comes a record that is not an export header; an export ends at its trailer",
				record, ErrInvalidInput, ended)
		case ex == nil:
			return fmt.Errorf("record %d: %w: no export header before it; is this a pgcheckpoint export?", record, ErrInvalidInput)
		case l.Kind == kindTrailer:
			if err := ex.check(l); err != nil {
				return fmt.Errorf("record %d: %w", record, err)
			}
			ex, ended = nil, record
			continue
		}
		ex.sum.Write(line)
		switch l.Kind {
		case kindHeader:
		case kindThread:
			if err := im.thread(ctx, w, l, record); err != nil {
				return err
			}
			ex.st.Threads++
			im.st.Threads++
		case kindCheckpoint:
			c, err := im.checkpoint(ctx, w, l, record)
			if err != nil {
				return err
			}
			for _, st := range []*ExportStats{&ex.st, &im.st} {
				st.Checkpoints++
				if c.Storage == StorageDelta {
					st.Deltas++
				}
				st.PendingWrites += int64(len(c.PendingWrites))
			}
			if im.progress != nil && im.st.Checkpoints%ImportBatch == 0 {
				im.progress(im.st)
			}
		case kindDataKey:
			if err := im.dataKey(ctx, w, l); err != nil {
				return fmt.Errorf("record %d: %w", record, err)
			}
			ex.st.DataKeys++
			im.st.DataKeys++
		default:
			return fmt.Errorf("record %d: %w: unknown kind %q", record, ErrInvalidInput, l.Kind)
		}
	}
	if ex != nil {
		return fmt.Errorf("%w: the input ends after record %d, before the trailer of the export that begins at record %d, so it is incomplete (cut short); export it again",
			ErrInvalidInput, record, ex.record)
	}
	if record == 0 {
		return fmt.Errorf("%w: the input is empty; want a pgcheckpoint export", ErrInvalidInput)
	}
	return im.finish(ctx, w)
}

// lineError is the error for a line the lineReader could not give.
func (im *importer) lineError(record int, err error, max int64) error {
	switch {
	case errors.Is(err, errLineTooLong):
		return fmt.Errorf("record %d: %w: the line is longer than %d bytes, the longest an import reads under Config.MaxSnapshotBytes %d (4 times it, plus 64 KiB), and was read no further; raise Config.MaxSnapshotBytes to import it",
			record, ErrSnapshotTooLarge, max, im.limit)
	case errors.Is(err, errNoLineEnd):
		return fmt.Errorf("record %d: %w: the input ends inside this record, with no line end: it is incomplete (cut short); export it again", record, ErrInvalidInput)
	}
	return fmt.Errorf("record %d: read the input: %w", record, err)
}

// checkImportFormat refuses an export format other than ExportFormat.
func checkImportFormat(format int) error {
	switch {
	case format == ExportFormat:
		return nil
	case format == 1 || format == 2:
		return fmt.Errorf("%w: export format %d, from a development version: it has no trailer, so a file cut short cannot be told from a whole one; export the threads again with this version (format %d)",
			ErrInvalidInput, format, ExportFormat)
	}
	return fmt.Errorf("%w: export format %d; this version reads format %d", ErrInvalidInput, format, ExportFormat)
}

// check compares a trailer with the export it ends.
func (ex *exportRead) check(l exportLine) error {
	if l.Counts == nil {
		return fmt.Errorf("%w: the trailer has no counts; export it again", ErrInvalidInput)
	}
	if said := *l.Counts; said != ex.st {
		return fmt.Errorf("%w: the trailer counts %s; the export that begins at record %d holds %s: records are missing or were added; export it again",
			ErrInvalidInput, said.text(), ex.record, ex.st.text())
	}
	if sum := hex.EncodeToString(ex.sum.Sum(nil)); l.SHA256 != sum {
		return fmt.Errorf("%w: the export that begins at record %d has SHA-256 %s, not the one its trailer gives: it was changed or damaged after it was written; export it again (after an edit made on purpose, put this digest in the trailer)",
			ErrInvalidInput, ex.record, sum)
	}
	return nil
}

func (st ExportStats) text() string {
	return fmt.Sprintf("%d thread rows, %d checkpoints (%d deltas), %d pending writes", st.Threads, st.Checkpoints, st.Deltas, st.PendingWrites)
}

// thread checks and writes a thread line.
// dataKey writes the data key of a thread of the import.
func (im *importer) dataKey(ctx context.Context, w ImportWriter, l exportLine) error {
	k := WrappedKey{ThreadID: l.ThreadID, KEKID: l.KEKID, Wrapped: l.WrappedKey}
	im.keyed[l.ThreadID] = true
	if !im.threads[l.ThreadID] {
		if !im.sources[l.ThreadID] {
			return fmt.Errorf("%w: a data key of thread %q, which the import has no row of and no branch of", ErrInvalidInput, l.ThreadID)
		}
		// The key of a branch's source the file does not hold, which the
		// branch's values need: kept as a deleted thread's key is. It may
		// not give a key to a thread of the database that has none; one
		// that has a key keeps it (a source shredded, or met by another
		// branch's import before).
		switch keyed, err := im.sourceKeyFits(ctx, w, l.ThreadID); {
		case err != nil:
			return err
		case keyed:
			return nil
		}
	}
	switch {
	case l.ShreddedAt != nil:
		if l.KEKID != "" || len(l.WrappedKey) > 0 {
			return fmt.Errorf("%w: the data key of thread %q is both shredded and there", ErrInvalidInput, l.ThreadID)
		}
		if err := checkYears("shredded_at", *l.ShreddedAt); err != nil {
			return fmt.Errorf("the data key of thread %q: %w", l.ThreadID, err)
		}
		k.ShreddedAt = l.ShreddedAt.UTC()
	case l.KEKID == "" || len(l.WrappedKey) == 0:
		return fmt.Errorf("%w: the data key of thread %q has no kek_id or wrapped_key", ErrInvalidInput, l.ThreadID)
	case l.Tenant != "" && l.Tenant != im.e.Tenant():
		return fmt.Errorf("%w: the data key of thread %q is bound to tenant %q and opens there alone: import the file into that tenant (Engine.ForTenant, ckpt --tenant)",
			ErrInvalidInput, l.ThreadID, l.Tenant)
	default:
		// A key provider's id of its key-encryption key, of any length
		// (a KMS names keys at length), but text both stores keep: valid
		// UTF-8 without NUL, which Postgres text cannot hold.
		if err := checkText("kek_id", l.KEKID); err != nil {
			return fmt.Errorf("the data key of thread %q: %w", l.ThreadID, err)
		}
	}
	return w.DataKey(ctx, k)
}

// sourceKeyFits refuses the key of a branch's source for a thread the
// database holds without a key: the key would make it an encrypted thread
// whose plaintext its readers then refuse. keyed: the database has a key of
// it, which stands.
func (im *importer) sourceKeyFits(ctx context.Context, w ImportWriter, thread string) (keyed bool, _ error) {
	rows, err := w.HoldThread(ctx, thread)
	if err != nil {
		return false, err
	}
	if keyed, err = w.HasDataKey(ctx, thread); err != nil {
		return false, err
	}
	if len(rows) > 0 && !keyed {
		return false, fmt.Errorf("%w: the file carries a data key of thread %q, a branch's source, which the database holds unencrypted: import it elsewhere", ErrInvalidInput, thread)
	}
	return keyed, nil
}

func (im *importer) thread(ctx context.Context, w ImportWriter, l exportLine, record int) error {
	t, err := checkImportThread(l)
	if err == nil {
		err = checkImportThreadSize(im.limit, t)
	}
	if err == nil {
		err = im.checkRow(t)
	}
	if err == nil {
		err = NameRefusedJSON(w.Thread(ctx, t), JSONField{"thread metadata", t.Metadata})
	}
	if err != nil {
		return fmt.Errorf("record %d: %w", record, err)
	}
	row := &importedRow{record: record, key: threadNamespace{t.ThreadID, t.Namespace}, rewoundTo: t.RewoundTo, branchedFrom: t.BranchedFrom}
	if t.BranchedFrom != nil {
		row.branchedFromThread = *t.BranchedFromThread
		im.branchedFrom[t.ThreadID] = *t.BranchedFrom
	}
	im.rows[row.key] = row
	im.rowOrder = append(im.rowOrder, row)
	im.threads[t.ThreadID] = true
	if t.BranchedFromThread != nil {
		im.sources[*t.BranchedFromThread] = true
	}
	return nil
}

// checkRow holds a thread row to what writes make: one row per thread and
// namespace; a branch's source named with its thread, which is another
// one, on one row of the branch.
func (im *importer) checkRow(t ExportThread) error {
	if first, ok := im.rows[threadNamespace{t.ThreadID, t.Namespace}]; ok {
		return fmt.Errorf("%w: thread %q namespace %q has a row already (in record %d); a thread has one row per namespace",
			ErrInvalidInput, t.ThreadID, t.Namespace, first.record)
	}
	if (t.BranchedFrom == nil) != (t.BranchedFromThread == nil) {
		return fmt.Errorf("%w: thread %q: branched_from and branched_from_thread come together (a branch names the checkpoint it was forked from and that checkpoint's thread)",
			ErrInvalidInput, t.ThreadID)
	}
	if t.BranchedFrom == nil {
		return nil
	}
	if *t.BranchedFromThread == t.ThreadID {
		return fmt.Errorf("%w: thread %q is branched from itself; a branch is a new thread forked from another", ErrInvalidInput, t.ThreadID)
	}
	if _, ok := im.branchedFrom[t.ThreadID]; ok {
		return fmt.Errorf("%w: thread %q names a branch source on two rows; a branch names it on the row of the namespace it was forked in",
			ErrInvalidInput, t.ThreadID)
	}
	return nil
}

// checkpoint checks and writes a checkpoint line.
func (im *importer) checkpoint(ctx context.Context, w ImportWriter, l exportLine, record int) (ExportCheckpoint, error) {
	c := l.ExportCheckpoint
	row := im.rows[threadNamespace{c.ThreadID, c.Namespace}]
	switch {
	case !im.threads[c.ThreadID]:
		return c, fmt.Errorf("record %d: %w: checkpoint of thread %q comes before that thread's record", record, ErrInvalidInput, c.ThreadID)
	case row == nil:
		return c, fmt.Errorf("record %d: %w: checkpoint of thread %q in namespace %q, which has no thread row before it; a write makes the row of its thread and namespace",
			record, ErrInvalidInput, c.ThreadID, c.Namespace)
	}
	err := checkImportCheckpoint(&c, im.limit)
	for _, check := range []func() error{
		func() error { return im.checkNew(c) },
		func() error { return im.checkSeq(c, row) },
		func() error { return im.checkFirst(c, row) },
		func() error { return im.checkBase(c) },
		func() error { return im.checkParent(ctx, w, c, record) },
		func() error { return im.checkMergeParent(ctx, w, c, record) },
	} {
		if err == nil {
			err = check()
		}
	}
	var d ImportDigests
	var size importedSize
	if err == nil {
		d, size, err = im.digests(c)
	}
	if _, seen := im.sealed[c.ThreadID]; err == nil && (size.sealed || sealedBeyondContent(&c)) && !seen {
		im.sealed[c.ThreadID] = sealedRecord{record, c.ID, c.ThreadID} // see finish
	}
	if err == nil {
		least := size.bytes
		if size.sealed {
			err = checkSealedContentSize(size, importOwnBytes(&c), im.limit)
			least = sealedPlainBytes(size.bytes, size.values)
		}
		if least > c.SizeBytes+unsentBytes {
			// Understated (a write's size, see unsentBytes, is no less;
			// sealed content's is no less than the least plaintext it
			// holds): what a later Append's limit starts from must not be.
			c.SizeBytes = least
		}
	}
	if err == nil {
		err = checkImportContentSize(&c, im.limit)
	}
	if err == nil {
		err = w.Checkpoint(ctx, c, d)
	}
	if err != nil {
		return c, im.recordError(err, record, c.ID)
	}
	im.ids[c.ID] = im.imported(c, record)
	if row.firstRecord == 0 && im.isFirst(c) {
		row.firstRecord = record
	}
	row.lastSeq, row.lastRecord = c.Seq, record
	return c, nil
}

// imported is what the import keeps of checkpoint c of record record.
func (im *importer) imported(c ExportCheckpoint, record int) importedCheckpoint {
	ic := importedCheckpoint{id: c.ID, record: record, thread: c.ThreadID, namespace: c.Namespace, step: c.Step, depth: c.DeltaDepth}
	if c.ParentID != nil {
		ic.parent = *c.ParentID
	}
	if c.MergeParentID != nil {
		ic.mergeParent = *c.MergeParentID
	}
	return ic
}

// isFromBranch reports whether p is the checkpoint thread was forked from.
func (im *importer) isFromBranch(thread string, p uuid.UUID) bool {
	source, ok := im.branchedFrom[thread]
	return ok && source == p
}

// isFirst reports whether c has no parent in its thread: none, or the
// checkpoint its branch was forked from.
func (im *importer) isFirst(c ExportCheckpoint) bool {
	return c.ParentID == nil || im.isFromBranch(c.ThreadID, *c.ParentID)
}

// ImportRowError is a store's error about one checkpoint of an import,
// found when it wrote a batch of them: not necessarily the checkpoint of
// the ImportWriter.Checkpoint call (or Store.Import) that returns it. The
// Engine names that checkpoint's record in the error it returns.
type ImportRowError struct {
	ID  uuid.UUID // the checkpoint refused
	Err error
}

// Error names the checkpoint and what was wrong.
func (e *ImportRowError) Error() string { return fmt.Sprintf("checkpoint %s: %v", e.ID, e.Err) }

// Unwrap returns Err.
func (e *ImportRowError) Unwrap() error { return e.Err }

// recordError names what an import error is about, once: the record
// (line) and id of the checkpoint the store refused (ImportRowError),
// else those of the checkpoint id of record line, which the check or the
// write of that record refused.
func (im *importer) recordError(err error, line int, id uuid.UUID) error {
	var row *ImportRowError
	if errors.As(err, &row) && row.ID != id {
		refused, ok := im.ids[row.ID]
		if !ok {
			return err // not one of the import's records: the error names its id
		}
		line, id, err = refused.record, row.ID, row.Err
	} else if row != nil {
		err = row.Err
	}
	return fmt.Errorf("record %d: checkpoint %s: %w", line, id, err)
}

// checkNew refuses a checkpoint that the import holds twice.
func (im *importer) checkNew(c ExportCheckpoint) error {
	if first, ok := im.ids[c.ID]; ok {
		return fmt.Errorf("%w: it appears twice in the import (first in record %d)", ErrInvalidInput, first.record)
	}
	return nil
}

// checkSeq is the rule for seqs: a write gives a checkpoint the next seq
// after the newest of its thread and namespace, and an export lists a
// thread and namespace's checkpoints in seq order.
func (im *importer) checkSeq(c ExportCheckpoint, row *importedRow) error {
	if row.lastRecord > 0 && c.Seq <= row.lastSeq {
		return fmt.Errorf("%w: seq %d comes after seq %d (record %d) of thread %q namespace %q; seqs rise in write order, and an export lists checkpoints in that order",
			ErrInvalidInput, c.Seq, row.lastSeq, row.lastRecord, c.ThreadID, c.Namespace)
	}
	return nil
}

// checkFirst is the rule for a thread and namespace's first checkpoint: a
// write makes one without a parent only where there is no checkpoint yet,
// at step 1; a branch's first has the checkpoint it was forked from as
// parent. Either way there is one (retention may have deleted it).
func (im *importer) checkFirst(c ExportCheckpoint, row *importedRow) error {
	if c.ParentID == nil && c.Step != 1 {
		return fmt.Errorf("%w: step %d without a parent; a checkpoint without a parent is its thread's first, at step 1", ErrInvalidInput, c.Step)
	}
	if im.isFirst(c) && row.firstRecord > 0 {
		return fmt.Errorf("%w: a second first checkpoint of thread %q namespace %q (the first is in record %d): only the first write in a thread and namespace has no parent there (a branch's, the checkpoint it was forked from)",
			ErrInvalidInput, c.ThreadID, c.Namespace, row.firstRecord)
	}
	return nil
}

// checkBase is the rule for a delta's base, which is what keeps a delta
// readable and retention right after an import: the base is a checkpoint
// imported before the delta (so it is in this import: the thread is new),
// of the same thread and namespace (so, by checkSeq, written before it: the
// stores' retention looks for the deltas on a checkpoint among later
// rows), and the delta's depth bounds its chain (at least the base's plus
// one; after a rebase by retention it may be more). Run and depth beyond
// that are the writer's plan for later writes, not checked.
func (im *importer) checkBase(c ExportCheckpoint) error {
	if c.Storage != StorageDelta {
		return nil
	}
	base, ok := im.ids[*c.BaseID]
	switch {
	case !ok:
		return fmt.Errorf("%w: its base %s is not a checkpoint imported before it", ErrInvalidInput, *c.BaseID)
	case base.thread != c.ThreadID || base.namespace != c.Namespace:
		return fmt.Errorf("%w: its base %s belongs to thread %q namespace %q, not to this checkpoint's thread %q namespace %q",
			ErrInvalidInput, base.id, base.thread, base.namespace, c.ThreadID, c.Namespace)
	case c.DeltaDepth <= base.depth:
		return fmt.Errorf("%w: delta depth %d; its base %s has depth %d", ErrInvalidInput, c.DeltaDepth, base.id, base.depth)
	case c.DeltaDepth > im.maxDepth():
		// A chain deeper than this engine's writes make would break the
		// bound its reads keep (Config.DeltaRun), and a forged one
		// thousands deep makes every read of it, and this import (each
		// row's whole key digests are rebuilt from its chain), that much
		// slower.
		return fmt.Errorf("%w: delta depth %d; a read follows at most %d links here (2*(Config.DeltaRun-1), from Config.DeltaRun %d or the default's, whichever is more): raise Config.DeltaRun to import it",
			ErrInvalidInput, c.DeltaDepth, im.maxDepth(), im.e.cfg.DeltaRun)
	case c.DeltaDepth-c.DeltaRun > im.maxDepth()/2:
		// Its run's anchor, c.DeltaRun links down, is deeper than a write
		// starts a run: later appends would go on from it past the bound
		// above.
		return fmt.Errorf("%w: delta depth %d at run %d: its run starts %d links deep, where a write here starts one at most %d deep (Config.DeltaRun-1, from Config.DeltaRun %d or the default's, whichever is more): raise Config.DeltaRun to import it",
			ErrInvalidInput, c.DeltaDepth, c.DeltaRun, c.DeltaDepth-c.DeltaRun, im.maxDepth()/2, im.e.cfg.DeltaRun)
	}
	return nil
}

// maxDepth is the deepest delta an import takes: what this engine's
// writes make, 2*(Config.DeltaRun-1), or the default's, so that an engine
// that stores snapshots whole (DeltaRun 1) still imports a file of deltas.
func (im *importer) maxDepth() int64 {
	return 2 * int64(max(im.e.cfg.DeltaRun, DefaultDeltaRun)-1)
}

// checkParent checks that a checkpoint's parent is one a write could have
// given it (see parentFits). A parent found neither in the import so far
// nor in the database is remembered: it may come later in the import
// (checked by checkUnresolved at the end), or have been deleted by
// retention, which leaves children pointing at it.
func (im *importer) checkParent(ctx context.Context, w ImportWriter, c ExportCheckpoint, record int) error {
	if c.ParentID == nil {
		return nil
	}
	p := *c.ParentID
	child := im.imported(c, record)
	if parent, ok := im.ids[p]; ok {
		return im.parentFits(child, p, parent)
	}
	found, ok, err := w.Find(ctx, p)
	if err != nil {
		return fmt.Errorf("look up parent %s: %w", p, err)
	}
	if !ok {
		im.unresolved[p] = append(im.unresolved[p], child)
		return nil
	}
	return im.parentFits(child, p, importedCheckpoint{id: p, thread: found.ThreadID, namespace: found.Namespace, step: found.Step})
}

// checkMergeParent checks a merge parent as a merge makes it: the head of
// another thread (the branch merged in), in the same namespace. One found
// neither in the import so far nor in the database is checked at the end
// if it comes later in the import (else it was deleted before the export).
func (im *importer) checkMergeParent(ctx context.Context, w ImportWriter, c ExportCheckpoint, record int) error {
	if c.MergeParentID == nil {
		return nil
	}
	m := *c.MergeParentID
	if m == c.ID {
		return fmt.Errorf("%w: its merge parent is itself; a merge brings in the head of another thread", ErrInvalidInput)
	}
	child := im.imported(c, record)
	if mp, ok := im.ids[m]; ok {
		return mergeFits(child, mp)
	}
	found, ok, err := w.Find(ctx, m)
	if err != nil {
		return fmt.Errorf("look up merge parent %s: %w", m, err)
	}
	if !ok {
		im.mergeLater = append(im.mergeLater, child)
		return nil
	}
	return mergeFits(child, importedCheckpoint{id: m, thread: found.ThreadID, namespace: found.Namespace})
}

// mergeFits is the rule for a merge parent mp of checkpoint c.
func mergeFits(c, mp importedCheckpoint) error {
	if mp.thread == c.thread {
		return fmt.Errorf("%w: its merge parent %s is a checkpoint of its own thread; a merge brings in the head of another thread", ErrInvalidInput, mp.id)
	}
	if mp.namespace != c.namespace {
		return fmt.Errorf("%w: its merge parent %s is in namespace %q, not in this checkpoint's namespace %q; a merge brings in a branch's head in the namespace it writes",
			ErrInvalidInput, mp.id, mp.namespace, c.namespace)
	}
	return nil
}

// finish checks, at the end of an import, what needed every record: the
// parents and merge parents that came after their children, what thread
// rows name, and that no checkpoint is its own ancestor.
func (im *importer) finish(ctx context.Context, w ImportWriter) error {
	if err := im.checkUnresolved(); err != nil {
		return err
	}
	// Text that only looks sealed, whose plaintext size the import could
	// not check: a forged file could understate it so, and a reader
	// without a key would take it as plaintext. (The earliest such record
	// is named.)
	var unkeyed sealedRecord
	for thread, r := range im.sealed {
		if !im.keyed[thread] && (unkeyed.record == 0 || r.record < unkeyed.record) {
			unkeyed = r
		}
	}
	if r := unkeyed; r.record > 0 {
		return fmt.Errorf("record %d: checkpoint %s: %w: it holds sealed values (an encrypting Engine's), but the import carries no data key of its thread %q, as an export of an encrypted thread does",
			r.record, r.id, ErrInvalidInput, r.thread)
	}
	if err := im.checkKeyedThreads(ctx, w); err != nil {
		return err
	}
	for thread := range im.sources {
		if _, sealed := im.sealed[thread]; im.threads[thread] && im.keyed[thread] && !sealed {
			// The key a branch's export carries of its source, on rows of
			// another thread of that id that hold no sealed value.
			return fmt.Errorf("%w: thread %q holds no sealed value, but the file carries a data key of it (a branch's source): import the branch elsewhere", ErrInvalidInput, thread)
		}
	}
	for _, c := range im.mergeLater {
		if mp, ok := im.ids[c.mergeParent]; ok {
			if err := mergeFits(c, mp); err != nil {
				return fmt.Errorf("record %d: checkpoint %s: %w", c.record, c.id, err)
			}
		}
	}
	for _, row := range im.rowOrder {
		if err := im.checkRowLinks(ctx, w, row); err != nil {
			return fmt.Errorf("record %d: %w", row.record, err)
		}
	}
	return im.checkCycles()
}

// checkKeyedThreads refuses a thread of the import that the file carries
// no data key of and that has one in the store, left by an encrypted
// thread of that id that was deleted (DeleteThreads keeps the key): such a
// thread takes only content sealed by that key, and the file's is not (see
// PutRequest.Sealed). ErrInvalidInput.
// It reads in the import's transaction (w): a read through the Engine's
// store would wait for a second connection, which an import holding the
// only one (SQLite in memory, a pool of one) never gets.
func (im *importer) checkKeyedThreads(ctx context.Context, w ImportWriter) error {
	for thread := range im.threads {
		if im.keyed[thread] {
			continue
		}
		keyed, err := w.HasDataKey(ctx, thread)
		if err != nil {
			return err
		}
		if keyed {
			return fmt.Errorf("%w: thread %q has a data key in the database (an encrypted thread of that id was deleted), and the file carries none: import it under another id", ErrInvalidInput, thread)
		}
	}
	return nil
}

// checkUnresolved checks, at the end of an import, the children whose
// parent came after them.
func (im *importer) checkUnresolved() error {
	for p, children := range im.unresolved {
		parent, ok := im.ids[p]
		if !ok {
			continue // deleted before the export
		}
		for _, c := range children {
			if err := im.parentFits(c, p, parent); err != nil {
				return fmt.Errorf("record %d: checkpoint %s: %w", c.record, c.id, err)
			}
			// A branch may be imported before the thread it was forked
			// from; within a thread, parents come first.
			if !im.isFromBranch(c.thread, p) {
				return fmt.Errorf("record %d: checkpoint %s: %w: its parent %s comes after it in the import (in record %d)",
					c.record, c.id, ErrInvalidInput, p, parent.record)
			}
		}
	}
	return nil
}

// parentFits is the rule: the parent is a checkpoint of the same thread and
// namespace (or, for a branch, the checkpoint it was forked from, in the
// same namespace), one step before the child.
func (im *importer) parentFits(c importedCheckpoint, p uuid.UUID, parent importedCheckpoint) error {
	if parent.namespace != c.namespace || parent.thread != c.thread && !im.isFromBranch(c.thread, p) {
		return fmt.Errorf("%w: parent %s belongs to thread %q namespace %q, not to this checkpoint's thread %q namespace %q",
			ErrInvalidInput, p, parent.thread, parent.namespace, c.thread, c.namespace)
	}
	if c.step != parent.step+1 {
		return fmt.Errorf("%w: step %d does not follow its parent %s at step %d", ErrInvalidInput, c.step, p, parent.step)
	}
	return nil
}

// checkRowLinks checks what a thread row names, once every checkpoint is
// read: the checkpoint it is rewound to is one of its thread and
// namespace's (a rewind names one, and a delete of it ends the rewind); its
// branch source, where the import or the database has it, is in the thread
// the row says and in the row's namespace.
func (im *importer) checkRowLinks(ctx context.Context, w ImportWriter, row *importedRow) error {
	if to := row.rewoundTo; to != nil {
		c, ok := im.ids[*to]
		if !ok {
			return fmt.Errorf("%w: thread %q namespace %q is rewound to %s, which is not a checkpoint of the import; a rewind names a checkpoint of its own thread and namespace",
				ErrInvalidInput, row.key.thread, row.key.namespace, *to)
		}
		if c.thread != row.key.thread || c.namespace != row.key.namespace {
			return fmt.Errorf("%w: thread %q namespace %q is rewound to %s, a checkpoint of thread %q namespace %q; a rewind names a checkpoint of its own thread and namespace (else the thread could not be written again)",
				ErrInvalidInput, row.key.thread, row.key.namespace, *to, c.thread, c.namespace)
		}
	}
	if row.branchedFrom == nil {
		return nil
	}
	source, ok := im.ids[*row.branchedFrom]
	if !ok {
		found, ok, err := w.Find(ctx, *row.branchedFrom)
		if err != nil {
			return fmt.Errorf("look up branch source %s: %w", *row.branchedFrom, err)
		}
		if !ok {
			return nil // deleted with its thread
		}
		source = importedCheckpoint{thread: found.ThreadID, namespace: found.Namespace}
	}
	if source.thread != row.branchedFromThread || source.namespace != row.key.namespace {
		return fmt.Errorf("%w: thread %q namespace %q is branched from %s, a checkpoint of thread %q namespace %q, not of thread %q namespace %q as the row says",
			ErrInvalidInput, row.key.thread, row.key.namespace, *row.branchedFrom, source.thread, source.namespace, row.branchedFromThread, row.key.namespace)
	}
	return nil
}

// checkCycles refuses checkpoints that are their own ancestors, through
// parents and merge parents in the import: a write's parents exist before
// it, so no write makes a cycle. (Steps rule out a cycle of parents alone;
// merges are what can close one.)
func (im *importer) checkCycles() error {
	order := make([]importedCheckpoint, 0, len(im.ids))
	for _, c := range im.ids {
		order = append(order, c)
	}
	slices.SortFunc(order, func(a, b importedCheckpoint) int { return a.record - b.record })
	const (
		unseen = iota
		onPath
		done
	)
	state := make(map[uuid.UUID]uint8, len(im.ids))
	type frame struct {
		c    importedCheckpoint
		edge int // the next of its two links to follow
	}
	for _, start := range order {
		if state[start.id] != unseen {
			continue
		}
		state[start.id] = onPath
		path := []frame{{c: start}}
		for len(path) > 0 {
			f := &path[len(path)-1]
			if f.edge == 2 {
				state[f.c.id] = done
				path = path[:len(path)-1]
				continue
			}
			link, name := f.c.parent, "parent"
			if f.edge == 1 {
				link, name = f.c.mergeParent, "merge parent"
			}
			f.edge++
			next, ok := im.ids[link]
			if !ok {
				continue
			}
			switch state[link] {
			case onPath:
				return fmt.Errorf("record %d: checkpoint %s: %w: its %s %s (record %d) has it as an ancestor: no write makes a cycle of parents and merge parents",
					f.c.record, f.c.id, ErrInvalidInput, name, link, next.record)
			case unseen:
				state[link] = onPath
				path = append(path, frame{c: next})
			}
		}
	}
	return nil
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
// delta's list digest goes on from its base's), its message count and
// bytes, and its key digests and member sizes as its row stores keys (all
// of them for a checkpoint stored whole; for a delta, the keys it sets and
// removes, on its base's).
type importedDigests struct {
	listDigest   []byte // jsontext.ListDigest of its whole message chain
	count        int64
	msgBytes     int64     // the bytes of the whole chain's messages (jsontext.ArraySize)
	base         uuid.UUID // uuid.Nil: stored whole
	size         int64     // the least its own content took when sent (sentBytes): a whole row's whole
	sealed       bool      // it or its chain holds ciphertext (see holdsCiphertext)
	state, tools keyDigestDelta
}

type keyDigestDelta struct {
	set     json.RawMessage // jsontext.KeyDigests of the row's object
	sizes   map[string]int64
	removed []string
}

// digests computes the digests of a checked checkpoint line, whose base (if
// it is a delta) was imported before it, and keeps what later deltas need.
// It returns the least the checkpoint's whole content took when it was
// sent (see sentBytes): for one stored whole, its text; for a delta, its
// chain's, composed as a store rebuilds it (jsontext.Content: the members
// as written, without spaces), and how many values it holds; for content
// that holds ciphertext, the size of the ciphertext, whose plaintext only
// the exporter saw (see checkSealedContentSize).
func (im *importer) digests(c ExportCheckpoint) (ImportDigests, importedSize, error) {
	msgs := jsontext.MessageDigests(c.Messages)
	rec := &importedDigests{count: int64(len(msgs) / jsontext.DigestSize), listDigest: jsontext.ListDigestAt(nil, 0),
		sealed: holdsCiphertext(c.Messages, c.State, c.ToolResults)}
	// Its messages' bytes: the array's, less its brackets and commas (as
	// an export spells it, with no space: a space more counts more).
	messages := sentBytes(jsontext.UnescapeNUL(c.Messages))
	rec.msgBytes = max(messages-jsontext.ArraySize(rec.count, 0), 0)
	rec.size = messages
	if c.Storage == StorageDelta {
		base := im.keptDigests[*c.BaseID]
		rec.listDigest = base.listDigest
		rec.count += base.count
		rec.msgBytes += base.msgBytes
		rec.base = *c.BaseID
		rec.sealed = rec.sealed || base.sealed
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
	}{
		{"state", c.State, c.StateRemoved, &rec.state},
		{"tool results", c.ToolResults, c.ToolResultsRemoved, &rec.tools},
	} {
		if part.delta.set, err = jsontext.KeyDigests(part.obj); err != nil {
			return ImportDigests{}, importedSize{}, fmt.Errorf("%w: %s: %v", ErrInvalidJSON, part.name, err)
		}
		if err := json.Unmarshal(part.removed, &part.delta.removed); err != nil {
			return ImportDigests{}, importedSize{}, fmt.Errorf("%w: %s removed: %v", ErrInvalidJSON, part.name, err)
		}
		// Keyed in stored form, as the removed keys are; sized as sent.
		ms, err := jsontext.SplitObject(part.obj)
		if err != nil {
			return ImportDigests{}, importedSize{}, fmt.Errorf("%w: %s: %v", ErrInvalidJSON, part.name, err)
		}
		part.delta.sizes = make(map[string]int64, len(ms))
		for _, m := range ms { // the last of a key given twice, as a store keeps it
			part.delta.sizes[m.Key] = sentBytes(jsontext.UnescapeNUL(m.Raw)) + 1 + sentBytes(jsontext.UnescapeNUL(m.Val))
		}
		var bytes int64
		for _, b := range part.delta.sizes {
			bytes += b
		}
		rec.size += jsontext.ObjectSize(int64(len(part.delta.sizes)), bytes)
	}
	im.keptDigests[c.ID] = rec
	size := importedSize{bytes: rec.size, sealed: rec.sealed,
		values: rec.count + int64(len(rec.state.sizes)+len(rec.tools.sizes))}
	if rec.base == uuid.Nil {
		d.StateDigests, d.ToolResultsDigests = rec.state.set, rec.tools.set
	} else {
		size.bytes, size.values = jsontext.ArraySize(rec.count, rec.msgBytes), rec.count
		for _, part := range []struct {
			of  func(*importedDigests) keyDigestDelta
			out *json.RawMessage
		}{
			{func(r *importedDigests) keyDigestDelta { return r.state }, &d.StateDigests},
			{func(r *importedDigests) keyDigestDelta { return r.tools }, &d.ToolResultsDigests},
		} {
			var n, bytes int64
			if *part.out, n, bytes, err = im.wholeKeys(rec, part.of); err != nil {
				return ImportDigests{}, importedSize{}, err
			}
			size.bytes += jsontext.ObjectSize(n, bytes)
			size.values += n
		}
	}
	return d, size, nil
}

// importedSize is what an import measures of a checkpoint's whole content.
type importedSize struct {
	bytes  int64 // the least it took when sent (sentBytes), as stored
	values int64 // its messages and its state's and tool results' keys
	sealed bool  // it holds ciphertext (see holdsCiphertext)
}

// sealedValueBytes is the most a sealed value's text (see sealer.seal)
// takes beyond 4/3 of its plaintext's: quotes, prefix, and the base64 of
// origin, nonce, encoding byte and tag, rounded up.
const sealedValueBytes = 2 + int64(len(envelopePrefix)) + (4*(envelopeHead+1+16+2)+2)/3

// sealedPlainBytes is the least plaintext that sealing makes n bytes of
// text of, in values values: 3/4 of what is left after sealedValueBytes a
// value. An import counts sealed text so (its plaintext only its exporter
// saw), and so holds it to the limit a write of that plaintext met.
func sealedPlainBytes(n, values int64) int64 {
	return max(0, 3*(n-sealedValueBytes*values)/4)
}

// checkSealedContentSize holds content that holds sealed values, with own
// bytes of its own fields, to the limit, the content counted as the least
// plaintext it holds (sealedPlainBytes). ErrSnapshotTooLarge beyond.
func checkSealedContentSize(size importedSize, own, limit int64) error {
	if err := checkCheckpointSize(limit, "sealed messages, state and tool results (the least plaintext they hold)", sealedPlainBytes(size.bytes, size.values), own); err != nil {
		return fmt.Errorf("%w; raise the limit to import it", err)
	}
	return nil
}

// sentBytes is the least JSON text took when sent, as an import measures
// it: b without the store's escape of U+0000 (see jsontext.EscapeNUL),
// counted by jsontext.LeastBytes (escapes at their shortest, each number
// one byte), which no spelling a store kept of it goes under.
func sentBytes(b []byte) int64 {
	return jsontext.LeastBytes(b)
}

// wholeKeys rebuilds a delta's key digests from its chain, as materializing
// rebuilds its object: the whole checkpoint's keys, then each delta's,
// oldest first, without its removed keys and with its set ones; and counts
// the keys and the bytes of their members.
func (im *importer) wholeKeys(rec *importedDigests, part func(*importedDigests) keyDigestDelta) (_ json.RawMessage, n, bytes int64, _ error) {
	var chain []keyDigestDelta
	for r := rec; ; r = im.keptDigests[r.base] {
		chain = append(chain, part(r))
		if r.base == uuid.Nil {
			break
		}
	}
	keys := map[string]string{}
	sizes := map[string]int64{}
	for i := len(chain) - 1; i >= 0; i-- {
		for _, k := range chain[i].removed {
			delete(keys, k)
			delete(sizes, k)
		}
		if err := json.Unmarshal(chain[i].set, &keys); err != nil {
			return nil, 0, 0, err
		}
		maps.Copy(sizes, chain[i].sizes)
	}
	for _, b := range sizes {
		bytes += b
	}
	digests, err := json.Marshal(keys)
	return digests, int64(len(sizes)), bytes, err
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
	if err := checkLinks(map[string]*uuid.UUID{"rewound_to": l.RewoundTo, "branched_from": l.BranchedFrom}); err != nil {
		return ExportThread{}, err
	}
	if l.CreatedAt.IsZero() {
		return ExportThread{}, fmt.Errorf("%w: thread %q has no created_at", ErrInvalidInput, l.ThreadID)
	}
	if err := checkYears("created_at", l.CreatedAt); err != nil {
		return ExportThread{}, fmt.Errorf("thread %q: %w", l.ThreadID, err)
	}
	return ExportThread{
		Kind: kindThread, ThreadID: l.ThreadID, Namespace: l.Namespace, RewoundTo: l.RewoundTo, Metadata: meta,
		CreatedAt: l.CreatedAt, BranchName: l.BranchName, BranchedFrom: l.BranchedFrom, BranchedFromThread: l.BranchedFromThread,
	}, nil
}

// checkYears is ErrInvalidInput for a time outside years 1 to 9999 in
// UTC: what RFC 3339 (JSON, an export) spells, so what a write or an
// import may keep.
func checkYears(what string, at time.Time) error {
	if y := at.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%w: %s %s is outside years 1 to 9999 (UTC)", ErrInvalidInput, what, at.UTC().Format(time.RFC3339))
	}
	return nil
}

// checkLinks refuses a link to a checkpoint that is not a checkpoint id
// (a UUIDv7).
func checkLinks(links map[string]*uuid.UUID) error {
	for _, name := range []string{"parent_id", "merge_parent_id", "base_id", "rewound_to", "branched_from"} {
		if id := links[name]; id != nil && !isUUIDv7(*id) {
			return fmt.Errorf("%w: %s %s is not a UUIDv7, so not a checkpoint id", ErrInvalidInput, name, *id)
		}
	}
	return nil
}

// checkImportCheckpoint validates a checkpoint line on its own, against
// the size limit limit (Config.MaxSnapshotBytes; negative: none), and puts
// it in stored form: JSON NUL-escaped, removed keys a JSON array of strings
// ("[]" for none). A delta is held to every rule a whole one is, and to its
// own: a base, a depth of at least 1, content that is a delta's (appended
// messages, set keys).
func checkImportCheckpoint(c *ExportCheckpoint, limit int64) error {
	if !isUUIDv7(c.ID) {
		return fmt.Errorf("%w: its id is not a UUIDv7 (version %d, variant %s)", ErrInvalidInput, c.ID.Version(), c.ID.Variant())
	}
	if c.Seq < 1 || c.Step < 1 || c.Seq > MaxImportSeq || c.Step > MaxImportSeq {
		return fmt.Errorf("%w: seq %d, step %d; both start at 1 and go up to %d (MaxImportSeq)", ErrInvalidInput, c.Seq, c.Step, int64(MaxImportSeq))
	}
	if err := checkLinks(map[string]*uuid.UUID{"parent_id": c.ParentID, "merge_parent_id": c.MergeParentID, "base_id": c.BaseID}); err != nil {
		return err
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
	if err := checkYears("created_at", c.CreatedAt); err != nil {
		return err
	}
	if err := checkImportSize(c, limit); err != nil {
		return err
	}
	if err := checkImportStorage(c); err != nil {
		return err
	}
	var err error
	if c.Tags, err = checkCheckpointText(c.Tags, c.Summary, c.NextNode); err != nil {
		return err
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
		if err := checkYears("pending write created_at", w.CreatedAt); err != nil {
			return err
		}
		if c.PendingWrites[i].Value, err = jsonArg("pending write value", w.Value, 0); err != nil {
			return err
		}
	}
	return nil
}

// checkImportSize holds a checkpoint line to the size limit limit
// (Config.MaxSnapshotBytes; negative: none), as a write is held (see
// engine/limit.go): its messages, state and tool results (a delta's, as
// stored) with its metadata, summary, next node and tags, and each pending
// write, in bytes as the file spells them (as Export spells them, compact:
// no longer than a writer sent them but for numbers that jsonb spells out,
// such as 1e5); and size_bytes, the size a write recorded of the whole
// content (a delta's too), which a write under this limit keeps within it
// with the same fields. (A delta's whole content is measured once its
// base is known: see importer.digests and checkImportContentSize.)
func checkImportSize(c *ExportCheckpoint, limit int64) error {
	if c.SizeBytes < 0 {
		return fmt.Errorf("%w: size_bytes %d; a checkpoint's size is 0 or more", ErrInvalidInput, c.SizeBytes)
	}
	if limit <= 0 {
		return nil
	}
	if c.SizeBytes > limit {
		return fmt.Errorf("%w: size_bytes %d, over the limit of %d (Config.MaxSnapshotBytes) that a write keeps to; raise the limit to import it",
			ErrSnapshotTooLarge, c.SizeBytes, limit)
	}
	content := c.SizeBytes
	if !holdsCiphertext(c.Messages, c.State, c.ToolResults) {
		// Sealed text is longer than its plaintext, which the limit
		// holds: it is held to checkSealedContentSize instead.
		content = max(contentBytes(c.Messages, c.State, c.ToolResults), content)
	}
	if err := checkCheckpointSize(limit, "messages, state and tool results", content, importOwnBytes(c)); err != nil {
		return fmt.Errorf("%w; raise the limit to import it", err)
	}
	for _, w := range c.PendingWrites {
		n := writeBytes(w.Channel, w.Value)
		if isEnvelope(w.Value) { // an encrypting Engine's: see sealedPlainBytes
			n = int64(len(w.Channel)) + sealedPlainBytes(int64(len(w.Value)), 1)
		}
		if err := checkWriteSize(limit, fmt.Sprintf("pending write %d of task %q", w.Index, w.TaskID), n); err != nil {
			return fmt.Errorf("%w; raise the limit to import it", err)
		}
	}
	return nil
}

// checkImportContentSize holds a checkpoint line's whole content, whose
// size c.SizeBytes is by then (the file's, or what the content measures
// if that is more: see importer.digests), with its metadata, summary,
// next node and tags, to the limit (negative: none).
func checkImportContentSize(c *ExportCheckpoint, limit int64) error {
	if err := checkCheckpointSize(limit, "messages, state and tool results", c.SizeBytes, importOwnBytes(c)); err != nil {
		return fmt.Errorf("%w; raise the limit to import it", err)
	}
	return nil
}

// sealedBeyondContent reports whether a checkpoint line's metadata or
// pending writes hold sealed values, which the limit counts as the least
// plaintext they hold (importOwnBytes, checkImportSize): as sealed
// content, they are taken only for a thread whose data key the file
// carries (see finish).
func sealedBeyondContent(c *ExportCheckpoint) bool {
	if holdsCiphertext(c.Metadata) {
		return true
	}
	for _, w := range c.PendingWrites {
		if isEnvelope(w.Value) {
			return true
		}
	}
	return false
}

// importOwnBytes is ownBytes of an imported checkpoint, its metadata as
// sent, as a write counts it: without the stores' escape of U+0000, and a
// sealed value (Encryption.MetadataKeys) as the least plaintext it holds
// (sealedPlainBytes).
func importOwnBytes(c *ExportCheckpoint) int64 {
	metadata := jsontext.UnescapeNUL(c.Metadata)
	n := ownBytes(metadata, c.Summary, c.NextNode, c.Tags)
	if holdsCiphertext(metadata) {
		eachMember(metadata, func(_, _, v []byte) {
			if isEnvelope(v) {
				n -= int64(len(v)) - sealedPlainBytes(int64(len(v)), 1)
			}
		})
	}
	return n
}

// checkImportStorage checks how a checkpoint line says it is stored.
func checkImportStorage(c *ExportCheckpoint) error {
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
		// Below 2^31-1: the next write adds 1 to both as a 32-bit integer.
		if c.DeltaDepth < 1 || c.DeltaRun < 0 || c.DeltaDepth >= math.MaxInt32 || c.DeltaRun >= math.MaxInt32 {
			return fmt.Errorf("%w: a delta with depth %d, run %d; depth starts at 1, run at 0 (both below 2^31-1)", ErrInvalidInput, c.DeltaDepth, c.DeltaRun)
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
