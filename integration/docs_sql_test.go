package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/readmecheck"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// Every sql block of the README and docs/ runs, whole, on a migrated
// database holding the docs' thread run-42 (a few steps, a branch, a
// "memory cleared" marker), as one simple-protocol query (psql's way,
// several statements at once). pg_cron is not installed on test servers: a
// stand-in cron.schedule records each job, and the job's command runs next.
func TestDocsSQLBlocksRun(t *testing.T) {
	t.Parallel()
	blocks, err := readmecheck.Blocks("..")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, b := range blocks {
		if b.Kind() != readmecheck.KindSQL {
			continue
		}
		ran++
		t.Run(b.Where(), func(t *testing.T) {
			t.Parallel()
			d := pgtest.NewDB(t)
			ctx := context.Background()
			eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
			for i := 1; i <= 4; i++ {
				if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run-42",
					Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"step %d"}]`, i)),
					State:    json.RawMessage(fmt.Sprintf(`{"step":%d}`, i))}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := eng.ClearMemory(ctx, "run-42"); err != nil {
				t.Fatal(err)
			}
			head, err := eng.Latest(ctx, "run-42")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := eng.Branch(ctx, head.ParentID, "run-42-try"); err != nil {
				t.Fatal(err)
			}
			conn, err := d.Pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, `CREATE SCHEMA cron;
				CREATE TABLE cron.job (jobname text PRIMARY KEY, schedule text NOT NULL, command text NOT NULL);
				CREATE FUNCTION cron.schedule(name text, schedule text, command text) RETURNS bigint
					LANGUAGE sql AS $$ INSERT INTO cron.job VALUES (name, schedule, command); SELECT 1::bigint $$`); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, b.Text); err != nil {
				t.Fatalf("%s:\n%s\n%v", b.Where(), b.Text, err)
			}
			rows, err := conn.Query(ctx, `SELECT jobname, command FROM cron.job`)
			if err != nil {
				t.Fatal(err)
			}
			jobs := map[string]string{}
			for rows.Next() {
				var name, command string
				if err := rows.Scan(&name, &command); err != nil {
					t.Fatal(err)
				}
				jobs[name] = command
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			for name, command := range jobs {
				if _, err := conn.Exec(ctx, command); err != nil {
					t.Fatalf("%s: pg_cron job %s: %s: %v", b.Where(), name, command, err)
				}
			}
		})
	}
	if ran == 0 {
		t.Fatal("the docs hold no sql block")
	}
}
