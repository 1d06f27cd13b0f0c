package enginetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

func testSnapshotRoundTrip(t *testing.T, e *env) {
	in := engine.SnapshotInput{
		ThreadID:    "thread-1",
		Trigger:     engine.TriggerToolCall,
		Tags:        []string{"tool_call", "search"},
		Metadata:    json.RawMessage(`{"run_id": "r1", "source": "loop", "nested": {"b": [1, 2.5, {"c": null}], "a": true}}`),
		Messages:    json.RawMessage(`[{"role":"user","content":"find flights"},{"role":"assistant","content":"searching"}]`),
		State:       json.RawMessage(`{"cursor": 3, "plan": ["a", "b"], "big": 12345678901234567890, "f": -0.125e2}`),
		ToolResults: json.RawMessage(`{"search": {"hits": 12, "text": "` + strings.Repeat("x", 5000) + `"}}`),
		NextNode:    "tools",
	}
	res := e.snap(in)
	if !res.Created || res.Step != 1 || res.ParentID != uuid.Nil || res.ID.Version() != 7 || res.ThreadID != "thread-1" ||
		res.Namespace != "" || res.CreatedAt.IsZero() || res.Skipped {
		t.Fatalf("first snapshot: %+v", res)
	}
	check := func(what string, got *engine.Checkpoint) {
		t.Helper()
		jsonEqual(t, what+" messages", got.Messages, in.Messages)
		jsonEqual(t, what+" state", got.State, in.State)
		jsonEqual(t, what+" tool results (stored whole, not cut)", got.ToolResults, in.ToolResults)
		jsonEqual(t, what+" metadata", got.Metadata, in.Metadata)
		if got.ID != res.ID || got.ThreadID != "thread-1" || got.Namespace != "" || got.NextNode != "tools" ||
			got.Trigger != engine.TriggerToolCall || !slices.Equal(got.Tags, in.Tags) || got.Step != 1 || got.Seq != 1 ||
			got.ParentID != uuid.Nil || got.MergeParentID != uuid.Nil || !got.CreatedAt.Equal(res.CreatedAt) {
			t.Fatalf("%s header: %+v, want that of %+v", what, got.CheckpointInfo, res)
		}
		if got.Summary != "[assistant] searching" {
			t.Fatalf("%s summary %q", what, got.Summary)
		}
		if got.SizeBytes != int64(len(in.Messages)+len(in.State)+len(in.ToolResults)) {
			t.Fatalf("%s size %d", what, got.SizeBytes)
		}
		if len(got.PendingWrites) != 0 {
			t.Fatalf("%s pending writes %v", what, got.PendingWrites)
		}
	}
	check("get", e.get(res.ID))
	check("latest", e.head("thread-1"))

	second := e.snap(engine.SnapshotInput{ThreadID: "thread-1", State: json.RawMessage(`{"a":1,"b":2}`)})
	if second.Step != 2 || second.ParentID != res.ID || !second.Created {
		t.Fatalf("second snapshot: %+v, want step 2 with parent %s", second, res.ID)
	}
	latest := e.head("thread-1")
	if latest.ID != second.ID || latest.Summary != "State: 2 keys" || latest.Seq != 2 || latest.Trigger != engine.TriggerManual ||
		latest.NextNode != "" || len(latest.Tags) != 0 || latest.ParentID != res.ID {
		t.Fatalf("latest: %+v", latest.CheckpointInfo)
	}
	jsonEqual(t, "default messages", latest.Messages, []byte(`[]`))
	jsonEqual(t, "default tool results", latest.ToolResults, []byte(`{}`))
	jsonEqual(t, "default metadata", latest.Metadata, []byte(`{}`))
	third := e.snap(engine.SnapshotInput{ThreadID: "thread-1", Trigger: engine.TriggerLLMCall, NextNode: "agent"})
	if third.Step != 3 || third.ParentID != second.ID {
		t.Fatalf("third snapshot: %+v", third)
	}

	// ListCheckpoints shows the same headers as Get, newest first.
	list, err := e.eng.ListCheckpoints(e.ctx, "thread-1", engine.ListOptions{})
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	for i, id := range []uuid.UUID{third.ID, second.ID, res.ID} {
		got := e.get(id)
		l := list[i]
		if l.ID != id || l.Seq != int64(3-i) || l.Step != got.Step || l.ParentID != got.ParentID || l.Trigger != got.Trigger ||
			l.Summary != got.Summary || l.NextNode != got.NextNode || l.SizeBytes != got.SizeBytes || !slices.Equal(l.Tags, got.Tags) ||
			!l.CreatedAt.Equal(got.CreatedAt) || l.Format != got.Format {
			t.Fatalf("list entry %d: %+v, get: %+v", i, l, got.CheckpointInfo)
		}
		jsonEqual(t, "listed metadata", l.Metadata, got.Metadata)
		if l.Format != "full" && l.Format != "delta" {
			t.Fatalf("format %q", l.Format)
		}
	}
	if list[0].CreatedAt.Before(list[2].CreatedAt) {
		t.Fatalf("created_at goes back in time: %v after %v", list[0].CreatedAt, list[2].CreatedAt)
	}
}

// The default summary is "[role] first 100 characters" of the last message
// when it is an object, else "State: N keys"; an explicit one is kept.
func testDefaultSummary(t *testing.T, e *env) {
	long := strings.Repeat("é", 150) // multi-byte: the cut counts characters
	for _, c := range []struct {
		name          string
		in            engine.SnapshotInput
		want          string
		wantMultiByte bool
	}{
		{"long content", engine.SnapshotInput{Messages: json.RawMessage(`[{"role":"user","content":"` + long + `"}]`)}, "[user] " + strings.Repeat("é", 100), false},
		{"last message counts", engine.SnapshotInput{Messages: json.RawMessage(`[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]`)}, "[assistant] b", false},
		{"no content", engine.SnapshotInput{Messages: json.RawMessage(`[{"role":"assistant"}]`)}, "[assistant] ", false},
		{"no role", engine.SnapshotInput{Messages: json.RawMessage(`[{"content":"hello"}]`)}, "[unknown] hello", false},
		// A role is cut as content is (Postgres stored one of 5,000
		// characters, past MaxSummaryLength; SQLite refused the write).
		{"long role", engine.SnapshotInput{Messages: json.RawMessage(`[{"role":"` + strings.Repeat("r", 5000) + `","content":"hi"}]`)}, "[" + strings.Repeat("r", 100) + "] hi", false},
		{"explicit", engine.SnapshotInput{Summary: "mine", Messages: json.RawMessage(`[{"role":"user","content":"x"}]`)}, "mine", false},
		{"last message not an object", engine.SnapshotInput{Messages: json.RawMessage(`[{"role":"user","content":"x"},"plain"]`), State: json.RawMessage(`{"k":1}`)}, "State: 1 keys", false},
		{"no messages", engine.SnapshotInput{State: json.RawMessage(`{"a":1,"b":2,"c":{"d":3}}`)}, "State: 3 keys", false},
		{"nothing", engine.SnapshotInput{}, "State: 0 keys", false},
	} {
		c.in.ThreadID = "t"
		res := e.snap(c.in)
		if got := e.get(res.ID).Summary; got != c.want {
			t.Errorf("%s: summary %q, want %q", c.name, got, c.want)
		}
	}
}

// The default summary shows the text of the last message as written, not
// as a store keeps it: U+0001 as itself, U+0000 (which a summary, text in
// SQL, cannot hold) as U+FFFD, and the 100 characters counted on that
// text. It holds on every write path: a thread's first checkpoint, a later
// one stored whole, a later one stored as a delta.
func testDefaultSummaryAsWritten(t *testing.T, e *env) {
	const fffd = "\uFFFD"
	long := strings.Repeat("\x01", 150)
	for i, c := range []struct {
		name, role, content, want string
	}{
		{"NUL", "user", "hi\x00there", "[user] hi" + fffd + "there"},
		{"U+0001", "user", "a\x01b", "[user] a\x01b"},
		{"U+0001 then 0", "user", "\x010", "[user] \x010"},
		{"U+0001 U+0001 then NUL", "user", "\x01\x01\x00", "[user] \x01\x01" + fffd},
		{"NUL then U+0001", "user", "\x00\x01\x00\x01", "[user] " + fffd + "\x01" + fffd + "\x01"},
		{"escapes in the role", "a\x00\x01", "x", "[a" + fffd + "\x01] x"},
		{"look-alike text", "user", `\u0001\u00010 \\u0000`, `[user] \u0001\u00010 \\u0000`},
		{"100 characters of U+0001", "user", long, "[user] " + long[:100]},
		{"100 characters with a NUL at the cut", "user", strings.Repeat("é", 99) + "\x00\x01rest", "[user] " + strings.Repeat("é", 99) + fffd},
	} {
		msg, err := json.Marshal(map[string]string{"role": c.role, "content": c.content})
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range []struct {
			name string
			eng  *engine.Engine
			seed bool
		}{
			{"first", e.eng, false},
			{"delta", e.eng, true},
			{"whole", e.open(engine.Config{FullSnapshots: true}), true},
		} {
			thread := fmt.Sprintf("t%d-%s", i, path.name)
			if path.seed {
				e.snap(engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`[{"role":"user","content":"seed"}]`)})
			}
			res := snapWith(t, e.ctx, path.eng, engine.SnapshotInput{ThreadID: thread,
				Messages: json.RawMessage(`[{"role":"user","content":"seed"},` + string(msg) + `]`)})
			got := e.get(res.ID)
			if got.Summary != c.want {
				t.Errorf("%s, %s write: summary %q, want %q", c.name, path.name, got.Summary, c.want)
			}
			if path.seed && res.Step != 2 {
				t.Errorf("%s, %s write: step %d, want 2", c.name, path.name, res.Step)
			}
		}
	}
	// A content that is not a string is shown as JSON text, with the
	// escapes as JSON writes them (the spacing is the store's).
	res := e.snap(engine.SnapshotInput{ThreadID: "parts",
		Messages: json.RawMessage(`[{"role":"user","content":[{"text":"a\u0000b\u0001c"}]}]`)})
	if got := e.get(res.ID).Summary; !strings.Contains(got, `a\u0000b\u0001c`) || strings.Contains(got, `\u00010`) {
		t.Errorf("content parts: summary %q, want the text with \\u0000 and \\u0001 as written", got)
	}
}

// U+0000 and U+0001 in keys and values of every JSON field and of pending
// writes, U+0001 and other characters in text fields, and unicode, read
// back exactly.
func testNULAndUnicode(t *testing.T, e *env) {
	// Next to each other, next to escaped backslashes, and a string that
	// looks like an escape a store might use.
	tricky := []string{"a\x00b", "\x00", "\x01", "\x01\x00\x01", "\\u0000", "\x010", "\x01\x01", "end\x00", "\\", "\\\x00"}
	m := map[string]any{"k\x00ey": "v\x00", "\x01": tricky, "k\x01": map[string]any{"\x00": "\x00\x01"}, "日本語": "🙂 \u200b é"}
	state := mustJSON(m)
	msgs := mustJSON([]map[string]string{{"role": "user", "content": "nul:\x00:soh:\x01:"}})
	meta := mustJSON(map[string]string{"marker": "m\x00", "k\x00": "\x01"})
	const thread = "nul-\x01-thread-ü"
	in := engine.SnapshotInput{ThreadID: thread, Namespace: "ns\x01", Messages: msgs, State: state, ToolResults: state, Metadata: meta,
		Tags: []string{"tag\x01", "ü"}, Summary: "sum\x01mary 🙂", NextNode: "next\x01"}
	res := e.snap(in)
	if _, err := e.eng.PutWrites(e.ctx, res.ID, "task", []engine.Write{{Channel: "out", Value: state}, {Channel: "s", Value: json.RawMessage(`"\u0000"`)}}); err != nil {
		t.Fatal(err)
	}
	latest, err := e.eng.LatestIn(e.ctx, thread, "ns\x01")
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]*engine.Checkpoint{"get": e.get(res.ID), "latest": latest} {
		var back map[string]any
		if err := json.Unmarshal(got.State, &back); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%q", back) != fmt.Sprintf("%q", m) {
			t.Fatalf("%s: state:\n got  %q\n want %q", what, back, m)
		}
		jsonEqual(t, what+" messages", got.Messages, msgs)
		jsonEqual(t, what+" tool results", got.ToolResults, state)
		jsonEqual(t, what+" metadata", got.Metadata, meta)
		if len(got.PendingWrites) != 2 {
			t.Fatalf("%s: %d pending writes", what, len(got.PendingWrites))
		}
		jsonEqual(t, what+" pending write", got.PendingWrites[0].Value, state)
		jsonEqual(t, what+" pending write", got.PendingWrites[1].Value, []byte(`"\u0000"`))
		if got.ThreadID != thread || got.Namespace != "ns\x01" || !slices.Equal(got.Tags, in.Tags) || got.Summary != in.Summary || got.NextNode != in.NextNode {
			t.Fatalf("%s: text fields %q %q %q %q %q", what, got.ThreadID, got.Namespace, got.Tags, got.Summary, got.NextNode)
		}
	}

	// Random strings over an alphabet heavy in the characters that matter,
	// through a delta chain (the main engine) and stored whole.
	alphabet := []string{"\x00", "\x01", "0", "\\", "u", "é", "\"", "a", "🙂", "\n"}
	rng := rand.New(rand.NewPCG(1, 2))
	var random []string
	for range 300 {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		random = append(random, sb.String())
	}
	whole := e.open(engine.Config{FullSnapshots: true})
	for name, eng := range map[string]*engine.Engine{"deltas": e.eng, "whole": whole} {
		th := "random-" + name
		for i := range 3 { // the later ones extend the first: deltas
			r := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th, Messages: mustJSON(random[:100*(i+1)]), State: mustJSON(map[string]any{random[i]: random[i+1]})})
			got, err := eng.Get(e.ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			var back []string
			if err := json.Unmarshal(got.Messages, &back); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(back, random[:100*(i+1)]) {
				t.Fatalf("%s: random strings came back otherwise:\n got  %q\n want %q", name, back, random[:100*(i+1)])
			}
			jsonEqual(t, name+" state", got.State, mustJSON(map[string]any{random[i]: random[i+1]}))
		}
	}

	// Escapes are values: \u00e9 is é, an escaped surrogate pair the
	// character it encodes.
	esc := e.snap(engine.SnapshotInput{ThreadID: "escapes", State: json.RawMessage(`{"e":"\u00e9","smile":"\ud83d\ude42","nul":"\u0000","tab":"\t","sl":"\/"}`)})
	jsonEqual(t, "escapes", e.get(esc.ID).State, mustJSON(map[string]string{"e": "é", "smile": "🙂", "nul": "\x00", "tab": "\t", "sl": "/"}))

	// An escaped lone surrogate is refused as invalid JSON with nothing
	// written: Postgres jsonb cannot hold it, and no store keeps what
	// another cannot (see testRefusedValues).
	for name, eng := range map[string]*engine.Engine{"deltas": e.eng, "whole": whole} {
		th := "lone-" + name
		before := e.inventory(th)
		lone := json.RawMessage(`{"s":"\ud800x","t":"\udc00","u":"a\ud83d"}`)
		if _, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: th, State: lone}); !errors.Is(err, engine.ErrInvalidJSON) {
			t.Fatalf("%s: lone surrogates: %v, want ErrInvalidJSON", name, err)
		}
		e.unchanged("a refused lone surrogate", before, th)
	}

	// The metadata filter finds a NUL-bearing value too.
	list, err := e.eng.ListCheckpoints(e.ctx, thread, engine.ListOptions{Namespace: "ns\x01", Metadata: json.RawMessage(`{"marker":"m\u0000"}`)})
	if err != nil || len(list) != 1 {
		t.Fatalf("filter on NUL metadata: %v %v", list, err)
	}
	jsonEqual(t, "listed metadata", list[0].Metadata, meta)
	if list, err = e.eng.ListCheckpoints(e.ctx, thread, engine.ListOptions{Namespace: "ns\x01", Metadata: json.RawMessage(`{"marker":"m\u0001"}`)}); err != nil || len(list) != 0 {
		t.Fatalf("filter on U+0001 found the NUL value: %v %v", list, err)
	}
	if list, err = e.eng.ListCheckpoints(e.ctx, thread, engine.ListOptions{Namespace: "ns\x01", Tags: []string{"tag\x01"}}); err != nil || len(list) != 1 {
		t.Fatalf("filter on a U+0001 tag: %v %v", list, err)
	}
	threads := listThreads(t, e.ctx, e.eng)
	if !slices.ContainsFunc(threads, func(th engine.ThreadInfo) bool { return th.ThreadID == thread && th.Namespace == "ns\x01" }) {
		t.Fatalf("thread %q missing from %+v", thread, threads)
	}
}

func testRetryIsIdempotent(t *testing.T, e *env) {
	id := engine.NewCheckpointID()
	in := engine.SnapshotInput{ThreadID: "t", ID: id, Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`),
		State: json.RawMessage(`{"a": 1}`), Tags: []string{"x"}, Metadata: json.RawMessage(`{"m": 1}`)}
	first := e.snap(in)
	if !first.Created || first.ID != id {
		t.Fatalf("first write: %+v", first)
	}
	before := e.inventory()
	whole := e.open(engine.Config{FullSnapshots: true})
	for i := range 3 {
		eng := e.eng
		if i == 2 {
			eng = whole // another configuration finds the same checkpoint
		}
		again := snapWith(t, e.ctx, eng, in)
		if again.Created || again.ID != id || again.Step != first.Step || again.ParentID != first.ParentID ||
			!again.CreatedAt.Equal(first.CreatedAt) || again.ThreadID != "t" {
			t.Fatalf("retry returned %+v, want the stored %+v with Created=false", again, first)
		}
	}
	e.unchanged("retries", before)
	// A write after the retries still builds on the one checkpoint.
	next := e.snap(engine.SnapshotInput{ThreadID: "t"})
	if next.Step != 2 || next.ParentID != id {
		t.Fatalf("next after retries: %+v", next)
	}
	// A retry of a checkpoint that is no longer the head changes nothing
	// either: the head stays.
	before = e.inventory()
	if again := e.snap(in); again.Created || again.Step != 1 {
		t.Fatalf("late retry: %+v", again)
	}
	if e.head("t").ID != next.ID {
		t.Fatal("a late retry moved the head")
	}
	e.unchanged("a late retry", before)
	// The same id with other content, on another thread or in another
	// namespace is a conflict, and writes nothing.
	for _, bad := range []engine.SnapshotInput{
		{ThreadID: "t", ID: id, Messages: json.RawMessage(`[{"role":"user","content":"bye"}]`), State: in.State, Tags: in.Tags, Metadata: in.Metadata},
		{ThreadID: "t", ID: id, Messages: in.Messages, State: json.RawMessage(`{"a": 2}`), Tags: in.Tags, Metadata: in.Metadata},
		{ThreadID: "other", ID: id, Messages: in.Messages, State: in.State, Tags: in.Tags, Metadata: in.Metadata},
		{ThreadID: "t", Namespace: "sub", ID: id, Messages: in.Messages, State: in.State, Tags: in.Tags, Metadata: in.Metadata},
	} {
		before := e.inventory("other")
		_, err := e.eng.Snapshot(e.ctx, bad)
		if !errors.Is(err, engine.ErrIDConflict) {
			t.Fatalf("reuse of id on %q/%q: err %v, want ErrIDConflict", bad.ThreadID, bad.Namespace, err)
		}
		e.unchanged("a conflicting write", before, "other")
	}
	// A write that names its parent: its retry naming the same one is a
	// retry, one naming another (a checkpoint of the thread too) is a
	// conflict, where it returned the stored checkpoint as if written on
	// the one named.
	child := engine.SnapshotInput{ThreadID: "t", ID: engine.NewCheckpointID(), ParentID: id, State: json.RawMessage(`{"c": 1}`)}
	written := e.snap(child)
	if again := e.snap(child); again.Created || again.ParentID != id || again.Step != written.Step {
		t.Fatalf("a retry naming the same parent: %+v", again)
	}
	before = e.inventory()
	child.ParentID = next.ID
	if r, err := e.eng.Snapshot(e.ctx, child); !errors.Is(err, engine.ErrIDConflict) {
		t.Fatalf("a retry naming another parent: %+v, %v; want ErrIDConflict", r, err)
	}
	e.unchanged("a retry naming another parent", before)
}

// An explicit parent other than the head starts a new line from it, with
// whole snapshots and with deltas.
func testExplicitParent(t *testing.T, e *env) {
	for name, cfg := range map[string]engine.Config{"whole": {}, "delta": deltas} {
		eng := e.open(cfg)
		th := "t-" + name
		msgs := func(n int) json.RawMessage {
			var m []map[string]string
			for i := range n {
				m = append(m, map[string]string{"role": "user", "content": fmt.Sprint(i)})
			}
			return mustJSON(m)
		}
		first := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th, Messages: msgs(1)})
		snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th, Messages: msgs(2)})
		head := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th, Messages: msgs(3)})
		// The head named as the parent.
		next := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th, ParentID: head.ID, Messages: msgs(4)})
		if next.Step != 4 || next.ParentID != head.ID {
			t.Fatalf("%s: next: %+v", name, next)
		}
		fork := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th, ParentID: first.ID, Messages: msgs(2)})
		if fork.Step != 2 || fork.ParentID != first.ID {
			t.Fatalf("%s: fork: %+v", name, fork)
		}
		if got, _ := eng.Latest(e.ctx, th); got.ID != fork.ID {
			t.Fatalf("%s: head is %s, want the fork %s", name, got.ID, fork.ID)
		}
		after := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th, Messages: msgs(3)})
		if after.ParentID != fork.ID || after.Step != 3 {
			t.Fatalf("%s: the write after the fork: %+v", name, after)
		}
		if list := listAll(t, e.ctx, eng, th, ""); len(list) != 6 {
			t.Fatalf("%s: %d checkpoints, want 6: nothing is deleted", name, len(list))
		}
		for _, id := range []uuid.UUID{next.ID, fork.ID, after.ID} {
			got, err := eng.Get(e.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, name+" messages", got.Messages, msgs(int(got.Step)))
		}
		// A parent from another thread or namespace, or none at all, is not
		// found in this one, and nothing is written.
		other := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "other-" + name})
		sub := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th, Namespace: "sub"})
		for _, parent := range []uuid.UUID{other.ID, sub.ID, engine.NewCheckpointID()} {
			before := e.inventory("new-" + name)
			for _, target := range []string{th, "new-" + name} {
				if _, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: target, ParentID: parent}); !errors.Is(err, engine.ErrNotFound) {
					t.Fatalf("%s: parent %s on %s: %v, want ErrNotFound", name, parent, target, err)
				}
			}
			e.unchanged("a snapshot with a parent not found", before, "new-"+name)
		}
	}
}

func testBadInput(t *testing.T, e *env) {
	e.snap(engine.SnapshotInput{ThreadID: "existing", State: json.RawMessage(`{"a":1}`)})
	small := e.open(engine.Config{MaxSnapshotBytes: 1000})
	plain := e.open(engine.Config{})
	full := e.open(engine.Config{FullSnapshots: true})
	big := json.RawMessage(`{"big":"` + strings.Repeat("x", 1000) + `"}`)

	type badCase struct {
		name string
		eng  *engine.Engine
		in   engine.SnapshotInput
		want error
	}
	cases := []badCase{
		{"empty thread id", e.eng, engine.SnapshotInput{}, engine.ErrInvalidInput},
		{"thread id over 255 characters", e.eng, engine.SnapshotInput{ThreadID: strings.Repeat("t", 256)}, engine.ErrInvalidInput},
		{"thread id over 255 characters, multi-byte", e.eng, engine.SnapshotInput{ThreadID: strings.Repeat("é", 256)}, engine.ErrInvalidInput},
		{"NUL in thread id", e.eng, engine.SnapshotInput{ThreadID: "a\x00b"}, engine.ErrInvalidInput},
		{"invalid UTF-8 thread id", e.eng, engine.SnapshotInput{ThreadID: "a\xffb"}, engine.ErrInvalidInput},
		{"NUL in namespace", e.eng, engine.SnapshotInput{ThreadID: "t", Namespace: "n\x00"}, engine.ErrInvalidInput},
		{"namespace over 255 characters", e.eng, engine.SnapshotInput{ThreadID: "t", Namespace: strings.Repeat("n", 256)}, engine.ErrInvalidInput},
		{"NUL in tag", e.eng, engine.SnapshotInput{ThreadID: "t", Tags: []string{"ok", "a\x00"}}, engine.ErrInvalidInput},
		{"invalid UTF-8 tag", e.eng, engine.SnapshotInput{ThreadID: "t", Tags: []string{"\xc3"}}, engine.ErrInvalidInput},
		{"NUL in summary", e.eng, engine.SnapshotInput{ThreadID: "t", Summary: "s\x00"}, engine.ErrInvalidInput},
		{"NUL in next node", e.eng, engine.SnapshotInput{ThreadID: "t", NextNode: "n\x00"}, engine.ErrInvalidInput},
		{"unknown trigger", e.eng, engine.SnapshotInput{ThreadID: "t", Trigger: "sometimes"}, engine.ErrInvalidInput},
		{"checkpoint id not v7", e.eng, engine.SnapshotInput{ThreadID: "t", ID: uuid.New()}, engine.ErrInvalidInput},
		{"checkpoint id v1", e.eng, engine.SnapshotInput{ThreadID: "t", ID: uuid.Must(uuid.NewUUID())}, engine.ErrInvalidInput},
		{"checkpoint id v7 of another variant", e.eng, engine.SnapshotInput{ThreadID: "t", ID: otherVariant(engine.NewCheckpointID())}, engine.ErrInvalidInput},
		{"over the size limit", small, engine.SnapshotInput{ThreadID: "t", State: big}, engine.ErrSnapshotTooLarge},
		{"over the size limit, summed", small, engine.SnapshotInput{ThreadID: "t", State: big[:600], ToolResults: big[:500]}, engine.ErrSnapshotTooLarge},
		{"over the size limit on an existing thread", small, engine.SnapshotInput{ThreadID: "existing", Messages: json.RawMessage(`[` + string(big) + `]`)}, engine.ErrSnapshotTooLarge},
		{"unknown parent", e.eng, engine.SnapshotInput{ThreadID: "existing", ParentID: engine.NewCheckpointID()}, engine.ErrNotFound},
		{"unpaired surrogate escape, deltas", e.eng, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"s":"\ud800"}`)}, engine.ErrInvalidJSON},
		{"unpaired surrogate escape, whole", plain, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"s":"\ud800"}`)}, engine.ErrInvalidJSON},
		{"invalid UTF-8 in a JSON string, deltas", e.eng, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage("{\"s\":\"\xff\"}")}, engine.ErrInvalidJSON},
		{"invalid UTF-8 in a JSON string, whole", plain, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage("{\"s\":\"\xff\"}")}, engine.ErrInvalidJSON},
	}
	// Every JSON field, malformed and misshapen, on a new thread and an
	// existing one, with each way of storing.
	objects := []string{`{`, `{"a":}`, `nope`, `{"a":1,}`, `{"a":1} {}`, `{"a":'b'}`, "{\"a\":\"tab\there\"}", `{"a" 1}`, `{"a":01}`, `{"a":NaN}`, `{a:1}`}
	arrays := []string{`[`, `[{"role":`, `[1,]`, `[] x`, `['b']`, "[\"tab\there\"]", `[01]`, `[NaN]`, `[{"a":1,}]`}
	fields := []struct {
		name      string
		set       func(*engine.SnapshotInput, json.RawMessage)
		malformed []string
		wrong     []string // valid JSON of the wrong shape
	}{
		{"messages", func(in *engine.SnapshotInput, v json.RawMessage) { in.Messages = v }, arrays, []string{`{"role":"user"}`, `"text"`, `null`, `1`}},
		{"state", func(in *engine.SnapshotInput, v json.RawMessage) { in.State = v }, objects, []string{`[1,2]`, `"s"`, `null`, `true`}},
		{"tool results", func(in *engine.SnapshotInput, v json.RawMessage) { in.ToolResults = v }, objects, []string{`[]`, `3`, `null`}},
		{"metadata", func(in *engine.SnapshotInput, v json.RawMessage) { in.Metadata = v }, objects, []string{`"x"`, `[{"a":1}]`, `null`}},
	}
	for _, f := range fields {
		for name, eng := range map[string]*engine.Engine{"deltas": e.eng, "default": plain, "full": full} {
			for _, th := range []string{"t", "existing"} {
				for _, bad := range f.malformed {
					in := engine.SnapshotInput{ThreadID: th}
					f.set(&in, json.RawMessage(bad))
					cases = append(cases, badCase{fmt.Sprintf("%s, %s, on %s: %s", f.name, name, th, bad), eng, in, engine.ErrInvalidJSON})
				}
				for _, wrong := range f.wrong {
					in := engine.SnapshotInput{ThreadID: th}
					f.set(&in, json.RawMessage(wrong))
					cases = append(cases, badCase{fmt.Sprintf("%s of the wrong shape, %s, on %s: %s", f.name, name, th, wrong), eng, in, engine.ErrInvalidJSON})
				}
			}
		}
	}
	for _, c := range cases {
		before := e.inventory("t")
		res, err := c.eng.Snapshot(e.ctx, c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v (%+v), want %v", c.name, err, res, c.want)
		}
		e.unchanged(c.name, before, "t")
	}
	if !errors.Is(engine.ErrSnapshotTooLarge, engine.ErrInvalidInput) || !errors.Is(engine.ErrInvalidJSON, engine.ErrInvalidInput) {
		t.Fatal("ErrSnapshotTooLarge and ErrInvalidJSON must wrap ErrInvalidInput")
	}
	// The default limit is 10 MiB.
	before := e.inventory("t")
	huge := json.RawMessage(`{"big":"` + strings.Repeat("x", engine.DefaultMaxSnapshotBytes) + `"}`)
	if _, err := e.eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", State: huge}); !errors.Is(err, engine.ErrSnapshotTooLarge) {
		t.Fatalf("10 MiB state: %v", err)
	}
	e.unchanged("a 10 MiB state", before, "t")
	// Exactly the limit is fine.
	if res, err := small.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"s":"` + strings.Repeat("y", 992) + `"}`)}); err != nil || !res.Created {
		t.Fatalf("a state of exactly the limit: %+v %v", res, err)
	}
}

// JSON that does not parse gives ErrInvalidJSON naming the field, whether
// the engine or the store finds it, on a new thread and an existing one,
// in every storage mode, and nothing is written.
func testBadJSONNamed(t *testing.T, e *env) {
	single := postgres.Options{SingleStatement: true}
	configs := map[string]pgcheckpoint.Options{
		"default": {}, "full": {Config: engine.Config{FullSnapshots: true}}, "deltas": {Config: deltas},
		"single": {Postgres: single}, "single-deltas": {Config: deltas, Postgres: single},
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
	for name, opts := range configs {
		eng := e.openWith(opts)
		thread := "existing-" + name
		snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: thread, State: json.RawMessage(`{"a":1}`)})
		for _, f := range fields {
			for _, th := range []string{thread, "new-" + name} {
				in := f.in(json.RawMessage(f.bad))
				in.ThreadID = th
				before := e.inventory(th)
				_, err := eng.Snapshot(e.ctx, in)
				if !errors.Is(err, engine.ErrInvalidJSON) || !strings.Contains(err.Error(), f.name+" does not parse") {
					t.Errorf("%s, %s on %s: err = %v, want ErrInvalidJSON naming %s", name, f.name, th, err, f.name)
				}
				e.unchanged(fmt.Sprintf("%s, %s on %s", name, f.name, th), before, th)
			}
		}
	}
}

func testUnknownIDs(t *testing.T, e *env) {
	if _, err := e.eng.Get(e.ctx, engine.NewCheckpointID()); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
	if _, err := e.eng.Latest(e.ctx, "nobody"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("latest: %v", err)
	}
	if _, err := e.eng.LatestIn(e.ctx, "nobody", "sub"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("latest in: %v", err)
	}
	if _, err := e.eng.PutWrites(e.ctx, engine.NewCheckpointID(), "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("put writes: %v", err)
	}
	if _, err := e.eng.Export(e.ctx, "nobody", new(strings.Builder)); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("export: %v", err)
	}
	if _, err := e.eng.Latest(e.ctx, ""); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("latest of an empty thread id: %v", err)
	}
	if got := e.inventory("nobody").counts(); got != [3]int{} {
		t.Fatalf("rows written: %v", got)
	}
}

func testPendingWrites(t *testing.T, e *env) {
	res := e.snap(engine.SnapshotInput{ThreadID: "t"})
	n, err := e.eng.PutWrites(e.ctx, res.ID, "task-b", []engine.Write{
		{Channel: "messages", Value: json.RawMessage(`[{"role":"tool","content":"42"}]`)},
		{Channel: "answer", Value: json.RawMessage(`42`)},
	})
	if err != nil || n != 2 {
		t.Fatalf("put writes: %d %v", n, err)
	}
	if n, err = e.eng.PutWrites(e.ctx, res.ID, "task-a", []engine.Write{{Channel: "x", Value: json.RawMessage(`"a"`)}}); err != nil || n != 1 {
		t.Fatalf("put writes a: %d %v", n, err)
	}
	// A retry keeps the first values and reports nothing new.
	if n, err = e.eng.PutWrites(e.ctx, res.ID, "task-a", []engine.Write{{Channel: "x", Value: json.RawMessage(`"changed"`)}}); err != nil || n != 0 {
		t.Fatalf("retried put writes: %d %v", n, err)
	}
	// A longer retry adds only the new positions.
	if n, err = e.eng.PutWrites(e.ctx, res.ID, "task-a", []engine.Write{{Channel: "x", Value: json.RawMessage(`"changed"`)}, {Channel: "y", Value: json.RawMessage(`{"k": [1, "\u0000"]}`)}}); err != nil || n != 1 {
		t.Fatalf("longer retry: %d %v", n, err)
	}
	want := []engine.PendingWrite{
		{TaskID: "task-a", Index: 0, Channel: "x", Value: json.RawMessage(`"a"`)},
		{TaskID: "task-a", Index: 1, Channel: "y", Value: json.RawMessage(`{"k": [1, "\u0000"]}`)},
		{TaskID: "task-b", Index: 0, Channel: "messages", Value: json.RawMessage(`[{"role":"tool","content":"42"}]`)},
		{TaskID: "task-b", Index: 1, Channel: "answer", Value: json.RawMessage(`42`)},
	}
	checkWrites := func(what string, got []engine.PendingWrite) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d pending writes %v, want %d", what, len(got), got, len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.TaskID != w.TaskID || g.Index != w.Index || g.Channel != w.Channel {
				t.Fatalf("%s: write %d is %s/%d/%s, want %s/%d/%s (task, then index order)", what, i, g.TaskID, g.Index, g.Channel, w.TaskID, w.Index, w.Channel)
			}
			jsonEqual(t, fmt.Sprintf("%s: write %d", what, i), g.Value, w.Value)
		}
	}
	checkWrites("latest", e.head("t").PendingWrites)
	checkWrites("get", e.get(res.ID).PendingWrites)
	// Writes belong to their checkpoint: the next one has none.
	next := e.snap(engine.SnapshotInput{ThreadID: "t"})
	if got := e.head("t"); got.ID != next.ID || len(got.PendingWrites) != 0 {
		t.Fatalf("the next head has %d pending writes", len(got.PendingWrites))
	}
	checkWrites("get after the next snapshot", e.get(res.ID).PendingWrites)

	// Bad writes are rejected whole, with a typed error.
	before := e.inventory()
	for _, bad := range []struct {
		task   string
		writes []engine.Write
		want   error
	}{
		{"task-c", []engine.Write{{Channel: "ok", Value: json.RawMessage(`1`)}, {Channel: "bad", Value: json.RawMessage(`{`)}}, engine.ErrInvalidJSON},
		{"task-c", []engine.Write{{Channel: "ok", Value: json.RawMessage(`1`)}, {Channel: "bad", Value: json.RawMessage(`[1,]`)}}, engine.ErrInvalidJSON},
		{"task-c", []engine.Write{{Channel: "", Value: json.RawMessage(`1`)}}, engine.ErrInvalidInput},
		{"task-c", []engine.Write{{Channel: "c\x00", Value: json.RawMessage(`1`)}}, engine.ErrInvalidInput},
		{"task-c", []engine.Write{{Channel: "empty", Value: nil}}, engine.ErrInvalidJSON},
		{"", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}, engine.ErrInvalidInput},
		{"t\x00", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}, engine.ErrInvalidInput},
	} {
		if _, err := e.eng.PutWrites(e.ctx, res.ID, bad.task, bad.writes); !errors.Is(err, bad.want) {
			t.Fatalf("bad writes %q %v: %v, want %v", bad.task, bad.writes, err, bad.want)
		}
	}
	if _, err := e.eng.PutWrites(e.ctx, engine.NewCheckpointID(), "task-c", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unknown checkpoint: %v", err)
	}
	e.unchanged("refused writes", before)
}

func testListCheckpoints(t *testing.T, e *env) {
	var ids []uuid.UUID
	for i := range 25 {
		in := engine.SnapshotInput{ThreadID: "t", Tags: []string{"step"}, Metadata: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}
		if i%5 == 0 {
			in.Tags = append(in.Tags, "milestone")
			in.Metadata = json.RawMessage(fmt.Sprintf(`{"i": %d, "memory_cleared": true}`, i))
		}
		ids = append(ids, e.snap(in).ID)
	}
	other := e.snap(engine.SnapshotInput{ThreadID: "other", Tags: []string{"milestone"}, Metadata: json.RawMessage(`{"memory_cleared": true}`)})
	e.snap(engine.SnapshotInput{ThreadID: "t", Namespace: "sub", Tags: []string{"milestone"}})

	// Pages of 10, newest first, following the cursor, see every
	// checkpoint once, and a page after the last is empty.
	for _, limit := range []int{10, 1, 25, 24} {
		var seen []uuid.UUID
		var before uuid.UUID
		for pages := 0; ; pages++ {
			page, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Limit: limit, Before: before})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit || pages > 30 {
				t.Fatalf("limit %d: a page of %d", limit, len(page))
			}
			if len(page) == 0 {
				break
			}
			for _, c := range page {
				seen = append(seen, c.ID)
				if c.ThreadID != "t" || c.Namespace != "" {
					t.Fatalf("listed %+v", c)
				}
			}
			before = page[len(page)-1].ID
		}
		want := slices.Clone(ids)
		slices.Reverse(want)
		if !slices.Equal(seen, want) {
			t.Fatalf("limit %d: paged %d checkpoints %v, want the 25, newest first %v", limit, len(seen), seen, want)
		}
	}
	byTag, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Tags: []string{"milestone", "step"}})
	if err != nil || len(byTag) != 5 || byTag[0].ID != ids[20] || byTag[4].ID != ids[0] {
		t.Fatalf("tag filter: %d %v", len(byTag), err)
	}
	if none, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Tags: []string{"milestone", "nope"}}); err != nil || len(none) != 0 {
		t.Fatalf("tag filter with a tag nobody has: %d %v", len(none), err)
	}
	byMeta, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Metadata: json.RawMessage(`{"memory_cleared": true}`), Limit: 1})
	if err != nil || len(byMeta) != 1 || byMeta[0].ID != ids[20] {
		t.Fatalf("latest memory_cleared marker: %v %v, want %s", byMeta, err, ids[20])
	}
	// Filters combine with the cursor and with each other.
	page, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Metadata: json.RawMessage(`{"memory_cleared": true}`), Tags: []string{"milestone"}, Before: ids[20], Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != ids[15] || page[1].ID != ids[10] {
		t.Fatalf("filtered page after a cursor: %v %v", page, err)
	}
	// A cursor the filters leave out marks where the page starts all the same.
	page, err = e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Tags: []string{"milestone"}, Before: ids[21], Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != ids[20] || page[1].ID != ids[15] {
		t.Fatalf("filtered page after a cursor the filters leave out: %v %v", page, err)
	}
	sub, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Namespace: "sub", Tags: []string{"milestone"}})
	if err != nil || len(sub) != 1 {
		t.Fatalf("namespace sub: %v %v", sub, err)
	}
	for _, c := range []struct {
		name string
		opts engine.ListOptions
		want error
	}{
		{"array filter", engine.ListOptions{Metadata: json.RawMessage(`[1]`)}, engine.ErrInvalidJSON},
		{"filter that does not parse", engine.ListOptions{Metadata: json.RawMessage(`{"a":`)}, engine.ErrInvalidJSON},
		{"huge limit", engine.ListOptions{Limit: engine.MaxListLimit + 1}, engine.ErrInvalidInput},
		{"negative limit", engine.ListOptions{Limit: -1}, engine.ErrInvalidInput},
		{"NUL in a tag", engine.ListOptions{Tags: []string{"a\x00"}}, engine.ErrInvalidInput},
		{"unknown cursor", engine.ListOptions{Before: engine.NewCheckpointID()}, engine.ErrNotFound},
		{"cursor of another thread", engine.ListOptions{Before: other.ID}, engine.ErrNotFound},
		{"cursor of another namespace", engine.ListOptions{Namespace: "sub", Before: ids[3]}, engine.ErrNotFound},
	} {
		if _, err := e.eng.ListCheckpoints(e.ctx, "t", c.opts); !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if none, err := e.eng.ListCheckpoints(e.ctx, "missing", engine.ListOptions{}); err != nil || len(none) != 0 {
		t.Fatalf("unknown thread: %v %v", none, err)
	}
	if _, err := e.eng.ListCheckpoints(e.ctx, "", engine.ListOptions{}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("empty thread id: %v", err)
	}
	// The default page is 100; MaxListLimit takes all.
	for range 80 {
		e.snap(engine.SnapshotInput{ThreadID: "t"})
	}
	if page, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{}); err != nil || len(page) != 100 || page[0].Seq != 105 || page[99].Seq != 6 {
		t.Fatalf("default page: %d %v", len(page), err)
	}
	if page, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Limit: engine.MaxListLimit}); err != nil || len(page) != 105 {
		t.Fatalf("largest page: %d %v", len(page), err)
	}
}

// The metadata filter is JSON containment (Postgres @>): nested objects
// match on the keys they name, arrays on the elements they list, in any
// order, scalars by type and value.
func testMetadataFilter(t *testing.T, e *env) {
	docs := map[string]string{
		"a": `{"run":"r1","user":{"id":7,"name":"ann","prefs":{"lang":"en"}},"labels":["x","y"],"n":1.5,"flag":true,"nil":null}`,
		"b": `{"run":"r2","user":{"id":8,"name":"bob"},"labels":["y"],"n":2,"flag":false}`,
		"c": `{"run":"r1","labels":[],"deep":{"a":[{"k":1,"l":"m"},{"k":2}]},"s":"line\nbreak é"}`,
		"d": `{}`,
	}
	id := map[uuid.UUID]string{}
	for _, name := range []string{"a", "b", "c", "d"} {
		id[e.snap(engine.SnapshotInput{ThreadID: "t", Metadata: json.RawMessage(docs[name])}).ID] = name
	}
	e.snap(engine.SnapshotInput{ThreadID: "other", Metadata: json.RawMessage(docs["a"])})
	for filter, want := range map[string]string{
		`{}`:                                     "abcd",
		`{"run":"r1"}`:                           "ac",
		`{"run":"r3"}`:                           "",
		`{"user":{"name":"ann"}}`:                "a",
		`{"user":{"prefs":{"lang":"en"}}}`:       "a",
		`{"user":{}}`:                            "ab",
		`{"labels":["y"]}`:                       "ab",
		`{"labels":["y","x"]}`:                   "a",
		`{"labels":[]}`:                          "abc",
		`{"labels":["z"]}`:                       "",
		`{"n":1.5}`:                              "a",
		`{"n":2}`:                                "b",
		`{"flag":false}`:                         "b",
		`{"flag":true,"run":"r1"}`:               "a",
		`{"nil":null}`:                           "a",
		`{"user":{"id":"7"}}`:                    "",
		`{"user":{"id":7}}`:                      "a",
		`{"deep":{"a":[{"k":2}]}}`:               "c",
		`{"deep":{"a":[{"l":"m"}]}}`:             "c",
		`{"deep":{"a":[{"k":2,"l":"m"}]}}`:       "",
		`{"missing":1}`:                          "",
		`{"s":"line\nbreak \u00e9"}`:             "c",
		`{"run":"r1","labels":["x"]}`:            "a",
		`{ "run" : "r2" , "labels" : [ ] }`:      "b",
		`{"user":{"name":"ann","id":8}}`:         "",
		`{"labels":["y","y"]}`:                   "ab",
		`{"flag":"true"}`:                        "",
		`{"n":1.50}`:                             "a",
		`{"user":{"prefs":{"lang":"en","x":1}}}`: "",
	} {
		list, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Metadata: json.RawMessage(filter)})
		if err != nil {
			t.Fatalf("filter %s: %v", filter, err)
		}
		var got []string
		for _, c := range list {
			got = append(got, id[c.ID])
		}
		slices.Sort(got)
		if strings.Join(got, "") != want {
			t.Errorf("filter %s matched %q, want %q", filter, strings.Join(got, ""), want)
		}
	}
}

func testListThreads(t *testing.T, e *env) {
	heads := map[string]engine.SnapshotResult{}
	for i := range 7 {
		thread := fmt.Sprintf("thread-%02d", i)
		for range i + 1 {
			heads[thread] = e.snap(engine.SnapshotInput{ThreadID: thread, State: json.RawMessage(`{"k": 1}`)})
		}
		// A sub-graph's checkpoints do not make a second thread entry.
		e.snap(engine.SnapshotInput{ThreadID: thread, Namespace: "sub"})
	}
	// A thread with only sub-graphs shows the head of the first namespace
	// in namespace order, not in write order.
	e.snap(engine.SnapshotInput{ThreadID: "thread-99", Namespace: "two"})
	onlySub := e.snap(engine.SnapshotInput{ThreadID: "thread-99", Namespace: "sub"})
	var got []engine.ThreadInfo
	after := ""
	for pages := 0; ; pages++ {
		page, err := e.eng.ListThreads(e.ctx, engine.ThreadListOptions{Limit: 3, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 3 || pages > 5 {
			t.Fatalf("page of %d", len(page))
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].ThreadID
	}
	if len(got) != 8 {
		t.Fatalf("%d threads, want 8: %+v", len(got), got)
	}
	for i, th := range got[:7] {
		want := fmt.Sprintf("thread-%02d", i)
		h := heads[want]
		if th.ThreadID != want || th.Namespace != "" || th.HeadID != h.ID || th.HeadStep != int64(i+1) || th.HeadSummary != "State: 1 keys" ||
			!th.HeadCreatedAt.Equal(h.CreatedAt) || th.CreatedAt.IsZero() || th.CreatedAt.After(th.HeadCreatedAt) {
			t.Fatalf("thread %d: %+v, want %s head %s step %d", i, th, want, h.ID, i+1)
		}
	}
	if last := got[7]; last.ThreadID != "thread-99" || last.Namespace != "sub" || last.HeadID != onlySub.ID {
		t.Fatalf("thread with only a sub-graph: %+v", last)
	}
	if all, err := e.eng.ListThreads(e.ctx, engine.ThreadListOptions{}); err != nil || len(all) != 8 {
		t.Fatalf("default page: %d %v", len(all), err)
	}
	if none, err := e.eng.ListThreads(e.ctx, engine.ThreadListOptions{After: "zzz"}); err != nil || len(none) != 0 {
		t.Fatalf("after the last: %v %v", none, err)
	}
	for _, bad := range []engine.ThreadListOptions{{Limit: -1}, {Limit: engine.MaxListLimit + 1}, {After: "a\x00"}} {
		if _, err := e.eng.ListThreads(e.ctx, bad); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
}

// testThreadIDsSortByBytes: thread ids and namespaces sort by their
// bytes (the UTF-8 of their text) on every store, whatever the database's
// collation: ListThreads' pages, its After cursor, the head shown for a
// thread with only sub-graphs and the sweep's After cursor. The ids are
// ones a language's collation orders otherwise (case, accents,
// punctuation, digits).
func testThreadIDsSortByBytes(t *testing.T, e *env) {
	ids := []string{"a", "B", "Z", "_x", "é", "e", "ä", "10", "9", "a b", "aB", "ab", "Ab"}
	for _, id := range ids {
		e.snap(engine.SnapshotInput{ThreadID: id})
	}
	// A thread with sub-graphs alone shows the first namespace by bytes.
	e.snap(engine.SnapshotInput{ThreadID: "ns", Namespace: "b"})
	upper := e.snap(engine.SnapshotInput{ThreadID: "ns", Namespace: "B"})
	want := slices.Sorted(slices.Values(append(slices.Clone(ids), "ns")))
	var got []string
	after := ""
	for pages := 0; pages <= len(want); pages++ {
		page, err := e.eng.ListThreads(e.ctx, engine.ThreadListOptions{Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, th := range page {
			got = append(got, th.ThreadID)
			if th.ThreadID == "ns" && (th.Namespace != "B" || th.HeadID != upper.ID) {
				t.Errorf("thread with sub-graphs only shows namespace %q, want %q (its first by bytes)", th.Namespace, "B")
			}
		}
		after = page[len(page)-1].ThreadID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ListThreads in pages of 2: %q, want the ids by their bytes %q", got, want)
	}
	res, err := e.eng.Sweep(e.ctx, engine.KeepLastN(1), engine.SweepOptions{After: "Z", BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	later := 0
	for _, id := range want {
		if id > "Z" {
			later++
		}
	}
	if res.Threads != later || !res.Done {
		t.Fatalf("Sweep after %q saw %d threads (done %v), want the %d after it by bytes", "Z", res.Threads, res.Done, later)
	}
}

func testNamespaces(t *testing.T, e *env) {
	root := e.snap(engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"g": "root"}`)})
	sub1 := e.snap(engine.SnapshotInput{ThreadID: "t", Namespace: "child", State: json.RawMessage(`{"g": "child"}`)})
	sub2 := e.snap(engine.SnapshotInput{ThreadID: "t", Namespace: "child"})
	if sub1.Step != 1 || sub2.Step != 2 || sub2.ParentID != sub1.ID || sub1.ParentID != uuid.Nil || sub2.Namespace != "child" {
		t.Fatalf("sub-graph line: %+v %+v", sub1, sub2)
	}
	root2 := e.snap(engine.SnapshotInput{ThreadID: "t"})
	if root2.Step != 2 || root2.ParentID != root.ID {
		t.Fatalf("root line: %+v", root2)
	}
	if got := e.head("t"); got.ID != root2.ID {
		t.Fatalf("root head: %v", got.ID)
	}
	if got, err := e.eng.LatestIn(e.ctx, "t", "child"); err != nil || got.ID != sub2.ID || got.Namespace != "child" {
		t.Fatalf("child head: %v %v", got, err)
	}
	if _, err := e.eng.LatestIn(e.ctx, "t", "other"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("head of an empty namespace: %v", err)
	}
	list, err := e.eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{Namespace: "child"})
	if err != nil || len(list) != 2 || list[0].ID != sub2.ID {
		t.Fatalf("child list: %v %v", list, err)
	}
	if rootList := listAll(t, e.ctx, e.eng, "t", ""); len(rootList) != 2 {
		t.Fatalf("root list: %d", len(rootList))
	}
	// A parent from the other namespace is not found.
	if _, err := e.eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", Namespace: "child", ParentID: root.ID}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("cross-namespace parent: %v", err)
	}
	// Rewinding one namespace leaves the other's head.
	if _, err := e.eng.Rewind(e.ctx, sub1.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.head("t"); got.ID != root2.ID {
		t.Fatalf("root head after a rewind of child: %v", got.ID)
	}
	if got, _ := e.eng.LatestIn(e.ctx, "t", "child"); got == nil || got.ID != sub1.ID {
		t.Fatalf("child head after its rewind: %v", got)
	}
	if res := e.snap(engine.SnapshotInput{ThreadID: "t", Namespace: "child"}); res.ParentID != sub1.ID || res.Step != 2 {
		t.Fatalf("child write after the rewind: %+v", res)
	}
}

func testDeleteThread(t *testing.T, e *env) {
	for range 5 {
		res := e.snap(engine.SnapshotInput{ThreadID: "doomed"})
		if _, err := e.eng.PutWrites(e.ctx, res.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
			t.Fatal(err)
		}
	}
	sub := e.snap(engine.SnapshotInput{ThreadID: "doomed", Namespace: "sub"})
	keep := e.snap(engine.SnapshotInput{ThreadID: "kept"})
	if _, err := e.eng.PutWrites(e.ctx, keep.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	r, err := e.eng.DeleteThreads(e.ctx, "doomed")
	if err != nil || r.Deleted != 6 {
		t.Fatalf("delete thread: %d %v, want 6", r.Deleted, err)
	}
	if got := e.inventory("doomed").counts(); got != [3]int{1, 1, 1} {
		t.Fatalf("left (thread rows, checkpoints, writes) = %v, want only the kept thread's", got)
	}
	if _, err := e.eng.Get(e.ctx, sub.ID); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("sub-graph checkpoint after the delete: %v", err)
	}
	for _, ns := range []string{"", "sub"} {
		if _, err := e.eng.LatestIn(e.ctx, "doomed", ns); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("head of %q after the delete: %v", ns, err)
		}
	}
	// A retry is harmless.
	if r, err = e.eng.DeleteThreads(e.ctx, "doomed"); err != nil || r.Deleted != 0 {
		t.Fatalf("second delete: %d %v", r.Deleted, err)
	}
	if got := e.head("kept"); got.ID != keep.ID || len(got.PendingWrites) != 1 {
		t.Fatalf("kept thread: %+v", got)
	}
	// The thread can start again from step 1.
	if res := e.snap(engine.SnapshotInput{ThreadID: "doomed"}); res.Step != 1 || res.ParentID != uuid.Nil {
		t.Fatalf("a new start: %+v", res)
	}
	if _, err := e.eng.DeleteThreads(e.ctx, ""); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("empty thread id: %v", err)
	}
}

func testBeforeStep(t *testing.T, e *env) {
	var ids []uuid.UUID
	for range 10 {
		ids = append(ids, e.snap(engine.SnapshotInput{ThreadID: "t"}).ID)
	}
	if _, err := e.eng.PutWrites(e.ctx, ids[1], "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	other := e.snap(engine.SnapshotInput{ThreadID: "other"})
	sub := e.snap(engine.SnapshotInput{ThreadID: "t", Namespace: "sub"})
	r, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("t", 4))
	if err != nil || r.Deleted != 3 {
		t.Fatalf("delete before 4: %d %v, want 3", r.Deleted, err)
	}
	for i, id := range ids {
		_, err := e.eng.Get(e.ctx, id)
		if (i < 3) != errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("checkpoint step %d: err %v", i+1, err)
		}
	}
	if got := e.inventory().counts(); got[2] != 0 {
		t.Fatalf("%d pending writes left, want none: they went with their checkpoint", got[2])
	}
	// A cut above the head deletes everything but the head.
	if r, err = e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("t", 1000)); err != nil || r.Deleted != 6 {
		t.Fatalf("delete before 1000: %d %v, want 6", r.Deleted, err)
	}
	if latest := e.head("t"); latest.ID != ids[9] {
		t.Fatalf("head after delete: %v", latest.ID)
	}
	// After a rewind, the head is kept whatever its step.
	for range 3 {
		e.snap(engine.SnapshotInput{ThreadID: "t"})
	}
	if _, err := e.eng.Rewind(e.ctx, ids[9]); err != nil {
		t.Fatal(err)
	}
	if r, err = e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("t", 1000)); err != nil || r.Deleted != 3 {
		t.Fatalf("delete before 1000 after a rewind: %d %v, want 3", r.Deleted, err)
	}
	if latest := e.head("t"); latest.ID != ids[9] {
		t.Fatalf("head after delete: %v", latest.ID)
	}
	if got := e.head("other"); got.ID != other.ID {
		t.Fatal("other thread touched")
	}
	if got, err := e.eng.LatestIn(e.ctx, "t", "sub"); err != nil || got.ID != sub.ID {
		t.Fatalf("sub-graph touched: %v", err)
	}
	before := e.inventory()
	for _, step := range []int64{0, -1} {
		if _, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("t", step)); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if r, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("nobody", 5)); err != nil || r.Deleted != 0 {
		t.Fatalf("unknown thread: %d %v", r.Deleted, err)
	}
	e.unchanged("refused deletes", before)
}

// otherVariant is id with the variant bits of Microsoft's GUIDs (110)
// instead of RFC 9562's (10): still version 7, but not a UUIDv7.
func otherVariant(id uuid.UUID) uuid.UUID {
	id[8] = id[8]&0x1f | 0xc0
	return id
}
