package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// An expiry at year 1's first instant or before, set by a bare UPDATE
// (SetThreadExpiry refuses it), reads as expired, as a sweep takes it, not
// as the zero time of "does not expire" (the thread read as never expiring
// while a sweep expired it), as on Postgres.
func TestExpiryBeforeYearOneReadsExpired(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng := engine.New(st, engine.Config{})
	for _, thread := range []string{"first", "before"} {
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	first := time.Time{}.UnixMicro()
	for thread, at := range map[string]int64{"first": first, "before": first - 1} {
		if _, err := db.ExecContext(ctx, `UPDATE threads SET expires_at = ? WHERE thread_id = ?`, at, thread); err != nil {
			t.Fatal(err)
		}
		if got, _, err := eng.ThreadExpiry(ctx, thread); err != nil || got.IsZero() {
			t.Errorf("an expiry at %d µs: ThreadExpiry %v, %v; want expired", at, got, err)
		}
	}
	if res, err := eng.Sweep(ctx, engine.KeepAll(), engine.SweepOptions{}); err != nil || res.Expired != 2 {
		t.Fatalf("sweep: %+v, %v; want both expired", res, err)
	}
}
