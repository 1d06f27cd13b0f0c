package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// wrappedKey is the one converter of a data key row.
func wrappedKey(thread, kek string, wrapped []byte, shredded sql.NullInt64) engine.WrappedKey {
	k := engine.WrappedKey{ThreadID: thread, KEKID: kek, Wrapped: wrapped}
	if shredded.Valid {
		k.ShreddedAt = fromMicros(shredded.Int64)
		k.Wrapped = nil
	}
	return k
}

// DataKey implements engine.Store.
func (s *Store) DataKey(ctx context.Context, threadID string) (engine.WrappedKey, error) {
	q, err := s.readQueries()
	if err != nil {
		return engine.WrappedKey{}, err
	}
	r, err := q.DataKeyGet(ctx, sqlitedb.DataKeyGetParams{ThreadID: threadID})
	if err != nil {
		return engine.WrappedKey{}, storeError(dbError(fmt.Sprintf("data key of thread %q", threadID), err))
	}
	return wrappedKey(r.ThreadID, r.KekID, r.WrappedKey, r.ShreddedAt), nil
}

// PutDataKey implements engine.Store.
func (s *Store) PutDataKey(ctx context.Context, k engine.WrappedKey) (engine.WrappedKey, error) {
	var out engine.WrappedKey
	err := s.write(ctx, func(q *queries, _ execer) error {
		p := sqlitedb.DataKeyInsertParams{ThreadID: k.ThreadID, KekID: k.KEKID,
			WrappedKey: k.Wrapped, CreatedAt: s.now().UnixMicro()}
		if err := q.DataKeyInsert(ctx, p); err != nil {
			return dbError("store a data key", err)
		}
		r, err := q.DataKeyGet(ctx, sqlitedb.DataKeyGetParams{ThreadID: p.ThreadID})
		if err != nil {
			return dbError("read a data key back", err)
		}
		out = wrappedKey(r.ThreadID, r.KekID, r.WrappedKey, r.ShreddedAt)
		return nil
	})
	return out, err
}

// DataKeys implements engine.Store.
func (s *Store) DataKeys(ctx context.Context, after string, limit int) ([]engine.WrappedKey, error) {
	q, err := s.readQueries()
	if err != nil {
		return nil, err
	}
	rows, err := q.DataKeyList(ctx, sqlitedb.DataKeyListParams{After: after, MaxRows: int64(limit)})
	if err != nil {
		return nil, storeError(err)
	}
	out := make([]engine.WrappedKey, len(rows))
	for i, r := range rows {
		out[i] = wrappedKey(r.ThreadID, r.KekID, r.WrappedKey, r.ShreddedAt)
	}
	return out, nil
}

// RewrapDataKey implements engine.Store.
func (s *Store) RewrapDataKey(ctx context.Context, old, k engine.WrappedKey) (bool, error) {
	var n int64
	err := s.write(ctx, func(q *queries, _ execer) error {
		var err error
		n, err = q.DataKeyRewrap(ctx, sqlitedb.DataKeyRewrapParams{
			ThreadID: old.ThreadID, OldKekID: old.KEKID, OldWrappedKey: old.Wrapped,
			NewKekID: k.KEKID, NewWrappedKey: k.Wrapped, Now: sql.NullInt64{Int64: s.now().UnixMicro(), Valid: true},
		})
		return dbError("rewrap a data key", err)
	})
	return n == 1, err
}

// ShredDataKey implements engine.Store: the key's bytes are gone from the
// row at once, from the file's free pages and WAL once they are reused or
// checkpointed (a copy of the file made before keeps them).
func (s *Store) ShredDataKey(ctx context.Context, old engine.WrappedKey) (bool, error) {
	var n int64
	err := s.write(ctx, func(q *queries, _ execer) error {
		now := s.now().UnixMicro()
		var err error
		if old.Wrapped == nil {
			n, err = q.DataKeyTombstone(ctx, sqlitedb.DataKeyTombstoneParams{Now: now, ThreadID: old.ThreadID})
		} else {
			n, err = q.DataKeyShred(ctx, sqlitedb.DataKeyShredParams{Now: sql.NullInt64{Int64: now, Valid: true},
				ThreadID: old.ThreadID, KekID: old.KEKID, WrappedKey: old.Wrapped})
		}
		return dbError("shred a data key", err)
	})
	return n == 1, err
}

// BranchSource implements engine.Store.
func (s *Store) BranchSource(ctx context.Context, threadID string) (string, error) {
	q, err := s.readQueries()
	if err != nil {
		return "", err
	}
	rows, err := q.ThreadBranchSource(ctx, threadID)
	if err != nil || len(rows) == 0 {
		return "", storeError(err)
	}
	return rows[0], nil
}

// DataKey implements engine.ImportWriter.
func (w *importWriter) DataKey(ctx context.Context, k engine.WrappedKey) error {
	p := sqlitedb.DataKeyImportParams{ThreadID: k.ThreadID, KekID: k.KEKID,
		WrappedKey: k.Wrapped, CreatedAt: time.Now().UnixMicro()}
	if !k.ShreddedAt.IsZero() {
		p.ShreddedAt = sql.NullInt64{Int64: k.ShreddedAt.UnixMicro(), Valid: true}
	}
	n, err := w.q.DataKeyImport(ctx, p)
	if err != nil {
		return importError(fmt.Sprintf("data key of thread %q", k.ThreadID), err)
	}
	if n == 0 {
		return fmt.Errorf("%w: thread %q has a data key already, not the one the file holds (shredded, or of an earlier thread of that id); import into another database", engine.ErrInvalidInput, k.ThreadID)
	}
	return nil
}

// refusePlaintext is engine.ErrEncrypted for content that is not sealed
// (engine.PutRequest.Sealed false) to be written to an encrypted thread:
// one with a data key, shredded or not. It runs in the write's
// transaction, as pgcheckpoint.thread_refuse_plaintext runs under the
// thread's lock on Postgres. threadSealed is whether the thread has a key
// when the write's first read told (CheckpointPlaceNewest); else the key
// is looked up.
func refusePlaintext(ctx context.Context, q *queries, threadID string, sealed bool, threadSealed sql.NullBool) error {
	if sealed {
		return nil
	}
	if !threadSealed.Valid {
		var err error
		if threadSealed.Bool, err = hasDataKey(ctx, q, threadID); err != nil {
			return err
		}
	}
	if !threadSealed.Bool {
		return nil
	}
	return fmt.Errorf("%w: thread %q is encrypted: only content sealed by its data key may be written to it", engine.ErrEncrypted, threadID)
}

// hasDataKey reports whether a thread has a data key, shredded or not: it
// is encrypted, or was (DeleteThreads leaves the key).
func hasDataKey(ctx context.Context, q *queries, threadID string) (bool, error) {
	_, err := q.DataKeyGet(ctx, sqlitedb.DataKeyGetParams{ThreadID: threadID})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, dbError(fmt.Sprintf("data key of thread %q", threadID), err)
	}
	return true, nil
}

// branchKeys holds a branch to the data keys of its source's thread and
// of its own id, as thread_branch does: a branch of an encrypted thread
// holds its sealed values, so it needs its key before it is made
// (engine.ErrEncrypted without: an encrypting Engine makes it first); an
// id that kept a deleted encrypted thread's key takes no branch of a
// thread without one (keylessTarget).
func branchKeys(ctx context.Context, q *queries, sourceThread, newThread string) error {
	srcKeyed, err := hasDataKey(ctx, q, sourceThread)
	if err != nil {
		return err
	}
	newKeyed, err := hasDataKey(ctx, q, newThread)
	switch {
	case err != nil:
		return err
	case srcKeyed && !newKeyed:
		return fmt.Errorf("%w: thread %q is encrypted: branch it through an engine opened with its key", engine.ErrEncrypted, sourceThread)
	case newKeyed && !srcKeyed:
		return keylessTarget(ctx, q, newThread)
	}
	return nil
}

// keylessTarget is engine.ErrInvalidInput for a new thread (a branch, a
// copy) whose id has a data key, left by an encrypted thread of that id
// that was deleted: the content a store copies there is not sealed by that
// key (see refusePlaintext), as thread_branch and thread_copy refuse it.
func keylessTarget(ctx context.Context, q *queries, threadID string) error {
	keyed, err := hasDataKey(ctx, q, threadID)
	if err == nil && keyed {
		err = fmt.Errorf("%w: thread %q has a data key (an encrypted thread of that id was deleted): use another id", engine.ErrInvalidInput, threadID)
	}
	return err
}
