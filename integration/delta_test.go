package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// histContent is what a checkpoint should read back as: the model the random
// histories below are checked against.
type histContent struct {
	Msgs  []any          `json:"m"`
	State map[string]any `json:"s"`
	Tools map[string]any `json:"t"`
}

func (c histContent) clone() histContent {
	b, _ := json.Marshal(c)
	var out histContent
	_ = json.Unmarshal(b, &out)
	if out.Msgs == nil {
		out.Msgs = []any{}
	}
	if out.State == nil {
		out.State = map[string]any{}
	}
	if out.Tools == nil {
		out.Tools = map[string]any{}
	}
	return out
}

// storeMode is one way of storing the same history.
type storeMode struct {
	name   string
	eng    *engine.Engine
	thread string
}

// written is one checkpoint of the model, written once per mode.
type written struct {
	ids     []uuid.UUID // per mode
	threads []string    // per mode
	want    histContent
}

func randText(r *rand.Rand) string {
	pieces := []string{"hello", "wörld", "\x00", "\x01", "\\", "\"", "🙂", " ", "tool", "[", "}", "\x010"}
	var b []byte
	for range 1 + r.IntN(6) {
		b = append(b, pieces[r.IntN(len(pieces))]...)
	}
	return string(b)
}

func randValue(r *rand.Rand) any {
	switch r.IntN(5) {
	case 0:
		return float64(r.IntN(1000))
	case 1:
		return randText(r)
	case 2:
		return map[string]any{"nested": randText(r), "n": float64(r.IntN(9))}
	case 3:
		return []any{randText(r), nil, true}
	}
	return nil
}

func randMessage(r *rand.Rand) any {
	roles := []string{"user", "assistant", "tool"}
	return map[string]any{"role": roles[r.IntN(3)], "content": randText(r)}
}

func anyKey(r *rand.Rand, m map[string]any) (string, bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "", false
	}
	slices.Sort(keys)
	return keys[r.IntN(len(keys))], true
}

// TestDeltaHistoriesReadBackLikeFull writes random histories (appends,
// edits, dropped messages, state and tool result keys set and removed,
// rewinds, truncating rewinds, branches, deletes, NUL characters, the same
// JSON with other spacing) three ways: whole snapshots, deltas however
// small, and deltas with runs of at most 3 (DeltaRun 4), which makes
// anchors and full snapshots often; each also through checkpoint_put alone
// (SingleStatement). Every checkpoint must read back as the model says, and
// byte for byte the same in every mode, and each path must store the same
// rows as checkpoint_put.
func TestDeltaHistoriesReadBackLikeFull(t *testing.T) {
	b := setup(t)
	ctx := b.ctx
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 42))
		modes := []*storeMode{
			{name: "full", eng: engine.New(b.db.Pool, engine.Config{FullSnapshots: true})},
			{name: "delta", eng: engine.New(b.db.Pool, deltas)},
			{name: "k4", eng: engine.New(b.db.Pool, engine.Config{DeltaRun: 4, DeltaMinBytes: -1})},
			// The same through pgcheckpoint.checkpoint_put alone: the
			// pipelined path must store exactly what it stores.
			{name: "delta-1st", eng: engine.New(b.db.Pool, engine.Config{SingleStatement: true, DeltaMinBytes: -1})},
			{name: "k4-1st", eng: engine.New(b.db.Pool, engine.Config{DeltaRun: 4, SingleStatement: true, DeltaMinBytes: -1})},
			{name: "full-1st", eng: engine.New(b.db.Pool, engine.Config{FullSnapshots: true, SingleStatement: true})},
		}
		for _, m := range modes {
			m.thread = fmt.Sprintf("prop-%d-%s", seed, m.name)
		}
		var hist []*written
		cur := histContent{}.clone()
		alive := func() []*written {
			var out []*written
			for _, w := range hist {
				if w.ids != nil {
					out = append(out, w)
				}
			}
			return out
		}
		for op := range 70 {
			indent := false
			switch k := r.IntN(100); {
			case k < 35:
				for range 1 + r.IntN(3) {
					cur.Msgs = append(cur.Msgs, randMessage(r))
				}
			case k < 45:
				cur.State[fmt.Sprintf("s%d", r.IntN(6))] = randValue(r)
			case k < 50:
				if key, ok := anyKey(r, cur.State); ok {
					delete(cur.State, key)
				}
			case k < 56:
				cur.Tools[fmt.Sprintf("t%d", r.IntN(4))] = randValue(r)
			case k < 59:
				if key, ok := anyKey(r, cur.Tools); ok {
					delete(cur.Tools, key)
				}
			case k < 63:
				if n := len(cur.Msgs); n > 0 {
					cur.Msgs[r.IntN(n)] = randMessage(r)
				}
			case k < 66:
				if n := len(cur.Msgs); n > 0 {
					i := r.IntN(n)
					cur.Msgs = append(cur.Msgs[:i], cur.Msgs[i+1:]...)
				}
			case k < 69:
				indent = true
			case k < 78:
				// Rewind (sometimes truncating) to an earlier checkpoint;
				// the next write builds on it.
				live := alive()
				if len(live) == 0 {
					continue
				}
				w := live[r.IntN(len(live))]
				truncate := r.IntN(3) == 0
				for i, m := range modes {
					var err error
					if truncate {
						_, err = m.eng.RewindAndTruncate(ctx, w.ids[i])
					} else {
						_, err = m.eng.Rewind(ctx, w.ids[i])
					}
					if err != nil {
						t.Fatalf("seed %d op %d: %s: rewind: %v", seed, op, m.name, err)
					}
					m.thread = w.threads[i]
				}
				cur = w.want.clone()
				if truncate {
					forgetDeleted(t, ctx, modes, hist)
				}
				continue
			case k < 82:
				live := alive()
				if len(live) == 0 {
					continue
				}
				w := live[r.IntN(len(live))]
				nw := &written{want: w.want.clone()}
				for i, m := range modes {
					res, err := m.eng.Branch(ctx, w.ids[i], fmt.Sprintf("b%d", op))
					if err != nil {
						t.Fatalf("seed %d op %d: %s: branch: %v", seed, op, m.name, err)
					}
					m.thread = res.ThreadID
					nw.ids = append(nw.ids, res.CheckpointID)
					nw.threads = append(nw.threads, res.ThreadID)
				}
				hist = append(hist, nw)
				cur = nw.want.clone()
				continue
			case k < 85:
				// Delete the old part of the current thread.
				step := int64(1 + r.IntN(op+1))
				for _, m := range modes {
					if _, err := m.eng.DeleteBefore(ctx, m.thread, step); err != nil {
						t.Fatalf("seed %d op %d: %s: delete before: %v", seed, op, m.name, err)
					}
				}
				forgetDeleted(t, ctx, modes, hist)
				continue
			}
			msgs, _ := json.Marshal(cur.Msgs)
			state, _ := json.Marshal(cur.State)
			tools, _ := json.Marshal(cur.Tools)
			if indent {
				msgs, _ = json.MarshalIndent(cur.Msgs, "", "  ")
				state, _ = json.MarshalIndent(cur.State, " ", "\t")
			}
			nw := &written{want: cur.clone()}
			for _, m := range modes {
				res, err := m.eng.Snapshot(ctx, engine.SnapshotInput{
					ThreadID: m.thread, Messages: msgs, State: state, ToolResults: tools,
				})
				if err != nil {
					t.Fatalf("seed %d op %d: %s: snapshot: %v", seed, op, m.name, err)
				}
				nw.ids = append(nw.ids, res.ID)
				nw.threads = append(nw.threads, m.thread)
			}
			hist = append(hist, nw)
		}

		for _, w := range alive() {
			var first *engine.Checkpoint
			for i, m := range modes {
				got, err := m.eng.Get(ctx, w.ids[i])
				if err != nil {
					t.Fatalf("seed %d: %s: get %s: %v", seed, m.name, w.ids[i], err)
				}
				want := w.want.clone()
				wm, _ := json.Marshal(want.Msgs)
				ws, _ := json.Marshal(want.State)
				wt, _ := json.Marshal(want.Tools)
				jsonEqual(t, m.name+" messages", got.Messages, wm)
				jsonEqual(t, m.name+" state", got.State, ws)
				jsonEqual(t, m.name+" tool results", got.ToolResults, wt)
				if first == nil {
					first = got
					continue
				}
				if !bytes.Equal(got.Messages, first.Messages) || !bytes.Equal(got.State, first.State) ||
					!bytes.Equal(got.ToolResults, first.ToolResults) {
					t.Fatalf("seed %d: %s reads %s otherwise than full mode", seed, m.name, w.ids[i])
				}
			}
		}
		// Both paths store the same rows: same columns, and ids that name
		// the same checkpoints of the model.
		for _, pair := range [][2]int{{1, 3}, {2, 4}, {0, 5}} {
			b.sameRows(t, hist, pair[0], pair[1])
		}
	}

	b.checkDeltaBases(t)
	// The modes really store differently.
	var fullDeltas, deltas, k4Anchors, k4Run, k4Depth int
	err := b.db.Pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE thread_id LIKE 'prop-%-full%' AND format = 'delta'),
		count(*) FILTER (WHERE thread_id LIKE 'prop-%-delta%' AND format = 'delta'),
		count(*) FILTER (WHERE thread_id LIKE 'prop-%-k4%' AND format = 'delta' AND base_checkpoint_id <> parent_checkpoint_id),
		coalesce(max(delta_run) FILTER (WHERE thread_id LIKE 'prop-%-k4%'), 0),
		coalesce(max(delta_depth) FILTER (WHERE thread_id LIKE 'prop-%-k4%'), 0)
		FROM pgcheckpoint.checkpoints`).Scan(&fullDeltas, &deltas, &k4Anchors, &k4Run, &k4Depth)
	if err != nil {
		t.Fatal(err)
	}
	if fullDeltas != 0 || deltas < 50 || k4Anchors == 0 || k4Run > 3 || k4Depth > 6 {
		t.Fatalf("full mode stored %d deltas (want 0); delta mode %d (want many); with DeltaRun 4, %d anchors (want some), "+
			"runs up to %d (want <= 3), chains up to %d (want <= 6)", fullDeltas, deltas, k4Anchors, k4Run, k4Depth)
	}
	t.Logf("delta mode stored %d checkpoints as deltas", deltas)
}

// A head written without digests or a message count (by Import, or by hand
// like the retention benchmark's bulk load) is no base: the next Snapshot
// stores its checkpoint whole, on either path, and the one after is a delta.
func TestSnapshotOnAHeadWithoutDigests(t *testing.T) {
	b := setup(t)
	for _, cfg := range []engine.Config{deltas, {SingleStatement: true, DeltaMinBytes: -1}} {
		thread := fmt.Sprintf("bare-%v", cfg.SingleStatement)
		if _, err := b.db.Pool.Exec(b.ctx, `WITH t AS (INSERT INTO pgcheckpoint.threads (thread_id) VALUES ($1))
			INSERT INTO pgcheckpoint.checkpoints (thread_id, seq, checkpoint_id, step, messages, state)
			VALUES ($1, 1, pgcheckpoint.uuid_v7(), 1, '[{"role":"user","content":"by hand"}]', '{"a":1}')`,
			thread); err != nil {
			t.Fatal(err)
		}
		eng := engine.New(b.db.Pool, cfg)
		msgs := `[{"role":"user","content":"by hand"},{"role":"assistant","content":"from Go"}]`
		var ids []uuid.UUID
		for i, m := range []string{msgs, msgs[:len(msgs)-1] + `,{"role":"user","content":"more"}]`} {
			res, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(m),
				State: json.RawMessage(`{"a":2}`)})
			if err != nil {
				t.Fatalf("%s: snapshot %d: %v", thread, i, err)
			}
			got, err := eng.Get(b.ctx, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, thread+" messages", got.Messages, []byte(m))
			ids = append(ids, res.ID)
		}
		if f := b.storedFormat(t, ids[0]); f != "full" {
			t.Errorf("%s: the write on a head without digests stored as %q, want full", thread, f)
		}
		if f := b.storedFormat(t, ids[1]); f != "delta" {
			t.Errorf("%s: the write after it stored as %q, want delta", thread, f)
		}
	}
}

// sameRows checks that modes a and b stored every live checkpoint of hist
// alike: every column but the ids, times and thread, and parent and base
// ids that are the same checkpoints of the model.
func (b *bundle) sameRows(t *testing.T, hist []*written, a, c int) {
	t.Helper()
	index := map[uuid.UUID]int{}
	for i, w := range hist {
		if w.ids != nil {
			index[w.ids[a]], index[w.ids[c]] = i, i
		}
	}
	row := func(id uuid.UUID) (string, int, int) {
		var cols string
		var parent, base uuid.NullUUID
		// A branch's summary names its source: ids are compared below.
		err := b.db.Pool.QueryRow(b.ctx, `SELECT row(seq, step, trigger, tags,
			regexp_replace(summary, '[0-9a-f-]{36}', 'ID'), metadata, format, delta_run,
			delta_depth, messages, state, tool_results, state_removed, tool_results_removed, messages_count,
			messages_digest, state_digests, tool_results_digests, next_node, size_bytes)::text,
			parent_checkpoint_id, base_checkpoint_id
			FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, id).Scan(&cols, &parent, &base)
		if err != nil {
			t.Fatalf("row %s: %v", id, err)
		}
		pos := func(id uuid.NullUUID) int {
			if !id.Valid {
				return -1
			}
			if i, ok := index[id.UUID]; ok {
				return i
			}
			return -2 // in another thread's history, as a branch's parent is
		}
		return cols, pos(parent), pos(base)
	}
	for i, w := range hist {
		if w.ids == nil {
			continue
		}
		ra, pa, ba := row(w.ids[a])
		rc, pc, bc := row(w.ids[c])
		if ra != rc || pa != pc || ba != bc {
			t.Fatalf("checkpoint %d stored otherwise by the two paths:\n%s (parent %d, base %d)\n%s (parent %d, base %d)",
				i, ra, pa, ba, rc, pc, bc)
		}
	}
}

// forgetDeleted drops from the model the checkpoints a delete removed, after
// checking that every mode deleted the same ones.
func forgetDeleted(t *testing.T, ctx context.Context, modes []*storeMode, hist []*written) {
	t.Helper()
	for _, w := range hist {
		if w.ids == nil {
			continue
		}
		gone := 0
		for i, m := range modes {
			if _, err := m.eng.Get(ctx, w.ids[i]); errors.Is(err, engine.ErrNotFound) {
				gone++
			} else if err != nil {
				t.Fatalf("%s: get %s after a delete: %v", m.name, w.ids[i], err)
			}
		}
		switch gone {
		case 0:
		case len(modes):
			w.ids = nil
		default:
			t.Fatalf("checkpoint %v deleted in %d of %d modes", w.ids, gone, len(modes))
		}
	}
}

// storedFormat returns how a checkpoint is stored.
func (b *bundle) storedFormat(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var f string
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT format FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, id).Scan(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDeltaFromPlainSQL: a DBA's psql session writes with checkpoint_put's
// defaults (no digests from a client) and reads with materialize(); it gets
// deltas too, and an engine writing on the same thread stays exact.
func TestDeltaFromPlainSQL(t *testing.T) {
	b := setup(t)
	put := `SELECT checkpoint_id FROM pgcheckpoint.checkpoint_put('sql', '', pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', '', '{}',
		$1::jsonb, $2::jsonb, '{}', '', 0)`
	var ids []uuid.UUID
	msgs := []string{}
	for i := range 5 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"message %d %s"}`, i, bytes.Repeat([]byte("x"), 200)))
		var id uuid.UUID
		if err := b.db.Pool.QueryRow(b.ctx, put, "["+join(msgs)+"]", fmt.Sprintf(`{"turn":%d,"fixed":"same"}`, i)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if f := b.storedFormat(t, ids[4]); f != "delta" {
		t.Fatalf("fifth plain-SQL write stored as %q, want delta", f)
	}
	var m, s json.RawMessage
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT messages, state FROM pgcheckpoint.materialize($1)`, ids[4]).Scan(&m, &s); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "materialized messages", m, []byte("["+join(msgs)+"]"))
	jsonEqual(t, "materialized state", s, []byte(`{"turn":4,"fixed":"same"}`))
	var rows int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.materialize($1)`, engine.NewCheckpointID()).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("materialize(unknown id): %d rows, %v; want 0 rows", rows, err)
	}

	// The engine digests messages itself: its first write after SQL ones is
	// stored whole (the digests differ), and reads back exactly.
	msgs = append(msgs, `{"role":"assistant","content":"from Go"}`)
	res := b.snap(t, engine.SnapshotInput{ThreadID: "sql", Messages: json.RawMessage("[" + join(msgs) + "]"), State: json.RawMessage(`{"turn":5}`)})
	if f := b.storedFormat(t, res.ID); f != "full" {
		t.Fatalf("engine write after SQL writes stored as %q, want full", f)
	}
	msgs = append(msgs, `{"role":"user","content":"again"}`)
	res = b.snap(t, engine.SnapshotInput{ThreadID: "sql", Messages: json.RawMessage("[" + join(msgs) + "]"), State: json.RawMessage(`{"turn":6}`)})
	if f := b.storedFormat(t, res.ID); f != "delta" {
		t.Fatalf("second engine write stored as %q, want delta", f)
	}
	got, err := b.eng.Get(b.ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "messages", got.Messages, []byte("["+join(msgs)+"]"))
	jsonEqual(t, "state", got.State, []byte(`{"turn":6}`))
}

func join(ss []string) string { return string(bytes.Join(toBytes(ss), []byte(","))) }

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// TestDeltaSizeLimitIsOnTheWholeSnapshot: a snapshot whose delta is small
// but whose whole content is over the limit is refused, and nothing is
// written.
func TestDeltaSizeLimitIsOnTheWholeSnapshot(t *testing.T) {
	b := setup(t)
	eng := engine.New(b.db.Pool, engine.Config{MaxSnapshotBytes: 4000, DeltaMinBytes: -1})
	big := fmt.Sprintf(`{"role":"user","content":"%s"}`, bytes.Repeat([]byte("y"), 3000))
	if _, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "lim", Messages: json.RawMessage("[" + big + "]")}); err != nil {
		t.Fatal(err)
	}
	before := b.count(t)
	small := `{"role":"assistant","content":"ok"}`
	_, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "lim", Messages: json.RawMessage("[" + big + "," + big + "," + small + "]")})
	if !errors.Is(err, engine.ErrSnapshotTooLarge) || !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("over-limit snapshot: %v, want ErrSnapshotTooLarge", err)
	}
	if after := b.count(t); after != before {
		t.Fatalf("rows %v after a refused snapshot, want %v", after, before)
	}
}

// TestDeltaKeepsReadsExactAcrossTimeTravel covers what copies or deletes
// checkpoints: copy_thread keeps deltas readable, merge and branch copy
// whole content, and Prune (keep latest) rebases the head it keeps.
func TestDeltaKeepsReadsExactAcrossTimeTravel(t *testing.T) {
	b := setup(t)
	var msgs []string
	var ids []uuid.UUID
	for i := range 8 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"m%d %s"}`, i, bytes.Repeat([]byte("z"), 100)))
		ids = append(ids, b.snap(t, engine.SnapshotInput{ThreadID: "tt", Messages: json.RawMessage("[" + join(msgs) + "]"), State: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}).ID)
	}
	want := func(n int) []byte { return []byte("[" + join(msgs[:n]) + "]") }
	if f := b.storedFormat(t, ids[7]); f != "delta" {
		t.Fatalf("stored as %q, want delta", f)
	}
	check := func(id uuid.UUID, n int) {
		t.Helper()
		got, err := b.eng.Get(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		jsonEqual(t, "messages", got.Messages, want(n))
	}
	if _, err := b.eng.CopyThread(b.ctx, "tt", "tt-copy"); err != nil {
		t.Fatal(err)
	}
	copyHead := b.head(t, "tt-copy")
	check(copyHead.ID, 8)
	br, err := b.eng.Branch(b.ctx, ids[5], "side")
	if err != nil {
		t.Fatal(err)
	}
	if f := b.storedFormat(t, br.CheckpointID); f != "full" {
		t.Fatalf("branch's first checkpoint stored as %q, want full", f)
	}
	check(br.CheckpointID, 6)
	mr, err := b.eng.MergeBranch(b.ctx, br.ThreadID, "tt")
	if err != nil {
		t.Fatal(err)
	}
	check(mr.CheckpointID, 6)
	if _, err := b.eng.Prune(b.ctx, []string{"tt-copy"}, engine.PruneKeepLatest); err != nil {
		t.Fatal(err)
	}
	if f := b.storedFormat(t, copyHead.ID); f != "full" {
		t.Fatalf("kept head stored as %q after prune, want full", f)
	}
	check(copyHead.ID, 8)
}

// TestSmallSnapshotsAreStoredWhole: a snapshot under Config.DeltaMinBytes
// is stored whole and without digests, on either path; the first one at
// the minimum is stored whole with digests (its parent has none to compare
// with), and the next is a delta. The default minimum is
// DefaultDeltaMinBytes. Every checkpoint reads back as written.
func TestSmallSnapshotsAreStoredWhole(t *testing.T) {
	b := setup(t)
	// state returns a state of exactly size bytes whose "v" key is v.
	state := func(size int, v string) json.RawMessage {
		s := fmt.Sprintf(`{"v":%q,"pad":"`, v)
		return json.RawMessage(s + strings.Repeat("x", size-len(s)-2) + `"}`)
	}
	type stored struct {
		format  string
		digests bool
	}
	check := func(eng *engine.Engine, thread string, sizes []int, want []stored) {
		t.Helper()
		for i, size := range sizes {
			in := engine.SnapshotInput{ThreadID: thread, State: state(size, fmt.Sprint(i))}
			if len(in.State) != size {
				t.Fatalf("state of %d bytes, want %d", len(in.State), size)
			}
			res, err := eng.Snapshot(b.ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			var got stored
			if err := b.db.Pool.QueryRow(b.ctx, `SELECT format, state_digests IS NOT NULL FROM pgcheckpoint.checkpoints
				WHERE checkpoint_id = $1`, res.ID).Scan(&got.format, &got.digests); err != nil {
				t.Fatal(err)
			}
			if got != want[i] {
				t.Errorf("%s, write %d (%d bytes): stored %+v, want %+v", thread, i, size, got, want[i])
			}
			c, err := eng.Get(b.ctx, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, "state", c.State, in.State)
		}
	}
	whole, wholeDigests, delta := stored{"full", false}, stored{"full", true}, stored{"delta", true}
	for _, single := range []bool{false, true} {
		eng := engine.New(b.db.Pool, engine.Config{DeltaMinBytes: 1000, SingleStatement: single})
		check(eng, fmt.Sprintf("min-%v", single), []int{999, 999, 1000, 1000, 999, 5000, 5000},
			[]stored{whole, whole, wholeDigests, delta, whole, wholeDigests, delta})
	}
	m := engine.DefaultDeltaMinBytes
	check(engine.New(b.db.Pool, engine.Config{}), "default", []int{m - 1, m, m},
		[]stored{whole, wholeDigests, delta})
}
