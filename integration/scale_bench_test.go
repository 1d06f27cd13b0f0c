package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// BenchmarkScale measures the rows of the speed table that need a large
// store (issue 28), each as a ratio against a bare query doing the same
// work in the same run:
//
//	list-threads/first, list-threads/deep
//	            ListThreads (a page of 100) at the start and near the end
//	            of PGCHECKPOINT_BENCH_THREADS threads (default 10,000) of 20
//	            checkpoints each, against a hand-written query of the same
//	            columns on plain tables (a lateral newest-row probe per
//	            thread), alternated
//	sweep       a KeepLastN(5) Sweep of those threads, against a bare
//	            batched DELETE of the same rows from a plain copy (same
//	            threads per transaction), each on a fresh fill, the two
//	            orders alternated; x-bare is the duration's ratio, and
//	            p99-during/p99-before the ratio of two writers' p99 (Snapshots
//	            on threads of their own, outside the sweep) during the sweep to their p99 just
//	            before it (bare-p99-ratio the same around the bare DELETE)
//	long/append an Append (one ~100-byte message, one state key) at step
//	            PGCHECKPOINT_BENCH_LONG_STEPS (default 50,000) of a
//	            conversation written by Append: p99-x-p50 is its p99 over its
//	            p50 (every run boundary is in the sample: one append in 50);
//	            bare-p99-x-p50 the same of an INSERT of the same change into
//	            a plain table, interleaved (what the server's flushes give)
//	long/latest Latest of that thread against a primary-key read of the
//	            same whole content (messages and state) from a plain row
//	long/points the first page of TimeTravelPoints against a SELECT of the
//	            same columns of the newest 100 rows of a plain copy
//
// CI runs it small (see .ci/run): the figures mean something at the
// default sizes only, on a freshly started durable server.
func BenchmarkScale(b *testing.B) {
	b.Run("list-threads", scaleListThreads)
	b.Run("sweep", scaleSweep)
	b.Run("long", scaleLong)
}

// benchSize is the positive number in environment variable name, or def.
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

// scaleThreads is PGCHECKPOINT_BENCH_THREADS.
func scaleThreads(b *testing.B) int { return benchSize(b, "PGCHECKPOINT_BENCH_THREADS", 10000, 200) }

// scalePerThread is how many checkpoints each thread of the listing and
// the sweep holds.
const scalePerThread = 20

// scaleFill writes threads threads ("s000001", ...) of scalePerThread
// checkpoints each (scaleRows), and a plain copy: bench_threads and
// bench_ckpts, with the same keys; then analyzes both.
func scaleFill(b *testing.B, d *pgtest.DB, threads int) {
	scaleRows(b, d.Pool, threads)
	ctx := context.Background()
	for _, q := range []string{
		`DROP TABLE IF EXISTS bench_threads, bench_ckpts`,
		`CREATE TABLE bench_threads AS SELECT thread_id, metadata, created_at FROM pgcheckpoint.threads`,
		`ALTER TABLE bench_threads ADD PRIMARY KEY (thread_id)`,
		`CREATE TABLE bench_ckpts AS SELECT thread_id, seq, checkpoint_id, parent_checkpoint_id, step, created_at, summary, state
		 FROM pgcheckpoint.checkpoints`,
		`ALTER TABLE bench_ckpts ADD PRIMARY KEY (thread_id, seq)`,
	} {
		if _, err := d.Pool.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	d.AsOwner(b, `VACUUM ANALYZE pgcheckpoint.threads, pgcheckpoint.checkpoints, bench_threads, bench_ckpts`)
}

// scaleRows empties the pgcheckpoint tables and writes threads threads
// ("s000001", ...) of scalePerThread checkpoints each in bulk with SQL: a
// chain of whole rows, as a store of small snapshots holds them, with ids
// in no order.
func scaleRows(tb testing.TB, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, threads int) {
	tb.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`TRUNCATE pgcheckpoint.threads, pgcheckpoint.checkpoints, pgcheckpoint.pending_writes`,
		`INSERT INTO pgcheckpoint.threads (thread_id, metadata)
		 SELECT 's' || lpad(t::text, 6, '0'), jsonb_build_object('user', 'u-' || t % 100)
		 FROM generate_series(1, $1::int) t`,
		`INSERT INTO pgcheckpoint.checkpoints (thread_id, seq, checkpoint_id, parent_checkpoint_id, step, summary, state, size_bytes)
		 SELECT 's' || lpad(t::text, 6, '0'), s, md5(t || ':' || s)::uuid,
		        CASE WHEN s > 1 THEN md5(t || ':' || (s - 1))::uuid END, s, 'step ' || s,
		        jsonb_build_object('step', s, 'note', repeat('agent state ', 15)), 200
		 FROM generate_series(1, $1::int) t, generate_series(1, ` + strconv.Itoa(scalePerThread) + `) s`,
	} {
		var args []any
		if slices.Contains([]byte(q), '$') {
			args = append(args, threads)
		}
		if _, err := db.Exec(ctx, q, args...); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

func scaleListThreads(b *testing.B) {
	d := pgtest.NewDB(b)
	ctx := context.Background()
	threads := scaleThreads(b)
	scaleFill(b, d, threads)
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
	const page = 100
	bareQuery := `
		SELECT t.thread_id, t.metadata, t.created_at, h.checkpoint_id, h.step, h.summary, h.created_at
		FROM bench_threads t
		LEFT JOIN LATERAL (
			SELECT c.checkpoint_id, c.step, c.summary, c.created_at FROM bench_ckpts c
			WHERE c.thread_id = t.thread_id ORDER BY c.seq DESC LIMIT 1) h ON true
		WHERE t.thread_id > $1
		ORDER BY t.thread_id
		LIMIT $2`
	for _, at := range []struct {
		name  string
		after string
	}{{"first", ""}, {"deep", fmt.Sprintf("s%06d", threads-page-page/2)}} {
		b.Run(at.name, func(b *testing.B) {
			bare := func() error {
				rows, err := d.Pool.Query(ctx, bareQuery, at.after, page)
				if err != nil {
					return err
				}
				defer rows.Close()
				n := 0
				for rows.Next() {
					var r engine.ThreadInfo
					if err := rows.Scan(&r.ThreadID, &r.Metadata, &r.CreatedAt, &r.HeadID, &r.HeadStep, &r.HeadSummary, &r.HeadCreatedAt); err != nil {
						return err
					}
					n++
				}
				if err := rows.Err(); err != nil {
					return err
				}
				if n != page {
					return fmt.Errorf("bare listing: %d threads", n)
				}
				return nil
			}
			list := func() error {
				got, err := eng.ListThreads(ctx, engine.ThreadListOptions{After: at.after, Limit: page})
				if err == nil && len(got) != page {
					err = fmt.Errorf("listed %d threads", len(got))
				}
				return err
			}
			b.ReportMetric(alternate(b, bare, list), "x-bare")
		})
	}
}

func scaleSweep(b *testing.B) {
	d := pgtest.NewDB(b)
	ctx := context.Background()
	threads := scaleThreads(b)
	const keep = 5
	// The writers' time alone before each sweep: 2 s at 10,000 threads,
	// less on the small sets CI runs.
	window := max(100*time.Millisecond, 2*time.Second*time.Duration(threads)/10000)
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
	state := json.RawMessage(`{"note":"a write during the sweep"}`)
	// The writers' threads sort before the filled ones ("s..."), and the
	// sweep starts after them: it deletes the rows the bare DELETE
	// deletes, no more, and the writers wait for no lock of the sweep's.
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
	// The bare sweep: the same threads per transaction, each thread's rows
	// but its newest keep.
	bare := func() error {
		var n int64
		for lo := 1; lo <= threads; lo += engine.DefaultSweepBatch {
			hi := min(lo+engine.DefaultSweepBatch-1, threads)
			tag, err := d.Pool.Exec(ctx, `
				DELETE FROM bench_ckpts c
				WHERE c.thread_id BETWEEN $1 AND $2
				  AND c.seq <= (SELECT max(m.seq) FROM bench_ckpts m WHERE m.thread_id = c.thread_id) - $3`,
				fmt.Sprintf("s%06d", lo), fmt.Sprintf("s%06d", hi), keep)
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
		}
		if n != want {
			return fmt.Errorf("bare sweep deleted %d rows, want %d", n, want)
		}
		return nil
	}
	var ours, theirs []time.Duration
	var oursP99, theirsP99 []float64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		scaleFill(b, d, threads)
		b.StartTimer()
		runOurs := func() {
			t, r := benchratio.SweepRound(b, window, write, sweep)
			ours, oursP99 = append(ours, t), append(oursP99, r)
		}
		runBare := func() {
			t, r := benchratio.SweepRound(b, window, write, bare)
			theirs, theirsP99 = append(theirs, t), append(theirsP99, r)
		}
		// One fill serves both: the bare sweep deletes from the copy.
		if i%2 == 0 {
			runOurs()
			runBare()
		} else {
			runBare()
			runOurs()
		}
	}
	b.StopTimer()
	mo, mb := benchratio.Median(ours), benchratio.Median(theirs)
	b.ReportMetric(float64(mb.Milliseconds()), "bare-ms")
	b.ReportMetric(float64(mo.Milliseconds()), "sweep-ms")
	b.ReportMetric(float64(mo)/float64(mb), "x-bare")
	slices.Sort(oursP99)
	slices.Sort(theirsP99)
	b.ReportMetric(oursP99[len(oursP99)/2], "p99-during/before")
	b.ReportMetric(theirsP99[len(theirsP99)/2], "bare-p99-during/before")
}

// longMessage is step i's message of the long conversation: about 100
// bytes, as a chat turn of a long agent run.
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
	d := pgtest.NewDB(b)
	ctx := context.Background()
	steps := benchSize(b, "PGCHECKPOINT_BENCH_LONG_STEPS", 50000, 100)
	// The conversation is written with asynchronous commit, to save
	// minutes of flushes; what is measured then commits durably.
	cfg := d.Pool.Config()
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	fast, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer fast.Close()
	build := engine.New(postgres.NewStore(fast, postgres.Options{}), engine.Config{})
	if _, err := build.Snapshot(ctx, engine.SnapshotInput{ThreadID: "long", Messages: longMessage(1), State: longState(1)}); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	for i := 2; i <= steps; i++ {
		if _, err := build.Append(ctx, engine.AppendInput{ThreadID: "long", Messages: longMessage(i), SetState: longState(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d steps written in %s", steps, time.Since(t0).Round(time.Millisecond))
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
	step := steps
	if _, err := d.Pool.Exec(ctx, `CREATE TABLE bench_changes (id bigserial PRIMARY KEY, messages jsonb NOT NULL, state jsonb NOT NULL)`); err != nil {
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
			if _, err := d.Pool.Exec(ctx, `INSERT INTO bench_changes (messages, state) VALUES ($1, $2)`, longMessage(step), longState(step)); err != nil {
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
	// The bare copies: the head's whole content in one row, and the
	// listing's columns of every row.
	head, err := eng.Latest(ctx, "long")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `CREATE TABLE bench_whole (id uuid PRIMARY KEY, messages jsonb NOT NULL, state jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `INSERT INTO bench_whole VALUES ($1, $2, $3)`, head.ID, head.Messages, head.State); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `CREATE TABLE bench_meta AS
		SELECT thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id, step, created_at,
		       trigger, tags, summary, metadata, format, next_node, size_bytes
		FROM pgcheckpoint.checkpoints;
		ALTER TABLE bench_meta ADD PRIMARY KEY (thread_id, namespace, seq)`); err != nil {
		b.Fatal(err)
	}
	d.AsOwner(b, `ANALYZE bench_meta, bench_whole, pgcheckpoint.checkpoints`)
	b.Logf("head: %d bytes of messages and state", len(head.Messages)+len(head.State))
	b.Run("latest", func(b *testing.B) {
		b.ReportMetric(alternate(b, func() error {
			var m, s []byte
			return d.Pool.QueryRow(ctx, `SELECT messages, state FROM bench_whole WHERE id = $1`, head.ID).Scan(&m, &s)
		}, func() error {
			_, err := eng.Latest(ctx, "long")
			return err
		}), "x-bare")
	})
	b.Run("points", func(b *testing.B) {
		b.ReportMetric(alternate(b, func() error {
			rows, err := d.Pool.Query(ctx, `SELECT * FROM bench_meta WHERE thread_id = 'long' AND namespace = '' ORDER BY seq DESC LIMIT 100`)
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				if _, err := rows.Values(); err != nil {
					rows.Close()
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
