package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// copySealed is CopyThread for an Engine that encrypts. The stores' copy
// moves rows as they are, but a value's associated data names its thread
// and the checkpoint that wrote it (its origin), so every value would fail
// to open in dst. Instead the Engine reads src as stored (Store.Export: a
// delta as its delta, in namespace then write order, with its thread rows
// and pending writes), gives the checkpoints their new ids and links by the
// stores' rule (CopyIDs), opens each value with src's data key and seals it
// again under a new data key of dst, bound to dst and to the copy of its
// origin, at the same place, and writes the rows and dst's wrapped key
// through the store's import: one transaction, so all of it or nothing,
// holding src (ImportWriter.HoldThread) unchanged in what the copy relies
// on, else ErrNotFound (deleted) or ErrTransient (made again).
//
// A value written by a checkpoint of another thread (a branch's first
// checkpoint holds its source's content, a merge the branch head's) is
// kept as it is, as the links to those checkpoints are: it opens in dst as
// in src, with its own thread's key. A value whose origin was deleted
// (retention) but was written under src's key is sealed under dst's with
// the same origin, and opens as such values do (deletedOriginKeys).
//
// src is read whole into memory before anything is written.
func (e *Engine) copySealed(ctx context.Context, src, dst string) ([]CopiedID, error) {
	if src == dst {
		return nil, fmt.Errorf("%w: cannot copy thread %q onto itself", ErrInvalidInput, src)
	}
	var threads []ExportThread
	var rows []ExportCheckpoint
	err := e.store.Export(ctx, src, ExportOptions{}, ExportSink{
		Thread:     func(t ExportThread) error { threads = append(threads, t); return nil },
		Checkpoint: func(c ExportCheckpoint) error { rows = append(rows, c); return nil },
	})
	if err != nil {
		return nil, err
	}
	links := branchLinks(threads)
	dek, wrapped, err := e.crypt.newKey(ctx, e.Tenant(), dst)
	if err != nil {
		return nil, err
	}
	to, err := newDataKey(e.Tenant(), dst, dek)
	if err != nil {
		return nil, err
	}
	to.compress = e.crypt.compress

	old := make([]uuid.UUID, len(rows))
	for i, c := range rows {
		old[i] = c.ID
	}
	ids := NewCopyIDs(old)
	link := func(id *uuid.UUID) *uuid.UUID {
		if id == nil {
			return nil
		}
		n := ids.Link(*id)
		return &n
	}
	for i := range threads {
		threads[i].ThreadID = dst
		if threads[i].RewoundTo != nil {
			n, ok := ids.Lookup(*threads[i].RewoundTo)
			threads[i].RewoundTo = &n
			if !ok {
				threads[i].RewoundTo = nil // as the stores' copy does
			}
		}
	}
	// src's own key, read at its first value of its own: a branch that
	// has written nothing holds only its source's values (and, made
	// before branches were keyed at once, may have no key).
	var from *dataKey
	srcKey := func() (*dataKey, error) {
		if from == nil {
			if from, err = e.dataKey(ctx, src, false); err != nil {
				return nil, err
			}
		}
		return from, nil
	}
	r := &resealer{src: src, srcKey: srcKey, to: to, ids: ids, s: to.sealer(), others: map[uuid.UUID][]*dataKey{}}
	var outside map[uuid.UUID]string // ancestors of src's links out of it, read once needed
	r.otherKeys = func(origin uuid.UUID) ([]*dataKey, error) {
		if outside == nil {
			if outside, err = e.outsideAncestors(ctx, rows, ids); err != nil {
				return nil, err
			}
		}
		if thread, ok := outside[origin]; ok {
			k, err := e.dataKey(ctx, thread, false)
			if err != nil {
				return nil, err
			}
			return []*dataKey{k}, nil
		}
		line, err := e.store.Lineage(ctx, origin, 1)
		switch {
		case err != nil:
			return nil, err
		case len(line) > 0:
			return nil, fmt.Errorf("%w: a value of checkpoint %s, which is not an ancestor of the thread's checkpoints", ErrEncrypted, origin)
		}
		// Deleted: src's key, or a key of a thread src was branched from.
		return e.deletedOriginKeys(ctx, src, func(thread string) (*dataKey, error) { return e.dataKey(ctx, thread, false) })
	}
	counts := make(map[uuid.UUID]int, len(rows)) // each checkpoint's messages, whole
	for i := range rows {
		c := &rows[i]
		first := 0
		if c.Storage == StorageDelta && c.BaseID != nil {
			first = counts[*c.BaseID]
		}
		if err := r.checkpoint(c, first); err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", c.ID, err)
		}
		n := 0
		eachElement(c.Messages, func([]byte) { n++ })
		counts[c.ID] = first + n
		c.ThreadID, c.ID = dst, ids.Link(c.ID)
		c.ParentID, c.MergeParentID, c.BaseID = link(c.ParentID), link(c.MergeParentID), link(c.BaseID)
		if err := checkImportCheckpoint(c, -1); err != nil { // fills in what Export leaves out
			return nil, fmt.Errorf("checkpoint %s: %w", c.ID, err)
		}
	}

	im := &importer{e: e, keptDigests: map[uuid.UUID]*importedDigests{}}
	err = e.store.Import(ctx, func(w ImportWriter) error {
		// src held until the copy commits, as it was read: what makes the
		// copy's branch source one retention keeps (src's rows, naming it)
		// cannot go before the copy's rows name it too.
		now, err := w.HoldThread(ctx, src)
		switch {
		case err != nil:
			return err
		case len(now) == 0:
			return fmt.Errorf("thread %q, deleted while it was copied: %w", src, ErrNotFound)
		case branchLinks(now) != links:
			return fmt.Errorf("%w: thread %q was made again while it was copied", ErrTransient, src)
		}
		for _, t := range threads {
			if err := w.Thread(ctx, t); err != nil {
				return err
			}
		}
		for _, c := range rows {
			d, _, err := im.digests(c) // sealed: its size is the source's
			if err == nil {
				err = w.Checkpoint(ctx, c, d)
			}
			if err != nil {
				return fmt.Errorf("checkpoint %s: %w", c.ID, err)
			}
		}
		return w.DataKey(ctx, wrapped)
	})
	if err != nil {
		return nil, err
	}
	return ids.Pairs, nil
}

// outsideAncestors returns, with its thread, every checkpoint outside a
// thread that the thread's rows link to (a branch's source, a merged
// branch's head) and their ancestors, across branches and merges: the
// checkpoints whose values the thread's rows may hold besides its own.
func (e *Engine) outsideAncestors(ctx context.Context, rows []ExportCheckpoint, ids CopyIDs) (map[uuid.UUID]string, error) {
	out := map[uuid.UUID]string{}
	var queue []uuid.UUID
	for _, c := range rows {
		for _, l := range []*uuid.UUID{c.ParentID, c.MergeParentID} {
			if l == nil {
				continue
			}
			if _, in := ids.Lookup(*l); !in {
				queue = append(queue, *l)
			}
		}
	}
	seen := map[uuid.UUID]bool{}
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		if seen[from] {
			continue
		}
		seen[from] = true
		line, err := e.store.Lineage(ctx, from, 0)
		if err != nil {
			return nil, err
		}
		for _, l := range line {
			out[l.ID] = l.ThreadID
			if l.MergeParentID != uuid.Nil {
				queue = append(queue, l.MergeParentID)
			}
		}
	}
	return out, nil
}

// resealer moves the values of a thread's rows, as stored, from one data
// key (the source thread's) to another (the copy's); see copySealed.
type resealer struct {
	src    string                   // the source thread
	srcKey func() (*dataKey, error) // its key
	to     *dataKey
	ids    CopyIDs
	s      *sealer // to's
	pt     []byte
	// otherKeys returns the keys that may open a value whose origin is
	// not a checkpoint of the source (see keyFunc); others holds them.
	otherKeys func(origin uuid.UUID) ([]*dataKey, error)
	others    map[uuid.UUID][]*dataKey
}

// checkpoint reseals the values of row c, whose first message (of a delta:
// the first appended) is at index first of the whole list. The removed
// keys of a delta are names, kept as they are.
func (r *resealer) checkpoint(c *ExportCheckpoint, first int) error {
	var err error
	out := []byte{'['}
	i := first
	eachElement(c.Messages, func(v []byte) {
		if err != nil {
			return
		}
		if i > first {
			out = append(out, ',')
		}
		place := strconv.Itoa(i)
		out, err = r.value(out, func() string { return fieldMessages + "[" + place + "]" }, v, fieldMessages, place)
		i++
	})
	if err != nil {
		return err
	}
	c.Messages = append(out, ']')
	for _, f := range []struct {
		field string
		obj   *[]byte
		pick  func([]byte) bool
	}{
		{fieldState, (*[]byte)(&c.State), nil},
		{fieldToolResults, (*[]byte)(&c.ToolResults), nil},
		{fieldMetadata, (*[]byte)(&c.Metadata), isEnvelope}, // only its encrypted keys
	} {
		only := map[string]bool(nil)
		if f.pick != nil {
			only = map[string]bool{}
		}
		if *f.obj, err = mapMembers(nil, *f.obj, only, f.pick, func(out, key, v []byte) ([]byte, error) {
			return r.value(out, func() string { return fmt.Sprintf("%s key %q", f.field, key) }, v, f.field, string(key))
		}); err != nil {
			return err
		}
	}
	for i := range c.PendingWrites {
		w := &c.PendingWrites[i]
		what := func() string { return fmt.Sprintf("pending write %d of task %q", w.Index, w.TaskID) }
		if w.Value, err = r.value(nil, what, w.Value, fieldWrite, w.TaskID, strconv.Itoa(w.Index), w.Channel); err != nil {
			return err
		}
	}
	return nil
}

// value appends to out the copy of stored value v of field at place: a
// value of a checkpoint of the source, or of one deleted since that was
// sealed under the source's key, opened with the source's key and sealed
// under the copy's, bound to the copy of its origin (or to that deleted
// origin); a value of another thread's checkpoint, checked with that
// thread's key, as it is. Errors: ErrEncrypted for a value that is not a
// ciphertext or does not open with the key of its origin's thread.
func (r *resealer) value(out []byte, what func() string, v []byte, field string, place ...string) ([]byte, error) {
	env, err := parseEnvelope(what(), v)
	if err != nil {
		return nil, err
	}
	origin, inside := r.ids.Lookup(env.origin)
	var keys []*dataKey
	if inside {
		k, err := r.srcKey()
		if err != nil {
			return nil, err
		}
		keys = []*dataKey{k}
	} else {
		origin = env.origin // deleted since, or another thread's: kept
		if keys = r.others[origin]; keys == nil {
			if keys, err = r.otherKeys(origin); err != nil {
				return nil, err
			}
			r.others[origin] = keys
		}
	}
	var plain []byte
	for _, k := range keys {
		if plain, r.pt, err = k.open(nil, r.pt, what, env, k.ad(env.origin, field, place...)); err == nil {
			if k.thread != r.src {
				return append(out, v...), nil // it opens with its own thread's key
			}
			break
		}
	}
	if err != nil {
		return nil, err
	}
	r.s.ad = appendAD(r.s.ad[:0], r.to, origin, field, place...)
	return r.s.seal(out, origin, r.s.ad, plain), nil
}

// branchLinks is what of a thread's rows a copy relies on src keeping:
// each namespace's branch source.
func branchLinks(threads []ExportThread) string {
	var b strings.Builder
	for _, t := range threads {
		b.WriteString(strconv.Quote(t.Namespace))
		if t.BranchedFrom != nil {
			b.WriteString(" " + t.BranchedFrom.String())
		}
		if t.BranchedFromThread != nil {
			b.WriteString(" " + strconv.Quote(*t.BranchedFromThread))
		}
		b.WriteByte(';')
	}
	return b.String()
}
