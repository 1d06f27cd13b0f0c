package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// benchSetup returns an engine and a bare insert of the same bytes into a
// plain table: the baseline every Snapshot figure is measured against.
func benchSetup(b *testing.B, cfg engine.Config) (*engine.Engine, func(ctx context.Context, thread string, state json.RawMessage) error) {
	d := pgtest.NewDB(b)
	ctx := context.Background()
	if _, err := d.Pool.Exec(ctx, `CREATE TABLE bench_plain (id uuid PRIMARY KEY, thread_id text NOT NULL, state jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	insert := func(ctx context.Context, thread string, state json.RawMessage) error {
		_, err := d.Pool.Exec(ctx, `INSERT INTO bench_plain (id, thread_id, state) VALUES ($1, $2, $3)`, engine.NewCheckpointID(), thread, state)
		return err
	}
	return engine.New(postgres.NewStore(d.Pool, postgres.Options{}), cfg), insert
}

// forEachMode runs a Snapshot benchmark in the default configuration
// (which stores the benchmark's 3.9 KB state whole: it is under
// Config.DeltaMinBytes), with every checkpoint stored as a delta, and with
// delta storage off.
func forEachMode(b *testing.B, f func(*testing.B, engine.Config)) {
	b.Run("default", func(b *testing.B) { f(b, engine.Config{}) })
	b.Run("delta", func(b *testing.B) { f(b, engine.Config{DeltaMinBytes: -1}) })
	b.Run("full", func(b *testing.B) { f(b, engine.Config{FullSnapshots: true}) })
}

// warmup is how many writes each writer makes, of both kinds, before the
// clock starts: enough for every connection of the pool to have prepared
// its statements and for Postgres to have compiled the PL/pgSQL functions,
// so that the figures are those of a running application. The first write
// on a connection costs more (about 17 ms for checkpoint_put's compile on
// the reference machine); the first of a thread takes the slow path.
const warmup = 60

// BenchmarkSnapshotLatency alternates one bare INSERT and one Snapshot per
// iteration on one thread, so both see the same machine at the same moment,
// and reports both medians and their ratio (goal: p50-ratio <= 1.5).
func BenchmarkSnapshotLatency(b *testing.B) {
	forEachMode(b, benchLatency)
}

func benchLatency(b *testing.B, cfg engine.Config) {
	eng, insert := benchSetup(b, cfg)
	ctx := context.Background()
	state := benchratio.State()
	var bare, snap []time.Duration
	for range warmup {
		if err := insert(ctx, "bench", state); err != nil {
			b.Fatal(err)
		}
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "bench", State: state}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := insert(ctx, "bench", state); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "bench", State: state}); err != nil {
			b.Fatal(err)
		}
		bare, snap = append(bare, t1.Sub(t0)), append(snap, time.Since(t1))
	}
	b.StopTimer()
	pb, ps := benchratio.Median(bare), benchratio.Median(snap)
	b.ReportMetric(float64(pb.Microseconds()), "insert-p50-µs")
	b.ReportMetric(float64(ps.Microseconds()), "snapshot-p50-µs")
	b.ReportMetric(float64(ps)/float64(pb), "p50-ratio")
}

// BenchmarkSnapshotThroughput8 runs 8 writers on distinct threads, bare
// INSERTs and Snapshots in alternating rounds (b.N writes of each kind in
// all), and reports both rates and their ratio (goal: throughput-ratio >=
// 0.7). Rounds, in alternating order, make both kinds meet the same load
// on the machine and share the background work they cause (autovacuum,
// checkpoints) instead of one phase paying for the other.
func BenchmarkSnapshotThroughput8(b *testing.B) {
	forEachMode(b, benchThroughput8)
}

// rounds is how many times BenchmarkSnapshotThroughput8 switches between
// the two kinds of writes.
const rounds = 10

func benchThroughput8(b *testing.B, cfg engine.Config) {
	eng, insert := benchSetup(b, cfg)
	ctx := context.Background()
	state := benchratio.State()
	bare := func(thread string) error { return insert(ctx, thread, state) }
	snapshot := func(thread string) error {
		_, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, State: state})
		return err
	}
	b.ReportMetric(benchratio.Throughput(b, 8, warmup, rounds, bare, snapshot), "throughput-ratio")
}
