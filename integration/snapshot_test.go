package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperProcessEnv) != "" {
		os.Exit(runHelperProcess())
	}
	os.Exit(pgtest.Main(m))
}

type bundle struct {
	db  *pgtest.DB
	eng *engine.Engine
	ctx context.Context
}

// setup gives a test its own database and an engine that stores every
// checkpoint it can as a delta, however small (DeltaMinBytes -1): the
// tests' snapshots are small, and the code that reads, copies, rewinds and
// deletes must meet delta chains. TestSmallSnapshotsAreStoredWhole covers
// the default minimum.
func setup(t *testing.T) *bundle {
	t.Helper()
	d := pgtest.NewDB(t)
	return &bundle{db: d, eng: engine.New(d.Pool, deltas), ctx: context.Background()}
}

// deltas is the configuration of the engines of tests about delta chains.
var deltas = engine.Config{DeltaMinBytes: -1}

// count returns the number of rows in each pgcheckpoint table, for
// "nothing was written" checks.
func (b *bundle) count(t *testing.T) [3]int64 {
	t.Helper()
	var c [3]int64
	err := b.db.Pool.QueryRow(b.ctx, `SELECT
		(SELECT count(*) FROM pgcheckpoint.threads),
		(SELECT count(*) FROM pgcheckpoint.checkpoints),
		(SELECT count(*) FROM pgcheckpoint.pending_writes)`).Scan(&c[0], &c[1], &c[2])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (b *bundle) snap(t *testing.T, in engine.SnapshotInput) engine.SnapshotResult {
	t.Helper()
	res, err := b.eng.Snapshot(b.ctx, in)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return res
}

// jsonEqual compares two JSON texts after normalisation.
func jsonEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: got invalid JSON %q: %v", what, got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want invalid JSON %q: %v", what, want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("%s:\n got  %s\n want %s", what, gb, wb)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := engine.SnapshotInput{
		ThreadID:    "thread-1",
		Trigger:     engine.TriggerToolCall,
		Tags:        []string{"tool_call", "search"},
		Metadata:    json.RawMessage(`{"run_id": "r1", "source": "loop"}`),
		Messages:    json.RawMessage(`[{"role":"user","content":"find flights"},{"role":"assistant","content":"searching"}]`),
		State:       json.RawMessage(`{"cursor": 3, "plan": ["a", "b"]}`),
		ToolResults: json.RawMessage(`{"search": {"hits": 12, "text": "` + strings.Repeat("x", 5000) + `"}}`),
		NextNode:    "tools",
	}
	res := b.snap(t, in)
	if !res.Created || res.Step != 1 || res.ParentID != uuid.Nil || res.ID.Version() != 7 {
		t.Fatalf("first snapshot: %+v", res)
	}
	got, err := b.eng.Get(b.ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "messages", got.Messages, in.Messages)
	jsonEqual(t, "state", got.State, in.State)
	jsonEqual(t, "tool results (stored whole, not cut)", got.ToolResults, in.ToolResults)
	jsonEqual(t, "metadata", got.Metadata, in.Metadata)
	if got.ThreadID != "thread-1" || got.NextNode != "tools" || got.Trigger != engine.TriggerToolCall ||
		strings.Join(got.Tags, ",") != "tool_call,search" || got.Step != 1 {
		t.Fatalf("header: %+v", got.CheckpointInfo)
	}
	if got.Summary != "[assistant] searching" {
		t.Fatalf("summary %q", got.Summary)
	}
	if got.SizeBytes != int64(len(in.Messages)+len(in.State)+len(in.ToolResults)) {
		t.Fatalf("size %d", got.SizeBytes)
	}

	second := b.snap(t, engine.SnapshotInput{ThreadID: "thread-1", State: json.RawMessage(`{"a":1,"b":2}`)})
	if second.Step != 2 || second.ParentID != res.ID {
		t.Fatalf("second snapshot: %+v, want step 2 with parent %s", second, res.ID)
	}
	latest, err := b.eng.Latest(b.ctx, "thread-1")
	if err != nil {
		t.Fatal(err)
	}
	if latest.ID != second.ID || latest.Summary != "State: 2 keys" || string(latest.Messages) != "[]" {
		t.Fatalf("latest: %+v messages %s", latest.CheckpointInfo, latest.Messages)
	}
}

func TestSummaryTruncatesToHundredCharacters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := strings.Repeat("é", 150) // multi-byte: the cut counts characters
	res := b.snap(t, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`[{"role":"user","content":"` + long + `"}]`)})
	got, err := b.eng.Get(b.ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[user] " + strings.Repeat("é", 100); got.Summary != want {
		t.Fatalf("summary %q, want %q", got.Summary, want)
	}
	res = b.snap(t, engine.SnapshotInput{ThreadID: "t", Summary: "mine", Messages: json.RawMessage(`[{"role":"user","content":"x"}]`)})
	if got, _ = b.eng.Get(b.ctx, res.ID); got.Summary != "mine" {
		t.Fatalf("explicit summary replaced: %q", got.Summary)
	}
}

func TestSnapshotRetryIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := engine.NewCheckpointID()
	in := engine.SnapshotInput{ThreadID: "t", ID: id, Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`)}
	first := b.snap(t, in)
	before := b.count(t)
	for range 3 {
		again := b.snap(t, in)
		if again.Created || again.ID != id || again.Step != first.Step || !again.CreatedAt.Equal(first.CreatedAt) {
			t.Fatalf("retry returned %+v, want the stored %+v with Created=false", again, first)
		}
	}
	if after := b.count(t); after != before {
		t.Fatalf("retries wrote rows: %v -> %v", before, after)
	}
	// A write after the retries still builds on the one checkpoint.
	next := b.snap(t, engine.SnapshotInput{ThreadID: "t"})
	if next.Step != 2 || next.ParentID != id {
		t.Fatalf("next after retries: %+v", next)
	}
	// The same id with other content, or on another thread, is a conflict.
	for _, bad := range []engine.SnapshotInput{
		{ThreadID: "t", ID: id, Messages: json.RawMessage(`[{"role":"user","content":"bye"}]`)},
		{ThreadID: "other", ID: id, Messages: in.Messages},
	} {
		before := b.count(t)
		_, err := b.eng.Snapshot(b.ctx, bad)
		if !errors.Is(err, engine.ErrIDConflict) {
			t.Fatalf("reuse of id for %q: err %v, want ErrIDConflict", bad.ThreadID, err)
		}
		if after := b.count(t); after != before {
			t.Fatalf("conflicting write wrote rows: %v -> %v", before, after)
		}
	}
}

func TestBadInputIsTypedAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.snap(t, engine.SnapshotInput{ThreadID: "existing"})
	small := engine.New(b.db.Pool, engine.Config{MaxSnapshotBytes: 1000})
	plain := engine.New(b.db.Pool, engine.Config{})

	cases := []struct {
		name string
		eng  *engine.Engine
		in   engine.SnapshotInput
		want error
	}{
		{"empty thread id", b.eng, engine.SnapshotInput{}, engine.ErrInvalidInput},
		{"thread id over 255 characters", b.eng, engine.SnapshotInput{ThreadID: strings.Repeat("t", 256)}, engine.ErrInvalidInput},
		{"NUL in thread id", b.eng, engine.SnapshotInput{ThreadID: "a\x00b"}, engine.ErrInvalidInput},
		{"invalid UTF-8 thread id", b.eng, engine.SnapshotInput{ThreadID: "a\xffb"}, engine.ErrInvalidInput},
		{"invalid JSON messages", b.eng, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`[{"role":`)}, engine.ErrInvalidJSON},
		{"messages not an array", b.eng, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`{"role":"user"}`)}, engine.ErrInvalidJSON},
		{"state not an object", b.eng, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`[1,2]`)}, engine.ErrInvalidJSON},
		{"tool results not JSON", b.eng, engine.SnapshotInput{ThreadID: "t", ToolResults: json.RawMessage(`nope`)}, engine.ErrInvalidJSON},
		{"metadata not an object", b.eng, engine.SnapshotInput{ThreadID: "t", Metadata: json.RawMessage(`"x"`)}, engine.ErrInvalidJSON},
		{"unpaired surrogate escape", b.eng, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"s":"\ud800"}`)}, engine.ErrInvalidJSON},
		{"unpaired surrogate escape, stored whole", plain, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"s":"\ud800"}`)}, engine.ErrInvalidJSON},
		{"unknown trigger", b.eng, engine.SnapshotInput{ThreadID: "t", Trigger: "sometimes"}, engine.ErrInvalidInput},
		{"NUL in tag", b.eng, engine.SnapshotInput{ThreadID: "t", Tags: []string{"a\x00"}}, engine.ErrInvalidInput},
		{"checkpoint id not v7", b.eng, engine.SnapshotInput{ThreadID: "t", ID: uuid.New()}, engine.ErrInvalidInput},
		{"over the size limit", small, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"big":"` + strings.Repeat("x", 1000) + `"}`)}, engine.ErrSnapshotTooLarge},
		{"unknown parent", b.eng, engine.SnapshotInput{ThreadID: "existing", ParentID: engine.NewCheckpointID()}, engine.ErrNotFound},
	}
	for _, c := range cases {
		before := b.count(t)
		_, err := c.eng.Snapshot(b.ctx, c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if after := b.count(t); after != before {
			t.Errorf("%s: rows changed %v -> %v", c.name, before, after)
		}
	}
	if !errors.Is(engine.ErrSnapshotTooLarge, engine.ErrInvalidInput) || !errors.Is(engine.ErrInvalidJSON, engine.ErrInvalidInput) {
		t.Fatal("ErrSnapshotTooLarge and ErrInvalidJSON must wrap ErrInvalidInput")
	}
	// The default limit is 10 MiB.
	big := json.RawMessage(`{"big":"` + strings.Repeat("x", engine.DefaultMaxSnapshotBytes) + `"}`)
	if _, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", State: big}); !errors.Is(err, engine.ErrSnapshotTooLarge) {
		t.Fatalf("10 MiB state: %v", err)
	}
}

// TestBadJSONIsNamedOnEveryPath: JSON that does not parse is found by
// Postgres when the engine stores the snapshot whole (it does not parse it
// itself then) and by the engine before it computes digests: either way
// the error is ErrInvalidJSON naming the field, on the pipelined and the
// single-statement path, on a new thread and an existing one, and nothing
// is written.
func TestBadJSONIsNamedOnEveryPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	engines := map[string]engine.Config{
		"default": {}, "full": {FullSnapshots: true}, "deltas": deltas,
		"single": {SingleStatement: true}, "single-deltas": {SingleStatement: true, DeltaMinBytes: -1},
	}
	fields := []struct {
		name string
		in   func(json.RawMessage) engine.SnapshotInput
		bad  string
	}{
		{"messages", func(v json.RawMessage) engine.SnapshotInput { return engine.SnapshotInput{Messages: v} }, `[{"role":"user"},`},
		{"state", func(v json.RawMessage) engine.SnapshotInput { return engine.SnapshotInput{State: v} }, `{"a":}`},
		{"tool results", func(v json.RawMessage) engine.SnapshotInput { return engine.SnapshotInput{ToolResults: v} }, `{"a" 1}`},
		{"metadata", func(v json.RawMessage) engine.SnapshotInput { return engine.SnapshotInput{Metadata: v} }, `{"a":1} {}`},
	}
	for name, cfg := range engines {
		eng := engine.New(b.db.Pool, cfg)
		thread := "existing-" + name
		if _, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread, State: json.RawMessage(`{"a":1}`)}); err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			for _, th := range []string{thread, "new-" + name} {
				in := f.in(json.RawMessage(f.bad))
				in.ThreadID = th
				before := b.count(t)
				_, err := eng.Snapshot(b.ctx, in)
				if !errors.Is(err, engine.ErrInvalidJSON) || !strings.Contains(err.Error(), f.name+" does not parse") {
					t.Errorf("%s, %s on %s: err = %v, want ErrInvalidJSON naming %s", name, f.name, th, err, f.name)
				}
				if after := b.count(t); after != before {
					t.Errorf("%s, %s on %s: rows changed %v -> %v", name, f.name, th, before, after)
				}
			}
		}
	}
}

func TestUnknownIDsAreNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.eng.Get(b.ctx, engine.NewCheckpointID()); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
	if _, err := b.eng.Latest(b.ctx, "nobody"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("latest: %v", err)
	}
	if _, err := b.eng.PutWrites(b.ctx, engine.NewCheckpointID(), "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("put writes: %v", err)
	}
	if got := b.count(t); got != [3]int64{} {
		t.Fatalf("rows written: %v", got)
	}
}

func TestNULRoundTripsExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// U+0000 and U+0001 in values and keys, next to each other, next to
	// escaped backslashes, and a string that looks like the storage escape.
	tricky := []string{"a\x00b", "\x00", "\x01", "\x01\x00\x01", "\\u0000", "\x010", "\x01\x01", "end\x00"}
	m := map[string]any{"k\x00ey": "v\x00", "\x01": tricky}
	state, _ := json.Marshal(m)
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": "nul:\x00:soh:\x01:"}})
	meta, _ := json.Marshal(map[string]string{"marker": "m\x00"})
	res := b.snap(t, engine.SnapshotInput{ThreadID: "nul", Messages: msgs, State: state, ToolResults: state, Metadata: meta})
	if _, err := b.eng.PutWrites(b.ctx, res.ID, "task", []engine.Write{{Channel: "out", Value: state}}); err != nil {
		t.Fatal(err)
	}
	got, err := b.eng.Get(b.ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(got.State, &back); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back) != fmt.Sprint(m) {
		t.Fatalf("state:\n got  %q\n want %q", back, m)
	}
	jsonEqual(t, "messages", got.Messages, msgs)
	jsonEqual(t, "tool results", got.ToolResults, state)
	jsonEqual(t, "metadata", got.Metadata, meta)
	jsonEqual(t, "pending write", got.PendingWrites[0].Value, state)
	// Random strings over an alphabet heavy in the characters that matter.
	alphabet := []string{"\x00", "\x01", "0", "\\", "u", "é", "\"", "a"}
	rng := rand.New(rand.NewPCG(1, 2))
	var random []string
	for range 300 {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		random = append(random, sb.String())
	}
	randomJSON, _ := json.Marshal(random)
	res = b.snap(t, engine.SnapshotInput{ThreadID: "nul", Messages: randomJSON})
	if got, err = b.eng.Get(b.ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	var randomBack []string
	if err := json.Unmarshal(got.Messages, &randomBack); err != nil {
		t.Fatal(err)
	}
	for i := range random {
		if randomBack[i] != random[i] {
			t.Fatalf("random string %d: got %q, want %q", i, randomBack[i], random[i])
		}
	}
	// The metadata filter finds a NUL-bearing value too.
	list, err := b.eng.ListCheckpoints(b.ctx, "nul", engine.ListOptions{Metadata: meta})
	if err != nil || len(list) != 1 {
		t.Fatalf("filter on NUL metadata: %v %v", list, err)
	}
}

func TestPendingWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.snap(t, engine.SnapshotInput{ThreadID: "t"})
	n, err := b.eng.PutWrites(b.ctx, res.ID, "task-b", []engine.Write{
		{Channel: "messages", Value: json.RawMessage(`[{"role":"tool","content":"42"}]`)},
		{Channel: "answer", Value: json.RawMessage(`42`)},
	})
	if err != nil || n != 2 {
		t.Fatalf("put writes: %d %v", n, err)
	}
	if n, err = b.eng.PutWrites(b.ctx, res.ID, "task-a", []engine.Write{{Channel: "x", Value: json.RawMessage(`"a"`)}}); err != nil || n != 1 {
		t.Fatalf("put writes a: %d %v", n, err)
	}
	// A retry keeps the first values and reports nothing new.
	if n, err = b.eng.PutWrites(b.ctx, res.ID, "task-a", []engine.Write{{Channel: "x", Value: json.RawMessage(`"changed"`)}}); err != nil || n != 0 {
		t.Fatalf("retried put writes: %d %v", n, err)
	}
	got, err := b.eng.Latest(b.ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, w := range got.PendingWrites {
		summary = append(summary, fmt.Sprintf("%s/%d/%s=%s", w.TaskID, w.Index, w.Channel, w.Value))
	}
	want := `task-a/0/x="a" task-b/0/messages=[{"role": "tool", "content": "42"}] task-b/1/answer=42`
	if strings.Join(summary, " ") != want {
		t.Fatalf("pending writes:\n got  %s\n want %s", strings.Join(summary, " "), want)
	}
	// Bad writes are rejected whole.
	before := b.count(t)
	for _, bad := range [][]engine.Write{
		{{Channel: "ok", Value: json.RawMessage(`1`)}, {Channel: "bad", Value: json.RawMessage(`{`)}},
		{{Channel: "", Value: json.RawMessage(`1`)}},
		{{Channel: "empty", Value: nil}},
	} {
		if _, err := b.eng.PutWrites(b.ctx, res.ID, "task-c", bad); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("bad writes %v: %v", bad, err)
		}
	}
	if _, err := b.eng.PutWrites(b.ctx, res.ID, "", nil); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("empty task id: %v", err)
	}
	if after := b.count(t); after != before {
		t.Fatalf("bad writes wrote rows: %v -> %v", before, after)
	}
}

func TestListCheckpointsPagesAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []uuid.UUID
	for i := range 25 {
		in := engine.SnapshotInput{ThreadID: "t", Tags: []string{"step"}, Metadata: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}
		if i%5 == 0 {
			in.Tags = append(in.Tags, "milestone")
			in.Metadata = json.RawMessage(fmt.Sprintf(`{"i": %d, "memory_cleared": true}`, i))
		}
		ids = append(ids, b.snap(t, in).ID)
	}
	b.snap(t, engine.SnapshotInput{ThreadID: "other", Tags: []string{"milestone"}})

	// Pages of 10, newest first, following the cursor, see every checkpoint once.
	var seen []uuid.UUID
	var before uuid.UUID
	for {
		page, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Limit: 10, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, c := range page {
			seen = append(seen, c.ID)
		}
		before = page[len(page)-1].ID
	}
	if len(seen) != 25 {
		t.Fatalf("paged %d checkpoints, want 25", len(seen))
	}
	for i, id := range seen {
		if id != ids[24-i] {
			t.Fatalf("position %d: %s, want %s (newest first)", i, id, ids[24-i])
		}
	}

	byTag, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Tags: []string{"milestone", "step"}})
	if err != nil || len(byTag) != 5 {
		t.Fatalf("tag filter: %d %v", len(byTag), err)
	}
	byMeta, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Metadata: json.RawMessage(`{"memory_cleared": true}`), Limit: 1})
	if err != nil || len(byMeta) != 1 || byMeta[0].ID != ids[20] {
		t.Fatalf("latest memory_cleared marker: %v %v, want %s", byMeta, err, ids[20])
	}
	if _, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Metadata: json.RawMessage(`[1]`)}); !errors.Is(err, engine.ErrInvalidJSON) {
		t.Fatalf("array filter: %v", err)
	}
	if _, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Limit: engine.MaxListLimit + 1}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("huge limit: %v", err)
	}
	if _, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Before: engine.NewCheckpointID()}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unknown cursor: %v", err)
	}
	if none, err := b.eng.ListCheckpoints(b.ctx, "missing", engine.ListOptions{}); err != nil || len(none) != 0 {
		t.Fatalf("unknown thread: %v %v", none, err)
	}
}

func TestListThreads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	heads := map[string]uuid.UUID{}
	for i := range 7 {
		thread := fmt.Sprintf("thread-%02d", i)
		for range i + 1 {
			heads[thread] = b.snap(t, engine.SnapshotInput{ThreadID: thread}).ID
		}
		// A sub-graph's checkpoints do not make a second thread entry.
		b.snap(t, engine.SnapshotInput{ThreadID: thread, Namespace: "sub"})
	}
	var got []engine.ThreadInfo
	after := ""
	for {
		page, err := b.eng.ListThreads(b.ctx, engine.ThreadListOptions{Limit: 3, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].ThreadID
	}
	if len(got) != 7 {
		t.Fatalf("%d threads, want 7: %+v", len(got), got)
	}
	for i, th := range got {
		want := fmt.Sprintf("thread-%02d", i)
		if th.ThreadID != want || th.Namespace != "" || th.HeadID != heads[want] || th.HeadStep != int64(i+1) {
			t.Fatalf("thread %d: %+v, want %s head %s step %d", i, th, want, heads[want], i+1)
		}
	}
}

func TestDeleteThreadRemovesEveryTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 5 {
		res := b.snap(t, engine.SnapshotInput{ThreadID: "doomed"})
		if _, err := b.eng.PutWrites(b.ctx, res.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
			t.Fatal(err)
		}
	}
	b.snap(t, engine.SnapshotInput{ThreadID: "doomed", Namespace: "sub"})
	keep := b.snap(t, engine.SnapshotInput{ThreadID: "kept"})
	if _, err := b.eng.PutWrites(b.ctx, keep.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	n, err := b.eng.DeleteThread(b.ctx, "doomed")
	if err != nil || n != 6 {
		t.Fatalf("delete thread: %d %v, want 6", n, err)
	}
	if got := b.count(t); got != [3]int64{1, 1, 1} {
		t.Fatalf("rows left (threads, checkpoints, writes) = %v, want only the kept thread's", got)
	}
	if n, err = b.eng.DeleteThread(b.ctx, "doomed"); err != nil || n != 0 {
		t.Fatalf("second delete: %d %v", n, err)
	}
	if _, err := b.eng.Latest(b.ctx, "kept"); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteBeforeKeepsHeadAndOtherThreads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []uuid.UUID
	for range 10 {
		ids = append(ids, b.snap(t, engine.SnapshotInput{ThreadID: "t"}).ID)
	}
	b.snap(t, engine.SnapshotInput{ThreadID: "other"})
	n, err := b.eng.DeleteBefore(b.ctx, "t", 4)
	if err != nil || n != 3 {
		t.Fatalf("delete before 4: %d %v, want 3", n, err)
	}
	for i, id := range ids {
		_, err := b.eng.Get(b.ctx, id)
		if (i < 3) != errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("checkpoint step %d: err %v", i+1, err)
		}
	}
	// A cut above the head deletes everything but the head.
	if n, err = b.eng.DeleteBefore(b.ctx, "t", 1000); err != nil || n != 6 {
		t.Fatalf("delete before 1000: %d %v, want 6", n, err)
	}
	latest, err := b.eng.Latest(b.ctx, "t")
	if err != nil || latest.ID != ids[9] {
		t.Fatalf("head after delete: %v %v", latest, err)
	}
	if _, err := b.eng.Latest(b.ctx, "other"); err != nil {
		t.Fatalf("other thread touched: %v", err)
	}
	if _, err := b.eng.DeleteBefore(b.ctx, "t", 0); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("step 0: %v", err)
	}
}

func TestNamespacesHaveTheirOwnHeads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	root := b.snap(t, engine.SnapshotInput{ThreadID: "t"})
	sub1 := b.snap(t, engine.SnapshotInput{ThreadID: "t", Namespace: "child"})
	sub2 := b.snap(t, engine.SnapshotInput{ThreadID: "t", Namespace: "child"})
	if sub1.Step != 1 || sub2.Step != 2 || sub2.ParentID != sub1.ID {
		t.Fatalf("sub-graph line: %+v %+v", sub1, sub2)
	}
	if got, err := b.eng.Latest(b.ctx, "t"); err != nil || got.ID != root.ID {
		t.Fatalf("root head: %v %v", got, err)
	}
	if got, err := b.eng.LatestIn(b.ctx, "t", "child"); err != nil || got.ID != sub2.ID {
		t.Fatalf("child head: %v %v", got, err)
	}
	list, err := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{Namespace: "child"})
	if err != nil || len(list) != 2 {
		t.Fatalf("child list: %v %v", list, err)
	}
}

// An explicit parent other than the head: on both pipelined inserts (the
// default engine stores these small snapshots whole, deltas as deltas).
func TestExplicitParentStartsANewLine(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]engine.Config{"whole": {}, "delta": deltas} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.eng = engine.New(b.db.Pool, cfg)
			first := b.snap(t, engine.SnapshotInput{ThreadID: "t"})
			b.snap(t, engine.SnapshotInput{ThreadID: "t"})
			head := b.snap(t, engine.SnapshotInput{ThreadID: "t"})
			// The head named as the parent: the common case, pipelined.
			next := b.snap(t, engine.SnapshotInput{ThreadID: "t", ParentID: head.ID})
			if next.Step != 4 || next.ParentID != head.ID {
				t.Fatalf("next: %+v", next)
			}
			fork := b.snap(t, engine.SnapshotInput{ThreadID: "t", ParentID: first.ID})
			if fork.Step != 2 || fork.ParentID != first.ID {
				t.Fatalf("fork: %+v", fork)
			}
			if got, _ := b.eng.Latest(b.ctx, "t"); got.ID != fork.ID {
				t.Fatalf("head is %s, want the fork %s", got.ID, fork.ID)
			}
			if list, _ := b.eng.ListCheckpoints(b.ctx, "t", engine.ListOptions{}); len(list) != 5 {
				t.Fatalf("%d checkpoints, want 5: nothing is deleted", len(list))
			}
			// A parent from another thread is not found in this one.
			other := b.snap(t, engine.SnapshotInput{ThreadID: "other"})
			if _, err := b.eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", ParentID: other.ID}); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("cross-thread parent: %v", err)
			}
		})
	}
}

// A thread's first checkpoint goes through pgcheckpoint.checkpoint_put (the
// pipelined insert finds no head and writes nothing); the next ones are the
// pipelined lock and insert alone (db.CheckpointPutWhole, or with deltas
// db.CheckpointPutFast), unless Config.SingleStatement is set.
// Counted with the server's function statistics.
func TestSnapshotPipelinesTheCommonCase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := func() int64 {
		t.Helper()
		var n int64
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions
			WHERE schemaname = 'pgcheckpoint' AND funcname = 'checkpoint_put'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// writeAndCount writes 6 checkpoints on a new thread through an engine on
	// a pool of its own that tracks PL/pgSQL calls, closes the pool (a
	// backend flushes its statistics as it exits) and returns how many
	// calls of checkpoint_put that added.
	writeAndCount := func(thread string, cfg engine.Config) int64 {
		t.Helper()
		before := calls()
		pcfg := b.db.Pool.Config()
		pcfg.ConnConfig.RuntimeParams["track_functions"] = "pl"
		pool, err := pgxpool.NewWithConfig(b.ctx, pcfg)
		if err != nil {
			t.Fatal(err)
		}
		eng := engine.New(pool, cfg)
		for i := range 6 {
			if _, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread,
				Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"%d"}]`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		pool.Close()
		last, stable := calls(), 0
		for deadline := time.Now().Add(10 * time.Second); (last == before || stable < 5) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			if n := calls(); n != last {
				last, stable = n, 0
			} else {
				stable++
			}
		}
		return last - before
	}
	// Small snapshots are stored whole (Config.DeltaMinBytes), by their own
	// statement; with deltas, by the one that computes them.
	if got := writeAndCount("pipelined", engine.Config{}); got != 1 {
		t.Errorf("6 snapshots on a new thread called checkpoint_put %d times, want 1 (the first)", got)
	}
	if got := writeAndCount("pipelined-deltas", deltas); got != 1 {
		t.Errorf("with deltas, 6 snapshots on a new thread called checkpoint_put %d times, want 1 (the first)", got)
	}
	if got := writeAndCount("single", engine.Config{SingleStatement: true}); got != 6 {
		t.Errorf("with SingleStatement, 6 snapshots called checkpoint_put %d times, want 6", got)
	}
	checkLinearThread(t, b.db.Pool, "pipelined", 6)
	checkLinearThread(t, b.db.Pool, "pipelined-deltas", 6)
	checkLinearThread(t, b.db.Pool, "single", 6)
}
