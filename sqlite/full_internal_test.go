package sqlite

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// A file at its max_page_count (SQLite's own SQLITE_FULL, as a full disk
// gives) fails a write with engine.ErrStorageFull, which is not
// ErrTransient (Config.Retry does not retry it), and nothing is written;
// once there is room, the same write with the same id succeeds.
func TestMaxPageCountIsStorageFull(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "full.db"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(s, engine.Config{FullSnapshots: true, Retry: engine.RetryPolicy{Attempts: 3}})
	defer eng.Close()
	first, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	var pages int64
	if err := s.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	// The writer is one connection, held: the limit holds for it.
	if _, err := s.wc.conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+4)); err != nil {
		t.Fatal(err)
	}
	before := exportOf(t, eng, "t")
	big := randomState(t, 64<<10)
	in := engine.SnapshotInput{ThreadID: "t", ID: engine.NewCheckpointID(), State: big}
	_, err = eng.Snapshot(ctx, in)
	if !errors.Is(err, engine.ErrStorageFull) || errors.Is(err, engine.ErrTransient) || errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("snapshot over max_page_count: %v, want ErrStorageFull alone", err)
	}
	t.Logf("snapshot over max_page_count: %v", err)
	if _, err := eng.PutWrites(ctx, first.ID, "task", []engine.Write{{Channel: "c", Value: big}}); !errors.Is(err, engine.ErrStorageFull) {
		t.Fatalf("pending write over max_page_count: %v, want ErrStorageFull", err)
	}
	if after := exportOf(t, eng, "t"); after != before {
		t.Fatalf("a refused write changed the thread:\n%s\n%s", before, after)
	}
	if _, err := s.wc.conn.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	res, err := eng.Snapshot(ctx, in)
	if err != nil || !res.Created {
		t.Fatalf("the same write with room: %+v %v", res, err)
	}
}

// randomState is a JSON object of about n bytes that does not compress.
func randomState(t testing.TB, n int) json.RawMessage {
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return json.RawMessage(`{"r":"` + hex.EncodeToString(b) + `"}`)
}

func exportOf(t testing.TB, eng *engine.Engine, thread string) string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := eng.Export(context.Background(), thread, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}
