package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/enginedb"
)

// wrappedKey is the one converter of a data key row.
func wrappedKey(thread, kek string, wrapped []byte, shredded pgtype.Timestamptz) engine.WrappedKey {
	k := engine.WrappedKey{ThreadID: thread, KEKID: kek, Wrapped: wrapped}
	if shredded.Valid {
		k.ShreddedAt = shredded.Time
		k.Wrapped = nil
	}
	return k
}

// DataKey implements engine.Store.
func (s *Store) DataKey(ctx context.Context, threadID string) (engine.WrappedKey, error) {
	r, err := s.eq.DataKeyGet(ctx, threadID)
	if err != nil {
		return engine.WrappedKey{}, dbError(fmt.Sprintf("data key of thread %q", threadID), err)
	}
	return wrappedKey(r.ThreadID, r.KekID, r.WrappedKey, r.ShreddedAt), nil
}

// PutDataKey implements engine.Store.
func (s *Store) PutDataKey(ctx context.Context, k engine.WrappedKey) (engine.WrappedKey, error) {
	r, err := s.eq.DataKeyInsert(ctx, enginedb.DataKeyInsertParams{
		ThreadID: k.ThreadID, KekID: k.KEKID, WrappedKey: k.Wrapped,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		// Another writer's key, committed while this insert waited on
		// it, is newer than the statement's snapshot: the next
		// statement reads it.
		return s.DataKey(ctx, k.ThreadID)
	}
	if err != nil {
		return engine.WrappedKey{}, storeError(err)
	}
	return wrappedKey(r.ThreadID, r.KekID, r.WrappedKey, r.ShreddedAt), nil
}

// DataKeys implements engine.Store.
func (s *Store) DataKeys(ctx context.Context, after string, limit int) ([]engine.WrappedKey, error) {
	rows, err := s.eq.DataKeyList(ctx, enginedb.DataKeyListParams{After: after, MaxRows: int32(limit)})
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
	n, err := s.eq.DataKeyRewrap(ctx, enginedb.DataKeyRewrapParams{
		ThreadID: old.ThreadID, OldKekID: old.KEKID, OldWrappedKey: old.Wrapped,
		NewKekID: k.KEKID, NewWrappedKey: k.Wrapped,
	})
	return n == 1, storeError(err)
}

// ShredDataKey implements engine.Store: the key's bytes are gone from the
// row at once, from the table's files once vacuumed (a backup or a WAL
// archive made before keeps them).
func (s *Store) ShredDataKey(ctx context.Context, old engine.WrappedKey) (bool, error) {
	var n int64
	var err error
	if old.Wrapped == nil {
		n, err = s.eq.DataKeyTombstone(ctx, old.ThreadID)
	} else {
		n, err = s.eq.DataKeyShred(ctx, enginedb.DataKeyShredParams{
			ThreadID: old.ThreadID, KekID: old.KEKID, WrappedKey: old.Wrapped,
		})
	}
	return n == 1, storeError(err)
}

// BranchSource implements engine.Store.
func (s *Store) BranchSource(ctx context.Context, threadID string) (string, error) {
	rows, err := s.eq.ThreadBranchSource(ctx, threadID)
	if err != nil || len(rows) == 0 {
		return "", storeError(err)
	}
	return rows[0], nil
}

// DataKey implements engine.ImportWriter.
func (w *pgImport) DataKey(ctx context.Context, k engine.WrappedKey) error {
	p := enginedb.DataKeyImportParams{ThreadID: k.ThreadID, KekID: k.KEKID, WrappedKey: k.Wrapped}
	if !k.ShreddedAt.IsZero() {
		p.ShreddedAt = pgtype.Timestamptz{Time: k.ShreddedAt, Valid: true}
	}
	n, err := w.q.DataKeyImport(ctx, p)
	if err != nil {
		return pgImportError(err)
	}
	if n == 0 {
		return fmt.Errorf("%w: thread %q has a data key already, not the one the file holds (shredded, or of an earlier thread of that id); import into another database", engine.ErrInvalidInput, k.ThreadID)
	}
	return nil
}
