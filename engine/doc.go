// Package engine is pgcheckpoint's agent-facing API: it writes a checkpoint
// of an agent's state at every step and reads them back, over a Store, and
// holds the rules every store shares (validation, retries, telemetry). The
// stores are packages of their own: Postgres (package postgres, over any
// pgx pool, connection or transaction; see WithTx) and SQLite (package
// sqlite). New makes an Engine over either; pgcheckpoint.Open opens either
// from a URL.
//
// An Engine holds no state of its own: steps, heads and locks live in the
// database, so any number of goroutines and processes may share a thread.
// Every write is one transaction and, in the common case, one round trip
// (see Engine.Snapshot and postgres.Options.SingleStatement).
//
//	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})
//	res, err := eng.Snapshot(ctx, engine.SnapshotInput{
//		ThreadID: "run-42",
//		Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`),
//		State:    json.RawMessage(`{"cursor":1}`),
//	})
//	latest, err := eng.Latest(ctx, "run-42")
//
// A thread holds one line of checkpoints per namespace (a sub-graph; "" is
// the root graph), each with its own head. A call that acts on one line
// takes the namespace in its options struct when it has one
// (SnapshotInput, ListOptions, PointsOptions, IntervalOptions) and
// otherwise has a variant named ...In beside it (LatestIn, RewindToStepIn,
// ResumeIn, ClearMemoryIn, BeforeStepIn, MergeBranchIn, ScopeIn,
// WrapToolIn); the form without one means the root. Calls given a
// checkpoint id (Get, Rewind, RewindAndTruncate, Branch, Lineage, Diff,
// PutWrites) act in that checkpoint's namespace, and calls on whole
// threads (Tree, Branches, DeleteThreads, CopyThread, Export, PruneThreads,
// SetThreadExpiry) on every namespace. A malformed namespace is
// ErrInvalidInput, with nothing written (ScopeIn and WrapToolIn, which never
// fail their caller, count it as a snapshot failure).
//
// Errors wrap the sentinels ErrNotFound, ErrInvalidInput (with
// ErrInvalidJSON and ErrSnapshotTooLarge), ErrIDConflict, ErrPermission
// (a database role, or a SQLite file, that may not be written) and
// ErrStorageFull (a full disk); match them with errors.Is. A call that
// fails with ErrInvalidInput, ErrPermission or ErrStorageFull has written
// nothing.
//
// Checkpoints of 8 KiB or more are stored as deltas when they extend their
// parent (see Config.DeltaRun, Config.DeltaMinBytes and
// Config.FullSnapshots) and read back whole either way.
// The deletes are one family: a caller says what goes (DeleteThreads;
// DeleteCheckpoints with a Selection: BeforeStep, ForRuns) or what stays
// (a Policy: KeepLastN, KeepAge, KeepMilestones, KeepLatest, KeepNone, for
// PruneThreads, Config.Retention, Sweep and SetThreadExpiry), and each
// returns a DeleteResult. The retention policies delete old checkpoints
// without ever deleting a head, a branch's source, or what a kept
// checkpoint needs to be read.
//
// JSON comes back exactly as written, after JSON normalisation (jsonb's key
// order and spacing), including strings with U+0000, which Postgres jsonb
// cannot store as such: see the messages column comment for the escape used.
package engine
