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

// One rule for what a value may be, on every store: what Postgres keeps.
// jsonb refuses numbers beyond numeric's range, unpaired surrogate escapes
// and bytes that are not UTF-8, and text refuses bytes that are not UTF-8;
// the SQLite store refuses the same, so an export of either imports into
// the other. The limits below were tried on Postgres 15: numeric holds
// 131,072 digits before the point and 16,383 after (trailing zeros
// count), and Postgres refuses an exponent of 2^30-1 or more either way
// before it looks at the digits.

// refusedValues are JSON values that parse and that Postgres jsonb refuses.
var refusedValues = []struct{ name, text string }{
	{"1e999999", `1e999999`},
	{"131,073 digits before the point", "1" + strings.Repeat("0", 131072)},
	{"1e131072", `1e131072`},
	{"-1e131072", `-1e131072`},
	{"0.001e131075", `0.001e131075`},
	{"1e-16384", `1e-16384`},
	{"-1e-16384", `-1e-16384`},
	{"0.5e-16383", `0.5e-16383`},
	{"zero with a scale of 16,384", `0.0e-16383`},
	{"zero with 16,384 digits after the point", "0." + strings.Repeat("0", 16384)},
	{"zero with an exponent of 2^30-1", `0e1073741823`},
	{"an exponent past int64", `1e99999999999999999999`},
	{"an unpaired high surrogate", `"\ud800"`},
	{"an unpaired low surrogate", `"x\udc00x"`},
	{"a high surrogate before another escape", `"\ud800\u0041"`},
	{"two high surrogates", `"\uD800\uDBFF"`},
	{"a pair reversed", `"\ude00\ud83d"`},
	{"a high surrogate at the end", `"a\ud83d"`},
	{"a byte that is not UTF-8", "\"\xff\""},
	{"a cut UTF-8 sequence", "\"\xc3\""},
	{"a surrogate encoded in UTF-8", "\"\xed\xa0\x80\""},
	{"an overlong encoding", "\"\xc0\xaf\""},
	{"a code point past U+10FFFF", "\"\xf4\x90\x80\x80\""},
}

// boundaryValues are JSON values at the edge of what Postgres jsonb
// keeps, which every store keeps and reads back as the same value.
var boundaryValues = []struct{ name, text string }{
	{"1e131071", `1e131071`},
	{"-1E+131071", `-1E+131071`},
	{"131,072 nines", strings.Repeat("9", 131072)},
	{"0.001e131074", `0.001e131074`},
	{"1e-16383", `1e-16383`},
	{"-1e-16383", `-1e-16383`},
	{"1.00e-16381, trailing zeros to the limit", `1.00e-16381`},
	{"zero with 16,383 digits after the point", "0." + strings.Repeat("0", 16383)},
	{"0e-16383", `0e-16383`},
	{"zero with an exponent of 2^30-2", `0e1073741822`},
	{"-0", `-0`},
	{"a surrogate pair", `"\ud83d\ude00"`},
	{"the last surrogate pair", `"\uDBFF\uDFFF"`},
	{"an escaped backslash before ud800", `"\\ud800"`},
	{"U+10FFFF as UTF-8", "\"\xf4\x8f\xbf\xbf\""},
	{"U+FFFF escaped", `"\uffff"`},
	{"U+0001 escaped", `"\u0001"`},
}

// badText is text that is not UTF-8, for text fields.
var badText = []string{"a\xffb", "\xc3", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80"}

// jsonFieldsOf puts v in each JSON field of a snapshot, one field at a
// time (and, for a string, as a key).
func jsonFieldsOf(v string) []struct {
	name string
	in   engine.SnapshotInput
} {
	type field = struct {
		name string
		in   engine.SnapshotInput
	}
	fields := []field{
		{"messages", engine.SnapshotInput{Messages: json.RawMessage(`[{"role":"user"},` + v + `]`)}},
		{"state", engine.SnapshotInput{State: json.RawMessage(`{"a":1,"k":` + v + `}`)}},
		{"tool results", engine.SnapshotInput{ToolResults: json.RawMessage(`{"k":[` + v + `]}`)}},
		{"metadata", engine.SnapshotInput{Metadata: json.RawMessage(`{"k":` + v + `}`)}},
	}
	if strings.HasPrefix(v, `"`) {
		fields = append(fields, field{"state", engine.SnapshotInput{State: json.RawMessage(`{` + v + `:1}`)}})
	}
	return fields
}

// Each value Postgres refuses is refused by every store on every path that
// takes JSON (Snapshot stored whole and as a delta, Append, PutWrites,
// Import, the metadata filter) with ErrInvalidJSON naming the field, and
// nothing is written; text that is not UTF-8 is refused with
// ErrInvalidInput in every text field.
func testRefusedValues(t *testing.T, e *env) {
	whole := e.open(engine.Config{})
	base := e.snap(engine.SnapshotInput{ThreadID: "base", Messages: json.RawMessage(`[{"role":"user"}]`), State: json.RawMessage(`{"a":1}`)})
	// An export to import with a value in one field (resealed: its
	// trailer's digest follows the edit); the thread is deleted, so that
	// the export itself imports.
	tmpl := e.snap(engine.SnapshotInput{ThreadID: "template", Messages: json.RawMessage(`["@messages"]`),
		State: json.RawMessage(`{"k":"@state"}`), ToolResults: json.RawMessage(`{"k":"@tools"}`), Metadata: json.RawMessage(`{"k":"@meta"}`)})
	if _, err := e.eng.PutWrites(e.ctx, tmpl.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`"@write"`)}}); err != nil {
		t.Fatal(err)
	}
	var export bytes.Buffer
	if _, err := e.eng.Export(e.ctx, "template", &export); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.DeleteThreads(e.ctx, "template"); err != nil {
		t.Fatal(err)
	}
	importWith := func(old, v string) func() error {
		return func() error {
			text := strings.Replace(export.String(), old, v, 1)
			if text == export.String() {
				t.Fatalf("the export has no %s: %s", old, export.String())
			}
			_, err := e.eng.Import(e.ctx, bytes.NewReader(Reseal([]byte(text))), engine.ImportOptions{})
			return err
		}
	}
	before := e.inventory("template", "new")

	type call struct {
		what, field string // field: what the message names
		do          func() error
	}
	for _, v := range refusedValues {
		var calls []call
		for _, f := range jsonFieldsOf(v.text) {
			for name, eng := range map[string]*engine.Engine{"deltas": e.eng, "whole": whole} {
				for _, thread := range []string{"base", "new"} {
					in := f.in
					in.ThreadID = thread
					calls = append(calls, call{fmt.Sprintf("snapshot of %s, %s, on %s", f.name, name, thread), f.name, func() error {
						_, err := eng.Snapshot(e.ctx, in)
						return err
					}})
				}
			}
			a := engine.AppendInput{ThreadID: "base", Messages: f.in.Messages, SetState: f.in.State, SetToolResults: f.in.ToolResults, Metadata: f.in.Metadata}
			calls = append(calls, call{"append of " + f.name, f.name, func() error {
				_, err := e.eng.Append(e.ctx, a)
				return err
			}})
		}
		calls = append(calls,
			call{"pending write", `write 1 of task "t"`, func() error {
				_, err := e.eng.PutWrites(e.ctx, base.ID, "t", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}, {Channel: "c", Value: json.RawMessage(v.text)}})
				return err
			}},
			call{"metadata filter", "metadata filter", func() error {
				_, err := e.eng.ListCheckpoints(e.ctx, "base", engine.ListOptions{Metadata: json.RawMessage(`{"k":` + v.text + `}`)})
				return err
			}},
			call{"import, messages", "messages", importWith(`"@messages"`, v.text)},
			call{"import, state", "state", importWith(`"@state"`, v.text)},
			call{"import, tool results", "tool results", importWith(`"@tools"`, v.text)},
			call{"import, metadata", "metadata", importWith(`"@meta"`, v.text)},
			call{"import, pending write", "pending write 0 value", importWith(`"@write"`, v.text)},
			call{"import, thread metadata", "thread metadata", importWith(`"metadata":{}`, `"metadata":{"k":`+v.text+`}`)},
		)
		for _, c := range calls {
			err := c.do()
			if !errors.Is(err, engine.ErrInvalidJSON) {
				t.Errorf("%s, %s: %.300v, want ErrInvalidJSON", v.name, c.what, err)
			} else if !strings.Contains(err.Error(), c.field+": ") {
				t.Errorf("%s, %s: %.300v, want a message naming %q", v.name, c.what, err, c.field)
			}
		}
		e.unchanged(v.name, before, "template", "new")
	}

	for _, s := range badText {
		calls := map[string]func() error{}
		for field, in := range map[string]engine.SnapshotInput{
			"thread id": {ThreadID: s}, "namespace": {ThreadID: "base", Namespace: s}, "summary": {ThreadID: "base", Summary: s},
			"tag": {ThreadID: "base", Tags: []string{"ok", s}}, "next node": {ThreadID: "base", NextNode: s},
		} {
			calls["snapshot, "+field] = func() error { _, err := e.eng.Snapshot(e.ctx, in); return err }
			a := engine.AppendInput{ThreadID: in.ThreadID, Namespace: in.Namespace, Summary: in.Summary, Tags: in.Tags, NextNode: in.NextNode}
			calls["append, "+field] = func() error { _, err := e.eng.Append(e.ctx, a); return err }
		}
		calls["pending write, task id"] = func() error {
			_, err := e.eng.PutWrites(e.ctx, base.ID, s, []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}})
			return err
		}
		calls["pending write, channel"] = func() error {
			_, err := e.eng.PutWrites(e.ctx, base.ID, "t", []engine.Write{{Channel: s, Value: json.RawMessage(`1`)}})
			return err
		}
		calls["branch name"] = func() error { _, err := e.eng.Branch(e.ctx, base.ID, s); return err }
		calls["copy to"] = func() error { _, err := e.eng.CopyThread(e.ctx, "base", s); return err }
		for what, do := range calls {
			if err := do(); !errors.Is(err, engine.ErrInvalidInput) {
				t.Errorf("%q in %s: %v, want ErrInvalidInput", s, what, err)
			}
		}
		e.unchanged(fmt.Sprintf("text %q", s), before, "template", "new")
	}

	if _, err := e.eng.Import(e.ctx, bytes.NewReader(export.Bytes()), engine.ImportOptions{}); err != nil {
		t.Fatalf("the export itself: %v", err)
	}
}

// writeBoundaryValues writes each boundary value, on a thread of its own
// ("value-<i>"), in every JSON field: by Snapshot stored whole, by Append
// and by a Snapshot stored as a delta, and as a pending write. It returns
// the checkpoints written with the values they hold.
func writeBoundaryValues(t *testing.T, e *env) map[uuid.UUID]string {
	t.Helper()
	whole := e.open(engine.Config{})
	written := map[uuid.UUID]string{}
	for i, v := range boundaryValues {
		thread := fmt.Sprintf("value-%d", i)
		in := engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`[` + v.text + `]`),
			State: json.RawMessage(`{"k":` + v.text + `}`), ToolResults: json.RawMessage(`{"k":[` + v.text + `]}`),
			Metadata: json.RawMessage(`{"k":` + v.text + `}`)}
		if strings.HasPrefix(v.text, `"`) {
			in.State = json.RawMessage(`{"k":` + v.text + `,` + v.text + `:1}`)
		}
		first := snapWith(t, e.ctx, whole, in)
		if _, err := e.eng.PutWrites(e.ctx, first.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(v.text)}}); err != nil {
			t.Fatalf("%s: pending write: %v", v.name, err)
		}
		app, err := e.eng.Append(e.ctx, engine.AppendInput{ThreadID: thread, Messages: json.RawMessage(`[` + v.text + `]`),
			SetState: json.RawMessage(`{"k2":` + v.text + `}`), SetToolResults: json.RawMessage(`{"k":` + v.text + `}`), Metadata: in.Metadata})
		if err != nil {
			t.Fatalf("%s: append: %v", v.name, err)
		}
		in.Messages = json.RawMessage(`[` + v.text + `,` + v.text + `,{"role":"user"}]`)
		delta := e.snap(in)
		for _, id := range []uuid.UUID{first.ID, app.ID, delta.ID} {
			written[id] = v.name
		}
	}
	return written
}

// Each boundary value is kept by every store on every path that writes
// JSON, reads back as the same value, is found by the metadata filter,
// and comes back the same through an export and an import.
func testBoundaryValues(t *testing.T, e *env) {
	written := writeBoundaryValues(t, e)
	for i, v := range boundaryValues {
		thread := fmt.Sprintf("value-%d", i)
		cps := listAll(t, e.ctx, e.eng, thread, "")
		if len(cps) != 3 {
			t.Fatalf("%s: %d checkpoints, want 3", v.name, len(cps))
		}
		first, app, delta := e.get(cps[2].ID), e.get(cps[1].ID), e.get(cps[0].ID)
		jsonEqual(t, v.name+": messages", first.Messages, []byte(`[`+v.text+`]`))
		state := `{"k":` + v.text + `}`
		if strings.HasPrefix(v.text, `"`) {
			state = `{"k":` + v.text + `,` + v.text + `:1}`
		}
		jsonEqual(t, v.name+": state", first.State, []byte(state))
		jsonEqual(t, v.name+": tool results", first.ToolResults, []byte(`{"k":[`+v.text+`]}`))
		jsonEqual(t, v.name+": metadata", first.Metadata, []byte(`{"k":`+v.text+`}`))
		if len(first.PendingWrites) != 1 {
			t.Fatalf("%s: %d pending writes", v.name, len(first.PendingWrites))
		}
		jsonEqual(t, v.name+": pending write", first.PendingWrites[0].Value, []byte(v.text))
		jsonEqual(t, v.name+": appended messages", app.Messages, []byte(`[`+v.text+`,`+v.text+`]`))
		jsonEqual(t, v.name+": appended state", app.State, []byte(state[:len(state)-1]+`,"k2":`+v.text+`}`))
		jsonEqual(t, v.name+": appended tool results", app.ToolResults, []byte(`{"k":`+v.text+`}`))
		jsonEqual(t, v.name+": messages of a delta", delta.Messages, []byte(`[`+v.text+`,`+v.text+`,{"role":"user"}]`))
		found, err := e.eng.ListCheckpoints(e.ctx, thread, engine.ListOptions{Metadata: json.RawMessage(`{"k":` + v.text + `}`)})
		if err != nil || len(found) != 3 {
			t.Errorf("%s: the metadata filter found %d checkpoints (%v), want 3", v.name, len(found), err)
		}
	}

	// Exported and imported into a new database, every value comes back.
	before := e.inventory()
	dst := &env{t: t, h: e.h, url: e.h.NewURL(t), ctx: e.ctx}
	dst.eng = dst.open(deltas)
	moveThreads(t, e, dst)
	sameCheckpoints(t, e, dst, written)
	e.unchanged("the export", before)
}

// moveThreads exports every thread of from and imports each into to.
func moveThreads(t *testing.T, from, to *env) {
	t.Helper()
	for _, th := range listThreads(t, from.ctx, from.eng) {
		if th.Namespace != "" {
			continue
		}
		var buf bytes.Buffer
		if _, err := from.eng.Export(from.ctx, th.ThreadID, &buf); err != nil {
			t.Fatalf("export %q from %s: %v", th.ThreadID, from.h.Name, err)
		}
		if _, err := to.eng.Import(to.ctx, &buf, engine.ImportOptions{}); err != nil {
			t.Fatalf("import %q from %s into %s: %v", th.ThreadID, from.h.Name, to.h.Name, err)
		}
	}
}

// sameCheckpoints checks that every checkpoint of a reads back from b with
// the same place, text fields and JSON values; names says what some hold.
func sameCheckpoints(t *testing.T, a, b *env, names map[uuid.UUID]string) {
	t.Helper()
	src := a.inventory()
	if got := b.inventory(); got.counts() != src.counts() {
		t.Fatalf("%s holds %v (thread rows, checkpoints, writes), %s %v", b.h.Name, got.counts(), a.h.Name, src.counts())
	}
	for id := range src.checkpoints {
		s, d := a.get(id), b.get(id)
		what := fmt.Sprintf("checkpoint %s %s", id, names[id])
		if s.ThreadID != d.ThreadID || s.Namespace != d.Namespace || s.Seq != d.Seq || s.Step != d.Step || s.ParentID != d.ParentID ||
			s.MergeParentID != d.MergeParentID || s.Trigger != d.Trigger || !slices.Equal(s.Tags, d.Tags) || s.Summary != d.Summary ||
			s.NextNode != d.NextNode || s.SizeBytes != d.SizeBytes || !s.CreatedAt.Equal(d.CreatedAt) {
			t.Fatalf("%s:\n in %s %+v\n in %s %+v", what, b.h.Name, d.CheckpointInfo, a.h.Name, s.CheckpointInfo)
		}
		jsonEqual(t, what+" metadata", d.Metadata, s.Metadata)
		jsonEqual(t, what+" messages", d.Messages, s.Messages)
		jsonEqual(t, what+" state", d.State, s.State)
		jsonEqual(t, what+" tool results", d.ToolResults, s.ToolResults)
		if len(d.PendingWrites) != len(s.PendingWrites) {
			t.Fatalf("%s: %d pending writes, want %d", what, len(d.PendingWrites), len(s.PendingWrites))
		}
		for i, w := range s.PendingWrites {
			g := d.PendingWrites[i]
			if g.TaskID != w.TaskID || g.Index != w.Index || g.Channel != w.Channel {
				t.Fatalf("%s: pending write %d: %+v, want %+v", what, i, g, w)
			}
			jsonEqual(t, what+" pending write", g.Value, w.Value)
		}
	}
}

// RunBetween checks that exports move between two stores: a history with
// every boundary value (see testBoundaryValues), a branch, a merge, a
// rewind, a namespace, pending writes and NUL characters, written to the
// store from names, exported and imported into the store to names, reads
// back the same there; exported from there and imported into a new
// database of from's store, the same again. Run it both ways to hold each
// store to taking what the other exports.
func RunBetween(t *testing.T, from, to Harness) {
	SkipLong(t, "every boundary value moved between two stores and back")
	if from.NewURL == nil || to.NewURL == nil {
		t.Fatal("enginetest: Harness.NewURL is nil")
	}
	src := newEnv(t, from)
	written := writeBoundaryValues(t, src)
	seedHistory(t, src, "history")
	dst := newEnv(t, to)
	moveThreads(t, src, dst)
	sameCheckpoints(t, src, dst, written)
	back := newEnv(t, from)
	moveThreads(t, dst, back)
	sameCheckpoints(t, src, back, written)
}
