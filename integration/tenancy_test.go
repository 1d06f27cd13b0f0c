package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// tenantSet is a migrated database with the roles of schema/roles/roles.sql:
// the schema handed to the owner, the application, read-only and operator
// roles; none but the operator bypasses row-level security.
type tenantSet struct {
	db                                     *pgtest.DB
	appURL, readURL, operatorURL, ownerURL string
}

// setupTenants makes a tenantSet: a clone of the migrated template (the
// migrations ran as the superuser), then the shipped roles script, with
// names of this test's own (roles belong to the server).
func setupTenants(t testing.TB) *tenantSet {
	t.Helper()
	ctx := context.Background()
	var b [4]byte
	rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	d := pgtest.NewDB(t)
	d.NoTenant(t)
	rs := &roleSet{db: d, owner: "ckpt_owner_" + suffix, app: "ckpt_app_" + suffix, readonly: "ckpt_ro_" + suffix,
		operator: "ckpt_op_" + suffix}
	operator := rs.operator
	t.Cleanup(func() {
		for _, r := range []string{rs.owner, rs.app, rs.readonly, operator} {
			d.Pool.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{r}.Sanitize())
			if _, err := d.Pool.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{r}.Sanitize()); err != nil {
				t.Errorf("drop role %s: %v", r, err)
			}
		}
	})
	rs.runRolesScript(t)
	password := "pw-" + suffix
	for _, r := range []string{rs.owner, rs.app, rs.readonly, operator} {
		if _, err := d.Pool.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'", pgx.Identifier{r}.Sanitize(), password)); err != nil {
			t.Fatal(err)
		}
	}
	return &tenantSet{db: d, ownerURL: roleURL(t, d.URL, rs.owner, password),
		appURL: roleURL(t, d.URL, rs.app, password), readURL: roleURL(t, d.URL, rs.readonly, password),
		operatorURL: roleURL(t, d.URL, operator, password)}
}

// tenantEngine is an Engine over pool bound to tenant.
func tenantEngine(t *testing.T, pool *pgxpool.Pool, opts postgres.Options, tenant string) *engine.Engine {
	t.Helper()
	return tenantEngineWith(t, pool, opts, engine.Config{DeltaMinBytes: -1}, tenant)
}

func tenantEngineWith(t *testing.T, pool *pgxpool.Pool, opts postgres.Options, cfg engine.Config, tenant string) *engine.Engine {
	t.Helper()
	e, err := engine.New(postgres.NewStore(pool, opts), cfg).ForTenant(tenant)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// tenantData is what tenant A holds in a test: a thread with a branch, a
// namespace, pending writes, an expiry and a run id, its content marked
// with secret.
type tenantData struct {
	thread, branch string
	ids            []uuid.UUID // of thread, oldest first
	subID          uuid.UUID   // of thread, namespace "sub"
	branchHead     uuid.UUID
	export         []byte
}

const secret = "SECRET-OF-TENANT-A"

func writeTenantData(t *testing.T, ctx context.Context, a *engine.Engine) tenantData {
	t.Helper()
	x := tenantData{thread: "shared"}
	for i := range 4 {
		r, err := a.Snapshot(ctx, engine.SnapshotInput{ThreadID: x.thread,
			Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"%s %d"}]`, secret, i)),
			State:    json.RawMessage(fmt.Sprintf(`{"i": %d, "secret": %q}`, i, secret)),
			Metadata: json.RawMessage(`{"run_id": "run-a"}`), Tags: []string{"tag-a"}})
		if err != nil {
			t.Fatal(err)
		}
		x.ids = append(x.ids, r.ID)
	}
	if _, err := a.PutWrites(ctx, x.ids[3], "task-a", []engine.Write{{Channel: "c", Value: json.RawMessage(`"` + secret + `"`)}}); err != nil {
		t.Fatal(err)
	}
	r, err := a.Snapshot(ctx, engine.SnapshotInput{ThreadID: x.thread, Namespace: "sub", State: json.RawMessage(`{"sub": "` + secret + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	x.subID = r.ID
	br, err := a.Branch(ctx, x.ids[1], "b")
	if err != nil {
		t.Fatal(err)
	}
	x.branch = br.ThreadID
	r, err = a.Snapshot(ctx, engine.SnapshotInput{ThreadID: x.branch, Messages: json.RawMessage(`[{"role":"user","content":"` + secret + ` on the branch"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	x.branchHead = r.ID
	if err := a.SetThreadExpiry(ctx, x.thread, time.Now().Add(time.Hour), engine.KeepLatest()); err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	if _, err := a.Export(ctx, x.thread, &buf, engine.ExportOptions{Branches: true}); err != nil {
		t.Fatal(err)
	}
	x.export = []byte(buf.String())
	return x
}

// tenantRows returns every row of tenant in every table of the schema (the
// catalog's list, so a table added later counts), as the operator reads
// them.
func tenantRows(t *testing.T, operator *pgxpool.Pool, tenant string) string {
	t.Helper()
	ctx := context.Background()
	rows, err := operator.Query(ctx, `SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relnamespace = 'pgcheckpoint'::regnamespace AND c.relkind IN ('r', 'p') AND c.relname <> 'schema_migrations' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 4 {
		t.Fatalf("tables %v (%v)", tables, err)
	}
	var parts []string
	for _, tb := range tables {
		parts = append(parts, fmt.Sprintf("SELECT %s || to_jsonb(x)::text AS r FROM %s x WHERE x.tenant_id = $1", quoteLiteral(tb), tb))
	}
	var out string
	if err := operator.QueryRow(ctx, "SELECT coalesce(string_agg(r, E'\\n' ORDER BY r), '') FROM ("+strings.Join(parts, " UNION ALL ")+") s", tenant).Scan(&out); err != nil {
		t.Fatal(err)
	}
	if out == "" {
		t.Fatalf("tenant %s has no rows", tenant)
	}
	return out
}

// sqlProbe is one SQL function called by another tenant (or by a session
// with no tenant) on tenant A's thread ids and checkpoint ids. The text
// names them as {thread}, {branch}, {id0}..{id3}, {sub}, {head} and {new}
// (a new id).
type sqlProbe struct {
	sql string
	// named: the call names one of A's objects; the answer is PC001 or
	// nothing (no row, NULL).
	named bool
	// echoes: a column of the answer is an id the call passed (not read
	// from a table), which is not looked for in the answer.
	echoes bool
	note   string
}

// sqlProbes holds every function and procedure of schema pgcheckpoint:
// TestTenantsSQLFunctionsKeptApart fails on one missing here.
var sqlProbes = map[string]sqlProbe{
	"checkpoint_append(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text[],text[],text,bigint,integer,bytea,jsonb,jsonb,bigint,bigint,boolean)": {
		sql: `SELECT * FROM pgcheckpoint.checkpoint_append('{thread}', '', '{new}', '{id3}', 'manual', '{}', '', '{}', '[]', '{}', '{}', '{}', '{}', '', 0)`, named: true},
	"checkpoint_check(text,text,uuid,text,text[],text,text)": {sql: `SELECT pgcheckpoint.checkpoint_check('t', '', '{id0}', 'manual', '{}', '', '')`, note: "reads no table"},
	"checkpoint_content_json(uuid,text,jsonb,jsonb,jsonb)":   {sql: `SELECT pgcheckpoint.checkpoint_content_json('{id3}', 'delta', '[]', '{}', '{}')`, named: true},
	"checkpoint_default_summary(jsonb,jsonb)":                {sql: `SELECT pgcheckpoint.checkpoint_default_summary('[]', '{}')`, note: "reads no table"},
	"checkpoint_delete_before(text,text,bigint)":             {sql: `SELECT pgcheckpoint.checkpoint_delete_before('{thread}', '', 100)`},
	"checkpoint_delete_for_runs(text[])":                     {sql: `SELECT pgcheckpoint.checkpoint_delete_for_runs(ARRAY['run-a'])`},
	"checkpoint_delete_keys(text[],text[],bigint[],uuid[])":  {sql: `SELECT pgcheckpoint.checkpoint_delete_keys(ARRAY['{thread}', '{thread}', '{thread}'], ARRAY['', '', ''], ARRAY[1, 2, 3]::bigint[], ARRAY['{id0}', '{id1}', '{id2}']::uuid[])`, named: true},
	"checkpoint_delete_many(uuid[])":                         {sql: `SELECT * FROM pgcheckpoint.checkpoint_delete_many(ARRAY['{id0}', '{id1}', '{id2}', '{sub}']::uuid[])`, named: true},
	"checkpoint_delete_many_in(text[],uuid[])":               {sql: `SELECT * FROM pgcheckpoint.checkpoint_delete_many_in(ARRAY['{thread}'], ARRAY['{id0}', '{id1}', '{id2}', '{sub}']::uuid[])`, named: true},
	"checkpoint_delta(jsonb,jsonb,jsonb,bytea,jsonb,jsonb,uuid,integer,integer,integer,bytea,jsonb,jsonb,integer)": {
		sql: `SELECT * FROM pgcheckpoint.checkpoint_delta('[]', '{}', '{}', NULL, NULL, NULL, '{id3}', 1, 1, 0, NULL, NULL, NULL, 50)`},
	"checkpoint_last_message(uuid)":       {sql: `SELECT pgcheckpoint.checkpoint_last_message('{id3}')`, named: true},
	"checkpoint_lineage(uuid,integer)":    {sql: `SELECT * FROM pgcheckpoint.checkpoint_lineage('{id3}')`, named: true},
	"checkpoint_line_range(uuid,integer)": {sql: `SELECT * FROM pgcheckpoint.checkpoint_line_range('{id3}', 100)`, named: true},
	"checkpoint_materialize(uuid)":        {sql: `SELECT * FROM pgcheckpoint.checkpoint_materialize('{id3}')`, named: true},
	"checkpoint_materialize_json(uuid)":   {sql: `SELECT * FROM pgcheckpoint.checkpoint_materialize_json('{id3}')`, named: true},
	"checkpoint_put(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text,bigint,integer,bytea,jsonb,jsonb,boolean,uuid)": {
		sql: `SELECT * FROM pgcheckpoint.checkpoint_put('{thread}', '', '{new}', '{id2}', 'manual', '{}', '', '{}', '[]', '{}', '{}', '', 0)`, named: true},
	"checkpoint_rebuild_json(uuid)":                 {sql: `SELECT * FROM pgcheckpoint.checkpoint_rebuild_json('{id3}')`, named: true},
	"checkpoint_rewind(uuid,boolean)":               {sql: `SELECT * FROM pgcheckpoint.checkpoint_rewind('{id1}', true)`, named: true},
	"checkpoint_thread_lock(uuid,text)":             {sql: `SELECT pgcheckpoint.checkpoint_thread_lock('{id1}', NULL)`, named: true},
	"current_tenant()":                              {sql: `SELECT pgcheckpoint.current_tenant() IS NOT DISTINCT FROM nullif(current_setting('pgcheckpoint.tenant', true), '')`, note: "the session's own setting"},
	"delta_chain(uuid)":                             {sql: `SELECT * FROM pgcheckpoint.delta_chain('{id3}')`, named: true},
	"delta_keys(jsonb,jsonb,jsonb)":                 {sql: `SELECT pgcheckpoint.delta_keys('{}', '{}', '{}')`, note: "reads no table"},
	"delta_merge(jsonb,text[])":                     {sql: `SELECT pgcheckpoint.delta_merge(x, '{}') FROM (VALUES ('{}'::jsonb)) v(x)`, note: "an aggregate; reads no table"},
	"delta_merge_step(jsonb,jsonb,text[])":          {sql: `SELECT pgcheckpoint.delta_merge_step('{}', '{}', '{}')`, note: "reads no table"},
	"delta_run_continues(integer,integer)":          {sql: `SELECT pgcheckpoint.delta_run_continues(1, 50)`, note: "reads no table"},
	"json_compact_size(jsonb)":                      {sql: `SELECT pgcheckpoint.json_compact_size('{}')`, note: "reads no table"},
	"json_text(jsonb)":                              {sql: `SELECT pgcheckpoint.json_text('"x"')`, note: "reads no table"},
	"key_digests(jsonb)":                            {sql: `SELECT pgcheckpoint.key_digests('{}')`, note: "reads no table"},
	"message_chain(bytea,bytea)":                    {sql: `SELECT pgcheckpoint.message_chain(NULL, NULL)`, note: "reads no table"},
	"message_chain_at(bytea,integer)":               {sql: `SELECT pgcheckpoint.message_chain_at(NULL, 0)`, note: "reads no table"},
	"message_digests(jsonb)":                        {sql: `SELECT pgcheckpoint.message_digests('[]')`, note: "reads no table"},
	"message_summary(jsonb)":                        {sql: `SELECT pgcheckpoint.message_summary('{}')`, note: "reads no table"},
	"pending_writes_json(text,text,bigint)":         {sql: `SELECT pgcheckpoint.pending_writes_json('{thread}', '', 4)`},
	"retention_policy_check(text,integer,interval)": {sql: `SELECT pgcheckpoint.retention_policy_check('keep_last_n', 1, NULL)`, note: "reads no table"},
	"run_anchor(uuid,integer)":                      {sql: `SELECT * FROM pgcheckpoint.run_anchor('{id3}', 50)`, named: true},
	"thread_after_write(text,text)":                 {sql: `SELECT pgcheckpoint.thread_after_write('{thread}', '')`, note: "makes the caller's own thread row"},
	"thread_branch(uuid,text,text,uuid)":            {sql: `SELECT * FROM pgcheckpoint.thread_branch('{id1}', 'b-fork', 'fork', '{new}')`, named: true},
	"thread_copy(text,text)":                        {sql: `SELECT * FROM pgcheckpoint.thread_copy('{thread}', 'b-copy')`, named: true},
	"thread_delete(text)":                           {sql: `SELECT pgcheckpoint.thread_delete('{thread}')`},
	"thread_expire(text)":                           {sql: `SELECT pgcheckpoint.thread_expire('{thread}')`},
	"thread_gc(text,text,integer,interval)":         {sql: `SELECT * FROM pgcheckpoint.thread_gc('{thread}', 'keep_last_n', 1)`},
	"thread_gc_batch(text,integer,interval,text,integer)": {
		sql: `SELECT * FROM pgcheckpoint.thread_gc_batch('keep_last_n', 1, NULL, '', 100)`},
	"thread_gc_batch_oldest(text,integer,interval,integer,timestamp with time zone,timestamp with time zone,text)": {
		sql: `SELECT pgcheckpoint.thread_gc_batch_oldest('keep_last_n', 1, NULL, 100, now() + interval '1 day')`},
	"thread_gc_doomed_many(text[],text,integer,interval)": {
		sql: `SELECT * FROM pgcheckpoint.thread_gc_doomed_many(ARRAY['{thread}', '{branch}'], 'keep_last_n', 1, NULL)`, named: true},
	"thread_gc_many(text[],text,integer,interval)": {sql: `SELECT * FROM pgcheckpoint.thread_gc_many(ARRAY['{thread}', '{branch}'], 'keep_last_n', 1, NULL)`},
	"thread_gc_sweep(text,integer,interval,integer,interval,interval,text)": {
		sql: `CALL pgcheckpoint.thread_gc_sweep('keep_last_n', 1)`, note: "a procedure: it commits, so it runs outside a transaction, in the session's tenant"},
	"thread_head(text,text)": {sql: `SELECT pgcheckpoint.thread_head('{thread}', '')`, named: true},
	"thread_head_for_write(text,text,uuid,uuid)": {
		sql: `SELECT * FROM pgcheckpoint.thread_head_for_write('{thread}', '', '{new}', '{id3}')`, echoes: true, note: "wanted_parent is p_parent_checkpoint_id"},
	"thread_head_seq(text,text)":                               {sql: `SELECT pgcheckpoint.thread_head_seq('{thread}', '')`, named: true},
	"thread_list_heads(text,integer)":                          {sql: `SELECT * FROM pgcheckpoint.thread_list_heads('', 100)`, note: "lists the caller's own threads"},
	"thread_lock(text)":                                        {sql: `SELECT pgcheckpoint.thread_lock('{thread}')`, note: "makes the caller's own lock row"},
	"thread_lock_many(text[])":                                 {sql: `SELECT pgcheckpoint.thread_lock_many(ARRAY['{thread}', '{branch}'])`, note: "makes the caller's own lock rows"},
	"thread_merge(text,text,uuid,text)":                        {sql: `SELECT * FROM pgcheckpoint.thread_merge('{branch}', '{thread}', '{new}')`, named: true},
	"thread_prune_many(text[],boolean)":                        {sql: `SELECT pgcheckpoint.thread_prune_many(ARRAY['{thread}', '{branch}'], false)`},
	"quoted_text(text)":                                        {sql: `SELECT pgcheckpoint.quoted_text('{thread}')`, note: "reads no table", echoes: true},
	"thread_rewind_to_step(text,text,bigint)":                  {sql: `SELECT * FROM pgcheckpoint.thread_rewind_to_step('{thread}', '', 1)`, named: true},
	"thread_refuse_plaintext(text,boolean)":                    {sql: `SELECT pgcheckpoint.thread_refuse_plaintext('{thread}', false)`, note: "reads the caller's own data keys"},
	"thread_sealed(text)":                                      {sql: `SELECT * FROM pgcheckpoint.thread_sealed('{thread}')`, note: "reads the caller's own data keys"},
	"thread_set_expiry(text,timestamp with time zone,boolean)": {sql: `SELECT pgcheckpoint.thread_set_expiry('{thread}', NULL, false)`},
	"thread_tree(text)":                                        {sql: `SELECT * FROM pgcheckpoint.thread_tree('{thread}')`, named: true},
	"unescaped_text(text,text)":                                {sql: `SELECT pgcheckpoint.unescaped_text('x')`, note: "reads no table"},
	"uuid_v7(timestamp with time zone)":                        {sql: `SELECT pgcheckpoint.uuid_v7() IS NOT NULL`, note: "reads no table"},
}

var (
	uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timePattern = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[.0-9]*( \+\d{4} \w+)?`)
)

// runProbe runs p in its own transaction (a CALL outside one), with tenant
// set transaction-locally unless it is "", and returns its result as text
// with ids and times replaced (to compare two runs), the raw text (to look
// for A's ids) and the SQLSTATE of its error.
func runProbe(t *testing.T, ctx context.Context, pool *pgxpool.Pool, tenant string, p sqlProbe, x tenantData, newID uuid.UUID) (norm, raw, state string) {
	t.Helper()
	r := strings.NewReplacer("{thread}", x.thread, "{branch}", x.branch, "{id0}", x.ids[0].String(), "{id1}", x.ids[1].String(),
		"{id2}", x.ids[2].String(), "{id3}", x.ids[3].String(), "{sub}", x.subID.String(), "{head}", x.branchHead.String(), "{new}", newID.String())
	sql := r.Replace(p.sql)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var out []string
	run := func(q pgx.Tx) error {
		rows, err := q.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				return err
			}
			for i, x := range v {
				if id, ok := x.([16]byte); ok {
					v[i] = uuid.UUID(id).String()
				}
			}
			out = append(out, fmt.Sprint(v))
		}
		return rows.Err()
	}
	if strings.HasPrefix(sql, "CALL") {
		if tenant != "" {
			sql = strings.TrimSuffix(sql, ")") + ", p_tenant => " + quoteLiteral(tenant) + ")"
		}
		_, err = conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	} else {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if tenant != "" {
				if _, err := tx.Exec(ctx, "SELECT set_config('pgcheckpoint.tenant', $1, true)", tenant); err != nil {
					return err
				}
			}
			return run(tx)
		})
	}
	state = sqlState(err)
	if err != nil && state == "" {
		t.Fatalf("%s: %v", sql, err)
	}
	raw = strings.Join(out, "\n")
	norm = timePattern.ReplaceAllString(uuidPattern.ReplaceAllString(raw, "<uuid>"), "<time>")
	return norm, raw, state
}

// Tenant B calls every SQL function of the API (listed from pg_proc) with
// tenant A's thread ids and checkpoint ids, as the application role, and
// sees, changes and learns nothing: no id or content of A in any result;
// where A's object is named, PC001 or no row; the same answer as tenant C
// gets in a database where A never wrote (ids and times aside); and every
// row of A byte-identical afterwards, as the operator reads them. A
// session with no tenant set gets the same nothing, and writes nothing.
func TestTenantsSQLFunctionsKeptApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := setupTenants(t)
	app := rolePool(t, ts.appURL)
	operator := rolePool(t, ts.operatorURL)
	x := writeTenantData(t, ctx, tenantEngine(t, app, postgres.Options{}, "tenant-a"))

	// The list is the catalog's.
	rows, err := app.Query(ctx, `SELECT substr(p.oid::regprocedure::text, length('pgcheckpoint.') + 1) FROM pg_proc p
		WHERE p.pronamespace = 'pgcheckpoint'::regnamespace ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	funcs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range funcs {
		if _, ok := sqlProbes[f]; !ok {
			t.Errorf("function %s is not in sqlProbes: add how tenant B calls it with A's ids", f)
		}
	}
	for f := range sqlProbes {
		if !slices.Contains(funcs, f) {
			t.Errorf("sqlProbes names %s, which the schema does not have", f)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Tenant C in a database where A never wrote: what B's answers must
	// equal.
	ghost := setupTenants(t)
	ghostApp := rolePool(t, ghost.appURL)

	before := tenantRows(t, operator, "tenant-a")
	aIDs := append([]uuid.UUID{x.subID, x.branchHead}, x.ids...)
	for _, tenant := range []string{"tenant-b", ""} {
		who := "tenant B"
		if tenant == "" {
			who = "a session with no tenant"
		}
		for _, f := range funcs {
			p := sqlProbes[f]
			newID := uuid.Must(uuid.NewV7())
			norm, raw, state := runProbe(t, ctx, app, tenant, p, x, newID)
			for _, id := range aIDs {
				if p.echoes && strings.Contains(p.sql, "{id3}") && id == x.ids[3] {
					continue
				}
				if strings.Contains(raw, id.String()) {
					t.Errorf("%s, %s: the result holds A's checkpoint %s:\n%s", who, f, id, raw)
				}
			}
			if strings.Contains(raw, secret) {
				t.Errorf("%s, %s: the result holds A's content:\n%s", who, f, raw)
			}
			switch {
			case state == "PC001":
			case state != "" && tenant == "":
				// No tenant: nothing may be written (42501), a sweep has no
				// tenant (PC003).
				if state != "42501" && state != "PC003" {
					t.Errorf("%s, %s: SQLSTATE %s, want PC001, 42501 or PC003", who, f, state)
				}
			case state != "":
				t.Errorf("%s, %s: SQLSTATE %s", who, f, state)
			case p.named && strings.Trim(raw, "[]<nil> \n") != "" && raw != "[0]":
				t.Errorf("%s, %s names A's object: got %q, want PC001 or nothing", who, f, raw)
			}
			gNorm, _, gState := runProbe(t, ctx, ghostApp, strings.Replace(tenant, "tenant-b", "tenant-c", 1), p, x, newID)
			if gNorm != norm || gState != state {
				t.Errorf("%s, %s: answers %q (SQLSTATE %q) where A's rows are, %q (%q) where they are not", who, f, norm, state, gNorm, gState)
			}
		}
	}
	if after := tenantRows(t, operator, "tenant-a"); after != before {
		t.Errorf("tenant A's rows changed:\nbefore %s\nafter  %s", before, after)
	}

	// With no tenant, every table reads empty and takes no row.
	for _, table := range []string{"checkpoints", "pending_writes", "threads", "thread_locks"} {
		var n int
		if err := app.QueryRow(ctx, "SELECT count(*) FROM pgcheckpoint."+table).Scan(&n); err != nil || n != 0 {
			t.Errorf("no tenant: %d rows of %s (%v), want 0", n, table, err)
		}
		if _, err := app.Exec(ctx, "UPDATE pgcheckpoint."+table+" SET tenant_id = 'tenant-b'"); err != nil {
			t.Errorf("no tenant: update %s: %v", table, err)
		}
		if _, err := app.Exec(ctx, "DELETE FROM pgcheckpoint."+table); err != nil {
			t.Errorf("no tenant: delete %s: %v", table, err)
		}
	}
	for _, stmt := range []string{
		`INSERT INTO pgcheckpoint.threads (thread_id) VALUES ('x')`,
		`INSERT INTO pgcheckpoint.threads (tenant_id, thread_id) VALUES ('tenant-a', 'x')`,
		`INSERT INTO pgcheckpoint.thread_locks (tenant_id, thread_id) VALUES ('tenant-a', 'x')`,
	} {
		if _, err := app.Exec(ctx, stmt); sqlState(err) != "42501" && sqlState(err) != "23502" {
			t.Errorf("no tenant: %s: %v, want 42501 (row-level security) or 23502 (no tenant_id)", stmt, err)
		}
	}
	// Tenant B cannot write a row of A's, nor move its own to A.
	for _, stmt := range []string{
		`INSERT INTO pgcheckpoint.threads (tenant_id, thread_id) VALUES ('tenant-a', 'x')`,
		`UPDATE pgcheckpoint.threads SET tenant_id = 'tenant-a'`,
	} {
		err := pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT set_config('pgcheckpoint.tenant', 'tenant-b', true)"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, stmt)
			return err
		})
		if sqlState(err) != "42501" {
			t.Errorf("tenant B: %s: %v, want 42501", stmt, err)
		}
	}
	if after := tenantRows(t, operator, "tenant-a"); after != before {
		t.Errorf("tenant A's rows changed:\nbefore %s\nafter  %s", before, after)
	}
}

// Two tenants hold the same thread id and the same checkpoint ids (B
// imports A's export): each reads, lists and deletes its own; the keys
// (thread_id, tenant_id) hold both.
func TestTenantsShareThreadAndCheckpointIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := setupTenants(t)
	app := rolePool(t, ts.appURL)
	operator := rolePool(t, ts.operatorURL)
	a := tenantEngine(t, app, postgres.Options{}, "tenant-a")
	b := tenantEngine(t, app, postgres.Options{}, "tenant-b")
	x := writeTenantData(t, ctx, a)
	if _, err := b.Import(ctx, strings.NewReader(string(x.export)), engine.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	var tenants []string
	if err := operator.QueryRow(ctx, `SELECT array_agg(tenant_id ORDER BY tenant_id) FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, x.ids[3]).Scan(&tenants); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tenants, []string{"tenant-a", "tenant-b"}) {
		t.Fatalf("checkpoint %s is in tenants %v, want both", x.ids[3], tenants)
	}
	// B writes on, rewinds and deletes its copy; A's stays as it was.
	before := tenantRows(t, operator, "tenant-a")
	if _, err := b.Snapshot(ctx, engine.SnapshotInput{ThreadID: x.thread, Messages: json.RawMessage(`[{"role":"user","content":"b"}]`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Rewind(ctx, x.ids[1]); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, x.ids[3])
	if err != nil || got.ThreadID != x.thread {
		t.Fatalf("B's Get of the shared id: %v, %v", got, err)
	}
	if _, err := b.DeleteThreads(ctx, x.thread); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, x.ids[3]); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("B's Get after B deleted its thread: %v, want ErrNotFound", err)
	}
	if after := tenantRows(t, operator, "tenant-a"); after != before {
		t.Errorf("tenant A's rows changed:\nbefore %s\nafter  %s", before, after)
	}
	if c, err := a.Get(ctx, x.ids[3]); err != nil || !strings.Contains(string(c.Messages), secret) {
		t.Fatalf("A's Get: %v", err)
	}
}

// The application role runs without BYPASSRLS or SUPERUSER, and so do the
// owner and the read-only role; the operator has BYPASSRLS and reads every
// tenant; the read-only role reads only the tenant it sets.
func TestTenantsRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := setupTenants(t)
	app := rolePool(t, ts.appURL)
	for _, c := range []struct {
		url    string
		bypass bool
	}{{ts.appURL, false}, {ts.readURL, false}, {ts.ownerURL, false}, {ts.operatorURL, true}} {
		p := rolePool(t, c.url)
		var super, bypass bool
		var name string
		if err := p.QueryRow(ctx, "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user").Scan(&name, &super, &bypass); err != nil {
			t.Fatal(err)
		}
		if super || bypass != c.bypass {
			t.Errorf("role %s: superuser %v, BYPASSRLS %v; want no superuser, BYPASSRLS %v", name, super, bypass, c.bypass)
		}
	}
	// Every table but the version table is held by row-level security,
	// forced, under a policy; every view reads as its reader (a view runs
	// as its owner otherwise, whom a superuser's install leaves unheld).
	var unheld []string
	if err := ts.db.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(c.relname ORDER BY c.relname), '{}') FROM pg_class c
		WHERE c.relnamespace = 'pgcheckpoint'::regnamespace AND c.relname <> 'schema_migrations' AND (
		      (c.relkind = 'r' AND NOT (c.relrowsecurity AND c.relforcerowsecurity AND EXISTS (SELECT FROM pg_policy p WHERE p.polrelid = c.oid)))
		   OR (c.relkind = 'v' AND NOT coalesce('security_invoker=true' = ANY (c.reloptions), false))
		   OR c.relkind NOT IN ('r', 'v', 'i'))`).Scan(&unheld); err != nil {
		t.Fatal(err)
	}
	if len(unheld) > 0 {
		t.Errorf("relations that row-level security does not hold: %v", unheld)
	}
	x := writeTenantData(t, ctx, tenantEngine(t, app, postgres.Options{}, "tenant-a"))
	if _, err := tenantEngine(t, app, postgres.Options{}, "tenant-b").Snapshot(ctx, engine.SnapshotInput{ThreadID: x.thread}); err != nil {
		t.Fatal(err)
	}
	count := func(p *pgxpool.Pool, tenant string) (n int) {
		t.Helper()
		err := pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT set_config('pgcheckpoint.tenant', $1, true)", tenant); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SELECT count(*) FROM pgcheckpoint.checkpoint_info").Scan(&n)
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ro, op := rolePool(t, ts.readURL), rolePool(t, ts.operatorURL)
	if a, b, none := count(ro, "tenant-a"), count(ro, "tenant-b"), count(ro, ""); a != 7 || b != 1 || none != 0 {
		t.Errorf("the read-only role sees %d, %d and %d checkpoints in tenants a, b and none; want 7, 1, 0", a, b, none)
	}
	if all := count(op, ""); all != 8 {
		t.Errorf("the operator sees %d checkpoints, want 8 (every tenant)", all)
	}
	if _, err := op.Exec(ctx, "DELETE FROM pgcheckpoint.checkpoints"); sqlState(err) != "42501" {
		t.Errorf("the operator deletes: %v, want 42501 (it only reads)", err)
	}
}

// Through PgBouncer in transaction mode with one server connection, which
// tenant A's and tenant B's sessions and a session with no tenant share:
// each writes and reads its own thread of the same id, never the other's,
// and the tenant of one transaction never reaches the next (the setting is
// transaction-local), in every write path.
func TestTenantsBehindPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := setupTenants(t)
	via := startPgBouncerPool(t, ts.appURL, 1)
	pool := poolOf(t, via+"&default_query_exec_mode=exec", 8)
	const n = 30
	var wg sync.WaitGroup
	ids := map[string][]uuid.UUID{}
	var mu sync.Mutex
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		for _, single := range []bool{false, true} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e := tenantEngine(t, pool, postgres.Options{SingleStatement: single}, tenant)
				thread := fmt.Sprintf("shared-%v", single)
				for i := range n {
					r, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread,
						Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"%s %d"}]`, tenant, i))})
					if err != nil {
						t.Errorf("%s: %v", tenant, err)
						return
					}
					mu.Lock()
					ids[tenant] = append(ids[tenant], r.ID)
					mu.Unlock()
					c, err := e.Latest(ctx, thread)
					if err != nil || !strings.Contains(string(c.Messages), tenant) || c.Step != int64(i+1) {
						t.Errorf("%s: latest of %s: step %d, %s (%v)", tenant, thread, c.Step, c.Messages, err)
						return
					}
				}
			}()
		}
	}
	// Meanwhile, sessions with no tenant on the same server connection.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 3 * n {
			var setting *string
			var seen int
			if err := pool.QueryRow(ctx, `SELECT current_setting('pgcheckpoint.tenant', true),
				(SELECT count(*) FROM pgcheckpoint.checkpoints) + (SELECT count(*) FROM pgcheckpoint.threads)`).Scan(&setting, &seen); err != nil {
				t.Error(err)
				return
			}
			if (setting != nil && *setting != "") || seen != 0 {
				t.Errorf("a session with no tenant reads tenant %v and %d rows", *setting, seen)
				return
			}
		}
	}()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	a := tenantEngine(t, pool, postgres.Options{}, "tenant-a")
	b := tenantEngine(t, pool, postgres.Options{}, "tenant-b")
	for _, id := range ids["tenant-a"] {
		if _, err := b.Get(ctx, id); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("B gets A's checkpoint: %v", err)
		}
		if _, err := a.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []*engine.Engine{a, b} {
		threads, err := e.ListThreads(ctx, engine.ThreadListOptions{})
		if err != nil || len(threads) != 2 {
			t.Fatalf("%s lists %d threads (%v), want 2", e.Tenant(), len(threads), err)
		}
		for _, th := range threads {
			if th.HeadStep != n {
				t.Errorf("%s: thread %s at step %d, want %d", e.Tenant(), th.ThreadID, th.HeadStep, n)
			}
		}
	}
}

// The tenant holds at every isolation level a database may default to:
// tenants A and B write the same thread id at once through both write
// paths (40001 retried by the engine: under SERIALIZABLE, predicate locks
// on shared index pages make one tenant's writes fail another's now and
// then, which a retry clears), each reads its own line alone; in
// a caller's transaction (WithTx) the tenant is set for the transaction,
// and gone after it.
func TestTenantsAtEveryIsolationLevel(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"read committed", "repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ts := setupTenants(t)
			if _, err := ts.db.Pool.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET default_transaction_isolation = '%s'`,
				pgx.Identifier{ts.db.Name}.Sanitize(), level)); err != nil {
				t.Fatal(err)
			}
			pool := rolePool(t, ts.appURL)
			var got string
			if err := pool.QueryRow(ctx, "SHOW transaction_isolation").Scan(&got); err != nil || got != level {
				t.Fatalf("isolation %q (%v), want %q", got, err, level)
			}
			const n = 15
			var wg sync.WaitGroup
			for _, tenant := range []string{"tenant-a", "tenant-b"} {
				for _, single := range []bool{false, true} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						e := tenantEngineWith(t, pool, postgres.Options{SingleStatement: single}, engine.Config{DeltaMinBytes: -1, Retry: retryHard}, tenant)
						for i := range n {
							if _, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "shared",
								Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"%s %d"}]`, tenant, i))}); err != nil {
								t.Errorf("%s: %v", tenant, err)
								return
							}
						}
					}()
				}
			}
			wg.Wait()
			for _, tenant := range []string{"tenant-a", "tenant-b"} {
				e := tenantEngine(t, pool, postgres.Options{}, tenant)
				list, err := e.ListCheckpoints(ctx, "shared", engine.ListOptions{Limit: 100})
				if err != nil || len(list) != 2*n || list[0].Step != 2*n {
					t.Fatalf("%s: %d checkpoints (%v), want %d, the newest at step %d", tenant, len(list), err, 2*n, 2*n)
				}
				for _, c := range list {
					full, err := e.Get(ctx, c.ID)
					if err != nil || !strings.Contains(string(full.Messages), tenant) {
						t.Fatalf("%s reads %s: %s (%v)", tenant, c.ID, full.Messages, err)
					}
				}
			}

			// WithTx: the caller's transaction runs in the engine's tenant.
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			inTx, err := tenantEngine(t, pool, postgres.Options{}, "tenant-b").WithTx(tx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := inTx.Snapshot(ctx, engine.SnapshotInput{ThreadID: "in-tx"}); err != nil {
				t.Fatal(err)
			}
			var tenant string
			var threads int
			if err := tx.QueryRow(ctx, `SELECT current_setting('pgcheckpoint.tenant'), (SELECT count(DISTINCT thread_id) FROM pgcheckpoint.threads)`).Scan(&tenant, &threads); err != nil {
				t.Fatal(err)
			}
			if tenant != "tenant-b" || threads != 2 {
				t.Fatalf("in the caller's transaction: tenant %q, %d threads; want tenant-b, 2", tenant, threads)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			var after *string
			if err := pool.QueryRow(ctx, `SELECT nullif(current_setting('pgcheckpoint.tenant', true), '')`).Scan(&after); err != nil || after != nil {
				t.Fatalf("after the transaction: tenant %v (%v), want none", after, err)
			}
		})
	}
}

// A sweep (thread_gc_sweep, as a pg_cron job calls it) runs in one
// tenant: p_tenant's, set again in each batch's transaction, else the
// session's; with neither it refuses (PC003) and changes nothing.
func TestTenantsSweepOneTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := setupTenants(t)
	app := rolePool(t, ts.appURL)
	operator := rolePool(t, ts.operatorURL)
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		e := tenantEngine(t, app, postgres.Options{}, tenant)
		for i := range 4 {
			for _, thread := range []string{"t1", "t2", "t3"} {
				if _, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, State: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	counts := func() (a, b int) {
		t.Helper()
		if err := operator.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tenant_id = 'tenant-a'), count(*) FILTER (WHERE tenant_id = 'tenant-b')
			FROM pgcheckpoint.checkpoints`).Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	if _, err := app.Exec(ctx, `CALL pgcheckpoint.thread_gc_sweep('keep_last_n', 1)`); sqlState(err) != "PC003" {
		t.Fatalf("a sweep with no tenant: %v, want PC003", err)
	}
	if a, b := counts(); a != 12 || b != 12 {
		t.Fatalf("after a sweep with no tenant: %d and %d checkpoints, want 12 and 12", a, b)
	}
	// Batches of one thread: three transactions, each with the tenant set
	// again.
	if _, err := app.Exec(ctx, `CALL pgcheckpoint.thread_gc_sweep('keep_last_n', 1, p_batch_size => 1, p_tenant => 'tenant-a')`); err != nil {
		t.Fatal(err)
	}
	if a, b := counts(); a != 3 || b != 12 {
		t.Fatalf("after tenant A's sweep: %d and %d checkpoints, want 3 and 12", a, b)
	}
	conn, err := app.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET pgcheckpoint.tenant = 'tenant-b'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CALL pgcheckpoint.thread_gc_sweep('keep_last_n', 2, p_batch_size => 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `RESET pgcheckpoint.tenant`); err != nil {
		t.Fatal(err)
	}
	if a, b := counts(); a != 3 || b != 6 {
		t.Fatalf("after tenant B's sweep (session setting): %d and %d checkpoints, want 3 and 6", a, b)
	}
}

// The Get and head queries read through the views of the session's
// tenant, which keep tenants apart where row-level security does not: in a
// superuser's session (the tests' pool's, unless PGCHECKPOINT_TEST_HELD_ROLE
// is set). Tenant B's Get of A's checkpoint and its Latest of A's thread
// find nothing; A reads both.
func TestTenantsGetAndHeadThroughViews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	a := tenantEngine(t, d.Pool, postgres.Options{}, "tenant-a")
	b := tenantEngine(t, d.Pool, postgres.Options{}, "tenant-b")
	x := writeTenantData(t, ctx, a)
	if c, err := b.Get(ctx, x.ids[3]); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("B's Get of A's checkpoint: %v, %v; want ErrNotFound", c, err)
	}
	if c, err := b.Latest(ctx, x.thread); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("B's Latest of A's thread: %v, %v; want ErrNotFound", c, err)
	}
	if c, err := a.Get(ctx, x.ids[3]); err != nil || !strings.Contains(string(c.Messages), secret) {
		t.Fatalf("A's Get: %v, %v", c, err)
	}
	if c, err := a.Latest(ctx, x.thread); err != nil || c.ID != x.ids[3] {
		t.Fatalf("A's Latest: %v, %v; want %s", c, err, x.ids[3])
	}
}
