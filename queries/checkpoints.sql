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
    sqlc.narg(tool_results_digests)::jsonb
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
    sqlc.narg(set_tool_results_digests)::jsonb
) AS r;

-- name: CheckpointWriteLock :batchexec
-- The locks of a write, in checkpoint_put's order: the thread's, then the
-- new checkpoint id's (both functions are inlined: the statement is the
-- two advisory locks). The engine queues this ahead of CheckpointPutFast
-- or CheckpointPutWhole in one pipeline, so both run in one implicit
-- transaction and the insert's snapshot is taken under the locks: it sees
-- every other write of the thread and of the id.
SELECT pgcheckpoint.thread_lock(@thread_id::text), pgcheckpoint.checkpoint_id_lock(@checkpoint_id::uuid);

-- name: CheckpointPutFast :batchone
-- The common case of checkpoint_put as one statement, for a caller that
-- holds the locks (CheckpointWriteLock): a thread with checkpoints, no
-- rewind pending, a new id and a parent in the thread (given, else the
-- newest). The rules are checkpoint_put's own functions (thread_head_for_write,
-- checkpoint_delta, checkpoint_default_summary), inlined. No row back
-- means the case is not the common one: nothing was written, and the
-- caller calls checkpoint_put, which handles every case. Arguments are
-- taken as checked (the engine validates them as checkpoint_put does);
-- message_digests is the message chain (32 bytes per message, see
-- pgcheckpoint.message_chain).
INSERT INTO pgcheckpoint.checkpoints AS c (
    thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step,
    trigger, tags, summary, metadata, format, base_checkpoint_id, delta_run, delta_depth,
    messages, state, tool_results, state_removed, tool_results_removed, messages_count,
    messages_digest, state_digests, tool_results_digests, next_node, size_bytes)
SELECT @thread_id::text, @namespace::text, h.next_seq, @checkpoint_id::uuid, h.parent_checkpoint_id, h.next_step,
       @trigger::text, @tags::text[],
       CASE WHEN @summary::text <> '' THEN @summary::text
            ELSE pgcheckpoint.checkpoint_default_summary(@messages::jsonb, @state::jsonb)
       END,
       @metadata::jsonb, d.format, d.base_checkpoint_id, d.delta_run, d.delta_depth,
       d.messages, d.state, d.tool_results, d.state_removed, d.tool_results_removed,
       jsonb_array_length(@messages::jsonb),
       pgcheckpoint.message_chain_at(sqlc.narg(message_digests)::bytea, jsonb_array_length(@messages::jsonb)),
       sqlc.narg(state_digests)::jsonb, sqlc.narg(tool_results_digests)::jsonb,
       @next_node::text, @size_bytes::bigint
FROM pgcheckpoint.thread_head_for_write(@thread_id::text, @namespace::text, @checkpoint_id::uuid,
                              sqlc.narg(parent_checkpoint_id)::uuid) h
CROSS JOIN LATERAL pgcheckpoint.checkpoint_delta(
    @messages::jsonb, @state::jsonb, @tool_results::jsonb,
    sqlc.narg(message_digests)::bytea, sqlc.narg(state_digests)::jsonb, sqlc.narg(tool_results_digests)::jsonb,
    h.parent_checkpoint_id, h.parent_delta_run, h.parent_delta_depth, h.parent_messages_count,
    h.parent_messages_digest, h.parent_state_digests, h.parent_tool_results_digests, @delta_run::int) d
WHERE h.thread_seen AND h.rewound_to IS NULL AND h.parent_checkpoint_id IS NOT NULL
RETURNING coalesce(c.parent_checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS parent_checkpoint_id,
          c.step, c.created_at;

-- name: CheckpointPutWhole :batchone
-- CheckpointPutFast for a checkpoint stored whole (the engine's delta_run 1:
-- FullSnapshots, or a snapshot under DeltaMinBytes), without the delta
-- decision, whose answer is known. The columns left out take their
-- defaults, which are what checkpoint_put stores for such a write: format
-- 'full', no base, run and depth 0, no removed keys, no digests.
INSERT INTO pgcheckpoint.checkpoints AS c (
    thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step,
    trigger, tags, summary, metadata, messages, state, tool_results, messages_count,
    next_node, size_bytes)
SELECT @thread_id::text, @namespace::text, h.next_seq, @checkpoint_id::uuid, h.parent_checkpoint_id, h.next_step,
       @trigger::text, @tags::text[],
       CASE WHEN @summary::text <> '' THEN @summary::text
            ELSE pgcheckpoint.checkpoint_default_summary(@messages::jsonb, @state::jsonb)
       END,
       @metadata::jsonb, @messages::jsonb, @state::jsonb, @tool_results::jsonb,
       jsonb_array_length(@messages::jsonb), @next_node::text, @size_bytes::bigint
FROM pgcheckpoint.thread_head_for_write(@thread_id::text, @namespace::text, @checkpoint_id::uuid,
                              sqlc.narg(parent_checkpoint_id)::uuid) h
WHERE h.thread_seen AND h.rewound_to IS NULL AND h.parent_checkpoint_id IS NOT NULL
RETURNING coalesce(c.parent_checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS parent_checkpoint_id,
          c.step, c.created_at;

-- name: CheckpointGetByID :one
-- A checkpoint with its whole content and its pending writes (ordered by
-- task and index) as one JSON array, in one statement: the content is
-- pgcheckpoint.checkpoint_materialize_json, which the planner inlines, so a full
-- checkpoint costs index lookups and no function call. The JSON comes as
-- bytes of text, as Postgres wrote it: a jsonb column scanned into
-- json.RawMessage would be validated again by encoding/json on the client.
-- Pending writes are aggregated only for a checkpoint that has some (the
-- probe here saves the call of pending_writes_json, which probes again).
SELECT sqlc.embed(c), m.messages::bytea AS messages, m.state::bytea AS state, m.tool_results::bytea AS tool_results,
       CASE WHEN EXISTS (SELECT FROM pgcheckpoint.pending_writes w
                         WHERE w.thread_id = c.thread_id AND w.namespace = c.namespace AND w.checkpoint_seq = c.seq)
            THEN pgcheckpoint.pending_writes_json(c.thread_id, c.namespace, c.seq)::text
            ELSE ''
       END::text AS pending_writes
FROM pgcheckpoint.checkpoint_info c
CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize_json(c.checkpoint_id) m
WHERE c.checkpoint_id = @checkpoint_id;

-- name: CheckpointGetHead :one
-- The head of a thread and namespace: the checkpoint the next write builds
-- on (see pgcheckpoint.thread_head_seq), read as CheckpointGetByID reads one.
SELECT sqlc.embed(c), m.messages::bytea AS messages, m.state::bytea AS state, m.tool_results::bytea AS tool_results,
       CASE WHEN EXISTS (SELECT FROM pgcheckpoint.pending_writes w
                         WHERE w.thread_id = c.thread_id AND w.namespace = c.namespace AND w.checkpoint_seq = c.seq)
            THEN pgcheckpoint.pending_writes_json(c.thread_id, c.namespace, c.seq)::text
            ELSE ''
       END::text AS pending_writes
FROM pgcheckpoint.checkpoint_info c
CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize_json(c.checkpoint_id) m
WHERE c.thread_id = @thread_id::text AND c.namespace = @namespace::text
  AND c.seq = pgcheckpoint.thread_head_seq(@thread_id::text, @namespace::text);

-- name: CheckpointListByThread :many
-- Newest first (write order), keyset-paginated by the before cursor (a
-- checkpoint id; a cursor not in the thread gives no rows), filtered by
-- metadata containment and by tags. Content columns are left out: Get reads
-- one checkpoint whole.
SELECT sqlc.embed(c)
FROM pgcheckpoint.checkpoint_info c
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

-- name: CheckpointLineage :many
-- A checkpoint and its ancestors, newest first, across branch threads (see
-- pgcheckpoint.checkpoint_lineage).
SELECT sqlc.embed(c), l.depth::int AS depth
FROM pgcheckpoint.checkpoint_lineage(@checkpoint_id::uuid, sqlc.narg(max_depth)::int) AS l
JOIN pgcheckpoint.checkpoint_info c
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

-- name: CheckpointFindOnHeadLine :one
-- The checkpoint with the greatest step at or below max_step on the line
-- from the head of a thread and namespace back to its root, in that thread
-- and namespace. Steps fall by one per link, so the walk stops at the depth
-- where that step is.
SELECT l.checkpoint_id::uuid AS checkpoint_id, l.depth::int AS depth
FROM pgcheckpoint.checkpoint_lineage(
        pgcheckpoint.thread_head(@thread_id::text, @namespace::text),
        greatest((SELECT h.step FROM pgcheckpoint.checkpoints h
                  WHERE h.checkpoint_id = pgcheckpoint.thread_head(@thread_id::text, @namespace::text) LIMIT 1)
                 - @max_step::bigint, 0)::int
     ) AS l
WHERE l.step <= @max_step::bigint AND l.thread_id = @thread_id::text AND l.namespace = @namespace::text
ORDER BY 2
LIMIT 1;

-- name: CheckpointDeleteForRuns :one
-- See pgcheckpoint.checkpoint_delete_for_runs.
SELECT pgcheckpoint.checkpoint_delete_for_runs(@run_ids::text[])::bigint AS deleted;
