package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// Migrations holds the store's golang-migrate migrations,
// migrations/NNNNNN_name.up.sql and .down.sql, for tools that run them
// themselves.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// latestVersion is the highest version in Migrations.
const latestVersion = 3

// migrationsTable is where golang-migrate records the version (its
// default, so its CLI finds it too).
const migrationsTable = "schema_migrations"

// LatestVersion returns the schema version this package migrates to.
func LatestVersion() uint { return latestVersion }

func newMigrator(db *sql.DB) (*migrate.Migrate, error) {
	src, err := iofs.New(Migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlite migrations: %w", err)
	}
	drv, err := migratesqlite.WithInstance(db, &migratesqlite.Config{MigrationsTable: migrationsTable})
	if err != nil {
		return nil, fmt.Errorf("sqlite migrations: %w", openError(err))
	}
	m, err := migrate.NewWithInstance("iofs", src, "sqlite", drv)
	if err != nil {
		return nil, fmt.Errorf("sqlite migrations: %w", err)
	}
	// m.Close would close db, which belongs to the caller: m is dropped
	// instead (it holds nothing else).
	return m, nil
}

// Migrate migrates db (opened with OpenDB, or any *sql.DB of the
// modernc.org/sqlite driver) up to LatestVersion with golang-migrate's
// sqlite driver. Several processes may migrate one file at once: the
// migrations are idempotent (a migration run again by a process that read
// the version before another applied it changes nothing), and one that
// finds another's migration in flight (golang-migrate's dirty flag) waits
// for it, up to a minute.
// Errors: ErrNewerSchema, ErrNotDatabase, ErrDirtySchema.
func Migrate(ctx context.Context, db *sql.DB) error {
	if err := CheckVersion(ctx, db); err == nil {
		return nil
	} else if !errors.Is(err, ErrNotMigrated) && !errors.Is(err, ErrDirtySchema) {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		m, err := newMigrator(db)
		if err != nil {
			return err
		}
		err = m.Up()
		var dirty migrate.ErrDirty
		switch {
		case err == nil, errors.Is(err, migrate.ErrNoChange):
			return nil
		case errors.As(err, &dirty) && time.Now().Before(deadline):
			// Another process is between its two version updates.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			if err := CheckVersion(ctx, db); err == nil {
				return nil
			}
		case errors.As(err, &dirty):
			return fmt.Errorf("migrate up: %w: version %d", ErrDirtySchema, dirty.Version)
		default:
			return fmt.Errorf("migrate up: %w", openError(err))
		}
	}
}

// Force records version as applied (-1: none) and clears the dirty flag,
// running no SQL: after a migration that failed part way (the process
// died in it), Force(ctx, db, -1) and then Migrate run it again, which is
// safe: it runs in one transaction, so it left nothing, and it is
// idempotent. Errors: engine.ErrInvalidInput for a version this program
// does not know.
func Force(ctx context.Context, db *sql.DB, version int) error {
	if version != -1 && version != 0 && version != int(latestVersion) {
		return fmt.Errorf("force: %w: no SQLite migration has version %d; the SQLite schema has versions -1 (none) and %d", engine.ErrInvalidInput, version, latestVersion)
	}
	if version == 0 {
		version = -1 // golang-migrate's "no version"
	}
	m, err := newMigrator(db)
	if err != nil {
		return err
	}
	if err := m.Force(version); err != nil {
		return fmt.Errorf("force: %w", openError(err))
	}
	return nil
}

// MigrateDown migrates db all the way down: every table of the store is
// dropped, with its data.
func MigrateDown(ctx context.Context, db *sql.DB) error {
	v, _, err := Version(ctx, db)
	if err != nil {
		return err
	}
	if v > latestVersion {
		return fmt.Errorf("migrate down: %w: version %d, this program knows up to %d", ErrNewerSchema, v, latestVersion)
	}
	m, err := newMigrator(db)
	if err != nil {
		return err
	}
	if err := m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// Version returns the schema version of db (0 when it was never
// migrated) and whether a migration failed halfway. It only reads: an
// empty file stays empty. Errors: ErrNotDatabase.
func Version(ctx context.Context, db *sql.DB) (version uint, dirty bool, err error) {
	var n int
	err = db.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, migrationsTable).Scan(&n)
	if err != nil {
		return 0, false, fmt.Errorf("read the schema version: %w", openError(err))
	}
	if n == 0 {
		return 0, false, nil
	}
	var v int64
	err = db.QueryRowContext(ctx, `SELECT version, dirty FROM `+migrationsTable+` LIMIT 1`).Scan(&v, &dirty)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("read the schema version: %w", openError(err))
	case v < 0:
		return 0, dirty, nil
	}
	return uint(v), dirty, nil
}

// CheckVersion returns nil when db is at LatestVersion; else
// ErrNotMigrated (older or none), ErrNewerSchema, ErrDirtySchema or
// ErrNotDatabase. It only reads.
func CheckVersion(ctx context.Context, db *sql.DB) error {
	v, dirty, err := Version(ctx, db)
	switch {
	case err != nil:
		return err
	case dirty:
		return fmt.Errorf("%w: version %d", ErrDirtySchema, v)
	case v > latestVersion:
		return fmt.Errorf("%w: schema version %d, this program knows up to %d; upgrade it", ErrNewerSchema, v, latestVersion)
	case v < latestVersion:
		return fmt.Errorf("%w: schema version %d of %d", ErrNotMigrated, v, latestVersion)
	}
	return nil
}
