package integration

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// treeBench builds a thread of 10,000 checkpoints (9,900 on the main line
// and 100 branches of one checkpoint each, forked every 99 steps) with SQL,
// and returns the engine, the deepest checkpoint and the main line's seqs.
func treeBench(b *testing.B) (*engine.Engine, *pgtest.DB, uuid.UUID) {
	d := pgtest.NewDB(b)
	ctx := context.Background()
	if _, err := d.Pool.Exec(ctx, `SELECT count(*) FROM generate_series(1, 9900) g,
		LATERAL pgcheckpoint.checkpoint_put('big', '', pgcheckpoint.uuid_v7(), NULL,
		'manual', '{}', 'step ' || g, '{}', '[]', '{}', '{}', '', 0)`); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints c,
		LATERAL pgcheckpoint.thread_branch(c.checkpoint_id, 'big-b' || c.seq, 'b' || c.seq, pgcheckpoint.uuid_v7())
		WHERE c.thread_id = 'big' AND c.seq % 99 = 0`); err != nil {
		b.Fatal(err)
	}
	d.AsOwner(b, `ANALYZE pgcheckpoint.checkpoints, pgcheckpoint.threads`)
	var deepest uuid.UUID
	if err := d.Pool.QueryRow(ctx, `SELECT pgcheckpoint.thread_head('big')`).Scan(&deepest); err != nil {
		b.Fatal(err)
	}
	return engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{}), d, deepest
}

// BenchmarkLineage reads the lineage of the deepest checkpoint (9,900
// ancestors) and, in the same iteration, the same rows by primary key in one
// query (= ANY of their seqs): the baseline. Goal: lineage-ratio <= 5.
func BenchmarkLineage(b *testing.B) {
	eng, d, deepest := treeBench(b)
	ctx := context.Background()
	seqs := make([]int64, 9900)
	for i := range seqs {
		seqs[i] = int64(i + 1)
	}
	var lin, base []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		got, err := eng.Lineage(ctx, deepest)
		if err != nil || len(got) != 9900 {
			b.Fatalf("lineage: %d %v", len(got), err)
		}
		t1 := time.Now()
		rows, err := d.Pool.Query(ctx, `SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id,
			c.merge_parent_id, c.step, c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.next_node, c.size_bytes
			FROM pgcheckpoint.checkpoints c WHERE c.thread_id = 'big' AND c.namespace = '' AND c.seq = ANY($1)`, seqs)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if rows.Err() != nil || n != 9900 {
			b.Fatalf("baseline read %d rows: %v", n, rows.Err())
		}
		lin, base = append(lin, t1.Sub(t0)), append(base, time.Since(t1))
	}
	b.StopTimer()
	ml, mb := benchratio.Median(lin), benchratio.Median(base)
	b.ReportMetric(float64(ml.Microseconds()), "lineage-p50-µs")
	b.ReportMetric(float64(mb.Microseconds()), "pk-read-p50-µs")
	b.ReportMetric(float64(ml)/float64(mb), "lineage-ratio")
}

// BenchmarkTree reads the whole tree (10,000 nodes, 100 branch threads) in
// one query.
func BenchmarkTree(b *testing.B) {
	eng, _, _ := treeBench(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		tree, err := eng.Tree(ctx, "big")
		if err != nil || len(tree.Nodes) != 10000 || len(tree.Edges) != 9999 {
			b.Fatalf("tree: %v nodes %d edges %d", err, len(tree.Nodes), len(tree.Edges))
		}
	}
}
