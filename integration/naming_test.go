package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/enginedb"
)

// threadLockTable holds the thread locks' rows, which the SQL function
// pgcheckpoint.thread_lock alone takes (tests look for it).
const threadLockTable = "thread_locks"

// deprecatedRE matches the comment of a deprecated alias.
var deprecatedRE = regexp.MustCompile(`^Deprecated: use pgcheckpoint\.([a-z0-9_]+); removed in a later release\.$`)

type routineRow struct {
	name, args, kind, volatile, result, def, comment string
	publicExec                                       bool
}

func routines(t *testing.T, b *bundle) []routineRow {
	t.Helper()
	rows, err := b.db.Pool.Query(b.ctx, `
		SELECT p.proname, substring(p.oid::regprocedure::text FROM '\(.*\)$'), p.prokind::text, p.provolatile::text,
		       coalesce(pg_get_function_result(p.oid), ''),
		       CASE WHEN p.prokind = 'a' THEN '' ELSE pg_get_functiondef(p.oid) END, -- it refuses aggregates
		       coalesce(obj_description(p.oid, 'pg_proc'), ''),
		       EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
		               WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
		FROM pg_proc p WHERE p.pronamespace = 'pgcheckpoint'::regnamespace
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (routineRow, error) {
		var x routineRow
		return x, r.Scan(&x.name, &x.args, &x.kind, &x.volatile, &x.result, &x.def, &x.comment, &x.publicExec)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The naming rule of the SQL API (README, "Names"): entity first,
// thread_, checkpoint_, pending_write(s)_ or retention_policy_, then the
// verb and a qualifier (_many for a set); a helper that computes a value is
// named by the value. Old names live on only as deprecated aliases.
func TestRoutineNamesFollowTheRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entityFirst := regexp.MustCompile(`^(thread|checkpoint|pending_writes?|retention_policy)_[a-z0-9_]+$`)
	values := []string{"delta_chain", "delta_keys", "delta_merge", "delta_merge_step", "delta_run_continues", "json_text", "key_digests",
		"message_chain", "message_chain_at", "message_digests", "message_summary", "run_anchor", "unescaped_text", "uuid_v7"}
	for _, r := range routines(t, b) {
		if entityFirst.MatchString(r.name) || slices.Contains(values, r.name) || deprecatedRE.MatchString(r.comment) {
			continue
		}
		t.Errorf("routine pgcheckpoint.%s%s breaks the naming rule (entity first: thread_, checkpoint_, pending_write(s)_; or a value helper named by its value)", r.name, r.args)
	}
}

// Each deprecated alias keeps an old name callable for a release: it takes
// the same arguments as its new name, returns the same, has the same
// volatility and PUBLIC's EXECUTE exactly when the new name has it, and
// calls it. Nothing of pgcheckpoint's own calls an alias.
func TestDeprecatedAliasesCallTheNewNames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	all := routines(t, b)
	var aliases []string
	for _, a := range all {
		m := deprecatedRE.FindStringSubmatch(a.comment)
		if m == nil {
			continue
		}
		aliases = append(aliases, a.name)
		i := slices.IndexFunc(all, func(r routineRow) bool { return r.name == m[1] && r.args == a.args })
		if i < 0 {
			t.Errorf("alias %s%s: no %s%s", a.name, a.args, m[1], a.args)
			continue
		}
		n := all[i]
		if a.kind != n.kind || a.volatile != n.volatile || a.result != n.result || a.publicExec != n.publicExec {
			t.Errorf("alias %s: kind %s volatile %s returns %q PUBLIC may execute %v; %s: %s %s %q %v",
				a.name, a.kind, a.volatile, a.result, a.publicExec, n.name, n.kind, n.volatile, n.result, n.publicExec)
		}
		if !strings.Contains(a.def, "pgcheckpoint."+n.name+"(") {
			t.Errorf("alias %s does not call %s:\n%s", a.name, n.name, a.def)
		}
	}
	if len(aliases) == 0 {
		t.Fatal("no deprecated alias")
	}
	calls := regexp.MustCompile(`pgcheckpoint\.(` + strings.Join(aliases, "|") + `)\s*\(`)
	for _, r := range all {
		if !deprecatedRE.MatchString(r.comment) && calls.MatchString(r.def) {
			t.Errorf("pgcheckpoint.%s calls a deprecated alias: %s", r.name, calls.FindString(r.def))
		}
	}
	files, _ := filepath.Glob("../queries/*/*.sql")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := calls.Find(src); m != nil {
			t.Errorf("%s calls a deprecated alias: %s", f, m)
		}
	}

	// The old names answer as the new ones.
	first := b.snap(t, engine.SnapshotInput{ThreadID: "old", Messages: json.RawMessage(`[{"role":"user","content":"a"}]`)})
	b.snap(t, engine.SnapshotInput{ThreadID: "old", Messages: json.RawMessage(`[{"role":"user","content":"a"},{"role":"user","content":"b"}]`)})
	for _, pair := range [][2]string{
		{`SELECT pgcheckpoint.head('old')::text`, `SELECT pgcheckpoint.thread_head('old')::text`},
		{`SELECT pgcheckpoint.head_seq('old')::text`, `SELECT pgcheckpoint.thread_head_seq('old')::text`},
		{`SELECT string_agg(l::text, ';') FROM pgcheckpoint.lineage(pgcheckpoint.head('old')) l`,
			`SELECT string_agg(l::text, ';') FROM pgcheckpoint.checkpoint_lineage(pgcheckpoint.thread_head('old')) l`},
		{`SELECT string_agg(x::text, ';') FROM pgcheckpoint.tree('old') x`, `SELECT string_agg(x::text, ';') FROM pgcheckpoint.thread_tree('old') x`},
		{`SELECT m::text FROM pgcheckpoint.materialize('` + first.ID.String() + `') m`,
			`SELECT m::text FROM pgcheckpoint.checkpoint_materialize('` + first.ID.String() + `') m`},
	} {
		var old, cur string
		if err := b.db.Pool.QueryRow(b.ctx, pair[0]).Scan(&old); err != nil {
			t.Fatalf("%s: %v", pair[0], err)
		}
		if err := b.db.Pool.QueryRow(b.ctx, pair[1]).Scan(&cur); err != nil {
			t.Fatalf("%s: %v", pair[1], err)
		}
		if old != cur || old == "" {
			t.Errorf("%s gives %q, %s gives %q", pair[0], old, pair[1], cur)
		}
	}
	// The procedure commits after each batch, through the alias too (a
	// SQL-language alias would run it in an atomic context, where its
	// COMMIT fails).
	if _, err := b.db.Pool.Exec(b.ctx, `CALL pgcheckpoint.gc_sweep('keep_last_n', 1, NULL, 1)`); err != nil {
		t.Fatalf("CALL gc_sweep: %v", err)
	}
	if n := len(b.left(t, "old")); n != 1 {
		t.Fatalf("gc_sweep keep_last_n 1 left %d checkpoints", n)
	}
}

// The thread lock is written once, in pgcheckpoint.thread_lock: no other
// routine and no query names its table, but thread_delete, which deletes
// a deleted thread's row, and the write pipeline's CheckpointWriteLock,
// which inlines thread_lock's common case and calls it for the rest.
func TestThreadLockIsWrittenOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, r := range routines(t, b) {
		if r.name != "thread_lock" && r.name != "thread_delete" && strings.Contains(r.def, threadLockTable) {
			t.Errorf("pgcheckpoint.%s names the thread lock's table; call pgcheckpoint.thread_lock or thread_lock_many", r.name)
		}
	}
	files, _ := filepath.Glob("../queries/*.sql")
	internal, _ := filepath.Glob("../queries/internal/*.sql")
	files = append(files, internal...)
	if len(internal) == 0 {
		t.Fatal("no queries/*.sql")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range strings.Split(string(src), "-- name: ")[1:] {
			if !strings.HasPrefix(q, "CheckpointWriteLock ") && strings.Contains(q, threadLockTable) {
				t.Errorf("%s: %s names the thread lock's table; call pgcheckpoint.thread_lock", f, strings.Fields(q)[0])
			}
		}
	}
	if !strings.Contains(enginedb.CheckpointWriteLock, "pgcheckpoint.thread_lock(") {
		t.Errorf("CheckpointWriteLock does not call pgcheckpoint.thread_lock:\n%s", enginedb.CheckpointWriteLock)
	}
}

// thread_lock_many takes its locks in one order, the lock keys'
// (hashtext of the thread id, then the id), so that two callers never
// deadlock: while another session holds one thread's lock, a caller
// waiting for it holds exactly the locks of lower keys.
func TestThreadLockManyTakesTheLocksInKeyOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	threads := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	keys := map[string]int32{}
	for _, th := range threads {
		var k int32
		if err := b.db.Pool.QueryRow(ctx, `SELECT hashtext($1)`, th).Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys[th] = k
	}
	// Every lock row made beforehand: a row the waiter inserts is not
	// visible to the session that looks.
	if _, err := b.db.Pool.Exec(ctx, `SELECT pgcheckpoint.thread_lock_many($1)`, threads); err != nil {
		t.Fatal(err)
	}
	byKey := slices.Clone(threads)
	sort.Slice(byKey, func(i, j int) bool {
		if keys[byKey[i]] != keys[byKey[j]] {
			return keys[byKey[i]] < keys[byKey[j]]
		}
		return byKey[i] < byKey[j]
	})
	blocker := byKey[len(byKey)/2]
	want := slices.Sorted(slices.Values(byKey[:len(byKey)/2]))

	holder, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `SELECT pgcheckpoint.thread_lock($1)`, blocker); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	pid := conn.PgConn().PID()
	// Reverse key order, with a repeat and a NULL.
	arg := append(slices.Clone(byKey), byKey[0])
	slices.Reverse(arg)
	done := make(chan error, 1)
	go func() {
		tx, err := conn.Begin(ctx)
		if err == nil {
			_, err = tx.Exec(ctx, `SELECT pgcheckpoint.thread_lock_many(array_append($1::text[], NULL))`, arg)
			tx.Rollback(ctx)
		}
		done <- err
	}()
	// The rows the waiter has taken: their versions visible here name its
	// transaction as their updater.
	held := func() []string {
		rows, err := b.db.Pool.Query(ctx, `SELECT l.thread_id FROM pgcheckpoint.`+threadLockTable+` l
			WHERE l.xmax::text = (SELECT a.backend_xid::text FROM pg_stat_activity a WHERE a.pid = $1) ORDER BY 1`, pid)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting bool
		if err := b.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread_lock_many never waited for %s's lock", blocker)
		}
	}
	if got := held(); !slices.Equal(got, want) {
		t.Fatalf("waiting for %s (key %d), thread_lock_many holds %v; want the threads of lower keys %v", blocker, keys[blocker], got, want)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
