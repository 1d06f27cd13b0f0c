package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// Retention, as pgcheckpoint.thread_gc, thread_expire and thread_gc_batch
// do it on Postgres (schema/current.sql): a policy names what to keep
// in each namespace, in write order; whatever it says, the head of each
// namespace and a checkpoint a branch was forked from (while the branch
// exists) are kept; kept deltas whose base goes are rebased
// (deleteCheckpoints). Expiry deletes the thread, or all but its heads.

// applyPolicy is thread_gc inside a write transaction.
func applyPolicy(ctx context.Context, q *queries, threadID string, p engine.Policy, now time.Time) ([]engine.Deleted, error) {
	heads, err := headSeqs(ctx, q, threadID)
	if err != nil {
		return nil, err
	}
	sources := map[uuid.UUID]bool{}
	branches, err := q.ThreadListBranches(ctx, sql.NullString{String: threadID, Valid: true})
	if err != nil {
		return nil, dbError("list branches", err)
	}
	for _, b := range branches {
		if b.BranchedFrom.Valid {
			sources[b.BranchedFrom.UUID] = true
		}
	}
	rows, err := q.CheckpointListForRetention(ctx, threadID)
	if err != nil {
		return nil, dbError("list checkpoints", err)
	}
	cutoff := now.Add(-p.Age()).UnixMicro()
	var doomed []engine.Deleted
	var set doomedSet // the rows just read: no id looked up again
	for start := 0; start < len(rows); {
		end := start
		for end < len(rows) && rows[end].Namespace == rows[start].Namespace {
			end++
		}
		ns := rows[start:end]
		total := int64(len(ns))
		for i, r := range ns {
			pos := int64(i) + 1
			var keep bool
			switch p.Name() {
			case "keep_last_n":
				keep = pos > total-int64(p.N())
			case "keep_age":
				keep = r.CreatedAt >= cutoff
			case "keep_milestones":
				keep = milestone(pos, total, int64(p.N()))
			}
			if h, ok := heads[r.Namespace]; keep || ok && h == r.Seq || sources[r.CheckpointID] {
				continue
			}
			doomed = append(doomed, engine.Deleted{ThreadID: threadID, Namespace: r.Namespace, ID: r.CheckpointID, Step: r.Step})
			set.add(threadID, r.Namespace, r.CheckpointID)
		}
		start = end
	}
	if len(doomed) == 0 {
		return nil, nil
	}
	if _, err := set.delete(ctx, q); err != nil {
		return nil, err
	}
	return doomed, nil
}

// milestone reports whether position pos of total (from 1, oldest first)
// is one that keep_milestones(n) keeps: the first, the last, and 1 +
// round(i*(total-1)/(n+1)) for each i from 1 to n, rounding halves up (as
// Postgres rounds numeric), found without counting i up to n: the least i
// that rounds to pos-1 or more, if it is at most n, rounds to pos-1 when
// 2i(total-1) < (2pos-1)(n+1). With n at least total every position is
// one (the positions are at most one apart).
func milestone(pos, total, n int64) bool {
	if pos == 1 || pos == total || n >= total {
		return true
	}
	m, d := total-1, n+1
	i := max(ceilDiv((2*pos-3)*d, 2*m), 1)
	return i <= n && 2*i*m < (2*pos-1)*d
}

// ceilDiv is x/d rounded up, d > 0.
func ceilDiv(x, d int64) int64 {
	q := x / d
	if x%d != 0 && x > 0 {
		q++
	}
	return q
}

// SweepBatch applies expiry and then p (checked) to up to size threads after after,
// in thread id order, in one transaction. A thread that fails is rolled
// back to where it was (a savepoint), counted, and skipped.
func (s *Store) SweepBatch(ctx context.Context, p engine.Policy, after string, size int) (engine.SweepBatchResult, error) {
	return s.sweepBatch(ctx, p, after, size, false)
}

// PreviewSweepBatch implements engine.Store: SweepBatch in a write
// transaction it rolls back.
func (s *Store) PreviewSweepBatch(ctx context.Context, p engine.Policy, after string, size int) (engine.SweepBatchResult, error) {
	return s.sweepBatch(ctx, p, after, size, true)
}

// sweepBatch is SweepBatch, or with preview PreviewSweepBatch.
func (s *Store) sweepBatch(ctx context.Context, p engine.Policy, after string, size int, preview bool) (engine.SweepBatchResult, error) {
	var res engine.SweepBatchResult
	// Alone: the writes that queue behind a batch of many threads do not
	// wait for it to share its commit (and fn runs once, so it may add to
	// res).
	err := s.writeAlone(ctx, func(q *queries, tx execer) error {
		now := s.now()
		ids, err := q.ThreadIDsAfter(ctx, sqlitedb.ThreadIDsAfterParams{After: after, MaxRows: int64(size)})
		if err != nil {
			return dbError("list threads", err)
		}
		if len(ids) == 0 {
			return nil
		}
		last := ids[len(ids)-1]
		due, err := q.ThreadExpiriesDue(ctx, sqlitedb.ThreadExpiriesDueParams{
			After: after, Last: last, Now: sql.NullInt64{Int64: now.UnixMicro(), Valid: true},
		})
		if err != nil {
			return dbError("read the expiries", err)
		}
		keepsLatest := make(map[string]bool, len(due))
		for _, d := range due {
			keepsLatest[d.ThreadID] = d.KeepLatest
		}
		// The batch's expiries first, then its policy, as thread_gc_many
		// applies them: a branch that expires no longer protects its
		// source from the policy, wherever the two are in the batch.
		expiringFirst := make([]string, 0, len(ids))
		for _, t := range ids {
			if _, expiring := keepsLatest[t]; expiring {
				expiringFirst = append(expiringFirst, t)
			}
		}
		for _, t := range ids {
			if _, expiring := keepsLatest[t]; !expiring {
				expiringFirst = append(expiringFirst, t)
			}
		}
		for _, t := range expiringFirst {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT sweep_thread`); err != nil {
				return dbError("savepoint", err)
			}
			keep, expiring := keepsLatest[t]
			expired, n, err := sweepThread(ctx, q, t, p, expiring, keep, now)
			if err != nil {
				if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO sweep_thread`); rerr != nil {
					return dbError("roll back a failed thread", errors.Join(err, rerr))
				}
				res.Failed++
			} else {
				res.Deleted += n
				if expired {
					res.Expired++
				}
			}
			if _, err := tx.ExecContext(ctx, `RELEASE sweep_thread`); err != nil {
				return dbError("release savepoint", err)
			}
		}
		if err := q.ThreadSetSwept(ctx, sqlitedb.ThreadSetSweptParams{
			After: after, Last: last, SweptAt: sql.NullInt64{Int64: now.UnixMicro(), Valid: true},
		}); err != nil {
			return dbError("mark the threads swept", err)
		}
		res.Threads, res.LastThreadID = len(ids), last
		if preview {
			return errPreview
		}
		return nil
	})
	if preview && errors.Is(err, errPreview) {
		err = nil // rolled back, as a preview is
	}
	return res, err
}

// sweepThread applies a thread's expiry if one is due (expiring; keep:
// it keeps the heads), else the policy.
func sweepThread(ctx context.Context, q *queries, threadID string, p engine.Policy, expiring, keep bool, now time.Time) (expired bool, n int64, err error) {
	switch {
	case !expiring:
		r, err := pruneThread(ctx, q, threadID, p, now)
		return false, r.Deleted, err
	case !keep:
		r, err := pruneThread(ctx, q, threadID, engine.KeepNone(), now)
		return true, r.Deleted, err
	}
	r, err := pruneThread(ctx, q, threadID, engine.KeepLatest(), now)
	if err != nil {
		return false, 0, err
	}
	if err := q.ThreadClearExpiry(ctx, threadID); err != nil {
		return false, 0, dbError("clear the expiry", err)
	}
	return true, r.Deleted, nil
}

// Expiry returns when a thread expires and whether its expiry keeps the
// heads. Errors: engine.ErrNotFound for an unknown thread.
func (s *Store) Expiry(ctx context.Context, threadID string) (time.Time, bool, error) {
	rq, err := s.readQueries()
	if err != nil {
		return time.Time{}, false, err
	}
	r, err := rq.ThreadGetExpiry(ctx, threadID)
	if err != nil {
		return time.Time{}, false, storeError(dbError(fmt.Sprintf("thread %q", threadID), err))
	}
	var at time.Time
	if r.ExpiresAt.Valid {
		at = fromMicros(r.ExpiresAt.Int64)
		if at.IsZero() || at.Before(time.Time{}) {
			// Year 1's first instant or before, set by a bare UPDATE
			// (SetThreadExpiry refuses it): expired, as a sweep takes
			// it, not the zero time of "does not expire".
			at = time.Time{}.Add(time.Microsecond)
		}
	}
	return at, r.ExpireAction == "keep_latest", nil
}

// SetExpiry sets (zero at: clears) the expiry of every namespace row of a
// thread, KeepNone or KeepLatest, and returns how many rows it changed.
func (s *Store) SetExpiry(ctx context.Context, threadID string, at time.Time, p engine.Policy) (int64, error) {
	var n int64
	err := s.write(ctx, func(q *queries, _ execer) error {
		var err error
		n, err = q.ThreadSetExpiry(ctx, sqlitedb.ThreadSetExpiryParams{
			ThreadID: threadID, ExpiresAt: sql.NullInt64{Int64: at.UnixMicro(), Valid: !at.IsZero()},
			KeepLatest: p.Name() == "keep_latest",
		})
		return dbError(fmt.Sprintf("set the expiry of thread %q", threadID), err)
	})
	return n, err
}
