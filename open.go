// Package pgcheckpoint opens a checkpoint store from a URL and returns a
// ready Engine: Postgres for production, a SQLite file for local
// development and tests, behind the same API (package engine).
//
//	eng, err := pgcheckpoint.Open(ctx, "sqlite:agent.db", pgcheckpoint.Options{Migrate: true})
//	if err != nil { ... }
//	defer eng.Close()
//	res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run-42"})
//
// Applications that already hold a pgx pool make the Engine over it:
// engine.New(postgres.NewStore(pool, postgres.Options{}), cfg). The pool of
// an Engine that Open made is eng.Store().(*postgres.Store).DB(), a
// *pgxpool.Pool, for the transactions an application hands to
// Engine.WithTx.
package pgcheckpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/dburl"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// ErrBadURL is returned for a database URL that names no store this
// package can open, or that Postgres cannot parse; schema.ErrBadURL is the
// same value. The errors of ParseURL and Open that wrap it also wrap
// engine.ErrInvalidInput.
var ErrBadURL = dburl.ErrBadURL

// ErrConnect is returned when the Postgres server cannot be reached or
// refuses the connection. The error says why once (the server's own error,
// e.g. SQLSTATE 3D000 for a database that does not exist, class 28 for a
// failed authentication) and wraps the driver's (errors.As finds a
// *pgconn.PgError).
var ErrConnect = dburl.ErrConnect

// The kinds of store a URL names.
const (
	KindPostgres = dburl.KindPostgres
	KindSQLite   = dburl.KindSQLite
)

// MemoryPath is the SQLite path of a private in-memory database, gone when
// the Engine is closed: "sqlite::memory:" as a URL. For tests.
const MemoryPath = dburl.MemoryPath

// Options tunes Open.
type Options struct {
	// Migrate brings the database's schema up to date before Open returns
	// (creating it in an empty database or a new SQLite file). Without it,
	// a database that is not migrated is engine.ErrNotMigrated, whose
	// message names the fix. A database migrated by a newer version is
	// engine.ErrNewerSchema either way.
	Migrate bool
	// Config is the Engine's configuration.
	Config engine.Config
	// Postgres is the Postgres store's configuration; a SQLite store
	// ignores it.
	Postgres postgres.Options
}

// ParseURL tells which store a URL names and returns what that store opens:
//
//	postgres://... or postgresql://...  KindPostgres, the URL as it is
//	host=... dbname=... (keyword/value) KindPostgres, the string as it is
//	sqlite:PATH                         KindSQLite, PATH (relative or absolute)
//	sqlite:///abs/path.db               KindSQLite, /abs/path.db
//	sqlite::memory:                     KindSQLite, MemoryPath
//
// Package schema, cmd/ckpt and cmd/migrate read URLs by the same rule.
// Errors: ErrBadURL (for an empty URL too).
func ParseURL(url string) (kind, target string, err error) {
	kind, target, err = dburl.Parse(url)
	return kind, target, invalidInput(err)
}

// invalidInput makes a URL error match engine.ErrInvalidInput too, as
// every bad argument of the Engine does (package dburl, which package
// schema imports, cannot import engine).
func invalidInput(err error) error {
	if errors.Is(err, ErrBadURL) {
		return badURL{err}
	}
	return err
}

type badURL struct{ error }

func (e badURL) Unwrap() []error { return []error{e.error, engine.ErrInvalidInput} }

// Open connects to the store the URL names (see ParseURL) and returns an
// Engine over it; Close the Engine to release the pool or file. Errors:
// ErrBadURL; ErrConnect, for a Postgres server that cannot be reached or
// refuses the connection; on either store, engine.ErrNotMigrated for a
// database with no pgcheckpoint schema or an older one (without
// opts.Migrate), engine.ErrNewerSchema for one migrated by a newer version,
// engine.ErrDirtySchema; for SQLite, the other errors of sqlite.Open (a
// missing directory, a file that is not a SQLite database).
func Open(ctx context.Context, url string, opts Options) (*engine.Engine, error) {
	kind, target, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	var store engine.Store
	switch kind {
	case KindPostgres:
		store, err = openPostgres(ctx, target, opts)
	case KindSQLite:
		store, err = sqlite.Open(ctx, target, sqlite.Options{Migrate: opts.Migrate})
	}
	if err != nil {
		return nil, err
	}
	return engine.New(store, opts.Config), nil
}

func openPostgres(ctx context.Context, url string, opts Options) (engine.Store, error) {
	cfg, err := dburl.PostgresConfig(url)
	if err != nil {
		return nil, invalidInput(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, dburl.ConnectError(cfg.ConnConfig, err)
	}
	if err := postgres.CheckSchema(ctx, pool); err != nil && !(opts.Migrate && errors.Is(err, engine.ErrNotMigrated)) {
		pool.Close()
		return nil, err
	}
	if opts.Migrate {
		if err := schema.Migrate(ctx, url); err != nil {
			pool.Close()
			return nil, fmt.Errorf("migrate: %w", err)
		}
	}
	pgOpts := opts.Postgres
	pgOpts.ClosePool = true // the pool is the store's alone
	return postgres.NewStore(pool, pgOpts), nil
}
