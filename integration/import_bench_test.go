package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// importSteps is how many checkpoints BenchmarkImport's export holds:
// PGCHECKPOINT_BENCH_IMPORT (default 3,000).
func importSteps(b *testing.B) int {
	n := 3000
	if s := os.Getenv("PGCHECKPOINT_BENCH_IMPORT"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 10 {
			b.Fatalf("PGCHECKPOINT_BENCH_IMPORT=%q: want a number of at least 10", s)
		}
	}
	return n
}

// BenchmarkImport imports an export of importSteps checkpoints of one
// thread (each the last 8 messages of a conversation, 7.5 KB, and a state
// of 21 keys, stored whole; every 4th with two pending writes) into an empty
// database, against a bare pgx COPY of the same export lines into a plain
// table (one jsonb column) of the same database. Each iteration starts
// from a fresh database (not timed) and runs both, the order flipped every
// iteration. It reports the import's median, per checkpoint and as a
// ratio to the bare COPY's (x-bare).
func BenchmarkImport(b *testing.B) {
	ctx := context.Background()
	steps := importSteps(b)
	src := pgtest.NewDB(b)
	eng := engine.New(postgres.NewStore(src.Pool, postgres.Options{}), engine.Config{})
	benchConversation(b, eng, "imported", steps)
	var export bytes.Buffer
	if _, err := eng.Export(ctx, "imported", &export); err != nil {
		b.Fatal(err)
	}
	var lines [][]any
	sc := bufio.NewScanner(bytes.NewReader(export.Bytes()))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		lines = append(lines, []any{json.RawMessage(bytes.Clone(sc.Bytes()))})
	}
	var bare, imp []time.Duration
	timed := func(into *[]time.Duration, f func() error) {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(t0))
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		d := pgtest.NewDB(b)
		if _, err := d.Pool.Exec(ctx, `CREATE TABLE bench_lines (line jsonb NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		target := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
		b.StartTimer()
		copyLines := func() error {
			_, err := d.Pool.CopyFrom(ctx, pgx.Identifier{"bench_lines"}, []string{"line"}, pgx.CopyFromRows(lines))
			return err
		}
		importAll := func() error {
			_, err := target.Import(ctx, bytes.NewReader(export.Bytes()), engine.ImportOptions{})
			return err
		}
		if i%2 == 0 {
			timed(&bare, copyLines)
			timed(&imp, importAll)
		} else {
			timed(&imp, importAll)
			timed(&bare, copyLines)
		}
	}
	b.StopTimer()
	mb, mi := benchratio.Median(bare), benchratio.Median(imp)
	b.ReportMetric(float64(steps), "checkpoints")
	b.ReportMetric(float64(export.Len())/1e6, "export-MB")
	b.ReportMetric(float64(mi.Milliseconds()), "import-ms")
	b.ReportMetric(float64(mi.Microseconds())/float64(steps), "µs/checkpoint")
	b.ReportMetric(float64(mb.Milliseconds()), "bare-ms")
	b.ReportMetric(float64(mi)/float64(mb), "x-bare")
}

// benchConversation writes steps checkpoints on thread: each the last 8
// messages of a conversation (7.5 KB) and a state of 21 keys, stored whole;
// every 4th with two pending writes.
func benchConversation(b *testing.B, eng *engine.Engine, thread string, steps int) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 7))
	state := map[string]any{}
	var window []json.RawMessage
	for i := 1; i <= steps; i++ {
		content := make([]byte, 900)
		for j := range content {
			content[j] = "abcdefghij klmnopqrstuvwxyz"[r.IntN(27)]
		}
		m, _ := json.Marshal(map[string]string{"role": []string{"user", "assistant"}[i%2], "content": string(content)})
		window = append(window, m)
		if len(window) > 8 {
			window = window[1:]
		}
		msgs := json.RawMessage("[" + string(joinRaw(window)) + "]")
		state[fmt.Sprintf("key%02d", i%20)] = fmt.Sprintf("value at step %d", i)
		state["step"] = i
		stateJSON, _ := json.Marshal(state)
		res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Messages: msgs, State: stateJSON,
			Metadata: json.RawMessage(fmt.Sprintf(`{"run":%d}`, i/100))})
		if err != nil {
			b.Fatal(err)
		}
		if i%4 == 0 {
			if _, err := eng.PutWrites(ctx, res.ID, "task", []engine.Write{
				{Channel: "result", Value: json.RawMessage(`{"ok":true}`)}, {Channel: "note", Value: json.RawMessage(`"done"`)},
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
