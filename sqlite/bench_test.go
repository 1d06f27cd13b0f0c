package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// conversation returns the content at step n of the benchmark's agent:
// n messages of about 1 KB, and a state whose key "step" changes each step.
func conversation(n int) (json.RawMessage, json.RawMessage) {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"role":"assistant","content":"message %05d %s"}`, i, strings.Repeat("lorem ipsum ", 83))
	}
	b.WriteString("]")
	state := fmt.Sprintf(`{"step":%d,"plan":"%s","user":"u-1"}`, n, strings.Repeat("p", 200))
	return json.RawMessage(b.String()), json.RawMessage(state)
}

// contentBytes is the size of the stored content (messages, state, tool
// results and their delta lists) of every checkpoint in the file.
func contentBytes(b *testing.B, path string) int64 {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int64
	err = db.QueryRow(`SELECT coalesce(sum(length(messages) + length(state) + length(tool_results)
		+ length(state_removed) + length(tool_results_removed)), 0) FROM checkpoints`).Scan(&n)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkStorage writes 1,000 steps, each appending a ~1 KB message and
// changing one state key, and reports the stored content at 250, 500 and
// 1,000 steps, beside what storing every snapshot whole takes, then times
// Snapshot, Append and Latest at step 1,000.
//
//	go test -run '^$' -bench BenchmarkStorage -benchtime 1000x ./sqlite/
func BenchmarkStorage(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Migrate: true})
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(s, engine.Config{})
	defer eng.Close()
	var whole int64
	metrics := map[string]float64{}
	for step := 1; step <= 1000; step++ {
		m, st := conversation(step)
		whole += int64(len(m) + len(st) + 2)
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "bench", Messages: m, State: st}); err != nil {
			b.Fatal(err)
		}
		if step == 250 || step == 500 || step == 1000 {
			stored := contentBytes(b, path)
			metrics[fmt.Sprintf("stored-bytes@%d", step)] = float64(stored)
			metrics[fmt.Sprintf("whole-bytes@%d", step)] = float64(whole)
			metrics[fmt.Sprintf("stored-%%-of-whole@%d", step)] = 100 * float64(stored) / float64(whole)
		}
	}
	// The goal: storage linear in the steps (each doubling of the steps
	// doubles it, give or take the anchors), and at most 5% of storing
	// every snapshot whole.
	for _, n := range []int{500, 1000} {
		if g := metrics[fmt.Sprintf("stored-bytes@%d", n)] / metrics[fmt.Sprintf("stored-bytes@%d", n/2)]; g < 1.5 || g > 2.5 {
			b.Errorf("storage grew %.2fx from step %d to %d; linear is 2x", g, n/2, n)
		}
	}
	for _, n := range []int{250, 500, 1000} {
		if p := metrics[fmt.Sprintf("stored-%%-of-whole@%d", n)]; p > 5 {
			b.Errorf("at step %d storage is %.1f%% of every snapshot whole; the goal is at most 5%%", n, p)
		}
	}
	// Custom metrics of a benchmark with sub-benchmarks are dropped: they
	// go on one of their own.
	b.Run("Storage", func(b *testing.B) {
		for b.Loop() {
		}
		for k, v := range metrics {
			b.ReportMetric(v, k)
		}
	})
	m, st := conversation(1001)
	b.Run("Snapshot@1000", func(b *testing.B) {
		for b.Loop() {
			// The same step written on the head's parent each time, so the
			// thread stays at 1,000 steps.
			if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "bench", Messages: m, State: st}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			head, _ := eng.Latest(ctx, "bench")
			if _, err := eng.Rewind(ctx, head.ParentID); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	// Append: one ~1 KB message and one state key on the head at step
	// 1,000, undone by a rewind (untimed): stored as a delta made of the
	// change alone; and, by an engine with FullSnapshots on the same
	// store, whole (the store rebuilds the head's content and writes it).
	head, err := eng.Latest(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	full := engine.New(s, engine.Config{FullSnapshots: true}) // not closed: eng closes s
	msg := json.RawMessage(`[{"role":"assistant","content":"message 01001 ` + strings.Repeat("lorem ipsum ", 83) + `"}]`)
	for _, run := range []struct {
		name string
		eng  *engine.Engine
	}{{"Append@1000", eng}, {"AppendWhole@1000", full}} {
		b.Run(run.name, func(b *testing.B) {
			for b.Loop() {
				in := engine.AppendInput{ThreadID: "bench", Messages: msg, SetState: json.RawMessage(`{"step":1001}`)}
				if _, err := run.eng.Append(ctx, in); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := eng.Rewind(ctx, head.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
	b.Run("Latest@1000", func(b *testing.B) {
		for b.Loop() {
			if _, err := eng.Latest(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
