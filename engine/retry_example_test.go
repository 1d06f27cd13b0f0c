package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// Retries reuse the checkpoint id, so a write that committed but whose
// acknowledgment was lost is found, not stored twice: the same as calling
// Snapshot again with the id.
func ExampleRetryPolicy() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "pgcheckpoint-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "agent.db"), sqlite.Options{Migrate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	eng := engine.New(store, engine.Config{Retry: engine.RetryPolicy{Attempts: 5}})
	defer eng.Close()

	in := engine.SnapshotInput{ID: engine.NewCheckpointID(), ThreadID: "run-42", State: []byte(`{"step":"search"}`)}
	first, _ := eng.Snapshot(ctx, in)
	again, _ := eng.Snapshot(ctx, in) // as a retry after a lost acknowledgment
	fmt.Println(first.Created, again.Created, first.Step == again.Step)
	// Output: true false true
}
