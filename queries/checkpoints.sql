-- name: CheckpointPut :one
-- Writes one checkpoint in one round trip; see pgcheckpoint.checkpoint_put.
SELECT r.thread_id::text AS thread_id, r.namespace::text AS namespace,
       r.checkpoint_id::uuid AS checkpoint_id,
       -- The nil UUID stands for "no parent" (sqlc types function columns as NOT NULL).
       coalesce(r.parent_checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS parent_checkpoint_id,
       r.step::bigint AS step, r.created_at::timestamptz AS created_at,
       r.inserted::boolean AS inserted
FROM pgcheckpoint.checkpoint_put(
    @thread_id::text,
    @namespace::text,
    @checkpoint_id::uuid,
    sqlc.narg(parent_checkpoint_id)::uuid,
    @trigger::text,
    @tags::text[],
    @summary::text,
    @metadata::jsonb,
    @messages::jsonb,
    @state::jsonb,
    @tool_results::jsonb,
    @next_node::text,
    @size_bytes::bigint
) AS r;

-- name: CheckpointGetByID :one
-- A checkpoint with its pending writes (ordered by task and index) as one
-- JSON array, so Get is one round trip.
SELECT c.thread_id, c.namespace, c.checkpoint_id, c.parent_checkpoint_id, c.step,
       c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.messages,
       c.state, c.tool_results, c.next_node, c.size_bytes,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'task_id', w.task_id, 'idx', w.idx, 'channel', w.channel, 'value', w.value)
                   ORDER BY w.task_id, w.idx), '[]'::jsonb)
        FROM pgcheckpoint.pending_writes w
        WHERE w.thread_id = c.thread_id AND w.namespace = c.namespace
          AND w.checkpoint_id = c.checkpoint_id)::jsonb AS pending_writes
FROM pgcheckpoint.checkpoints c
WHERE c.checkpoint_id = @checkpoint_id::uuid
LIMIT 1;

-- name: CheckpointGetHead :one
-- The head of a thread and namespace: the checkpoint the next write builds on.
SELECT c.thread_id, c.namespace, c.checkpoint_id, c.parent_checkpoint_id, c.step,
       c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.messages,
       c.state, c.tool_results, c.next_node, c.size_bytes,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'task_id', w.task_id, 'idx', w.idx, 'channel', w.channel, 'value', w.value)
                   ORDER BY w.task_id, w.idx), '[]'::jsonb)
        FROM pgcheckpoint.pending_writes w
        WHERE w.thread_id = c.thread_id AND w.namespace = c.namespace
          AND w.checkpoint_id = c.checkpoint_id)::jsonb AS pending_writes
FROM pgcheckpoint.threads t
JOIN pgcheckpoint.checkpoints c
  ON c.thread_id = t.thread_id AND c.namespace = t.namespace
 AND c.checkpoint_id = t.head_checkpoint_id
WHERE t.thread_id = @thread_id::text AND t.namespace = @namespace::text;

-- name: CheckpointListByThread :many
-- Newest first (checkpoint ids are UUIDv7), keyset-paginated by the
-- before cursor, filtered by metadata containment and by tags. Content
-- columns are left out: Get reads one checkpoint whole.
SELECT c.thread_id, c.namespace, c.checkpoint_id, c.parent_checkpoint_id, c.step,
       c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.next_node, c.size_bytes
FROM pgcheckpoint.checkpoints c
WHERE c.thread_id = @thread_id::text
  AND c.namespace = @namespace::text
  AND (sqlc.narg(before)::uuid IS NULL OR c.checkpoint_id < sqlc.narg(before)::uuid)
  AND (sqlc.narg(metadata_filter)::jsonb IS NULL OR c.metadata @> sqlc.narg(metadata_filter)::jsonb)
  AND c.tags @> @tags::text[]
ORDER BY c.checkpoint_id DESC
LIMIT @max_rows::int;

-- name: CheckpointDeleteBefore :one
-- Deletes a thread's checkpoints (root namespace) whose step is below the
-- given one, never the head; pending writes go with them (foreign key).
WITH deleted AS (
    DELETE FROM pgcheckpoint.checkpoints c
    USING pgcheckpoint.threads t
    WHERE c.thread_id = @thread_id::text AND c.namespace = @namespace::text
      AND t.thread_id = c.thread_id AND t.namespace = c.namespace
      AND c.step < @before_step::bigint
      AND c.checkpoint_id IS DISTINCT FROM t.head_checkpoint_id
    RETURNING 1
)
SELECT count(*) FROM deleted;
