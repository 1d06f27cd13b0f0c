package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// Errors of Open, OpenDB and the migration helpers. Match them with
// errors.Is. The errors of the Store's methods are the engine's sentinels
// (engine.ErrNotFound, engine.ErrInvalidInput, engine.ErrIDConflict,
// engine.ErrTransient, engine.ErrPermission, engine.ErrStorageFull).
var (
	// ErrNoDirectory: the directory the database file should be in does
	// not exist. Nothing was created. It wraps engine.ErrInvalidInput.
	ErrNoDirectory = fmt.Errorf("%w: the database file's directory does not exist", engine.ErrInvalidInput)

	// ErrNotDatabase: the file exists and is not a SQLite database. It was
	// not changed. It wraps engine.ErrInvalidInput.
	ErrNotDatabase = fmt.Errorf("%w: the file is not a SQLite database", engine.ErrInvalidInput)

	// ErrNotMigrated: the database has no pgcheckpoint schema, or an older
	// one (or the file does not exist). Migrate it: Migrate, Options.Migrate,
	// or `migrate -database sqlite:PATH up`. It wraps engine.ErrNotMigrated,
	// which the Postgres store gives for the same.
	ErrNotMigrated = fmt.Errorf("%w (sqlite); run migrate up (or open with Options.Migrate)", engine.ErrNotMigrated)

	// ErrNewerSchema: the database was migrated by a newer version of
	// pgcheckpoint than this one; upgrade this program rather than migrate
	// down, which would drop data. It wraps engine.ErrNewerSchema.
	ErrNewerSchema = fmt.Errorf("%w (sqlite)", engine.ErrNewerSchema)

	// ErrDirtySchema: a migration failed halfway (golang-migrate's dirty
	// flag): the process died in it. Force(ctx, db, -1), then Migrate,
	// runs it again (cmd/migrate: force -1, then up). It wraps
	// engine.ErrDirtySchema.
	ErrDirtySchema = fmt.Errorf("%w (sqlite)", engine.ErrDirtySchema)
)

// resultCode returns the primary SQLite result code of err, or 0.
func resultCode(err error) int {
	var e *sqlite3.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

// storeError types the driver errors any call may meet, at the edge of
// its transaction (see Store.write and Store.read): a busy or locked
// database (another writer held it past the busy timeout) as
// engine.ErrTransient, since a retry may pass; a read-only one as
// engine.ErrPermission; a full disk (or max_page_count reached) as
// engine.ErrStorageFull. SQLite rolls back the transaction of each, so
// nothing was written.
func storeError(err error) error {
	var sentinel error
	switch resultCode(err) {
	case sqlite3lib.SQLITE_BUSY, sqlite3lib.SQLITE_LOCKED:
		sentinel = engine.ErrTransient
	case sqlite3lib.SQLITE_READONLY:
		sentinel = engine.ErrPermission
	case sqlite3lib.SQLITE_FULL:
		sentinel = engine.ErrStorageFull
	default:
		return err
	}
	if errors.Is(err, sentinel) {
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// dbError maps a driver error to the engine's sentinels, keeping it in the
// chain; what names the operation.
func dbError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s: %w", what, engine.ErrNotFound)
	case resultCode(err) == sqlite3lib.SQLITE_CONSTRAINT:
		return fmt.Errorf("%s: %w: %v", what, engine.ErrInvalidInput, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
