package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// Encrypted reports whether e encrypts (Config.Encryption.Keys is set).
func (e *Engine) Encrypted() bool { return e.crypt != nil }

// dataKey returns a thread's data key (see crypter.key).
func (e *Engine) dataKey(ctx context.Context, thread string, create bool) (*dataKey, error) {
	return e.crypt.key(ctx, e.store, e.Tenant(), thread, create, e.inTx())
}

// inTx reports whether e runs in a caller's transaction (WithTx).
func (e *Engine) inTx() bool {
	ts, ok := e.base.(TxStore)
	return ok && ts.InTx()
}

// refuseHeldInTx is ErrInvalidInput for a call that has a KeyShredder
// destroy keys (RewrapKeys, ShredThread, PruneKeys) made in a caller's
// transaction: the provider destroys a key at once, the rows that stop
// naming it only when the transaction commits, so a rollback would leave
// committed rows naming destroyed keys, and readers outside would meet
// them before the commit.
func (e *Engine) refuseHeldInTx(op string) error {
	if _, held := e.crypt.keys.(KeyShredder); held && e.inTx() {
		return fmt.Errorf("%s: %w: the key provider (%T) destroys keys at once, and a caller's transaction may roll back the rows that stop naming them; call it outside the transaction", op, ErrInvalidInput, e.crypt.keys)
	}
	return nil
}

// checkPlaintext applies the stores' JSON rule (CheckJSON) to content the
// store will only see encrypted, so an encrypting Engine refuses what a
// store would.
func checkPlaintext(fields ...JSONField) error {
	return CheckJSON(fields...)
}

// sealPut encrypts a snapshot's content for its thread and computes its
// digests keyed (see addDigests).
func (e *Engine) sealPut(ctx context.Context, p *PutRequest) error {
	if err := checkPlaintext(p.JSONFields()[:3]...); err != nil {
		return err
	}
	k, err := e.dataKey(ctx, p.ThreadID, true)
	if err != nil {
		return err
	}
	if p.DeltaRun <= 1 || p.SizeBytes < e.cfg.DeltaMinBytes {
		p.DeltaRun = 1
	} else {
		p.MessageChain = jsontext.MessageChain(nil, jsontext.KeyedMessageDigests(p.Messages, k.digestKey))
		if p.StateDigests, err = jsontext.KeyedKeyDigests(p.State, k.digestKey); err != nil {
			return notJSON("state")
		}
		if p.ToolResultsDigests, err = jsontext.KeyedKeyDigests(p.ToolResults, k.digestKey); err != nil {
			return notJSON("tool results")
		}
	}
	p.Messages = k.sealArray(p.ID, fieldMessages, p.Messages)
	p.State = k.sealObject(p.ID, fieldState, p.State, nil)
	p.ToolResults = k.sealObject(p.ID, fieldToolResults, p.ToolResults, nil)
	if p.Metadata, err = e.sealMetadata(k, p.ID, p.Metadata); err != nil {
		return err
	}
	if p.Summary == "" {
		p.Summary = EncryptedSummary
	}
	p.Sealed = true
	return nil
}

// sealedRetry tells a retried Snapshot under encryption from a conflict.
// The store compares what it holds with what it is sent, which under
// encryption differs for the same content (a delta's values were written,
// and bound, by its base): the existing checkpoint is read, decrypted and
// compared in plaintext with p (the snapshot before sealing) instead.
func (e *Engine) sealedRetry(ctx context.Context, p PutRequest) (SnapshotResult, bool) {
	c, err := e.store.Get(ctx, p.ID)
	if err != nil || e.openCheckpoint(ctx, c) != nil {
		return SnapshotResult{}, false
	}
	if c.ThreadID != p.ThreadID || c.Namespace != p.Namespace || c.NextNode != p.NextNode ||
		(p.ParentID != uuid.Nil && c.ParentID != p.ParentID) ||
		!jsontext.Same(c.Metadata, p.Metadata) || !jsontext.Same(c.Messages, p.Messages) ||
		!jsontext.Same(c.State, p.State) || !jsontext.Same(c.ToolResults, p.ToolResults) {
		return SnapshotResult{}, false
	}
	return SnapshotResult{ID: c.ID, ThreadID: c.ThreadID, Namespace: c.Namespace, ParentID: c.ParentID,
		Step: c.Step, CreatedAt: c.CreatedAt}, true
}

func (e *Engine) sealMetadata(k *dataKey, id uuid.UUID, metadata []byte) ([]byte, error) {
	if e.crypt.metadata == nil {
		return metadata, nil
	}
	if err := checkPlaintext(JSONField{"metadata", metadata}); err != nil {
		return nil, err
	}
	return k.sealObject(id, fieldMetadata, metadata, e.crypt.metadata), nil
}

// maxAppendAttempts bounds how often an encrypting Append reads the head
// again after another writer moved it.
const maxAppendAttempts = 10

// putAppendSealed is Append under encryption. A message's associated data
// names its index in the whole list, which the change alone does not
// tell: it reads the head (its stored messages, counted, not decrypted),
// encrypts the change for the positions after them, and appends on that
// head alone (ErrHeadMoved when another writer moved it: read again, when
// the caller named no head).
func (e *Engine) putAppendSealed(ctx context.Context, a AppendRequest) (SnapshotResult, error) {
	if err := checkPlaintext(a.JSONFields()[:3]...); err != nil {
		return SnapshotResult{}, err
	}
	k, err := e.dataKey(ctx, a.ThreadID, true)
	if err != nil {
		return SnapshotResult{}, err
	}
	plain := a
	plain.MessageDigests = jsontext.KeyedMessageDigests(a.Messages, k.digestKey)
	if plain.SetStateDigests, err = jsontext.KeyedKeyDigests(a.SetState, k.digestKey); err != nil {
		return SnapshotResult{}, notJSON("state")
	}
	if plain.SetToolResultsDigests, err = jsontext.KeyedKeyDigests(a.SetToolResults, k.digestKey); err != nil {
		return SnapshotResult{}, notJSON("tool results")
	}
	if plain.Summary == "" {
		plain.Summary = EncryptedSummary
	}
	if plain.Metadata, err = e.sealMetadata(k, a.ID, a.Metadata); err != nil {
		return SnapshotResult{}, err
	}
	appended := 0
	eachElement(a.Messages, func([]byte) { appended++ })
	for attempt := 1; ; attempt++ {
		head, err := e.store.Head(ctx, a.ThreadID, a.Namespace)
		if err != nil {
			return SnapshotResult{}, err
		}
		if a.OnHead != uuid.Nil && head.ID != a.OnHead && head.ID != a.ID {
			return SnapshotResult{}, fmt.Errorf("%w: the head is %s", ErrHeadMoved, head.ID)
		}
		before := 0
		eachElement(head.Messages, func([]byte) { before++ })
		req := plain
		req.OnHead = head.ID
		if head.ID == a.ID { // a retry of an append that was written: it is the head
			before -= appended
			req.OnHead = a.OnHead
		}
		if head.ID != a.ID && a.MaxSizeBytes >= 0 && head.SizeBytes+a.SizeBytes > a.MaxSizeBytes {
			if req.ContentBytes, err = e.appendedSize(ctx, head, a); err != nil {
				return SnapshotResult{}, err
			}
		}
		req.Messages = k.sealArrayFrom(a.ID, fieldMessages, a.Messages, before)
		req.SetState = k.sealObject(a.ID, fieldState, a.SetState, nil)
		req.SetToolResults = k.sealObject(a.ID, fieldToolResults, a.SetToolResults, nil)
		req.Sealed = true
		res, err := e.store.PutAppend(ctx, req)
		if errors.Is(err, ErrHeadMoved) && a.OnHead == uuid.Nil {
			// Another writer moved the head while this one waited for the
			// thread's lock: append on the new head, as a plain Append
			// would have. Not in a caller's transaction, which the
			// failure aborted, nor past maxAppendAttempts: ErrTransient
			// there, which the caller (or Config.Retry) retries, where
			// ErrHeadMoved is for an append that named its head.
			if attempt < maxAppendAttempts && !e.inTx() {
				continue
			}
			return res, fmt.Errorf("%w: %s", ErrTransient, err)
		}
		return res, err
	}
}

// appendedSize is the size of the content an append (a, in plaintext)
// makes on head (as stored): the head's content decrypted, the change
// applied, measured as a store measures it (jsontext.Content). A store
// cannot: it sees the ciphertext, compressed. Only an append whose
// head's size plus the change's is over the limit is measured, as a store
// measures only those.
func (e *Engine) appendedSize(ctx context.Context, head *Checkpoint, a AppendRequest) (int64, error) {
	c := *head
	c.PendingWrites = nil
	if err := e.openCheckpoint(ctx, &c); err != nil {
		return 0, err
	}
	out, err := jsontext.Content{Messages: c.Messages, State: c.State, ToolResults: c.ToolResults}.Apply(a.Change())
	if err != nil {
		return 0, err
	}
	return out.Size(), nil
}

// sealArrayFrom is sealArray for messages that come after first others.
func (k *dataKey) sealArrayFrom(origin uuid.UUID, field string, arr []byte, first int) []byte {
	out := make([]byte, 0, len(arr)*4/3+64)
	out = append(out, '[')
	s := k.sealer()
	i := first
	var place []byte
	eachElement(arr, func(elem []byte) {
		if i > first {
			out = append(out, ',')
		}
		place = strconv.AppendInt(place[:0], int64(i), 10)
		out = sealAt(s, out, origin, field, place, elem)
		i++
	})
	return append(out, ']')
}

// sealWrites encrypts pending writes' values for checkpoint id.
func (e *Engine) sealWrites(ctx context.Context, id uuid.UUID, taskID string, writes []Write) error {
	line, err := e.store.Lineage(ctx, id, 1)
	if err != nil {
		return err
	}
	if len(line) == 0 {
		return fmt.Errorf("checkpoint %s: %w", id, ErrNotFound)
	}
	k, err := e.dataKey(ctx, line[0].ThreadID, false)
	if err != nil {
		return err
	}
	s := k.sealer()
	for i := range writes {
		if err := checkPlaintext(JSONField{"value", writes[i].Value}); err != nil {
			return err
		}
		s.ad = k.writeAD(s.ad[:0], id, taskID, i, writes[i].Channel)
		writes[i].Value = s.seal(nil, id, s.ad, writes[i].Value)
	}
	return nil
}

// openCheckpoint decrypts a checkpoint a store returned, all of it or
// none: on an error c is left as it was and must not be returned. A value
// is opened with the key of the thread of the checkpoint that wrote it
// (its origin): c's, or an ancestor's (see originThreads). An Engine that
// does not encrypt refuses a checkpoint of an encrypted thread.
func (e *Engine) openCheckpoint(ctx context.Context, c *Checkpoint) error {
	if e.crypt == nil {
		return e.refuseCiphertext(ctx, c)
	}
	origins := map[uuid.UUID]bool{}
	eachElement(c.Messages, func(v []byte) {
		if o, ok := peekOrigin(v); ok {
			origins[o] = true
		}
	})
	for _, obj := range [][]byte{c.State, c.ToolResults, c.Metadata} {
		eachMember(obj, func(_, _, v []byte) {
			if o, ok := peekOrigin(v); ok {
				origins[o] = true
			}
		})
	}
	keyFor, metadataKeyFor, err := e.originKeys(ctx, c.CheckpointInfo, origins)
	if err != nil {
		return err
	}
	own := func(origin uuid.UUID) ([]*dataKey, error) {
		if origin != c.ID {
			return nil, fmt.Errorf("%w: checkpoint %s holds a value of another checkpoint where only its own may be", ErrEncrypted, c.ID)
		}
		return keyFor(origin)
	}
	messages, err := openArray(fieldMessages, c.Messages, keyFor)
	if err != nil {
		return err
	}
	state, err := openObject(fieldState, c.State, nil, keyFor)
	if err != nil {
		return err
	}
	tools, err := openObject(fieldToolResults, c.ToolResults, nil, keyFor)
	if err != nil {
		return err
	}
	metadata := c.Metadata
	if e.crypt.metadata != nil || holdsCiphertext(metadata) {
		// MetadataKeys, and any key encrypted under an earlier MetadataKeys.
		if metadata, err = openObject(fieldMetadata, c.Metadata, e.crypt.metadataKeys(), metadataKeyFor); err != nil {
			return err
		}
	}
	values := make([][]byte, len(c.PendingWrites))
	var bufs buffers
	for i, w := range c.PendingWrites {
		what := func() string { return fmt.Sprintf("pending write %d of task %q", w.Index, w.TaskID) }
		if values[i], err = openValue(nil, &bufs, what, w.Value, own, func(dst []byte, k *dataKey, origin uuid.UUID) []byte {
			return k.writeAD(dst, origin, w.TaskID, w.Index, w.Channel)
		}); err != nil {
			return err
		}
	}
	c.Messages, c.State, c.ToolResults, c.Metadata = messages, state, tools, metadata
	for i := range c.PendingWrites {
		c.PendingWrites[i].Value = values[i]
	}
	return nil
}

// originKeys returns the keys of c's values, by origin (see
// originThreads): keyFor, for values an ancestor may have written (a
// delta's, a branch's or a merge's content); metadataKeyFor, for its
// metadata, which only c writes, except where a store copied it with the
// content (see copiedMetadataOrigins): a value of any other checkpoint
// was moved there, and is refused (ErrEncrypted).
func (e *Engine) originKeys(ctx context.Context, c CheckpointInfo, origins map[uuid.UUID]bool) (keyFor, metadataKeyFor keyFunc, err error) {
	threads, end, deleted, err := e.originThreads(ctx, c, origins)
	if err != nil {
		return nil, nil, err
	}
	keys := map[string][]*dataKey{} // one each: keyFor's results
	threadKey := func(thread string) (*dataKey, error) {
		if k := keys[thread]; k != nil {
			return k[0], nil
		}
		k, err := e.dataKey(ctx, thread, false)
		if err != nil {
			return nil, err
		}
		keys[thread] = []*dataKey{k}
		return k, nil
	}
	// A shredded thread reads nothing, also the values it holds of
	// another thread's (a branch's first checkpoint holds its source's):
	// its own key must open, whoever wrote the values.
	if len(origins) > 0 {
		if _, err := threadKey(c.ThreadID); err != nil {
			return nil, nil, err
		}
	}
	var candidates []*dataKey // for deleted origins, found once
	keyFor = func(origin uuid.UUID) ([]*dataKey, error) {
		if thread, ok := threads[origin]; ok {
			if _, err := threadKey(thread); err != nil {
				return nil, err
			}
			return keys[thread], nil
		}
		if !deleted[origin] {
			return nil, fmt.Errorf("%w: checkpoint %s holds a value of unknown origin", ErrEncrypted, c.ID)
		}
		if candidates == nil {
			var err error
			if candidates, err = e.deletedOriginKeys(ctx, end, threadKey); err != nil {
				return nil, err
			}
		}
		return candidates, nil
	}
	var copied map[uuid.UUID]bool // read at the first value not c's own
	metadataKeyFor = func(origin uuid.UUID) ([]*dataKey, error) {
		if origin != c.ID && copied == nil {
			if copied, err = e.copiedMetadataOrigins(ctx, c); err != nil {
				return nil, err
			}
		}
		if origin != c.ID && !copied[origin] {
			return nil, fmt.Errorf("%w: metadata of checkpoint %s was written by another checkpoint", ErrEncrypted, c.ID)
		}
		return keyFor(origin)
	}
	return keyFor, metadataKeyFor, nil
}

// copiedMetadataOrigins returns the checkpoints whose metadata values c
// may hold besides its own, as a store copies them with the content: a
// branch's first checkpoint (seq 1, with a parent) holds what its source
// holds, a merge the store made (thread_merge; an encrypting Engine's merge
// seals its own) what its merge parent holds. It follows those links, at
// most maxBranchHops, to a checkpoint that is neither (or one deleted
// since, whose own links are unknown).
func (e *Engine) copiedMetadataOrigins(ctx context.Context, c CheckpointInfo) (map[uuid.UUID]bool, error) {
	out := map[uuid.UUID]bool{}
	for hop := 0; hop < maxBranchHops; hop++ {
		from := c.MergeParentID
		if from == uuid.Nil && c.Seq == 1 {
			from = c.ParentID
		}
		if from == uuid.Nil || out[from] {
			break
		}
		out[from] = true
		line, err := e.store.Lineage(ctx, from, 1)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if len(line) == 0 {
			break
		}
		c = line[0]
	}
	return out, nil
}

// originThreads returns the thread of each origin of c's values that is
// c or an ancestor, which a delta, an append stored whole, a branch's
// first checkpoint or a merge legitimately holds (c's lineage, across
// branches, and the lineage of each merge parent on it); where the
// lineage ends; and the origins that no longer exist. A value of a
// checkpoint that is not an ancestor (a later one, one of another line or
// another thread) is refused: ErrEncrypted. Two cases are accepted where
// retention cut the lineage: an origin deleted since (a row stored whole
// kept its value) that is older than c, whose key deletedOriginKeys finds;
// and an older origin that still exists, off the cut lineage, on the
// thread where it is cut or one that thread was branched from (a delta's
// base kept when its parent was deleted).
func (e *Engine) originThreads(ctx context.Context, c CheckpointInfo, origins map[uuid.UUID]bool) (threads map[uuid.UUID]string, end string, deleted map[uuid.UUID]bool, err error) {
	threads = map[uuid.UUID]string{c.ID: c.ThreadID}
	end = c.ThreadID
	cut := false
	missing := func() bool {
		for o := range origins {
			if _, ok := threads[o]; !ok {
				return true
			}
		}
		return false
	}
	if e.crypt.knownOrigins(e.Tenant(), c, origins, threads) {
		return threads, end, map[uuid.UUID]bool{}, nil
	}
	remember := !e.inTx() // a caller's transaction may roll back what it reads
	limit := 2*e.cfg.DeltaRun + 2
	queue := []uuid.UUID{c.ID}
	seen := map[uuid.UUID]bool{}
	for len(queue) > 0 && missing() {
		from := queue[0]
		queue = queue[1:]
		if seen[from] {
			continue
		}
		seen[from] = true
		line, err := e.store.Lineage(ctx, from, limit)
		if err != nil {
			return nil, "", nil, err
		}
		for _, l := range line {
			threads[l.ID] = l.ThreadID
		}
		if limit > 0 && len(line) == limit && missing() {
			// Not all in the recent part: read the whole lineage.
			if line, err = e.store.Lineage(ctx, from, 0); err != nil {
				return nil, "", nil, err
			}
		}
		for _, l := range line {
			threads[l.ID] = l.ThreadID
			if l.MergeParentID != uuid.Nil && !seen[l.MergeParentID] {
				queue = append(queue, l.MergeParentID)
			}
		}
		if remember {
			e.crypt.rememberLineage(e.Tenant(), line)
		}
		if from == c.ID && len(line) > 0 {
			end = line[len(line)-1].ThreadID // where a deleted parent was
			cut = line[len(line)-1].ParentID != uuid.Nil
		}
		limit = 0
	}
	deleted = map[uuid.UUID]bool{}
	var sources []string // end and the threads it was branched from, once needed
	for o := range origins {
		if _, ok := threads[o]; ok {
			continue
		}
		// An origin whose id was made after c was written cannot be its
		// ancestor. When c was written is the later of its CreatedAt and
		// its id's time: its id is made before the write and kept over
		// retries, while other writers go first (a parent's id may be the
		// newer); its CreatedAt is its transaction's start on Postgres (a
		// caller's transaction may be older than the ids made in it) and
		// its source's for a copy (CopyThread keeps times, makes ids).
		if written := latest(c.CreatedAt, idTime(c.ID)); idTime(o).After(written.Add(maxClockSkew)) {
			return nil, "", nil, fmt.Errorf("%w: checkpoint %s holds a value written by a later checkpoint", ErrEncrypted, c.ID)
		}
		other, err := e.store.Lineage(ctx, o, 1)
		if err != nil {
			return nil, "", nil, err
		}
		if len(other) == 0 {
			deleted[o] = true
			continue
		}
		// An older checkpoint that exists off the lineage: legitimate only
		// where the lineage is cut (a deleted parent) and a delta's base
		// was kept, on the thread where it is cut or one it branched from.
		if cut {
			if sources == nil {
				if sources, err = e.branchSources(ctx, end); err != nil {
					return nil, "", nil, err
				}
			}
			if slices.Contains(sources, other[0].ThreadID) {
				threads[o] = other[0].ThreadID
				continue
			}
		}
		return nil, "", nil, fmt.Errorf("%w: checkpoint %s holds a value of checkpoint %s, which is not its ancestor", ErrEncrypted, c.ID, o)
	}
	return threads, end, deleted, nil
}

// maxClockSkew is how far apart the clocks that make checkpoint ids
// (UUIDv7, see NewCheckpointID) and stamp CreatedAt may run: a value whose
// deleted origin's id is later by more than when the checkpoint holding it
// was written is refused as a later checkpoint's (see originThreads).
const maxClockSkew = time.Minute

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// idTime is the time a UUIDv7 was made, to the millisecond.
func idTime(id uuid.UUID) time.Time {
	var ms int64
	for _, b := range id[:6] {
		ms = ms<<8 | int64(b)
	}
	return time.UnixMilli(ms)
}

// branchSources returns thread and the threads it was branched from,
// nearest first, at most maxBranchHops.
func (e *Engine) branchSources(ctx context.Context, thread string) ([]string, error) {
	var out []string
	for hop := 0; thread != "" && hop < maxBranchHops && !slices.Contains(out, thread); hop++ {
		out = append(out, thread)
		src, err := e.store.BranchSource(ctx, thread)
		if err != nil {
			return nil, err
		}
		thread = src
	}
	return out, nil
}

// maxBranchHops bounds how far deletedOriginKeys follows branch sources.
const maxBranchHops = 16

// deletedOriginKeys returns the keys that may open a value whose origin
// was deleted: that of thread, where the checkpoint's lineage ends, then
// those of the threads it was branched from, nearest first. A thread
// without a usable key is skipped.
func (e *Engine) deletedOriginKeys(ctx context.Context, thread string, threadKey func(string) (*dataKey, error)) ([]*dataKey, error) {
	sources, err := e.branchSources(ctx, thread)
	if err != nil {
		return nil, err
	}
	var out []*dataKey
	for _, t := range sources {
		if k, err := threadKey(t); err == nil {
			out = append(out, k)
		} else if !errors.Is(err, ErrEncrypted) {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no key for a value whose checkpoint was deleted", ErrEncrypted)
	}
	return out, nil
}

// refuseCiphertext is ErrEncrypted for a checkpoint of an encrypted
// thread read by an Engine that does not encrypt: a value that looks like
// a ciphertext, in a thread that has a data key, or written by a
// checkpoint (its origin) of another thread that has one: a branch's first
// checkpoint, or a merge's, holds values its source's thread sealed, and
// the branch may have no data key of its own yet. (A value whose origin is
// gone is taken for plaintext that looks like a ciphertext, as in a thread
// without a key.)
func (e *Engine) refuseCiphertext(ctx context.Context, c *Checkpoint) error {
	found := holdsCiphertext(c.Messages, c.State, c.ToolResults, c.Metadata)
	for _, w := range c.PendingWrites {
		found = found || holdsCiphertext(w.Value)
	}
	if !found {
		return nil
	}
	if err := e.refuseThread(ctx, c.ThreadID); err != nil {
		return err
	}
	origins := map[uuid.UUID]bool{}
	add := func(v []byte) {
		if o, ok := peekOrigin(v); ok && o != c.ID {
			origins[o] = true
		}
	}
	member := func(_, _, v []byte) { add(v) }
	eachElement(c.Messages, add)
	eachMember(c.State, member)
	eachMember(c.ToolResults, member)
	eachMember(c.Metadata, member)
	for _, w := range c.PendingWrites {
		add(w.Value)
	}
	for o := range origins {
		line, err := e.store.Lineage(ctx, o, 1)
		switch {
		case err != nil && !errors.Is(err, ErrNotFound):
			return err
		case len(line) > 0 && line[0].ThreadID != c.ThreadID:
			if err := e.refuseThread(ctx, line[0].ThreadID); err != nil {
				return err
			}
		}
	}
	return nil
}

// holdsCiphertext reports whether one of the JSON texts holds what starts
// every ciphertext's JSON string: a quote and envelopePrefix.
func holdsCiphertext(texts ...[]byte) bool {
	for _, b := range texts {
		if textHoldsCiphertext(b) {
			return true
		}
	}
	return false
}

// textHoldsCiphertext is holdsCiphertext of one text. It looks for the
// prefix, then at the byte before it: the prefix's first byte ('$') is
// rare in text, so the search skips ahead at memchr's pace, where one led
// by the quote, JSON's commonest byte, falls back to comparing at every
// position (ten times slower on a conversation's text).
func textHoldsCiphertext(b []byte) bool {
	for {
		i := bytes.Index(b, envelopePrefixBytes)
		switch {
		case i < 0:
			return false
		case i > 0 && b[i-1] == '"':
			return true
		}
		b = b[i+1:]
	}
}

var envelopePrefixBytes = []byte(envelopePrefix)

// refuseThread is ErrEncrypted for a thread that has a data key (see
// refuseCiphertext).
func (e *Engine) refuseThread(ctx context.Context, thread string) error {
	keyed, err := e.threadKeyed(ctx, thread)
	if err == nil && keyed {
		err = threadEncrypted(thread)
	}
	return err
}

// threadKeyed reports whether a thread has a data key, shredded or not.
func (e *Engine) threadKeyed(ctx context.Context, thread string) (bool, error) {
	_, err := e.store.DataKey(ctx, thread)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// threadEncrypted is the ErrEncrypted of an Engine without encryption
// for an encrypted thread.
func threadEncrypted(thread string) error {
	return fmt.Errorf("%w: thread %q is encrypted; open the engine with Config.Encryption and its key", ErrEncrypted, thread)
}

// sourceSealed reports whether a branch of checkpoint id, of thread, holds
// sealed values: keyed, the thread has a data key; sealed, that or, for an
// encrypting Engine, the checkpoint holds ciphertext all the same (a
// thread without a key of its own: a branch made before branches were
// given theirs, or one whose key was not made). An Engine without
// encryption asks the key alone, which costs a branch no read of content.
func (e *Engine) sourceSealed(ctx context.Context, thread string, id uuid.UUID) (keyed, sealed bool, _ error) {
	if keyed, err := e.threadKeyed(ctx, thread); err != nil || keyed || e.crypt == nil {
		return keyed, keyed, err
	}
	c, err := e.store.Get(ctx, id)
	if err != nil {
		return false, false, err
	}
	return false, holdsCiphertext(c.Messages, c.State, c.ToolResults), nil
}

// mergeSealed is a merge under encryption. The store's merge copies the
// branch head's values as stored: sealed under the keys of the threads
// that wrote them (the branch's, its source's) and bound to those
// checkpoints, whose keys a read finds through the merge's lineage; once
// the branch is deleted (DeleteThreads, retention) nothing leads to them,
// and the target's head no longer reads. So the engine opens the branch
// head and writes its content on the target as the target's own: sealed
// under the target's key, bound to the new checkpoint, with the head as
// merge parent (PutRequest.MergeParentID). The branch may move meanwhile:
// the merge is of the head read.
func (e *Engine) mergeSealed(ctx context.Context, branchThread, intoThread, namespace string, id uuid.UUID) (MergeResult, error) {
	if branchThread == intoThread {
		return MergeResult{}, fmt.Errorf("%w: cannot merge thread %q into itself", ErrInvalidInput, intoThread)
	}
	// The target's head first: a merge creates no thread, and sealing
	// makes the target's data key, which a refused merge must not leave.
	// (Without the target's lock: a delete of the target meanwhile may
	// still leave a key, which its id then keeps, as DeleteThreads does.)
	switch _, err := e.store.HeadID(ctx, intoThread, namespace); {
	case errors.Is(err, ErrNotFound):
		return MergeResult{}, fmt.Errorf("thread %q has no checkpoint in namespace %q to merge into: %w", intoThread, namespace, err)
	case err != nil:
		return MergeResult{}, err
	}
	head, err := e.store.Head(ctx, branchThread, namespace)
	if err == nil {
		err = e.openCheckpoint(ctx, head)
	}
	if err != nil {
		return MergeResult{}, fmt.Errorf("branch thread %q in namespace %q: %w", branchThread, namespace, err)
	}
	unescapeCheckpoint(head)
	p, err := e.snapshotParams(SnapshotInput{ID: id, ThreadID: intoThread, Namespace: namespace, Trigger: TriggerManual,
		Tags: []string{"merge"}, Summary: "Merge of " + branchThread, Metadata: head.Metadata, Messages: head.Messages,
		State: head.State, ToolResults: head.ToolResults, NextNode: head.NextNode}, "the merged messages, state and tool results")
	if err != nil {
		return MergeResult{}, err
	}
	p.MergeParentID = head.ID
	if err := e.sealPut(ctx, &p); err != nil {
		return MergeResult{}, err
	}
	res, err := e.store.Put(ctx, p)
	if err != nil {
		return MergeResult{}, err
	}
	return MergeResult{ThreadID: intoThread, CheckpointID: res.ID, ParentID: res.ParentID, MergeParentID: head.ID, Step: res.Step}, nil
}

// filterableMetadata is ErrInvalidInput for a metadata filter that names a
// key of Encryption.MetadataKeys: its values are stored encrypted, each
// ciphertext unlike any other, so the store's comparison would match
// nothing.
func (e *Engine) filterableMetadata(filter []byte) error {
	if e.crypt == nil || e.crypt.metadata == nil {
		return nil
	}
	var sealed []string
	eachMember(filter, func(_, key, _ []byte) {
		if e.crypt.metadata[string(key)] {
			sealed = append(sealed, string(key))
		}
	})
	if len(sealed) > 0 {
		return fmt.Errorf("%w: metadata filter: key %q is encrypted (Encryption.MetadataKeys), so no stored value equals it; filter on a key that is not encrypted", ErrInvalidInput, sealed[0])
	}
	return nil
}

// openInfos decrypts the encrypted metadata keys of checkpoints of one
// thread: those of MetadataKeys and any other that holds a ciphertext (a
// key encrypted under an earlier MetadataKeys). An Engine that does not
// encrypt refuses them (ErrEncrypted), as refuseCiphertext does.
func (e *Engine) openInfos(ctx context.Context, threadID string, infos []CheckpointInfo) error {
	sealed := false
	for i := range infos {
		sealed = sealed || holdsCiphertext(infos[i].Metadata)
	}
	if e.crypt == nil && sealed {
		return e.refuseThread(ctx, threadID)
	}
	if e.crypt == nil || (e.crypt.metadata == nil && !sealed) || len(infos) == 0 {
		return nil
	}
	var ks []*dataKey // the thread's key, read at its first use
	ownKey := func() ([]*dataKey, error) {
		if ks == nil {
			k, err := e.dataKey(ctx, threadID, false)
			if err != nil {
				return nil, err
			}
			ks = []*dataKey{k}
		}
		return ks, nil
	}
	out := make([][]byte, len(infos))
	var err error
	for i := range infos {
		id := infos[i].ID
		copied := map[uuid.UUID]bool{} // origins of another checkpoint: a branch's or a merge's
		eachMember(infos[i].Metadata, func(_, _, v []byte) {
			if o, ok := peekOrigin(v); ok && o != id {
				copied[o] = true
			}
		})
		keyFor := func(uuid.UUID) ([]*dataKey, error) { return ownKey() }
		if len(copied) > 0 {
			// Rare (a branch's first checkpoint, a merge): checked as Get
			// checks them, against the checkpoint's lineage.
			if _, keyFor, err = e.originKeys(ctx, infos[i], copied); err != nil {
				return err
			}
		}
		if out[i], err = openObject(fieldMetadata, infos[i].Metadata, e.crypt.metadataKeys(), keyFor); err != nil {
			return err
		}
	}
	for i := range infos {
		infos[i].Metadata = out[i]
	}
	return nil
}

// openInfosOfThreads is openInfos for checkpoints of any threads.
func (e *Engine) openInfosOfThreads(ctx context.Context, infos []CheckpointInfo) error {
	if e.crypt == nil || e.crypt.metadata == nil {
		sealed := false
		for i := range infos {
			sealed = sealed || holdsCiphertext(infos[i].Metadata)
		}
		if !sealed {
			return nil
		}
	}
	byThread := map[string][]int{}
	for i, c := range infos {
		byThread[c.ThreadID] = append(byThread[c.ThreadID], i)
	}
	for thread, at := range byThread {
		some := make([]CheckpointInfo, len(at))
		for j, i := range at {
			some[j] = infos[i]
		}
		if err := e.openInfos(ctx, thread, some); err != nil {
			return err
		}
		for j, i := range at {
			infos[i].Metadata = some[j].Metadata
		}
	}
	return nil
}

// RewrapResult is what RewrapKeys did.
type RewrapResult struct {
	Rewrapped int // data keys wrapped again under the provider's current key
	Shredded  int // shredded keys, left as they are
	// Failed counts the keys the provider did not unwrap or wrap again
	// (ErrEncrypted), left as they are; the error names the first.
	Failed int
}

// RewrapKeys wraps every data key of e's tenant again with the
// KeyProvider's current key-encryption key, without reading or rewriting
// any content: the rotation of a KEK. Give the provider the new key as
// current and the old one for unwrapping, call RewrapKeys, then remove the
// old key from the provider. Each key is replaced only if no one changed
// it meanwhile; a concurrent run, or ShredThread, is harmless: under a
// KeyShredder the provider destroys whichever wrapping no row holds
// afterwards, the old one or the new. Run it once per tenant
// (ForTenant). Errors: ErrInvalidInput for an Engine that does not
// encrypt, or one in a caller's transaction (WithTx) whose provider is a
// KeyShredder (it would destroy the old wrappings before the commit);
// ErrEncrypted when a key does not unwrap or the provider does not wrap
// it again, naming the first such thread (the others are rewrapped all
// the same, Failed counts those left: run it again once the provider holds
// their keys); ErrKeyNotDestroyed when a KeyShredder did not
// destroy a wrapping no row holds any more (the row is rewrapped all the
// same; PruneKeys destroys it); the store's errors.
func (e *Engine) RewrapKeys(ctx context.Context) (_ RewrapResult, err error) {
	ctx, done := e.tel.call(ctx, "RewrapKeys")
	defer func() { done(err) }()
	var r RewrapResult
	if e.crypt == nil {
		return r, fmt.Errorf("rewrap keys: %w: the engine has no Config.Encryption", ErrInvalidInput)
	}
	if err := e.refuseHeldInTx("rewrap keys"); err != nil {
		return r, err
	}
	after := ""
	var failed error // the first key that did not unwrap or wrap
	for {
		keys, err := e.store.DataKeys(ctx, after, 100)
		if err != nil {
			return r, fmt.Errorf("rewrap keys: %w", err)
		}
		if len(keys) == 0 {
			return r, failed
		}
		for _, w := range keys {
			after = w.ThreadID
			rewrapped, shredded, err := e.rewrapKey(ctx, w)
			if rewrapped {
				r.Rewrapped++
			}
			if shredded {
				r.Shredded++
			}
			switch {
			case errors.Is(err, ErrEncrypted):
				// One key the provider cannot open (an unknown KEK, a
				// key imported from elsewhere) stops no other's rotation.
				r.Failed++
				if failed == nil {
					failed = fmt.Errorf("rewrap keys: thread %q: %w", w.ThreadID, err)
				}
			case err != nil:
				return r, fmt.Errorf("rewrap keys: thread %q: %w", w.ThreadID, err)
			}
		}
	}
}

// rewrapKey wraps the data key of w's thread, read as w, again under the
// provider's current KEK, if the row is still w: it reports whether it
// did, or whether the key is shredded. Under a KeyShredder it has the
// provider destroy whichever wrapping no row holds afterwards: the old
// one, or its own when the row changed first (another rotation, a
// shredding). A row that changed before the old wrapping was unwrapped is
// read again (unwrapRow): a KeyShredder may have destroyed what the row
// held.
// Errors: ErrEncrypted when a key still in its row does not unwrap, or
// does not wrap; ErrKeyNotDestroyed; the store's errors.
func (e *Engine) rewrapKey(ctx context.Context, w WrappedKey) (rewrapped, shredded bool, err error) {
	dek, w, err := e.crypt.unwrapRow(ctx, e.store, e.Tenant(), w)
	switch {
	case errors.Is(err, ErrNotFound): // the thread was deleted
		return false, false, nil
	case err != nil:
		return false, false, err
	case dek == nil:
		return false, true, nil
	}
	kek, wrapped, err := e.crypt.keys.WrapKey(ctx, dek, wrapAD(e.Tenant(), w.ThreadID))
	if err != nil {
		return false, false, fmt.Errorf("%w: %v", ErrEncrypted, err)
	}
	mine := WrappedKey{ThreadID: w.ThreadID, KEKID: kek, Wrapped: wrapped}
	ok, err := e.store.RewrapDataKey(ctx, w, mine)
	if err != nil {
		// Whether mine was stored is unknown: PruneKeys removes it if not.
		return false, false, err
	}
	unused := w
	if !ok {
		unused = mine
	}
	if err := e.crypt.shredUnused(ctx, unused, e.Tenant()); err != nil {
		return ok, false, fmt.Errorf("%w: the wrapping replaced (PruneKeys will destroy it): %v", ErrKeyNotDestroyed, err)
	}
	return ok, false, nil
}

// maxKeyRowAttempts bounds how often a call reads a key row again that
// changed under it: each change is another caller's progress.
const maxKeyRowAttempts = 8

// sameWrapping reports whether a and b are the same wrapping of a key.
func sameWrapping(a, b WrappedKey) bool {
	return a.KEKID == b.KEKID && bytes.Equal(a.Wrapped, b.Wrapped)
}

// MinKeyPruneGrace is the least grace PruneKeys takes.
const MinKeyPruneGrace = time.Minute

// PruneKeys has the key provider, a KeyPruner such as HeldKeys, destroy
// the data keys it holds that no key row names and that it made more
// than grace ago, and returns how many it destroyed. Such keys are left
// by a thread's first write that rolled back (a caller's transaction) or
// failed, a process that stopped between making a key and storing its
// row or between a rotation and the shredding of the wrapping it
// replaced; a key that lost the race to be a thread's first, or that a
// rotation or a shredding replaced, is destroyed at once. Only the keys
// of e's tenant and of each of tenants are considered, against the rows
// of those tenants: the keys of a tenant not named are kept (HeldKeys
// tells a key's tenant by its file's name). The limit: two databases that
// share one provider (one HeldKeys directory) and have tenants of the
// same name cannot be told apart, and a prune through one destroys the
// other's keys of those tenants; give each database a provider of its own.
// grace must be longer than any transaction that writes a thread's first
// checkpoint: the row of a key made in a transaction not yet committed is
// seen by no one else, and the key would be destroyed under it.
// PruneKeys is refused in a caller's transaction (WithTx): it destroys
// keys at once, and the transaction could roll back.
// Errors: ErrInvalidInput for an Engine that does not encrypt, a provider
// that is not a KeyPruner, an Engine in a caller's transaction, a grace
// under MinKeyPruneGrace, a bad tenant.
func (e *Engine) PruneKeys(ctx context.Context, grace time.Duration, tenants ...string) (_ int, err error) {
	ctx, done := e.tel.call(ctx, "PruneKeys")
	defer func() { done(err) }()
	if e.crypt == nil {
		return 0, fmt.Errorf("prune keys: %w: the engine has no Config.Encryption", ErrInvalidInput)
	}
	p, ok := e.crypt.keys.(KeyPruner)
	if !ok {
		return 0, fmt.Errorf("prune keys: %w: the key provider (%T) holds no data keys to prune", ErrInvalidInput, e.crypt.keys)
	}
	if err := e.refuseHeldInTx("prune keys"); err != nil {
		return 0, err
	}
	if grace < MinKeyPruneGrace {
		return 0, fmt.Errorf("prune keys: %w: a grace of %s; it is at least %s, longer than any transaction that makes a key", ErrInvalidInput, grace, MinKeyPruneGrace)
	}
	// Taken before the rows are read: a key made before it whose row
	// is not among them never had one, or lost it.
	before := time.Now().Add(-grace)
	engines := []*Engine{e}
	for _, t := range tenants {
		te, err := e.ForTenant(t)
		if err != nil {
			return 0, fmt.Errorf("prune keys: %w", err)
		}
		engines = append(engines, te)
	}
	named := map[string]bool{}
	for _, te := range engines {
		for after := ""; ; {
			keys, err := te.store.DataKeys(ctx, after, 1000)
			if err != nil {
				return 0, fmt.Errorf("prune keys: %w", err)
			}
			if len(keys) == 0 {
				break
			}
			for _, k := range keys {
				after = k.ThreadID
				if k.Wrapped != nil {
					named[string(k.Wrapped)] = true
				}
			}
		}
	}
	names := make([]string, len(engines))
	for i, te := range engines {
		names[i] = te.Tenant()
	}
	n, err := p.PruneKeys(ctx, names, before, func(wrapped []byte) bool { return named[string(wrapped)] })
	if err != nil {
		return n, fmt.Errorf("prune keys: %w", err)
	}
	return n, nil
}

// ShredThread erases a thread's content by deleting its data key
// (crypto-shredding): every checkpoint and pending write of the thread,
// in the database and in every copy of its rows made since (an export, a
// replica), can no longer be decrypted, by anyone; reads return
// ErrEncrypted, and so do writes to the thread. The thread's rows stay
// until deleted (DeleteThreads). A backup of the database taken before
// the shredding still holds the wrapped key: whoever holds that backup and
// the key-encryption key can read the thread. To make shredding reach
// backups, keep data keys out of the database's backups: a KeyShredder
// (HeldKeys, or one over a KMS) holds each data key itself, the database
// only a reference, and ShredThread has it destroy the wrapping it
// shredded in the row (one a RewrapKeys running at the same moment made
// included); or destroy the KEK that wrapped the key in every backup.
// Should the provider fail to destroy the key, or the process stop
// before it does, the key row is shredded all the same and the key is
// named by no row: PruneKeys destroys it. Other processes may use a key
// they unwrapped for up to Encryption.KeyCacheTTL. It reports whether the
// thread had a key. Errors: ErrInvalidInput for an Engine that does not
// encrypt, a bad thread id, or an Engine in a caller's transaction
// (WithTx) whose provider is a KeyShredder (it would destroy the key
// before the commit, and a rollback would leave the row naming a
// destroyed key; LocalKeys may shred in a transaction); ErrKeyNotDestroyed,
// with true, when the row is shredded but the provider did not destroy
// the key; ErrTransient when the key row kept changing.
func (e *Engine) ShredThread(ctx context.Context, threadID string) (_ bool, err error) {
	ctx, done := e.tel.call(ctx, "ShredThread", attrThread.String(threadID))
	defer func() { done(err) }()
	if e.crypt == nil {
		return false, fmt.Errorf("shred thread: %w: the engine has no Config.Encryption", ErrInvalidInput)
	}
	if err := checkID("thread id", threadID, false); err != nil {
		return false, fmt.Errorf("shred thread: %w", err)
	}
	if err := e.refuseHeldInTx("shred thread"); err != nil {
		return false, err
	}
	e.crypt.forget(e.Tenant(), threadID)
	defer e.crypt.forget(e.Tenant(), threadID)
	sh, held := e.crypt.keys.(KeyShredder)
	for attempt := 0; ; attempt++ {
		w, err := e.store.DataKey(ctx, threadID)
		switch {
		case errors.Is(err, ErrNotFound):
			w = WrappedKey{ThreadID: threadID} // recorded as shredded, so it never gets a key
		case err != nil:
			return false, fmt.Errorf("shred thread %q: %w", threadID, err)
		case w.Wrapped == nil:
			return false, nil
		}
		shredded, err := e.store.ShredDataKey(ctx, w)
		if err != nil {
			return false, fmt.Errorf("shred thread %q: %w", threadID, err)
		}
		if shredded && held && w.Wrapped != nil {
			// The row first, then the provider's copy of what it held: a
			// rotation or a reader that read the row before sees either
			// the key or the row shredded, never a key row whose key is
			// gone.
			if err := sh.ShredKey(ctx, w.KEKID, w.Wrapped, wrapAD(e.Tenant(), threadID)); err != nil {
				return true, fmt.Errorf("shred thread %q: %w: the key row is shredded (PruneKeys will destroy the key): %v", threadID, ErrKeyNotDestroyed, err)
			}
		}
		if shredded {
			return w.Wrapped != nil, nil
		}
		// The row changed since it was read (a rotation re-wrapped it, a
		// first write made it): what the provider holds for it now is
		// destroyed in turn.
		if attempt == maxKeyRowAttempts {
			return false, fmt.Errorf("shred thread %q: %w: its key row changed %d times while it was shredded; try again", threadID, ErrTransient, attempt+1)
		}
	}
}
