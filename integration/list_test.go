package integration

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// statementCounter is a pgx tracer that counts the statements sent (a
// batch counts its statements), not those of the pool's own checks.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A page of ListCheckpoints is one statement, the cursor's check
// included: the empty page after the last, and a cursor that is not in
// the thread (unknown, of another thread, of another namespace), which is
// ErrNotFound, as on every store.
func TestListPageIsOneStatement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	counter := &statementCounter{}
	cfg := b.db.Pool.Config().Copy()
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(b.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(pool, engine.Config{})
	var ids []engine.SnapshotResult
	for range 3 {
		r, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r)
	}
	other, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "other"})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", Namespace: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	list := func(opts engine.ListOptions) ([]engine.CheckpointInfo, int64, error) {
		before := counter.n.Load()
		page, err := eng.ListCheckpoints(b.ctx, "t", opts)
		return page, counter.n.Load() - before, err
	}
	page, n, err := list(engine.ListOptions{Limit: 3})
	if err != nil || len(page) != 3 || n != 1 {
		t.Fatalf("first page: %d checkpoints, %v, %d statements; want 3, no error, 1", len(page), err, n)
	}
	page, n, err = list(engine.ListOptions{Limit: 3, Before: page[2].ID})
	if err != nil || len(page) != 0 || n != 1 {
		t.Fatalf("the page after the last: %d checkpoints, %v, %d statements; want 0, no error, 1", len(page), err, n)
	}
	page, n, err = list(engine.ListOptions{Limit: 1, Before: ids[2].ID})
	if err != nil || len(page) != 1 || page[0].ID != ids[1].ID || n != 1 {
		t.Fatalf("a page after a cursor: %v, %v, %d statements; want the checkpoint before it, no error, 1", page, err, n)
	}
	for name, before := range map[string]engine.SnapshotResult{
		"unknown": {ID: engine.NewCheckpointID()}, "of another thread": other, "of another namespace": sub,
	} {
		page, n, err := list(engine.ListOptions{Before: before.ID})
		if !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "cursor "+before.ID.String()) || page != nil || n != 1 {
			t.Errorf("a cursor %s: %v, %v, %d statements; want ErrNotFound naming the cursor, no page, 1", name, page, err, n)
		}
	}
}
