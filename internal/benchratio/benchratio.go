// Package benchratio measures an operation against a baseline in the same
// run, the two alternated so that both meet the same machine at the same
// moment: what every speed benchmark of both stores reports (a ratio, not
// a duration, which depends on the machine).
package benchratio

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Median returns the median of d, which it sorts.
func Median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// Alternate runs bare and ours once each per iteration of b, after warmup
// runs of each, the order flipped every iteration, reports both medians
// (bare-p50-µs, p50-µs) and returns the ratio of ours's median to bare's.
func Alternate(b *testing.B, warmup int, bare, ours func() error) float64 {
	var tb, to []time.Duration
	timed := func(f func() error, into *[]time.Duration) {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(t0))
	}
	for range warmup {
		timed(bare, new([]time.Duration))
		timed(ours, new([]time.Duration))
	}
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			timed(bare, &tb)
			timed(ours, &to)
		} else {
			timed(ours, &to)
			timed(bare, &tb)
		}
	}
	b.StopTimer()
	mb, mo := Median(tb), Median(to)
	b.ReportMetric(float64(mb.Microseconds()), "bare-p50-µs")
	b.ReportMetric(float64(mo.Microseconds()), "p50-µs")
	return float64(mo) / float64(mb)
}

// Throughput runs writers goroutines, each on a thread of its own
// ("bench-0", ...), bare and ours in alternating rounds (b.N writes of
// each kind in all, after warmup per writer of each), reports both rates
// (bare-writes/s, writes/s) and returns the ratio of ours's rate to
// bare's. Rounds, in alternating order, make both kinds meet the same load
// and share the background work they cause instead of one phase paying
// for the other.
func Throughput(b *testing.B, writers, warmup, rounds int, bare, ours func(thread string) error) float64 {
	run := func(n int, write func(thread string) error) time.Duration {
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		start := time.Now()
		for w := range writers {
			thread := fmt.Sprintf("bench-%d", w)
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := write(thread); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	run(warmup*writers, bare)
	run(warmup*writers, ours)
	b.ResetTimer()
	var bareTime, ourTime time.Duration
	for r := range rounds {
		n := b.N*(r+1)/rounds - b.N*r/rounds
		if r%2 == 0 {
			bareTime += run(n, bare)
			ourTime += run(n, ours)
		} else {
			ourTime += run(n, ours)
			bareTime += run(n, bare)
		}
	}
	b.StopTimer()
	bareRate := float64(b.N) / bareTime.Seconds()
	ourRate := float64(b.N) / ourTime.Seconds()
	b.ReportMetric(bareRate, "bare-writes/s")
	b.ReportMetric(ourRate, "writes/s")
	return ourRate / bareRate
}

// State is the ~3.8 KB agent state (32 keys) of the speed tables, the
// same on both stores.
func State() json.RawMessage {
	m := map[string]any{"plan": []string{"search", "book", "confirm"}, "cursor": 7}
	for i := range 30 {
		m[fmt.Sprintf("k%02d", i)] = strings.Repeat(string(rune('a'+i%26)), 120)
	}
	b, _ := json.Marshal(m)
	return b
}

// P99 returns the 99th percentile of d, which it sorts.
func P99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)*99/100]
}

// sweepWriters runs two writers, each on a thread of its own, until stop
// is closed, and returns their latencies.
func sweepWriters(b *testing.B, write func(thread string) error, stop <-chan struct{}) []time.Duration {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		thread := fmt.Sprintf("writer-%d", w)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				if err := write(thread); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	if len(lat) == 0 {
		b.Fatal("the writers wrote nothing")
	}
	return lat
}

// SweepRound times del with two writers running, and the writers alone
// for window just before it; it returns del's duration and the writers'
// p99 during it over their p99 before it.
func SweepRound(b *testing.B, window time.Duration, write func(thread string) error, del func() error) (time.Duration, float64) {
	stop := make(chan struct{})
	go func() { time.Sleep(window); close(stop) }()
	before := sweepWriters(b, write, stop)
	stop = make(chan struct{})
	var during []time.Duration
	var wg sync.WaitGroup
	wg.Go(func() { during = sweepWriters(b, write, stop) })
	t0 := time.Now()
	err := del()
	elapsed := time.Since(t0)
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	return elapsed, float64(P99(during)) / float64(P99(before))
}
