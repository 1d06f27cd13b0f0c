package engine_test

import (
	"os"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
)

// The examples read DATABASE_URL, as an application would: here it names a
// fresh migrated database on the test server, so the documentation runs.
func TestMain(m *testing.M) { os.Exit(pgtest.MainWithDatabase(m, "DATABASE_URL")) }
