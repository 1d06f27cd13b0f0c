-- name: CheckpointWriteLock :batchexec
-- The lock of a write: its thread's (see pgcheckpoint.thread_lock), whose
-- common case, an existing row, is inlined here (an UPDATE costs a write
-- less than a call of the PL/pgSQL function that makes it); a thread
-- without a row calls thread_lock. The engine queues this ahead of
-- CheckpointPutFast or CheckpointPutWhole in one pipeline, so both run in
-- one implicit transaction and, at READ COMMITTED, the insert's snapshot
-- is taken under the lock: it sees every other write of the thread. (At
-- REPEATABLE READ and SERIALIZABLE the snapshot is this statement's, taken
-- before the lock is granted: the update then fails with 40001 if the
-- previous holder committed after it.)
WITH taken AS (
    UPDATE pgcheckpoint.tenant_thread_locks l SET taken = l.taken + 1
    WHERE l.thread_id = @thread_id::text
    RETURNING 1
)
SELECT pgcheckpoint.thread_lock(@thread_id::text)
WHERE NOT EXISTS (SELECT FROM taken);

-- name: CheckpointPutFast :batchone
-- The common case of checkpoint_put as one statement, for a caller that
-- holds the lock (CheckpointWriteLock): a thread with checkpoints, no
-- rewind pending, a new id and a parent in the thread (given, else the
-- newest). The rules are checkpoint_put's own functions (thread_head_for_write,
-- checkpoint_delta, checkpoint_default_summary), inlined. No row back
-- means the case is not the common one: nothing was written, and the
-- caller calls checkpoint_put, which handles every case. An id stored
-- meanwhile by a write on another thread is a unique violation of
-- checkpoints_checkpoint_id_tenant_id_key. Arguments are
-- taken as checked (the engine validates them as checkpoint_put does);
-- message_digests is the message chain (32 bytes per message, see
-- pgcheckpoint.message_chain). Content that is not sealed (@sealed false:
-- an engine without encryption) is refused for an encrypted thread, PC007
-- (pgcheckpoint.thread_refuse_plaintext, called only where it raises), in
-- this statement, whose snapshot is taken under the lock: it sees a key
-- the lock's previous holder made.
INSERT INTO pgcheckpoint.tenant_checkpoints AS c (
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
CROSS JOIN pgcheckpoint.thread_sealed(@thread_id::text) s
WHERE h.thread_seen AND h.rewound_to IS NULL AND h.parent_checkpoint_id IS NOT NULL
  AND CASE WHEN s.sealed AND NOT @sealed::boolean
           THEN pgcheckpoint.thread_refuse_plaintext(@thread_id::text, @sealed::boolean) ELSE true END
RETURNING coalesce(c.parent_checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS parent_checkpoint_id,
          c.step, c.created_at;

-- name: CheckpointPutWhole :batchone
-- CheckpointPutFast for a checkpoint stored whole (the engine's delta_run 1:
-- FullSnapshots, or a snapshot under DeltaMinBytes), without the delta
-- decision, whose answer is known. The columns left out take their
-- defaults, which are what checkpoint_put stores for such a write: format
-- 'full', no base, run and depth 0, no removed keys, no digests.
INSERT INTO pgcheckpoint.tenant_checkpoints AS c (
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
CROSS JOIN pgcheckpoint.thread_sealed(@thread_id::text) s
WHERE h.thread_seen AND h.rewound_to IS NULL AND h.parent_checkpoint_id IS NOT NULL
  AND CASE WHEN s.sealed AND NOT @sealed::boolean
           THEN pgcheckpoint.thread_refuse_plaintext(@thread_id::text, @sealed::boolean) ELSE true END
RETURNING coalesce(c.parent_checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS parent_checkpoint_id,
          c.step, c.created_at;

-- name: CheckpointGetSeq :one
-- The seq of a checkpoint in a thread and namespace, for list cursors. By
-- id alone, then checked (see checkpoint_put).
SELECT c.seq
FROM (SELECT c.seq, c.thread_id, c.namespace
      FROM pgcheckpoint.tenant_checkpoints c
      WHERE c.checkpoint_id = @checkpoint_id::uuid
      LIMIT 1) c
WHERE c.thread_id = @thread_id::text AND c.namespace = @namespace::text;

-- name: CheckpointHeadID :one
-- The id of CheckpointGetHead's checkpoint, without its content.
SELECT c.checkpoint_id FROM pgcheckpoint.tenant_checkpoints c
WHERE c.thread_id = @thread_id::text AND c.namespace = @namespace::text
  AND c.seq = pgcheckpoint.thread_head_seq(@thread_id::text, @namespace::text);

-- name: CheckpointLineRange :many
-- A checkpoint and the checkpoints written before it in its thread and
-- namespace, newest first, at most max_rows: a page of its lineage when
-- engine.LinePage says so (see pgcheckpoint.checkpoint_line_range).
SELECT c.*
FROM pgcheckpoint.checkpoint_line_range(@checkpoint_id::uuid, @max_rows::int) AS c;
