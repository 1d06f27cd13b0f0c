package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// conversation makes the messages and states of a deterministic agent run:
// step i appends one ~1 KB message of English-like text and changes one of
// 20 state keys.
type conversation struct {
	r     *rand.Rand
	words []string
	msgs  []json.RawMessage
	state map[string]any
}

func newConversation() *conversation {
	words := strings.Fields(`the agent calls a tool with the query and reads the result before it answers
		user asked about weather flights hotels prices in Paris Berlin Tokyo tomorrow next week please
		search returned rows from database table orders customers invoices total amount currency
		assistant plans steps first second then finally confirm booking cancel retry error timeout`)
	c := &conversation{r: rand.New(rand.NewPCG(7, 7)), words: words, state: map[string]any{}}
	for k := range 20 {
		c.state[fmt.Sprintf("key%02d", k)] = fmt.Sprintf("initial value of key %d", k)
	}
	return c
}

// step advances the run by one step and returns the whole snapshot.
func (c *conversation) step(i int) (msgs, state json.RawMessage) {
	var sb strings.Builder
	for sb.Len() < 1000 {
		sb.WriteString(c.words[c.r.IntN(len(c.words))])
		if c.r.IntN(12) == 0 {
			fmt.Fprintf(&sb, " %d", c.r.IntN(100000))
		}
		sb.WriteByte(' ')
	}
	role := "user"
	if i%2 == 1 {
		role = "assistant"
	}
	m, _ := json.Marshal(map[string]string{"role": role, "content": sb.String()})
	c.msgs = append(c.msgs, m)
	c.state[fmt.Sprintf("key%02d", i%20)] = fmt.Sprintf("value at step %d", i)
	c.state["step"] = i
	msgs = json.RawMessage("[" + string(joinRaw(c.msgs)) + "]")
	state, _ = json.Marshal(c.state)
	return msgs, state
}

func joinRaw(ms []json.RawMessage) []byte {
	var out []byte
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	return out
}

func checkpointBytes(b *testing.B, d *pgtest.DB) int64 {
	var n int64
	err := d.Pool.QueryRow(context.Background(), `SELECT pg_total_relation_size('pgcheckpoint.checkpoints')
		+ pg_total_relation_size('pgcheckpoint.threads') + pg_total_relation_size('pgcheckpoint.pending_writes')`).Scan(&n)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkDeltaStorage writes a 1,000-step thread (one ~1 KB message
// appended and one state key changed per step) with whole snapshots and
// with deltas, each in its own database, and reports:
//   - storage of the checkpoint tables at 250, 500 and 1,000 steps
//     (goal: delta at most 5% of full, growing linearly);
//   - Latest at step 1,000, delta against full, alternated per iteration
//     (goal: ratio at most 3);
//   - Snapshot at step 1,000 (a new child of step 999), likewise (goal:
//     ratio at most 1).
func BenchmarkDeltaStorage(b *testing.B) {
	ctx := context.Background()
	type side struct {
		name   string
		d      *pgtest.DB
		eng    *engine.Engine
		sizes  []int64
		parent uuid.UUID // the checkpoint at step 999
	}
	sides := []*side{{name: "full"}, {name: "delta"}}
	for _, s := range sides {
		s.d = pgtest.NewDB(b)
		s.eng = engine.New(postgres.NewStore(s.d.Pool, postgres.Options{}), engine.Config{FullSnapshots: s.name == "full"})
	}
	conv := newConversation()
	var last struct{ msgs, state json.RawMessage }
	for i := 1; i <= 1000; i++ {
		msgs, state := conv.step(i)
		last.msgs, last.state = msgs, state
		for _, s := range sides {
			res, err := s.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "long", Messages: msgs, State: state})
			if err != nil {
				b.Fatal(err)
			}
			if i == 999 {
				s.parent = res.ID
			}
		}
		if i == 250 || i == 500 || i == 1000 {
			for _, s := range sides {
				s.sizes = append(s.sizes, checkpointBytes(b, s.d))
			}
		}
	}

	latest := make([][]time.Duration, 2)
	snap := make([][]time.Duration, 2)
	b.ResetTimer()
	for range b.N {
		for j, s := range sides {
			t0 := time.Now()
			if _, err := s.eng.Latest(ctx, "long"); err != nil {
				b.Fatal(err)
			}
			latest[j] = append(latest[j], time.Since(t0))
		}
		for j, s := range sides {
			t0 := time.Now()
			if _, err := s.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "long", ParentID: s.parent, Messages: last.msgs, State: last.state}); err != nil {
				b.Fatal(err)
			}
			snap[j] = append(snap[j], time.Since(t0))
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	lf, ld := benchratio.Median(latest[0]), benchratio.Median(latest[1])
	sf, sd := benchratio.Median(snap[0]), benchratio.Median(snap[1])
	b.ReportMetric(ms(lf), "latest-full-ms")
	b.ReportMetric(ms(ld), "latest-delta-ms")
	b.ReportMetric(float64(ld)/float64(lf), "latest-ratio")
	b.ReportMetric(ms(sf), "snap-full-ms")
	b.ReportMetric(ms(sd), "snap-delta-ms")
	b.ReportMetric(float64(sd)/float64(sf), "snap-ratio")
	for k, steps := range []int{250, 500, 1000} {
		b.ReportMetric(float64(sides[0].sizes[k])/1e6, fmt.Sprintf("full-MB@%d", steps))
		b.ReportMetric(float64(sides[1].sizes[k])/1e6, fmt.Sprintf("delta-MB@%d", steps))
	}
	b.ReportMetric(float64(sides[1].sizes[2])/float64(sides[0].sizes[2]), "storage-ratio@1000")
}

// BenchmarkCompression compares Postgres 15's two TOAST compressions on the
// snapshots of the conversation above (whole message lists of 1 to 300
// steps), each written into a plain table whose jsonb column uses one of
// them, alternately: bytes stored, and the median time to write and to read
// back one snapshot.
func BenchmarkCompression(b *testing.B) {
	ctx := context.Background()
	d := pgtest.NewDB(b)
	methods := []string{"pglz", "lz4"}
	for _, m := range methods {
		if _, err := d.Pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE comp_%s (step int PRIMARY KEY, messages jsonb COMPRESSION %s NOT NULL)`, m, m)); err != nil {
			b.Fatal(err)
		}
	}
	conv := newConversation()
	var snaps []json.RawMessage
	for i := 1; i <= 300; i++ {
		msgs, _ := conv.step(i)
		snaps = append(snaps, msgs)
	}
	write := map[string][]time.Duration{}
	read := map[string][]time.Duration{}
	b.ResetTimer()
	for n := range b.N {
		round := n * len(snaps)
		for i, s := range snaps {
			for _, m := range methods {
				t0 := time.Now()
				if _, err := d.Pool.Exec(ctx, fmt.Sprintf(`INSERT INTO comp_%s VALUES ($1, $2)`, m), round+i, s); err != nil {
					b.Fatal(err)
				}
				write[m] = append(write[m], time.Since(t0))
			}
		}
		for i := range snaps {
			for _, m := range methods {
				var out []byte
				t0 := time.Now()
				if err := d.Pool.QueryRow(ctx, fmt.Sprintf(`SELECT messages::text FROM comp_%s WHERE step = $1`, m), round+i).Scan(&out); err != nil {
					b.Fatal(err)
				}
				read[m] = append(read[m], time.Since(t0))
			}
		}
	}
	b.StopTimer()
	for _, m := range methods {
		var size int64
		if err := d.Pool.QueryRow(ctx, fmt.Sprintf(`SELECT pg_total_relation_size('comp_%s')`, m)).Scan(&size); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(size)/1e6/float64(b.N), m+"-MB")
		b.ReportMetric(float64(benchratio.Median(write[m]))/1e3, m+"-write-µs")
		b.ReportMetric(float64(benchratio.Median(read[m]))/1e3, m+"-read-µs")
	}
}
