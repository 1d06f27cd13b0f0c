package pgcheckpoint_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
)

// TestMain lets the conformance suite run this binary as writer and agent
// processes.
func TestMain(m *testing.M) { os.Exit(enginetest.Main(m)) }

// TestConformance runs the conformance suite every store passes (package
// enginetest) on SQLite, each test in a file of its own. The Postgres run
// is in package integration.
func TestConformance(t *testing.T) {
	enginetest.Run(t, enginetest.Harness{
		Name:   "sqlite",
		NewURL: func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "test.db") },
	})
}

// TestConformanceBetweenStores moves exports between two SQLite files (see
// enginetest.RunBetween); the runs between SQLite and Postgres are in
// package integration.
func TestConformanceBetweenStores(t *testing.T) {
	sqlite := enginetest.Harness{
		Name:   "sqlite",
		NewURL: func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "test.db") },
	}
	enginetest.RunBetween(t, sqlite, sqlite)
}
