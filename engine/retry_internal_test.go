package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A policy's waits: jittered between half and all of the backoff, doubled
// up to MaxBackoff, and no wait that would end past MaxElapsed.
func TestRetryPolicyWaits(t *testing.T) {
	t.Parallel()
	fail := fmt.Errorf("%w: lost", ErrTransient)
	var at []time.Time
	p := RetryPolicy{Attempts: 6, Backoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, MaxElapsed: time.Minute}
	err := p.retry(context.Background(), func() error { at = append(at, time.Now()); return fail })
	if !errors.Is(err, fail) || len(at) != 6 {
		t.Fatalf("%d attempts, %v; want 6 and the last error", len(at), err)
	}
	for i := 1; i < len(at); i++ {
		want := min(20*time.Millisecond<<(i-1), 40*time.Millisecond)
		if wait := at[i].Sub(at[i-1]); wait < want/2 {
			t.Errorf("wait %d: %v, want at least %v", i, wait, want/2)
		}
	}
	// Uncapped, the five waits would take at least 310ms; capped, at most 180.
	if total := at[5].Sub(at[0]); total > 300*time.Millisecond {
		t.Errorf("five waits took %v: MaxBackoff does not cap them", total)
	}

	at = nil
	p = RetryPolicy{Attempts: 1000, Backoff: 30 * time.Millisecond, MaxBackoff: 30 * time.Millisecond, MaxElapsed: 100 * time.Millisecond}
	start := time.Now()
	_ = p.retry(context.Background(), func() error { at = append(at, time.Now()); return fail })
	if took := time.Since(start); took > 250*time.Millisecond || len(at) < 3 {
		t.Errorf("MaxElapsed 100ms: %d attempts in %v", len(at), took)
	}
}
