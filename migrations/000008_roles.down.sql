-- Undoes 000008_roles.up.sql: PUBLIC may execute every function again, and
-- copy_thread is 000003's, which returns a count.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT p.oid::regprocedure AS routine FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'pgcheckpoint'::regnamespace AND p.provolatile = 'v'
    LOOP
        EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO PUBLIC', r.routine);
    END LOOP;
END;
$$;

DROP FUNCTION pgcheckpoint.copy_thread(text, text);

CREATE FUNCTION pgcheckpoint.copy_thread(p_source_thread_id text, p_target_thread_id text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count bigint;
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

    CREATE TEMP TABLE pgcheckpoint_copy_map ON COMMIT DROP AS
    SELECT c.checkpoint_id AS old_id, pgcheckpoint.uuid_v7() AS new_id
    FROM pgcheckpoint.checkpoints c
    WHERE c.thread_id = p_source_thread_id
    ORDER BY c.namespace, c.seq;

    INSERT INTO pgcheckpoint.threads (thread_id, namespace, rewound_to, metadata, created_at,
                                      branch_name, branched_from, branched_from_thread)
    SELECT p_target_thread_id, t.namespace, m.new_id, t.metadata, t.created_at,
           t.branch_name, t.branched_from, t.branched_from_thread
    FROM pgcheckpoint.threads t
    LEFT JOIN pgcheckpoint_copy_map m ON m.old_id = t.rewound_to
    WHERE t.thread_id = p_source_thread_id;

    -- Deltas are copied as deltas: their bases are in the same thread and
    -- are copied too, with the links mapped.
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
    JOIN pgcheckpoint_copy_map m ON m.old_id = c.checkpoint_id
    LEFT JOIN pgcheckpoint_copy_map p ON p.old_id = c.parent_checkpoint_id
    LEFT JOIN pgcheckpoint_copy_map mp ON mp.old_id = c.merge_parent_id
    LEFT JOIN pgcheckpoint_copy_map b ON b.old_id = c.base_checkpoint_id
    WHERE c.thread_id = p_source_thread_id;
    GET DIAGNOSTICS v_count = ROW_COUNT;

    INSERT INTO pgcheckpoint.pending_writes (thread_id, namespace, checkpoint_seq, checkpoint_id, task_id,
                                             idx, channel, value, created_at)
    SELECT p_target_thread_id, w.namespace, w.checkpoint_seq, m.new_id, w.task_id, w.idx, w.channel,
           w.value, w.created_at
    FROM pgcheckpoint.pending_writes w
    JOIN pgcheckpoint_copy_map m ON m.old_id = w.checkpoint_id
    WHERE w.thread_id = p_source_thread_id;

    DROP TABLE pgcheckpoint_copy_map;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.copy_thread IS
    'Copies a thread (checkpoints in order, content, metadata, pending writes) to a new thread, with new checkpoint ids. Returns the number of checkpoints copied. Errors: PC001 unknown source, PC003 target exists or bad id.';
