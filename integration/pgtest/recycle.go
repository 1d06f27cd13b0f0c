package pgtest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Recycling. Making a database costs the server far more than the tests
// that use most of them (CREATE DATABASE copies the template, some 8 MB,
// through the WAL; with DROP, 100-200 ms of server CPU on a loaded 2-core
// machine, more than a typical test's own work). So a migrated database
// whose test has ended goes back to a free list, and NewDB hands it out
// again, when it is provably in the state of a fresh clone once its rows
// are gone:
//
//   - no session is left on it and no prepared transaction;
//   - its per-database settings (ALTER DATABASE ... SET) and its
//     pg_database row are those NewDB made;
//   - no row of any of its system catalogs was written since it was
//     handed out, and each catalog has as many rows as a fresh clone's:
//     no DDL, no GRANT, no COMMENT, no ANALYZE, no temporary schema, no
//     large object;
//   - the tables a fresh clone has rows in (the migrations' version)
//     hold the same rows.
//
// Then TRUNCATE empties the other tables (RESTART IDENTITY), and the
// database is as NewDB makes it, but for the server's cumulative
// statistics and relfilenode numbers. Anything else, or any error, and it
// is dropped as before. A failed test's database is always dropped. A user
// who may not read every catalog (pg_statistic is the superuser's) gets no
// recycling.
type recycler struct {
	mu   sync.Mutex
	free []*DB // closed pools; names and URLs only

	baseOnce sync.Once
	base     *baseline // nil: recycling is off (the baseline failed)
}

// baseline is what a fresh clone of the template looks like.
type baseline struct {
	counts    string   // an expression: how many rows each catalog has
	fresh     string   // its value on a fresh clone
	newer     string   // an expression: how many catalog rows are younger than xid $1
	truncate  string   // TRUNCATE of the tables a fresh clone has no rows in
	kept      string   // a query hashing the rows of the others
	keptRows  string   // its value on a fresh clone
	dbSetting []string // the database's settings, as NewDB sets them
	stats     string   // the planner's size of each table on a fresh clone (statsQuery)
}

// statsQuery lists what the planner knows of each table's size
// (relpages, reltuples: -1 until a VACUUM or ANALYZE). TRUNCATE sets it
// back to a fresh clone's; an autovacuum ANALYZE of a table emptied but
// once busy would record it as known empty (reltuples 0), and the
// planner would then plan other scans than on a fresh clone.
const statsQuery = `SELECT coalesce(string_agg(format('%s:%s:%s', c.oid::regclass, c.relpages, c.reltuples), ',' ORDER BY c.oid::regclass::text), '')
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'`

// fresh marks a database as handed out now: a catalog row written by a
// later transaction than the one stored here is the test's.
type fresh struct{ xid string }

// takeFree returns a database from the free list, or nil.
func (r *recycler) takeFree() *DB {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.free) == 0 {
		return nil
	}
	d := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	return d
}

// learn records, once per test binary, what a fresh clone looks like, from
// the database at url, one that no test has used yet.
func (r *recycler) learn(ctx context.Context, url string) {
	r.baseOnce.Do(func() {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if b, err := readBaseline(ctx, conn); err == nil {
			r.base = b
		}
	})
}

func readBaseline(ctx context.Context, conn *pgx.Conn) (*baseline, error) {
	b := &baseline{}
	rows, _ := conn.Query(ctx, `SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'r' AND NOT c.relisshared
		ORDER BY 1`)
	catalogs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(catalogs) == 0 {
		return nil, fmt.Errorf("list the catalogs: %v", err)
	}
	// $1 is the xid the database was handed out at: a row whose xmin is
	// younger was written since.
	//
	// The planner's statistics of the catalogs are not counted: autovacuum
	// analyzes the template's catalogs some time after the migrations wrote
	// them, so clones made before and after it differ there while no test
	// touched them (a test's own ANALYZE writes rows newer than $1, and
	// statsQuery reads what the planner knows of the tables).
	var counts, newer []string
	for _, c := range catalogs {
		q := "pg_catalog." + pgx.Identifier{c}.Sanitize()
		if c != "pg_statistic" && c != "pg_statistic_ext_data" {
			counts = append(counts, "(SELECT count(*) FROM "+q+")")
		}
		newer = append(newer, "(SELECT count(*) FROM "+q+" WHERE age(xmin) < age($1::text::xid))")
	}
	b.counts = "concat_ws(',', " + strings.Join(counts, ", ") + ")"
	b.newer = strings.Join(newer, " + ")
	if err := conn.QueryRow(ctx, "SELECT "+b.counts).Scan(&b.fresh); err != nil {
		return nil, fmt.Errorf("count the catalogs: %w", err)
	}

	rows, _ = conn.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname), c.relkind = 'S'
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'S') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		  AND n.nspname NOT LIKE 'pg\_toast%' ORDER BY 1`)
	type table struct {
		name string
		seq  bool
	}
	tables, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (table, error) {
		var t table
		err := row.Scan(&t.name, &t.seq)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the tables: %w", err)
	}
	var empty, kept []string
	for _, t := range tables {
		if t.seq {
			return nil, fmt.Errorf("the template has a sequence (%s): recycling does not reset it", t.name)
		}
		var any bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+t.name+")").Scan(&any); err != nil {
			return nil, err
		}
		if any {
			kept = append(kept, fmt.Sprintf("(SELECT md5(string_agg(t::text, E'\\n' ORDER BY t::text)) FROM %s t)", t.name))
		} else {
			empty = append(empty, t.name)
		}
	}
	if len(empty) > 0 {
		b.truncate = "TRUNCATE " + strings.Join(empty, ", ") + " RESTART IDENTITY"
	}
	b.kept = "SELECT concat_ws(',', " + strings.Join(append(kept, "''"), ", ") + ")"
	if err := conn.QueryRow(ctx, b.kept).Scan(&b.keptRows); err != nil {
		return nil, err
	}
	if b.dbSetting, err = dbSettings(ctx, conn); err != nil {
		return nil, err
	}
	if err := conn.QueryRow(ctx, statsQuery).Scan(&b.stats); err != nil {
		return nil, err
	}
	return b, nil
}

// dbSettings returns the settings of conn's database, per role, sorted.
func dbSettings(ctx context.Context, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) ([]string, error) {
	var s []string
	err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(setrole::text || ':' || array_to_string(setconfig, ',') ORDER BY setrole), '{}')
		FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&s)
	return s, err
}

// handOut records, on a database about to be given to a test, the xid
// after which its catalogs' rows are the test's.
func handOut(ctx context.Context, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (fresh, error) {
	var f fresh
	err := conn.QueryRow(ctx, "SELECT (txid_current() % 4294967296)::text").Scan(&f.xid)
	return f, err
}

// recycle puts d on the free list if it is back in a fresh clone's state
// (see recycler) and reports whether it did; if not, the caller drops it.
func (srv *server) recycle(d *DB) bool {
	b := srv.recycled.base
	if b == nil || d.fresh.xid == "" {
		return false
	}
	if d.Pool != nil {
		d.Pool.Close()
		d.Pool = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	// Sessions the test left (engines over the URL, processes it ran) end
	// first; the check below finds any that will not.
	if _, err := srv.admin.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()`, d.Name); err != nil {
		return false
	}
	conn, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var clean bool
	var counts, keptRows string
	if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid())
		AND NOT EXISTS (SELECT FROM pg_prepared_xacts WHERE database = current_database())
		AND (SELECT age(xmin) > age($1::text::xid) FROM pg_database WHERE datname = current_database())
		AND `+b.newer+` = 0, `+b.counts,
		d.fresh.xid).Scan(&clean, &counts); err != nil || !clean || counts != b.fresh {
		return false
	}
	if err := tx.QueryRow(ctx, b.kept).Scan(&keptRows); err != nil || keptRows != b.keptRows {
		return false
	}
	settings, err := dbSettings(ctx, tx)
	if err != nil || strings.Join(settings, "\n") != strings.Join(b.dbSetting, "\n") {
		return false
	}
	if b.truncate != "" {
		if _, err := tx.Exec(ctx, b.truncate); err != nil {
			return false
		}
	}
	// The test's counts of changed rows go too, so autovacuum does not
	// ANALYZE the emptied tables (see statsQuery).
	if _, err := tx.Exec(ctx, `SELECT pg_stat_reset_single_table_counters(c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'`); err != nil {
		return false
	}
	f, err := handOut(ctx, tx)
	if err != nil || tx.Commit(ctx) != nil {
		return false
	}
	srv.recycled.mu.Lock()
	defer srv.recycled.mu.Unlock()
	srv.recycled.free = append(srv.recycled.free, &DB{URL: d.URL, Name: d.Name, fresh: f, held: d.held})
	return true
}

// dropFree drops the databases on the free list (at the end of the test
// binary).
func (srv *server) dropFree() error {
	srv.recycled.mu.Lock()
	free := srv.recycled.free
	srv.recycled.free = nil
	srv.recycled.mu.Unlock()
	var first error
	for _, d := range free {
		if err := srv.dropDB(d); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// reuse connects a pool to d, from the free list, for a new test.
func (srv *server) reuse(d *DB) (*DB, error) {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	pool, err := connectPool(ctx, d.URL, d.held)
	if err != nil {
		return nil, err
	}
	// What the planner knows of the tables' sizes, as on a fresh clone:
	// checked as the database is taken, the last moment before the test.
	var stats string
	if err := pool.QueryRow(ctx, statsQuery).Scan(&stats); err != nil || stats != srv.recycled.base.stats {
		pool.Close()
		return nil, fmt.Errorf("the planner's statistics differ from a fresh clone's (%v)", err)
	}
	d.Pool = pool
	return d, nil
}
