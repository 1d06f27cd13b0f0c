-- delta_chain, its comment and the format column's comment as migrations
-- 11 and 12 made them.

CREATE OR REPLACE FUNCTION pgcheckpoint.delta_chain(p_checkpoint_id uuid)
RETURNS TABLE (
    depth                integer,
    checkpoint_id        uuid,
    format               text,
    messages             jsonb,
    state                jsonb,
    tool_results         jsonb,
    state_removed        text[],
    tool_results_removed text[]
)
LANGUAGE plpgsql STABLE PARALLEL SAFE
ROWS 20
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE chain AS (
        SELECT 0 AS depth, c.checkpoint_id, c.thread_id, c.namespace, c.seq, c.base_checkpoint_id, c.format,
               c.messages, c.state, c.tool_results, c.state_removed, c.tool_results_removed
        FROM pgcheckpoint.checkpoints c
        WHERE c.checkpoint_id = p_checkpoint_id
        UNION ALL
        SELECT ch.depth + 1, b.checkpoint_id, b.thread_id, b.namespace, b.seq, b.base_checkpoint_id, b.format,
               b.messages, b.state, b.tool_results, b.state_removed, b.tool_results_removed
        FROM chain ch
        CROSS JOIN LATERAL (
            SELECT b.checkpoint_id, b.thread_id, b.namespace, b.seq, b.base_checkpoint_id, b.format,
                   b.messages, b.state, b.tool_results, b.state_removed, b.tool_results_removed
            FROM pgcheckpoint.checkpoints b
            WHERE b.checkpoint_id = ch.base_checkpoint_id
            LIMIT 1) b
        WHERE ch.format = 'delta' AND b.thread_id = ch.thread_id AND b.namespace = ch.namespace AND b.seq < ch.seq
    )
    SELECT ch.depth, ch.checkpoint_id, ch.format, ch.messages, ch.state, ch.tool_results,
           ch.state_removed, ch.tool_results_removed
    FROM chain ch
    WHERE (SELECT o.format FROM chain o ORDER BY o.depth DESC LIMIT 1) = 'full'
    ORDER BY ch.depth DESC;
    IF NOT FOUND AND EXISTS (SELECT FROM pgcheckpoint.checkpoints c WHERE c.checkpoint_id = p_checkpoint_id) THEN
        RAISE EXCEPTION 'checkpoint % cannot be rebuilt: its chain of deltas does not reach a full snapshot', p_checkpoint_id
            USING ERRCODE = 'PC004';
    END IF;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.delta_chain IS
    'The rows a checkpoint''s content is rebuilt from, oldest first: a full snapshot, each delta on the one before, the checkpoint itself last (depth 0); one row for a full checkpoint, none for an unknown id. Usage: SELECT depth, checkpoint_id, format FROM pgcheckpoint.delta_chain(''<checkpoint id>''). Error PC004: a chain that does not reach a full snapshot (a damaged table).';

COMMENT ON COLUMN pgcheckpoint.checkpoints.format IS
    '''full'': messages, state and tool_results hold the whole snapshot. ''delta'': they hold only the changes since base_checkpoint_id (an ancestor in the same thread and namespace); read it with pgcheckpoint.checkpoint_materialize(checkpoint_id).';
