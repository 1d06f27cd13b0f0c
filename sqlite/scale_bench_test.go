package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// BenchmarkScale measures the SQLite rows of the speed table that need a
// large store (issue 28), each as a ratio against a bare query doing the
// same work on plain tables in the same file, in the same run (the
// Postgres rows are integration's BenchmarkScale, which says what each row
// is):
//
//	list-threads/first, list-threads/deep
//	            ListThreads, a page of 100, of PGCHECKPOINT_BENCH_THREADS
//	            threads (default 10,000) of 20 checkpoints each
//	sweep       a KeepLastN(5) Sweep of them against a bare batched DELETE;
//	            the writers' p99 during it over their p99 before it
//	long/append p99 over p50 of an Append at step
//	            PGCHECKPOINT_BENCH_LONG_STEPS (default 50,000); bare-p99-x-p50
//	            the same of an INSERT of the same change into a plain
//	            table, interleaved (what the disk's flushes give)
//	long/latest, long/points
//	            Latest and the first page of TimeTravelPoints of that thread
//	            against reads of the same whole content and rows
//
//	go test -run '^$' -bench BenchmarkScale -benchtime 200x ./sqlite/
func BenchmarkScale(b *testing.B) {
	b.Run("list-threads", scaleListThreads)
	b.Run("sweep", scaleSweep)
	b.Run("long", scaleLong)
}

// benchSize is the number in environment variable name, or def.
func benchSize(b *testing.B, name string, def, atLeast int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < atLeast {
		b.Fatalf("%s=%q: want a number of at least %d", name, s, atLeast)
	}
	return n
}

func scaleThreads(b *testing.B) int { return benchSize(b, "PGCHECKPOINT_BENCH_THREADS", 10000, 200) }

const scalePerThread = 20

// scaleSetup opens a store and a second handle on its file (the store's
// durable settings, one connection) for the bare tables and the bulk
// fills.
func scaleSetup(b *testing.B) (*engine.Engine, *sql.DB) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "store.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Migrate: true})
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(s, engine.Config{})
	b.Cleanup(func() { eng.Close() })
	bare, err := sql.Open("sqlite", "file:"+path+
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(30000)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	bare.SetMaxOpenConns(1)
	b.Cleanup(func() { bare.Close() })
	return eng, bare
}

// scaleFill writes threads threads of scalePerThread whole checkpoints
// each in the store's tables, and a plain copy (bench_threads,
// bench_ckpts) with the same keys.
func scaleFill(b *testing.B, bare *sql.DB, threads int) {
	for _, q := range []string{
		`DELETE FROM pending_writes`, `DELETE FROM checkpoints`, `DELETE FROM threads`,
		`DROP TABLE IF EXISTS bench_threads`, `DROP TABLE IF EXISTS bench_ckpts`,
		`WITH RECURSIVE n(t) AS (SELECT 1 UNION ALL SELECT t + 1 FROM n WHERE t < ?)
		 INSERT INTO threads (tenant_id, thread_id, metadata, created_at)
		 SELECT 'default', printf('s%06d', t), json_object('user', 'u-' || (t % 100)), 1700000000000000 + t FROM n`,
		`WITH RECURSIVE n(t) AS (SELECT 1 UNION ALL SELECT t + 1 FROM n WHERE t < ?),
		      s(s) AS (SELECT 1 UNION ALL SELECT s + 1 FROM s WHERE s < ` + strconv.Itoa(scalePerThread) + `)
		 INSERT INTO checkpoints (tenant_id, thread_id, seq, checkpoint_id, parent_checkpoint_id, step, created_at, summary, size_bytes, state)
		 SELECT 'default', printf('s%06d', t), s, printf('%08x-0000-4000-8000-%012x', t, s),
		        CASE WHEN s > 1 THEN printf('%08x-0000-4000-8000-%012x', t, s - 1) END, s,
		        1700000000000000 + t * 100 + s, 'step ' || s, 200,
		        json_object('step', s, 'note', 'agent state agent state agent state agent state agent state agent state')
		 FROM n, s`,
		`CREATE TABLE bench_threads (thread_id TEXT PRIMARY KEY, metadata TEXT NOT NULL, created_at INTEGER NOT NULL)`,
		`INSERT INTO bench_threads SELECT thread_id, metadata, created_at FROM threads`,
		`CREATE TABLE bench_ckpts (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, checkpoint_id TEXT NOT NULL,
		   parent_checkpoint_id TEXT, step INTEGER NOT NULL, created_at INTEGER NOT NULL, summary TEXT NOT NULL,
		   state TEXT NOT NULL, PRIMARY KEY (thread_id, seq))`,
		`INSERT INTO bench_ckpts SELECT thread_id, seq, checkpoint_id, parent_checkpoint_id, step, created_at, summary, state FROM checkpoints`,
	} {
		var args []any
		if slices.Contains([]byte(q), '?') {
			args = append(args, threads)
		}
		if _, err := bare.Exec(q, args...); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
}

func scaleListThreads(b *testing.B) {
	eng, bare := scaleSetup(b)
	ctx := context.Background()
	threads := scaleThreads(b)
	scaleFill(b, bare, threads)
	const page = 100
	stmt, err := bare.PrepareContext(ctx, `
		SELECT t.thread_id, t.metadata, t.created_at, h.checkpoint_id, h.step, h.summary, h.created_at
		FROM bench_threads t
		LEFT JOIN bench_ckpts h ON h.thread_id = t.thread_id
		 AND h.seq = (SELECT max(m.seq) FROM bench_ckpts m WHERE m.thread_id = t.thread_id)
		WHERE t.thread_id > ?
		ORDER BY t.thread_id
		LIMIT ?`)
	if err != nil {
		b.Fatal(err)
	}
	for _, at := range []struct {
		name  string
		after string
	}{{"first", ""}, {"deep", fmt.Sprintf("s%06d", threads-page-page/2)}} {
		b.Run(at.name, func(b *testing.B) {
			b.ReportMetric(benchratio.Alternate(b, speedWarmup, func() error {
				rows, err := stmt.QueryContext(ctx, at.after, page)
				if err != nil {
					return err
				}
				defer rows.Close()
				n := 0
				for rows.Next() {
					var r engine.ThreadInfo
					var id, summary string
					var created, headCreated int64
					var md []byte
					if err := rows.Scan(&r.ThreadID, &md, &created, &id, &r.HeadStep, &summary, &headCreated); err != nil {
						return err
					}
					if r.HeadID, err = uuid.Parse(id); err != nil {
						return err
					}
					r.Metadata, r.HeadSummary = json.RawMessage(md), summary
					r.CreatedAt, r.HeadCreatedAt = time.UnixMicro(created), time.UnixMicro(headCreated)
					n++
				}
				if err := rows.Err(); err != nil {
					return err
				}
				if n != page {
					return fmt.Errorf("bare listing: %d threads", n)
				}
				return nil
			}, func() error {
				got, err := eng.ListThreads(ctx, engine.ThreadListOptions{After: at.after, Limit: page})
				if err == nil && len(got) != page {
					err = fmt.Errorf("listed %d threads", len(got))
				}
				return err
			}), "x-bare")
		})
	}
}

func scaleSweep(b *testing.B) {
	eng, bare := scaleSetup(b)
	ctx := context.Background()
	threads := scaleThreads(b)
	const keep = 5
	// The writers' time alone before each sweep: 2 s at 10,000 threads,
	// less on the small sets CI runs.
	window := max(100*time.Millisecond, 2*time.Second*time.Duration(threads)/10000)
	state := json.RawMessage(`{"note":"a write during the sweep"}`)
	// The writers' threads sort before the filled ones ("s..."), and the
	// sweep starts after them: it deletes the rows the bare DELETE
	// deletes, no more, and holds no write of the writers' threads.
	write := func(thread string) error {
		_, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "a-" + thread, State: state})
		return err
	}
	want := int64(threads * (scalePerThread - keep))
	sweep := func() error {
		res, err := eng.Sweep(ctx, engine.KeepLastN(keep), engine.SweepOptions{After: "b"})
		if err == nil && (!res.Done || res.Deleted != want) {
			err = fmt.Errorf("sweep: %+v; want every thread done and %d deleted", res, want)
		}
		return err
	}
	bareSweep := func() error {
		// Prepared after the fill, which made the table again.
		del, err := bare.PrepareContext(ctx, `
			DELETE FROM bench_ckpts
			WHERE thread_id BETWEEN ? AND ?
			  AND seq <= (SELECT max(m.seq) FROM bench_ckpts m WHERE m.thread_id = bench_ckpts.thread_id) - ?`)
		if err != nil {
			return err
		}
		defer del.Close()
		var n int64
		for lo := 1; lo <= threads; lo += engine.DefaultSweepBatch {
			hi := min(lo+engine.DefaultSweepBatch-1, threads)
			res, err := del.ExecContext(ctx, fmt.Sprintf("s%06d", lo), fmt.Sprintf("s%06d", hi), keep)
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			n += k
		}
		if n != want {
			return fmt.Errorf("bare sweep deleted %d rows, want %d", n, want)
		}
		return nil
	}
	// The durations are taken without writers: the bare DELETE runs on a
	// connection of its own, which waits for the store's writer in
	// SQLite's busy handler (sleeps of up to 100 ms), where the store's
	// own writes queue on its one writing connection. The writers' p99 is
	// then taken around a sweep of a second fill.
	var ours, theirs []time.Duration
	var oursP99 []float64
	timed := func(f func() error) time.Duration {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		scaleFill(b, bare, threads)
		b.StartTimer()
		if i%2 == 0 {
			ours = append(ours, timed(sweep))
			theirs = append(theirs, timed(bareSweep))
		} else {
			theirs = append(theirs, timed(bareSweep))
			ours = append(ours, timed(sweep))
		}
		b.StopTimer()
		scaleFill(b, bare, threads)
		b.StartTimer()
		_, r := benchratio.SweepRound(b, window, write, sweep)
		oursP99 = append(oursP99, r)
	}
	b.StopTimer()
	mo, mb := benchratio.Median(ours), benchratio.Median(theirs)
	b.ReportMetric(float64(mb.Milliseconds()), "bare-ms")
	b.ReportMetric(float64(mo.Milliseconds()), "sweep-ms")
	b.ReportMetric(float64(mo)/float64(mb), "x-bare")
	slices.Sort(oursP99)
	b.ReportMetric(oursP99[len(oursP99)/2], "p99-during/before")
}

// longMessage is step i's message of the long conversation: about 100
// bytes, as a chat turn of a long agent run (the same as integration's).
func longMessage(i int) json.RawMessage {
	role := "user"
	if i%2 == 1 {
		role = "assistant"
	}
	return json.RawMessage(fmt.Sprintf(`[{"role":%q,"content":"turn %d: the agent reads the tool's result and answers"}]`, role, i))
}

// longState is step i's change of state: one of 20 keys, and the step.
func longState(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"key%02d":"value at step %d","step":%d}`, i%20, i, i))
}

func scaleLong(b *testing.B) {
	eng, bare := scaleSetup(b)
	ctx := context.Background()
	steps := benchSize(b, "PGCHECKPOINT_BENCH_LONG_STEPS", 50000, 100)
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "long", Messages: longMessage(1), State: longState(1)}); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	for i := 2; i <= steps; i++ {
		if _, err := eng.Append(ctx, engine.AppendInput{ThreadID: "long", Messages: longMessage(i), SetState: longState(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d steps written in %s", steps, time.Since(t0).Round(time.Millisecond))
	step := steps
	if _, err := bare.Exec(`CREATE TABLE bench_changes (id INTEGER PRIMARY KEY, messages TEXT NOT NULL, state TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	b.Run("append", func(b *testing.B) {
		var lat, bareLat []time.Duration
		for range b.N {
			step++
			t0 := time.Now()
			if _, err := eng.Append(ctx, engine.AppendInput{ThreadID: "long", Messages: longMessage(step), SetState: longState(step)}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			t0 = time.Now()
			if _, err := bare.Exec(`INSERT INTO bench_changes (messages, state) VALUES (?, ?)`, string(longMessage(step)), string(longState(step))); err != nil {
				b.Fatal(err)
			}
			bareLat = append(bareLat, time.Since(t0))
		}
		b.StopTimer()
		p50 := benchratio.Median(lat)
		b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(benchratio.P99(lat).Microseconds()), "p99-µs")
		b.ReportMetric(float64(benchratio.P99(lat))/float64(p50), "p99-x-p50")
		b.ReportMetric(float64(benchratio.P99(bareLat))/float64(benchratio.Median(bareLat)), "bare-p99-x-p50")
	})
	head, err := eng.Latest(ctx, "long")
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE bench_whole (id TEXT PRIMARY KEY, messages TEXT NOT NULL, state TEXT NOT NULL)`,
		`CREATE TABLE bench_meta AS SELECT thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id,
		   step, created_at, trigger, tags, summary, metadata, format, next_node, size_bytes FROM checkpoints`,
		`CREATE UNIQUE INDEX bench_meta_key ON bench_meta (thread_id, namespace, seq)`,
	} {
		if _, err := bare.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := bare.Exec(`INSERT INTO bench_whole VALUES (?, ?, ?)`, head.ID.String(), string(head.Messages), string(head.State)); err != nil {
		b.Fatal(err)
	}
	whole, err := bare.PrepareContext(ctx, `SELECT messages, state FROM bench_whole WHERE id = ?`)
	if err != nil {
		b.Fatal(err)
	}
	meta, err := bare.PrepareContext(ctx, `SELECT * FROM bench_meta WHERE thread_id = 'long' AND namespace = '' ORDER BY seq DESC LIMIT 100`)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("latest", func(b *testing.B) {
		b.ReportMetric(benchratio.Alternate(b, speedWarmup, func() error {
			var m, s []byte
			return whole.QueryRowContext(ctx, head.ID.String()).Scan(&m, &s)
		}, func() error {
			_, err := eng.Latest(ctx, "long")
			return err
		}), "x-bare")
	})
	b.Run("points", func(b *testing.B) {
		b.ReportMetric(benchratio.Alternate(b, speedWarmup, func() error {
			rows, err := meta.QueryContext(ctx)
			if err != nil {
				return err
			}
			defer rows.Close()
			n := 0
			vals := make([]any, 15)
			ptrs := make([]any, 15)
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			for rows.Next() {
				if err := rows.Scan(ptrs...); err != nil {
					return err
				}
				n++
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if n != 100 {
				return fmt.Errorf("bare read %d rows", n)
			}
			return nil
		}, func() error {
			got, err := eng.TimeTravelPoints(ctx, "long", engine.PointsOptions{})
			if err == nil && len(got) != 100 {
				err = fmt.Errorf("%d points", len(got))
			}
			return err
		}), "x-bare")
	})
}
