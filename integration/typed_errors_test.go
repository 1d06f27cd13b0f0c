package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// Input that only Postgres refuses (a number jsonb cannot hold, JSON nested
// deeper than the server parses, an unpaired surrogate escape, bytes that
// are not UTF-8) gets a typed error on every path, naming the field it was
// in, and nothing is written.
func TestInputPostgresRefusesIsTyped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	// An export to import again with a hostile value in one field.
	exported, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "exported"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.PutWrites(b.ctx, exported.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`[]`)}}); err != nil {
		t.Fatal(err)
	}
	var export bytes.Buffer
	if _, err := b.eng.Export(b.ctx, "exported", &export); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.DeleteThreads(b.ctx, "exported"); err != nil {
		t.Fatal(err)
	}
	before := b.count(t)
	huge := json.RawMessage(`{"a": 1e999999}`)
	deep := json.RawMessage(`{"a": ` + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + `}`)
	surrogate := json.RawMessage(`{"a": "\ud800"}`)
	notUTF8 := json.RawMessage("{\"a\": \"\xff\"}")
	whole := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{}) // small snapshots: parsed by Postgres alone
	single := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{SingleStatement: true}), engine.Config{})
	snapshot := func(eng *engine.Engine, in engine.SnapshotInput) func() error {
		return func() error {
			in.ThreadID = "t"
			_, err := eng.Snapshot(b.ctx, in)
			return err
		}
	}
	importWith := func(field, empty, value string) func() error {
		return func() error {
			text := strings.Replace(export.String(), `"`+field+`":`+empty, `"`+field+`":`+value, 1)
			if text == export.String() {
				t.Fatalf("the export has no empty %s: %s", field, export.String())
			}
			_, err := b.eng.Import(b.ctx, bytes.NewReader(enginetest.Reseal([]byte(text))), engine.ImportOptions{})
			return err
		}
	}
	for _, c := range []struct {
		name, field string // field: what the message names
		call        func() error
	}{
		{"state, stored whole", "snapshot: state: ", snapshot(whole, engine.SnapshotInput{State: huge})},
		{"state, as a delta", "snapshot: state: ", snapshot(b.eng, engine.SnapshotInput{State: huge})},
		{"state, single statement", "snapshot: state: ", snapshot(single, engine.SnapshotInput{State: huge})},
		{"messages", "snapshot: messages: ", snapshot(whole, engine.SnapshotInput{Messages: json.RawMessage(`[1, -1e-999999]`)})},
		{"tool results, surrogate", "snapshot: tool results: ", snapshot(whole, engine.SnapshotInput{ToolResults: surrogate})},
		{"metadata", "snapshot: metadata: ", snapshot(whole, engine.SnapshotInput{State: json.RawMessage(`{"a":1e99}`), Metadata: huge})},
		{"metadata, not UTF-8", "snapshot: metadata: ", snapshot(whole, engine.SnapshotInput{Metadata: notUTF8})},
		{"deep state, stored whole", "state does not parse", snapshot(whole, engine.SnapshotInput{State: deep})},
		{"metadata filter", "list checkpoints: metadata filter: ", func() error {
			_, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Metadata: huge})
			return err
		}},
		{"metadata filter, surrogate", "list checkpoints: metadata filter: ", func() error {
			_, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Metadata: surrogate})
			return err
		}},
		{"pending write", `: write 1 of task "task": `, func() error {
			_, err := b.eng.PutWrites(b.ctx, first.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1e99`)}, {Channel: "c", Value: huge}})
			return err
		}},
		{"import, state", ": state: ", importWith("state", "{}", string(huge))},
		{"import, pending write", ": pending write 0 value: ", importWith("value", "[]", string(huge))},
		{"import, thread metadata", "record 2: thread metadata: ", importWith("metadata", "{}", string(surrogate))},
	} {
		err := c.call()
		if !errors.Is(err, engine.ErrInvalidJSON) {
			t.Errorf("%s: %v, want ErrInvalidJSON", c.name, err)
		} else if !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %.300v, want a message naming %q", c.name, err, c.field)
		}
		t.Logf("%s: %.200v", c.name, err)
	}
	if after := b.count(t); after != before {
		t.Fatalf("refused input wrote rows: %v -> %v", before, after)
	}
}

// An import writes its checkpoints and pending writes by COPY, a batch at a
// time; when Postgres refuses a row in the middle of a batch, the error
// names that row's record, checkpoint and field, once each (not the record
// whose line filled the batch, unless it is that one), also in the batch
// written after the last line, and nothing is written.
func TestImportNamesTheRowPostgresRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Two batches of 200 and 50: refused rows inside the first, the one that
	// fills it, and one in the last.
	const n, bad, full, last = 250, 130, 200, 240
	ids := make([]string, n+1)
	for i := 1; i <= n; i++ {
		res, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "many", State: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.ID.String()
		if _, err := b.eng.PutWrites(b.ctx, res.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(fmt.Sprintf(`{"w":%d}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
	var export bytes.Buffer
	if _, err := b.eng.Export(b.ctx, "many", &export); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.DeleteThreads(b.ctx, "many"); err != nil {
		t.Fatal(err)
	}
	before := b.count(t)
	// Checkpoint i is record i+2, after the header and the thread.
	named := func(i int, field string) string {
		return fmt.Sprintf("import: record %d: checkpoint %s: %s: ", i+2, ids[i], field)
	}
	for _, c := range []struct{ name, old, new, want string }{
		{"state", fmt.Sprintf(`"state":{"i":%d}`, bad), `"state":{"i":1e999999}`, named(bad, "state")},
		{"pending write", fmt.Sprintf(`{"w":%d}`, bad), `1e999999`, named(bad, "pending write 0 value")},
		{"state, the row that fills the batch", fmt.Sprintf(`"state":{"i":%d}`, full), `"state":{"i":1e999999}`, named(full, "state")},
		{"state, last batch", fmt.Sprintf(`"state":{"i":%d}`, last), `"state":{"i":1e999999}`, named(last, "state")},
	} {
		text := strings.Replace(export.String(), c.old, c.new, 1)
		if text == export.String() {
			t.Fatalf("%s: the export has no %s", c.name, c.old)
		}
		_, err := b.eng.Import(b.ctx, bytes.NewReader(enginetest.Reseal([]byte(text))), engine.ImportOptions{})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Count(err.Error(), "record ") != 1 ||
			strings.Count(err.Error(), "checkpoint ") != 1 {
			t.Errorf("%s: %.300v, want an error that begins %q and names one record and one checkpoint", c.name, err, c.want)
		}
		t.Logf("%s: %.200v", c.name, err)
	}
	if after := b.count(t); after != before {
		t.Fatalf("refused imports wrote rows: %v -> %v", before, after)
	}
	if _, err := b.eng.Import(b.ctx, bytes.NewReader(export.Bytes()), engine.ImportOptions{}); err != nil {
		t.Fatalf("the export itself: %v", err)
	}
}
