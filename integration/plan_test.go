package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/db"
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
	ctx := context.Background()
	conn := heldConn(t)
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
	_, before := indexReads(t, tx)
	const calls = 10
	for range calls {
		put(tx, nil)
		put(tx, first) // an explicit parent: the lookup by id
		var seq int64
		if err := tx.QueryRow(ctx, `SELECT pgcheckpoint.thread_head_seq('long')`).Scan(&seq); err != nil {
			t.Fatal(err)
		}
	}
	_, after := indexReads(t, tx)
	read := after - before
	// A row or two per call; a scan of the thread fetches 600 per call.
	if perCall := read / (3 * calls); perCall > 5 {
		t.Fatalf("%d rows fetched by index per call on a 600-checkpoint thread: a cached plan scans the thread", perCall)
	}
}

// The thread listing's plan, made before the tables were analyzed (a new
// installation, a bulk load), must not walk the threads it lists: the
// rewound-to lookup (by id, thread and namespace) may then be planned as a
// scan of the thread's key, and it once ran for every listed thread, for a
// rewind most threads do not have. It runs for a rewound thread alone (a
// one-time filter on threads.rewound_to), so one head lookup a thread.
// Counted with the transaction's own statistics, as above.
func TestCachedListingPlanReadsNoThreadWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := heldConn(t)
	// The listing benchmark's threads, loaded as it loads them; s000002
	// rewound to its first checkpoint.
	const threads = 10000
	scaleRows(t, conn, threads)
	if _, err := conn.Exec(ctx, `UPDATE pgcheckpoint.threads SET rewound_to = md5('2:1')::uuid WHERE thread_id = 's000002'`); err != nil {
		t.Fatal(err)
	}
	q := db.New(conn)
	const page = 100
	list := func() {
		t.Helper()
		rows, err := q.ThreadListHeads(ctx, db.ThreadListHeadsParams{After: "", MaxRows: page})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != page {
			t.Fatalf("listed %d threads, want %d", len(rows), page)
		}
		for i, r := range rows {
			want := int64(scalePerThread)
			if r.ThreadID == "s000002" {
				want = 1
			}
			if r.ThreadID != fmt.Sprintf("s%06d", i+1) || r.HeadStep != want {
				t.Fatalf("row %d: %s at step %d; want s%06d at step %d", i, r.ThreadID, r.HeadStep, i+1, want)
			}
		}
	}
	// The plans are made now, with no statistics.
	for range 10 {
		list()
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	q = q.WithTx(tx)
	scans0, rows0 := indexReads(t, tx)
	const calls = 10
	for range calls {
		list()
	}
	scans, rows := indexReads(t, tx)
	// A head a thread and one rewind: about 101 rows a page (at most 120
	// if the rewound thread's lookup walks it); walks of every thread fetch
	// 2,100.
	if perCall := (rows - rows0) / calls; perCall > 2*page {
		t.Fatalf("%d rows fetched by index per listing of %d threads of %d checkpoints: the plan walks the threads", perCall, page, scalePerThread)
	}
	// One head lookup a thread, and a rewound-to lookup for the one
	// rewound thread alone, not one for each thread.
	if perCall := (scans - scans0) / calls; perCall > page+page/10 {
		t.Fatalf("%d index scans per listing of %d threads, one rewound: a rewound-to lookup for every thread", perCall, page)
	}
}

// heldConn connects to a new test database as the application runs: as a
// role that row-level security holds, whose plans have the tenant's
// qualifier (a superuser's have none). Closed when the test ends.
func heldConn(t *testing.T) *pgx.Conn {
	t.Helper()
	b := setup(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.WithoutCancel(ctx)) })
	b.db.HoldRole(t)
	if _, err := conn.Exec(ctx, "SET ROLE "+pgtest.HeldRole); err != nil {
		t.Fatal(err)
	}
	return conn
}

// indexReads returns how many index scans tx has started on the
// checkpoints table and how many rows they fetched. The view also holds
// counts not yet flushed from earlier transactions of the connection:
// compare two readings.
func indexReads(t *testing.T, tx pgx.Tx) (scans, rows int64) {
	t.Helper()
	if err := tx.QueryRow(context.Background(), `SELECT coalesce(sum(idx_scan), 0), coalesce(sum(idx_tup_fetch), 0)
		FROM pg_stat_xact_user_tables WHERE schemaname = 'pgcheckpoint' AND relname = 'checkpoints'`).Scan(&scans, &rows); err != nil {
		t.Fatal(err)
	}
	return scans, rows
}
