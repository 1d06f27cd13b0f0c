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
)

// snapshots writes one checkpoint per message, each with the conversation
// so far, and returns their ids.
func snapshots(ctx context.Context, eng *engine.Engine, thread string, texts ...string) []engine.SnapshotResult {
	var msgs []map[string]string
	var out []engine.SnapshotResult
	for _, t := range texts {
		msgs = append(msgs, map[string]string{"role": "assistant", "content": t})
		b, _ := json.Marshal(msgs)
		res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Trigger: engine.TriggerLLMCall, Messages: b})
		if err != nil {
			log.Fatal(err)
		}
		out = append(out, res)
	}
	return out
}

// Rewind moves the head back; the next write starts a new line from there,
// and the old line stays readable.
func ExampleEngine_Rewind() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})

	steps := snapshots(ctx, eng, "trip-rewind", "plan", "book the 9:00 flight", "pay")
	r, err := eng.Rewind(ctx, steps[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("back", r.StepsBack, "steps to step", r.Checkpoint.Step)

	again := snapshots(ctx, eng, "trip-rewind", "book the 11:00 flight")
	fmt.Println("new step", again[0].Step, "parent is step 1:", again[0].ParentID == steps[0].ID)

	old, err := eng.Get(ctx, steps[2].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("old line still there:", old.Summary)
	// Output:
	// back 2 steps to step 1
	// new step 2 parent is step 1: true
	// old line still there: [assistant] pay
}

// A branch tries something else from any checkpoint; merging it writes a
// checkpoint with two parents on the target thread.
func ExampleEngine_Branch() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})

	steps := snapshots(ctx, eng, "trip-branch", "plan", "hotel: Alfama")
	b, err := eng.Branch(ctx, steps[0].ID, "hostel")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("branch starts at step", b.Step)
	tip, err := eng.Snapshot(ctx, engine.SnapshotInput{
		ThreadID: b.ThreadID,
		Trigger:  engine.TriggerLLMCall,
		Messages: json.RawMessage(`[{"role":"assistant","content":"plan"},{"role":"assistant","content":"hostel: Baixa"}]`),
	})
	if err != nil {
		log.Fatal(err)
	}

	m, err := eng.MergeBranch(ctx, b.ThreadID, "trip-branch")
	if err != nil {
		log.Fatal(err)
	}
	merged, err := eng.Get(ctx, m.CheckpointID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("merge at step", m.Step, "parents:", m.ParentID == steps[1].ID, m.MergeParentID == tip.ID)
	fmt.Println(merged.Summary == "Merge of "+b.ThreadID, string(merged.Messages))

	d, err := eng.Diff(ctx, steps[1].ID, m.CheckpointID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("diff: %d message added, %d removed\n", len(d.MessagesAdded), len(d.MessagesRemoved))
	// Output:
	// branch starts at step 2
	// merge at step 3 parents: true true
	// true [{"role": "assistant", "content": "plan"}, {"role": "assistant", "content": "hostel: Baixa"}]
	// diff: 1 message added, 1 removed
}
