package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// TestWritePathsStoreRandomHistoriesAlike writes random histories
// (enginetest.RandomHistory: appends, edits, dropped messages, state and
// tool result keys set and removed, rewinds, truncating rewinds, branches,
// deletes, NUL characters, the same JSON with other spacing) three ways:
// whole snapshots, deltas however small, and deltas with runs of at most 3
// (DeltaRun 4), each through the pipelined statements and through
// checkpoint_put alone (SingleStatement). The conformance suite checks
// that every checkpoint reads back as written; here, every mode reads back
// the same bytes (jsonb's normal form), and the modes store differently,
// within their bounds. (Both paths apply the same SQL functions, see
// TestWriteRulesFromSQL.)
func TestWritePathsStoreRandomHistoriesAlike(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	modes := []struct {
		name   string
		cfg    engine.Config
		single bool
	}{
		{"full", engine.Config{FullSnapshots: true}, false},
		{"delta", deltas, false},
		{"k4", engine.Config{DeltaRun: 4, DeltaMinBytes: -1}, false},
		{"delta-1st", engine.Config{DeltaMinBytes: -1}, true},
		{"k4-1st", engine.Config{DeltaRun: 4, DeltaMinBytes: -1}, true},
		{"full-1st", engine.Config{FullSnapshots: true}, true},
	}
	seeds := enginetest.Rounds(8, 1) // the bound on deltas below is for 8
	for seed := range uint64(seeds) {
		var writers []enginetest.HistoryWriter
		for _, m := range modes {
			writers = append(writers, enginetest.HistoryWriter{Engine: engine.New(postgres.NewStore(b.db.Pool, postgres.Options{SingleStatement: m.single}), m.cfg), Thread: fmt.Sprintf("prop-%d-%s", seed, m.name)})
		}
		hist := enginetest.RandomHistory(t, ctx, writers, seed, 70)
		for _, h := range hist {
			var first *engine.Checkpoint
			for i, w := range writers {
				got, err := w.Engine.Get(ctx, h.IDs[i])
				if err != nil {
					t.Fatalf("seed %d: %s: get %s: %v", seed, modes[i].name, h.IDs[i], err)
				}
				if first == nil {
					first = got
					continue
				}
				if !bytes.Equal(got.Messages, first.Messages) || !bytes.Equal(got.State, first.State) ||
					!bytes.Equal(got.ToolResults, first.ToolResults) {
					t.Fatalf("seed %d: %s reads %s otherwise than full mode", seed, modes[i].name, h.IDs[i])
				}
			}
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
	if fullDeltas != 0 || deltas < 50*seeds/8 || k4Anchors == 0 || k4Run > 3 || k4Depth > 6 {
		t.Fatalf("full mode stored %d deltas (want 0); delta mode %d (want many); with DeltaRun 4, %d anchors (want some), "+
			"runs up to %d (want <= 3), chains up to %d (want <= 6)", fullDeltas, deltas, k4Anchors, k4Run, k4Depth)
	}
	t.Logf("delta mode stored %d checkpoints as deltas", deltas)
}

// A head written without digests or a message count (by Import, or by hand
// like the retention benchmark's bulk load) is no base: the next Snapshot
// stores its checkpoint whole, on either path, and the one after is a delta.
func TestSnapshotOnAHeadWithoutDigests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, single := range []bool{false, true} {
		thread := fmt.Sprintf("bare-%v", single)
		if _, err := b.db.Pool.Exec(b.ctx, `WITH t AS (INSERT INTO pgcheckpoint.threads (thread_id) VALUES ($1))
			INSERT INTO pgcheckpoint.checkpoints (thread_id, seq, checkpoint_id, step, messages, state)
			VALUES ($1, 1, pgcheckpoint.uuid_v7(), 1, '[{"role":"user","content":"by hand"}]', '{"a":1}')`,
			thread); err != nil {
			t.Fatal(err)
		}
		eng := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{SingleStatement: single}), deltas)
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
// defaults (no digests from a client) and reads with
// checkpoint_materialize(); it gets deltas too, and an engine writing on
// the same thread stays exact.
func TestDeltaFromPlainSQL(t *testing.T) {
	t.Parallel()
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
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT messages, state FROM pgcheckpoint.checkpoint_materialize($1)`, ids[4]).Scan(&m, &s); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "materialized messages", m, []byte("["+join(msgs)+"]"))
	jsonEqual(t, "materialized state", s, []byte(`{"turn":4,"fixed":"same"}`))
	var rows int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoint_materialize($1)`, engine.NewCheckpointID()).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("checkpoint_materialize(unknown id): %d rows, %v; want 0 rows", rows, err)
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

// TestDeltaStorageAcrossTimeTravel is the storage side of what copies or
// deletes checkpoints (the conformance suite checks their reads):
// thread_copy copies deltas as deltas, branch and merge copy whole
// content, and Prune (keep latest) rewrites the delta head it keeps whole.
func TestDeltaStorageAcrossTimeTravel(t *testing.T) {
	t.Parallel()
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
	if _, err := b.eng.PruneThreads(b.ctx, engine.KeepLatest(), "tt-copy"); err != nil {
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
	t.Parallel()
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
		eng := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{SingleStatement: single}), engine.Config{DeltaMinBytes: 1000})
		check(eng, fmt.Sprintf("min-%v", single), []int{999, 999, 1000, 1000, 999, 5000, 5000},
			[]stored{whole, whole, wholeDigests, delta, whole, wholeDigests, delta})
	}
	m := engine.DefaultDeltaMinBytes
	check(engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{}), "default", []int{m - 1, m, m},
		[]stored{whole, wholeDigests, delta})
}

// TestDigestsFromBeforeTheChainNeverMatch: a row written before migration
// 9 holds the old list digest (SHA-256 of the concatenated per-message
// digests). No chain value matches it, so the next Snapshot on it is
// stored whole, on either path, and the one after is a delta again; an
// Append on it (a delta from the change alone) reads back exactly too.
func TestDigestsFromBeforeTheChainNeverMatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, single := range []bool{false, true} {
		thread := fmt.Sprintf("old-digest-%v", single)
		eng := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{SingleStatement: single}), deltas)
		msgs := []string{`{"role":"user","content":"written before the chain"}`}
		snap := func() uuid.UUID {
			t.Helper()
			res, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage("[" + join(msgs) + "]"),
				State: json.RawMessage(fmt.Sprintf(`{"n":%d}`, len(msgs)))})
			if err != nil {
				t.Fatal(err)
			}
			got, err := eng.Get(b.ctx, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, thread+" messages", got.Messages, []byte("["+join(msgs)+"]"))
			return res.ID
		}
		oldDigest := func(id uuid.UUID) {
			t.Helper()
			sum := sha256.Sum256(jsontext.MessageDigests([]byte("[" + join(msgs) + "]")))
			if _, err := b.db.Pool.Exec(b.ctx, `UPDATE pgcheckpoint.checkpoints SET messages_digest = $2 WHERE checkpoint_id = $1`,
				id, sum[:]); err != nil {
				t.Fatal(err)
			}
		}
		oldDigest(snap())
		msgs = append(msgs, `{"role":"assistant","content":"after the migration"}`)
		if f := b.storedFormat(t, snap()); f != "full" {
			t.Fatalf("%s: a Snapshot on a row with the old digest stored as %q, want full", thread, f)
		}
		msgs = append(msgs, `{"role":"user","content":"again"}`)
		head := snap()
		if f := b.storedFormat(t, head); f != "delta" {
			t.Fatalf("%s: the Snapshot after it stored as %q, want delta", thread, f)
		}

		oldDigest(head)
		added := `{"role":"assistant","content":"appended"}`
		res, err := eng.Append(b.ctx, engine.AppendInput{ThreadID: thread, Messages: json.RawMessage("[" + added + "]"),
			SetState: json.RawMessage(`{"n":4}`)})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, added)
		got, err := eng.Get(b.ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		jsonEqual(t, thread+" appended messages", got.Messages, []byte("["+join(msgs)+"]"))
		jsonEqual(t, thread+" appended state", got.State, []byte(`{"n":4}`))
		msgs = append(msgs, `{"role":"user","content":"whole again"}`)
		if f := b.storedFormat(t, snap()); f != "full" {
			t.Fatalf("%s: a Snapshot on an append continuing the old digest stored as %q, want full", thread, f)
		}
		msgs = append(msgs, `{"role":"user","content":"and on"}`)
		if f := b.storedFormat(t, snap()); f != "delta" {
			t.Fatalf("%s: the Snapshot after it stored as %q, want delta", thread, f)
		}
	}
}

// An Append at the end of a delta run is stored from the run alone: a
// delta on the run's anchor made of the run's deltas and the change,
// reading nothing written before the anchor (which would cost the whole
// conversation: rebuilding it, and hashing every message again). Here the
// anchor is made unreadable (its format is neither full nor delta, so
// rebuilding it, or anything on it, is PC004): the append at the end of
// the run still succeeds, on the anchor, and once the mark is undone the
// thread reads back whole, with the run's state changes and removals.
func TestAppendAtTheEndOfARunReadsOnlyTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	eng := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{DeltaRun: 4, DeltaMinBytes: -1})
	// Write 5 is the anchor of the run 6, 7, 8, and write 9 ends it.
	changes := []struct{ set, remove string }{
		{`{"a":1,"b":1,"c":1}`, ""}, {`{"a":2}`, ""}, {`{"d":3}`, ""}, {`{"b":4}`, ""}, {`{"a":5}`, ""},
		{`{"e":6,"a":6}`, ""}, {`{"e":7}`, "c"}, {`{"f":8}`, "e"}, {`{"g":9}`, "d"},
	}
	setFormat := func(id uuid.UUID, format string) {
		t.Helper()
		if _, err := b.db.Pool.Exec(b.ctx, `UPDATE pgcheckpoint.checkpoints SET format = $2 WHERE checkpoint_id = $1`, id, format); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	var ids []uuid.UUID
	var anchorFormat string
	for i, c := range changes {
		all = append(all, fmt.Sprintf(`{"content":"message %d %s","role":"user"}`, i, strings.Repeat("z", 160)))
		var res engine.SnapshotResult
		var err error
		if i == 0 {
			res, err = eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(c.set),
				Messages: json.RawMessage("[" + all[0] + "]")})
		} else {
			if i == len(changes)-1 {
				// Make the anchor unreadable: its content, and what it
				// builds on, cannot be rebuilt (PC004).
				anchorFormat = b.storedFormat(t, ids[4])
				setFormat(ids[4], "damaged")
			}
			var remove []string
			if c.remove != "" {
				remove = []string{c.remove}
			}
			res, err = eng.Append(b.ctx, engine.AppendInput{ThreadID: "t", SetState: json.RawMessage(c.set), RemoveState: remove,
				Messages: json.RawMessage("[" + all[i] + "]")})
		}
		if err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
		ids = append(ids, res.ID)
	}
	setFormat(ids[4], anchorFormat)
	var format string
	var base *uuid.UUID
	var run int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT format, base_checkpoint_id, delta_run FROM pgcheckpoint.checkpoints
		WHERE checkpoint_id = $1`, ids[len(ids)-1]).Scan(&format, &base, &run); err != nil {
		t.Fatal(err)
	}
	if format != "delta" || base == nil || *base != ids[4] || run != 0 {
		t.Errorf("the append ending the run is stored %s on %v (run %d), want a delta on write 5 (run 0)", format, base, run)
	}
	head, err := eng.Latest(b.ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "the head's messages", head.Messages, []byte("["+strings.Join(all, ",")+"]"))
	jsonEqual(t, "the head's state", head.State, []byte(`{"a":6,"b":4,"f":8,"g":9}`))
}
