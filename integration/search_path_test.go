package integration

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// inlinedHelpers are the SQL functions that the write and read statements
// inline into their own plans. A SET clause would stop that (measured: a
// delta write then takes about 50 times its server time, a whole one 3
// times), so they have none and name everything schema-qualified instead,
// which TestRoutinesUnderAHostileSearchPath checks.
var inlinedHelpers = []string{"checkpoint_content_json", "checkpoint_default_summary", "current_tenant", "checkpoint_delta", "checkpoint_materialize_json",
	"delta_keys", "delta_run_continues", "json_text", "message_chain_at", "thread_head_for_write", "thread_sealed", "unescaped_text"}

// committingProcedures are the procedures that commit, which Postgres
// forbids to have a SET clause: they too name everything schema-qualified.
var committingProcedures = []string{"thread_gc_sweep"}

// Every routine of the schema runs with its own search_path (SET
// search_path in pg_proc.proconfig), so that the caller's cannot put an
// operator or a function of its own in it; an aggregate through its
// support functions. The exceptions are named above, each for a reason
// Postgres gives, and checked by behaviour instead; a new routine without
// a SET clause fails here.
func TestEveryRoutinePinsItsSearchPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rows, err := b.db.Pool.Query(b.ctx, `
		SELECT p.oid::regprocedure::text, p.proname, p.prokind::text, l.lanname,
		       coalesce(obj_description(p.oid, 'pg_proc'), ''),
		       coalesce((SELECT bool_or(c LIKE 'search_path=%') FROM unnest(p.proconfig) c), false),
		       coalesce((SELECT bool_and(coalesce((SELECT bool_or(c LIKE 'search_path=%') FROM unnest(s.proconfig) c), false))
		                 FROM pg_aggregate a JOIN pg_proc s ON s.oid IN (a.aggtransfn, a.aggfinalfn, a.aggcombinefn)
		                 WHERE a.aggfnoid = p.oid), false)
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = 'pgcheckpoint'::regnamespace
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type routine struct {
		sig, name, kind, lang, comment string
		pinned, supportPinned          bool
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (x routine, err error) {
		return x, r.Scan(&x.sig, &x.name, &x.kind, &x.lang, &x.comment, &x.pinned, &x.supportPinned)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 40 {
		t.Fatalf("only %d routines in schema pgcheckpoint", len(all))
	}
	seen := map[string]bool{}
	for _, r := range all {
		switch {
		case r.kind == "a":
			if !r.supportPinned {
				t.Errorf("aggregate %s: a support function has no SET search_path", r.sig)
			}
		case slices.Contains(inlinedHelpers, r.name):
			seen[r.name] = true
			if r.pinned || r.lang != "sql" {
				t.Errorf("%s (%s, pinned %v) is listed as an inlined SQL function without a SET clause: take it off the list", r.sig, r.lang, r.pinned)
			}
		case slices.Contains(committingProcedures, r.name):
			seen[r.name] = true
			if r.kind != "p" {
				t.Errorf("%s is listed as a committing procedure and is not a procedure", r.sig)
			}
		case !r.pinned:
			t.Errorf("%s runs with the caller's search_path: give it SET search_path TO 'pg_catalog', 'pg_temp'", r.sig)
		}
	}
	for _, name := range append(slices.Clone(inlinedHelpers), committingProcedures...) {
		if !seen[name] {
			t.Errorf("%s is listed as an exception and does not exist", name)
		}
	}
}

// The routines that run with the caller's search_path (the inlined helpers
// and thread_gc_sweep; see TestEveryRoutinePinsItsSearchPath) use nothing
// a schema on that path could supply: called under a search_path whose
// first schema shadows every pg_catalog operator of the usual names and
// every pg_catalog function their bodies call without a schema, with
// functions that fail when called, they still work.
func TestRoutinesUnderAHostileSearchPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	eng := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{DeltaMinBytes: -1})
	var ids []string
	msgs := []string{}
	for i := range 4 {
		msgs = append(msgs, `{"role":"user","content":"step `+string(rune('1'+i))+`"}`)
		res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage("[" + strings.Join(msgs, ",") + "]"),
			State: json.RawMessage(`{"n":` + string(rune('1'+i)) + `,"s":"a\u0000b"}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID.String())
	}
	b.snap(t, engine.SnapshotInput{ThreadID: "u"})
	b.snap(t, engine.SnapshotInput{ThreadID: "u"})

	// Bare calls in the bodies of the routines without a SET clause.
	rows, err := b.db.Pool.Query(ctx, `SELECT p.prosrc FROM pg_proc p
		WHERE p.pronamespace = 'pgcheckpoint'::regnamespace AND p.prokind IN ('f', 'p')
		  AND NOT coalesce((SELECT bool_or(c LIKE 'search_path=%') FROM unnest(p.proconfig) c), false)`)
	if err != nil {
		t.Fatal(err)
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	bare := map[string]bool{}
	call := regexp.MustCompile(`(?i)(?:^|[^.\w"])([a-z_][a-z0-9_]*)\s*\(`)
	for _, body := range bodies {
		for _, m := range call.FindAllStringSubmatch(body, -1) {
			bare[strings.ToLower(m[1])] = true
		}
	}
	functions := []string{"now", "clock_timestamp", "cardinality", "date_part", "pg_sleep", "substr"} // at least
	for name := range bare {
		functions = append(functions, name)
	}
	operators := []string{"=", "<>", "<", ">", "<=", ">=", "+", "-", "*", "/", "||", "->", "->>", "#>", "#>>", "?", "?|", "?&", "@>", "<@", "~", "~~"}

	conn, err := b.db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, hostileTraps); err != nil {
		t.Fatal(err)
	}
	var made int
	if err := conn.QueryRow(ctx, `SELECT hostile.make_traps($1, $2)`, functions, operators).Scan(&made); err != nil {
		t.Fatal(err)
	}
	if made < 500 {
		t.Fatalf("only %d traps made", made)
	}
	if _, err := conn.Exec(ctx, `SET search_path = hostile, pg_catalog`); err != nil {
		t.Fatal(err)
	}
	// The traps spring.
	if _, err := conn.Exec(ctx, `SELECT now() < now()`); err == nil || !strings.Contains(err.Error(), "hostile") {
		t.Fatalf("an unqualified operator under the hostile path: %v, want a trap", err)
	}
	m := "[" + strings.Join(msgs, ",") + `,{"role":"user","content":"five"}]`
	for _, c := range []struct {
		what string
		sql  string
		args []any
	}{
		{"checkpoint_default_summary", `SELECT pgcheckpoint.checkpoint_default_summary('[{"role":"user","content":"hi"}]', '{}'), pgcheckpoint.checkpoint_default_summary('[]', '{"a":1}')`, nil},
		{"thread_head_for_write and checkpoint_delta (delta_keys, delta_run_continues, message_chain_at)",
			`SELECT d.format FROM pgcheckpoint.thread_head_for_write('t', '', pgcheckpoint.uuid_v7(), NULL) h
			 CROSS JOIN LATERAL pgcheckpoint.checkpoint_delta($1::pg_catalog.jsonb, '{"n":5}', '{}',
			     pgcheckpoint.message_chain(NULL, pgcheckpoint.message_digests($1::pg_catalog.jsonb)),
			     pgcheckpoint.key_digests('{"n":5}'), pgcheckpoint.key_digests('{}'),
			     h.parent_checkpoint_id, h.parent_delta_run, h.parent_delta_depth, h.parent_messages_count,
			     h.parent_messages_digest, h.parent_state_digests, h.parent_tool_results_digests, 50) d`, []any{m}},
		{"thread_sealed", `SELECT * FROM pgcheckpoint.thread_sealed('main')`, nil},
		{"delta_keys", `SELECT * FROM pgcheckpoint.delta_keys('{"a":1,"b":2}', '{"a":"x","b":"y"}', '{"a":"x","c":"z"}')`, nil},
		{"delta_run_continues, message_chain_at", `SELECT pgcheckpoint.delta_run_continues(3, 50), pgcheckpoint.message_chain_at('\x00', 0)`, nil},
		{"checkpoint_materialize_json, whole", `SELECT * FROM pgcheckpoint.checkpoint_materialize_json($1::pg_catalog.uuid)`, []any{ids[0]}},
		{"checkpoint_materialize_json, delta", `SELECT * FROM pgcheckpoint.checkpoint_materialize_json($1::pg_catalog.uuid)`, []any{ids[3]}},
		{"json_text, unescaped_text", `SELECT pgcheckpoint.json_text(state), pgcheckpoint.json_text(state OPERATOR(pg_catalog.->) 's'), pgcheckpoint.unescaped_text(summary)
			FROM pgcheckpoint.checkpoints`, nil},
		{"delta_merge", `SELECT pgcheckpoint.delta_merge(ch.state, ch.state_removed ORDER BY ch.depth DESC) FROM pgcheckpoint.delta_chain($1::pg_catalog.uuid) ch`, []any{ids[3]}},
		{"thread_gc_sweep", `CALL pgcheckpoint.thread_gc_sweep('keep_last_n', 1)`, nil},
	} {
		if _, err := conn.Exec(ctx, c.sql, c.args...); err != nil {
			t.Errorf("%s under a hostile search_path: %v", c.what, err)
		}
	}
	if _, err := conn.Exec(ctx, `RESET search_path`); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints`).Scan(&left); err != nil || left != 2 {
		t.Fatalf("the sweep left %d checkpoints (%v), want the 2 heads", left, err)
	}
}

// hostileTraps makes schema hostile and hostile.make_traps(functions,
// operators): for every pg_catalog function of those names and every
// pg_catalog operator of those names, one of the same signature in
// hostile that raises an error naming itself (signatures with types a
// PL/pgSQL function cannot take are left out). Returns how many it made.
const hostileTraps = `
CREATE SCHEMA hostile;
CREATE FUNCTION hostile.make_traps(p_functions text[], p_operators text[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    r      record;
    n      integer := 0;
    i      integer := 0;
    v_args text;
    v_ret  text;
BEGIN
    FOR r IN
        SELECT p.proname AS name, p.proargtypes::oid[] AS args, p.prorettype AS ret, p.proretset AS retset
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f' AND p.proname = ANY (p_functions)
    LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM unnest(r.args || r.ret) t(o) JOIN pg_catalog.pg_type y ON y.oid = t.o
                              WHERE y.typtype = 'p' AND y.typname NOT IN ('void', 'anyelement', 'anyarray', 'anynonarray',
                                                                         'anycompatible', 'anycompatiblearray'));
        v_args := (SELECT string_agg(format_type(a.o, NULL), ', ' ORDER BY a.k) FROM unnest(r.args) WITH ORDINALITY a(o, k));
        v_ret := CASE WHEN r.retset THEN 'SETOF ' ELSE '' END || format_type(r.ret, NULL);
        BEGIN
            EXECUTE format('CREATE FUNCTION hostile.%I(%s) RETURNS %s LANGUAGE plpgsql AS %L',
                           r.name, coalesce(v_args, ''), v_ret,
                           format('BEGIN RAISE EXCEPTION ''hostile function %s(%s) called''; END', r.name, coalesce(v_args, '')));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            NULL; -- a signature PL/pgSQL cannot take, or one made already
        END;
    END LOOP;
    FOR r IN
        SELECT o.oprname AS name, o.oprleft AS l, o.oprright AS rt, o.oprresult AS ret
        FROM pg_catalog.pg_operator o
        WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprname = ANY (p_operators) AND o.oprcode <> 0
    LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM unnest(ARRAY[r.l, r.rt, r.ret]) t(o) JOIN pg_catalog.pg_type y ON y.oid = t.o
                              WHERE y.typtype = 'p' AND y.typname NOT IN ('anyelement', 'anyarray', 'anynonarray',
                                                                         'anycompatible', 'anycompatiblearray'));
        i := i + 1;
        BEGIN
            IF r.l = 0 THEN
                EXECUTE format('CREATE FUNCTION hostile.op_%s(%s) RETURNS %s LANGUAGE plpgsql AS %L', i,
                               format_type(r.rt, NULL), format_type(r.ret, NULL),
                               format('BEGIN RAISE EXCEPTION ''hostile operator %s called''; END', r.name));
                EXECUTE format('CREATE OPERATOR hostile.%s (RIGHTARG = %s, FUNCTION = hostile.op_%s)', r.name,
                               format_type(r.rt, NULL), i);
            ELSE
                EXECUTE format('CREATE FUNCTION hostile.op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L', i,
                               format_type(r.l, NULL), format_type(r.rt, NULL), format_type(r.ret, NULL),
                               format('BEGIN RAISE EXCEPTION ''hostile operator %s called''; END', r.name));
                EXECUTE format('CREATE OPERATOR hostile.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = hostile.op_%s)', r.name,
                               format_type(r.l, NULL), format_type(r.rt, NULL), i);
            END IF;
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END LOOP;
    RETURN n;
END
$$;`
