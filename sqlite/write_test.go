package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// exported is a thread as an export holds it: its thread rows, and its
// checkpoints as stored, in namespace then write order.
type exported struct {
	text        string
	threads     []engine.ExportThread
	checkpoints []engine.ExportCheckpoint
}

func export(t *testing.T, eng *engine.Engine, thread string) exported {
	t.Helper()
	var buf bytes.Buffer
	if _, err := eng.Export(context.Background(), thread, &buf); err != nil {
		t.Fatal(err)
	}
	ex := exported{text: buf.String()}
	for _, line := range strings.Split(strings.TrimSpace(ex.text), "\n") {
		var kind struct{ Kind string }
		if err := json.Unmarshal([]byte(line), &kind); err != nil {
			t.Fatal(err)
		}
		switch kind.Kind {
		case "thread":
			var th engine.ExportThread
			if err := json.Unmarshal([]byte(line), &th); err != nil {
				t.Fatal(err)
			}
			ex.threads = append(ex.threads, th)
		case "checkpoint":
			var c engine.ExportCheckpoint
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatal(err)
			}
			ex.checkpoints = append(ex.checkpoints, c)
		}
	}
	return ex
}

// chatMessage is a message of about 200 bytes.
func chatMessage(i int) string {
	return fmt.Sprintf(`{"role":"user","content":"message %d %s"}`, i, strings.Repeat("z", 160))
}

// A line of writes under delta run 4 is stored as the run limit says:
// deltas on the parent while the parent's run holds fewer than 3 (run 1,
// 2, 3), then a delta on the anchor the run started from (run 0, one
// deeper than the anchor), and whole once the anchors are 3 deep. Written
// whole with Snapshot and as changes with Append, the line is stored the
// same way: the rule is PutAppend's and planDelta's alike.
func TestDeltaRunLimit(t *testing.T) {
	t.Parallel()
	type layout struct {
		storage    string
		base       int // the base's place in the line, from 1; 0: none
		run, depth int64
	}
	want := []layout{
		{"full", 0, 0, 0},
		{"delta", 1, 1, 1}, {"delta", 2, 2, 2}, {"delta", 3, 3, 3},
		{"delta", 1, 0, 1}, // the run is full: on its anchor, 1
		{"delta", 5, 1, 2}, {"delta", 6, 2, 3}, {"delta", 7, 3, 4},
		{"delta", 5, 0, 2}, // on the anchor 5, one deeper
		{"delta", 9, 1, 3}, {"delta", 10, 2, 4}, {"delta", 11, 3, 5},
		{"delta", 9, 0, 3},
		{"delta", 13, 1, 4}, {"delta", 14, 2, 5}, {"delta", 15, 3, 6}, // 6 = 2(R-1) links at most
		{"full", 0, 0, 0}, // the anchor 13 is 3 deep: whole
		{"delta", 17, 1, 1},
	}
	ctx := context.Background()
	b := setup(t, engine.Config{DeltaRun: 4, DeltaMinBytes: -1})
	var msgs []string
	for i := range want {
		msgs = append(msgs, chatMessage(i))
		state := json.RawMessage(fmt.Sprintf(`{"step":%d,"user":"u-1"}`, i))
		if _, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "snapshots", State: state,
			Messages: json.RawMessage("[" + strings.Join(msgs, ",") + "]")}); err != nil {
			t.Fatal(err)
		}
		var err error
		if i == 0 {
			_, err = b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "appends", State: state,
				Messages: json.RawMessage("[" + msgs[0] + "]")})
		} else {
			_, err = b.eng.Append(ctx, engine.AppendInput{ThreadID: "appends", SetState: json.RawMessage(fmt.Sprintf(`{"step":%d}`, i)),
				Messages: json.RawMessage("[" + msgs[i] + "]")})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, thread := range []string{"snapshots", "appends"} {
		cps := export(t, b.eng, thread).checkpoints
		if len(cps) != len(want) {
			t.Fatalf("%s: %d checkpoints, want %d", thread, len(cps), len(want))
		}
		place := map[uuid.UUID]int{}
		for i, c := range cps {
			place[c.ID] = i + 1
			got := layout{storage: c.Storage, run: c.DeltaRun, depth: c.DeltaDepth}
			if c.BaseID != nil {
				got.base = place[*c.BaseID]
			}
			if got != want[i] {
				t.Errorf("%s: write %d is stored %+v, want %+v", thread, i+1, got, want[i])
			}
		}
		head, err := b.eng.Latest(ctx, thread)
		if err != nil {
			t.Fatal(err)
		}
		if string(head.Messages) != "["+strings.Join(msgs, ",")+"]" {
			t.Fatalf("%s: the head reads %s", thread, head.Messages)
		}
	}
}

// An append on a head stored without digests (written with delta storage
// off) cannot be a delta made of the change alone: it is written whole,
// with digests, and the append after it is a delta on it.
func TestAppendOnAHeadWithoutDigests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, engine.Config{FullSnapshots: true})
	first, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage("[" + chatMessage(0) + "]"),
		State: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(ctx, b.path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deltas := engine.New(store, engine.Config{DeltaMinBytes: -1})
	t.Cleanup(func() { deltas.Close() })
	var ids []uuid.UUID
	for i := 1; i <= 2; i++ {
		res, err := deltas.Append(ctx, engine.AppendInput{ThreadID: "t", Messages: json.RawMessage("[" + chatMessage(i) + "]"),
			SetState: json.RawMessage(fmt.Sprintf(`{"b":%d}`, i))})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		ids = append(ids, res.ID)
	}
	cps := export(t, deltas, "t").checkpoints
	if len(cps) != 3 || cps[1].Storage != engine.StorageFull || cps[2].Storage != engine.StorageDelta ||
		cps[2].BaseID == nil || *cps[2].BaseID != ids[0] || cps[0].ID != first.ID {
		t.Fatalf("stored %+v", cps)
	}
	head, err := deltas.Latest(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if want := "[" + chatMessage(0) + "," + chatMessage(1) + "," + chatMessage(2) + "]"; string(head.Messages) != want ||
		string(head.State) != `{"a":1,"b":2}` {
		t.Fatalf("the head reads %s %s", head.Messages, head.State)
	}
}

// A retry must repeat the next node and the metadata (JSON-equal) as well
// as the content; a write that differs in either is a conflict, and
// writes nothing, for Snapshot and Append alike.
func TestRetryRepeatsNextNodeAndMetadata(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, engine.Config{DeltaMinBytes: -1})
	snap := engine.SnapshotInput{ThreadID: "t", ID: engine.NewCheckpointID(), NextNode: "plan",
		Messages: json.RawMessage("[" + chatMessage(0) + "]"), Metadata: json.RawMessage(`{"run_id":"r1","n":1}`)}
	app := engine.AppendInput{ThreadID: "t", ID: engine.NewCheckpointID(), NextNode: "act",
		Messages: json.RawMessage("[" + chatMessage(1) + "]"), Metadata: json.RawMessage(`{"run_id":"r1"}`)}
	if _, err := b.eng.Snapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Append(ctx, app); err != nil {
		t.Fatal(err)
	}
	before := export(t, b.eng, "t").text

	again := snap
	again.Metadata = json.RawMessage(`{ "n": 1, "run_id": "r1" }`)
	if res, err := b.eng.Snapshot(ctx, again); err != nil || res.Created || res.ID != snap.ID {
		t.Fatalf("a retry with JSON-equal metadata: %+v %v", res, err)
	}
	appAgain := app
	if res, err := b.eng.Append(ctx, appAgain); err != nil || res.Created || res.ID != app.ID {
		t.Fatalf("a retried append: %+v %v", res, err)
	}
	for name, w := range map[string]func() error{
		"snapshot, other next node": func() error { in := snap; in.NextNode = "act"; _, err := b.eng.Snapshot(ctx, in); return err },
		"snapshot, other metadata": func() error {
			in := snap
			in.Metadata = json.RawMessage(`{"run_id":"r2","n":1}`)
			_, err := b.eng.Snapshot(ctx, in)
			return err
		},
		"append, other next node": func() error { in := app; in.NextNode = "plan"; _, err := b.eng.Append(ctx, in); return err },
		"append, other metadata": func() error {
			in := app
			in.Metadata = json.RawMessage(`{}`)
			_, err := b.eng.Append(ctx, in)
			return err
		},
	} {
		if err := w(); !errors.Is(err, engine.ErrIDConflict) {
			t.Errorf("%s: %v, want ErrIDConflict", name, err)
		}
	}
	if after := export(t, b.eng, "t").text; after != before {
		t.Fatalf("refused retries changed the thread:\n%s\nwant\n%s", after, before)
	}
}

// Writes on a file where a namespace has no thread row, or a thread row is
// rewound to a checkpoint of another namespace (no write makes either, and
// an import refuses both: the file is changed by hand here): Put and
// PutAppend find the parent by the same rule, as Postgres does. A write in
// the namespace without a row makes its row; a write on the stale rewind
// fails with ErrNotFound and writes nothing, though a read of the head
// falls back on the newest checkpoint.
func TestWritesAfterAnImportAgreeOnTheParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := engine.Config{DeltaMinBytes: -1}
	src := setup(t, cfg)
	var root, sub []uuid.UUID
	for i := range 3 {
		for _, ns := range []string{"", "sub"} {
			res, err := src.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Namespace: ns,
				Messages: json.RawMessage("[" + chatMessage(0) + "," + chatMessage(i) + "]")})
			if err != nil {
				t.Fatal(err)
			}
			if ns == "" {
				root = append(root, res.ID)
			} else {
				sub = append(sub, res.ID)
			}
		}
	}
	ex := export(t, src.eng, "t")
	if len(ex.threads) != 2 || ex.threads[1].Namespace != "sub" {
		t.Fatalf("thread rows %+v", ex.threads)
	}
	// The thread imported, then its file changed by the statement given.
	changed := func(statement string, args ...any) bundle {
		t.Helper()
		b := setup(t, cfg)
		if _, err := b.eng.Import(ctx, strings.NewReader(ex.text), engine.ImportOptions{}); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", b.path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if res, err := db.ExecContext(ctx, statement, args...); err != nil {
			t.Fatal(err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s changed %d rows", statement, n)
		}
		return b
	}

	// No thread row for "sub": an append there (a delta on the head, the
	// path that used to fail) makes it.
	b := changed(`DELETE FROM threads WHERE thread_id = 't' AND namespace = 'sub'`)
	if n := len(export(t, b.eng, "t").threads); n != 1 {
		t.Fatalf("the import made %d thread rows, want 1", n)
	}
	res, err := b.eng.Append(ctx, engine.AppendInput{ThreadID: "t", Namespace: "sub", Messages: json.RawMessage("[" + chatMessage(9) + "]")})
	if err != nil || res.ParentID != sub[2] {
		t.Fatalf("append in a namespace without a thread row: %+v %v, want a child of %s", res, err, sub[2])
	}
	after := export(t, b.eng, "t")
	if len(after.threads) != 2 || after.threads[1].Namespace != "sub" {
		t.Fatalf("thread rows after the append: %+v", after.threads)
	}
	if last := after.checkpoints[len(after.checkpoints)-1]; last.Storage != engine.StorageDelta || *last.BaseID != sub[2] {
		t.Fatalf("the append is stored %s on %v, want a delta on the head", last.Storage, last.BaseID)
	}

	// The root namespace rewound to a checkpoint of "sub".
	c := changed(`UPDATE threads SET rewound_to = ? WHERE thread_id = 't' AND namespace = ''`, sub[0].String())
	if rw := export(t, c.eng, "t").threads[0].RewoundTo; rw == nil || *rw != sub[0] {
		t.Fatalf("the import did not keep the rewind: %v", rw)
	}
	before := export(t, c.eng, "t").text
	if _, err := c.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage("[]")}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("snapshot on a rewind to another namespace: %v, want ErrNotFound", err)
	}
	if _, err := c.eng.Append(ctx, engine.AppendInput{ThreadID: "t", Messages: json.RawMessage("[" + chatMessage(9) + "]")}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("append on a rewind to another namespace: %v, want ErrNotFound", err)
	}
	if after := export(t, c.eng, "t"); after.text != before {
		t.Fatalf("refused writes changed the thread: %d checkpoints, rewound to %v", len(after.checkpoints), after.threads[0].RewoundTo)
	}
	if head, err := c.eng.Latest(ctx, "t"); err != nil || head.ID != root[2] {
		t.Fatalf("the head read: %v %v, want the newest, %s", head, err, root[2])
	}
}

// A write's seq follows the newest checkpoint of its thread and
// namespace, whatever its parent (the head, the checkpoint rewound to, one
// named), and its step follows its parent's.
func TestSeqFollowsTheNewestStepTheParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, engine.Config{DeltaMinBytes: -1})
	msgs := func(n int) json.RawMessage {
		var ms []string
		for i := range n {
			ms = append(ms, chatMessage(i))
		}
		return json.RawMessage("[" + strings.Join(ms, ",") + "]")
	}
	var ids []uuid.UUID
	write := func(in engine.SnapshotInput) {
		t.Helper()
		res, err := b.eng.Snapshot(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	for i := 1; i <= 3; i++ {
		write(engine.SnapshotInput{ThreadID: "t", Messages: msgs(i)})
	}
	if _, err := b.eng.Rewind(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	write(engine.SnapshotInput{ThreadID: "t", Messages: msgs(2)})                   // on 1, rewound to
	write(engine.SnapshotInput{ThreadID: "t", Messages: msgs(3), ParentID: ids[1]}) // on 2, named
	if _, err := b.eng.Rewind(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	res, err := b.eng.Append(ctx, engine.AppendInput{ThreadID: "t", Messages: msgs(1)}) // on 3, rewound to
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, res.ID)
	res, err = b.eng.Append(ctx, engine.AppendInput{ThreadID: "t", Messages: msgs(1)}) // on the newest, 6
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, res.ID)
	parents := []int{0, 1, 2, 1, 2, 3, 6} // by place in ids, from 1; 0: none
	steps := []int64{1, 2, 3, 2, 3, 4, 5}
	for i, id := range ids {
		cp, err := b.eng.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wantParent := uuid.Nil
		if parents[i] > 0 {
			wantParent = ids[parents[i]-1]
		}
		if cp.Seq != int64(i+1) || cp.Step != steps[i] || cp.ParentID != wantParent {
			t.Errorf("write %d: seq %d, step %d, parent %s; want seq %d, step %d, parent %s",
				i+1, cp.Seq, cp.Step, cp.ParentID, i+1, steps[i], wantParent)
		}
	}
}

// An Append at the end of a delta run is stored from the run alone: a
// delta on the run's anchor made of the run's deltas and the change,
// reading nothing written before the anchor (which would cost the whole
// conversation). Here what comes before the anchor is made unreadable (the
// thread's first checkpoint, stored whole, is marked a delta on no base):
// the append at the end of the run still succeeds, on the anchor, and once
// the mark is undone the thread reads back whole, with the run's state
// changes and removals.
func TestAppendAtTheEndOfARunReadsOnlyTheRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, engine.Config{DeltaRun: 4, DeltaMinBytes: -1})
	// Writes 1 to 8 (see TestDeltaRunLimit): write 5 is the anchor of the
	// run 6, 7, 8, and write 9 ends it.
	changes := []struct{ set, remove string }{
		{`{"a":1,"b":1,"c":1}`, ""}, {`{"a":2}`, ""}, {`{"d":3}`, ""}, {`{"b":4}`, ""}, {`{"a":5}`, ""},
		{`{"e":6,"a":6}`, ""}, {`{"e":7}`, "c"}, {`{"f":8}`, "e"}, {`{"g":9}`, "d"},
	}
	var all []string
	var ids []uuid.UUID
	for i, c := range changes {
		all = append(all, chatMessage(i))
		var res engine.SnapshotResult
		var err error
		if i == 0 {
			res, err = b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(c.set),
				Messages: json.RawMessage("[" + all[0] + "]")})
		} else {
			if i == len(changes)-1 {
				// Break what comes before the anchor.
				setFormat(t, b.path, ids[0], "delta")
			}
			var remove []string
			if c.remove != "" {
				remove = []string{c.remove}
			}
			res, err = b.eng.Append(ctx, engine.AppendInput{ThreadID: "t", SetState: json.RawMessage(c.set), RemoveState: remove,
				Messages: json.RawMessage("[" + all[i] + "]")})
		}
		if err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
		ids = append(ids, res.ID)
	}
	setFormat(t, b.path, ids[0], "full")
	cps := export(t, b.eng, "t").checkpoints
	if last := cps[len(cps)-1]; last.Storage != "delta" || last.BaseID == nil || *last.BaseID != ids[4] || last.DeltaRun != 0 {
		t.Errorf("the append ending the run is stored %s on %v (run %d), want a delta on write 5 (run 0)", last.Storage, last.BaseID, last.DeltaRun)
	}
	head, err := b.eng.Latest(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if string(head.Messages) != "["+strings.Join(all, ",")+"]" {
		t.Errorf("the head's messages read %s", head.Messages)
	}
	if want := `{"a":6,"b":4,"f":8,"g":9}`; !jsonSame(head.State, want) {
		t.Errorf("the head's state reads %s, want %s", head.State, want)
	}
}

// setFormat changes how a checkpoint's row says it is stored, by hand.
func setFormat(t *testing.T, path string, id uuid.UUID, format string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE checkpoints SET format = ? WHERE checkpoint_id = ?`, format, id.String()); err != nil {
		t.Fatal(err)
	}
}

// jsonSame reports whether got is the JSON value want.
func jsonSame(got []byte, want string) bool {
	var g, w any
	return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && fmt.Sprint(g) == fmt.Sprint(w)
}
