package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcheckpoint/pgcheckpoint/db"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// The text the engine reads (checkpoint_materialize_json, and checkpoint_rebuild_json, which it
// uses for deltas) is materialize's jsonb as jsonb sends it, byte for byte,
// for every checkpoint of random histories stored as deltas (runs of every
// length, anchors, edits stored whole, NUL characters) and of a thread whose
// message lists are empty at the base, in the middle and at the end.
// checkpoint_rebuild_json is checked on full checkpoints too (a chain of one).
func TestMaterializeJSONIsMaterializeAsText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for seed := range uint64(4) {
		enginetest.RandomHistory(t, b.ctx, []enginetest.HistoryWriter{
			{Engine: b.eng, Thread: fmt.Sprintf("text-%d", seed)},
			{Engine: engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{DeltaRun: 3, DeltaMinBytes: -1}), Thread: fmt.Sprintf("text-k3-%d", seed)},
		}, seed, 60)
	}
	// Empty lists: a base without messages, deltas that add none, a
	// checkpoint that drops them all (stored whole) and a delta on it.
	if _, err := b.db.Pool.Exec(b.ctx, `DO $$
		DECLARE m jsonb := '[]'; s jsonb;
		BEGIN
			FOR i IN 1..12 LOOP
				IF i IN (2, 3, 5, 8, 9) THEN
					m := m || jsonb_build_array(jsonb_build_object('n', i, 'text', 'h"é\llo ' || i));
				END IF;
				IF i = 11 THEN m := '[]'; END IF;
				s := jsonb_build_object('big', repeat('x', 3000), 'i', i);
				IF i = 7 THEN s := s - 'i'; END IF;
				PERFORM pgcheckpoint.checkpoint_put('empties', '', pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', '', '{}',
					m, s, jsonb_build_object('t', i % 2), '', 0);
			END LOOP;
		END $$`); err != nil {
		t.Fatal(err)
	}
	var checked, deltas, emptyParts, wrong int
	var bad string
	err := b.db.Pool.QueryRow(b.ctx, `
		SELECT count(*), count(*) FILTER (WHERE c.format = 'delta'),
		       count(*) FILTER (WHERE c.format = 'delta' AND jsonb_array_length(c.messages) = 0),
		       count(*) FILTER (WHERE NOT ok), coalesce(min(c.checkpoint_id::text) FILTER (WHERE NOT ok), '')
		FROM pgcheckpoint.checkpoints c
		CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize(c.checkpoint_id) m
		CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize_json(c.checkpoint_id) j
		CROSS JOIN LATERAL pgcheckpoint.checkpoint_rebuild_json(c.checkpoint_id) r(content)
		CROSS JOIN LATERAL (SELECT
			j.messages = substr(jsonb_send(m.messages), 2) AND j.state = substr(jsonb_send(m.state), 2)
			AND j.tool_results = substr(jsonb_send(m.tool_results), 2)
			AND r.content = ARRAY[j.messages, j.state, j.tool_results] AS ok) o`).
		Scan(&checked, &deltas, &emptyParts, &wrong, &bad)
	if err != nil {
		t.Fatal(err)
	}
	if wrong > 0 {
		t.Fatalf("%d of %d checkpoints read as other text than materialize's jsonb, e.g. %s", wrong, checked, bad)
	}
	if deltas < 100 || emptyParts < 3 {
		t.Fatalf("%d checkpoints, %d deltas, %d adding no message: the test needs many deltas and some empty ones", checked, deltas, emptyParts)
	}

	// delta_chain: oldest first, a full snapshot first, the checkpoint last,
	// at most delta_depth links (fewer once a base was rewritten whole).
	var badChains int
	if err := b.db.Pool.QueryRow(b.ctx, `
		SELECT count(*) FROM pgcheckpoint.checkpoints c
		CROSS JOIN LATERAL (SELECT array_agg(ch.checkpoint_id) AS ids, array_agg(ch.format) AS formats,
		                           array_agg(ch.depth) AS depths FROM pgcheckpoint.delta_chain(c.checkpoint_id) ch) x
		WHERE x.formats[1] <> 'full' OR x.ids[cardinality(x.ids)] <> c.checkpoint_id
		   OR x.depths <> ARRAY(SELECT generate_series(cardinality(x.ids) - 1, 0, -1))
		   OR cardinality(x.ids) > c.delta_depth + 1`).Scan(&badChains); err != nil {
		t.Fatal(err)
	}
	if badChains > 0 {
		t.Fatalf("%d checkpoints have a delta_chain that is not full-first, itself last, one row per link", badChains)
	}
}

// A delta whose chain does not reach a full snapshot (its base deleted by
// hand, in another thread, or a cycle of bases) reads as error PC004, from
// the engine and from every SQL reader, never as other content and never
// as an endless recursion.
func TestDamagedChainReadsAsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.snap(t, engine.SnapshotInput{ThreadID: "other", Messages: json.RawMessage(`[{"n":0}]`)})
	var ids []uuid.UUID
	for i := range 4 {
		msgs := make([]string, i+1)
		for j := range msgs {
			msgs[j] = fmt.Sprintf(`{"n":%d}`, j)
		}
		ids = append(ids, b.snap(t, engine.SnapshotInput{ThreadID: "damaged", Messages: json.RawMessage("[" + strings.Join(msgs, ",") + "]")}).ID)
	}
	for _, id := range ids[1:] {
		if f := b.storedFormat(t, id); f != "delta" {
			t.Fatalf("%s is stored %s; the test needs deltas", id, f)
		}
	}
	damages := []struct{ name, base string }{
		{"missing base", `gen_random_uuid()`},
		{"base in another thread", `(SELECT checkpoint_id FROM pgcheckpoint.checkpoints WHERE thread_id = 'other')`},
		{"base is itself", `checkpoint_id`},
		{"base written later", `(SELECT checkpoint_id FROM pgcheckpoint.checkpoints WHERE thread_id = 'damaged' AND seq = 4)`},
	}
	for _, d := range damages {
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A recursion that never ends fails the test instead of hanging it.
		if _, err := tx.Exec(b.ctx, `SET LOCAL statement_timeout = '2s'`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(b.ctx, `UPDATE pgcheckpoint.checkpoints SET base_checkpoint_id = `+d.base+` WHERE checkpoint_id = $1`, ids[2]); err != nil {
			t.Fatal(err)
		}
		// Each read in a savepoint: an error ends the transaction otherwise.
		read := func(f func(eng *engine.Engine, sp pgx.Tx) error) error {
			return pgx.BeginFunc(b.ctx, tx, func(sp pgx.Tx) error { return f(engine.New(postgres.NewStore(sp, postgres.Options{}), deltas), sp) })
		}
		for _, id := range ids[2:] {
			if err := read(func(eng *engine.Engine, _ pgx.Tx) error { _, err := eng.Get(b.ctx, id); return err }); !damaged(err) {
				t.Errorf("%s: Get(%s): %v; want ErrDamaged (PC004)", d.name, id, err)
			}
		}
		if err := read(func(eng *engine.Engine, _ pgx.Tx) error { _, err := eng.Latest(b.ctx, "damaged"); return err }); !damaged(err) {
			t.Errorf("%s: Latest: %v; want error PC004", d.name, err)
		}
		for _, q := range []string{
			`SELECT count(*) FROM pgcheckpoint.checkpoint_materialize($1)`,
			`SELECT count(j.messages) FROM pgcheckpoint.checkpoint_materialize_json($1) j`,
			`SELECT count(*) FROM pgcheckpoint.delta_chain($1)`,
		} {
			if err := read(func(_ *engine.Engine, sp pgx.Tx) error {
				var n int
				return sp.QueryRow(b.ctx, q, ids[3]).Scan(&n)
			}); sqlState(err) != "PC004" {
				t.Errorf("%s: %s: %v, want error PC004", d.name, q, err)
			}
		}
		// The checkpoints below the damage still read.
		if err := read(func(eng *engine.Engine, _ pgx.Tx) error { _, err := eng.Get(b.ctx, ids[1]); return err }); err != nil {
			t.Errorf("%s: Get of the undamaged base: %v", d.name, err)
		}
		if err := tx.Rollback(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Get and Latest each run a plan without a join or a function scan: the
// checkpoint's row by its key, its content in a scalar subquery (one
// more probe by key), its pending writes in another. Every plan node
// costs every execution its start (measured with callgrind: the join of
// checkpoint_materialize_json and its scan of checkpoint_rebuild_json cost
// a Get about a sixth of its server work), so a new one in these plans
// fails here. The generic plan, which pgx's prepared statements run.
func TestGetAndLatestPlansHaveNoJoin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.snap(t, engine.SnapshotInput{ThreadID: "plan", State: json.RawMessage(`{"a":1}`)}).ID
	for _, q := range []struct {
		name, sql string
		args      string
	}{
		{"CheckpointGetByID", db.CheckpointGetByID, "'" + id.String() + "'"},
		{"CheckpointGetHead", db.CheckpointGetHead, "'plan', ''"},
	} {
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var plan string
		if _, err = tx.Exec(b.ctx, `SELECT set_config('pgcheckpoint.tenant', $1, true), set_config('plan_cache_mode', 'force_generic_plan', true)`, engine.DefaultTenant); err == nil {
			if _, err = tx.Exec(b.ctx, "PREPARE plan_"+q.name+" AS "+q.sql); err == nil {
				err = tx.QueryRow(b.ctx, "EXPLAIN (FORMAT JSON) EXECUTE plan_"+q.name+"("+q.args+")").Scan(&plan)
			}
		}
		_ = tx.Rollback(b.ctx)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		var nodes []string
		var walk func(n map[string]any)
		walk = func(n map[string]any) {
			nodes = append(nodes, fmt.Sprint(n["Node Type"]))
			for _, c := range asSlice(n["Plans"]) {
				walk(c.(map[string]any))
			}
		}
		var doc []map[string]any
		if err := json.Unmarshal([]byte(plan), &doc); err != nil {
			t.Fatal(err)
		}
		walk(doc[0]["Plan"].(map[string]any))
		for _, n := range nodes {
			if strings.Contains(n, "Join") || n == "Nested Loop" || n == "Function Scan" {
				t.Errorf("%s: a %s in the plan (nodes %v):\n%s", q.name, n, nodes, plan)
				break
			}
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// Get and Latest read a full checkpoint with no function call, and rebuild
// a delta with one call of checkpoint_rebuild_json (one walk of its chain).
// Counted with the transaction's own function statistics, so the test does
// not depend on timing.
func TestGetRebuildsADeltaOnceAndAFullCheckpointNever(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []uuid.UUID
	var msgs []string
	for i := range 3 {
		msgs = append(msgs, fmt.Sprintf(`{"n":%d}`, i))
		ids = append(ids, b.snap(t, engine.SnapshotInput{ThreadID: "chain", Messages: json.RawMessage("[" + strings.Join(msgs, ",") + "]"),
			State: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}).ID)
	}
	if f := b.storedFormat(t, ids[2]); f != "delta" {
		t.Fatalf("the head is stored %s; the test needs a delta", f)
	}
	if _, err := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{FullSnapshots: true}).Snapshot(b.ctx,
		engine.SnapshotInput{ThreadID: "whole", Messages: json.RawMessage(`[{"n":0}]`)}); err != nil {
		t.Fatal(err)
	}
	tx, err := b.db.Pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.ctx)
	if _, err := tx.Exec(b.ctx, `SET LOCAL track_functions = 'all'`); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(postgres.NewStore(tx, postgres.Options{}), deltas)
	calls := func() (rebuilds, chains int64) {
		t.Helper()
		if err := tx.QueryRow(b.ctx, `SELECT
			coalesce(sum(calls) FILTER (WHERE funcname = 'checkpoint_rebuild_json'), 0),
			coalesce(sum(calls) FILTER (WHERE funcname = 'delta_chain'), 0)
			FROM pg_stat_xact_user_functions WHERE schemaname = 'pgcheckpoint'`).Scan(&rebuilds, &chains); err != nil {
			t.Fatal(err)
		}
		return rebuilds, chains
	}
	for _, r := range []struct {
		name string
		want int64
		read func() (*engine.Checkpoint, error)
	}{
		{"Get of a full checkpoint", 0, func() (*engine.Checkpoint, error) { return eng.Get(b.ctx, ids[0]) }},
		{"Get of a delta", 1, func() (*engine.Checkpoint, error) { return eng.Get(b.ctx, ids[2]) }},
		{"Latest on a delta", 1, func() (*engine.Checkpoint, error) { return eng.Latest(b.ctx, "chain") }},
		{"Latest on a full checkpoint", 0, func() (*engine.Checkpoint, error) { return eng.Latest(b.ctx, "whole") }},
	} {
		r0, c0 := calls()
		cp, err := r.read()
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if len(cp.Messages) == 0 || len(cp.State) == 0 || len(cp.ToolResults) == 0 {
			t.Fatalf("%s: read %+v", r.name, cp)
		}
		r1, c1 := calls()
		if r1-r0 != r.want || c1-c0 != r.want {
			t.Errorf("%s: %d calls of checkpoint_rebuild_json and %d of delta_chain; want %d of each", r.name, r1-r0, c1-c0, r.want)
		}
	}
}

// A checkpoint whose format is neither 'full' nor 'delta' (nothing writes
// one, and no CHECK refuses one: a row changed by hand)
// reads as error PC004, like a chain that does not reach a full snapshot:
// a full checkpoint changed so, a delta changed so, and every delta on
// either, from the engine and from every SQL reader, never as content and
// never as an endless read. What is below it still reads; a listing shows
// the format; an export carries it and an import refuses it.
func TestUnknownFormatReadsAsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []uuid.UUID // "chain": a full checkpoint, then deltas
	var msgs []string
	for i := range 4 {
		msgs = append(msgs, fmt.Sprintf(`{"n":%d}`, i))
		ids = append(ids, b.snap(t, engine.SnapshotInput{ThreadID: "chain", Messages: json.RawMessage("[" + strings.Join(msgs, ",") + "]"),
			State: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}).ID)
	}
	for i, id := range ids {
		want := "delta"
		if i == 0 {
			want = "full"
		}
		if f := b.storedFormat(t, id); f != want {
			t.Fatalf("checkpoint %d is stored %s; the test needs %s", i, f, want)
		}
	}
	whole, err := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{FullSnapshots: true}).Snapshot(b.ctx,
		engine.SnapshotInput{ThreadID: "whole", Messages: json.RawMessage(`[{"n":0}]`)})
	if err != nil {
		t.Fatal(err)
	}
	sqlReaders := []string{
		`SELECT count(*) FROM pgcheckpoint.checkpoint_materialize($1)`,
		`SELECT count(j.messages) FROM pgcheckpoint.checkpoint_materialize_json($1) j`,
		`SELECT count(*) FROM pgcheckpoint.checkpoint_rebuild_json($1)`,
		`SELECT count(*) FROM pgcheckpoint.delta_chain($1)`,
	}
	cases := []struct {
		name    string
		changed uuid.UUID   // set to format 'zip'
		thread  string      // its thread: Latest fails
		broken  []uuid.UUID // every read of these fails
		intact  []int       // these of ids still read
	}{
		{"a full checkpoint under deltas", ids[0], "chain", ids, nil},
		{"a delta under deltas", ids[2], "chain", ids[2:], []int{0, 1}},
		{"a full head", whole.ID, "whole", []uuid.UUID{whole.ID}, []int{0, 1, 2, 3}},
	}
	for _, c := range cases {
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A read that never ends fails the test instead of hanging it.
		if _, err := tx.Exec(b.ctx, `SET LOCAL statement_timeout = '2s'`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(b.ctx, `UPDATE pgcheckpoint.checkpoints SET format = 'zip' WHERE checkpoint_id = $1`, c.changed); err != nil {
			t.Fatal(err)
		}
		// Each read in a savepoint: an error ends the transaction otherwise.
		read := func(f func(eng *engine.Engine, sp pgx.Tx) error) error {
			return pgx.BeginFunc(b.ctx, tx, func(sp pgx.Tx) error { return f(engine.New(postgres.NewStore(sp, postgres.Options{}), deltas), sp) })
		}
		for _, id := range c.broken {
			err := read(func(eng *engine.Engine, _ pgx.Tx) error { _, err := eng.Get(b.ctx, id); return err })
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "PC004" || !errors.Is(err, engine.ErrDamaged) {
				t.Errorf("%s: Get(%s): %v; want error PC004", c.name, id, err)
			} else if !strings.Contains(pgErr.Hint, "neither 'full' nor 'delta'") {
				t.Errorf("%s: Get(%s): error PC004 without a hint naming unknown formats: %q", c.name, id, pgErr.Hint)
			}
			for _, q := range sqlReaders {
				if err := read(func(_ *engine.Engine, sp pgx.Tx) error {
					var n int
					return sp.QueryRow(b.ctx, q, id).Scan(&n)
				}); sqlState(err) != "PC004" {
					t.Errorf("%s: %s on %s: %v; want error PC004", c.name, q, id, err)
				}
			}
		}
		if err := read(func(eng *engine.Engine, _ pgx.Tx) error { _, err := eng.Latest(b.ctx, c.thread); return err }); !damaged(err) {
			t.Errorf("%s: Latest: %v; want error PC004", c.name, err)
		}
		if err := read(func(eng *engine.Engine, _ pgx.Tx) error { _, err := eng.Diff(b.ctx, c.broken[0], ids[0]); return err }); !damaged(err) {
			t.Errorf("%s: Diff: %v; want error PC004", c.name, err)
		}
		if err := read(func(eng *engine.Engine, _ pgx.Tx) error { _, err := eng.Branch(b.ctx, c.broken[0], "fork"); return err }); !damaged(err) {
			t.Errorf("%s: Branch: %v; want error PC004", c.name, err)
		}
		for _, i := range c.intact {
			if err := read(func(eng *engine.Engine, _ pgx.Tx) error {
				cp, err := eng.Get(b.ctx, ids[i])
				if err == nil {
					jsonEqual(t, c.name+" messages", cp.Messages, []byte("["+strings.Join(msgs[:i+1], ",")+"]"))
					jsonEqual(t, c.name+" state", cp.State, []byte(fmt.Sprintf(`{"i":%d}`, i)))
				}
				return err
			}); err != nil {
				t.Errorf("%s: Get of intact checkpoint %d: %v", c.name, i, err)
			}
		}
		// Listings show the format as stored.
		if err := read(func(eng *engine.Engine, _ pgx.Tx) error {
			infos, err := eng.ListCheckpoints(b.ctx, c.thread, engine.ListOptions{})
			if err == nil && !slices.ContainsFunc(infos, func(i engine.CheckpointInfo) bool { return i.ID == c.changed && i.Format == "zip" }) {
				t.Errorf("%s: the listing does not show format zip: %+v", c.name, infos)
			}
			return err
		}); err != nil {
			t.Errorf("%s: ListCheckpoints: %v", c.name, err)
		}
		// An export carries the format as stored; an import refuses it and
		// writes nothing.
		var export bytes.Buffer
		if err := read(func(eng *engine.Engine, _ pgx.Tx) error { _, err := eng.Export(b.ctx, c.thread, &export); return err }); err != nil {
			t.Errorf("%s: Export: %v", c.name, err)
		} else if !strings.Contains(export.String(), `"storage":"zip"`) {
			t.Errorf("%s: the export does not carry storage zip:\n%s", c.name, export.String())
		}
		if err := tx.Rollback(b.ctx); err != nil {
			t.Fatal(err)
		}
		other := pgtest.NewDB(t)
		if _, err := engine.New(postgres.NewStore(other.Pool, postgres.Options{}), engine.Config{}).Import(b.ctx, &export, engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("%s: Import of the export: %v; want ErrInvalidInput", c.name, err)
		}
		var n int
		if err := other.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: the refused import wrote %d checkpoints (%v)", c.name, n, err)
		}
	}
}

// damaged reports whether err is the Engine's ErrDamaged carrying the SQL
// functions' error PC004.
func damaged(err error) bool {
	return errors.Is(err, engine.ErrDamaged) && sqlState(err) == "PC004"
}

// A delta on a long conversation is rebuilt without a temporary file: the
// full row's messages, far over work_mem here, are turned into text once,
// never inside a sort or a function scan (which spilled them to disk: a
// Latest of a 50,000-step thread wrote its 4.4 MB twice). temp_file_limit
// 0 makes any temporary file an error.
func TestRebuildOfALongConversationWritesNoTemporaryFile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msgs := make([]string, 20000)
	for i := range msgs {
		msgs[i] = fmt.Sprintf(`{"role":"user","content":"turn %d of a long conversation"}`, i)
	}
	b.snap(t, engine.SnapshotInput{ThreadID: "long", Messages: json.RawMessage("[" + strings.Join(msgs, ",") + "]")})
	var head engine.SnapshotResult
	for i := range 5 {
		var err error
		if head, err = b.eng.Append(b.ctx, engine.AppendInput{ThreadID: "long", Messages: json.RawMessage(fmt.Sprintf(`[{"n":%d}]`, i)),
			SetState: json.RawMessage(fmt.Sprintf(`{"k%d":%d}`, i%2, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if f := b.storedFormat(t, head.ID); f != "delta" {
		t.Fatalf("the head is stored %s; the test needs a delta", f)
	}
	// A session of its own (the pool's may be a role that cannot set
	// temp_file_limit).
	conn, err := pgx.Connect(b.ctx, b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(b.ctx)
	if _, err := conn.Exec(b.ctx, `SET work_mem = '1MB'; SET temp_file_limit = 0`); err != nil {
		t.Fatal(err)
	}
	var content [][]byte
	if err := conn.QueryRow(b.ctx, `SELECT pgcheckpoint.checkpoint_rebuild_json($1)`, head.ID).Scan(&content); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(b.ctx, `RESET temp_file_limit`); err != nil {
		t.Fatal(err)
	}
	var same bool
	if err := conn.QueryRow(b.ctx, `
		SELECT $2::bytea[] = ARRAY[substr(jsonb_send(m.messages), 2), substr(jsonb_send(m.state), 2), substr(jsonb_send(m.tool_results), 2)]
		FROM pgcheckpoint.checkpoint_materialize($1) m`, head.ID, content).Scan(&same); err != nil {
		t.Fatal(err)
	}
	if len(content) != 3 || len(content[0]) < 1_200_000 || !same {
		t.Fatalf("rebuilt %d parts (%d bytes of messages), same as materialize: %v; want 3, over 1,200,000 bytes (work_mem 1 MB), the same",
			len(content), len(content[0]), same)
	}
}
