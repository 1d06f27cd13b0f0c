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
	select {
	case r := <-done:
		t.Fatalf("the second transaction wrote while the first held the thread: %+v", r)
	case <-time.After(300 * time.Millisecond):
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
	eng := engine.New(conn, engine.Config{DeltaMinBytes: -1})
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
	if _, err := eng.DeleteThread(ctx, "c"); err != nil {
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
