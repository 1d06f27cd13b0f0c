package integration

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// Input that only Postgres refuses (a number jsonb cannot hold, JSON nested
// deeper than the server parses) gets a typed error on every path, and
// nothing is written.
func TestInputPostgresRefusesIsTyped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	before := b.count(t)
	huge := json.RawMessage(`{"a": 1e999999}`)
	deep := json.RawMessage(`{"a": ` + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + `}`)
	whole := engine.New(b.db.Pool, engine.Config{}) // small snapshots: parsed by Postgres alone
	for name, call := range map[string]func() error{
		"state, stored whole": func() error {
			_, err := whole.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", State: huge})
			return err
		},
		"state, as a delta": func() error {
			_, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", State: huge})
			return err
		},
		"metadata": func() error {
			_, err := whole.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", Metadata: huge})
			return err
		},
		"deep state, stored whole": func() error {
			_, err := whole.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", State: deep})
			return err
		},
		"metadata filter": func() error {
			_, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Metadata: huge})
			return err
		},
		"pending write": func() error {
			_, err := b.eng.PutWrites(b.ctx, first.ID, "task", []engine.Write{{Channel: "c", Value: huge}})
			return err
		},
	} {
		if err := call(); !errors.Is(err, engine.ErrInvalidJSON) {
			t.Errorf("%s: %v, want ErrInvalidJSON", name, err)
		}
	}
	if after := b.count(t); after != before {
		t.Fatalf("refused input wrote rows: %v -> %v", before, after)
	}
}
