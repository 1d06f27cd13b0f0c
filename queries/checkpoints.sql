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
    @size_bytes::bigint,
    @delta_run::int,
    sqlc.narg(message_digests)::bytea,
    sqlc.narg(state_digests)::jsonb,
    sqlc.narg(tool_results_digests)::jsonb,
    @sealed::boolean,
    sqlc.narg(merge_parent_id)::uuid
) AS r;

-- name: CheckpointAppend :one
-- Writes one checkpoint from a change to the head; see
-- pgcheckpoint.checkpoint_append.
SELECT r.thread_id::text AS thread_id, r.namespace::text AS namespace,
       r.checkpoint_id::uuid AS checkpoint_id,
       coalesce(r.parent_checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS parent_checkpoint_id,
       r.step::bigint AS step, r.created_at::timestamptz AS created_at,
       r.inserted::boolean AS inserted
FROM pgcheckpoint.checkpoint_append(
    @thread_id::text,
    @namespace::text,
    @checkpoint_id::uuid,
    sqlc.narg(on_head)::uuid,
    @trigger::text,
    @tags::text[],
    @summary::text,
    @metadata::jsonb,
    @messages::jsonb,
    @set_state::jsonb,
    @set_tool_results::jsonb,
    @remove_state::text[],
    @remove_tool_results::text[],
    @next_node::text,
    @size_bytes::bigint,
    @delta_run::int,
    sqlc.narg(message_digests)::bytea,
    sqlc.narg(set_state_digests)::jsonb,
    sqlc.narg(set_tool_results_digests)::jsonb,
    sqlc.narg(max_size_bytes)::bigint,
    sqlc.narg(content_bytes)::bigint,
    @sealed::boolean
) AS r;

-- name: CheckpointGetByID :one
-- A checkpoint with its whole content and its pending writes (ordered by
-- task and index) as one JSON array, in one statement. The content is
-- {messages, state, tool_results} as JSON text in bytes, as Postgres
-- wrote it (a jsonb column scanned into json.RawMessage would be validated
-- again by encoding/json on the client): pgcheckpoint.checkpoint_content_json,
-- which the planner inlines, of the row read by id in a scalar subquery,
-- so a full checkpoint costs one index probe and no function call, and
-- the plan has no join (each plan node costs every execution its start).
-- Pending writes are aggregated only for a checkpoint that has some (the
-- probe here saves the call of pending_writes_json, which probes again).
SELECT sqlc.embed(c),
       (SELECT pgcheckpoint.checkpoint_content_json(x.checkpoint_id, x.format, x.messages, x.state, x.tool_results)
        FROM pgcheckpoint.tenant_checkpoints x
        WHERE x.checkpoint_id = c.checkpoint_id)::bytea[] AS content,
       CASE WHEN EXISTS (SELECT FROM pgcheckpoint.tenant_pending_writes w
                         WHERE w.thread_id = c.thread_id AND w.namespace = c.namespace AND w.checkpoint_seq = c.seq)
            THEN pgcheckpoint.pending_writes_json(c.thread_id, c.namespace, c.seq)::text
            ELSE ''
       END::text AS pending_writes
FROM pgcheckpoint.tenant_checkpoint_info c
WHERE c.checkpoint_id = @checkpoint_id;

-- name: CheckpointGetHead :one
-- The head of a thread and namespace: the checkpoint the next write builds
-- on (see pgcheckpoint.thread_head_seq), read as CheckpointGetByID reads one.
SELECT sqlc.embed(c),
       (SELECT pgcheckpoint.checkpoint_content_json(x.checkpoint_id, x.format, x.messages, x.state, x.tool_results)
        FROM pgcheckpoint.tenant_checkpoints x
        WHERE x.checkpoint_id = c.checkpoint_id)::bytea[] AS content,
       CASE WHEN EXISTS (SELECT FROM pgcheckpoint.tenant_pending_writes w
                         WHERE w.thread_id = c.thread_id AND w.namespace = c.namespace AND w.checkpoint_seq = c.seq)
            THEN pgcheckpoint.pending_writes_json(c.thread_id, c.namespace, c.seq)::text
            ELSE ''
       END::text AS pending_writes
FROM pgcheckpoint.tenant_checkpoint_info c
WHERE c.thread_id = @thread_id::text AND c.namespace = @namespace::text
  AND c.seq = pgcheckpoint.thread_head_seq(@thread_id::text, @namespace::text);

-- name: CheckpointListByThread :many
-- Newest first (write order), keyset-paginated by the before cursor (a
-- checkpoint id; a cursor not in the thread gives no rows), filtered by
-- metadata containment and by tags. Content columns are left out: Get reads
-- one checkpoint whole.
SELECT sqlc.embed(c)
FROM pgcheckpoint.tenant_checkpoint_info c
WHERE c.thread_id = @thread_id::text
  AND c.namespace = @namespace::text
  -- One scalar subquery, computed once: the scan compares seq with a
  -- plain value, which row-level security lets into the index condition
  -- (an expression around a subquery would be a filter, read for every
  -- checkpoint newer than the cursor).
  AND c.seq < (SELECT coalesce(
        -- The cursor by id alone, then checked (see checkpoint_put).
        (SELECT CASE WHEN b.thread_id = @thread_id::text AND b.namespace = @namespace::text THEN b.seq END
         FROM pgcheckpoint.tenant_checkpoints b
         WHERE b.checkpoint_id = sqlc.narg(before)::uuid
         LIMIT 1),
        CASE WHEN sqlc.narg(before)::uuid IS NULL THEN 9223372036854775807 ELSE 0 END))
  AND (sqlc.narg(metadata_filter)::jsonb IS NULL OR c.metadata @> sqlc.narg(metadata_filter)::jsonb)
  AND c.tags @> @tags::text[]
ORDER BY c.seq DESC
LIMIT @max_rows::int;

-- name: CheckpointDeleteBefore :one
-- See pgcheckpoint.checkpoint_delete_before: never deletes the head.
SELECT pgcheckpoint.checkpoint_delete_before(@thread_id::text, @namespace::text, @before_step::bigint)::bigint AS deleted;

-- name: CheckpointLineage :many
-- A checkpoint and its ancestors, newest first, across branch threads (see
-- pgcheckpoint.checkpoint_lineage).
SELECT sqlc.embed(c), l.depth::int AS depth
FROM pgcheckpoint.checkpoint_lineage(@checkpoint_id::uuid, sqlc.narg(max_depth)::int) AS l
JOIN pgcheckpoint.tenant_checkpoint_info c
  ON c.thread_id = l.thread_id AND c.namespace = l.namespace AND c.seq = l.seq
ORDER BY l.depth;

-- name: ThreadTree :many
-- Every checkpoint of a thread and of the branches forked from it, with
-- both parents (see pgcheckpoint.thread_tree). The nil UUID stands for "none".
SELECT t.thread_id::text AS thread_id, t.namespace::text AS namespace, t.seq::bigint AS seq,
       t.checkpoint_id::uuid AS checkpoint_id,
       coalesce(t.parent_checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS parent_checkpoint_id,
       coalesce(t.merge_parent_id, '00000000-0000-0000-0000-000000000000')::uuid AS merge_parent_id,
       t.step::bigint AS step, t.created_at::timestamptz AS created_at, t.trigger::text AS trigger,
       t.tags::text[] AS tags, t.summary::text AS summary, t.is_head::boolean AS is_head
FROM pgcheckpoint.thread_tree(@thread_id::text) AS t;

-- name: CheckpointRewind :one
-- Makes a checkpoint its thread's head (see pgcheckpoint.checkpoint_rewind).
SELECT r.thread_id::text AS thread_id, r.namespace::text AS namespace,
       r.checkpoint_id::uuid AS checkpoint_id, r.step::bigint AS step,
       r.head_step::bigint AS head_step, r.checkpoints::bigint AS checkpoints,
       r.truncated::bigint AS truncated
FROM pgcheckpoint.checkpoint_rewind(@checkpoint_id::uuid, @truncate::boolean) AS r;

-- name: ThreadRewindToStep :one
-- Rewinds a thread's namespace to the checkpoint at or below a step on
-- its head's line, found under its lock (see
-- pgcheckpoint.thread_rewind_to_step).
SELECT r.thread_id::text AS thread_id, r.namespace::text AS namespace,
       r.checkpoint_id::uuid AS checkpoint_id, r.step::bigint AS step,
       r.head_step::bigint AS head_step, r.checkpoints::bigint AS checkpoints,
       r.truncated::bigint AS truncated
FROM pgcheckpoint.thread_rewind_to_step(@thread_id::text, @namespace::text, @step::bigint) AS r;

-- name: CheckpointDeleteForRuns :one
-- See pgcheckpoint.checkpoint_delete_for_runs.
SELECT pgcheckpoint.checkpoint_delete_for_runs(@run_ids::text[])::bigint AS deleted;
