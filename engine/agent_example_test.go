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
)

// A loop that survives crashes: resume from the head, skip the tasks whose
// results were saved, save each new result as it comes, then write the
// step's checkpoint.
func ExampleEngine_Resume() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})

	r, err := eng.Resume(ctx, "run-7")
	if errors.Is(err, engine.ErrNotFound) { // a new run: write its first checkpoint
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run-7", NextNode: "fetch"}); err != nil {
			log.Fatal(err)
		}
		r, err = eng.Resume(ctx, "run-7")
	}
	if err != nil {
		log.Fatal(err)
	}
	results := map[string]json.RawMessage{}
	for _, task := range []string{"fetch-a", "fetch-b"} {
		if r.TaskDone(task) {
			results[task] = r.Done[task][0].Value
			continue
		}
		out := json.RawMessage(`{"ok": true}`) // the task's work
		if _, err := eng.PutWrites(ctx, r.ID, task, []engine.Write{{Channel: "result", Value: out}}); err != nil {
			log.Fatal(err)
		}
		results[task] = out
	}
	state, _ := json.Marshal(results)
	saved := eng.SnapshotSafe(ctx, engine.SnapshotInput{ThreadID: "run-7", Trigger: engine.TriggerTaskBoundary, State: state})
	fmt.Println("step", saved.Step, "state", string(state))
	// Output:
	// step 2 state {"fetch-a":{"ok":true},"fetch-b":{"ok":true}}
}

// A tool wrapped so each call writes a checkpoint before and after it.
func ExampleWrapTool() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})

	type query struct{ City string }
	search := engine.WrapTool(eng, "trip-3", "weather", func(ctx context.Context, q query) (string, error) {
		return "sunny in " + q.City, nil
	})
	out, err := search(ctx, query{City: "Lisbon"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)
	// eng.SnapshotFailures() counts the checkpoints that could not be written.
	page, err := eng.ListCheckpoints(ctx, "trip-3", engine.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range page {
		fmt.Println(c.Step, c.Trigger, c.Summary)
	}
	// Output:
	// sunny in Lisbon
	// 2 tool_call tool weather: ok
	// 1 tool_call tool weather: call
}
