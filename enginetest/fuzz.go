package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// Fuzz targets, one per input surface: snapshot content, metadata filters,
// export lines. Each holds the Engine to one property, on any store: a
// call either succeeds and reads back what it was given (as jsontext.Same
// compares JSON: jsonb's normalisation aside, the same values) or fails
// with a documented sentinel and writes nothing. A panic, an error that
// wraps no sentinel, or a row written by a refused call fails the target.
// Each target opens one database (h.NewURL) and deletes what an input
// wrote before the next, so every input meets the same database.

// Hostile JSON every target is seeded with: what Postgres cannot hold
// (numbers out of range, nesting deeper than it parses, \u0000, unpaired
// surrogates, bytes that are not UTF-8) and what is close to it.
var hostileJSON = []string{
	`{"a":1e999999}`,
	`{"a":-1e-999999}`,
	`{"a":1e131071}`,
	`{"a":1e131072}`,
	`{"a":1e-16384}`,
	`{"a":123456789012345678901234567890123456789012345678901234567890}`,
	`{"a":-9223372036854775809}`,
	`{"a":0e-20000,"b":1.0}`,
	`{"a":"` + strings.Repeat("[", 12) + `"}`,
	`{"a":` + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, 9000) + `1` + strings.Repeat("}", 9000) + `}`,
	`{"a":"\u0000","\u0000":"\u0001"}`,
	`{"a":"\ud800"}`,
	`{"a":"\udc00\ud800"}`,
	`{"a":"\ud83d\ude00"}`,
	"{\"a\":\"\xff\xfe\"}",
	"{\"\xc3\":1}",
	`{"a":1,"a":2}`,
	"\v{}",
	` {"a" : [ 1 , 2 ] } `,
	`{"a":}`,
	`[1e999999]`,
	`[{"role":"user","content":"\u001b]0;owned\u0007"}]`,
}

// hostileIDs are thread ids, namespaces and names to seed with.
var hostileIDs = []string{"", "t", "a\x00b", "a\xffb", strings.Repeat("t", 256), strings.Repeat("é", 255), "\u202e", "run\x01x"}

// allowedErr reports whether err wraps one of the sentinels listed.
func allowedErr(err error, sentinels ...error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// want is what a JSON argument reads back as: the empty array or object
// when only JSON whitespace was given.
func wantJSON(v []byte, empty string) []byte {
	if len(jsontext.TrimRight(v[jsontext.SkipSpace(v, 0):])) == 0 {
		return []byte(empty)
	}
	return v
}

// probe returns threadID in a list when it is a thread id the engine
// takes (so Export can look for it), for inventory.
func probe(ctx context.Context, eng *engine.Engine, threadID string) []string {
	if _, err := eng.ListCheckpoints(ctx, threadID, engine.ListOptions{Limit: 1}); err != nil {
		return nil
	}
	return []string{threadID}
}

// FuzzSnapshot fuzzes Snapshot's content: thread id, namespace, messages,
// state, tool results, metadata and next node, on a new thread or one with
// a checkpoint, with each way of storing (whole, as a delta, single
// statement). A snapshot written reads back with Get as given; one refused
// wraps ErrInvalidInput and leaves the database as it was.
func FuzzSnapshot(f *testing.F, h Harness) {
	url := h.NewURL(f)
	engines := []*engine.Engine{
		openURL(f, url, pgcheckpoint.Options{Config: deltas}),
		openURL(f, url, pgcheckpoint.Options{}),
		openURL(f, url, pgcheckpoint.Options{Config: engine.Config{FullSnapshots: true}}),
		openURL(f, url, pgcheckpoint.Options{Config: deltas, Postgres: postgres.Options{SingleStatement: true}}),
	}
	ctx := context.Background()
	for i, v := range hostileJSON {
		for mode := range uint8(8) {
			f.Add("t", "", []byte(`[{"role":"user","content":"hi"}]`), []byte(v), []byte(`{}`), []byte(`{}`), "next", mode)
			if mode == 0 {
				f.Add("t", "sub", []byte(`[`+v+`]`), []byte(`{}`), []byte(v), []byte(v), "", uint8(i))
			}
		}
	}
	for _, id := range hostileIDs {
		f.Add(id, id, []byte(nil), []byte(nil), []byte(nil), []byte(nil), id, uint8(4))
	}
	f.Fuzz(func(t *testing.T, thread, namespace string, messages, state, toolResults, metadata []byte, nextNode string, mode uint8) {
		eng := engines[int(mode)%len(engines)]
		if mode&4 != 0 { // a thread with a checkpoint, so that deltas are possible
			_, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Namespace: namespace,
				Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`), State: json.RawMessage(`{"a":1,"b":[2]}`)})
			if err != nil && !allowedErr(err, engine.ErrInvalidInput) {
				t.Fatalf("base snapshot: untyped error: %v", err)
			}
		}
		probes := probe(ctx, eng, thread)
		before := takeInventory(t, ctx, eng, probes...)
		in := engine.SnapshotInput{ThreadID: thread, Namespace: namespace, Messages: messages, State: state,
			ToolResults: toolResults, Metadata: metadata, NextNode: nextNode}
		res, err := eng.Snapshot(ctx, in)
		if err != nil {
			if !allowedErr(err, engine.ErrInvalidInput) {
				t.Fatalf("untyped error: %v", err)
			}
			if after := takeInventory(t, ctx, eng, probes...); after.dump != before.dump {
				t.Fatalf("refused (%v), yet the database changed", err)
			}
		} else {
			got, err := eng.Get(ctx, res.ID)
			if err != nil {
				t.Fatalf("get what was written: %v", err)
			}
			if got.ThreadID != thread || got.Namespace != namespace || got.NextNode != nextNode {
				t.Fatalf("read back thread %q namespace %q next node %q", got.ThreadID, got.Namespace, got.NextNode)
			}
			for _, c := range []struct {
				name      string
				got, sent []byte
				empty     string
			}{
				{"messages", got.Messages, messages, "[]"},
				{"state", got.State, state, "{}"},
				{"tool results", got.ToolResults, toolResults, "{}"},
				{"metadata", got.Metadata, metadata, "{}"},
			} {
				if want := wantJSON(c.sent, c.empty); !jsontext.Same(c.got, want) {
					t.Fatalf("%s read back as %s, written %s", c.name, clip(c.got), clip(want))
				}
			}
		}
		deleteThreads(t, ctx, eng, probes)
	})
}

// deleteThreads deletes the threads an input wrote.
func deleteThreads(t *testing.T, ctx context.Context, eng *engine.Engine, threads []string) {
	t.Helper()
	for _, th := range threads {
		if _, err := eng.DeleteThreads(ctx, th); err != nil {
			t.Fatalf("delete thread %q: %v", th, err)
		}
	}
}

// filterMetadata is the metadata of the checkpoints FuzzListFilter
// searches, oldest first.
var filterMetadata = []string{
	`{}`,
	`{"a":1}`,
	`{"a":1.0,"b":[1,2,{"c":"x"}]}`,
	`{"run_id":"r1","tags":["x","y"],"n":null}`,
	`{"s":"\u0000\u0001","e":"\ud83d\ude00"}`,
	`{"a":{"b":{"c":[[1],[2,3]]}},"t":true,"f":false}`,
	`{"a":[],"b":{},"big":1e300,"neg":-0.5}`,
	`{"a":"1","memory_cleared":true}`,
}

// FuzzListFilter fuzzes ListCheckpoints' options: the metadata filter,
// namespace, tags and limit, over a thread whose checkpoints hold the
// metadata of filterMetadata. A listing is what jsonb containment
// (jsontext.Contains) finds among the thread's checkpoints, newest first,
// cut at the limit; a refusal wraps ErrInvalidInput. Nothing is written.
func FuzzListFilter(f *testing.F, h Harness) {
	eng := openURL(f, h.NewURL(f), pgcheckpoint.Options{Config: deltas})
	ctx := context.Background()
	for i, m := range filterMetadata {
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Metadata: json.RawMessage(m),
			Tags: []string{[]string{"even", "odd"}[i%2]}, State: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)}); err != nil {
			f.Fatalf("write metadata %s: %v", m, err)
		}
	}
	all := listAll(f, ctx, eng, "t", "")
	for _, m := range append(slices.Clone(filterMetadata), hostileJSON...) {
		f.Add([]byte(m), "", "", 0)
	}
	for _, m := range []string{`{"a":1}`, `{"b":[{"c":"x"}]}`, `{"b":[2,1]}`, `{"a":{"b":{"c":[[3]]}}}`, `{"s":"\u0000\u0001"}`,
		`{"tags":["y"]}`, `{"n":null}`, `{"big":1e300}`, `{"neg":-0.50}`, `{"a":1e999999}`, `[1]`, `"a"`, ``} {
		f.Add([]byte(m), "", "odd", 2)
	}
	for _, id := range hostileIDs {
		f.Add([]byte(`{}`), id, id, -1)
	}
	before := takeInventory(f, ctx, eng)
	f.Fuzz(func(t *testing.T, filter []byte, namespace, tag string, limit int) {
		var tags []string
		if tag != "" {
			tags = []string{tag}
		}
		got, err := eng.ListCheckpoints(ctx, "t", engine.ListOptions{Namespace: namespace, Metadata: filter, Tags: tags, Limit: limit})
		if err != nil {
			if !allowedErr(err, engine.ErrInvalidInput) {
				t.Fatalf("untyped error: %v", err)
			}
		} else {
			want := wantListing(t, all, filter, namespace, tag, limit)
			if !slices.Equal(ids(got), want) {
				t.Fatalf("filter %s, namespace %q, tag %q, limit %d: listed %v, want %v", clip(filter), namespace, tag, limit, ids(got), want)
			}
		}
		if after := takeInventory(t, ctx, eng); after.dump != before.dump {
			t.Fatal("a listing changed the database")
		}
	})
}

// wantListing is what ListCheckpoints should return from all (the
// thread's root namespace, newest first) for a filter it took.
func wantListing(t *testing.T, all []engine.CheckpointInfo, filter []byte, namespace, tag string, limit int) []uuid.UUID {
	if namespace != "" {
		return nil
	}
	var pat any
	if len(wantJSON(filter, "")) > 0 {
		var err error
		if pat, err = jsontext.Decode(filter); err != nil {
			t.Fatalf("the engine took filter %s, which does not decode: %v", clip(filter), err)
		}
	}
	if limit == 0 {
		limit = 100
	}
	var out []uuid.UUID
	for _, c := range all {
		doc, err := jsontext.Decode(c.Metadata)
		if err != nil {
			t.Fatalf("metadata %s: %v", clip(c.Metadata), err)
		}
		if (pat == nil || jsontext.Contains(doc, pat)) && (tag == "" || slices.Contains(c.Tags, tag)) && len(out) < limit {
			out = append(out, c.ID)
		}
	}
	return out
}

func ids(infos []engine.CheckpointInfo) []uuid.UUID {
	out := make([]uuid.UUID, len(infos))
	for i, c := range infos {
		out[i] = c.ID
	}
	return out
}

// FuzzImport fuzzes Import with arbitrary bytes, seeded with a real export
// and hostile variants of its lines. It holds to the public API only, not
// to the export format: an import that succeeds adds exactly the rows its
// statistics count, and what it wrote exports, imports again after a
// delete and exports the same; one that fails wraps ErrInvalidInput or
// ErrIDConflict and leaves the database as it was. A thread "existing"
// stays in the database throughout, for imports that collide with it.
// Each input is imported as it is and, when its trailers do not fit its
// lines, once more with trailers that do (Reseal), so that a changed line
// meets the checks behind the trailer's.
func FuzzImport(f *testing.F, h Harness) {
	eng := openURL(f, h.NewURL(f), pgcheckpoint.Options{Config: deltas})
	ctx := context.Background()
	// The seed export: a thread with a namespace, deltas, a rewind, a
	// branch and pending writes; then it is deleted, so that it imports.
	var seed bytes.Buffer
	{
		var last, middle engine.SnapshotResult
		for i, s := range []string{`{"a":1}`, `{"a":2,"s":"\u0000"}`, `{"a":3,"n":1.50}`} {
			res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "seed", State: json.RawMessage(s), Tags: []string{"x"},
				Messages: json.RawMessage(`[{"role":"user","content":"` + strings.Repeat("m", i+1) + `"}]`), Metadata: json.RawMessage(`{"run_id":"r"}`)})
			if err != nil {
				f.Fatal(err)
			}
			middle, last = last, res
		}
		if _, err := eng.PutWrites(ctx, last.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`{"v":[1]}`)}}); err != nil {
			f.Fatal(err)
		}
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "seed", Namespace: "sub"}); err != nil {
			f.Fatal(err)
		}
		branch, err := eng.Branch(ctx, last.ID, "b")
		if err != nil {
			f.Fatal(err)
		}
		if _, err := eng.Rewind(ctx, middle.ID); err != nil {
			f.Fatal(err)
		}
		for _, th := range []string{"seed", branch.ThreadID} {
			if _, err := eng.Export(ctx, th, &seed); err != nil {
				f.Fatal(err)
			}
			if _, err := eng.DeleteThreads(ctx, th); err != nil {
				f.Fatal(err)
			}
		}
	}
	snapWith(f, ctx, eng, engine.SnapshotInput{ThreadID: "existing", State: json.RawMessage(`{"a":1}`)})
	var existing bytes.Buffer
	if _, err := eng.Export(ctx, "existing", &existing); err != nil {
		f.Fatal(err)
	}
	f.Add(seed.Bytes())
	f.Add(existing.Bytes())
	f.Add([]byte{})
	f.Add([]byte("not json\n"))
	text := seed.String()
	for _, v := range hostileJSON {
		for _, field := range []string{`"state":{}`, `"metadata":{}`, `"value":{"v":[1]}`, `"tool_results":{}`} {
			if strings.Contains(text, field) {
				key := field[:strings.Index(field, ":")]
				f.Add([]byte(strings.Replace(text, field, key+":"+v, 1)))
			}
		}
	}
	for _, r := range [][2]string{
		{`"seq":1`, `"seq":99999999999999999999`},
		{`"step":1`, `"step":-1`},
		{`"step":2`, `"step":9223372036854775807`},
		{`"namespace":"sub"`, `"namespace":"a\u0000b"`},
		{`"namespace":"sub"`, `"namespace":"\ud800"`},
		{`"thread_id":"seed"`, `"thread_id":"existing"`},
		{`"thread_id":"seed"`, `"thread_id":"` + strings.Repeat("t", 256) + `"`},
		{`"created_at":"`, `"created_at":"300000-`},
		{`"trigger":"manual"`, `"trigger":"sometimes"`},
		{`"format":3`, `"format":1e999999`},
	} {
		f.Add([]byte(strings.Replace(text, r[0], r[1], 1)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		importOnce(t, ctx, eng, data)
		if resealed := Reseal(data); !bytes.Equal(resealed, data) {
			importOnce(t, ctx, eng, resealed)
		}
	})
}

// importOnce imports data and holds the result to FuzzImport's property.
func importOnce(t *testing.T, ctx context.Context, eng *engine.Engine, data []byte) {
	probes := importedThreadIDs(ctx, eng, data)
	before := takeInventory(t, ctx, eng, probes...)
	st, err := eng.Import(ctx, bytes.NewReader(data), engine.ImportOptions{})
	after := takeInventory(t, ctx, eng, probes...)
	if err != nil {
		if !allowedErr(err, engine.ErrInvalidInput, engine.ErrIDConflict) {
			t.Fatalf("untyped error: %v", err)
		}
		if after.dump != before.dump {
			t.Fatalf("refused (%v), yet the database changed", err)
		}
		return
	}
	b, a := before.counts(), after.counts()
	if int64(a[0]-b[0]) != int64(st.Threads) || int64(a[1]-b[1]) != int64(st.Checkpoints) || int64(a[2]-b[2]) != int64(st.PendingWrites) {
		t.Fatalf("imported %+v, the database grew from %v to %v", st, b, a)
	}
	var added []string
	for _, th := range listThreads(t, ctx, eng) {
		if th.ThreadID != "existing" {
			added = append(added, th.ThreadID)
		}
	}
	for _, p := range probes {
		if p != "existing" && !slices.Contains(added, p) {
			added = append(added, p)
		}
	}
	first := exportThreads(t, ctx, eng, added)
	deleteThreads(t, ctx, eng, added)
	if _, err := eng.Import(ctx, strings.NewReader(first), engine.ImportOptions{}); err != nil {
		t.Fatalf("what the import wrote does not import again: %v\n%s", err, clip([]byte(first)))
	}
	if again := exportThreads(t, ctx, eng, added); again != first {
		t.Fatalf("exported, deleted, imported and exported again, the threads differ:\n%s\n%s", clip([]byte(first)), clip([]byte(again)))
	}
	deleteThreads(t, ctx, eng, added)
}

// exportThreads exports each thread that exists, one export after another.
func exportThreads(t *testing.T, ctx context.Context, eng *engine.Engine, threads []string) string {
	t.Helper()
	var buf bytes.Buffer
	for _, th := range threads {
		if _, err := eng.Export(ctx, th, &buf); err != nil && !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("export %q: %v", th, err)
		}
	}
	return buf.String()
}

// importedThreadIDs returns the thread ids that lines of data name and the
// engine takes, so that inventory sees a thread row written without
// checkpoints. It reads only the "thread_id" of each line.
func importedThreadIDs(ctx context.Context, eng *engine.Engine, data []byte) []string {
	var out []string
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var line struct {
			ThreadID string `json:"thread_id"`
		}
		if err := dec.Decode(&line); err != nil {
			return out
		}
		if !slices.Contains(out, line.ThreadID) {
			out = append(out, probe(ctx, eng, line.ThreadID)...)
		}
	}
}
