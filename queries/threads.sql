-- name: ThreadListHeads :many
-- One row per thread: DISTINCT ON picks the root namespace ('' sorts first)
-- and walks the threads primary key, so a page reads about max_rows rows
-- whatever the number of checkpoints.
SELECT DISTINCT ON (t.thread_id)
       t.thread_id, t.namespace, t.head_checkpoint_id, coalesce(t.head_step, 0)::bigint AS head_step, t.metadata,
       t.created_at, t.updated_at,
       coalesce(c.summary, '')::text AS head_summary
FROM pgcheckpoint.threads t
LEFT JOIN pgcheckpoint.checkpoints c
  ON c.thread_id = t.thread_id AND c.namespace = t.namespace
 AND c.checkpoint_id = t.head_checkpoint_id
WHERE t.thread_id > @after::text
ORDER BY t.thread_id, t.namespace
LIMIT @max_rows::int;

-- name: ThreadDelete :one
-- Deletes a thread from every table in one statement: checkpoints go with
-- their thread rows and pending writes with their checkpoints (foreign
-- keys, ON DELETE CASCADE). Returns the number of checkpoints deleted.
WITH deleted_checkpoints AS (
    DELETE FROM pgcheckpoint.checkpoints c
    WHERE c.thread_id = @thread_id::text
    RETURNING 1
), deleted_threads AS (
    DELETE FROM pgcheckpoint.threads t
    WHERE t.thread_id = @thread_id::text
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted_checkpoints) AS checkpoints,
       (SELECT count(*) FROM deleted_threads) AS threads;
