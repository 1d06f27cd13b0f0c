package integration

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// A checkpoint written inside the application's transaction commits with
// the application's own rows, or not at all.
func TestSnapshotInTheCallersTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	if _, err := b.db.Pool.Exec(ctx, `CREATE TABLE orders (id int PRIMARY KEY, checkpoint uuid NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	orders := func() (n int) {
		t.Helper()
		if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Commit: both.
	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inTx, err := b.eng.WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := inTx.Snapshot(ctx, engine.SnapshotInput{ThreadID: "order-1", State: []byte(`{"placed":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES (1, $1)`, res.ID); err != nil {
		t.Fatal(err)
	}
	// Inside, the engine reads what it wrote; outside, nothing shows yet.
	if head, err := inTx.Latest(ctx, "order-1"); err != nil || head.ID != res.ID {
		t.Fatalf("latest inside the transaction: %v %v", head, err)
	}
	if _, err := b.eng.Latest(ctx, "order-1"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("latest outside before the commit: %v, want ErrNotFound", err)
	}
	// A retried id inside the transaction is a retry, as outside.
	again, err := inTx.Snapshot(ctx, engine.SnapshotInput{ID: res.ID, ThreadID: "order-1", State: []byte(`{"placed":true}`)})
	if err != nil || again.Created || again.Step != res.Step {
		t.Fatalf("retry inside the transaction: %+v %v", again, err)
	}
	var buf bytes.Buffer
	if st, err := inTx.Export(ctx, "order-1", &buf); err != nil || st.Checkpoints != 1 {
		t.Fatalf("export inside the transaction: %+v %v", st, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := b.eng.Get(ctx, res.ID); err != nil || got.ThreadID != "order-1" || orders() != 1 {
		t.Fatalf("after commit: %v %v, %d orders", got, err, orders())
	}

	// Rollback: neither, and no thread row.
	before := b.count(t)
	tx, err = b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inTx, _ = b.eng.WithTx(tx)
	if _, err := inTx.Snapshot(ctx, engine.SnapshotInput{ThreadID: "order-2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES (2, gen_random_uuid())`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if after := b.count(t); after != before || orders() != 1 {
		t.Fatalf("after rollback: rows %v -> %v, %d orders", before, after, orders())
	}

	// A transaction that already failed: the driver's error, nothing written.
	tx, err = b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1/0`); err == nil {
		t.Fatal("division by zero succeeded")
	}
	inTx, _ = b.eng.WithTx(tx)
	_, err = inTx.Snapshot(ctx, engine.SnapshotInput{ThreadID: "order-3"})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25P02" {
		t.Fatalf("snapshot in a failed transaction: %v, want the driver's 25P02", err)
	}
	_ = tx.Rollback(ctx)
	if after := b.count(t); after != before {
		t.Fatalf("a failed transaction wrote rows: %v -> %v", before, after)
	}
}

// Two applications' transactions writing one thread queue on the thread's
// lock until the first commits: no duplicate step.
func TestCallersTransactionsSerializeOnAThread(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	if _, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	tx1, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e1, _ := b.eng.WithTx(tx1)
	r1, err := e1.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan engine.SnapshotResult, 1)
	go func() {
		tx2, err := b.db.Pool.Begin(ctx)
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		e2, _ := b.eng.WithTx(tx2)
		r2, err := e2.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
		if err == nil {
			err = tx2.Commit(ctx)
		}
		if err != nil {
			t.Error(err)
		}
		done <- r2
	}()
	// The second waits on the thread's lock (its row in thread_locks), which
	// the first holds until it commits.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 1 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the second transaction wrote while the first held the thread: %+v", r)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait on a lock, want the second transaction's", waiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("the second transaction wrote while the first held the thread: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := <-done
	if r1.Step != 2 || r2.Step != 3 || r2.ParentID != r1.ID {
		t.Fatalf("steps %d and %d (parent %s, want %s)", r1.Step, r2.Step, r2.ParentID, r1.ID)
	}
}

// The engine over a single *pgx.Conn; WithTx on a store that is not
// Postgres says so.
func TestEngineOverOneConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	conn, err := pgx.Connect(ctx, b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	eng := engine.New(postgres.NewStore(conn, postgres.Options{}), engine.Config{DeltaMinBytes: -1})
	var last engine.SnapshotResult
	for i := range 5 {
		if last, err = eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "c", Messages: []byte(`[` + strings.Repeat(`"m",`, i) + `"m"]`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.Rewind(ctx, last.ParentID); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if st, err := eng.Export(ctx, "c", &buf); err != nil || st.Checkpoints != 5 {
		t.Fatalf("export: %+v %v", st, err)
	}
	if _, err := eng.DeleteThreads(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if st, err := eng.Import(ctx, &buf, engine.ImportOptions{}); err != nil || st.Checkpoints != 5 {
		t.Fatalf("import: %+v %v", st, err)
	}
	if head, err := eng.Latest(ctx, "c"); err != nil || head.ID != last.ParentID {
		t.Fatalf("head after import: %v %v", head, err)
	}

	lite, err := pgcheckpoint.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "x.db"), pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := lite.WithTx(tx); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("WithTx on SQLite: %v, want ErrInvalidInput", err)
	}
	// An engine Open made over Postgres takes the caller's transaction too.
	pg, err := pgcheckpoint.Open(ctx, b.db.URL, pgcheckpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if inTx, err := pg.WithTx(tx); err != nil {
		t.Fatal(err)
	} else if _, err := inTx.Snapshot(ctx, engine.SnapshotInput{ThreadID: "via-open"}); err != nil {
		t.Fatal(err)
	}
}

// tableDigest returns a digest of every row of the pgcheckpoint tables,
// for "nothing changed" checks that see updates as well as inserts.
func tableDigest(t *testing.T, b *bundle) string {
	t.Helper()
	return schemaRowsDigest(t, b.db.Pool)
}

// Every call of the Engine, bound to the caller's transaction, runs in it:
// reads see the transaction's own uncommitted writes, others see nothing
// while it is open, and a rollback leaves the database as it was.
func TestEveryCallInsideTheCallersTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	outside := b.snap(t, engine.SnapshotInput{ThreadID: "outside", Messages: []byte(`[{"role":"user","content":"hi"}]`)})
	before := tableDigest(t, b)

	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	e, err := b.eng.WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s inside the transaction: %v", what, err)
		}
	}
	check := func(what string, ok bool, got any) {
		t.Helper()
		if !ok {
			t.Fatalf("%s inside the transaction: %+v", what, got)
		}
	}

	// Writes, then reads that must see them.
	s1, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "a", Messages: []byte(`[{"role":"user","content":"one"}]`),
		Metadata: []byte(`{"run_id":"run-1"}`)})
	must("Snapshot", err)
	s2, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "a", Messages: []byte(`[{"role":"user","content":"one"},{"role":"assistant","content":"two"}]`),
		State: []byte(`{"k":1}`)})
	must("Snapshot", err)
	n, err := e.PutWrites(ctx, s2.ID, "task-1", []engine.Write{{Channel: "out", Value: []byte(`{"v":1}`)}})
	check("PutWrites", err == nil && n == 1, err)
	cp, err := e.Get(ctx, s2.ID)
	check("Get", err == nil && len(cp.PendingWrites) == 1 && cp.Step == 2, err)
	head, err := e.Latest(ctx, "a")
	check("Latest", err == nil && head.ID == s2.ID, err)
	head, err = e.LatestIn(ctx, "a", "")
	check("LatestIn", err == nil && head.ID == s2.ID, err)
	list, err := e.ListCheckpoints(ctx, "a", engine.ListOptions{Metadata: []byte(`{"run_id":"run-1"}`)})
	check("ListCheckpoints", err == nil && len(list) == 1 && list[0].ID == s1.ID, list)
	threads, err := e.ListThreads(ctx, engine.ThreadListOptions{})
	check("ListThreads", err == nil && len(threads) == 2, threads)
	points, err := e.TimeTravelPoints(ctx, "a", engine.PointsOptions{})
	check("TimeTravelPoints", err == nil && len(points) == 2, points)
	lin, err := e.Lineage(ctx, s2.ID)
	check("Lineage", err == nil && len(lin) == 2, lin)
	diff, err := e.Diff(ctx, s1.ID, s2.ID)
	check("Diff", err == nil && diff != nil, err)
	rp, err := e.Resume(ctx, "a")
	check("Resume", err == nil && rp.TaskDone("task-1"), rp)
	safe := e.SnapshotSafe(ctx, engine.SnapshotInput{ThreadID: "a"})
	check("SnapshotSafe", safe.Err == nil && safe.Step == 3, safe)
	tool := engine.WrapTool(e, "a", "echo", func(_ context.Context, s string) (string, error) { return s, nil })
	_, err = tool(ctx, "x")
	must("WrapTool", err)
	must("Scope", e.Scope(ctx, "a", map[string]int{"k": 2}, func(context.Context) error { return nil }))
	if e.SnapshotFailures() != 0 {
		t.Fatalf("%d agent snapshots failed inside the transaction", e.SnapshotFailures())
	}

	// Time travel, branches, copies.
	rw, err := e.Rewind(ctx, s1.ID)
	check("Rewind", err == nil && rw.StepsBack == 6, rw)
	_, err = e.RewindToStep(ctx, "a", 2)
	must("RewindToStep", err)
	s3, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "a"})
	must("Snapshot after rewind", err)
	rw, err = e.RewindAndTruncate(ctx, s1.ID)
	check("RewindAndTruncate", err == nil && rw.Truncated > 0, rw)
	_, err = e.Get(ctx, s3.ID)
	check("Get of a truncated checkpoint", errors.Is(err, engine.ErrNotFound), err)
	br, err := e.Branch(ctx, s1.ID, "other")
	must("Branch", err)
	brs, err := e.Branches(ctx, "a")
	check("Branches", err == nil && len(brs) == 1, brs)
	_, err = e.MergeBranch(ctx, br.ThreadID, "a")
	must("MergeBranch", err)
	tree, err := e.Tree(ctx, "a")
	check("Tree", err == nil && len(tree.Nodes) >= 3, tree)
	_, err = e.ClearMemory(ctx, "a")
	must("ClearMemory", err)
	copied, err := e.CopyThread(ctx, "a", "a-copy")
	check("CopyThread", err == nil && copied.Copied > 0, copied)

	// Retention and deletes.
	pr, err := e.PruneThreads(ctx, engine.KeepLastN(2), "a-copy")
	check("PruneThreads", err == nil && pr.Deleted > 0 && len(pr.IDs) == int(pr.Deleted), pr)
	must("SetThreadExpiry", e.SetThreadExpiry(ctx, "a-copy", time.Now().Add(-time.Hour), engine.KeepNone()))
	sw, err := e.Sweep(ctx, engine.KeepAll(), engine.SweepOptions{})
	check("Sweep", err == nil && sw.Expired == 1, sw)
	_, err = e.DeleteCheckpoints(ctx, engine.BeforeStep("a", 2))
	must("DeleteCheckpoints before a step", err)
	_, err = e.DeleteCheckpoints(ctx, engine.ForRuns("run-1"))
	must("DeleteCheckpoints for runs", err)
	_, err = e.PruneThreads(ctx, engine.KeepLatest(), br.ThreadID)
	must("PruneThreads", err)

	// Export, delete, import back.
	var buf bytes.Buffer
	st, err := e.Export(ctx, "a", &buf)
	must("Export", err)
	del, err := e.DeleteThreads(ctx, "a")
	check("DeleteThreads", err == nil && del.Deleted == int64(st.Checkpoints), del)
	im, err := e.Import(ctx, &buf, engine.ImportOptions{})
	check("Import", err == nil && im.Checkpoints == st.Checkpoints, im)
	if _, err := e.Latest(ctx, "a"); err != nil {
		t.Fatalf("Latest after import inside the transaction: %v", err)
	}

	// Nothing shows outside while the transaction is open; a rollback
	// leaves every row as it was.
	if _, err := b.eng.Latest(ctx, "a"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("outside, before the end of the transaction: %v, want ErrNotFound", err)
	}
	if got := tableDigest(t, b); got != before {
		t.Fatal("rows changed outside while the transaction was open")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tableDigest(t, b); got != before {
		t.Fatal("rows changed after the rollback")
	}
	if head, err := b.eng.Latest(ctx, "outside"); err != nil || head.ID != outside.ID {
		t.Fatalf("the thread written outside: %v %v", head, err)
	}
}

// What a failed call leaves of the caller's transaction: bad input found
// by the engine, nothing (the transaction goes on); a failed Import, its
// savepoint rolled back (the transaction goes on); an error raised in the
// database, an aborted transaction, as with any failed statement.
func TestErrorsInsideTheCallersTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	e, err := b.eng.WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: []byte(`{"open":`)}); !errors.Is(err, engine.ErrInvalidJSON) {
		t.Fatalf("bad JSON: %v, want ErrInvalidJSON", err)
	}
	// Stored whole, or appended, the JSON is the server's to parse, except
	// in the caller's transaction, which a refused statement would abort.
	whole, err := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{}).WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := whole.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Metadata: []byte(`{"open":`)}); !errors.Is(err, engine.ErrInvalidJSON) {
		t.Fatalf("bad JSON stored whole: %v, want ErrInvalidJSON", err)
	}
	if _, err := whole.Append(ctx, engine.AppendInput{ThreadID: "t", SetState: []byte(`{"open":`)}); !errors.Is(err, engine.ErrInvalidJSON) {
		t.Fatalf("bad JSON appended: %v, want ErrInvalidJSON", err)
	}
	// So is JSON that parses and that jsonb cannot hold (engine.CheckJSON).
	if _, err := whole.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: []byte(`{"n":1e999999}`)}); !errors.Is(err, engine.ErrInvalidJSON) {
		t.Fatalf("a number jsonb cannot hold: %v, want ErrInvalidJSON", err)
	}
	if _, err := whole.Append(ctx, engine.AppendInput{ThreadID: "t", SetState: []byte(`{"s":"\ud800"}`)}); !errors.Is(err, engine.ErrInvalidJSON) {
		t.Fatalf("an unpaired surrogate appended: %v, want ErrInvalidJSON", err)
	}
	var buf bytes.Buffer
	if _, err := e.Export(ctx, "t", &buf); err != nil {
		t.Fatal(err)
	}
	// The thread exists: the import fails after it has written rows of its
	// own in its savepoint.
	if _, err := e.Import(ctx, bytes.NewReader(buf.Bytes()), engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("import of an existing thread: %v, want ErrInvalidInput", err)
	}
	// Thread u, written whole, then a broken line: u is rolled back.
	u := strings.ReplaceAll(buf.String(), first.ID.String(), engine.NewCheckpointID().String())
	u = string(enginetest.Reseal([]byte(strings.ReplaceAll(u, `"thread_id":"t"`, `"thread_id":"u"`))))
	if _, err := e.Import(ctx, strings.NewReader(u+"{not json\n"), engine.ImportOptions{}); err == nil {
		t.Fatal("an import with a broken last line succeeded")
	}
	if _, err := e.Latest(ctx, "u"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a failed import left thread u: %v", err)
	}
	if st, err := e.Import(ctx, strings.NewReader(u), engine.ImportOptions{}); err != nil || st.Checkpoints != 1 {
		t.Fatalf("the same import, whole: %+v %v", st, err)
	}
	second, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
	if err != nil || second.Step != 2 {
		t.Fatalf("snapshot after the failed calls: %+v %v", second, err)
	}
	if _, err := e.Rewind(ctx, engine.NewCheckpointID()); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("rewind to an unknown checkpoint: %v, want ErrNotFound", err)
	}
	_, err = e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25P02" {
		t.Fatalf("snapshot after an error raised in the database: %v, want 25P02 (transaction aborted)", err)
	}
}
