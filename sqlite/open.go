package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// Memory is the path that opens a private in-memory database, gone at
// Close: for tests.
const Memory = ":memory:"

// DefaultBusyTimeout is the default Options.BusyTimeout.
const DefaultBusyTimeout = 30 * time.Second

// DefaultMaxReaders is the default Options.MaxReaders.
const DefaultMaxReaders = 4

// Options tunes Open. The zero value opens an existing, migrated file.
type Options struct {
	// Migrate creates the file if need be and migrates it up to
	// LatestVersion. Without it, Open fails with ErrNotMigrated on a
	// missing or unmigrated file, and creates nothing.
	Migrate bool
	// BusyTimeout is how long a write waits for another process's write
	// to finish before it fails (SQLite's busy timeout). Zero means
	// DefaultBusyTimeout.
	BusyTimeout time.Duration
	// MaxReaders is the number of connections that serve reads, which in
	// WAL mode never wait for writes. Zero means DefaultMaxReaders.
	MaxReaders int
}

// Store is the SQLite store: an engine.Store over one database file. Use
// it through engine.New. It is safe for concurrent use by any
// number of goroutines, and any number of processes may open one file.
type Store struct {
	w *sql.DB // the writer: one connection, every transaction BEGIN IMMEDIATE
	r *sql.DB // the readers (w itself for an in-memory database)
	// wc holds the writer's connection of a database file (nil for an
	// in-memory database, whose readers share it; see writeConn).
	wc *writeConn
	// The queries prepared on the writer and on the readers: database/sql
	// prepares each statement once per connection, where the driver would
	// otherwise compile it on every call.
	// Only queries (tenant.go) runs them: with the tenant filled in.
	wq, rq *sqlitedb.Queries

	// tenant is the tenant every query reads and writes (see ForTenant);
	// tenantErr, when set, is why the name bound is refused, and every
	// call fails with it.
	tenant    string
	tenantErr error

	now func() time.Time
	// readOnly, when set, says why this process may not write the file:
	// Open opened it for reading, and every write fails with
	// engine.ErrPermission before it begins.
	readOnly string
}

var _ engine.Store = (*Store)(nil)

// Open opens the SQLite database at path (a file path, or Memory) as a
// Store. It sets WAL mode on the file, a busy timeout and foreign keys on
// every connection. With opts.Migrate it creates and migrates the file;
// else the file must exist and be migrated. A file this process may not
// write (the file, its directory or its filesystem is read-only) opens for
// reading: Open writes nothing to it, reads work, and every write fails
// with engine.ErrPermission. Errors: ErrNoDirectory (and nothing
// created), ErrNotDatabase, ErrNewerSchema, ErrDirtySchema,
// ErrNotMigrated, engine.ErrInvalidInput for an empty path,
// engine.ErrPermission for a read-only file that Migrate would have to
// migrate, or create.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if opts.MaxReaders <= 0 {
		opts.MaxReaders = DefaultMaxReaders
	}
	w, acc, err := openDB(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{w: w, r: w, now: time.Now, readOnly: acc.readOnly, tenant: engine.DefaultTenant}
	fail := func(err error) (*Store, error) {
		_ = s.Close()
		return nil, err
	}
	if err := CheckVersion(ctx, w); err != nil {
		if !opts.Migrate || errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrNotDatabase) {
			return fail(fmt.Errorf("open %s: %w", path, err))
		}
		if acc.readOnly != "" {
			return fail(fmt.Errorf("open %s: %w: %s, so it cannot be migrated (%w)", path, engine.ErrPermission, acc.readOnly, err))
		}
		if err := Migrate(ctx, w); err != nil {
			return fail(fmt.Errorf("open %s: %w", path, err))
		}
	}
	if acc.readOnly == "" {
		if err := setWAL(ctx, w, path, opts.BusyTimeout); err != nil {
			return fail(err)
		}
	}
	if path != Memory {
		// Readers get connections of their own: in WAL mode they read a
		// snapshot and never wait for the writer.
		r := acc
		if r.readOnly == "" {
			r.mode = "rw"
		}
		s.r, err = sql.Open("sqlite", dsn(path, r, opts)+"&_pragma=query_only(1)")
		if err != nil {
			return fail(fmt.Errorf("open %s: %w", path, err))
		}
		s.r.SetMaxOpenConns(opts.MaxReaders)
		s.r.SetMaxIdleConns(opts.MaxReaders)
	}
	if s.r == s.w {
		if s.wq, err = sqlitedb.Prepare(ctx, s.w); err != nil {
			return fail(fmt.Errorf("open %s: prepare: %w", path, err))
		}
		s.rq = s.wq
		return s, nil
	}
	if s.wc, err = holdWriter(ctx, s.w); err != nil {
		return fail(fmt.Errorf("open %s: %w", path, err))
	}
	s.wq = s.wc.q
	// Nothing of the store runs on w but through wc; what else does (the
	// tests of migrations, as a second process would) gets a connection of
	// its own rather than waiting for the held one forever.
	s.w.SetMaxOpenConns(2)
	if s.rq, err = sqlitedb.Prepare(ctx, s.r); err != nil {
		return fail(fmt.Errorf("open %s: prepare: %w", path, err))
	}
	return s, nil
}

// writeConn is the writer's one connection of a database file, held for
// the store's life, with every statement a write runs prepared on it once,
// BEGIN IMMEDIATE and COMMIT included: through database/sql's transactions
// the driver would compile those two again for every write. Writers of
// this process take turns on it (mu), and writers that queue share a
// commit (see run).
type writeConn struct {
	mu      sync.Mutex
	waiting atomic.Int32 // writers blocked on mu
	// group is the open transaction's commit, which the writes done in it
	// wait for; nil outside a transaction.
	group                   *commitGroup
	conn                    *sql.Conn
	begin, commit, rollback *sql.Stmt
	// savepoint, release and rollbackTo bound a write that joins an open
	// transaction (see run).
	savepoint, release, rollbackTo *sql.Stmt
	q                              *sqlitedb.Queries
	// texts holds the statements a write runs by their text (SAVEPOINT and
	// the like, see ExecContext), each prepared on its first use.
	texts map[string]*sql.Stmt
	// yieldMax bounds yieldToQueued's wait: maxYield.
	yieldMax time.Duration
	// closed: close ran (under mu); a write after it fails with
	// errClosed instead of using the statements it finalized.
	closed bool
}

// errClosed is the error of a write to a Store that was closed.
var errClosed = fmt.Errorf("sqlite store: closed: %w", sql.ErrConnDone)

// maxGroup is how many writes at most share one commit.
const maxGroup = 32

// maxYield is how long at most a run alone (a sweep's batch, a prune, an
// import) lets the writes queued for the connection go first (see
// yieldToQueued).
const maxYield = 10 * time.Millisecond

// commitGroup is one transaction's commit, shared by the writes done in
// it.
type commitGroup struct {
	writes int           // writes done in the transaction so far
	done   chan struct{} // closed when the transaction ended
	err    error         // the COMMIT's error, set before done closes
	// lost: the transaction ended without a COMMIT (a later write's error
	// took it all back): its writes must run again.
	lost bool
}

// ExecContext runs a statement given by its text inside a write (under
// mu): prepared on its first use and kept for the connection's life, where
// the driver would compile it again on every call. Its callers pass
// constant texts, so the statements kept are few.
func (wc *writeConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st := wc.texts[query]
	if st == nil {
		var err error
		if st, err = wc.conn.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
		if wc.texts == nil {
			wc.texts = map[string]*sql.Stmt{}
		}
		wc.texts[query] = st
	}
	return st.ExecContext(ctx, args...)
}

// holdWriter takes the one connection of w (nothing else of the store runs
// on w after this) and prepares a write's statements on it.
func holdWriter(ctx context.Context, w *sql.DB) (*writeConn, error) {
	conn, err := w.Conn(ctx)
	if err != nil {
		return nil, err
	}
	wc := &writeConn{conn: conn, yieldMax: maxYield}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&wc.begin, `BEGIN IMMEDIATE`}, {&wc.commit, `COMMIT`}, {&wc.rollback, `ROLLBACK`},
		{&wc.savepoint, `SAVEPOINT pgcheckpoint_write`}, {&wc.release, `RELEASE pgcheckpoint_write`},
		{&wc.rollbackTo, `ROLLBACK TO pgcheckpoint_write`},
	} {
		if *p.stmt, err = conn.PrepareContext(ctx, p.sql); err != nil {
			return nil, errors.Join(fmt.Errorf("prepare: %w", err), wc.close())
		}
	}
	if wc.q, err = sqlitedb.Prepare(ctx, conn); err != nil {
		return nil, errors.Join(fmt.Errorf("prepare: %w", err), wc.close())
	}
	return wc, nil
}

// run runs fn in a write transaction on the held connection and returns
// once the transaction committed (nil) or fn's work was taken back (an
// error). Writes that queue for the connection share a transaction and
// its commit, one sync of the file for them all: a write that finds
// others waiting leaves the transaction open for the next, which runs in
// a savepoint, and the last of them (or the maxGroup-th) commits. A write
// that ends any other way than by fn returning nil with its context live
// (an error, a cancelled context, a panic) takes back its own work alone:
// its savepoint, or the whole transaction when it is the first in it.
// Where SQLite took the whole transaction back itself (a statement
// interrupted by its context, a full disk), the writes done in it run
// again, each in its own goroutine (fn may run more than once: it sets
// what it returns, never adds to it). The COMMIT runs under a context
// that cannot be cancelled: the connection is never left inside a
// transaction, and no write's cancellation takes back the others'.
func (wc *writeConn) run(ctx context.Context, fn func() error) error {
	for {
		g, err := wc.runIn(ctx, fn, false)
		if g == nil {
			return err
		}
		<-g.done
		if !g.lost {
			return g.err
		}
	}
}

// runAlone runs fn in a transaction of its own, which it commits: for a
// write that cannot run twice (an import reads its source once) or a long
// one (see Store.writeAlone). The writes in the open transaction are
// committed first.
func (wc *writeConn) runAlone(ctx context.Context, fn func() error) error {
	_, err := wc.runIn(ctx, fn, true)
	return err
}

// runIn runs fn in the open transaction, or in one it begins, and then
// settles the transaction (see settle). It returns the group to wait for
// when fn's work awaits the next writer's commit, or nil and the outcome
// of fn (and of the COMMIT, if it ran it). Whoever takes mu while a
// transaction is open settles it before letting go: the writes in it wait
// for that.
func (wc *writeConn) runIn(ctx context.Context, fn func() error, alone bool) (wait *commitGroup, err error) {
	if alone {
		wc.yieldToQueued()
	}
	wc.waiting.Add(1)
	wc.mu.Lock()
	wc.waiting.Add(-1)
	defer wc.mu.Unlock()
	if wc.closed {
		return nil, errClosed
	}
	g := wc.group
	if g != nil && alone {
		if _, err := wc.settle(ctx, g, true); err != nil {
			return nil, fmt.Errorf("the commit of the writes before: %w", err)
		}
		g = nil
	}
	first := g == nil
	if first {
		if _, err := wc.begin.ExecContext(ctx); err != nil {
			// The driver reports a context that ended during the call
			// even when BEGIN ran: end the transaction it may have
			// begun, or the connection would keep the file's write lock
			// and every later BEGIN fail.
			_, _ = wc.rollback.ExecContext(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("begin: %w", err)
		}
		g = &commitGroup{done: make(chan struct{})}
		wc.group = g
	} else if _, err := wc.savepoint.ExecContext(context.WithoutCancel(ctx)); err != nil {
		// (Without ctx: a SAVEPOINT or RELEASE that ran but reported
		// the context's end would leave one behind, to which a later
		// ROLLBACK TO would take back the writes after it.)
		// Nothing of this write to take back.
		_, _ = wc.settle(ctx, g, false)
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	ran := false
	defer func() {
		if !ran && wc.takeBack(ctx, g, first) { // fn panicked
			_, _ = wc.settle(ctx, g, alone)
		}
	}()
	err = fn()
	ran = true
	if err == nil {
		err = ctx.Err()
	}
	if err == nil && !first {
		if _, rerr := wc.release.ExecContext(context.WithoutCancel(ctx)); rerr != nil {
			err = fmt.Errorf("release: %w", rerr)
		}
	}
	if err != nil {
		if !wc.takeBack(ctx, g, first) {
			return nil, err
		}
	} else {
		g.writes++
	}
	left, cerr := wc.settle(ctx, g, alone)
	switch {
	case err != nil:
		return nil, err
	case left:
		return g, nil
	}
	return nil, cerr
}

// yieldToQueued lets the writes queued for the connection go before a run
// alone: it waits until none is queued, at most yieldMax. A sweep runs
// batch after batch, and a Mutex lets the goroutine that just unlocked it
// take it again before the writer it woke: without this, writes queued
// behind a sweep waited out two or three batches (p50 2.8 ms where it was
// 0.3 ms), not the one running. The writes queued run as one group (one
// commit), so the wait is about one commit's.
func (wc *writeConn) yieldToQueued() {
	for deadline := time.Now().Add(wc.yieldMax); wc.waiting.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Microsecond)
	}
}

// settle leaves the open transaction to the next waiting writer while
// writes are waiting and the group is not full (left), unless it must end
// now, or ends it: a COMMIT when writes are in it, a ROLLBACK otherwise.
// err is the COMMIT's.
func (wc *writeConn) settle(ctx context.Context, g *commitGroup, now bool) (left bool, err error) {
	if !now && g.writes > 0 && g.writes < maxGroup && wc.waiting.Load() > 0 {
		return true, nil
	}
	ctx = context.WithoutCancel(ctx)
	if g.writes > 0 {
		if _, err = wc.commit.ExecContext(ctx); err != nil {
			err = fmt.Errorf("commit: %w", err)
		}
	}
	if g.writes == 0 || err != nil {
		// A COMMIT that failed can leave the transaction open.
		_, _ = wc.rollback.ExecContext(ctx)
	}
	g.err = err
	wc.end(g, false)
	return false, err
}

// takeBack takes back the work of a write that failed: its savepoint, or
// the whole transaction when it was the first in it. It reports whether
// the transaction is still open (the writes done in it before stay);
// otherwise it ended the group, whose writes then run again.
func (wc *writeConn) takeBack(ctx context.Context, g *commitGroup, first bool) (open bool) {
	ctx = context.WithoutCancel(ctx)
	if !first {
		if _, err := wc.rollbackTo.ExecContext(ctx); err == nil {
			if _, err := wc.release.ExecContext(ctx); err == nil {
				return true
			}
		}
	}
	// After some errors (SQLITE_FULL, an I/O error, an interrupted write)
	// SQLite has rolled back already; ROLLBACK then fails, with nothing
	// to undo.
	_, _ = wc.rollback.ExecContext(ctx)
	wc.end(g, g.writes > 0)
	return false
}

// end ends the group of the transaction that ended: its writes stop
// waiting, and run again if it was lost.
func (wc *writeConn) end(g *commitGroup, lost bool) {
	if wc.group != g {
		return
	}
	wc.group = nil
	g.lost = lost
	close(g.done)
}

// close commits the writes waiting in the open transaction, then releases
// the statements and the connection, under mu: a write in flight finishes
// first, and one after fails with errClosed. Closed again, it does nothing
// (a Store closes as many times as it is asked).
func (wc *writeConn) close() error {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if wc.closed {
		return nil
	}
	wc.closed = true
	var err error
	if g := wc.group; g != nil {
		_, err = wc.settle(context.Background(), g, true)
	}
	if wc.q != nil {
		err = errors.Join(err, wc.q.Close())
	}
	for _, st := range []*sql.Stmt{wc.begin, wc.commit, wc.rollback, wc.savepoint, wc.release, wc.rollbackTo} {
		if st != nil {
			err = errors.Join(err, st.Close())
		}
	}
	for _, st := range wc.texts {
		err = errors.Join(err, st.Close())
	}
	wc.texts = nil
	if cerr := wc.conn.Close(); !errors.Is(cerr, sql.ErrConnDone) {
		err = errors.Join(err, cerr)
	}
	return err
}

// OpenDB opens the database at path as a *sql.DB configured as the store
// uses it (WAL, busy timeout, foreign keys, BEGIN IMMEDIATE, one
// connection), for the migration helpers (Migrate, MigrateDown, Version).
// Without opts.Migrate the file must exist and is not written to; with it,
// the file is created if need be and put in WAL mode. A file this process
// may not write is opened read-only (see Open). It does not check the
// schema version. Errors: ErrNoDirectory, ErrNotDatabase,
// ErrNotMigrated (wrapping fs.ErrNotExist) for a missing file,
// engine.ErrPermission for a missing file in a read-only directory with
// opts.Migrate.
func OpenDB(ctx context.Context, path string, opts Options) (*sql.DB, error) {
	db, _, err := openDB(ctx, path, opts)
	return db, err
}

// access is how a process may open a database file.
type access struct {
	mode string // SQLite's URI mode: rwc, rw or ro
	// immutable reads the file alone, without locks or a -shm file (see
	// accessOf).
	immutable bool
	readOnly  string // for mode ro: what is read-only, for messages
}

// accessOf returns how to open path (not Memory) in dir. A file this
// process may not write, or one in a directory it may not write (where
// SQLite can make neither a -wal nor a journal file, so it could not
// write either), opens read-only, so that opening writes nothing. A WAL
// file is read through its -shm file, which SQLite cannot make in a
// read-only directory: when there is no -wal file either, which would
// hold commits not yet in the file, the file is opened immutable, read
// alone. That is exact while nobody writes it, and only a user who may
// write the directory could. exists says whether the file exists.
func accessOf(path, dir string, exists, create bool) access {
	acc := access{mode: "rw"}
	if create {
		acc.mode = "rwc"
	}
	switch {
	case notWritable(dir):
		acc = access{mode: "ro", readOnly: fmt.Sprintf("its directory %s is read-only to this process", dir)}
		if _, err := os.Stat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
			acc.immutable = true
		}
	case exists && notWritable(path):
		acc = access{mode: "ro", readOnly: fmt.Sprintf("the file %s is read-only to this process", path)}
	}
	return acc
}

// openDB is OpenDB, which also returns how it opened the file.
func openDB(ctx context.Context, path string, opts Options) (*sql.DB, access, error) {
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if path == "" {
		return nil, access{}, fmt.Errorf("open: %w: empty database path; give a file path or %q", engine.ErrInvalidInput, Memory)
	}
	acc := access{mode: "rw"}
	if path != Memory {
		dir := filepath.Dir(path)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, access{}, fmt.Errorf("open %s: %w: %s", path, ErrNoDirectory, dir)
		}
		_, err := os.Stat(path)
		missing := errors.Is(err, fs.ErrNotExist)
		if missing && !opts.Migrate {
			return nil, access{}, fmt.Errorf("open %s: %w: %w", path, ErrNotMigrated, fs.ErrNotExist)
		}
		acc = accessOf(path, dir, !missing, opts.Migrate)
		if missing && acc.readOnly != "" {
			return nil, access{}, fmt.Errorf("open %s: %w: the file cannot be created: %s", path, engine.ErrPermission, acc.readOnly)
		}
	}
	db, err := sql.Open("sqlite", dsn(path, acc, opts)+"&_txlock=immediate")
	if err != nil {
		return nil, access{}, fmt.Errorf("open %s: %w", path, err)
	}
	// One connection: writers of this process queue here, in order, rather
	// than in SQLite's busy handler, which polls. An in-memory database
	// lives in its connection, so it must be kept: it is the only one.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	// Reading the schema finds a file that is not a database before
	// anything is written to it.
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&n); err != nil {
		db.Close()
		return nil, access{}, fmt.Errorf("open %s: %w", path, openError(err))
	}
	if opts.Migrate && acc.readOnly == "" {
		if err := setWAL(ctx, db, path, opts.BusyTimeout); err != nil {
			db.Close()
			return nil, access{}, err
		}
	}
	return db, acc, nil
}

// setWAL puts a database file in WAL mode, which lasts: readers then read
// a snapshot while a writer writes. It writes to the file, so OpenDB
// without Migrate (for Version on any file) leaves it to Open.
// Changing the journal mode needs the file to itself, and SQLite does not
// wait for that (no busy handler): another process opening or writing a
// new file at the same moment fails it at once, so it is tried again here
// until wait (Options.BusyTimeout) has passed, then ErrTransient.
func setWAL(ctx context.Context, db *sql.DB, path string, wait time.Duration) error {
	if path == Memory {
		return nil
	}
	deadline := time.Now().Add(wait)
	for {
		var mode string
		err := db.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode)
		if err == nil {
			return nil
		}
		if c := resultCode(err); (c != sqlite3lib.SQLITE_BUSY && c != sqlite3lib.SQLITE_LOCKED) || !time.Now().Before(deadline) {
			return fmt.Errorf("open %s: set WAL mode: %w", path, storeError(openError(err)))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("open %s: set WAL mode: %w", path, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// dsn is the modernc.org/sqlite data source name of path, opened as acc
// says. synchronous FULL makes each commit durable (in WAL mode NORMAL
// could lose the last commits on a power failure, though never
// consistency).
func dsn(path string, acc access, opts Options) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	if path == Memory {
		return "file::memory:?" + q.Encode()
	}
	q.Set("mode", acc.mode)
	if acc.immutable {
		q.Set("immutable", "1")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath() + "?" + q.Encode()
}

// openError names the errors of opening a file that is not a database.
func openError(err error) error {
	if resultCode(err) == sqlite3lib.SQLITE_NOTADB {
		return fmt.Errorf("%w: %w", ErrNotDatabase, err)
	}
	return err
}

// Close closes the store's connections. A write in flight finishes first
// (the writes waiting for its commit are committed), so Close waits for it:
// for an Import, until its source ends (an ImportOptions.Progress that
// calls Close waits for itself); a write after Close fails.
func (s *Store) Close() error {
	var err error
	if s.rq != nil && s.rq != s.wq {
		err = s.rq.Close()
	}
	if s.wc != nil {
		err = errors.Join(err, s.wc.close())
	} else if s.wq != nil {
		err = errors.Join(err, s.wq.Close())
	}
	if s.r != nil && s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	if s.w != nil {
		err = errors.Join(err, s.w.Close())
	}
	return err
}

// execer runs a statement inside a write transaction (SAVEPOINT and the
// like): the held connection, or the transaction of an in-memory database.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// write runs fn in one write transaction (BEGIN IMMEDIATE: it holds the
// database's write lock from its first statement, so what it reads stays
// true until it commits), which other writes of the store may share (see
// writeConn.run): fn may run more than once, so it sets what it returns
// and never adds to it. On a file opened for reading it fails with
// engine.ErrPermission and begins nothing.
func (s *Store) write(ctx context.Context, fn func(q *queries, tx execer) error) error {
	return s.writeIn(ctx, fn, false)
}

// writeAlone is write for a write that cannot run twice (see
// writeConn.runAlone), or a long one that the short writes queued behind
// it should not wait for to commit (a batch of many threads): it shares
// its transaction with no other write.
func (s *Store) writeAlone(ctx context.Context, fn func(q *queries, tx execer) error) error {
	return s.writeIn(ctx, fn, true)
}

func (s *Store) writeIn(ctx context.Context, fn func(q *queries, tx execer) error, alone bool) error {
	if s.tenantErr != nil {
		return s.tenantErr
	}
	if s.readOnly != "" {
		return fmt.Errorf("%w: %s; the store was opened for reading", engine.ErrPermission, s.readOnly)
	}
	if s.wc != nil {
		run := s.wc.run
		if alone {
			run = s.wc.runAlone
		}
		return storeError(run(ctx, func() error {
			return fn(&queries{db: s.wc.q, tenant: s.tenant}, s.wc)
		}))
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return storeError(fmt.Errorf("begin: %w", err))
	}
	defer tx.Rollback()
	if err := fn(&queries{db: s.wq.WithTx(tx), tenant: s.tenant}, tx); err != nil {
		return storeError(err)
	}
	if err := tx.Commit(); err != nil {
		return storeError(fmt.Errorf("commit: %w", err))
	}
	return nil
}

// read runs fn in one read transaction: one consistent snapshot.
func (s *Store) read(ctx context.Context, fn func(q *queries) error) error {
	if s.tenantErr != nil {
		return s.tenantErr
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return storeError(fmt.Errorf("begin: %w", err))
	}
	defer tx.Rollback()
	return storeError(fn(&queries{db: s.rq.WithTx(tx), tenant: s.tenant}))
}
