package integration

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
)

// byThread matches a statement that names its thread: a filter of
// thread_id on a parameter or variable (= or = ANY), a thread id passed to
// a function, or an INSERT that gives the row's thread_id (its key: the
// tenant comes from the column's default, the session's tenant).
var byThread = regexp.MustCompile(`(?i)thread_id\s*(?:=|OPERATOR\(pg_catalog\.=\))\s*(?:ANY\s*\(\s*)?(?:@|p_|v_|\$|sqlc\.)` +
	`|@\w*thread_ids?\b` +
	`|INSERT INTO pgcheckpoint\.\w+(?:\s+AS\s+\w+)?\s*\(\s*thread_id`)

// globalCheckpointID is why a lookup by checkpoint id alone is allowed.
const globalCheckpointID = "looks up a checkpoint by id in the tenant: the key UNIQUE (checkpoint_id, tenant_id) answers it, " +
	"and the tenant comes from the setting (row-level security adds tenant_id = current_tenant()); the thread is known " +
	"only from the row found. On a cluster distributed by thread_id it runs on every shard " +
	"(each answers from its part of that index); distributed by tenant_id alone, on one"

// onTable matches a statement that names a table (or the view
// checkpoint_info) itself, not the view of the session's tenant
// (tenant_checkpoints, ...): row-level security alone would keep it to
// the tenant, which a superuser's or a BYPASSRLS session bypasses.
var onTable = regexp.MustCompile(`(?i)pgcheckpoint\.(checkpoints|threads|pending_writes|thread_locks|data_keys|checkpoint_info)\b`)

// notByThread lists every statement of queries/ and queries/internal and
// every SQL function body that reads or writes a table without naming a
// thread, with the reason. Every statement filters by tenant: it reads
// and writes through the views of the session's tenant,
// whose tenant_id = pgcheckpoint.current_tenant() joins the thread in the
// index condition; row-level security adds the same for the roles it
// holds.
var notByThread = map[string]string{
	"query CheckpointGetByID":              globalCheckpointID,
	"query CheckpointLineage":              globalCheckpointID + " (then its ancestors, in its thread and the threads it branched from)",
	"query CheckpointLineRange":            globalCheckpointID + " (then the rows before it in its thread, by key)",
	"query CheckpointRewind":               globalCheckpointID + " (then locks and changes its thread)",
	"query CheckpointImportIDsInUse":       globalCheckpointID + " (ids of an import, all of them)",
	"query CheckpointImportFind":           globalCheckpointID + " (a parent, merge parent or branch source an import links to)",
	"query CheckpointDeleteForRuns":        "deletes by run id (metadata), in every thread of the tenant: a run may span threads",
	"query ThreadListHeads":                "lists the tenant's threads, in thread id order (a page of keys)",
	"query DataKeyList":                    "lists the tenant's data keys, in thread id order (a page of keys, for RewrapKeys): one tenant, so one shard when distributed by tenant",
	"function checkpoint_delete_for_runs":  "deletes by run id (metadata), in every thread of the tenant; locks each thread it finds",
	"function checkpoint_delete_many":      globalCheckpointID + " (finds the ids' threads; checkpoint_delete_many_in then locks them and deletes by key)",
	"function checkpoint_lineage":          globalCheckpointID,
	"function checkpoint_line_range":       globalCheckpointID + " (then the rows before it in its thread, by key)",
	"function checkpoint_materialize":      globalCheckpointID,
	"function checkpoint_materialize_json": globalCheckpointID,
	"function delta_chain":                 globalCheckpointID + " (the base links of a delta stay in its thread)",
	"function run_anchor":                  globalCheckpointID + " (the anchor is checked to be in the same thread)",
	"function thread_gc_batch":             "picks the next threads of the tenant to sweep, in thread id order; each is then swept by its key",
	"function thread_gc_batch_oldest":      "picks the tenant's least recently swept threads (index (tenant_id, swept_at, thread_id)); each is then swept by its key",
	"function thread_tree":                 "a thread and the branches forked from it, found by branched_from_thread (index (branched_from_thread, tenant_id)): other threads of the tenant",
}

// Shaped for sharding: every key begins with (thread_id, tenant_id), and
// every statement the Go code runs (queries/, queries/internal) and every
// SQL function that touches a table names its thread, but those listed in
// notByThread with a reason. A new statement that does not, and a listed
// one that now does or is gone, fail the test; so does one that names a
// table itself rather than the view of the session's tenant.
func TestStatementsNameTheirThread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seen := map[string]bool{}
	check := func(what, body string) {
		seen[what] = true
		if m := onTable.FindString(body); m != "" {
			t.Errorf("%s names %s: read and write it through the view of the session's tenant (pgcheckpoint.tenant_%s), so that a session row-level security does not hold (a superuser's) is kept to its tenant too",
				what, m, strings.TrimPrefix(strings.ToLower(m), "pgcheckpoint."))
		}
		_, listed := notByThread[what]
		switch by := byThread.MatchString(body); {
		case !by && !listed:
			t.Errorf("%s names no thread: filter by thread_id, or list it in notByThread with the reason (and how it routes on a sharded cluster)", what)
		case by && listed:
			t.Errorf("%s names its thread now: take it off notByThread", what)
		}
	}
	files, err := filepath.Glob("../queries/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	internal, _ := filepath.Glob("../queries/internal/*.sql")
	files = append(files, internal...)
	name := regexp.MustCompile(`(?m)^-- name: (\w+)`)
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		starts := name.FindAllSubmatchIndex(text, -1)
		for i, m := range starts {
			end := len(text)
			if i+1 < len(starts) {
				end = starts[i+1][0]
			}
			var body []string
			for _, line := range strings.Split(string(text[m[1]:end]), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "--") {
					body = append(body, line)
				}
			}
			check("query "+string(text[m[2]:m[3]]), strings.Join(body, "\n"))
		}
	}
	d := pgtest.NewDB(t)
	rows, err := d.Pool.Query(ctx, `SELECT p.proname, p.prosrc FROM pg_proc p
		WHERE p.pronamespace = 'pgcheckpoint'::regnamespace
		  AND p.prosrc ~ 'pgcheckpoint\.(tenant_)?(checkpoints|threads|pending_writes|thread_locks|data_keys|checkpoint_info)\M'`)
	if err != nil {
		t.Fatal(err)
	}
	var fn, src string
	if _, err := pgx.ForEachRow(rows, []any{&fn, &src}, func() error {
		check("function "+fn, src)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for what := range notByThread {
		if !seen[what] {
			t.Errorf("notByThread lists %s, which is gone (or no longer touches a table)", what)
		}
	}

	// Every key and every index of a table begins with (thread_id,
	// tenant_id), DESIGN invariant 5: a thread's rows stay together, and a
	// lookup is an index lookup whether or not row-level security adds the
	// tenant (a superuser's session bypasses it). The exceptions serve no
	// single thread; each begins as listed, with the tenant in it.
	rows, err = d.Pool.Query(ctx, `SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
		WHERE c.relnamespace = 'pgcheckpoint'::regnamespace AND c.relname <> 'schema_migrations'`)
	if err != nil {
		t.Fatal(err)
	}
	var idx, def string
	notThread := map[string]string{
		"pgcheckpoint.checkpoints_checkpoint_id_tenant_id_key": "checkpoint_id, tenant_id",        // ids, unique in a tenant
		"pgcheckpoint.threads_branched_from_thread_idx":        "branched_from_thread, tenant_id", // the branches of a thread, by their source
		"pgcheckpoint.threads_tenant_idx":                      "tenant_id, thread_id",            // a tenant's threads in order (ListThreads)
		"pgcheckpoint.threads_expires_at_idx":                  "tenant_id, expires_at",           // a sweep's expired threads, one tenant
		"pgcheckpoint.threads_swept_at_idx":                    "swept_at NULLS FIRST, tenant_id", // a sweep's least recently swept threads
		"pgcheckpoint.checkpoints_metadata_idx":                "",                                // GIN on jsonb: no text column without btree_gin; it filters rows the key has narrowed to one thread
	}
	if _, err := pgx.ForEachRow(rows, []any{&idx, &def}, func() error {
		cols := def[strings.Index(def, "(")+1:]
		if want, ok := notThread[idx]; ok {
			if !strings.HasPrefix(cols, want) {
				t.Errorf("index %s: %s; want it to begin with (%s)", idx, def, want)
			}
			return nil
		}
		if !strings.HasPrefix(cols, "thread_id, tenant_id") {
			t.Errorf("index %s does not begin with (thread_id, tenant_id): %s", idx, def)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
