package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// A write that ends any way but a COMMIT (an error, its context cancelled
// inside the transaction, a panic) is rolled back on the held writer
// connection: nothing it wrote stays, and the next write begins and
// commits on that connection.
func TestWriteEndedEarlyRollsBack(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "w.db"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(s, engine.Config{})
	defer eng.Close()
	snap := func(ctx context.Context, q *queries) error {
		_, err := s.put(ctx, q, engine.PutRequest{ThreadID: "t", ID: engine.NewCheckpointID(),
			Messages: json.RawMessage(`[]`), State: json.RawMessage(`{}`), ToolResults: json.RawMessage(`{}`),
			Metadata: json.RawMessage(`{}`), DeltaRun: 1, Trigger: engine.TriggerManual}, [16]byte{})
		return err
	}
	boom := errors.New("boom")
	cctx, cancel := context.WithCancel(ctx)
	ends := map[string]func(){
		"error": func() {
			if err := s.write(ctx, func(q *queries, _ execer) error {
				if err := snap(ctx, q); err != nil {
					return err
				}
				return boom
			}); !errors.Is(err, boom) {
				t.Errorf("write: %v, want boom", err)
			}
		},
		"cancelled": func() {
			if err := s.write(cctx, func(q *queries, _ execer) error {
				if err := snap(cctx, q); err != nil {
					return err
				}
				cancel()
				return nil // the COMMIT meets the cancelled context
			}); !errors.Is(err, context.Canceled) {
				t.Errorf("write: %v, want context.Canceled", err)
			}
		},
		"panic": func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			_ = s.write(ctx, func(q *queries, _ execer) error {
				if err := snap(ctx, q); err != nil {
					return err
				}
				panic(boom)
			})
		},
	}
	count := func() int {
		t.Helper()
		l, err := eng.ListCheckpoints(ctx, "t", engine.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	for name, end := range ends {
		end()
		if n := count(); n != 0 {
			t.Errorf("after a write ended by %s: %d checkpoints, want 0", name, n)
		}
	}
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatalf("a write after those: %v", err)
	}
	if n := count(); n != 1 {
		t.Errorf("%d checkpoints, want 1", n)
	}
}
