//go:build unix

package integration

import (
	"context"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// BenchmarkExport exports a thread of importSteps checkpoints (those of
// BenchmarkImport) to io.Discard, and reports per export its time (ns/op),
// memory and allocations, its time per checkpoint and the CPU time the
// client spent (client-cpu-ms: the test process's, user and system; the
// server's is not in it), which the machine's other work disturbs less
// than the time.
func BenchmarkExport(b *testing.B) {
	ctx := context.Background()
	steps := importSteps(b)
	d := pgtest.NewDB(b)
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
	benchConversation(b, eng, "exported", steps)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		st, err := eng.Export(ctx, "exported", io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		if st.Checkpoints != int64(steps) {
			b.Fatalf("%d checkpoints exported, want %d", st.Checkpoints, steps)
		}
	}
	cpu := processCPU(b) - cpu0
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(steps), "µs/checkpoint")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "client-cpu-ms")
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
