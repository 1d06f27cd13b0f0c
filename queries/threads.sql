-- name: ThreadListHeads :many
-- One row per thread with its head: DISTINCT ON picks the root namespace
-- ('' sorts first) and walks the threads primary key, so a page reads about
-- max_rows thread rows and one head each, however many checkpoints there are.
SELECT DISTINCT ON (t.thread_id)
       t.thread_id, t.namespace, t.metadata, t.created_at,
       coalesce(h.checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS head_checkpoint_id,
       coalesce(h.step, 0)::bigint AS head_step,
       coalesce(h.summary, '')::text AS head_summary,
       coalesce(h.created_at, t.created_at)::timestamptz AS head_created_at
FROM pgcheckpoint.threads t
LEFT JOIN pgcheckpoint.checkpoints h
  ON h.thread_id = t.thread_id AND h.namespace = t.namespace
 AND h.seq = pgcheckpoint.head_seq(t.thread_id, t.namespace)
WHERE t.thread_id > @after::text
ORDER BY t.thread_id, t.namespace
LIMIT @max_rows::int;

-- name: ThreadDelete :one
-- See pgcheckpoint.thread_delete: every table, under the thread lock.
SELECT pgcheckpoint.thread_delete(@thread_id::text)::bigint AS deleted;
