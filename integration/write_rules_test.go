package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/enginedb"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// TestWriteRulesFromSQL checks the rules every write path applies, called
// from SQL as a DBA would: thread_head_for_write (the parent, seq and step a write
// gets, and the retry case) and checkpoint_delta (how a content is stored
// on a parent).
func TestWriteRulesFromSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	put := func(thread string, parent any, messages string) uuid.UUID {
		t.Helper()
		var id uuid.UUID
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT checkpoint_id FROM pgcheckpoint.checkpoint_put($1, '', pgcheckpoint.uuid_v7(),
			$2, 'manual', '{}', '', '{}', $3::jsonb, '{"a":1}', '{}', '', 0)`, thread, parent, messages).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	type head struct {
		Seen               bool
		RewoundTo, Wanted  *uuid.UUID
		NextSeq            int64
		Parent             *uuid.UUID
		NextStep           int64
		Run, Depth, Count  *int32
		Digest             []byte
		StateDig, ToolsDig []byte
	}
	heads := func(thread string, id uuid.UUID, parent any) []head {
		t.Helper()
		rows, err := b.db.Pool.Query(b.ctx, `SELECT * FROM pgcheckpoint.thread_head_for_write($1, '', $2, $3)`, thread, id, parent)
		if err != nil {
			t.Fatal(err)
		}
		hs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[head])
		if err != nil {
			t.Fatal(err)
		}
		return hs
	}
	one := func(what string, hs []head) head {
		t.Helper()
		if len(hs) != 1 {
			t.Fatalf("%s: %d rows, want 1", what, len(hs))
		}
		return hs[0]
	}
	eq := func(a *uuid.UUID, b uuid.UUID) bool { return a != nil && *a == b }

	if h := one("a new thread", heads("w", engine.NewCheckpointID(), nil)); h.Seen || h.Parent != nil || h.Wanted != nil || h.NextSeq != 1 || h.NextStep != 1 {
		t.Errorf("a new thread: %+v, want no thread, no parent, seq 1, step 1", h)
	}
	ids := []uuid.UUID{put("w", nil, `[]`), put("w", nil, `[]`), put("w", nil, `[]`)}
	other := put("other", nil, `[]`)
	if h := one("the newest", heads("w", engine.NewCheckpointID(), nil)); !h.Seen || !eq(h.Parent, ids[2]) || h.Wanted != nil || h.NextSeq != 4 || h.NextStep != 4 || h.Run == nil {
		t.Errorf("a thread of 3: %+v, want parent %s, seq 4, step 4", h, ids[2])
	}
	if h := one("a given parent", heads("w", engine.NewCheckpointID(), ids[0])); !eq(h.Parent, ids[0]) || !eq(h.Wanted, ids[0]) || h.NextSeq != 4 || h.NextStep != 2 {
		t.Errorf("given the first as parent: %+v, want it, seq 4, step 2", h)
	}
	if h := one("a parent elsewhere", heads("w", engine.NewCheckpointID(), other)); h.Parent != nil || !eq(h.Wanted, other) {
		t.Errorf("given another thread's checkpoint: %+v, want no parent, wanted %s", h, other)
	}
	if hs := heads("other", ids[1], nil); len(hs) != 0 {
		t.Errorf("an id that exists (on another thread): %+v, want no row", hs)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `SELECT * FROM pgcheckpoint.checkpoint_rewind($1, false)`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if h := one("after a rewind", heads("w", engine.NewCheckpointID(), nil)); !eq(h.RewoundTo, ids[1]) || !eq(h.Parent, ids[1]) || h.NextSeq != 4 || h.NextStep != 3 {
		t.Errorf("after a rewind to the second: %+v, want parent %s, seq 4, step 3", h, ids[1])
	}

	// checkpoint_delta, given a parent's columns and a content; digests as
	// the database computes them.
	type stored struct {
		Format                       string
		Base                         *uuid.UUID
		Run, Depth                   int32
		Messages, State, ToolResults string
		StateRemoved, ToolsRemoved   []string
	}
	m1, m2 := `{"role":"user","content":"`+strings.Repeat("a", 200)+`"}`, `{"role":"assistant","content":"`+strings.Repeat("b", 200)+`"}`
	parent := uuid.Must(uuid.NewV7())
	delta := func(what, parentMsgs, parentState, msgs, state string, parentRun, deltaRun int, digests bool) stored {
		t.Helper()
		var s stored
		err := b.db.Pool.QueryRow(b.ctx, `
			SELECT d.format, d.base_checkpoint_id, d.delta_run, d.delta_depth, d.messages::text, d.state::text,
			       d.tool_results::text, d.state_removed, d.tool_results_removed
			FROM pgcheckpoint.checkpoint_delta(
			    $1::jsonb, $2::jsonb, '{}',
			    pgcheckpoint.message_chain(NULL, pgcheckpoint.message_digests($1::jsonb)),
			    pgcheckpoint.key_digests($2::jsonb), '{}',
			    $3, $4, 2, jsonb_array_length($5::jsonb),
			    pgcheckpoint.message_chain_at(pgcheckpoint.message_chain(NULL, pgcheckpoint.message_digests($5::jsonb)),
			                                jsonb_array_length($5::jsonb)),
			    CASE WHEN $8 THEN pgcheckpoint.key_digests($6::jsonb) END, '{}', $7) d`,
			msgs, state, parent, parentRun, parentMsgs, parentState, deltaRun, digests).
			Scan(&s.Format, &s.Base, &s.Run, &s.Depth, &s.Messages, &s.State, &s.ToolResults, &s.StateRemoved, &s.ToolsRemoved)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return s
	}
	appended := delta("an append", "["+m1+"]", `{"a":1,"b":2}`, "["+m1+","+m2+"]", `{"a":1,"c":3}`, 0, 50, true)
	if appended.Format != "delta" || !eq(appended.Base, parent) || appended.Run != 1 || appended.Depth != 3 ||
		appended.Messages != "["+strings.ReplaceAll(strings.ReplaceAll(m2, `":"`, `": "`), `","`, `", "`)+"]" ||
		appended.State != `{"c": 3}` || fmt.Sprint(appended.StateRemoved) != "[b]" || appended.ToolResults != "{}" {
		t.Errorf("an append on the parent: %+v, want a delta of the new message, c set and b removed, run 1, depth 3", appended)
	}
	for _, c := range []struct {
		what                                 string
		parentMsgs, parentState, msgs, state string
		parentRun, deltaRun                  int
		digests                              bool
	}{
		{"an edited message", "[" + m1 + "]", `{"a":1}`, "[" + m2 + "," + m1 + "]", `{"a":1}`, 0, 50, true},
		{"a delta no smaller", "[]", `{}`, "[]", `{"a":"` + strings.Repeat("c", 200) + `"}`, 0, 50, true},
		{"a parent without digests", "[" + m1 + "]", `{"a":1}`, "[" + m1 + "," + m2 + "]", `{"a":1}`, 0, 50, false},
		{"delta run 1", "[" + m1 + "]", `{"a":1}`, "[" + m1 + "," + m2 + "]", `{"a":1}`, 0, 1, true},
		// The anchor of the run is looked for, and this parent is nowhere.
		{"the end of a run", "[" + m1 + "]", `{"a":1}`, "[" + m1 + "," + m2 + "]", `{"a":1}`, 49, 50, true},
	} {
		if s := delta(c.what, c.parentMsgs, c.parentState, c.msgs, c.state, c.parentRun, c.deltaRun, c.digests); s.Format != "full" || s.Base != nil ||
			s.Run != 0 || s.Depth != 0 || len(s.StateRemoved) != 0 || !strings.HasPrefix(s.Messages, "[") || s.State == "{}" {
			t.Errorf("%s: %+v, want whole", c.what, s)
		}
	}
}

// TestWriteStatementsInlineTheRules: the pipelined statements apply the
// write rules through SQL functions the planner inlines; a function that
// stops being inlined (a SET clause, STRICT, VOLATILE) would cost every
// write a call, and for a SQL function a parse and plan. The generic plan
// must name none of them (message_summary, called only with messages, and
// run_anchor, at the end of a run, are calls by design).
func TestWriteStatementsInlineTheRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn, err := b.db.Pool.Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// As the application runs: a role that row-level security holds, whose
	// plans have the tenant's qualifier (a superuser's have none).
	b.db.HoldRole(t)
	if _, err := conn.Exec(b.ctx, `SET plan_cache_mode = force_generic_plan; SET ROLE `+pgtest.HeldRole, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(b.ctx, `RESET ROLE`)
	inlined := []string{"thread_head_for_write", "checkpoint_delta", "delta_keys",
		"delta_run_continues", "message_chain_at", "checkpoint_default_summary", "json_text"}
	for name, sql := range map[string]string{
		"CheckpointPutWhole": enginedb.CheckpointPutWhole, "CheckpointPutFast": enginedb.CheckpointPutFast,
	} {
		n := 0
		for _, m := range regexp.MustCompile(`\$(\d+)`).FindAllStringSubmatch(sql, -1) {
			if i, _ := strconv.Atoi(m[1]); i > n {
				n = i
			}
		}
		stmt := "inline_" + strings.ToLower(name)
		if _, err := conn.Exec(b.ctx, "PREPARE "+stmt+" AS "+sql); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows, err := conn.Query(b.ctx, "EXPLAIN (VERBOSE) EXECUTE "+stmt+"("+strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")+")")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		for _, f := range inlined {
			if strings.Contains(plan, f) {
				t.Errorf("%s calls pgcheckpoint.%s instead of inlining it:\n%s", name, f, plan)
			}
		}
		if !strings.Contains(plan, "Index Scan Backward using checkpoints_pkey") {
			t.Errorf("%s: the plan does not read the newest checkpoint by key:\n%s", name, plan)
		}
	}
}

// TestWriteStatementsKeepAGenericPlan: after its first executions on a
// connection, each pipelined insert runs a generic plan, which the server
// keeps, and is not planned again at every write (a custom plan of
// CheckpointPutFast takes about a millisecond to make). The server
// switches when the generic plan's estimate is no worse than a custom
// one's; a row estimate of 1,000 for run_anchor once kept it custom.
func TestWriteStatementsKeepAGenericPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		name string
		cfg  engine.Config
	}{{"CheckpointPutWhole", engine.Config{}}, {"CheckpointPutFast", deltas}} {
		conn, err := pgx.Connect(b.ctx, b.db.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(b.ctx)
		eng := engine.New(postgres.NewStore(conn, postgres.Options{}), c.cfg)
		msgs := `[{"role":"user","content":"hello"}`
		for i := range 20 {
			msgs += fmt.Sprintf(`,{"role":"assistant","content":"%d"}`, i)
			if _, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: c.name, Messages: json.RawMessage(msgs + "]"),
				State: json.RawMessage(fmt.Sprintf(`{"step":%d,"plan":"unchanged"}`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		var generic, custom int64
		if err := conn.QueryRow(b.ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
			WHERE statement LIKE '-- name: ' || $1 || ' %'`, c.name).Scan(&generic, &custom); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if custom > 5 || generic < 14 {
			t.Errorf("%s: %d custom plans and %d generic ones in 20 executions; want at most 5 custom", c.name, custom, generic)
		}
	}
}
