package integration

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/internal/enginedb"
)

// threadLockTable holds the thread locks' rows, which the SQL function
// pgcheckpoint.thread_lock alone takes (tests look for it).
const threadLockTable = "thread_locks"

type routineRow struct {
	name, args, kind, volatile, result, def, comment string
	publicExec                                       bool
	src                                              string   // the body as written (prosrc)
	inNames                                          []string // the names of the input parameters, in order
}

func routines(t *testing.T, b *bundle) []routineRow {
	t.Helper()
	rows, err := b.db.Pool.Query(b.ctx, `
		SELECT p.proname, substring(p.oid::regprocedure::text FROM '\(.*\)$'), p.prokind::text, p.provolatile::text,
		       coalesce(pg_get_function_result(p.oid), ''),
		       CASE WHEN p.prokind = 'a' THEN '' ELSE pg_get_functiondef(p.oid) END, -- it refuses aggregates
		       coalesce(obj_description(p.oid, 'pg_proc'), ''),
		       EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
		               WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'),
		       p.prosrc,
		       coalesce((SELECT array_agg(a.name ORDER BY a.i)
		                 FROM unnest(p.proargnames, p.proargmodes) WITH ORDINALITY AS a(name, mode, i)
		                 WHERE coalesce(a.mode, 'i') IN ('i', 'b', 'v')), '{}')
		FROM pg_proc p WHERE p.pronamespace = 'pgcheckpoint'::regnamespace
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (routineRow, error) {
		var x routineRow
		return x, r.Scan(&x.name, &x.args, &x.kind, &x.volatile, &x.result, &x.def, &x.comment, &x.publicExec, &x.src, &x.inNames)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The naming rule of the SQL API (docs/sql.md, "Names"): entity first,
// thread_, checkpoint_, pending_write(s)_ or retention_policy_, then the
// verb and a qualifier (_many for a set); a helper that computes a value is
// named by the value. There are no other names (TestEachRoutineHasOneName).
func TestRoutineNamesFollowTheRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entityFirst := regexp.MustCompile(`^(thread|checkpoint|pending_writes?|retention_policy)_[a-z0-9_]+$`)
	values := []string{"current_tenant", "delta_chain", "delta_keys", "delta_merge", "delta_merge_step", "delta_run_continues", "json_compact_size", "json_text", "key_digests",
		"message_chain", "message_chain_at", "message_digests", "message_summary", "quoted_text", "run_anchor", "unescaped_text", "uuid_v7"}
	for _, r := range routines(t, b) {
		if entityFirst.MatchString(r.name) || slices.Contains(values, r.name) {
			continue
		}
		t.Errorf("routine pgcheckpoint.%s%s breaks the naming rule (entity first: thread_, checkpoint_, pending_write(s)_; or a value helper named by its value)", r.name, r.args)
	}
}

// wrapperRE matches a body that is one call of a pgcheckpoint routine and
// nothing else, in SQL or PL/pgSQL: what an alias's body is.
var wrapperRE = regexp.MustCompile(`(?is)^\s*(?:BEGIN\s+)?` +
	`(?:SELECT\s+(?:\*\s+FROM\s+)?|CALL\s+|PERFORM\s+|RETURN\s+(?:QUERY\s+SELECT\s+\*\s+FROM\s+)?)?` +
	`pgcheckpoint\.([a-z0-9_]+)\s*\(([^()]*)\)\s*;?\s*(?:END\s*;?\s*)?$`)

// aliasOf returns the routine that r only calls with its own arguments, in
// order (r is then another name for it), or "".
func aliasOf(r routineRow) string {
	m := wrapperRE.FindStringSubmatch(r.src)
	if m == nil || m[1] == r.name {
		return ""
	}
	var args []string
	if strings.TrimSpace(m[2]) != "" {
		for _, a := range strings.Split(m[2], ",") {
			args = append(args, strings.TrimSpace(a))
		}
	}
	if !slices.Equal(args, r.inNames) {
		return ""
	}
	return m[1]
}

// Each routine of the SQL API has one name (docs/sql.md, "Names"): nothing has
// been released, so no old name is kept as a deprecated alias. No comment
// says Deprecated, no name is overloaded (\df shows each once), and no
// routine is only a call of another with its own arguments.
func TestEachRoutineHasOneName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	all := routines(t, b)
	if len(all) < 40 {
		t.Fatalf("only %d routines in schema pgcheckpoint", len(all))
	}
	seen := map[string]string{}
	for _, r := range all {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(r.comment)), "deprecated") {
			t.Errorf("pgcheckpoint.%s%s is deprecated (%q): drop it in a migration, there are no aliases before 1.0", r.name, r.args, r.comment)
		}
		if args, ok := seen[r.name]; ok {
			t.Errorf("pgcheckpoint.%s is overloaded: %s and %s; give each routine a name of its own", r.name, args, r.args)
		}
		seen[r.name] = r.args
		if target := aliasOf(r); target != "" {
			t.Errorf("pgcheckpoint.%s%s only calls pgcheckpoint.%s with its own arguments: it is another name for it; call %s", r.name, r.args, target, target)
		}
	}
}

// aliasOf recognizes the shapes of alias the schema once had (the SQL ones
// and the PL/pgSQL procedure), and no more than a call with the caller's
// own arguments: TestEachRoutineHasOneName cannot pass for want of a match.
func TestAliasOfFindsWrappers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src  string
		args []string
		want string
	}{
		{` SELECT * FROM pgcheckpoint.thread_branch(p_source_id, p_new_thread_id, p_branch_name, p_checkpoint_id) `,
			[]string{"p_source_id", "p_new_thread_id", "p_branch_name", "p_checkpoint_id"}, "thread_branch"},
		{` SELECT pgcheckpoint.thread_head(p_thread_id, p_namespace) `, []string{"p_thread_id", "p_namespace"}, "thread_head"},
		{` BEGIN CALL pgcheckpoint.thread_gc_sweep(p_policy, p_n, p_age, p_batch_size, p_time_budget, p_pause); END `,
			[]string{"p_policy", "p_n", "p_age", "p_batch_size", "p_time_budget", "p_pause"}, "thread_gc_sweep"},
		{"BEGIN\n    RETURN QUERY SELECT * FROM pgcheckpoint.checkpoint_rewind(p_checkpoint_id, p_truncate);\nEND;\n",
			[]string{"p_checkpoint_id", "p_truncate"}, "checkpoint_rewind"},
		// Not aliases: other arguments, more than a call, no call.
		{` SELECT pgcheckpoint.thread_head(p_thread_id, '') `, []string{"p_thread_id", "p_namespace"}, ""},
		{` SELECT pgcheckpoint.thread_lock(t.id) FROM unnest(p_thread_ids) t(id) `, []string{"p_thread_ids"}, ""},
		{` SELECT pg_catalog.pg_advisory_xact_lock(1885563760, pg_catalog.hashtext(p_thread_id)) `, []string{"p_thread_id"}, ""},
	} {
		if got := aliasOf(routineRow{name: "x", src: c.src, inNames: c.args}); got != c.want {
			t.Errorf("aliasOf(%q) = %q, want %q", c.src, got, c.want)
		}
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
