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
-- new checkpoint id's. The engine queues this ahead of CheckpointPutFast or
-- CheckpointPutWhole in one pipeline, so both run in one implicit
-- transaction and the insert's snapshot is taken under the locks: it sees
-- every other write of the thread and of the id. Postgres inlines both
-- functions (neither has a SET clause), so the plan is the two bare
-- pg_advisory_xact_lock calls.
SELECT pgcheckpoint.thread_lock(@thread_id::text),
       pgcheckpoint.checkpoint_id_lock(@checkpoint_id::uuid);

-- name: CheckpointPutFast :batchone
-- The common case of checkpoint_put as one statement, for a caller that
-- already holds the thread lock: a thread with checkpoints and no rewind
-- pending, a new id, the newest checkpoint as the parent and, for a delta,
-- as its base, when the parent's run may grow (delta_run 1: always whole).
-- The row stored is the one checkpoint_put would store (the engine's tests
-- compare them column by column). No row back means the case is not the
-- common one: nothing was written, and the caller calls checkpoint_put,
-- which handles every case. Arguments are taken as checked (the engine
-- validates them as checkpoint_put does); message_digests is the message
-- chain (32 bytes per message, see pgcheckpoint.message_chain) and
-- messages_digest its last value.
INSERT INTO pgcheckpoint.checkpoints AS c (
    thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step,
    trigger, tags, summary, metadata, format, base_checkpoint_id, delta_run, delta_depth,
    messages, state, tool_results, state_removed, tool_results_removed, messages_count,
    messages_digest, state_digests, tool_results_digests, next_node, size_bytes)
SELECT @thread_id::text, @namespace::text, p.seq + 1, @checkpoint_id::uuid, p.checkpoint_id, p.step + 1,
       @trigger::text, @tags::text[],
       CASE WHEN @summary::text <> '' THEN @summary::text
            ELSE pgcheckpoint.checkpoint_default_summary(@messages::jsonb, @state::jsonb)
       END,
       @metadata::jsonb,
       CASE WHEN d.delta THEN 'delta' ELSE 'full' END,
       CASE WHEN d.delta THEN p.checkpoint_id END,
       CASE WHEN d.delta THEN p.delta_run + 1 ELSE 0 END,
       CASE WHEN d.delta THEN p.delta_depth + 1 ELSE 0 END,
       CASE WHEN d.delta THEN d.messages ELSE @messages::jsonb END,
       CASE WHEN d.delta THEN d.state ELSE @state::jsonb END,
       CASE WHEN d.delta THEN d.tool_results ELSE @tool_results::jsonb END,
       CASE WHEN d.delta THEN d.state_removed ELSE '{}' END,
       CASE WHEN d.delta THEN d.tool_results_removed ELSE '{}' END,
       jsonb_array_length(@messages::jsonb), sqlc.narg(messages_digest)::bytea,
       sqlc.narg(state_digests)::jsonb, sqlc.narg(tool_results_digests)::jsonb,
       @next_node::text, @size_bytes::bigint
FROM pgcheckpoint.threads t
CROSS JOIN LATERAL (
    SELECT p.checkpoint_id, p.seq, p.step, p.delta_run, p.delta_depth, p.messages_count,
           p.messages_digest, p.state_digests, p.tool_results_digests
    FROM pgcheckpoint.checkpoints p
    WHERE p.thread_id = @thread_id::text AND p.namespace = @namespace::text
    ORDER BY p.seq DESC
    LIMIT 1) p
CROSS JOIN LATERAL (
    -- A delta when the parent's messages are a prefix of these (by digest)
    -- and the delta is smaller than the whole; OFFSET 0 keeps each part
    -- computed once. The parts are computed before the prefix is known, so
    -- each must also work on a parent without digests (imported, or written
    -- by hand), whose columns are NULL.
    SELECT x.prefix
           AND pg_column_size(x.messages) + pg_column_size(x.state) + pg_column_size(x.tool_results)
             < pg_column_size(@messages::jsonb) + pg_column_size(@state::jsonb) + pg_column_size(@tool_results::jsonb)
           AS delta,
           x.*
    FROM (
        SELECT @delta_run::int > 1 AND p.messages_count <= jsonb_array_length(@messages::jsonb)
                 AND p.state_digests IS NOT NULL AND p.tool_results_digests IS NOT NULL
                 AND pgcheckpoint.message_chain_at(sqlc.narg(message_digests)::bytea, p.messages_count)
                     = p.messages_digest AS prefix,
               CASE WHEN @delta_run::int = 1 OR p.messages_count IS NULL
                         OR p.messages_count >= jsonb_array_length(@messages::jsonb) THEN '[]'::jsonb
                    ELSE jsonb_path_query_array(@messages::jsonb, '$[$n to last]', jsonb_build_object('n', p.messages_count))
               END AS messages,
               CASE WHEN @delta_run::int = 1 OR sqlc.narg(state_digests)::jsonb = p.state_digests THEN '{}'::jsonb
                    ELSE (SELECT coalesce(jsonb_object_agg(e.key, @state::jsonb -> e.key), '{}')
                          FROM jsonb_each(sqlc.narg(state_digests)::jsonb) e
                          WHERE e.value IS DISTINCT FROM p.state_digests -> e.key)
               END AS state,
               CASE WHEN @delta_run::int = 1 OR sqlc.narg(state_digests)::jsonb = p.state_digests THEN '{}'::text[]
                    ELSE ARRAY(SELECT k FROM jsonb_object_keys(p.state_digests) k
                               WHERE NOT @state::jsonb ? k ORDER BY k)
               END AS state_removed,
               CASE WHEN @delta_run::int = 1 OR sqlc.narg(tool_results_digests)::jsonb = p.tool_results_digests THEN '{}'::jsonb
                    ELSE (SELECT coalesce(jsonb_object_agg(e.key, @tool_results::jsonb -> e.key), '{}')
                          FROM jsonb_each(sqlc.narg(tool_results_digests)::jsonb) e
                          WHERE e.value IS DISTINCT FROM p.tool_results_digests -> e.key)
               END AS tool_results,
               CASE WHEN @delta_run::int = 1 OR sqlc.narg(tool_results_digests)::jsonb = p.tool_results_digests THEN '{}'::text[]
                    ELSE ARRAY(SELECT k FROM jsonb_object_keys(p.tool_results_digests) k
                               WHERE NOT @tool_results::jsonb ? k ORDER BY k)
               END AS tool_results_removed
        OFFSET 0) x
    OFFSET 0) d
WHERE t.thread_id = @thread_id::text AND t.namespace = @namespace::text AND t.rewound_to IS NULL
  AND (sqlc.narg(parent_checkpoint_id)::uuid IS NULL OR sqlc.narg(parent_checkpoint_id)::uuid = p.checkpoint_id)
  AND (@delta_run::int = 1 OR p.delta_run + 1 < @delta_run::int)
  AND NOT EXISTS (SELECT 1 FROM pgcheckpoint.checkpoints e WHERE e.checkpoint_id = @checkpoint_id::uuid)
RETURNING c.thread_id, c.namespace, c.checkpoint_id,
          coalesce(c.parent_checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS parent_checkpoint_id,
          c.step, c.created_at;

-- name: CheckpointPutWhole :batchone
-- CheckpointPutFast for a checkpoint stored whole (the engine's delta_run 1:
-- FullSnapshots, or a snapshot under DeltaMinBytes): the same row, without
-- the delta computation. The columns left out take their defaults, which
-- are what checkpoint_put stores for such a write: format 'full', no base,
-- run and depth 0, no removed keys, no digests.
INSERT INTO pgcheckpoint.checkpoints AS c (
    thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step,
    trigger, tags, summary, metadata, messages, state, tool_results, messages_count,
    next_node, size_bytes)
SELECT @thread_id::text, @namespace::text, p.seq + 1, @checkpoint_id::uuid, p.checkpoint_id, p.step + 1,
       @trigger::text, @tags::text[],
       CASE WHEN @summary::text <> '' THEN @summary::text
            ELSE pgcheckpoint.checkpoint_default_summary(@messages::jsonb, @state::jsonb)
       END,
       @metadata::jsonb, @messages::jsonb, @state::jsonb, @tool_results::jsonb,
       jsonb_array_length(@messages::jsonb), @next_node::text, @size_bytes::bigint
FROM pgcheckpoint.threads t
CROSS JOIN LATERAL (
    SELECT p.checkpoint_id, p.seq, p.step
    FROM pgcheckpoint.checkpoints p
    WHERE p.thread_id = @thread_id::text AND p.namespace = @namespace::text
    ORDER BY p.seq DESC
    LIMIT 1) p
WHERE t.thread_id = @thread_id::text AND t.namespace = @namespace::text AND t.rewound_to IS NULL
  AND (sqlc.narg(parent_checkpoint_id)::uuid IS NULL OR sqlc.narg(parent_checkpoint_id)::uuid = p.checkpoint_id)
  AND NOT EXISTS (SELECT 1 FROM pgcheckpoint.checkpoints e WHERE e.checkpoint_id = @checkpoint_id::uuid)
RETURNING c.thread_id, c.namespace, c.checkpoint_id,
          coalesce(c.parent_checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS parent_checkpoint_id,
          c.step, c.created_at;

-- name: CheckpointGetByID :one
-- A checkpoint with its whole content (see
-- pgcheckpoint.checkpoint_materialize) and its pending writes (ordered by
-- task and index) as one JSON array, so Get is one round trip. The JSON comes back as text: what Postgres wrote is valid
-- JSON, and a jsonb column scanned into json.RawMessage would be validated
-- again by encoding/json on the client.
SELECT sqlc.embed(c),
       m.messages::text AS messages, m.state::text AS state, m.tool_results::text AS tool_results,
       coalesce(pgcheckpoint.pending_writes_json(c.thread_id, c.namespace, c.seq)::text, '')::text AS pending_writes
FROM pgcheckpoint.checkpoint_info c
CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize(c.checkpoint_id) m
WHERE c.checkpoint_id = @checkpoint_id::uuid
LIMIT 1;

-- name: CheckpointGetHead :one
-- The head of a thread and namespace: the checkpoint the next write builds
-- on (see pgcheckpoint.thread_head_seq).
SELECT sqlc.embed(c),
       m.messages::text AS messages, m.state::text AS state, m.tool_results::text AS tool_results,
       coalesce(pgcheckpoint.pending_writes_json(c.thread_id, c.namespace, c.seq)::text, '')::text AS pending_writes
FROM pgcheckpoint.checkpoint_info c
CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize(c.checkpoint_id) m
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
-- both parents (see pgcheckpoint.thread_tree). The nil UUID stands for
-- "none".
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
