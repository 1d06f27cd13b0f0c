package enginetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
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
		if !bytes.HasPrefix(buf.Bytes(), []byte(`{"kind":"pgcheckpoint-export","format":3,`)) {
			t.Fatalf("export of %s: %s", thread, clip(buf.Bytes()))
		}
		// It ends with its trailer, which counts what it holds; recomputed
		// from the lines before it (as Reseal does), it is the same.
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		var trailer engine.ExportTrailer
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &trailer); err != nil || trailer.Kind != "trailer" ||
			trailer.Counts != st || len(trailer.SHA256) != 64 {
			t.Fatalf("export of %s ends with %s (%v), want the trailer of %+v", thread, lines[len(lines)-1], err, st)
		}
		if resealed := Reseal(buf.Bytes()); !bytes.Equal(resealed, buf.Bytes()) {
			t.Fatalf("the trailer recomputed differs:\n%s\nwant\n%s", resealed, buf.Bytes())
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
	// Both databases go on alike: a write that appends to the head (a
	// delta, rewound to) is a delta on it in both, since the import gave
	// the head its digests; a write of other content is whole in both.
	var compact bytes.Buffer
	if err := json.Compact(&compact, e.get(ids[2]).Messages); err != nil {
		t.Fatal(err)
	}
	appended := json.RawMessage(strings.TrimSuffix(compact.String(), "]") + `,{"role":"user","content":"more"}]`)
	for i, in := range []engine.SnapshotInput{
		{ThreadID: "run-1", Messages: appended, State: json.RawMessage(`{"n": 3}`), ToolResults: json.RawMessage(`{"t": [1, "\u0001"]}`)},
		{ThreadID: "run-1"},
	} {
		a, b := e.get(e.snap(in).ID), dst.get(dst.snap(in).ID)
		if a.Step != b.Step || a.Format != b.Format || i == 0 && (b.ParentID != ids[2] || a.ParentID != ids[2] || b.Format != engine.StorageDelta) {
			t.Fatalf("write %d after the import: %s on %s, in the source %s on %s", i, b.Format, b.ParentID, a.Format, a.ParentID)
		}
		jsonEqual(t, "messages after the import", b.Messages, a.Messages)
		jsonEqual(t, "state after the import", b.State, a.State)
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
	renamed := string(Reseal([]byte(strings.ReplaceAll(export, `"thread_id":"run-1"`, `"thread_id":"run-1-renamed"`))))
	_, err := e.eng.Import(e.ctx, strings.NewReader(renamed), engine.ImportOptions{})
	if !errors.Is(err, engine.ErrIDConflict) {
		t.Fatalf("import with ids in use: %v, want ErrIDConflict", err)
	}
	// It names the record and the checkpoint refused, once each.
	if m := recordPrefix.FindStringSubmatch(err.Error()); m == nil || m[1] != fmt.Sprint(recordOf(t, renamed, m[2])) {
		t.Errorf("import with ids in use: %q, want it to name the record and id of a checkpoint of the import", err)
	}
	namedOnce(t, "import with ids in use", err)
	e.unchanged("refused imports", before, "run-1-renamed")

	// Into an empty database: broken input.
	other := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	other.eng = other.open(deltas)
	header := export[:strings.Index(export, "\n")+1]
	trailer := export[strings.LastIndex(export[:len(export)-1], "\n")+1:]
	body := export[:len(export)-len(trailer)] // without the trailer
	checkpoints := body[strings.Index(body, `{"kind":"checkpoint"`):]
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
		{"cut short", export[:len(export)-40], engine.ErrInvalidInput, fmt.Sprintf("record %d: %v: the input ends inside this record", lines, engine.ErrInvalidInput)},
		{"not JSON", "hello\n", engine.ErrInvalidJSON, "record 1"},
		{"a bad line in the middle", strings.Replace(export, "\n", "\n]\n", 1), engine.ErrInvalidJSON, "record 2"},
		{"step 0", strings.Replace(export, `"step":2,`, `"step":0,`, 1), engine.ErrInvalidInput, "step 0"},
		{"an id of version 4", strings.ReplaceAll(export, firstID, uuid.New().String()), engine.ErrInvalidInput, "not a UUIDv7"},
		{"an id of version 7 and another variant", strings.ReplaceAll(export, firstID, otherVariant(uuid.MustParse(firstID)).String()), engine.ErrInvalidInput, "not a UUIDv7"},
		{"no header", export[len(header):], engine.ErrInvalidInput, "record 1"},
		{"another format", strings.Replace(export, `"format":3`, `"format":99`, 1), engine.ErrInvalidInput, "format 99"},
		{"unknown kind", body + `{"kind":"mystery"}` + "\n" + trailer, engine.ErrInvalidInput, fmt.Sprintf("record %d: %v: unknown kind", lines, engine.ErrInvalidInput)},
		{"a checkpoint before its thread", header + checkpoints, engine.ErrInvalidInput, "record 2"},
		{"messages not an array", strings.Replace(export, `"messages":[`, `"messages":"x","m":[`, 1), engine.ErrInvalidJSON, "messages"},
		{"the same checkpoint twice", body + checkpoints, engine.ErrInvalidInput,
			fmt.Sprintf("record %d: checkpoint %s: %v: it appears twice in the import (first in record %d)", lines, firstID, engine.ErrInvalidInput, recordOf(t, export, firstID))},
		{"a step that does not follow its parent", strings.Replace(export, `"step":2,`, `"step":5,`, 1), engine.ErrInvalidInput, "does not follow its parent"},
		{"a parent in another namespace", strings.Replace(export, `"parent_id":"`+firstID+`"`, `"parent_id":"`+subID(t, export)+`"`, 1), engine.ErrInvalidInput, `namespace "sub"`},
	} {
		// With its trailer made to fit: the edit alone is judged.
		_, err := other.eng.Import(e.ctx, bytes.NewReader(Reseal([]byte(bad.input))), engine.ImportOptions{})
		if !errors.Is(err, bad.want) || errors.Is(err, engine.ErrIDConflict) || !strings.Contains(fmt.Sprint(err), bad.msg) {
			t.Errorf("%s: %v, want %v naming %q", bad.name, err, bad.want, bad.msg)
		}
		namedOnce(t, bad.name, err)
		if got := other.inventory("run-1").counts(); got != [3]int{} {
			t.Fatalf("%s: a failed import wrote %v", bad.name, got)
		}
	}
	// A parent that is a checkpoint of another thread in the database.
	stranger := other.snap(engine.SnapshotInput{ThreadID: "stranger"})
	before = other.inventory("run-1")
	foreign := Reseal([]byte(strings.Replace(export, `"parent_id":"`+firstID+`"`, `"parent_id":"`+stranger.ID.String()+`"`, 1)))
	if _, err := other.eng.Import(e.ctx, bytes.NewReader(foreign), engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(err.Error(), `thread "stranger"`) {
		t.Errorf("a parent in another thread: %v, want ErrInvalidInput naming the thread", err)
	}
	other.unchanged("an import with a foreign parent", before, "run-1")
	if _, err := other.eng.DeleteThreads(e.ctx, "stranger"); err != nil {
		t.Fatal(err)
	}
	// The same input, valid, then imports.
	if st, err := other.eng.Import(e.ctx, strings.NewReader(export), engine.ImportOptions{}); err != nil || st.Checkpoints != 5 {
		t.Fatalf("valid import after refused ones: %+v %v", st, err)
	}
}

// recordPrefix is how an import error names a checkpoint: its record
// (line) and id.
var recordPrefix = regexp.MustCompile(`record (\d+): checkpoint ([0-9a-f-]{36}): `)

// recordOf returns the record (line, from 1) of checkpoint id in export.
func recordOf(t *testing.T, export, id string) int {
	t.Helper()
	for i, line := range strings.Split(export, "\n") {
		if strings.HasPrefix(line, `{"kind":"checkpoint"`) && strings.Contains(line, `"id":"`+id+`"`) {
			return i + 1
		}
	}
	t.Fatalf("the export has no checkpoint %s", id)
	return 0
}

// namedOnce fails the test if err's message says a record number or a
// checkpoint id more than once.
func namedOnce(t *testing.T, name string, err error) {
	t.Helper()
	msg := fmt.Sprint(err)
	if len(recordNamed.FindAllString(msg, -1)) > 1 {
		t.Errorf("%s: %q names its record more than once", name, msg)
	}
	seen := map[string]bool{}
	for _, id := range uuidText.FindAllString(msg, -1) {
		if seen[id] {
			t.Errorf("%s: %q names checkpoint %s more than once", name, msg, id)
		}
		seen[id] = true
	}
}

var (
	recordNamed = regexp.MustCompile(`record \d+: `)
	uuidText    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

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

// exportFormat1 is an export written by the format 1 code (every
// checkpoint whole, no storage field, no trailer): a branch of thread
// v1-run, then v1-run, with a merge, a rewind, pending writes, a sub-graph
// namespace and NUL characters.
//
//go:embed testdata/export-format1.jsonl
var exportFormat1 string

// exportWith exports thread with opts; any error is fatal.
func exportWith(t *testing.T, ctx context.Context, eng *engine.Engine, thread string, opts engine.ExportOptions) ([]byte, engine.ExportStats) {
	t.Helper()
	var buf bytes.Buffer
	st, err := eng.Export(ctx, thread, &buf, opts)
	if err != nil {
		t.Fatalf("export %q: %v", thread, err)
	}
	return buf.Bytes(), st
}

// sameTree fails the test unless thread has the same tree (checkpoints by
// id, thread, namespace, seq and step; edges, merge edges included) in
// both engines, and returns how many merge edges it has.
func sameTree(t *testing.T, ctx context.Context, src, dst *engine.Engine, thread string) int {
	t.Helper()
	a, err1 := src.Tree(ctx, thread)
	b, err2 := dst.Tree(ctx, thread)
	if err1 != nil || err2 != nil {
		t.Fatalf("tree of %q: %v, %v", thread, err1, err2)
	}
	type node struct {
		id                uuid.UUID
		thread, namespace string
		seq, step         int64
	}
	nodes := func(tr *engine.Tree) []node {
		var out []node
		for _, n := range tr.Nodes {
			out = append(out, node{n.ID, n.ThreadID, n.Namespace, n.Seq, n.Step})
		}
		slices.SortFunc(out, func(x, y node) int { return strings.Compare(x.id.String(), y.id.String()) })
		return out
	}
	edges := func(tr *engine.Tree) []string {
		var out []string
		for _, e := range tr.Edges {
			out = append(out, fmt.Sprintf("%s->%s merge=%v", e.From, e.To, e.Merge))
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(nodes(a), nodes(b)) || !slices.Equal(edges(a), edges(b)) {
		t.Fatalf("tree of %q differs after the round trip:\n nodes %v\n   now %v\n edges %v\n   now %v", thread, nodes(a), nodes(b), edges(a), edges(b))
	}
	merges := 0
	for _, e := range a.Edges {
		if e.Merge {
			merges++
		}
	}
	return merges
}

// Random histories with deltas (runs of at most 3, so anchors and whole
// rows come often; appended, edited and dropped messages; rewinds; branches
// of branches; deletes of a thread's old part, which rebase deltas) and
// merges, exported with their branches and imported into a new database:
// every row comes back as stored (the same format, base, run, depth and
// delta: exporting again gives the same bytes), every checkpoint reads as
// written, the tree is the same, and retention and writes after the import
// keep every checkpoint as it was.
func testExportDeltaRoundTrip(t *testing.T, e *env) {
	cfg := engine.Config{DeltaRun: 4, DeltaMinBytes: -1}
	src := e.open(cfg)
	var deltaRows int64
	merges := 0
	for seed := range uint64(3) {
		root := fmt.Sprintf("exp-%d", seed)
		hist := RandomHistory(t, e.ctx, []HistoryWriter{{Engine: src, Thread: root}}, seed, 90)
		// Merge branches back, some into other branches.
		branches, err := src.Branches(e.ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range branches {
			into := root
			if i%2 == 1 {
				into = branches[i-1].ThreadID
			}
			if _, err := src.MergeBranch(e.ctx, b.ThreadID, into); err != nil && !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("seed %d: merge %s into %s: %v", seed, b.ThreadID, into, err)
			}
		}
		export, st := exportWith(t, e.ctx, src, root, engine.ExportOptions{Branches: true})
		deltaRows += st.Deltas

		dst := openURL(t, e.h.NewURL(t), pgcheckpoint.Options{Config: cfg})
		im, err := dst.Import(e.ctx, bytes.NewReader(export), engine.ImportOptions{})
		if err != nil || im != st {
			t.Fatalf("seed %d: import %+v %v; export %+v", seed, im, err, st)
		}
		// The same rows: exporting again gives the same bytes.
		if again, _ := exportWith(t, e.ctx, dst, root, engine.ExportOptions{Branches: true}); !bytes.Equal(again, export) {
			t.Fatalf("seed %d: the re-export differs:\n--- export\n%s\n--- again\n%s", seed, clip(export), clip(again))
		}
		merges += sameTree(t, e.ctx, src, dst, root)
		t.Logf("seed %d: %+v, %d merge edges", seed, st, merges)
		for _, h := range hist {
			s, err1 := src.Get(e.ctx, h.IDs[0])
			d, err2 := dst.Get(e.ctx, h.IDs[0])
			if err1 != nil || err2 != nil {
				t.Fatalf("seed %d: get %s: %v, %v", seed, h.IDs[0], err1, err2)
			}
			if d.Format != s.Format {
				t.Fatalf("seed %d: checkpoint %s stored %q, imported %q", seed, h.IDs[0], s.Format, d.Format)
			}
			jsonEqual(t, "messages", d.Messages, h.Messages)
			jsonEqual(t, "state", d.State, h.State)
			jsonEqual(t, "tool results", d.ToolResults, h.ToolResults)
		}
		checkReadable(t, e.ctx, dst)

		// Retention and writes go on alike in both databases, and keep
		// every checkpoint readable (a kept delta's base is rebased first).
		for _, eng := range []*engine.Engine{src, dst} {
			if _, err := eng.PruneThreads(e.ctx, engine.KeepLastN(4), root); err != nil {
				t.Fatalf("seed %d: retention: %v", seed, err)
			}
			snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: root, Messages: json.RawMessage(`[{"role":"user","content":"after"}]`)})
		}
		a := takeInventory(t, e.ctx, src)
		b := checkReadable(t, e.ctx, dst)
		kept := 0
		for id, got := range b.checkpoints {
			want, ok := a.checkpoints[id]
			if !ok {
				continue // the write after retention: its own id in each
			}
			kept++
			jsonEqual(t, "messages after retention", got.Messages, want.Messages)
			jsonEqual(t, "state after retention", got.State, want.State)
			jsonEqual(t, "tool results after retention", got.ToolResults, want.ToolResults)
		}
		if kept != len(b.checkpoints)-1 {
			t.Fatalf("seed %d: after retention and a write, %d of the import's %d checkpoints are in the source", seed, kept, len(b.checkpoints))
		}
	}
	if deltaRows == 0 || merges == 0 {
		t.Fatalf("the histories exported %d deltas, %d merge edges", deltaRows, merges)
	}
}

// An export with branches holds the thread's branches, branches of
// branches included, and a new database importing it has the same tree,
// merge edges included (both a merge into the thread and one into a
// branch), and the same branch lists. Without branches, an export holds
// the thread alone.
func testExportBranches(t *testing.T, e *env) {
	_, branch := seedHistory(t, e, "run-1")
	head, err := e.eng.Latest(e.ctx, branch)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.eng.Branch(e.ctx, head.ID, "sub")
	if err != nil {
		t.Fatal(err)
	}
	e.snap(engine.SnapshotInput{ThreadID: sub.ThreadID, State: json.RawMessage(`{"sub": true}`)})
	if _, err := e.eng.MergeBranch(e.ctx, sub.ThreadID, branch); err != nil {
		t.Fatal(err)
	}
	alone, st := exportWith(t, e.ctx, e.eng, "run-1", engine.ExportOptions{})
	if st.Threads != 2 || strings.Contains(string(alone), `"thread_id":"`+branch+`"`) {
		t.Fatalf("an export without branches holds %+v", st)
	}
	all, st := exportWith(t, e.ctx, e.eng, "run-1", engine.ExportOptions{Branches: true})
	if st.Threads != 4 || !bytes.HasPrefix(all, []byte(`{"kind":"pgcheckpoint-export","format":3,"thread_id":"run-1","branches":true}`)) {
		t.Fatalf("an export with branches: %+v\n%s", st, clip(all))
	}
	dst := openURL(t, e.h.NewURL(t), pgcheckpoint.Options{Config: deltas})
	if im, err := dst.Import(e.ctx, bytes.NewReader(all), engine.ImportOptions{}); err != nil || im != st {
		t.Fatalf("import %+v %v; export %+v", im, err, st)
	}
	if merges := sameTree(t, e.ctx, e.eng, dst, "run-1"); merges != 2 {
		t.Fatalf("%d merge edges, want 2", merges)
	}
	for _, thread := range []string{"run-1", branch, sub.ThreadID} {
		a, err1 := e.eng.Branches(e.ctx, thread)
		b, err2 := dst.Branches(e.ctx, thread)
		if err1 != nil || err2 != nil || len(a) != len(b) {
			t.Fatalf("branches of %s: %+v %v, imported %+v %v", thread, a, err1, b, err2)
		}
		for i := range a {
			if a[i].ThreadID != b[i].ThreadID || a[i].Name != b[i].Name || a[i].FromID != b[i].FromID {
				t.Fatalf("branches of %s: %+v, imported %+v", thread, a, b)
			}
		}
	}
	checkReadable(t, e.ctx, dst)
}

// Exports of formats 1 and 2 (development versions, before the trailer)
// are refused, saying to export again, and nothing is written: without a
// trailer, a file cut at a line end reads as a shorter thread.
func testImportOldFormats(t *testing.T, e *env) {
	seedHistory(t, e, "run-1")
	export, _ := exportWith(t, e.ctx, e.eng, "run-1", engine.ExportOptions{})
	text := string(export)
	format2 := strings.Replace(text[:strings.LastIndex(text[:len(text)-1], "\n")+1], `"format":3`, `"format":2`, 1)
	dst := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	dst.eng = dst.open(deltas)
	before := dst.inventory("run-1", "v1-run")
	for format, input := range map[int]string{1: exportFormat1, 2: format2} {
		_, err := dst.eng.Import(e.ctx, strings.NewReader(input), engine.ImportOptions{})
		want := fmt.Sprintf("record 1: %v: export format %d, from a development version: it has no trailer", engine.ErrInvalidInput, format)
		if !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), want) || !strings.Contains(fmt.Sprint(err), "export the threads again") {
			t.Errorf("a format %d export: %v, want ErrInvalidInput naming %q", format, err, want)
		}
		dst.unchanged(fmt.Sprintf("a refused format %d import", format), before, "run-1", "v1-run")
	}
}

// A delta line is held to the rules of a whole one and to its own: a bad
// or missing base, depth or storage, or delta fields in a format 1 export,
// is ErrInvalidInput naming the problem, and nothing is written.
func testImportBadDeltas(t *testing.T, e *env) {
	_, branch := seedHistory(t, e, "run-1")
	exp, st := exportWith(t, e.ctx, e.eng, "run-1", engine.ExportOptions{})
	brExp, _ := exportWith(t, e.ctx, e.eng, branch, engine.ExportOptions{})
	export := string(exp)
	if st.Deltas == 0 {
		t.Fatal("the seed history has no delta")
	}
	// The first delta line, and its base.
	var delta engine.ExportCheckpoint
	var deltaLine string
	for _, l := range strings.Split(export, "\n") {
		if json.Unmarshal([]byte(l), &delta) == nil && delta.Storage == engine.StorageDelta {
			deltaLine = l
			break
		}
	}
	if deltaLine == "" {
		t.Fatal("no delta line")
	}
	// A delta on a delta, whose depth must exceed its base's.
	var onDelta string
	for _, l := range strings.Split(export, "\n") {
		if strings.Contains(l, `"delta_depth":2,`) {
			onDelta = l
		}
	}
	if onDelta == "" {
		t.Fatalf("no delta on a delta in\n%s", export)
	}
	base := `"base_id":"` + delta.BaseID.String() + `"`
	withLine := func(l string) string { return strings.Replace(export, deltaLine, l, 1) }
	stranger := uuid.Must(uuid.NewV7()).String()
	var branchID string
	for _, l := range strings.Split(string(brExp), "\n") {
		var c engine.ExportCheckpoint
		if json.Unmarshal([]byte(l), &c) == nil && c.Kind == "checkpoint" {
			branchID = c.ID.String()
			break
		}
	}
	dst := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	dst.eng = dst.open(deltas)
	for _, bad := range []struct {
		name, input string
		want        error
		msg         string
	}{
		{"a base not in the file", withLine(strings.Replace(deltaLine, base, `"base_id":"`+stranger+`"`, 1)), engine.ErrInvalidInput, stranger + " is not a checkpoint imported before it"},
		{"a base after the delta", withLine(strings.Replace(deltaLine, base, `"base_id":"`+subID(t, export)+`"`, 1)), engine.ErrInvalidInput, "is not a checkpoint imported before it"},
		{"a base in another thread", string(brExp) + withLine(strings.Replace(deltaLine, base, `"base_id":"`+branchID+`"`, 1)), engine.ErrInvalidInput, `belongs to thread "` + branch + `"`},
		{"a delta on itself", withLine(strings.Replace(deltaLine, base, `"base_id":"`+delta.ID.String()+`"`, 1)), engine.ErrInvalidInput, "on itself"},
		{"no base", withLine(strings.Replace(deltaLine, base+",", "", 1)), engine.ErrInvalidInput, "without a base"},
		{"depth 0", withLine(strings.Replace(deltaLine, `"delta_depth":`, `"delta_depth":0,"x":`, 1)), engine.ErrInvalidInput, "depth 0"},
		{"a depth beyond the column", withLine(strings.Replace(deltaLine, `"delta_depth":`, `"delta_depth":4294967297,"x":`, 1)), engine.ErrInvalidInput, "depth 4294967297"},
		{"a base written after the delta", strings.Replace(export, `"seq":1,"id":"`+delta.BaseID.String()+`"`, `"seq":99,"id":"`+delta.BaseID.String()+`"`, 1), engine.ErrInvalidInput, "seq 2 comes after seq 99"},
		{"a depth not above its base's", strings.Replace(export, onDelta, strings.Replace(onDelta, `"delta_depth":2,`, `"delta_depth":1,`, 1), 1), engine.ErrInvalidInput, "delta depth 1; its base"},
		{"an unknown storage", withLine(strings.Replace(deltaLine, `"storage":"delta"`, `"storage":"zip"`, 1)), engine.ErrInvalidInput, `storage "zip"`},
		{"a whole row with a base", withLine(strings.Replace(deltaLine, `"storage":"delta"`, `"storage":"full"`, 1)), engine.ErrInvalidInput, "stored whole has no base"},
		{"removed keys not strings", withLine(strings.Replace(deltaLine, `"next_node":`, `"state_removed":[1],"next_node":`, 1)), engine.ErrInvalidJSON, "array of strings"},
		{"a delta's messages not an array", withLine(strings.Replace(deltaLine, `"messages":[`, `"messages":{},"m":[`, 1)), engine.ErrInvalidJSON, "messages"},
	} {
		if bad.input == export {
			t.Fatalf("%s: the input was not changed", bad.name)
		}
		_, err := dst.eng.Import(e.ctx, bytes.NewReader(Reseal([]byte(bad.input))), engine.ImportOptions{})
		if !errors.Is(err, bad.want) || !strings.Contains(fmt.Sprint(err), bad.msg) {
			t.Errorf("%s: %v, want %v naming %q", bad.name, err, bad.want, bad.msg)
		}
		if got := dst.inventory("run-1", branch).counts(); got != [3]int{} {
			t.Fatalf("%s: a failed import wrote %v", bad.name, got)
		}
	}
	if _, err := dst.eng.Import(e.ctx, strings.NewReader(export), engine.ImportOptions{}); err != nil {
		t.Fatalf("the valid export after refused ones: %v", err)
	}
}

// Reseal returns data with the trailer of each export in it computed again
// from the lines before it (counts and SHA-256, as Export computes them),
// for tests that edit an export on purpose, so that an import judges the
// edit and not the trailer. Every other line is kept as it is; an export
// without a trailer is left without one.
func Reseal(data []byte) []byte {
	var out bytes.Buffer
	var sum hash.Hash // nil outside an export
	var st engine.ExportStats
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		var l struct {
			Kind          string          `json:"kind"`
			Storage       string          `json:"storage"`
			PendingWrites json.RawMessage `json:"pending_writes"`
		}
		_ = json.Unmarshal(line, &l) // a line that is not a record is kept as it is
		switch {
		case l.Kind == "pgcheckpoint-export":
			sum, st = sha256.New(), engine.ExportStats{}
		case l.Kind == "trailer" && sum != nil:
			trailer, _ := json.Marshal(engine.ExportTrailer{Kind: "trailer", Counts: st, SHA256: hex.EncodeToString(sum.Sum(nil))})
			out.Write(trailer)
			out.WriteByte('\n')
			sum = nil
			continue
		case l.Kind == "thread":
			st.Threads++
		case l.Kind == "data_key":
			st.DataKeys++
		case l.Kind == "checkpoint":
			st.Checkpoints++
			if l.Storage == engine.StorageDelta {
				st.Deltas++
			}
			var writes []json.RawMessage
			_ = json.Unmarshal(l.PendingWrites, &writes)
			st.PendingWrites += int64(len(writes))
		}
		if sum != nil {
			sum.Write(line)
		}
		out.Write(line)
	}
	return out.Bytes()
}
