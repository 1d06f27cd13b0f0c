package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// storeExtras is what ckpt web needs of a store beyond the Engine's API: a
// thread's expiry, and a retention policy's result without its deletes.
// The policy's rule stays where it is (the SQL function thread_gc on
// Postgres, the SQLite store's own code): the preview runs the policy
// itself where its deletes cannot last.
type storeExtras interface {
	// expiry returns when a thread expires and what expiry keeps of it
	// ("delete" or "keep_latest"); the zero time when it does not.
	expiry(ctx context.Context, threadID string) (time.Time, string, error)
	// previewPrune returns what PruneThreads(p, threadID) would delete,
	// deleting nothing.
	previewPrune(ctx context.Context, threadID string, p engine.Policy) (engine.DeleteResult, error)
	close() error
}

// errNoPreview says why a store cannot preview a policy.
var errNoPreview = errors.New("no retention preview")

// newStoreExtras returns the extras of the store that dbURL names and eng
// is open on.
func newStoreExtras(ctx context.Context, dbURL string, eng *engine.Engine) (storeExtras, error) {
	kind, target, err := pgcheckpoint.ParseURL(dbURL)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	if kind == pgcheckpoint.KindPostgres {
		st, ok := eng.Store().(*postgres.Store)
		if !ok {
			return nil, fmt.Errorf("web: a Postgres URL opened a %T", eng.Store())
		}
		return pgExtras{eng: eng, db: st.DB()}, nil
	}
	x := &sqliteExtras{path: target}
	if target != sqlite.Memory {
		// A connection of its own that reads the file (OpenDB without
		// Migrate writes nothing): the store's are not reachable.
		if x.db, err = sqlite.OpenDB(ctx, target, sqlite.Options{}); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// pgExtras are the Postgres store's extras.
type pgExtras struct {
	eng *engine.Engine
	db  postgres.DB
}

// pgThreadExpiry reads a thread's expiry (set on every namespace row alike).
const pgThreadExpiry = `SELECT expires_at, expire_action FROM pgcheckpoint.threads
WHERE thread_id = $1 ORDER BY namespace LIMIT 1`

func (x pgExtras) expiry(ctx context.Context, threadID string) (time.Time, string, error) {
	var at *time.Time
	var action string
	err := x.db.QueryRow(ctx, pgThreadExpiry, threadID).Scan(&at, &action)
	if err != nil || at == nil {
		return time.Time{}, "", ignoreNoRows(err)
	}
	return *at, action, nil
}

// previewPrune runs the policy in a transaction it rolls back: the SQL
// function decides, under the thread's lock, and nothing it deleted stays.
func (x pgExtras) previewPrune(ctx context.Context, threadID string, p engine.Policy) (engine.DeleteResult, error) {
	tx, err := x.db.Begin(ctx)
	if err != nil {
		return engine.DeleteResult{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	inTx, err := x.eng.WithTx(tx)
	if err != nil {
		return engine.DeleteResult{}, err
	}
	return inTx.PruneThreads(ctx, p, threadID)
}

func (x pgExtras) close() error { return nil }

// sqliteExtras are the SQLite store's extras, over a connection of their
// own to the file (nil for an in-memory database, which no other
// connection sees).
type sqliteExtras struct {
	path string
	db   *sql.DB
}

func (x *sqliteExtras) expiry(ctx context.Context, threadID string) (time.Time, string, error) {
	if x.db == nil {
		return time.Time{}, "", nil
	}
	rows, err := sqlitedb.New(x.db).ThreadListRows(ctx, threadID)
	if err != nil {
		return time.Time{}, "", err
	}
	for _, r := range rows {
		if r.ExpiresAt.Valid {
			return time.UnixMicro(r.ExpiresAt.Int64), r.ExpireAction, nil
		}
	}
	return time.Time{}, "", nil
}

// previewPrune copies the database (VACUUM INTO, one consistent snapshot)
// to a temporary file, applies the policy there with the SQLite store, and
// removes the copy: the file itself is only read.
func (x *sqliteExtras) previewPrune(ctx context.Context, threadID string, p engine.Policy) (engine.DeleteResult, error) {
	if x.db == nil {
		return engine.DeleteResult{}, fmt.Errorf("%w: an in-memory database has no file to copy", errNoPreview)
	}
	dir, err := os.MkdirTemp("", "ckpt-web-preview-")
	if err != nil {
		return engine.DeleteResult{}, err
	}
	defer os.RemoveAll(dir)
	copyPath := filepath.Join(dir, "preview.db")
	if _, err := x.db.ExecContext(ctx, `VACUUM INTO ?`, copyPath); err != nil {
		return engine.DeleteResult{}, fmt.Errorf("copy the database for the preview: %w", err)
	}
	st, err := sqlite.Open(ctx, copyPath, sqlite.Options{})
	if err != nil {
		return engine.DeleteResult{}, err
	}
	eng := engine.New(st, engine.Config{})
	defer eng.Close()
	return eng.PruneThreads(ctx, p, threadID)
}

func (x *sqliteExtras) close() error {
	if x.db == nil {
		return nil
	}
	return x.db.Close()
}

// ignoreNoRows is err, or nil for "no rows" from either driver.
func ignoreNoRows(err error) error {
	if errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}
