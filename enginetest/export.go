package enginetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// seedHistory writes a thread with a rewind, a branch, a merge, pending
// writes, a sub-graph namespace and NUL characters, and returns its
// checkpoint ids on the main line in order and the branch's thread.
func seedHistory(t *testing.T, e *env, thread string) ([]uuid.UUID, string) {
	t.Helper()
	var ids []uuid.UUID
	msgs := `[{"role":"user","content":"hi\u0000there \u0001"}]`
	for i, s := range []string{`{"n": 1}`, `{"n": 2, "k": "v\u0000"}`, `{"n": 3}`} {
		res := e.snap(engine.SnapshotInput{ThreadID: thread, Trigger: engine.TriggerLLMCall, Messages: json.RawMessage(msgs),
			State: json.RawMessage(s), ToolResults: json.RawMessage(`{"t": [1, "\u0001"]}`), Tags: []string{"x", "y\u0001"},
			Metadata: json.RawMessage(`{"run_id": "r1", "nul": "a\u0000b"}`), NextNode: "n"})
		ids = append(ids, res.ID)
		msgs = msgs[:len(msgs)-1] + fmt.Sprintf(`,{"role":"assistant","content":"step %d"}]`, i+1)
	}
	if _, err := e.eng.PutWrites(e.ctx, ids[2], "task-a", []engine.Write{{Channel: "out", Value: json.RawMessage(`{"v": "\u0000"}`)}, {Channel: "out2", Value: json.RawMessage(`7`)}}); err != nil {
		t.Fatal(err)
	}
	br, err := e.eng.Branch(e.ctx, ids[1], "alt")
	if err != nil {
		t.Fatal(err)
	}
	e.snap(engine.SnapshotInput{ThreadID: br.ThreadID, State: json.RawMessage(`{"alt": true}`)})
	if _, err := e.eng.MergeBranch(e.ctx, br.ThreadID, thread); err != nil {
		t.Fatal(err)
	}
	e.snap(engine.SnapshotInput{ThreadID: thread, Namespace: "sub", State: json.RawMessage(`{"sub": 1}`)})
	if _, err := e.eng.Rewind(e.ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	return ids, br.ThreadID
}

// An export imported into a new database gives back every checkpoint with
// the same ids, parents, steps, times and content, the same heads and
// branches, and exports again to the same bytes.
func testExportImport(t *testing.T, e *env) {
	ids, branch := seedHistory(t, e, "run-1")
	exported := map[string][]byte{}
	for _, thread := range []string{"run-1", branch} {
		var buf bytes.Buffer
		st, err := e.eng.Export(e.ctx, thread, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if thread == "run-1" && st != (engine.ExportStats{Threads: 2, Checkpoints: 5, Deltas: 2, PendingWrites: 2}) {
			t.Fatalf("export stats %+v", st)
		}
		if !bytes.HasPrefix(buf.Bytes(), []byte(`{"kind":"pgcheckpoint-export","format":2,`)) {
			t.Fatalf("export of %s: %s", thread, clip(buf.Bytes()))
		}
		exported[thread] = buf.Bytes()
	}
	if s := string(exported["run-1"]); !strings.Contains(s, `\u0000`) || !strings.Contains(s, `"rewound_to":`) ||
		!strings.Contains(s, `"merge_parent_id":`) || !strings.Contains(s, `"namespace":"sub"`) {
		t.Fatalf("the export lacks NULs, the rewind, the merge or the namespace:\n%s", s)
	}

	dst := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	dst.eng = dst.open(deltas)
	var progress []engine.ExportStats
	st, err := dst.eng.Import(e.ctx, bytes.NewReader(exported["run-1"]), engine.ImportOptions{Progress: func(s engine.ExportStats) { progress = append(progress, s) }})
	if err != nil || st != (engine.ExportStats{Threads: 2, Checkpoints: 5, Deltas: 2, PendingWrites: 2}) {
		t.Fatalf("import: %+v %v", st, err)
	}
	if len(progress) == 0 || progress[len(progress)-1] != st {
		t.Fatalf("progress %+v", progress)
	}
	if st, err = dst.eng.Import(e.ctx, bytes.NewReader(exported[branch]), engine.ImportOptions{}); err != nil || st.Checkpoints != 2 {
		t.Fatalf("import of the branch: %+v %v", st, err)
	}

	src := e.inventory()
	imported := dst.inventory()
	if len(imported.checkpoints) != len(src.checkpoints) || imported.threadRows != src.threadRows || imported.writes != src.writes {
		t.Fatalf("imported %v, exported %v", imported.counts(), src.counts())
	}
	for id := range src.checkpoints {
		s, d := e.get(id), dst.get(id)
		if s.ThreadID != d.ThreadID || s.Namespace != d.Namespace || s.Seq != d.Seq || s.Step != d.Step || s.ParentID != d.ParentID ||
			s.MergeParentID != d.MergeParentID || s.Trigger != d.Trigger || !slices.Equal(s.Tags, d.Tags) || s.Summary != d.Summary ||
			s.NextNode != d.NextNode || s.SizeBytes != d.SizeBytes || !s.CreatedAt.Equal(d.CreatedAt) {
			t.Fatalf("checkpoint %s:\n imported %+v\n exported %+v", id, d.CheckpointInfo, s.CheckpointInfo)
		}
		jsonEqual(t, "metadata", d.Metadata, s.Metadata)
		jsonEqual(t, "messages", d.Messages, s.Messages)
		jsonEqual(t, "state", d.State, s.State)
		jsonEqual(t, "tool results", d.ToolResults, s.ToolResults)
		if len(d.PendingWrites) != len(s.PendingWrites) {
			t.Fatalf("checkpoint %s: %d pending writes, want %d", id, len(d.PendingWrites), len(s.PendingWrites))
		}
		for i, w := range s.PendingWrites {
			g := d.PendingWrites[i]
			if g.TaskID != w.TaskID || g.Index != w.Index || g.Channel != w.Channel {
				t.Fatalf("pending write %d: %+v, want %+v", i, g, w)
			}
			jsonEqual(t, "pending write", g.Value, w.Value)
		}
	}
	// Heads (the rewind included), branches and the tree come along.
	for _, th := range []struct{ thread, ns string }{{"run-1", ""}, {"run-1", "sub"}, {branch, ""}} {
		s, err1 := e.eng.LatestIn(e.ctx, th.thread, th.ns)
		d, err2 := dst.eng.LatestIn(e.ctx, th.thread, th.ns)
		if err1 != nil || err2 != nil || s.ID != d.ID {
			t.Fatalf("head of %s/%q: %v %v", th.thread, th.ns, err1, err2)
		}
	}
	if dst.head("run-1").ID != ids[2] {
		t.Fatal("the imported thread lost its rewind")
	}
	sb, _ := e.eng.Branches(e.ctx, "run-1")
	db, err := dst.eng.Branches(e.ctx, "run-1")
	if err != nil || len(db) != 1 || db[0].ThreadID != sb[0].ThreadID || db[0].Name != "alt" || db[0].FromID != ids[1] {
		t.Fatalf("imported branches %+v, exported %+v (%v)", db, sb, err)
	}
	st1, _ := e.eng.Tree(e.ctx, "run-1")
	st2, err := dst.eng.Tree(e.ctx, "run-1")
	if err != nil || len(st1.Nodes) != len(st2.Nodes) || !slices.Equal(st1.Edges, st2.Edges) {
		t.Fatalf("trees differ: %+v\n%+v (%v)", st1, st2, err)
	}
	// Exporting again gives the same bytes.
	for thread, want := range exported {
		var again bytes.Buffer
		if _, err := dst.eng.Export(e.ctx, thread, &again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), want) {
			t.Fatalf("re-export of %s differs:\n--- first\n%s\n--- again\n%s", thread, want, again.Bytes())
		}
	}
	// Both databases go on alike.
	a := e.snap(engine.SnapshotInput{ThreadID: "run-1"})
	b := dst.snap(engine.SnapshotInput{ThreadID: "run-1"})
	if a.Step != b.Step || a.ParentID != b.ParentID || b.ParentID != ids[2] {
		t.Fatalf("write after the import: %+v, in the source %+v", b, a)
	}
	checkReadable(t, e.ctx, dst.eng)
}

// A refused import writes nothing: a thread that exists, ids in use, a
// record that is not valid, wherever it is in the input.
func testImportBadInput(t *testing.T, e *env) {
	seedHistory(t, e, "run-1")
	var buf bytes.Buffer
	if _, err := e.eng.Export(e.ctx, "run-1", &buf); err != nil {
		t.Fatal(err)
	}
	export := buf.String()
	lines := strings.Count(export, "\n")

	// Into the source database: the thread exists; under another name,
	// its ids are in use.
	before := e.inventory("run-1-renamed")
	if _, err := e.eng.Import(e.ctx, strings.NewReader(export), engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(err.Error(), "run-1") {
		t.Fatalf("import of a thread that exists: %v, want ErrInvalidInput naming it", err)
	}
	renamed := strings.ReplaceAll(export, `"thread_id":"run-1"`, `"thread_id":"run-1-renamed"`)
	if _, err := e.eng.Import(e.ctx, strings.NewReader(renamed), engine.ImportOptions{}); !errors.Is(err, engine.ErrIDConflict) {
		t.Fatalf("import with ids in use: %v, want ErrIDConflict", err)
	}
	e.unchanged("refused imports", before, "run-1-renamed")

	// Into an empty database: broken input.
	other := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	other.eng = other.open(deltas)
	header := export[:strings.Index(export, "\n")+1]
	var first engine.ExportCheckpoint
	if err := json.NewDecoder(strings.NewReader(export[strings.Index(export, `{"kind":"checkpoint"`):])).Decode(&first); err != nil {
		t.Fatal(err)
	}
	firstID := first.ID.String()
	for _, bad := range []struct {
		name, input string
		want        error
		msg         string
	}{
		{"cut short", export[:len(export)-40], engine.ErrInvalidJSON, fmt.Sprintf("record %d", lines)},
		{"not JSON", "hello\n", engine.ErrInvalidJSON, "record 1"},
		{"a bad line in the middle", strings.Replace(export, "\n", "\n]\n", 1), engine.ErrInvalidJSON, "record 2"},
		{"step 0", strings.Replace(export, `"step":2,`, `"step":0,`, 1), engine.ErrInvalidInput, "step 0"},
		{"no header", export[len(header):], engine.ErrInvalidInput, "record 1"},
		{"another format", strings.Replace(export, `"format":2`, `"format":99`, 1), engine.ErrInvalidInput, "format 99"},
		{"unknown kind", export + `{"kind":"mystery"}` + "\n", engine.ErrInvalidInput, fmt.Sprintf("record %d", lines+1)},
		{"a checkpoint before its thread", header + export[strings.Index(export, `{"kind":"checkpoint"`):], engine.ErrInvalidInput, "record 2"},
		{"messages not an array", strings.Replace(export, `"messages":[`, `"messages":"x","m":[`, 1), engine.ErrInvalidJSON, "messages"},
		{"the same checkpoint twice", export + export[strings.Index(export, `{"kind":"checkpoint"`):], engine.ErrInvalidInput, firstID},
		{"a step that does not follow its parent", strings.Replace(export, `"step":2,`, `"step":5,`, 1), engine.ErrInvalidInput, "does not follow its parent"},
		{"a parent in another namespace", strings.Replace(export, `"parent_id":"`+firstID+`"`, `"parent_id":"`+subID(t, export)+`"`, 1), engine.ErrInvalidInput, `namespace "sub"`},
	} {
		_, err := other.eng.Import(e.ctx, strings.NewReader(bad.input), engine.ImportOptions{})
		if !errors.Is(err, bad.want) || errors.Is(err, engine.ErrIDConflict) || !strings.Contains(fmt.Sprint(err), bad.msg) {
			t.Errorf("%s: %v, want %v naming %q", bad.name, err, bad.want, bad.msg)
		}
		if got := other.inventory("run-1").counts(); got != [3]int{} {
			t.Fatalf("%s: a failed import wrote %v", bad.name, got)
		}
	}
	// A parent that is a checkpoint of another thread in the database.
	stranger := other.snap(engine.SnapshotInput{ThreadID: "stranger"})
	before = other.inventory("run-1")
	foreign := strings.Replace(export, `"parent_id":"`+firstID+`"`, `"parent_id":"`+stranger.ID.String()+`"`, 1)
	if _, err := other.eng.Import(e.ctx, strings.NewReader(foreign), engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(err.Error(), `thread "stranger"`) {
		t.Errorf("a parent in another thread: %v, want ErrInvalidInput naming the thread", err)
	}
	other.unchanged("an import with a foreign parent", before, "run-1")
	if _, err := other.eng.DeleteThread(e.ctx, "stranger"); err != nil {
		t.Fatal(err)
	}
	// The same input, valid, then imports.
	if st, err := other.eng.Import(e.ctx, strings.NewReader(export), engine.ImportOptions{}); err != nil || st.Checkpoints != 5 {
		t.Fatalf("valid import after refused ones: %+v %v", st, err)
	}
}

// subID returns the id of the export's checkpoint in namespace "sub".
func subID(t *testing.T, export string) string {
	t.Helper()
	for _, line := range strings.Split(export, "\n") {
		var c engine.ExportCheckpoint
		if json.Unmarshal([]byte(line), &c) == nil && c.Kind == "checkpoint" && c.Namespace == "sub" {
			return c.ID.String()
		}
	}
	t.Fatal("the export has no checkpoint in namespace sub")
	return ""
}
