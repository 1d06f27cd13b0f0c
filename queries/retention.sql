-- name: ThreadGc :many
-- Applies a retention policy to one thread (see pgcheckpoint.thread_gc);
-- age_seconds is the keep_age age in seconds (ignored by other policies).
SELECT g.thread_id::text AS thread_id, g.namespace::text AS namespace,
       g.checkpoint_id::uuid AS checkpoint_id, g.step::bigint AS step
FROM pgcheckpoint.thread_gc(@thread_id::text, @policy::text, @n::int,
                            make_interval(0, 0, 0, 0, 0, 0, @age_seconds::float8)) AS g;

-- name: ThreadGcBatch :one
-- One transaction of a sweep (see pgcheckpoint.thread_gc_batch).
-- last_thread_id is '' when no thread was left.
SELECT coalesce(b.last_thread_id, '')::text AS last_thread_id, b.threads::int AS threads,
       b.expired::int AS expired, b.failed::int AS failed, b.deleted::bigint AS deleted
FROM pgcheckpoint.thread_gc_batch(@policy::text, @n::int, make_interval(0, 0, 0, 0, 0, 0, @age_seconds::float8),
                                  @after_thread_id::text, @batch_size::int) AS b;

-- name: ThreadSetExpiry :one
-- Sets (or, with a NULL time, clears) the expiry of every namespace row of
-- a thread, under its lock (see pgcheckpoint.thread_set_expiry): once
-- expired, a sweep keeps its heads (keep_latest) or deletes it (see
-- pgcheckpoint.thread_expire). The number of rows changed.
SELECT pgcheckpoint.thread_set_expiry(@thread_id::text, sqlc.narg(expires_at)::timestamptz,
                                      @keep_latest::boolean)::bigint AS updated;

-- name: ThreadGetExpiry :one
-- When a thread expires and what its expiry keeps ('delete' or
-- 'keep_latest'), as ThreadSetExpiry set it on every namespace row; no row
-- for an unknown thread, a NULL time when it does not expire. A namespace
-- first written since has no expiry of its own: the earliest row's is the
-- thread's, as thread_expire takes it.
SELECT t.expires_at, t.expire_action
FROM pgcheckpoint.tenant_threads t
WHERE t.thread_id = @thread_id::text
ORDER BY t.expires_at NULLS LAST, t.namespace
LIMIT 1;
