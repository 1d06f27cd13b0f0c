package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// appendModel is a checkpoint's content as ordered text, serialized the
// way a store rebuilds a delta (members joined with ',' and ':', no
// spaces), so a whole snapshot of it and its appends read back as the same
// bytes on a store that keeps text.
type appendModel struct {
	msgs  []string
	state []appendMember
	tools []appendMember
}

type appendMember struct{ key, val string }

func (m appendModel) clone() appendModel {
	return appendModel{append([]string(nil), m.msgs...), append([]appendMember(nil), m.state...), append([]appendMember(nil), m.tools...)}
}

func (m appendModel) text() (msgs, state, tools json.RawMessage) {
	obj := func(ms []appendMember) json.RawMessage {
		var b bytes.Buffer
		b.WriteByte('{')
		for i, kv := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(mustJSON(kv.key))
			b.WriteByte(':')
			b.WriteString(kv.val)
		}
		b.WriteByte('}')
		return b.Bytes()
	}
	arr := "["
	for i, s := range m.msgs {
		if i > 0 {
			arr += ","
		}
		arr += s
	}
	return json.RawMessage(arr + "]"), obj(m.state), obj(m.tools)
}

// apply is an append's change on the model: set keys keep their place or
// come last, removed keys go.
func applyMembers(ms []appendMember, set []appendMember, remove []string) []appendMember {
	out := ms[:0:0]
	for _, kv := range ms {
		gone := false
		for _, k := range remove {
			gone = gone || k == kv.key
		}
		if !gone {
			out = append(out, kv)
		}
	}
	for _, kv := range set {
		found := false
		for i := range out {
			if out[i].key == kv.key {
				out[i].val, found = kv.val, true
			}
		}
		if !found {
			out = append(out, kv)
		}
	}
	return out
}

func objectOf(ms []appendMember) json.RawMessage {
	return appendModel{state: ms}.clone().stateText()
}

func (m appendModel) stateText() json.RawMessage { _, s, _ := m.text(); return s }

// appendKeys includes keys with a NUL, a U+0001 and non-ASCII text, which
// the stores keep escaped.
var appendKeys = []string{"a", "b", "plan", "notes", "k\x00nul", "\x01soh", "ключ", "d"}

// appendChange is one random change: appended messages, set and removed
// keys (never the same key both set and removed).
func randomChange(r *rand.Rand, m appendModel) (msgs []string, setS, setT []appendMember, rmS, rmT []string) {
	for range r.IntN(3) {
		msgs = append(msgs, string(mustJSON(randMessage(r))))
	}
	pick := func(ms []appendMember) (set []appendMember, rm []string) {
		used := map[string]bool{}
		for range r.IntN(3) {
			k := appendKeys[r.IntN(len(appendKeys))]
			if !used[k] {
				used[k] = true
				set = append(set, appendMember{k, string(mustJSON(randValue(r)))})
			}
		}
		if len(ms) > 0 && r.IntN(3) == 0 {
			if k := ms[r.IntN(len(ms))].key; !used[k] {
				rm = append(rm, k)
			}
		}
		if r.IntN(6) == 0 {
			if k := appendKeys[r.IntN(len(appendKeys))]; !used[k] {
				rm = append(rm, k) // perhaps a key the head lacks: ignored
			}
		}
		return set, rm
	}
	setS, rmS = pick(m.state)
	if r.IntN(2) == 0 {
		setT, rmT = pick(m.tools)
	}
	return msgs, setS, setT, rmS, rmT
}

// testAppendHistories is the property of Append: random histories, each
// step written whole on one thread and, on another in lockstep, either as
// an Append of what changed or whole, with edits (stored whole) and
// rewinds, read back identical (Get, Latest, Diff). Every Append on a head
// with digests is a delta, and a whole Snapshot on the mixed thread is a
// delta wherever the same Snapshot on the whole thread is. A second pair
// runs with a short DeltaRun, so appends meet the ends of runs (stored on
// the anchor, or whole).
func testAppendHistories(t *testing.T, e *env) {
	for _, run := range []int{engine.DefaultDeltaRun, 3} {
		eng := e.open(engine.Config{DeltaMinBytes: -1, DeltaRun: run})
		for seed := uint64(1); seed <= uint64(Rounds(3, 1)); seed++ {
			t.Run(fmt.Sprintf("run%d/seed%d", run, seed), func(t *testing.T) {
				appendHistory(t, e.ctx, eng, seed, run)
			})
		}
	}
}

func appendHistory(t *testing.T, ctx context.Context, eng *engine.Engine, seed uint64, run int) {
	r := rand.New(rand.NewPCG(seed, 17))
	whole, mixed := fmt.Sprintf("whole-%d-%d", run, seed), fmt.Sprintf("mixed-%d-%d", run, seed)
	type step struct {
		whole, mixed uuid.UUID
		model        appendModel
	}
	var steps []step
	var m appendModel
	headStep := -1 // index in steps of both heads
	var appends, appendDeltas int
	check := func(i int) {
		t.Helper()
		w, err := eng.Get(ctx, steps[i].whole)
		if err != nil {
			t.Fatalf("get whole %d: %v", i, err)
		}
		x, err := eng.Get(ctx, steps[i].mixed)
		if err != nil {
			t.Fatalf("get mixed %d: %v", i, err)
		}
		sameCheckpoint(t, fmt.Sprintf("step %d", i), w, x)
		wantM, wantS, wantT := steps[i].model.text()
		if !sameJSON(w.Messages, wantM) || !sameJSON(w.State, wantS) || !sameJSON(w.ToolResults, wantT) {
			t.Fatalf("step %d reads back\n%s %s %s\nwant\n%s %s %s", i, w.Messages, w.State, w.ToolResults, wantM, wantS, wantT)
		}
	}
	for i := 0; i < 40; i++ {
		meta := json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		tags, next := []string{fmt.Sprint("t", i%3)}, fmt.Sprint("node", i)
		snapBoth := func(mixedToo bool) (w, x engine.SnapshotResult) {
			msgs, state, tools := m.text()
			in := engine.SnapshotInput{ThreadID: whole, Metadata: meta, Tags: tags, NextNode: next,
				Messages: msgs, State: state, ToolResults: tools}
			w = snapWith(t, ctx, eng, in)
			if mixedToo {
				in.ThreadID = mixed
				x = snapWith(t, ctx, eng, in)
			}
			return w, x
		}
		switch op := r.IntN(10); {
		case headStep >= 0 && op == 0: // rewind both
			k := r.IntN(len(steps))
			for _, id := range []uuid.UUID{steps[k].whole, steps[k].mixed} {
				if _, err := eng.Rewind(ctx, id); err != nil {
					t.Fatalf("rewind: %v", err)
				}
			}
			m, headStep = steps[k].model.clone(), k
			continue
		case headStep >= 0 && op == 1 && len(m.msgs) > 0: // an edit: stored whole on both
			m = m.clone()
			m.msgs[r.IntN(len(m.msgs))] = string(mustJSON(randMessage(r)))
			w, x := snapBoth(true)
			steps = append(steps, step{w.ID, x.ID, m.clone()})
		default:
			msgs, setS, setT, rmS, rmT := randomChange(r, m)
			m = m.clone()
			m.msgs = append(m.msgs, msgs...)
			m.state = applyMembers(m.state, setS, rmS)
			m.tools = applyMembers(m.tools, setT, rmT)
			if headStep < 0 || r.IntN(4) == 0 {
				w, x := snapBoth(true)
				steps = append(steps, step{w.ID, x.ID, m.clone()})
				if headStep >= 0 {
					wf, xf := formatOf(t, ctx, eng, w.ID), formatOf(t, ctx, eng, x.ID)
					if run == engine.DefaultDeltaRun && wf == "delta" && xf != "delta" {
						t.Fatalf("step %d: a whole Snapshot is a delta on the whole thread and %q on the mixed one", len(steps)-1, xf)
					}
				}
				break
			}
			w, _ := snapBoth(false)
			arr := "[" + joinStrings(msgs) + "]"
			onHead := uuid.Nil
			if r.IntN(2) == 0 {
				onHead = steps[headStep].mixed
			}
			x, err := eng.Append(ctx, engine.AppendInput{ThreadID: mixed, Metadata: meta, Tags: tags, NextNode: next,
				OnHead: onHead, Messages: json.RawMessage(arr),
				SetState: objectOf(setS), SetToolResults: objectOf(setT), RemoveState: rmS, RemoveToolResults: rmT})
			if err != nil {
				t.Fatalf("append at step %d: %v", len(steps), err)
			}
			steps = append(steps, step{w.ID, x.ID, m.clone()})
			appends++
			if formatOf(t, ctx, eng, x.ID) == "delta" {
				appendDeltas++
			} else if run == engine.DefaultDeltaRun {
				t.Fatalf("step %d: an Append on a head with digests was stored whole", len(steps)-1)
			}
		}
		headStep = len(steps) - 1
		check(headStep)
		lw, err := eng.Latest(ctx, whole)
		if err != nil {
			t.Fatal(err)
		}
		lx, err := eng.Latest(ctx, mixed)
		if err != nil {
			t.Fatal(err)
		}
		sameCheckpoint(t, "latest", lw, lx)
	}
	for i := range steps {
		check(i)
		j := r.IntN(len(steps))
		dw, err := eng.Diff(ctx, steps[j].whole, steps[i].whole)
		if err != nil {
			t.Fatal(err)
		}
		dx, err := eng.Diff(ctx, steps[j].mixed, steps[i].mixed)
		if err != nil {
			t.Fatal(err)
		}
		dw.From, dw.To, dx.From, dx.To = uuid.Nil, uuid.Nil, uuid.Nil, uuid.Nil
		if !reflect.DeepEqual(dw, dx) {
			t.Fatalf("diff %d..%d: whole %+v, mixed %+v", j, i, dw, dx)
		}
	}
	if appends == 0 || appendDeltas == 0 {
		t.Fatalf("%d appends, %d stored as deltas: the history did not test appends", appends, appendDeltas)
	}
}

// sameCheckpoint fails unless two checkpoints of the two threads read the
// same: content byte for byte, and what was written with them.
func sameCheckpoint(t *testing.T, what string, w, x *engine.Checkpoint) {
	t.Helper()
	if !bytes.Equal(w.Messages, x.Messages) || !bytes.Equal(w.State, x.State) || !bytes.Equal(w.ToolResults, x.ToolResults) {
		t.Fatalf("%s: whole thread reads\n%s %s %s\nmixed thread reads\n%s %s %s", what,
			w.Messages, w.State, w.ToolResults, x.Messages, x.State, x.ToolResults)
	}
	if w.Step != x.Step || w.Summary != x.Summary || w.NextNode != x.NextNode || !bytes.Equal(w.Metadata, x.Metadata) ||
		!reflect.DeepEqual(w.Tags, x.Tags) || w.Trigger != x.Trigger {
		t.Fatalf("%s: whole %+v, mixed %+v", what, w.CheckpointInfo, x.CheckpointInfo)
	}
}

func formatOf(t *testing.T, ctx context.Context, eng *engine.Engine, id uuid.UUID) string {
	t.Helper()
	c, err := eng.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return c.Format
}

func joinStrings(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}

func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// testAppendGuard: an Append on a head that moved gets ErrHeadMoved and
// writes nothing; of appenders racing with the same guard, exactly one
// wins per head.
func testAppendGuard(t *testing.T, e *env) {
	first := e.snap(engine.SnapshotInput{ThreadID: "guard", Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`)})
	second, err := e.eng.Append(e.ctx, engine.AppendInput{ThreadID: "guard", OnHead: first.ID,
		Messages: json.RawMessage(`[{"role":"assistant","content":"hello"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	if second.ParentID != first.ID || second.Step != 2 {
		t.Fatalf("append: parent %s step %d, want %s and 2", second.ParentID, second.Step, first.ID)
	}
	_, err = e.eng.Append(e.ctx, engine.AppendInput{ThreadID: "guard", OnHead: first.ID, SetState: json.RawMessage(`{"x":1}`)})
	if !errors.Is(err, engine.ErrHeadMoved) {
		t.Fatalf("append on a stale head: %v, want ErrHeadMoved", err)
	}
	if n := countCheckpoints(t, e, "guard"); n != 2 {
		t.Fatalf("%d checkpoints after a refused append, want 2", n)
	}
	// Racing appenders, each guarded by the head it read.
	const writers = 8
	for round := 0; round < 3; round++ {
		head := e.head("guard")
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, moved := 0, 0
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.eng.Append(e.ctx, engine.AppendInput{ThreadID: "guard", OnHead: head.ID,
					Messages: json.RawMessage(fmt.Sprintf(`[{"role":"tool","content":"w%d"}]`, w))})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case errors.Is(err, engine.ErrHeadMoved):
					moved++
				default:
					t.Errorf("racing append: %v", err)
				}
			}()
		}
		wg.Wait()
		if won != 1 || moved != writers-1 {
			t.Fatalf("round %d: %d appends won and %d got ErrHeadMoved, want 1 and %d", round, won, moved, writers-1)
		}
		after := e.head("guard")
		if after.Step != head.Step+1 {
			t.Fatalf("round %d: head at step %d, want %d", round, after.Step, head.Step+1)
		}
	}
	// Unguarded appenders all land, one after another.
	var wg sync.WaitGroup
	before := e.head("guard").Step
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.eng.Append(e.ctx, engine.AppendInput{ThreadID: "guard",
				Messages: json.RawMessage(`[{"role":"tool","content":"x"}]`)}); err != nil {
				t.Errorf("unguarded append: %v", err)
			}
		}()
	}
	wg.Wait()
	if got := e.head("guard"); got.Step != before+writers {
		t.Fatalf("after %d unguarded appends the head is at step %d, want %d", writers, got.Step, before+writers)
	}
}

func countCheckpoints(t *testing.T, e *env, thread string) int {
	t.Helper()
	infos, err := e.eng.ListCheckpoints(e.ctx, thread, engine.ListOptions{Limit: engine.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	return len(infos)
}

// testAppendRetryAndBadInput: an Append retried with its ID returns the
// checkpoint it wrote (Created false) and writes nothing; the same ID for
// another change is ErrIDConflict; bad input is typed and writes nothing.
func testAppendRetryAndBadInput(t *testing.T, e *env) {
	seed := e.snap(engine.SnapshotInput{ThreadID: "retry", Messages: json.RawMessage(`[{"role":"user","content":"a"}]`),
		State: json.RawMessage(`{"k":1,"gone":2}`)})
	in := engine.AppendInput{ThreadID: "retry", ID: engine.NewCheckpointID(),
		Messages: json.RawMessage(`[{"role":"assistant","content":"b"}]`), SetState: json.RawMessage(`{"k":3}`),
		RemoveState: []string{"gone"}}
	first, err := e.eng.Append(e.ctx, in)
	if err != nil || !first.Created {
		t.Fatalf("append: %+v %v", first, err)
	}
	again, err := e.eng.Append(e.ctx, in)
	if err != nil || again.Created || again.ID != first.ID || again.Step != first.Step {
		t.Fatalf("retried append: %+v %v, want the first (%+v) with Created false", again, err, first)
	}
	other := in
	other.SetState = json.RawMessage(`{"k":4}`)
	if _, err := e.eng.Append(e.ctx, other); !errors.Is(err, engine.ErrIDConflict) {
		t.Fatalf("same id, other change: %v, want ErrIDConflict", err)
	}
	got := e.head("retry")
	if string(got.Messages) == "" || got.ID != first.ID || !sameJSON(got.State, []byte(`{"k":3}`)) {
		t.Fatalf("head after the retries: %s %s", got.ID, got.State)
	}
	// An append never makes a thread's first checkpoint: its id is no
	// append's, whatever the change.
	if _, err := e.eng.Append(e.ctx, engine.AppendInput{ThreadID: "retry", ID: seed.ID}); !errors.Is(err, engine.ErrIDConflict) {
		t.Fatalf("an append with the id of the thread's first checkpoint: %v, want ErrIDConflict", err)
	}
	// The retry of an append whose acknowledgment was lost, after its
	// parent was deleted (a prune, retention): still the same append.
	if r, err := e.eng.DeleteCheckpoints(e.ctx, engine.BeforeStep("retry", first.Step)); err != nil || r.Deleted != 1 {
		t.Fatalf("delete the appended checkpoint's parent: %+v %v", r, err)
	}
	if again, err := e.eng.Append(e.ctx, in); err != nil || again.Created || again.ID != first.ID {
		t.Fatalf("retried append after its parent was deleted: %+v %v, want the first (%s) with Created false", again, err, first.ID)
	}
	twice := in // a key set twice: the last value is the one set
	twice.SetState = json.RawMessage(`{"k":2,"k":3}`)
	if again, err := e.eng.Append(e.ctx, twice); err != nil || again.Created || again.ID != first.ID {
		t.Fatalf("retried append, its key set twice, after its parent was deleted: %+v %v, want the first (%s)", again, err, first.ID)
	}
	if _, err := e.eng.Append(e.ctx, other); !errors.Is(err, engine.ErrIDConflict) {
		t.Fatalf("same id, other change, after the parent was deleted: %v, want ErrIDConflict", err)
	}
	for _, c := range []struct {
		name string
		in   engine.AppendInput
		want error
	}{
		{"no head", engine.AppendInput{ThreadID: "nothing-here"}, engine.ErrNotFound},
		{"set and removed", engine.AppendInput{ThreadID: "retry", SetState: json.RawMessage(`{"k":1}`), RemoveState: []string{"k"}}, engine.ErrInvalidInput},
		{"messages not an array", engine.AppendInput{ThreadID: "retry", Messages: json.RawMessage(`{}`)}, engine.ErrInvalidJSON},
		{"state does not parse", engine.AppendInput{ThreadID: "retry", SetState: json.RawMessage(`{"k":}`)}, engine.ErrInvalidJSON},
		{"bad remove key", engine.AppendInput{ThreadID: "retry", RemoveToolResults: []string{"\xff"}}, engine.ErrInvalidInput},
		{"empty thread", engine.AppendInput{}, engine.ErrInvalidInput},
		{"not a UUIDv7", engine.AppendInput{ThreadID: "retry", ID: uuid.New()}, engine.ErrInvalidInput},
		{"version 7 of another variant", engine.AppendInput{ThreadID: "retry", ID: otherVariant(engine.NewCheckpointID())}, engine.ErrInvalidInput},
	} {
		if _, err := e.eng.Append(e.ctx, c.in); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if n := countCheckpoints(t, e, "retry"); n != 1 {
		t.Fatalf("%d checkpoints after bad appends, want 1 (the append; its parent was deleted)", n)
	}
	if n := countCheckpoints(t, e, "nothing-here"); n != 0 {
		t.Fatalf("an append on a thread without checkpoints wrote %d", n)
	}
}

// testIntervalAppends: an interval snapshotter with CaptureChange writes
// each tick's change with Append: the head holds every message appended,
// in order, and a tick with an empty change writes nothing.
func testIntervalAppends(t *testing.T, e *env) {
	e.snap(engine.SnapshotInput{ThreadID: "iv-append", Messages: json.RawMessage(`[{"role":"user","content":"start"}]`),
		State: json.RawMessage(`{"ticks":0}`)})
	var mu sync.Mutex
	ticks := 0
	iv, err := e.eng.StartInterval(e.ctx, engine.IntervalOptions{ThreadID: "iv-append", Every: 2 * time.Millisecond,
		CaptureChange: func(context.Context) (engine.AppendInput, error) {
			mu.Lock()
			defer mu.Unlock()
			ticks++
			if ticks%2 == 0 || ticks > 9 {
				return engine.AppendInput{Messages: json.RawMessage(` [ ] `), SetState: json.RawMessage(`{}`)}, nil // nothing new
			}
			return engine.AppendInput{Messages: json.RawMessage(fmt.Sprintf(`[{"role":"tool","content":"tick %d"}]`, ticks)),
				SetState: json.RawMessage(fmt.Sprintf(`{"ticks":%d}`, ticks))}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "12 ticks", func() bool { mu.Lock(); defer mu.Unlock(); return ticks >= 12 })
	if err := iv.Close(); err != nil {
		t.Fatal(err)
	}
	if iv.Written() != 5 {
		t.Fatalf("%d checkpoints written for 5 ticks with a change", iv.Written())
	}
	head := e.head("iv-append")
	want := `[{"role":"user","content":"start"},{"role":"tool","content":"tick 1"},{"role":"tool","content":"tick 3"},` +
		`{"role":"tool","content":"tick 5"},{"role":"tool","content":"tick 7"},{"role":"tool","content":"tick 9"}]`
	if !sameJSON(head.Messages, []byte(want)) || !sameJSON(head.State, []byte(`{"ticks":9}`)) || head.Step != 6 ||
		head.Trigger != engine.TriggerInterval {
		t.Fatalf("head after the interval appends: step %d %s %s %s", head.Step, head.Trigger, head.Messages, head.State)
	}
	if _, err := e.eng.StartInterval(e.ctx, engine.IntervalOptions{ThreadID: "iv-append", Every: time.Second,
		Capture:       func(context.Context) (engine.SnapshotInput, error) { return engine.SnapshotInput{}, nil },
		CaptureChange: func(context.Context) (engine.AppendInput, error) { return engine.AppendInput{}, nil }}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("both Capture and CaptureChange: %v, want ErrInvalidInput", err)
	}
}

// testRunEndAcrossARewind: a delta run whose rows are not the ones just
// before its last delta (a rewind in the middle left another line's rows
// between them) still ends in a delta on the run's anchor, written by
// Append or by a whole Snapshot, and reads back whole.
func testRunEndAcrossARewind(t *testing.T, e *env) {
	const run = 10
	eng := e.open(engine.Config{DeltaRun: run, DeltaMinBytes: -1})
	for _, appends := range []bool{true, false} {
		thread := fmt.Sprintf("run-end-rewind-%v", appends)
		var msgs []string
		state := map[string]int{}
		write := func() uuid.UUID {
			t.Helper()
			i := len(msgs)
			msg := fmt.Sprintf(`{"role":"user","content":"turn %d"}`, i)
			key := fmt.Sprintf("k%d", i%3)
			msgs, state[key] = append(msgs, msg), i
			if i == 0 || !appends {
				st, _ := json.Marshal(state)
				res, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: thread,
					Messages: json.RawMessage("[" + joinStrings(msgs) + "]"), State: st})
				if err != nil {
					t.Fatal(err)
				}
				return res.ID
			}
			res, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: thread, Messages: json.RawMessage("[" + msg + "]"),
				SetState: json.RawMessage(fmt.Sprintf(`{%q:%d}`, key, i))})
			if err != nil {
				t.Fatal(err)
			}
			return res.ID
		}
		anchor := write()
		var line []uuid.UUID
		for range 3 {
			line = append(line, write())
		}
		write() // two rows of a line the rewind leaves
		write()
		if _, err := eng.Rewind(e.ctx, line[2]); err != nil {
			t.Fatal(err)
		}
		msgs = msgs[:4]
		state = map[string]int{"k0": 3, "k1": 1, "k2": 2}
		for range run - 1 - len(line) {
			line = append(line, write())
		}
		end := write()
		export, _ := exportWith(t, e.ctx, eng, thread, engine.ExportOptions{})
		var got *engine.ExportCheckpoint
		for _, l := range bytes.Split(bytes.TrimSpace(export), []byte("\n")) {
			var c engine.ExportCheckpoint
			if err := json.Unmarshal(l, &c); err != nil {
				t.Fatal(err)
			}
			if c.Kind == "checkpoint" && c.ID == end {
				got = &c
			}
		}
		if got == nil {
			t.Fatalf("append %v: the write at the run's end is not in the export", appends)
		}
		if got.Storage != engine.StorageDelta || got.BaseID == nil || *got.BaseID != anchor || got.DeltaRun != 0 || got.DeltaDepth != 1 {
			t.Fatalf("append %v: the write at the run's end is stored %q on %v, run %d, depth %d; want a delta on the anchor %s, run 0, depth 1",
				appends, got.Storage, got.BaseID, got.DeltaRun, got.DeltaDepth, anchor)
		}
		c, err := eng.Get(e.ctx, end)
		if err != nil {
			t.Fatal(err)
		}
		if want := "[" + joinStrings(msgs) + "]"; !sameJSON(c.Messages, json.RawMessage(want)) {
			t.Fatalf("append %v: the write at the run's end reads %s, want %s", appends, c.Messages, want)
		}
	}
}
