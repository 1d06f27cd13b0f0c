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
SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.step,
       c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.messages,
       c.state, c.tool_results, c.next_node, c.size_bytes,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'task_id', w.task_id, 'idx', w.idx, 'channel', w.channel, 'value', w.value)
                   ORDER BY w.task_id, w.idx), '[]'::jsonb)
        FROM pgcheckpoint.pending_writes w
        WHERE w.thread_id = c.thread_id AND w.namespace = c.namespace
          AND w.checkpoint_seq = c.seq)::jsonb AS pending_writes
FROM pgcheckpoint.checkpoints c
WHERE c.checkpoint_id = @checkpoint_id::uuid
LIMIT 1;

-- name: CheckpointGetHead :one
-- The head of a thread and namespace: the checkpoint the next write builds
-- on (see pgcheckpoint.head_seq).
SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.step,
       c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.messages,
       c.state, c.tool_results, c.next_node, c.size_bytes,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'task_id', w.task_id, 'idx', w.idx, 'channel', w.channel, 'value', w.value)
                   ORDER BY w.task_id, w.idx), '[]'::jsonb)
        FROM pgcheckpoint.pending_writes w
        WHERE w.thread_id = c.thread_id AND w.namespace = c.namespace
          AND w.checkpoint_seq = c.seq)::jsonb AS pending_writes
FROM pgcheckpoint.checkpoints c
WHERE c.thread_id = @thread_id::text AND c.namespace = @namespace::text
  AND c.seq = pgcheckpoint.head_seq(@thread_id::text, @namespace::text);

-- name: CheckpointListByThread :many
-- Newest first (write order), keyset-paginated by the before cursor (a
-- checkpoint id; a cursor not in the thread gives no rows), filtered by
-- metadata containment and by tags. Content columns are left out: Get reads
-- one checkpoint whole.
SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.step,
       c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.next_node, c.size_bytes
FROM pgcheckpoint.checkpoints c
WHERE c.thread_id = @thread_id::text
  AND c.namespace = @namespace::text
  AND c.seq < coalesce(
        -- The cursor by id alone, then checked (see checkpoint_put).
        (SELECT CASE WHEN b.thread_id = @thread_id::text AND b.namespace = @namespace::text THEN b.seq END
         FROM pgcheckpoint.checkpoints b
         WHERE b.checkpoint_id = sqlc.narg(before)::uuid
         LIMIT 1),
        CASE WHEN sqlc.narg(before)::uuid IS NULL THEN 9223372036854775807 ELSE 0 END)
  AND (sqlc.narg(metadata_filter)::jsonb IS NULL OR c.metadata @> sqlc.narg(metadata_filter)::jsonb)
  AND c.tags @> @tags::text[]
ORDER BY c.seq DESC
LIMIT @max_rows::int;

-- name: CheckpointGetSeq :one
-- The seq of a checkpoint in a thread and namespace, for list cursors. By
-- id alone, then checked (see checkpoint_put).
SELECT c.seq
FROM (SELECT c.seq, c.thread_id, c.namespace
      FROM pgcheckpoint.checkpoints c
      WHERE c.checkpoint_id = @checkpoint_id::uuid
      LIMIT 1) c
WHERE c.thread_id = @thread_id::text AND c.namespace = @namespace::text;

-- name: CheckpointDeleteBefore :one
-- See pgcheckpoint.checkpoint_delete_before: never deletes the head.
SELECT pgcheckpoint.checkpoint_delete_before(@thread_id::text, @namespace::text, @before_step::bigint)::bigint AS deleted;
