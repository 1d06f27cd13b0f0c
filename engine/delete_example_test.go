package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// A policy says what to keep; PruneThreads deletes the rest and, for a
// policy that picks by position or age, says which ones went. The head is
// never among them.
func ExampleEngine_PruneThreads() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})

	snapshots(ctx, eng, "trip-prune", "a", "b", "c", "d", "e")
	policy, err := engine.ParsePolicy("keep_last_n:2")
	if err != nil {
		log.Fatal(err)
	}
	res, err := eng.PruneThreads(ctx, policy, "trip-prune")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted", res.Deleted)
	for _, d := range res.IDs {
		fmt.Println("deleted step", d.Step)
	}
	res, err = eng.PruneThreads(ctx, engine.KeepLatest(), "trip-prune")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("keep latest deleted", res.Deleted)
	left, err := eng.ListCheckpoints(ctx, "trip-prune", engine.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range left {
		fmt.Println("kept step", c.Step)
	}
	// Output:
	// deleted 3
	// deleted step 1
	// deleted step 2
	// deleted step 3
	// keep latest deleted 1
	// kept step 5
}

// DeleteCheckpoints takes what a Selection names: steps below one (never
// the head), or the checkpoints of some runs, whatever their thread.
func ExampleEngine_DeleteCheckpoints() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})

	steps := snapshots(ctx, eng, "trip-delete", "plan", "search", "book", "pay")
	res, err := eng.DeleteCheckpoints(ctx, engine.BeforeStep("trip-delete", 3))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("below step 3:", res.Deleted)

	if _, err := eng.Rewind(ctx, steps[2].ID); err != nil { // the head is now step 3
		log.Fatal(err)
	}
	res, err = eng.DeleteCheckpoints(ctx, engine.BeforeStep("trip-delete", 100))
	if err != nil {
		log.Fatal(err)
	}
	head, err := eng.Latest(ctx, "trip-delete")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("below step 100:", res.Deleted, "- the head stays, step", head.Step)

	_, err = eng.DeleteCheckpoints(ctx, engine.BeforeStep("trip-delete", 0))
	fmt.Println(err)
	// Output:
	// below step 3: 2
	// below step 100: 1 - the head stays, step 3
	// delete checkpoints: pgcheckpoint: invalid input: step 0; steps start at 1
}

// A thread can be deleted now (DeleteThreads), or made to expire: the
// first sweep after the time applies the expiry's policy.
func ExampleEngine_SetThreadExpiry() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})

	snapshots(ctx, eng, "trip-expired", "a", "b", "c")
	snapshots(ctx, eng, "trip-done", "a", "b")
	err = eng.SetThreadExpiry(ctx, "trip-expired", time.Now().Add(-time.Minute), engine.KeepLatest())
	if err != nil {
		log.Fatal(err)
	}
	sweep, err := eng.Sweep(ctx, engine.KeepAll(), engine.SweepOptions{}) // expiry alone
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("expired", sweep.Expired, "deleted", sweep.Deleted)

	res, err := eng.DeleteThreads(ctx, "trip-done", "trip-never-written")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted", res.Deleted)
	// Output:
	// expired 1 deleted 2
	// deleted 2
}

// PreviewSweep says what a Sweep would do now, expiries included, and
// deletes nothing: ckpt gc --dry-run prints it.
func ExampleEngine_PreviewSweep() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})

	snapshots(ctx, eng, "trip-stale", "a", "b", "c")
	if err := eng.SetThreadExpiry(ctx, "trip-stale", time.Now().Add(-time.Minute), engine.KeepNone()); err != nil {
		log.Fatal(err)
	}
	preview, err := eng.PreviewSweep(ctx, engine.KeepAll(), engine.SweepOptions{}) // expiry alone
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("would expire", preview.Expired, "and delete", preview.Deleted)
	sweep, err := eng.Sweep(ctx, engine.KeepAll(), engine.SweepOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("expired", sweep.Expired, "deleted", sweep.Deleted)
	// Output:
	// would expire 1 and delete 3
	// expired 1 deleted 3
}
