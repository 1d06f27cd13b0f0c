package enginetest

import "testing"

// The long runs, soak (more random seeds and rounds), scale (values and
// threads at their largest) and memory measurements, are left out or cut
// down by go test -short, the README's quick command for contributors; a
// go test without -short, which CI runs, runs everything. Each long run
// says so through SkipLong or Rounds, so -short means one thing
// everywhere.

// SkipLong skips tb under -short, naming what it leaves out.
func SkipLong(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("%s: a long run, left out by -short (go test without -short runs it, as CI does)", what)
	}
}

// Rounds is how many rounds (random seeds, repetitions) a soak runs:
// full without -short, short under it.
func Rounds(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}
