package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The size limit, Config.MaxSnapshotBytes, counted here as its doc says,
// independently of the engine's code: a checkpoint's messages, state, tool
// results, metadata, summary, next node and tags, in bytes as sent.
func checkpointBytes(in engine.SnapshotInput) int {
	n := len(in.Messages) + len(in.State) + len(in.ToolResults) + len(in.Metadata) + len(in.Summary) + len(in.NextNode)
	for _, t := range in.Tags {
		n += len(t)
	}
	return n
}

// jsonArrayOf and jsonObjectOf are a JSON array and a JSON object (one
// member, key k) of exactly n bytes; textOf is text of n bytes.
func jsonArrayOf(n int) json.RawMessage {
	return json.RawMessage(`["` + strings.Repeat("m", n-4) + `"]`)
}

func jsonObjectOf(k string, n int) json.RawMessage {
	return json.RawMessage(`{"` + k + `":"` + strings.Repeat("v", n-7-len(k)) + `"}`)
}

func textOf(n int) string { return strings.Repeat("t", n) }

// sizedField sets one field of a checkpoint to n bytes.
type sizedField struct {
	name string
	set  func(in *engine.SnapshotInput, n int)
}

var sizedFields = []sizedField{
	{"messages", func(in *engine.SnapshotInput, n int) { in.Messages = jsonArrayOf(n) }},
	{"state", func(in *engine.SnapshotInput, n int) { in.State = jsonObjectOf("f", n) }},
	{"tool results", func(in *engine.SnapshotInput, n int) { in.ToolResults = jsonObjectOf("f", n) }},
	{"metadata", func(in *engine.SnapshotInput, n int) { in.Metadata = jsonObjectOf("f", n) }},
	{"summary", func(in *engine.SnapshotInput, n int) { in.Summary = textOf(n) }},
	{"next node", func(in *engine.SnapshotInput, n int) { in.NextNode = textOf(n) }},
	{"tags", func(in *engine.SnapshotInput, n int) { in.Tags = []string{textOf(n / 2), textOf(n - n/2)} }},
}

// sizedInput is a checkpoint of thread th whose field f holds fieldBytes
// bytes, padded (in messages when f is the state, else in the state) to
// total bytes in all.
func sizedInput(t *testing.T, th string, f sizedField, fieldBytes, total int) engine.SnapshotInput {
	t.Helper()
	in := engine.SnapshotInput{ThreadID: th}
	f.set(&in, fieldBytes)
	pad := total - checkpointBytes(in)
	if f.name == "state" {
		in.Messages = jsonArrayOf(pad)
	} else {
		in.State = jsonObjectOf("p", pad)
	}
	if got := checkpointBytes(in); got != total {
		t.Fatalf("%s: made %d bytes, want %d", f.name, got, total)
	}
	return in
}

// appendOf is the append that sends in's fields as its change.
func appendOf(in engine.SnapshotInput) engine.AppendInput {
	return engine.AppendInput{ThreadID: in.ThreadID, Namespace: in.Namespace, Trigger: in.Trigger, Tags: in.Tags,
		Summary: in.Summary, Metadata: in.Metadata, NextNode: in.NextNode, Messages: in.Messages,
		SetState: in.State, SetToolResults: in.ToolResults}
}

// Every field of a checkpoint counts toward the limit, on Snapshot and on
// Append: one byte over is refused with ErrSnapshotTooLarge and writes
// nothing; exactly the limit is accepted. An append counts the head's
// content too, so the refusal of an append within the limit on its own
// comes from the store.
func testSizeLimitCoversEveryField(t *testing.T, e *env) {
	const limit, field, head = 2000, 250, 400
	eng := e.open(engine.Config{MaxSnapshotBytes: limit, DeltaMinBytes: -1})
	for _, f := range sizedFields {
		th := "snap " + f.name
		before := e.inventory(th)
		_, err := eng.Snapshot(e.ctx, sizedInput(t, th, f, field, limit+1))
		if !errors.Is(err, engine.ErrSnapshotTooLarge) {
			t.Errorf("snapshot with %s, one byte over: %v, want ErrSnapshotTooLarge", f.name, err)
		}
		e.unchanged("a snapshot over the limit by its "+f.name, before, th)
		in := sizedInput(t, th, f, field, limit)
		res, err := eng.Snapshot(e.ctx, in)
		if err != nil {
			t.Fatalf("snapshot with %s, exactly the limit: %v", f.name, err)
		}
		if got, want := e.get(res.ID).SizeBytes, int64(len(in.Messages)+len(in.State)+len(in.ToolResults)); got != want {
			t.Errorf("snapshot with %s: SizeBytes %d, want %d", f.name, got, want)
		}

		th = "append " + f.name
		snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th, State: jsonObjectOf("h", head)})
		before = e.inventory(th)
		// The change alone is within the limit; with the head it is over,
		// by a margin that a store's measure of the content it would make
		// (its own spelling of the JSON) cannot take back.
		over := appendOf(sizedInput(t, th, f, field, limit-head+200))
		if _, err := eng.Append(e.ctx, over); !errors.Is(err, engine.ErrSnapshotTooLarge) {
			t.Errorf("append with %s, over the limit with the head's content: %v, want ErrSnapshotTooLarge", f.name, err)
		}
		alone := appendOf(sizedInput(t, th, f, field, limit+1))
		if _, err := eng.Append(e.ctx, alone); !errors.Is(err, engine.ErrSnapshotTooLarge) {
			t.Errorf("append with %s, one byte over on its own: %v, want ErrSnapshotTooLarge", f.name, err)
		}
		e.unchanged("appends over the limit by their "+f.name, before, th)
		exact := sizedInput(t, th, f, field, limit-head)
		res, err = eng.Append(e.ctx, appendOf(exact))
		if err != nil {
			t.Fatalf("append with %s, exactly the limit with the head: %v", f.name, err)
		}
		if got, want := e.get(res.ID).SizeBytes, int64(head+len(exact.Messages)+len(exact.State)+len(exact.ToolResults)); got != want {
			t.Errorf("append with %s: SizeBytes %d, want the head's and the change's, %d", f.name, got, want)
		}
	}
	e.checkTree()
}

// Appends that are each within the limit are refused once the head's
// content with them is over it (three appends of 40%: the third), stored
// as deltas or whole; the default limit is 10 MiB. A key that an append
// sets again counts once: the store measures what the append makes before
// it refuses.
func testSizeLimitOnAppendedHeads(t *testing.T, e *env) {
	const limit = 3000
	msg := func(i, n int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"%d %s"}]`, i, strings.Repeat("c", n)))
	}
	for name, cfg := range map[string]engine.Config{
		"deltas": {MaxSnapshotBytes: limit, DeltaMinBytes: -1},
		"whole":  {MaxSnapshotBytes: limit, FullSnapshots: true},
	} {
		eng := e.open(cfg)
		th := "grows " + name
		snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th, State: json.RawMessage(`{}`)})
		for i := range 2 {
			if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: th, Messages: msg(i, 1200)}); err != nil {
				t.Fatalf("%s: append %d: %v", name, i, err)
			}
		}
		before := e.inventory(th)
		_, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: th, Messages: msg(2, 1200)})
		if !errors.Is(err, engine.ErrSnapshotTooLarge) || !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("%s: the third append of 1.2 KB under a limit of %d: %v, want ErrSnapshotTooLarge", name, limit, err)
		}
		t.Logf("%s: %v", name, err)
		e.unchanged(name+": an append that makes the head too large", before, th)

		// A key set again: the sum of the head's size and the change's is
		// over the limit, the content the append makes is not.
		setKeyAgain(t, e.ctx, eng, "replaces "+name, func(i int, set json.RawMessage, got *engine.Checkpoint) {
			if got.SizeBytes < int64(len(set)) || got.SizeBytes > limit {
				t.Errorf("%s: append %d records SizeBytes %d, want the content measured (%d bytes and a little)", name, i, got.SizeBytes, len(set))
			}
		})
	}

	// The case reported: at the default limit, appends of 4 MiB each.
	th := "default"
	big := func(i int) json.RawMessage { return msg(i, 4<<20) }
	snapWith(t, e.ctx, e.eng, engine.SnapshotInput{ThreadID: th, Messages: big(0)})
	if _, err := e.eng.Append(e.ctx, engine.AppendInput{ThreadID: th, Messages: big(1)}); err != nil {
		t.Fatalf("8 MiB in all: %v", err)
	}
	before := e.inventory(th)
	if _, err := e.eng.Append(e.ctx, engine.AppendInput{ThreadID: th, Messages: big(2)}); !errors.Is(err, engine.ErrSnapshotTooLarge) {
		t.Fatalf("12 MiB in all under the default limit: %v, want ErrSnapshotTooLarge", err)
	}
	e.unchanged("an append to 12 MiB", before, th)
	before = e.inventory(th)
	if _, err := e.eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: th, Metadata: jsonObjectOf("m", engine.DefaultMaxSnapshotBytes+1)}); !errors.Is(err, engine.ErrSnapshotTooLarge) {
		t.Fatalf("metadata over 10 MiB: %v, want ErrSnapshotTooLarge", err)
	}
	e.unchanged("metadata over 10 MiB", before, th)
}

// The text fields that have natural bounds keep them on Snapshot, Append
// and Import, whatever the size limit: ErrInvalidInput one over, nothing
// written; the bound itself is accepted (counted in characters).
func testTextFieldBounds(t *testing.T, e *env) {
	eng := e.open(engine.Config{MaxSnapshotBytes: -1})
	e.snap(engine.SnapshotInput{ThreadID: "bounds"})
	many := func(n int) []string {
		tags := make([]string, n)
		for i := range tags {
			tags[i] = fmt.Sprint("tag", i)
		}
		return tags
	}
	for _, c := range []struct {
		name      string
		set       func(*engine.SnapshotInput, int)
		at, wantN int // the bound, and one over
	}{
		{"next node", func(in *engine.SnapshotInput, n int) { in.NextNode = strings.Repeat("é", n) }, 255, 256},
		{"tag", func(in *engine.SnapshotInput, n int) { in.Tags = []string{"ok", strings.Repeat("é", n)} }, 255, 256},
		{"tags", func(in *engine.SnapshotInput, n int) { in.Tags = many(n) }, engine.MaxTags, engine.MaxTags + 1},
		{"summary", func(in *engine.SnapshotInput, n int) { in.Summary = strings.Repeat("é", n) }, engine.MaxSummaryLength, engine.MaxSummaryLength + 1},
	} {
		over := engine.SnapshotInput{ThreadID: "bounds"}
		c.set(&over, c.wantN)
		before := e.inventory("bounds")
		if _, err := eng.Snapshot(e.ctx, over); !errors.Is(err, engine.ErrInvalidInput) || errors.Is(err, engine.ErrSnapshotTooLarge) {
			t.Errorf("snapshot, %s over its bound: %v, want ErrInvalidInput", c.name, err)
		}
		if _, err := eng.Append(e.ctx, appendOf(over)); !errors.Is(err, engine.ErrInvalidInput) || errors.Is(err, engine.ErrSnapshotTooLarge) {
			t.Errorf("append, %s over its bound: %v, want ErrInvalidInput", c.name, err)
		}
		e.unchanged(c.name+" over its bound", before, "bounds")
		at := engine.SnapshotInput{ThreadID: "bounds"}
		c.set(&at, c.at)
		res, err := eng.Snapshot(e.ctx, at)
		if err != nil {
			t.Fatalf("snapshot, %s at its bound: %v", c.name, err)
		}
		if _, err := eng.Append(e.ctx, appendOf(at)); err != nil {
			t.Fatalf("append, %s at its bound: %v", c.name, err)
		}

		// An import of that checkpoint with the field one over.
		var buf bytes.Buffer
		if _, err := eng.Export(e.ctx, "bounds", &buf); err != nil {
			t.Fatal(err)
		}
		exported := buf.String()
		rec := exportRecord(t, exported, res.ID.String())
		bad, err := json.Marshal(map[string]any{"next_node": over.NextNode, "tags": over.Tags, "summary": over.Summary}[fieldKey(c.name)])
		if err != nil {
			t.Fatal(err)
		}
		edited := setRecordField(t, rec, fieldKey(c.name), bad)
		other := e.empty()
		_, err = other.eng.Import(e.ctx, bytes.NewReader(Reseal([]byte(strings.Replace(exported, rec, edited, 1)))), engine.ImportOptions{})
		if !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), res.ID.String()) {
			t.Errorf("import, %s over its bound: %v, want ErrInvalidInput naming checkpoint %s", c.name, err, res.ID)
		}
		if got := other.inventory("bounds").counts(); got != [3]int{} {
			t.Errorf("import, %s over its bound, wrote %v", c.name, got)
		}
		if _, err := other.eng.Import(e.ctx, strings.NewReader(exported), engine.ImportOptions{}); err != nil {
			t.Errorf("import, %s at its bound: %v", c.name, err)
		}
	}
}

// fieldKey is the export's name of a bounded field.
func fieldKey(name string) string {
	switch name {
	case "next node":
		return "next_node"
	case "tag":
		return "tags"
	}
	return name
}

// PutWrites takes at most the limit in one call, channels and values
// together: one value over, or many that add up to more, is refused with
// ErrSnapshotTooLarge and writes nothing; exactly the limit is accepted.
func testSizeLimitOnPendingWrites(t *testing.T, e *env) {
	const limit = 1000
	eng := e.open(engine.Config{MaxSnapshotBytes: limit})
	cp := e.snap(engine.SnapshotInput{ThreadID: "w"})
	value := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("w", n-2) + `"`) }
	before := e.inventory("w")
	for _, c := range []struct {
		name   string
		writes []engine.Write
	}{
		{"one value one byte over", []engine.Write{{Channel: "c", Value: value(limit)}}},
		{"one value over among small ones", []engine.Write{{Channel: "a", Value: value(10)}, {Channel: "c", Value: value(limit * 2)}}},
		{"values that add up to one byte over", []engine.Write{{Channel: "a", Value: value(249)}, {Channel: "b", Value: value(249)},
			{Channel: "c", Value: value(249)}, {Channel: "d", Value: value(250)}}},
	} {
		if _, err := eng.PutWrites(e.ctx, cp.ID, "task", c.writes); !errors.Is(err, engine.ErrSnapshotTooLarge) {
			t.Errorf("%s: %v, want ErrSnapshotTooLarge", c.name, err)
		}
	}
	// The reported case, at the default limit: 11 values of 1 MiB.
	huge := make([]engine.Write, 11)
	for i := range huge {
		huge[i] = engine.Write{Channel: fmt.Sprint("c", i), Value: value(1 << 20)}
	}
	if _, err := e.eng.PutWrites(e.ctx, cp.ID, "task", huge); !errors.Is(err, engine.ErrSnapshotTooLarge) {
		t.Errorf("11 MiB of writes at the default limit: %v, want ErrSnapshotTooLarge", err)
	}
	e.unchanged("writes over the limit", before, "w")
	exact := []engine.Write{{Channel: "a", Value: value(249)}, {Channel: "b", Value: value(249)},
		{Channel: "c", Value: value(249)}, {Channel: "d", Value: value(249)}}
	if n, err := eng.PutWrites(e.ctx, cp.ID, "task", exact); err != nil || n != 4 {
		t.Fatalf("writes of exactly the limit: %d, %v", n, err)
	}
	if got := e.get(cp.ID).PendingWrites; len(got) != 4 {
		t.Fatalf("pending writes %d, want 4", len(got))
	}
}

// An import applies the limit to each record as the write that made it:
// a checkpoint (its content, or for a delta the size its writer recorded,
// with its own fields), each pending write, a thread's metadata. Over it:
// ErrSnapshotTooLarge naming the record, nothing imported. A record of
// exactly the limit imports.
func testSizeLimitOnImport(t *testing.T, e *env) {
	const limit = 2000
	src := e.open(engine.Config{MaxSnapshotBytes: -1, DeltaMinBytes: -1})
	export := func(th string) string {
		t.Helper()
		var buf bytes.Buffer
		if _, err := src.Export(e.ctx, th, &buf); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "content", Messages: jsonArrayOf(limit + 1)})
	snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "metadata", Metadata: jsonObjectOf("m", limit-10), State: jsonObjectOf("s", 11)})
	w := snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "write"})
	if _, err := src.PutWrites(e.ctx, w.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`"` + strings.Repeat("w", limit) + `"`)}}); err != nil {
		t.Fatal(err)
	}
	// A delta whose row is small and whose whole content is over.
	snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "delta", Messages: jsonArrayOf(limit * 3 / 5)})
	if _, err := src.Append(e.ctx, engine.AppendInput{ThreadID: "delta", Messages: jsonArrayOf(limit * 3 / 5)}); err != nil {
		t.Fatal(err)
	}
	delta := export("delta")
	if !strings.Contains(delta, `"storage":"delta"`) {
		t.Fatalf("the test needs a delta:\n%s", clip([]byte(delta)))
	}
	// Its content is spelled as an export spells it ("{}", not nothing),
	// so that the record holds what the write sent.
	exact := snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "exact", Messages: jsonArrayOf(limit - 104),
		State: json.RawMessage(`{}`), ToolResults: json.RawMessage(`{}`),
		Metadata: jsonObjectOf("m", 40), Summary: textOf(20), NextNode: textOf(20), Tags: []string{textOf(10), textOf(10)}})
	thread := export("exact")
	thread = strings.Replace(thread, `"kind":"thread","thread_id":"exact","namespace":"","metadata":{}`,
		`"kind":"thread","thread_id":"exact","namespace":"","metadata":`+string(jsonObjectOf("t", limit+1)), 1)
	if thread == export("exact") {
		t.Fatalf("the thread record is not as the test expects:\n%s", clip([]byte(thread)))
	}
	thread = string(Reseal([]byte(thread)))

	dst := e.empty()
	imp := dst.open(engine.Config{MaxSnapshotBytes: limit})
	for _, c := range []struct{ name, input, names string }{
		{"a checkpoint's content", export("content"), "record 3: checkpoint"},
		{"a checkpoint's metadata", export("metadata"), "record 3: checkpoint"},
		{"a pending write", export("write"), "pending write 0 of task \"task\""},
		{"a delta's whole content", delta, "record 4: checkpoint"},
		{"a thread's metadata", thread, "record 2"},
	} {
		_, err := imp.Import(e.ctx, strings.NewReader(c.input), engine.ImportOptions{})
		if !errors.Is(err, engine.ErrSnapshotTooLarge) || !strings.Contains(fmt.Sprint(err), c.names) {
			t.Errorf("import of %s over the limit: %v, want ErrSnapshotTooLarge naming %q", c.name, err, c.names)
		}
		if got := dst.inventory().counts(); got != [3]int{} {
			t.Fatalf("import of %s over the limit wrote %v", c.name, got)
		}
	}
	if _, err := imp.Import(e.ctx, strings.NewReader(export("exact")), engine.ImportOptions{}); err != nil {
		t.Fatalf("import of a checkpoint of exactly the limit: %v", err)
	}
	if got := dst.get(exact.ID); got.SizeBytes != limit-100 {
		t.Fatalf("imported SizeBytes %d", got.SizeBytes)
	}
}

// An import does not take a checkpoint's size_bytes on trust: a file that
// understates it (here every record's set to 0, trailer recomputed) is
// measured, whole checkpoints as stored and deltas as rebuilt from their
// chain, so the limit holds on the import (a thread over it is refused,
// nothing written) and on every Append after it (which starts from the
// head's recorded size). The sizes recorded are those of the content read
// back, spelled compact, for full rows and deltas, with keys set again and
// removed, and U+0000 in values (numbers of one digit: an import counts
// each number as one byte, the least it took when sent).
func testImportMeasuresUnderstatedSizes(t *testing.T, e *env) {
	const limit = 4000
	src := e.open(engine.Config{MaxSnapshotBytes: -1, DeltaMinBytes: -1, DeltaRun: 3})
	snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"a":"first","b":"nul \u0000 here","c":1}`)})
	for i := range 8 {
		in := engine.AppendInput{ThreadID: "t", Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"%d %s"}]`, i, strings.Repeat("m", 200))),
			SetState: json.RawMessage(fmt.Sprintf(`{"a":"%d%s","k%d":%d}`, i, strings.Repeat("a", 50*i), i, i))}
		if i%3 == 2 {
			in.RemoveState = []string{"b", fmt.Sprint("k", i-1)}
		}
		if _, err := src.Append(e.ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := src.Export(e.ctx, "t", &buf); err != nil {
		t.Fatal(err)
	}
	honest := buf.String()
	if !strings.Contains(honest, `"storage":"delta"`) {
		t.Fatalf("the test needs deltas:\n%s", clip(buf.Bytes()))
	}
	forged := string(Reseal([]byte(regexp.MustCompile(`"size_bytes":\d+`).ReplaceAllString(honest, `"size_bytes":0`))))

	dst := e.empty()
	small := dst.open(engine.Config{MaxSnapshotBytes: limit - 2500})
	if _, err := small.Import(e.ctx, strings.NewReader(forged), engine.ImportOptions{}); !errors.Is(err, engine.ErrSnapshotTooLarge) {
		t.Fatalf("a forged import over the limit: %v, want ErrSnapshotTooLarge", err)
	}
	if got := dst.inventory().counts(); got != [3]int{} {
		t.Fatalf("the refused import wrote %v", got)
	}
	imp := dst.open(engine.Config{MaxSnapshotBytes: limit})
	if _, err := imp.Import(e.ctx, strings.NewReader(forged), engine.ImportOptions{}); err != nil {
		t.Fatalf("the forged import within the limit: %v", err)
	}
	list, err := imp.ListCheckpoints(e.ctx, "t", engine.ListOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var deltas int
	for _, info := range list {
		c := dst.get(info.ID)
		var want int
		for _, part := range [][]byte{c.Messages, c.State, c.ToolResults} {
			var compact bytes.Buffer
			if err := json.Compact(&compact, part); err != nil {
				t.Fatal(err)
			}
			want += compact.Len()
		}
		if c.SizeBytes != int64(want) {
			t.Errorf("checkpoint %s (%s, step %d): SizeBytes %d, want its content's %d", c.ID, c.Format, c.Step, c.SizeBytes, want)
		}
		if c.Format != "full" {
			deltas++
		}
	}
	if deltas == 0 {
		t.Fatal("no delta was imported")
	}
	head := dst.get(list[0].ID)
	over := limit - int(head.SizeBytes) + 10
	if _, err := imp.Append(e.ctx, engine.AppendInput{ThreadID: "t", Messages: jsonArrayOf(over)}); !errors.Is(err, engine.ErrSnapshotTooLarge) {
		t.Fatalf("an append of %d bytes on a head of %d imported with size 0, limit %d: %v, want ErrSnapshotTooLarge", over, head.SizeBytes, limit, err)
	}
}

// An import's measure of a checkpoint is the least its content took when
// sent, whatever the exporting store kept of its spelling, so an honest
// export keeps its sizes and imports under the limit its writes met: keys
// written escaped ("caf\u00e9") and then raw, which a store keeps as first
// spelled; a key holding U+0000 set and then removed. And content that
// looks sealed, which the import does not measure (its plaintext is the
// exporter's), needs a data key in the file, as an encrypted thread's
// export carries: a forged file that understates its size is not let
// through by a string that only begins like a sealed value
// (ErrInvalidInput, nothing written).
func testImportKeepsHonestSizes(t *testing.T, e *env) {
	src := e.open(engine.Config{DeltaMinBytes: -1})
	var esc, raw strings.Builder
	for i := range 20 {
		sep := map[bool]string{true: "{", false: ","}[i == 0]
		fmt.Fprintf(&esc, `%s"caf\u00e9%d":"v"`, sep, i)
		fmt.Fprintf(&raw, `%s"café%d":"v"`, sep, i)
	}
	esc.WriteString("}")
	raw.WriteString("}")
	snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "spelled", Messages: json.RawMessage(`["m1"]`), State: json.RawMessage(esc.String())})
	snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "spelled", Messages: json.RawMessage(`["m1","m2"]`), State: json.RawMessage(raw.String())})
	big := strings.Repeat("n", 2000)
	snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "nul", State: json.RawMessage(`{"k\u0000":"` + big + `","a":1}`)})
	snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "nul", Messages: json.RawMessage(`["m"]`), State: json.RawMessage(`{"a":1}`)})
	for _, th := range []string{"spelled", "nul"} {
		var buf bytes.Buffer
		if _, err := src.Export(e.ctx, th, &buf); err != nil {
			t.Fatal(err)
		}
		var maxSize int64
		want := map[string]int64{}
		for _, c := range listAll(t, e.ctx, src, th, "") {
			want[c.ID.String()] = c.SizeBytes
			maxSize = max(maxSize, c.SizeBytes)
		}
		dst := e.empty()
		// The limit its writes met: their content and their own fields
		// (a summary and "{}" for metadata, under 100 bytes).
		imp := dst.open(engine.Config{MaxSnapshotBytes: maxSize + 100})
		if _, err := imp.Import(e.ctx, bytes.NewReader(buf.Bytes()), engine.ImportOptions{}); err != nil {
			t.Fatalf("%s: an honest export under the limit its writes met: %v", th, err)
		}
		for _, c := range listAll(t, e.ctx, imp, th, "") {
			if c.SizeBytes != want[c.ID.String()] {
				t.Errorf("%s: checkpoint %s imported with SizeBytes %d, exported %d", th, c.ID, c.SizeBytes, want[c.ID.String()])
			}
		}
	}

	snapWith(t, e.ctx, src, engine.SnapshotInput{ThreadID: "lookalike", Messages: json.RawMessage(`["$pgc1$` + strings.Repeat("x", 5000) + `"]`)})
	var buf bytes.Buffer
	if _, err := src.Export(e.ctx, "lookalike", &buf); err != nil {
		t.Fatal(err)
	}
	forged := Reseal([]byte(regexp.MustCompile(`"size_bytes":\d+`).ReplaceAllString(buf.String(), `"size_bytes":0`)))
	dst := e.empty()
	imp := dst.open(engine.Config{MaxSnapshotBytes: 6000})
	if _, err := imp.Import(e.ctx, bytes.NewReader(forged), engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(err.Error(), "no data key") {
		t.Fatalf("an export holding what looks sealed and no data key: %v, want ErrInvalidInput", err)
	}
	if got := dst.inventory().counts(); got != [3]int{} {
		t.Fatalf("the refused import wrote %v", got)
	}
}

// The limit counts a number at the longer of its text and Postgres's
// spelling of it, on every write path and both stores: 1e131071 is 8
// bytes sent and 131,072 digits in a Postgres store and in every read of
// it, so content of a few such numbers is refused under a limit of
// 200,000, where a count of the bytes sent let through a checkpoint that
// reads back as 40 GB. Numbers that Postgres spells no longer count as
// written.
func testNumbersCountAsSpelled(t *testing.T, e *env) {
	const limit = 200000
	eng := e.open(engine.Config{MaxSnapshotBytes: limit})
	big := json.RawMessage(`{"n":[1e131071,1e131071]}`)
	cp := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "n", State: json.RawMessage(`{"n":1e131071}`)})
	if got := e.get(cp.ID).SizeBytes; got < 131072 {
		t.Errorf("a state of one number of 131,072 digits recorded SizeBytes %d", got)
	}
	before := e.inventory("n")
	for name, write := range map[string]func() error{
		"Snapshot": func() error {
			_, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "n", ToolResults: big})
			return err
		},
		"Snapshot's metadata": func() error {
			_, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "n", Metadata: big})
			return err
		},
		"Append": func() error {
			_, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "n", SetToolResults: big})
			return err
		},
		"Append on the head": func() error {
			_, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "n", SetToolResults: json.RawMessage(`{"m":1e100000}`)})
			return err
		},
		"PutWrites": func() error {
			_, err := eng.PutWrites(e.ctx, cp.ID, "task", []engine.Write{{Channel: "c", Value: big}})
			return err
		},
	} {
		if err := write(); !errors.Is(err, engine.ErrSnapshotTooLarge) {
			t.Errorf("%s of numbers spelled in 262,144 digits, limit %d: %v, want ErrSnapshotTooLarge", name, limit, err)
		}
	}
	e.unchanged("writes of numbers over the limit as spelled", before, "n")
	plain := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "p", State: json.RawMessage(`{"a":1.5e2,"b":1E+2,"c":-0.0e0}`)})
	if got, want := e.get(plain.ID).SizeBytes, int64(len(`{"a":1.5e2,"b":1E+2,"c":-0.0e0}`)); got != want {
		t.Errorf("numbers Postgres spells no longer: SizeBytes %d, want %d as written", got, want)
	}
}

// empty returns an env over a new database of the same store.
func (e *env) empty() *env {
	other := &env{t: e.t, h: e.h, url: e.h.NewURL(e.t), ctx: e.ctx}
	other.eng = other.open(deltas)
	return other
}

// exportRecord is the line of an export that holds checkpoint id.
func exportRecord(t *testing.T, export, id string) string {
	t.Helper()
	for _, line := range strings.Split(export, "\n") {
		if strings.Contains(line, `"kind":"checkpoint"`) && strings.Contains(line, `"id":"`+id+`"`) {
			return line
		}
	}
	t.Fatalf("no record of checkpoint %s in the export", id)
	return ""
}

// setRecordField returns an export line with one field set to v.
func setRecordField(t *testing.T, line, key string, v json.RawMessage) string {
	t.Helper()
	var rec map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatal(err)
	}
	rec[key] = v
	out, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// setKeyAgain writes thread th with one state key of 1,800 bytes, then
// three appends that each set that key again to as many bytes (together
// over a limit of 3,000, the content each makes within it), checks each
// reads back, and hands each to check.
func setKeyAgain(t *testing.T, ctx context.Context, eng *engine.Engine, th string, check func(i int, set json.RawMessage, got *engine.Checkpoint)) {
	t.Helper()
	snapWith(t, ctx, eng, engine.SnapshotInput{ThreadID: th, State: jsonObjectOf("a", 1800)})
	for i := range 3 {
		set := json.RawMessage(fmt.Sprintf(`{"a":"%d%s"}`, i, strings.Repeat("r", 1792)))
		res, err := eng.Append(ctx, engine.AppendInput{ThreadID: th, SetState: set})
		if err != nil {
			t.Fatalf("%s: append %d that sets the state's one key again: %v", th, i, err)
		}
		got, err := eng.Get(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		jsonEqual(t, th+": the state set again", got.State, set)
		check(i, set, got)
	}
}

// An append whose head's size and change's are over the limit is measured
// as its whole content would be sent, compact: the same on both stores
// (Postgres measured jsonb's text, a space after each colon and comma,
// and refused such an append where SQLite took it, or recorded another
// size).
func testAppendMeasuredAsSent(t *testing.T, e *env) {
	var keys, again []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf(`"k%02d":0`, i))
		again = append(again, fmt.Sprintf(`"k%02d":1`, i))
	}
	messages := `[{"role":"user","content":"a"},{"role":"ai","content":"b"}]`
	state := "{" + strings.Join(keys, ",") + "}"
	size := int64(len(messages) + len(state) + len(`{}`))
	for _, set := range []string{"{" + strings.Join(again[:5], ",") + "}", "{" + strings.Join(again, ",") + "}"} {
		for _, slack := range []int64{0, 10} {
			// The limit counts the summary ("s") too.
			eng := e.open(engine.Config{MaxSnapshotBytes: size + 1 + slack, DeltaMinBytes: -1})
			thread := fmt.Sprintf("measured-%d-%d", len(set), slack)
			snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(messages), State: json.RawMessage(state), Summary: "s"})
			res, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: thread, SetState: json.RawMessage(set), Summary: "s"})
			if err != nil {
				t.Fatalf("an append setting %d bytes of keys again, content %d bytes, limit %d: %v", len(set), size, size+1+slack, err)
			}
			c, err := eng.Get(e.ctx, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			if c.SizeBytes != size {
				t.Errorf("an append measured: SizeBytes %d, want %d (its content as sent)", c.SizeBytes, size)
			}
		}
	}
}
