// Package sqlite is the SQLite store of pgcheckpoint: the engine's API on
// one database file, for local development, tests and single machines, with
// no server to run.
//
//	store, err := sqlite.Open(ctx, "checkpoints.db", sqlite.Options{Migrate: true})
//	if err != nil {
//		return err
//	}
//	eng := engine.New(store, engine.Config{})
//	defer eng.Close() // closes the store
//	res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run-42", Messages: msgs})
//
// Open(ctx, sqlite.Memory, ...) gives a private in-memory database, gone at
// Close.
//
// # Driver
//
// modernc.org/sqlite, through database/sql: pure Go (no cgo, so a plain
// `go build` and cross-compilation work), and the driver golang-migrate's
// sqlite driver uses, so one driver serves the store and its migrations
// (Migrations, run by Migrate, MigrateDown, or Options.Migrate).
//
// # Guarantees, with SQLite's means
//
// The file is in WAL mode, with a busy timeout (Options.BusyTimeout),
// foreign keys on and synchronous=FULL. Every write is all or nothing in a
// transaction that starts with BEGIN IMMEDIATE, which holds the database's write lock from its
// first statement, so the parent, step and seq it reads and assigns stay
// true until it commits, whichever goroutine or process writes next. In a
// process, writes go through one connection and queue in Go; writes that
// queue share a transaction and its commit (one sync of the file for
// them all), each in a savepoint of its own, so a write that fails takes
// back its own work alone. Other processes wait in SQLite's busy handler. Reads use a pool of their own
// (Options.MaxReaders) and read a snapshot without waiting for writers. An
// in-memory database lives in one connection, which serves reads and
// writes.
//
// # Deltas
//
// As on Postgres, a checkpoint whose messages extend its base's is stored
// as a delta (the messages appended, the state and tool result keys
// changed, the keys removed), decided in Go from the digests the engine
// computes (see planDelta in delta.go) and rebuilt in Go on read
// (materialize). Retention and the other partial deletes rewrite a kept
// delta whole before its base goes.
//
// # What "exactly" means
//
// JSON is kept as the text the engine handed over (its stored form, NUL
// characters escaped, see the engine), never decoded and re-encoded. A
// checkpoint stored whole reads back byte for byte. One rebuilt from deltas
// reads back JSON-equal, made of the very bytes written for each message,
// key and value, joined with ',' and ':' without spaces; object members
// keep the order of the full snapshot at the chain's root, replaced values
// in place and new keys appended in the order written. Postgres jsonb gives
// no more (it normalizes spacing and key order).
//
// The store keeps only what Postgres jsonb keeps: JSON with bytes that are
// not UTF-8, an unpaired surrogate escape or a number beyond numeric's
// range is refused with engine.ErrInvalidJSON on every path that takes
// JSON (see engine.CheckJSON), so an export of either store imports into
// the other.
//
// # Tenants
//
// Every table's key begins with tenant_id, then thread_id, and a
// checkpoint id is unique per tenant. Store.ForTenant returns the store
// bound to a tenant, sharing its connections and prepared statements; an
// unbound store is the default tenant's. Every query takes tenant_id and
// filters each table it reads by it; the store's code runs them only
// through one type (queries, in tenant.go) that fills tenant_id from the
// tenant the store is bound to, so no call chooses it. This keeps an
// application's tenants apart, but a file is one trust domain: whoever can
// open it reads every tenant.
//
// # Read-only files and full disks
//
// A file this process may not write (the file, its directory or its
// filesystem read-only) opens for reading: Open writes nothing to it, and
// every write fails with engine.ErrPermission. A write that finds the disk
// full fails with engine.ErrStorageFull, with nothing written.
//
// # Postgres differences
//
// The SQL functions of the Postgres schema (checkpoint_lineage, thread_tree,
// checkpoint_materialize, thread_gc, thread_gc_sweep for pg_cron) have no
// SQLite counterpart: here that logic is Go, and tree and lineage are
// recursive CTEs in queries/. Metadata filters (Postgres @>) are evaluated
// in Go (jsonContains), not by an index. A default summary whose last
// message has a content or role that is not a string shows it as written,
// where Postgres shows jsonb's spelling.
package sqlite
