package pgcheckpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// A SQLite file needs no server: the same Engine API as on Postgres, for
// local development and tests.
func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "pgcheckpoint-example")
	defer os.RemoveAll(dir)

	eng, err := pgcheckpoint.Open(ctx, "sqlite:"+filepath.Join(dir, "agent.db"), pgcheckpoint.Options{Migrate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()

	for _, msg := range []string{"plan a trip", "searching flights"} {
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{
			ThreadID: "run-42",
			Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":%q}]`, msg)),
			State:    json.RawMessage(`{"cursor":1}`),
		}); err != nil {
			fmt.Println(err)
			return
		}
	}
	head, err := eng.Latest(ctx, "run-42")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("step", head.Step, head.Summary)
	// Output: step 2 [user] searching flights
}

// ParseURL tells which store a URL names.
func ExampleParseURL() {
	for _, url := range []string{"postgres://app@db:5432/app", "host=/tmp dbname=app", "sqlite:agent.db", "sqlite::memory:", "mysql://x"} {
		kind, target, err := pgcheckpoint.ParseURL(url)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(kind, target)
	}
	// Output:
	// postgres postgres://app@db:5432/app
	// postgres host=/tmp dbname=app
	// sqlite agent.db
	// sqlite :memory:
	// error: pgcheckpoint: invalid input: database URL "mysql://...": want postgres://..., postgresql://..., sqlite:PATH, sqlite::memory: or keyword/value (host=... dbname=...)
}

// Tenants keep their threads apart in one database: each Engine from
// ForTenant reads and writes its tenant's rows alone, and two tenants may
// use the same thread id. An Engine that names no tenant is the default
// tenant's.
func Example_tenants() {
	ctx := context.Background()
	eng, err := pgcheckpoint.Open(ctx, "sqlite::memory:", pgcheckpoint.Options{Migrate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close() // closes the store every tenant's Engine shares

	acme, err := eng.ForTenant("acme")
	if err != nil {
		fmt.Println(err) // engine.ErrInvalidInput for a bad name
		return
	}
	globex, _ := eng.ForTenant("globex")
	mine, _ := acme.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run-1", State: json.RawMessage(`{"customer":"acme"}`)})
	globex.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run-1", State: json.RawMessage(`{"customer":"globex"}`)})

	head, _ := globex.Latest(ctx, "run-1")
	_, err = globex.Get(ctx, mine.ID)
	fmt.Println(globex.Tenant(), string(head.State), errors.Is(err, engine.ErrNotFound))
	fmt.Println(eng.Tenant())
	// Output:
	// globex {"customer":"globex"} true
	// default
}
