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

// A whole round: migrate, write two steps, read the head, list the history.
func ExampleEngine_Snapshot() {
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

	// Make the id first and reuse it on retries: a retried write is a no-op.
	id := engine.NewCheckpointID()
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{
		ID:       id,
		ThreadID: "run-42",
		Trigger:  engine.TriggerLLMCall,
		Messages: json.RawMessage(`[{"role":"user","content":"book a flight"}]`),
		State:    json.RawMessage(`{"plan":["search","book"]}`),
	}); err != nil {
		log.Fatal(err)
	}
	res, err := eng.Snapshot(ctx, engine.SnapshotInput{
		ThreadID:    "run-42",
		Trigger:     engine.TriggerToolCall,
		Messages:    json.RawMessage(`[{"role":"user","content":"book a flight"},{"role":"tool","content":"3 flights"}]`),
		ToolResults: json.RawMessage(`{"search":{"flights":3}}`),
		NextNode:    "book",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("step", res.Step, "parent", res.ParentID == id)

	head, err := eng.Latest(ctx, "run-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(head.Summary, "->", head.NextNode)

	page, err := eng.ListCheckpoints(ctx, "run-42", engine.ListOptions{Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range page {
		fmt.Println(c.Step, c.Trigger, c.Summary)
	}

	if _, err := eng.Get(ctx, engine.NewCheckpointID()); errors.Is(err, engine.ErrNotFound) {
		fmt.Println("unknown ids are ErrNotFound")
	}
	// Output:
	// step 2 parent true
	// [tool] 3 flights -> book
	// 2 tool_call [tool] 3 flights
	// 1 llm_call [user] book a flight
	// unknown ids are ErrNotFound
}
