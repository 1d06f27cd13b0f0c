package integration

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// A DBA's ORDER BY thread_id in psql, on the tables and on the tenant
// views, gives the order of ListThreads (the ids' bytes), on a database
// whose own collation orders text otherwise (the tests' template: ICU
// en-US). The conformance suite (ThreadIDsSortByTheirBytes) holds the API
// of both stores to the same order.
func TestSQLOrdersThreadIDsByTheirBytes(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDB(t)
	ctx := context.Background()
	var byBytes bool
	if err := d.Pool.QueryRow(ctx, `SELECT 'B' < 'a'`).Scan(&byBytes); err != nil {
		t.Fatal(err)
	}
	if byBytes {
		t.Fatal("the test database orders text by bytes: this test would prove nothing")
	}
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
	ids := []string{"a", "B", "_x", "é", "e", "10", "9", "Ab"}
	for _, id := range ids {
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: id}); err != nil {
			t.Fatal(err)
		}
	}
	want := slices.Sorted(slices.Values(ids))
	for _, q := range []string{
		`SELECT thread_id FROM pgcheckpoint.threads ORDER BY thread_id`,
		`SELECT thread_id FROM pgcheckpoint.tenant_thread_heads ORDER BY thread_id`,
		`SELECT DISTINCT thread_id FROM pgcheckpoint.checkpoints ORDER BY thread_id`,
		`SELECT thread_id FROM pgcheckpoint.threads WHERE thread_id > '' ORDER BY thread_id`,
	} {
		rows, _ := d.Pool.Query(ctx, q)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
}
