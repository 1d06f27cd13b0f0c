package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// The application's row and the checkpoint that records it commit together,
// or not at all. Migrations run over the application's own pool.
func ExampleEngine_WithTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := schema.MigratePool(ctx, pool); err != nil {
		log.Fatal(err)
	}
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, item text NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	placeOrder := func(ctx context.Context, orderID int, item string) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) // after Commit, a no-op
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id, item) VALUES ($1, $2)`, orderID, item); err != nil {
			return err
		}
		inTx, err := eng.WithTx(tx) // ErrInvalidInput on a SQLite engine
		if err != nil {
			return err
		}
		state, err := json.Marshal(map[string]any{"ordered": item, "order_id": orderID})
		if err != nil {
			return err
		}
		// The thread's lock is held from here until the commit.
		if _, err := inTx.Snapshot(ctx, engine.SnapshotInput{
			ThreadID: "order-1",
			Trigger:  engine.TriggerToolCall,
			State:    state,
		}); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := placeOrder(ctx, 1, "book"); err != nil {
		log.Fatal(err)
	}
	// Order 1 again: the INSERT fails, so no checkpoint is written either.
	fmt.Println("again:", placeOrder(ctx, 1, "book") != nil)

	head, err := eng.Latest(ctx, "order-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("step", head.Step, string(head.State))
	// Output:
	// again: true
	// step 1 {"ordered": "book", "order_id": 1}
}
