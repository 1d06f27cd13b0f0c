package db_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/db"
)

// publicQueries is package db's promise (see doc.go): the queries that are
// the SQL API's typed form. Adding a name here makes it public API for the
// rest of the major version; removing one is a breaking change.
var publicQueries = []string{
	"CheckpointAppend",
	"CheckpointDeleteBefore",
	"CheckpointDeleteForRuns",
	"CheckpointGetByID",
	"CheckpointGetHead",
	"CheckpointLineage",
	"CheckpointListByThread",
	"CheckpointPut",
	"CheckpointRewind",
	"PendingWritePutMany",
	"ThreadBranch",
	"ThreadCopy",
	"ThreadDelete",
	"ThreadListBranches",
	"ThreadListHeads",
	"ThreadMerge",
	"ThreadGc",
	"ThreadGcBatch",
	"ThreadGetExpiry",
	"ThreadPruneMany",
	"ThreadRewindToStep",
	"ThreadSetExpiry",
	"ThreadTree",
}

// TestQueriesAreThePromisedAPI fails when a query reaches package db
// without a decision about its status, or a promised one disappears.
func TestQueriesAreThePromisedAPI(t *testing.T) {
	var got []string
	typ := reflect.TypeOf(&db.Queries{})
	for i := range typ.NumMethod() {
		if name := typ.Method(i).Name; name != "WithTx" { // sqlc's, not a query
			got = append(got, name)
		}
	}
	for _, name := range got {
		if !slices.Contains(publicQueries, name) {
			t.Errorf("db.Queries.%s is not in publicQueries: a query in queries/*.sql is public API. "+
				"If it is the typed form of a documented SQL function or read, add it to publicQueries "+
				"in db/surface_test.go; if only the engine needs it, move it to queries/internal/ "+
				"(package internal/enginedb) and run sqlc generate", name)
		}
	}
	for _, name := range publicQueries {
		if !slices.Contains(got, name) {
			t.Errorf("db.Queries.%s is promised (publicQueries in db/surface_test.go) but gone: removing "+
				"or renaming a public query breaks callers (before 1.0 it may go: remove it here too, and say so in the README)", name)
		}
	}
}
