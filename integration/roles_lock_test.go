package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// The read-only role of schema/roles/roles.sql cannot take or hold what
// serializes a thread's writers: the thread lock is a row it may not lock
// (FOR UPDATE and its kin need UPDATE; LOCK TABLE beyond ACCESS SHARE too),
// and thread_lock is not its to execute. What it can hold (the advisory
// keys the thread and id locks had up to version 17, ACCESS SHARE on the
// tables, which only DDL waits for, an open snapshot) does not stall a
// writer: every write path goes through while it holds them.
func TestRolesReadOnlyCannotStallAWriter(t *testing.T) {
	t.Parallel()
	rs := setupRoles(t)
	ctx := context.Background()
	appPool := rolePool(t, rs.appURL)
	app := engine.New(postgres.NewStore(appPool, postgres.Options{}), engine.Config{DeltaMinBytes: -1})
	single := engine.New(postgres.NewStore(appPool, postgres.Options{SingleStatement: true}), engine.Config{})
	first, err := app.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run", Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	retried := engine.NewCheckpointID()
	if _, err := app.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run", ID: retried}); err != nil {
		t.Fatal(err)
	}

	ro, err := pgx.Connect(ctx, rs.readURL)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(context.WithoutCancel(ctx))
	// Refused, each in a transaction of its own.
	for _, sql := range []string{
		`SELECT pgcheckpoint.thread_lock('run')`,
		`SELECT pgcheckpoint.thread_lock_many(ARRAY['run'])`,
		`SELECT 1 FROM pgcheckpoint.thread_locks WHERE thread_id = 'run' FOR UPDATE`,
		`SELECT 1 FROM pgcheckpoint.thread_locks WHERE thread_id = 'run' FOR NO KEY UPDATE`,
		`SELECT 1 FROM pgcheckpoint.thread_locks WHERE thread_id = 'run' FOR SHARE`,
		`SELECT 1 FROM pgcheckpoint.thread_locks WHERE thread_id = 'run' FOR KEY SHARE`,
		`SELECT 1 FROM pgcheckpoint.threads WHERE thread_id = 'run' FOR KEY SHARE`,
		`SELECT 1 FROM pgcheckpoint.checkpoints WHERE thread_id = 'run' FOR KEY SHARE`,
		`LOCK TABLE pgcheckpoint.thread_locks IN ROW SHARE MODE`,
		`LOCK TABLE pgcheckpoint.checkpoints IN SHARE MODE`,
		`LOCK TABLE pgcheckpoint.threads IN SHARE MODE`,
	} {
		tx, err := ro.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, sql); sqlState(err) != "42501" {
			t.Errorf("the read-only role: %s: %v, want SQLSTATE 42501", sql, err)
		}
		tx.Rollback(ctx)
	}
	// Held, all at once, while the application writes.
	holder, err := ro.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.WithoutCancel(ctx))
	for _, sql := range []string{
		`SELECT pg_advisory_xact_lock(1885563760, hashtext('run'))`,
		`SELECT pg_advisory_xact_lock(1885563753, uuid_hash('` + retried.String() + `'))`,
		`LOCK TABLE pgcheckpoint.threads, pgcheckpoint.checkpoints IN ACCESS SHARE MODE`,
		`SELECT count(*) FROM pgcheckpoint.checkpoints`,
	} {
		if _, err := holder.Exec(ctx, sql); err != nil {
			t.Fatalf("the read-only role: %s: %v", sql, err)
		}
	}
	for name, write := range map[string]func(wctx context.Context) error{
		"Snapshot (pipelined)": func(wctx context.Context) error {
			_, err := app.Snapshot(wctx, engine.SnapshotInput{ThreadID: "run", Messages: json.RawMessage(`[{"role":"user","content":"hi"},{"role":"user","content":"more"}]`)})
			return err
		},
		"Snapshot (checkpoint_put)": func(wctx context.Context) error {
			_, err := single.Snapshot(wctx, engine.SnapshotInput{ThreadID: "run"})
			return err
		},
		"Snapshot, a retried id": func(wctx context.Context) error {
			_, err := app.Snapshot(wctx, engine.SnapshotInput{ThreadID: "run", ID: retried})
			return err
		},
		"Append": func(wctx context.Context) error {
			_, err := app.Append(wctx, engine.AppendInput{ThreadID: "run", SetState: json.RawMessage(`{"k":1}`)})
			return err
		},
		"a new thread": func(wctx context.Context) error {
			_, err := app.Snapshot(wctx, engine.SnapshotInput{ThreadID: "new"})
			return err
		},
		"Branch": func(wctx context.Context) error {
			_, err := app.Branch(wctx, first.ID, "alt")
			return err
		},
		"Rewind": func(wctx context.Context) error {
			_, err := app.Rewind(wctx, first.ID)
			return err
		},
		"DeleteCheckpoints": func(wctx context.Context) error {
			_, err := app.DeleteCheckpoints(wctx, engine.BeforeStep("new", 1))
			return err
		},
	} {
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := write(wctx)
		cancel()
		if err != nil {
			t.Errorf("%s while the read-only role holds its locks: %v (after %v)", name, err, time.Since(start).Round(time.Millisecond))
		}
	}
}
