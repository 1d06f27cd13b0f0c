package integration

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
)

// Plans cached while the tables were empty (a new database, no ANALYZE yet)
// must still read a handful of index tuples per call on a long thread, not
// the whole thread. A lookup by checkpoint id that also named the thread
// once let the planner walk the thread's primary key instead: every write
// read every checkpoint of its thread. Counted with the transaction's own
// statistics, so the test does not depend on timing.
func TestCachedPlansStayIndexLookupsOnLongThreads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// As the application runs: a role that row-level security holds, whose
	// plans have the tenant's qualifier (a superuser's have none).
	b.db.HoldRole(t)
	if _, err := conn.Exec(ctx, "SET ROLE "+pgtest.HeldRole); err != nil {
		t.Fatal(err)
	}
	put := func(tx pgx.Tx, parent any) {
		t.Helper()
		if _, err := tx.Exec(ctx, `SELECT * FROM pgcheckpoint.checkpoint_put('long', '', $1, $2, 'manual', '{}', '', '{}', '[]', '{}', '{}', '', 0)`,
			engine.NewCheckpointID(), parent); err != nil {
			t.Fatal(err)
		}
	}
	// The first calls on this connection plan against empty tables.
	first := engine.NewCheckpointID()
	if _, err := conn.Exec(ctx, `SELECT * FROM pgcheckpoint.checkpoint_put('long', '', $1, NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '', 0)`, first); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 600 {
		put(tx, nil)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// The view also holds counts not yet flushed from earlier transactions
	// of this connection: measure the difference.
	fetched := func() int64 {
		var n int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(idx_tup_fetch), 0) FROM pg_stat_xact_user_tables
			WHERE schemaname = 'pgcheckpoint' AND relname = 'checkpoints'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := fetched()
	const calls = 10
	for range calls {
		put(tx, nil)
		put(tx, first) // an explicit parent: the lookup by id
		var seq int64
		if err := tx.QueryRow(ctx, `SELECT pgcheckpoint.thread_head_seq('long')`).Scan(&seq); err != nil {
			t.Fatal(err)
		}
	}
	read := fetched() - before
	// A row or two per call; a scan of the thread fetches 600 per call.
	if perCall := read / (3 * calls); perCall > 5 {
		t.Fatalf("%d rows fetched by index per call on a 600-checkpoint thread: a cached plan scans the thread", perCall)
	}
}
