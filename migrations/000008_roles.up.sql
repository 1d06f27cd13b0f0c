-- Least privilege: roles that may read but not write (see schema/roles/),
-- and a copy_thread that needs nothing but DML.
--
-- copy_thread returned a count and built its id map in a temporary table,
-- so it failed for a role without TEMP on the database. It now maps the ids
-- in one statement and returns the map: one row per source checkpoint, its
-- id and its copy's id, in namespace then write order.
--
-- Every function that can write is VOLATILE; the STABLE and IMMUTABLE ones
-- cannot (Postgres refuses a write in them). PUBLIC keeps EXECUTE on those
-- that only read, so a read-only role with USAGE on the schema may call
-- them; EXECUTE on the volatile ones is revoked from PUBLIC and granted to
-- the application role by schema/roles/roles.sql. A later migration that
-- adds a volatile function revokes it from PUBLIC the same way.

DROP FUNCTION pgcheckpoint.copy_thread(text, text);

CREATE FUNCTION pgcheckpoint.copy_thread(p_source_thread_id text, p_target_thread_id text)
RETURNS TABLE (old_checkpoint_id uuid, new_checkpoint_id uuid)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_target_thread_id IS NULL OR length(p_target_thread_id) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'thread_id must be 1 to 255 characters' USING ERRCODE = 'PC003';
    END IF;
    IF p_source_thread_id = p_target_thread_id THEN
        RAISE EXCEPTION 'cannot copy thread % onto itself', p_source_thread_id USING ERRCODE = 'PC003';
    END IF;
    -- Both locks, in a fixed order, so two crossed copies cannot deadlock.
    PERFORM pg_advisory_xact_lock(1885563760, hashtext(x))
    FROM unnest(ARRAY[p_source_thread_id, p_target_thread_id]) x ORDER BY hashtext(x);
    IF NOT EXISTS (SELECT 1 FROM pgcheckpoint.threads t WHERE t.thread_id = p_source_thread_id) THEN
        RAISE EXCEPTION 'thread % not found', p_source_thread_id USING ERRCODE = 'PC001';
    END IF;
    IF EXISTS (SELECT 1 FROM pgcheckpoint.threads t WHERE t.thread_id = p_target_thread_id) THEN
        RAISE EXCEPTION 'thread % already exists', p_target_thread_id USING ERRCODE = 'PC003';
    END IF;

    -- ids is materialized once (uuid_v7 is volatile), so every insert below
    -- sees the same new id for a checkpoint. Links to checkpoints outside
    -- the thread (a branch's source) are kept; deltas are copied as deltas,
    -- their bases being in the thread too. The inserts run in one statement,
    -- and the foreign keys are checked at its end.
    RETURN QUERY
    WITH ids AS MATERIALIZED (
        SELECT s.checkpoint_id AS old_id, pgcheckpoint.uuid_v7() AS new_id, s.namespace, s.seq
        FROM (SELECT c.checkpoint_id, c.namespace, c.seq
              FROM pgcheckpoint.checkpoints c
              WHERE c.thread_id = p_source_thread_id
              ORDER BY c.namespace, c.seq) s
    ), copied_threads AS (
        INSERT INTO pgcheckpoint.threads (thread_id, namespace, rewound_to, metadata, created_at,
                                          branch_name, branched_from, branched_from_thread)
        SELECT p_target_thread_id, t.namespace, m.new_id, t.metadata, t.created_at,
               t.branch_name, t.branched_from, t.branched_from_thread
        FROM pgcheckpoint.threads t
        LEFT JOIN ids m ON m.old_id = t.rewound_to
        WHERE t.thread_id = p_source_thread_id
    ), copied_checkpoints AS (
        INSERT INTO pgcheckpoint.checkpoints (
            thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id, step,
            created_at, trigger, tags, summary, metadata, format, base_checkpoint_id, delta_run, delta_depth,
            messages, state, tool_results, state_removed, tool_results_removed, messages_count, messages_digest,
            state_digests, tool_results_digests, next_node, size_bytes)
        SELECT p_target_thread_id, c.namespace, c.seq, m.new_id,
               coalesce(p.new_id, c.parent_checkpoint_id), coalesce(mp.new_id, c.merge_parent_id), c.step,
               c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.format, b.new_id, c.delta_run,
               c.delta_depth, c.messages,
               c.state, c.tool_results, c.state_removed, c.tool_results_removed, c.messages_count,
               c.messages_digest, c.state_digests, c.tool_results_digests, c.next_node, c.size_bytes
        FROM pgcheckpoint.checkpoints c
        JOIN ids m ON m.old_id = c.checkpoint_id
        LEFT JOIN ids p ON p.old_id = c.parent_checkpoint_id
        LEFT JOIN ids mp ON mp.old_id = c.merge_parent_id
        LEFT JOIN ids b ON b.old_id = c.base_checkpoint_id
        WHERE c.thread_id = p_source_thread_id
    ), copied_writes AS (
        INSERT INTO pgcheckpoint.pending_writes (thread_id, namespace, checkpoint_seq, checkpoint_id, task_id,
                                                 idx, channel, value, created_at)
        SELECT p_target_thread_id, w.namespace, w.checkpoint_seq, m.new_id, w.task_id, w.idx, w.channel,
               w.value, w.created_at
        FROM pgcheckpoint.pending_writes w
        JOIN ids m ON m.old_id = w.checkpoint_id
        WHERE w.thread_id = p_source_thread_id
    )
    SELECT ids.old_id, ids.new_id FROM ids ORDER BY ids.namespace, ids.seq;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.copy_thread IS
    'Copies a thread (checkpoints in order, content, metadata, pending writes) to a new thread, with new checkpoint ids. Returns one row per checkpoint copied: its id and its copy''s, in namespace then write order. Needs no temporary table. Errors: PC001 unknown source, PC003 target exists or bad id.';

-- The volatile routines: every one that writes, and uuid_v7 and lock_thread,
-- which a read-only role has no use for (a thread lock held by a reader
-- would stall the thread's writers). Found in the catalog, so the rule holds
-- whatever their signatures.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT p.oid::regprocedure AS routine FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'pgcheckpoint'::regnamespace AND p.provolatile = 'v'
    LOOP
        EXECUTE format('REVOKE EXECUTE ON ROUTINE %s FROM PUBLIC', r.routine);
    END LOOP;
END;
$$;
