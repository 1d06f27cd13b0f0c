-- name: ThreadExportTree :many
-- The threads an export covers: the thread itself and, when branches is
-- set, every thread forked from it, from those, and so on, oldest first
-- (a branch after the thread it was forked from). UNION without a depth
-- column ends even on a cycle of branch links (a damaged table).
WITH RECURSIVE tree AS (
    SELECT (@thread_id::text) COLLATE "C" AS thread_id -- as the column (a recursive term keeps one collation)
    UNION
    SELECT t.thread_id
    FROM tree
    JOIN pgcheckpoint.tenant_threads t ON t.branched_from_thread = tree.thread_id
    WHERE @branches::boolean
)
SELECT tree.thread_id::text AS thread_id
FROM tree
JOIN pgcheckpoint.tenant_threads t ON t.thread_id = tree.thread_id
GROUP BY tree.thread_id
ORDER BY min(t.created_at), tree.thread_id;

-- name: ThreadExportRows :many
-- A thread's rows, one per namespace, in namespace order.
SELECT namespace, rewound_to, metadata, created_at, branch_name, branched_from, branched_from_thread
FROM pgcheckpoint.tenant_threads
WHERE thread_id = @thread_id::text
ORDER BY namespace;

-- name: CheckpointExportPage :many
-- A page of a thread's checkpoints as stored, in namespace then write
-- order, after (after_namespace, after_seq): keyset pages over the primary
-- key, so an export holds one page in memory however long the thread is.
-- Removed keys come as JSON arrays, pending writes as one JSON array per
-- checkpoint. The JSON comes as bytes of text, as Postgres wrote it (what
-- jsonb's binary send format carries, without its version byte), as
-- CheckpointGetByID reads content: a jsonb column scanned into
-- json.RawMessage would be validated again by encoding/json on the client.
SELECT c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id, c.step,
       c.created_at, c.trigger, c.tags, c.summary,
       substr(jsonb_send(c.metadata), 2) AS metadata,
       c.format, c.base_checkpoint_id, c.delta_run, c.delta_depth,
       substr(jsonb_send(c.messages), 2) AS messages,
       substr(jsonb_send(c.state), 2) AS state,
       substr(jsonb_send(c.tool_results), 2) AS tool_results,
       substr(jsonb_send(to_jsonb(c.state_removed)), 2) AS state_removed,
       substr(jsonb_send(to_jsonb(c.tool_results_removed)), 2) AS tool_results_removed,
       c.next_node, c.size_bytes,
       substr(jsonb_send(coalesce(
           -- The time spelled in UTC (RFC 3339), whatever the session's
           -- TimeZone: a zone's old offsets in seconds (+00:19:32) do not
           -- parse as RFC 3339.
           (SELECT jsonb_agg(jsonb_build_object('task_id', p.task_id, 'idx', p.idx,
                             'channel', p.channel, 'value', p.value,
                             'created_at', to_char(p.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
                             ORDER BY p.task_id, p.idx)
            FROM pgcheckpoint.tenant_pending_writes p
            WHERE p.thread_id = c.thread_id AND p.namespace = c.namespace
              AND p.checkpoint_seq = c.seq), '[]')::jsonb), 2) AS pending_writes
FROM pgcheckpoint.tenant_checkpoints c
WHERE c.thread_id = @thread_id::text
  AND (c.namespace, c.seq) > (@after_namespace::text, @after_seq::bigint)
ORDER BY c.namespace, c.seq
LIMIT @max_rows::int;

-- name: ThreadImportLock :exec
-- The thread lock (see pgcheckpoint.thread_lock), held by an import until
-- it commits, so no write to the thread interleaves with it.
SELECT pgcheckpoint.thread_lock(@thread_id::text);

-- name: CheckpointImportFind :one
-- A checkpoint of the database by id, as an import checks links to it.
SELECT c.thread_id, c.namespace, c.step
FROM pgcheckpoint.tenant_checkpoints c
WHERE c.checkpoint_id = @checkpoint_id::uuid
LIMIT 1;

-- name: ThreadImportSealed :one
-- Whether a thread has a data key (pgcheckpoint.thread_sealed), read in the
-- import's transaction.
SELECT s.sealed::boolean AS sealed FROM pgcheckpoint.thread_sealed(@thread_id::text) s;

-- name: ThreadImportExists :one
-- Whether a thread has a row or a checkpoint in any namespace.
SELECT (EXISTS (SELECT 1 FROM pgcheckpoint.tenant_threads WHERE thread_id = @thread_id::text)
     OR EXISTS (SELECT 1 FROM pgcheckpoint.tenant_checkpoints WHERE thread_id = @thread_id::text))::boolean AS found;

-- name: ThreadImport :exec
INSERT INTO pgcheckpoint.tenant_threads (thread_id, namespace, rewound_to, metadata, created_at,
                                  branch_name, branched_from, branched_from_thread)
VALUES (@thread_id::text, @namespace::text, sqlc.narg(rewound_to)::uuid, @metadata::jsonb,
        @created_at::timestamptz, sqlc.narg(branch_name)::text, sqlc.narg(branched_from)::uuid,
        sqlc.narg(branched_from_thread)::text);

-- name: CheckpointImportIDsInUse :many
-- Which of ids the tenant holds already (ids are unique in a tenant). The ids come as
-- text: a uuid[] parameter cannot be encoded in pgx's exec mode (PgBouncer).
SELECT DISTINCT c.checkpoint_id FROM pgcheckpoint.tenant_checkpoints c
WHERE c.checkpoint_id = ANY (CAST(@ids::text[] AS uuid[]));

-- name: CheckpointImport :batchexec
-- The rows of an import, one INSERT per row in one pipeline per batch
-- (COPY FROM refuses a table under row-level security): every column as
-- the export gave it and the engine checked it (a delta keeps its base,
-- run and depth), in the session's tenant. Ids in use are looked up before
-- (CheckpointImportIDsInUse), and one stored meanwhile by another write is
-- a unique violation of checkpoints_checkpoint_id_tenant_id_key.
INSERT INTO pgcheckpoint.tenant_checkpoints (
    thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id, step, created_at,
    trigger, tags, summary, metadata, format, base_checkpoint_id, delta_run, delta_depth,
    messages, state, tool_results, state_removed, tool_results_removed, messages_count,
    messages_digest, state_digests, tool_results_digests, next_node, size_bytes)
VALUES (
    @thread_id, @namespace, @seq, @checkpoint_id, @parent_checkpoint_id, @merge_parent_id, @step, @created_at,
    @trigger, @tags, @summary, @metadata, @format, @base_checkpoint_id, @delta_run, @delta_depth,
    @messages, @state, @tool_results, @state_removed, @tool_results_removed, @messages_count,
    @messages_digest, @state_digests, @tool_results_digests, @next_node, @size_bytes);

-- name: PendingWriteImport :batchexec
-- The pending writes of an import's rows, one INSERT per row in one
-- pipeline per batch, after their checkpoints.
INSERT INTO pgcheckpoint.tenant_pending_writes (thread_id, namespace, checkpoint_seq, checkpoint_id,
                                         task_id, idx, channel, value, created_at)
VALUES (@thread_id, @namespace, @checkpoint_seq, @checkpoint_id, @task_id, @idx, @channel, @value, @created_at);
