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
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// ErrBadURL is returned for a database URL that names no store this
// package can open. It wraps engine.ErrInvalidInput.
var ErrBadURL = fmt.Errorf("%w: database URL", engine.ErrInvalidInput)

// The kinds of store a URL names.
const (
	KindPostgres = "postgres"
	KindSQLite   = "sqlite"
)

// MemoryPath is the SQLite path of a private in-memory database, gone when
// the Engine is closed: "sqlite::memory:" as a URL. For tests.
const MemoryPath = ":memory:"

// Options tunes Open.
type Options struct {
	// Migrate brings the database's schema up to date before Open returns
	// (creating it in an empty database or a new SQLite file). Without it,
	// a database that is not migrated gives an error naming the fix.
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
//	sqlite:PATH                         KindSQLite, PATH (relative or absolute)
//	sqlite:///abs/path.db               KindSQLite, /abs/path.db
//	sqlite::memory:                     KindSQLite, MemoryPath
//
// Errors: ErrBadURL.
func ParseURL(url string) (kind, target string, err error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return KindPostgres, url, nil
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		if strings.HasPrefix(path, "//") {
			path = strings.TrimPrefix(path, "//")
		}
		if path == "" {
			return "", "", fmt.Errorf("%w %q has no file path: use sqlite:PATH, e.g. sqlite:agent.db, or sqlite::memory:", ErrBadURL, url)
		}
		if strings.ContainsRune(path, 0) {
			return "", "", fmt.Errorf("%w: the SQLite path contains a NUL character", ErrBadURL)
		}
		return KindSQLite, path, nil
	}
	shown := url
	if i := strings.Index(shown, "://"); i >= 0 {
		shown = shown[:i+3] + "..." // keep credentials out of messages
	}
	return "", "", fmt.Errorf("%w %q: want postgres://..., postgresql://..., sqlite:PATH or sqlite::memory:", ErrBadURL, shown)
}

// Open connects to the store the URL names (see ParseURL) and returns an
// Engine over it; Close the Engine to release the pool or file. Errors:
// ErrBadURL; a Postgres server that cannot be reached; for SQLite, the
// errors of sqlite.Open (a missing directory, a file that is not a SQLite
// database, a database migrated by a newer version).
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
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot connect to Postgres at %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, oneLine{err})
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

// oneLine is an error shown on one line, each of its lines once: pgx
// reports a failed connection once per address and TLS mode tried, on lines
// of their own that often say the same thing twice.
type oneLine struct{ err error }

func (e oneLine) Error() string {
	var parts []string
	seen := map[string]bool{}
	for _, l := range strings.Split(e.err.Error(), "\n") {
		l = strings.TrimSuffix(strings.TrimSpace(l), ":")
		if l != "" && !seen[l] {
			seen[l] = true
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, ": ")
}

func (e oneLine) Unwrap() error { return e.err }
