package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// written is a checkpoint's content as the test wrote it.
type written struct {
	messages, state, tools string
}

func decodeAll(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func sameContent(t *testing.T, cp *engine.Checkpoint, w written) bool {
	t.Helper()
	return reflect.DeepEqual(decodeAll(t, string(cp.Messages)), decodeAll(t, w.messages)) &&
		reflect.DeepEqual(decodeAll(t, string(cp.State)), decodeAll(t, w.state)) &&
		reflect.DeepEqual(decodeAll(t, string(cp.ToolResults)), decodeAll(t, w.tools))
}

// object writes keys and values (already JSON) as an object, with some
// spacing, in the order given.
func object(keys []string, vals map[string]string) string {
	var b strings.Builder
	b.WriteString("{ ")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %s", k, vals[k])
	}
	b.WriteString(" }")
	return b.String()
}

// TestDeltaRandomHistories writes the same random histories (appends,
// edits, removed keys, rewinds, explicit parents) to stores written whole
// (DeltaRun 1) and as deltas (4, 50), and reads every checkpoint back, then
// again after retention deleted bases of kept deltas.
func TestDeltaRandomHistories(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			runs := []int{1, 4, 50}
			engs := make([]*engine.Engine, len(runs))
			for i, r := range runs {
				engs[i] = setup(t, engine.Config{DeltaRun: r, DeltaMinBytes: -1}).eng
			}
			rng := rand.New(rand.NewPCG(seed, 99))
			want := map[uuid.UUID]written{}
			var ids []uuid.UUID
			var messages []string
			stateKeys, state := []string{}, map[string]string{}
			toolKeys, tools := []string{}, map[string]string{}
			for step := range 200 {
				var parent uuid.UUID
				switch op := rng.IntN(20); {
				case op < 2 && len(ids) > 0:
					// Rewind, or name an older parent: the next write
					// starts a new line from there.
					target := ids[rng.IntN(len(ids))]
					w := want[target]
					var raw []json.RawMessage
					json.Unmarshal([]byte(w.messages), &raw)
					messages = messages[:0]
					for _, m := range raw {
						messages = append(messages, string(m))
					}
					stateKeys, state = splitForTest(w.state)
					toolKeys, tools = splitForTest(w.tools)
					if op == 0 {
						for _, e := range engs {
							if _, err := e.Rewind(ctx, target); err != nil {
								t.Fatal(err)
							}
						}
					} else {
						parent = target
					}
				case op < 4 && len(messages) > 0:
					messages[rng.IntN(len(messages))] = fmt.Sprintf(`{"role":"assistant","content":"edited %d"}`, step)
				case op < 6 && len(stateKeys) > 0:
					k := stateKeys[rng.IntN(len(stateKeys))]
					delete(state, k)
					stateKeys = remove(stateKeys, k)
				case op < 8:
					k := fmt.Sprintf("tool%d", rng.IntN(5))
					if _, ok := tools[k]; !ok {
						toolKeys = append(toolKeys, k)
					}
					tools[k] = fmt.Sprintf(`{"ok":true,"out":"r%d \u0000"}`, step)
				}
				for range rng.IntN(3) {
					messages = append(messages, fmt.Sprintf(`{"role": "user", "content": "step %d %s"}`, step, strings.Repeat("x", rng.IntN(200))))
				}
				k := fmt.Sprintf("k%d", rng.IntN(8))
				if _, ok := state[k]; !ok {
					stateKeys = append(stateKeys, k)
				}
				state[k] = fmt.Sprintf(`[%d, {"v": "%s"}]`, step, strings.Repeat("s", rng.IntN(50)))
				w := written{"[" + strings.Join(messages, ", ") + "]", object(stateKeys, state), object(toolKeys, tools)}
				id := engine.NewCheckpointID()
				for _, e := range engs {
					_, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "p", ID: id, ParentID: parent,
						Messages: json.RawMessage(w.messages), State: json.RawMessage(w.state), ToolResults: json.RawMessage(w.tools)})
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
				}
				want[id] = w
				ids = append(ids, id)
			}
			check := func(when string) {
				for i, e := range engs {
					deltas := 0
					list, err := e.ListCheckpoints(ctx, "p", engine.ListOptions{Limit: engine.MaxListLimit})
					if err != nil {
						t.Fatal(err)
					}
					for _, c := range list {
						if c.Format == "delta" {
							deltas++
						}
						cp, err := e.Get(ctx, c.ID)
						if err != nil {
							t.Fatalf("%s, delta run %d: %v", when, runs[i], err)
						}
						if !sameContent(t, cp, want[c.ID]) {
							t.Fatalf("%s, delta run %d: checkpoint %s (step %d) reads\n%s\n%s\nwant\n%+v",
								when, runs[i], c.ID, c.Step, cp.Messages, cp.State, want[c.ID])
						}
						if c.Format == "full" && string(cp.Messages) != want[c.ID].messages && when == "written" {
							t.Fatalf("a whole checkpoint is not returned byte for byte: %s", cp.Messages)
						}
					}
					if runs[i] == 1 && deltas > 0 || runs[i] > 1 && deltas == 0 && when == "written" {
						t.Fatalf("%s, delta run %d: %d deltas", when, runs[i], deltas)
					}
				}
			}
			check("written")
			for _, e := range engs {
				if _, err := e.PruneThreads(ctx, engine.KeepMilestones(7), "p"); err != nil {
					t.Fatal(err)
				}
			}
			check("after retention")
		})
	}
}

func remove(ss []string, s string) []string {
	out := ss[:0]
	for _, x := range ss {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// splitForTest reads back an object the test wrote: its keys in order and
// their values as JSON text.
func splitForTest(obj string) ([]string, map[string]string) {
	var m map[string]json.RawMessage
	json.Unmarshal([]byte(obj), &m)
	keys := []string{}
	dec := json.NewDecoder(strings.NewReader(obj))
	dec.Token()
	for dec.More() {
		tok, _ := dec.Token()
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	vals := map[string]string{}
	for k, v := range m {
		vals[k] = string(v)
	}
	return keys, vals
}
