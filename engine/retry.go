package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Defaults of RetryPolicy.
const (
	DefaultRetryBackoff    = 50 * time.Millisecond
	DefaultRetryMaxBackoff = 2 * time.Second
	DefaultRetryMaxElapsed = 30 * time.Second
)

// RetryPolicy says how Snapshot (and so SnapshotSafe, WrapTool, Scope and
// interval snapshots), Append, PutWrites, the rewinds (Rewind,
// RewindAndTruncate, RewindToStep), MergeBranch, SetThreadExpiry and each
// batch of Sweep retry a write that failed with ErrTransient. The zero
// value does not retry. A retry reuses the checkpoint id of the first
// attempt, so a write whose commit was done but not acknowledged is found,
// not stored twice (SnapshotResult.Created is then false); a rewind or an
// expiry set again changes nothing more (a rewind then reports what the
// retry did: RewindAndTruncate's Truncated counts nothing more deleted). Never retried: bad input,
// ErrIDConflict, ErrNotFound, ErrPermission, ErrStorageFull, a cancelled or
// expired context.
type RetryPolicy struct {
	// Attempts is how many times a write is tried in all, the first
	// included; 0 or 1: once.
	Attempts int
	// Backoff is the wait before the first retry (default
	// DefaultRetryBackoff); each next wait doubles, up to MaxBackoff
	// (default DefaultRetryMaxBackoff). Each wait is drawn at random
	// between half and all of it, so writers that failed together do not
	// retry together.
	Backoff, MaxBackoff time.Duration
	// MaxElapsed stops the retries once this long has passed since the
	// first attempt (default DefaultRetryMaxElapsed).
	MaxElapsed time.Duration
}

// retry calls write until it succeeds, fails for good, or the policy or ctx
// says to stop; it returns write's last error.
func (p RetryPolicy) retry(ctx context.Context, write func() error) error {
	backoff, maxBackoff, maxElapsed := p.Backoff, p.MaxBackoff, p.MaxElapsed
	if backoff <= 0 {
		backoff = DefaultRetryBackoff
	}
	if maxBackoff <= 0 {
		maxBackoff = DefaultRetryMaxBackoff
	}
	if maxElapsed <= 0 {
		maxElapsed = DefaultRetryMaxElapsed
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || !errors.Is(err, ErrTransient) || attempt >= p.Attempts || ctx.Err() != nil {
			return err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		if time.Since(start)+wait > maxElapsed {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}
