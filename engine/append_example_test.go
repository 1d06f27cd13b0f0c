package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// Each step sends only what changed since the head; reads return the whole
// checkpoint. With OnHead, an append made on a head that has moved on
// writes nothing.
func ExampleEngine_Append() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	if err := schema.Migrate(ctx, url); err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})

	first, err := eng.Snapshot(ctx, engine.SnapshotInput{
		ThreadID: "run-append",
		Messages: json.RawMessage(`[{"role":"user","content":"book a flight"}]`),
		State:    json.RawMessage(`{"plan":["search","book"],"draft":true}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	second, err := eng.Append(ctx, engine.AppendInput{
		ThreadID:    "run-append",
		OnHead:      first.ID,
		Messages:    json.RawMessage(`[{"role":"tool","content":"3 flights"}]`),
		SetState:    json.RawMessage(`{"found":3}`),
		RemoveState: []string{"draft"},
	})
	if err != nil {
		log.Fatal(err)
	}
	head, err := eng.Latest(ctx, "run-append")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("step", second.Step, head.Summary)
	fmt.Println(string(head.Messages))
	fmt.Println(string(head.State))

	// first is no longer the head.
	_, err = eng.Append(ctx, engine.AppendInput{ThreadID: "run-append", OnHead: first.ID, SetState: json.RawMessage(`{"found":4}`)})
	fmt.Println(errors.Is(err, engine.ErrHeadMoved))
	// Output:
	// step 2 [tool] 3 flights
	// [{"role": "user", "content": "book a flight"}, {"role": "tool", "content": "3 flights"}]
	// {"plan": ["search", "book"], "found": 3}
	// true
}
