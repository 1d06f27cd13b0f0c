package enginetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// exportLines is an export split into its records (without line feeds),
// for tests that edit it.
type exportLines []string

func splitExport(text []byte) exportLines {
	return strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
}

func (ls exportLines) text() string { return strings.Join(ls, "\n") + "\n" }

// record returns the record (from 1) of the first line for which match
// returns true.
func (ls exportLines) record(t *testing.T, what string, match func(kind string, thread engine.ExportThread, c engine.ExportCheckpoint) bool) int {
	t.Helper()
	for i, l := range ls {
		var th engine.ExportThread
		var c engine.ExportCheckpoint
		_ = json.Unmarshal([]byte(l), &th)
		_ = json.Unmarshal([]byte(l), &c)
		if match(c.Kind, th, c) {
			return i + 1
		}
	}
	t.Fatalf("the export has no %s", what)
	return 0
}

func (ls exportLines) checkpointRecord(t *testing.T, id uuid.UUID) int {
	t.Helper()
	return ls.record(t, "checkpoint "+id.String(), func(kind string, _ engine.ExportThread, c engine.ExportCheckpoint) bool {
		return kind == "checkpoint" && c.ID == id
	})
}

func (ls exportLines) rowRecord(t *testing.T, thread, namespace string) int {
	t.Helper()
	return ls.record(t, fmt.Sprintf("row %q/%q", thread, namespace), func(kind string, th engine.ExportThread, _ engine.ExportCheckpoint) bool {
		return kind == "thread" && th.ThreadID == thread && th.Namespace == namespace
	})
}

// encodeLine spells a record as Export does.
func encodeLine(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// edit returns the export with the checkpoints named in edits changed,
// its trailer made to fit (Reseal).
func (ls exportLines) edit(t *testing.T, edits map[uuid.UUID]func(*engine.ExportCheckpoint)) string {
	t.Helper()
	out := slices.Clone(ls)
	for id, edit := range edits {
		i := ls.checkpointRecord(t, id) - 1
		var c engine.ExportCheckpoint
		if err := json.Unmarshal([]byte(out[i]), &c); err != nil {
			t.Fatal(err)
		}
		edit(&c)
		out[i] = encodeLine(t, c)
	}
	return string(Reseal([]byte(out.text())))
}

// editRow returns the export with the row of thread and namespace changed,
// its trailer made to fit.
func (ls exportLines) editRow(t *testing.T, thread, namespace string, edit func(*engine.ExportThread)) string {
	t.Helper()
	out := slices.Clone(ls)
	i := ls.rowRecord(t, thread, namespace) - 1
	var row engine.ExportThread
	if err := json.Unmarshal([]byte(out[i]), &row); err != nil {
		t.Fatal(err)
	}
	edit(&row)
	out[i] = encodeLine(t, row)
	return string(Reseal([]byte(out.text())))
}

// An import takes only what writes could have made. Each case edits one
// thing of a valid export (its trailer made to fit, so that the edit alone
// is judged), and the import refuses it with ErrInvalidInput (or
// ErrSnapshotTooLarge), naming the record and what is wrong, and writes
// nothing; the export unedited then imports. A seq of MaxImportSeq imports,
// and the next write goes on from it.
func testImportRefusesWhatNoWriteMakes(t *testing.T, e *env) {
	ids, branch := seedHistory(t, e, "run-1")
	branchSub := e.snap(engine.SnapshotInput{ThreadID: branch, Namespace: "sub", State: json.RawMessage(`{"b": 1}`)}).ID
	text, _ := exportWith(t, e.ctx, e.eng, "run-1", engine.ExportOptions{Branches: true})
	ls := splitExport(text)
	var merge, sub, branchFirst, branchHead, delta uuid.UUID
	for _, l := range ls {
		var c engine.ExportCheckpoint
		if json.Unmarshal([]byte(l), &c) != nil || c.Kind != "checkpoint" {
			continue
		}
		if c.Storage == engine.StorageDelta {
			delta = c.ID
		}
		switch {
		case c.MergeParentID != nil:
			merge = c.ID
		case c.ThreadID == "run-1" && c.Namespace == "sub":
			sub = c.ID
		case c.ThreadID == branch && c.Namespace == "" && c.Seq == 1:
			branchFirst = c.ID
		case c.ThreadID == branch && c.Namespace == "" && c.Seq == 2:
			branchHead = c.ID
		}
	}
	if merge == uuid.Nil || sub == uuid.Nil || branchFirst == uuid.Nil || branchHead == uuid.Nil || delta == uuid.Nil {
		t.Fatalf("the seed export lacks a merge, a sub-graph checkpoint, the branch's two or a delta:\n%s", text)
	}
	// A time in year 10000 in UTC, written with an offset that keeps it in
	// 9999; and one in year 0.
	lateOffset := time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("", -3600))
	yearZero := time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC)
	rec := func(id uuid.UUID) int { return ls.checkpointRecord(t, id) }
	trailerRec := len(ls)
	subRow := ls.rowRecord(t, "run-1", "sub") - 1
	ptr := func(id uuid.UUID) *uuid.UUID { return &id }
	str := func(s string) *string { return &s }
	one := func(id uuid.UUID, edit func(*engine.ExportCheckpoint)) string {
		return ls.edit(t, map[uuid.UUID]func(*engine.ExportCheckpoint){id: edit})
	}
	withTrailer := func(edit func(*engine.ExportTrailer)) string {
		var tr engine.ExportTrailer
		if err := json.Unmarshal([]byte(ls[trailerRec-1]), &tr); err != nil {
			t.Fatal(err)
		}
		edit(&tr)
		out := slices.Clone(ls)
		out[trailerRec-1] = encodeLine(t, tr)
		return out.text()
	}
	unended := exportLines(ls[:trailerRec-1]).text()
	big := json.RawMessage(`{"big":"` + strings.Repeat("x", 5000) + `"}`)
	v4 := uuid.New()

	dst := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	dst.eng = dst.open(deltas)
	dst.snap(engine.SnapshotInput{ThreadID: "stranger"})
	small := openURL(t, dst.url, pgcheckpoint.Options{Config: engine.Config{MaxSnapshotBytes: 4000, DeltaMinBytes: -1}})
	probes := []string{"run-1", branch}
	before := dst.inventory(probes...)

	for _, bad := range []struct {
		name   string
		eng    *engine.Engine // nil: dst.eng
		input  string
		want   error
		record int // the record the error names
		msg    string
	}{
		// What thread rows name.
		{"a rewind to another thread's checkpoint", nil, ls.editRow(t, "run-1", "", func(r *engine.ExportThread) { r.RewoundTo = &branchHead }),
			engine.ErrInvalidInput, ls.rowRecord(t, "run-1", ""), fmt.Sprintf(`is rewound to %s, a checkpoint of thread %q namespace ""`, branchHead, branch)},
		{"a rewind to another namespace", nil, ls.editRow(t, "run-1", "", func(r *engine.ExportThread) { r.RewoundTo = &sub }),
			engine.ErrInvalidInput, ls.rowRecord(t, "run-1", ""), fmt.Sprintf(`is rewound to %s, a checkpoint of thread "run-1" namespace "sub"`, sub)},
		{"a rewind to a checkpoint not in the file", nil, ls.editRow(t, "run-1", "", func(r *engine.ExportThread) { r.RewoundTo = ptr(engine.NewCheckpointID()) }),
			engine.ErrInvalidInput, ls.rowRecord(t, "run-1", ""), "which is not a checkpoint of the import"},
		{"a branch source without its thread", nil, ls.editRow(t, branch, "", func(r *engine.ExportThread) { r.BranchedFromThread = nil }),
			engine.ErrInvalidInput, ls.rowRecord(t, branch, ""), "branched_from and branched_from_thread come together"},
		{"a branch of itself", nil, ls.editRow(t, branch, "", func(r *engine.ExportThread) { r.BranchedFromThread = str(branch) }),
			engine.ErrInvalidInput, ls.rowRecord(t, branch, ""), "is branched from itself"},
		{"a branch source in another thread than the row says", nil, ls.editRow(t, branch, "", func(r *engine.ExportThread) { r.BranchedFromThread = str("elsewhere") }),
			engine.ErrInvalidInput, ls.rowRecord(t, branch, ""), `a checkpoint of thread "run-1" namespace "", not of thread "elsewhere"`},
		{"a branch source on two rows", nil, ls.editRow(t, branch, "sub", func(r *engine.ExportThread) { r.BranchedFrom, r.BranchedFromThread = &ids[1], str("run-1") }),
			engine.ErrInvalidInput, ls.rowRecord(t, branch, "sub"), fmt.Sprintf("thread %q names a branch source on two rows", branch)},
		{"a namespace without a thread row", nil, string(Reseal([]byte(slices.Delete(slices.Clone(ls), subRow, subRow+1).text()))),
			engine.ErrInvalidInput, rec(sub) - 1, `checkpoint of thread "run-1" in namespace "sub", which has no thread row before it`},
		{"a thread row twice", nil, string(Reseal([]byte(slices.Insert(slices.Clone(ls), subRow, ls[subRow]).text()))),
			engine.ErrInvalidInput, subRow + 2, fmt.Sprintf(`thread "run-1" namespace "sub" has a row already (in record %d)`, subRow+1)},
		// Merge parents, and cycles.
		{"a merge parent that is itself", nil, one(merge, func(c *engine.ExportCheckpoint) { c.MergeParentID = &merge }),
			engine.ErrInvalidInput, rec(merge), "its merge parent is itself"},
		{"two checkpoints each the other's merge parent", nil, ls.edit(t, map[uuid.UUID]func(*engine.ExportCheckpoint){
			branchHead: func(c *engine.ExportCheckpoint) { c.MergeParentID = &merge }}),
			engine.ErrInvalidInput, rec(branchHead), fmt.Sprintf("its merge parent %s (record %d) has it as an ancestor", merge, rec(merge))},
		{"a cycle through a branch", nil, one(ids[0], func(c *engine.ExportCheckpoint) { c.MergeParentID = &branchHead }),
			engine.ErrInvalidInput, rec(ids[1]), fmt.Sprintf("its parent %s (record %d) has it as an ancestor: no write makes a cycle", ids[0], rec(ids[0]))},
		{"a merge parent in its own thread", nil, one(merge, func(c *engine.ExportCheckpoint) { c.MergeParentID = &ids[0] }),
			engine.ErrInvalidInput, rec(merge), fmt.Sprintf("its merge parent %s is a checkpoint of its own thread", ids[0])},
		{"a merge parent in another namespace, later in the file", nil, one(merge, func(c *engine.ExportCheckpoint) { c.MergeParentID = &branchSub }),
			engine.ErrInvalidInput, rec(merge), fmt.Sprintf(`its merge parent %s is in namespace "sub", not in this checkpoint's namespace ""`, branchSub)},
		{"a merge parent in another namespace, earlier in the file", nil, one(branchHead, func(c *engine.ExportCheckpoint) { c.MergeParentID = &sub }),
			engine.ErrInvalidInput, rec(branchHead), fmt.Sprintf(`its merge parent %s is in namespace "sub"`, sub)},
		// Seqs and steps.
		{"seq 2^63-1", nil, one(sub, func(c *engine.ExportCheckpoint) { c.Seq = math.MaxInt64 }),
			engine.ErrInvalidInput, rec(sub), "seq 9223372036854775807, step 1; both start at 1 and go up to 9007199254740991 (MaxImportSeq)"},
		{"a seq past MaxImportSeq", nil, one(sub, func(c *engine.ExportCheckpoint) { c.Seq = engine.MaxImportSeq + 1 }),
			engine.ErrInvalidInput, rec(sub), "seq 9007199254740992, step 1"},
		{"a step past MaxImportSeq", nil, one(ids[0], func(c *engine.ExportCheckpoint) { c.Step = engine.MaxImportSeq + 1 }),
			engine.ErrInvalidInput, rec(ids[0]), "step 9007199254740992; both start at 1"},
		{"descending seqs", nil, ls.edit(t, map[uuid.UUID]func(*engine.ExportCheckpoint){
			ids[1]: func(c *engine.ExportCheckpoint) { c.Seq = 3 }, ids[2]: func(c *engine.ExportCheckpoint) { c.Seq = 2 }}),
			engine.ErrInvalidInput, rec(ids[2]), fmt.Sprintf(`seq 2 comes after seq 3 (record %d) of thread "run-1" namespace ""`, rec(ids[1]))},
		{"two roots in one namespace", nil, one(merge, func(c *engine.ExportCheckpoint) { c.ParentID, c.Step = nil, 1 }),
			engine.ErrInvalidInput, rec(merge), fmt.Sprintf(`a second first checkpoint of thread "run-1" namespace "" (the first is in record %d)`, rec(ids[0]))},
		{"a second first checkpoint in a branch", nil, one(branchHead, func(c *engine.ExportCheckpoint) { c.ParentID, c.Step = &ids[1], 3 }),
			engine.ErrInvalidInput, rec(branchHead), fmt.Sprintf(`a second first checkpoint of thread %q namespace "" (the first is in record %d)`, branch, rec(branchFirst))},
		{"a root past step 1", nil, one(ids[2], func(c *engine.ExportCheckpoint) { c.ParentID = nil }),
			engine.ErrInvalidInput, rec(ids[2]), "step 3 without a parent"},
		{"a branch forked in another namespace", nil, ls.edit(t, map[uuid.UUID]func(*engine.ExportCheckpoint){
			branchFirst: func(c *engine.ExportCheckpoint) { c.ParentID, c.Step = &sub, 2 }}),
			engine.ErrInvalidInput, rec(branchFirst), fmt.Sprintf(`parent %s belongs to thread "run-1" namespace "sub"`, sub)},
		{"a parent that is not a checkpoint id", nil, one(ids[1], func(c *engine.ExportCheckpoint) { c.ParentID = &v4 }),
			engine.ErrInvalidInput, rec(ids[1]), fmt.Sprintf("parent_id %s is not a UUIDv7", v4)},
		// Delta chains, whose next write adds 1 to run and depth.
		{"a delta run of 2^31-1", nil, one(delta, func(c *engine.ExportCheckpoint) { c.DeltaRun = math.MaxInt32 }),
			engine.ErrInvalidInput, rec(delta), "run 2147483647; depth starts at 1, run at 0 (both below 2^31-1)"},
		{"a delta depth of 2^31-1", nil, one(delta, func(c *engine.ExportCheckpoint) { c.DeltaDepth = math.MaxInt32 }),
			engine.ErrInvalidInput, rec(delta), "a delta with depth 2147483647"},
		{"a delta deeper than a read here follows", nil, one(delta, func(c *engine.ExportCheckpoint) { c.DeltaDepth = 2*(engine.DefaultDeltaRun-1) + 1 }),
			engine.ErrInvalidInput, rec(delta), "delta depth 99; a read follows at most 98 links here"},
		{"a run that starts deeper than a write starts one", nil, one(delta, func(c *engine.ExportCheckpoint) { c.DeltaDepth = engine.DefaultDeltaRun + c.DeltaRun }),
			engine.ErrInvalidInput, rec(delta), fmt.Sprintf("its run starts %d links deep, where a write here starts one at most %d deep", engine.DefaultDeltaRun, engine.DefaultDeltaRun-1)},
		// Times outside what RFC 3339 spells, which no export could write
		// back.
		{"a checkpoint in year 10000 (UTC)", nil, one(ids[0], func(c *engine.ExportCheckpoint) { c.CreatedAt = lateOffset }),
			engine.ErrInvalidInput, rec(ids[0]), "created_at 10000-01-01T00:30:00Z is outside years 1 to 9999 (UTC)"},
		{"a thread row in year 0", nil, ls.editRow(t, "run-1", "", func(r *engine.ExportThread) { r.CreatedAt = yearZero }),
			engine.ErrInvalidInput, ls.rowRecord(t, "run-1", ""), `thread "run-1": ` + engine.ErrInvalidInput.Error() + ": created_at"},
		{"a pending write in year 0", nil, one(ids[2], func(c *engine.ExportCheckpoint) { c.PendingWrites[0].CreatedAt = yearZero }),
			engine.ErrInvalidInput, rec(ids[2]), "pending write created_at 0000-06-01T00:00:00Z is outside years 1 to 9999"},
		// Sizes.
		{"a negative size", nil, one(ids[0], func(c *engine.ExportCheckpoint) { c.SizeBytes = -1 }),
			engine.ErrInvalidInput, rec(ids[0]), "size_bytes -1; a checkpoint's size is 0 or more"},
		{"a size over the limit", nil, one(ids[0], func(c *engine.ExportCheckpoint) { c.SizeBytes = engine.DefaultMaxSnapshotBytes + 1 }),
			engine.ErrSnapshotTooLarge, rec(ids[0]), fmt.Sprintf("size_bytes %d, over the limit of %d", engine.DefaultMaxSnapshotBytes+1, engine.DefaultMaxSnapshotBytes)},
		{"content over the limit", small, one(ids[0], func(c *engine.ExportCheckpoint) { c.State = big }),
			engine.ErrSnapshotTooLarge, rec(ids[0]), "metadata, summary, next node and tags 55), over the limit of 4000"},
		{"a pending write over the limit", small, one(ids[2], func(c *engine.ExportCheckpoint) { c.PendingWrites[0].Value = big }),
			engine.ErrSnapshotTooLarge, rec(ids[2]), `pending write 0 of task "task-a" is 5013 bytes (channel and value), over the limit of 4000`},
		// The trailer.
		{"a trailer that counts one checkpoint more", nil, withTrailer(func(tr *engine.ExportTrailer) { tr.Counts.Checkpoints++ }),
			engine.ErrInvalidInput, trailerRec, "the trailer counts 4 thread rows, 9 checkpoints"},
		{"a trailer with another digest", nil, strings.Replace(string(text), `"summary":"Merge of`, `"summary":"merge of`, 1),
			engine.ErrInvalidInput, trailerRec, "not the one its trailer gives: it was changed or damaged"},
		{"a trailer without its counts", nil, regexp.MustCompile(`"counts":\{[^}]*\},`).ReplaceAllString(string(text), ""),
			engine.ErrInvalidInput, trailerRec, "the trailer has no counts"},
		{"a header before the trailer", nil, unended + string(text),
			engine.ErrInvalidInput, trailerRec, "a header, but the export that begins at record 1 has no trailer yet, so it is incomplete"},
		{"a record after the trailer", nil, string(text) + ls[1] + "\n",
			engine.ErrInvalidInput, trailerRec + 1, fmt.Sprintf("after the trailer of record %d comes a record that is not an export header", trailerRec)},
		{"a trailer without a header", nil, ls[trailerRec-1] + "\n",
			engine.ErrInvalidInput, 1, "no export header before it"},
		{"nothing", nil, "", engine.ErrInvalidInput, 0, "the input is empty"},
	} {
		eng := bad.eng
		if eng == nil {
			eng = dst.eng
		}
		if bad.input == string(text) {
			t.Fatalf("%s: the input was not changed", bad.name)
		}
		_, err := eng.Import(e.ctx, strings.NewReader(bad.input), engine.ImportOptions{})
		msg := fmt.Sprint(err)
		if !errors.Is(err, bad.want) || !strings.Contains(msg, bad.msg) || bad.record > 0 && !strings.HasPrefix(msg, fmt.Sprintf("import: record %d: ", bad.record)) {
			t.Errorf("%s: %v\nwant %v, record %d, naming %q", bad.name, err, bad.want, bad.record, bad.msg)
		}
		namedOnce(t, bad.name, err)
		dst.unchanged(bad.name, before, probes...)
	}
	if st, err := dst.eng.Import(e.ctx, bytes.NewReader(text), engine.ImportOptions{}); err != nil || st.Checkpoints != 8 {
		t.Fatalf("the export unedited, after the refused ones: %+v %v", st, err)
	}

	// A branch imported after its source, which is in the database then:
	// its row is held to the source there.
	half := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	half.eng = half.open(deltas)
	source, _ := exportWith(t, e.ctx, e.eng, "run-1", engine.ExportOptions{})
	if _, err := half.eng.Import(e.ctx, bytes.NewReader(source), engine.ImportOptions{}); err != nil {
		t.Fatalf("the thread without its branch: %v", err)
	}
	alone, _ := exportWith(t, e.ctx, e.eng, branch, engine.ExportOptions{})
	elsewhere := splitExport(alone).editRow(t, branch, "", func(r *engine.ExportThread) { r.BranchedFromThread = str("elsewhere") })
	before = half.inventory(branch)
	_, err := half.eng.Import(e.ctx, strings.NewReader(elsewhere), engine.ImportOptions{})
	if want := fmt.Sprintf(`record 2: %v: thread %q namespace "" is branched from %s, a checkpoint of thread "run-1" namespace "", not of thread "elsewhere"`, engine.ErrInvalidInput, branch, ids[1]); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), want) {
		t.Errorf("a branch source in the database, in another thread than the row says: %v, want %q", err, want)
	}
	half.unchanged("a branch whose source is in the database", before, branch)
	if _, err := half.eng.Import(e.ctx, bytes.NewReader(alone), engine.ImportOptions{}); err != nil {
		t.Fatalf("the branch after its source: %v", err)
	}

	// The largest seq imports, and a write goes on from it.
	top := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	top.eng = top.open(deltas)
	if _, err := top.eng.Import(e.ctx, strings.NewReader(one(sub, func(c *engine.ExportCheckpoint) { c.Seq = engine.MaxImportSeq })), engine.ImportOptions{}); err != nil {
		t.Fatalf("seq MaxImportSeq: %v", err)
	}
	next := top.snap(engine.SnapshotInput{ThreadID: "run-1", Namespace: "sub"})
	if got := top.get(next.ID); got.Seq != engine.MaxImportSeq+1 || got.ParentID != sub || got.Step != 2 {
		t.Fatalf("the write after seq MaxImportSeq: seq %d, parent %s, step %d", got.Seq, got.ParentID, got.Step)
	}
}

// A file cut short is refused, at any line end or inside any line, and
// nothing is written: its trailer is what tells a whole export. So is a
// whole export followed by one cut short.
func testImportIncomplete(t *testing.T, e *env) {
	_, branch := seedHistory(t, e, "run-1")
	whole, _ := exportWith(t, e.ctx, e.eng, "run-1", engine.ExportOptions{Branches: true})
	alone, _ := exportWith(t, e.ctx, e.eng, branch, engine.ExportOptions{})
	ls := splitExport(whole)
	dst := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	dst.eng = dst.open(deltas)
	probes := []string{"run-1", branch}
	before := dst.inventory(probes...)
	refused := func(name, input, msg string) {
		t.Helper()
		_, err := dst.eng.Import(e.ctx, strings.NewReader(input), engine.ImportOptions{})
		if !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), msg) {
			t.Errorf("%s: %v, want ErrInvalidInput naming %q", name, err, msg)
		}
		dst.unchanged(name, before, probes...)
	}
	for n := range ls {
		cut := ""
		if n > 0 {
			cut = ls[:n].text()
		}
		want := fmt.Sprintf("the input ends after record %d, before the trailer of the export that begins at record 1, so it is incomplete", n)
		if n == 0 {
			want = "the input is empty"
		}
		refused(fmt.Sprintf("cut after %d lines", n), cut, want)
		inside := cut + ls[n][:len(ls[n])/2]
		refused(fmt.Sprintf("cut inside line %d", n+1), inside,
			fmt.Sprintf("record %d: %v: the input ends inside this record, with no line end: it is incomplete", n+1, engine.ErrInvalidInput))
	}
	refused("cut before the last line feed", string(whole[:len(whole)-1]), fmt.Sprintf("record %d: %v: the input ends inside this record", len(ls), engine.ErrInvalidInput))
	main, _ := exportWith(t, e.ctx, e.eng, "run-1", engine.ExportOptions{})
	second := len(splitExport(alone)) + 1
	refused("a whole export, then one cut short", string(alone)+splitExport(main)[:len(splitExport(main))-1].text(),
		fmt.Sprintf("before the trailer of the export that begins at record %d", second))
	if _, err := dst.eng.Import(e.ctx, bytes.NewReader(whole), engine.ImportOptions{}); err != nil {
		t.Fatalf("the whole export: %v", err)
	}
}

// endlessLine is a reader of one line that goes on: max bytes of 'x', then
// its end. It counts what was read.
type endlessLine struct{ read, max int }

func (r *endlessLine) Read(p []byte) (int, error) {
	if r.read >= r.max {
		return 0, io.EOF
	}
	n := min(len(p), r.max-r.read)
	for i := range n {
		p[i] = 'x'
	}
	if r.read+n == r.max {
		p[n-1] = '\n'
	}
	r.read += n
	return n, nil
}

// An import reads at most 4 * Config.MaxSnapshotBytes + 64 KiB of a line:
// a longer one is ErrSnapshotTooLarge after reading no more than that and
// a buffer, and nothing is written. A checkpoint as large as a write makes
// under the limit, with three pending writes almost as large, imports
// under the same limit.
func testImportLongLine(t *testing.T, e *env) {
	const limit = 16 << 10
	cfg := engine.Config{MaxSnapshotBytes: limit, DeltaMinBytes: -1}
	src := e.open(cfg)
	var state strings.Builder
	state.WriteString("{")
	for i := 0; state.Len() < limit-200; i++ {
		if i > 0 {
			state.WriteString(",")
		}
		fmt.Fprintf(&state, `"%x":[0,0]`, i)
	}
	state.WriteString("}")
	res := snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "big", State: json.RawMessage(state.String())})
	value := "[" + strings.Repeat("0,", limit*9/20) + "0]"
	for _, task := range []string{"a", "b", "c"} {
		if _, err := src.PutWrites(e.ctx, res.ID, task, []engine.Write{{Channel: "c", Value: json.RawMessage(value)}}); err != nil {
			t.Fatal(err)
		}
	}
	text, _ := exportWith(t, e.ctx, src, "big", engine.ExportOptions{})
	ls := splitExport(text)

	dst := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	dst.eng = dst.open(cfg)
	before := dst.inventory("big")
	lineMax := 4*limit + 64<<10
	r := &endlessLine{max: 64 << 20}
	head := ls[0] + "\n" + ls[1] + "\n" + `{"kind":"checkpoint","thread_id":"big","messages":"`
	_, err := dst.eng.Import(e.ctx, io.MultiReader(strings.NewReader(head), r), engine.ImportOptions{})
	want := fmt.Sprintf("record 3: %v: the line is longer than %d bytes", engine.ErrSnapshotTooLarge, lineMax)
	if !errors.Is(err, engine.ErrSnapshotTooLarge) || !strings.Contains(fmt.Sprint(err), want) {
		t.Errorf("an endless line: %v, want %q", err, want)
	}
	if read := r.read + len(head); read > lineMax+len(ls[0])+len(ls[1])+2+64<<10 {
		t.Errorf("the import read %d bytes of a line it refused, more than the %d it reads and a 64 KiB buffer", read, lineMax)
	}
	dst.unchanged("an endless line", before, "big")

	if longest := slices.MaxFunc(ls, func(a, b string) int { return len(a) - len(b) }); len(longest) < 3*limit {
		t.Fatalf("the largest line is %d bytes; the test wants one above 3 times the limit", len(longest))
	}
	if _, err := dst.eng.Import(e.ctx, bytes.NewReader(text), engine.ImportOptions{}); err != nil {
		t.Fatalf("a checkpoint at the limit, with pending writes: %v", err)
	}
	got := dst.get(res.ID)
	jsonEqual(t, "state", got.State, json.RawMessage(state.String()))
	if len(got.PendingWrites) != 3 {
		t.Fatalf("%d pending writes", len(got.PendingWrites))
	}
}
