DROP FUNCTION pgcheckpoint.checkpoint_materialize_json(uuid);
DROP FUNCTION pgcheckpoint.checkpoint_rebuild_json(uuid);

-- materialize as migration 3 made it.
CREATE OR REPLACE FUNCTION pgcheckpoint.materialize(p_checkpoint_id uuid)
RETURNS TABLE (messages jsonb, state jsonb, tool_results jsonb)
LANGUAGE plpgsql STABLE
ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_format   text;
    v_base     text;
    v_messages jsonb;
    v_state    jsonb;
    v_tools    jsonb;
BEGIN
    SELECT c.format, c.messages, c.state, c.tool_results
      INTO v_format, v_messages, v_state, v_tools
    FROM pgcheckpoint.checkpoints c
    WHERE c.checkpoint_id = p_checkpoint_id
    LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF v_format = 'full' THEN
        RETURN QUERY SELECT v_messages, v_state, v_tools;
        RETURN;
    END IF;

    WITH RECURSIVE chain AS (
        SELECT 0 AS depth, c.thread_id, c.namespace, c.base_checkpoint_id, c.format,
               c.messages, c.state, c.tool_results, c.state_removed, c.tool_results_removed
        FROM pgcheckpoint.checkpoints c
        WHERE c.checkpoint_id = p_checkpoint_id
        UNION ALL
        -- The base by id alone, then checked to be in the same thread and
        -- namespace (see checkpoint_put).
        SELECT ch.depth + 1, p.thread_id, p.namespace, p.base_checkpoint_id, p.format,
               p.messages, p.state, p.tool_results, p.state_removed, p.tool_results_removed
        FROM chain ch
        CROSS JOIN LATERAL (
            SELECT * FROM pgcheckpoint.checkpoints p
            WHERE p.checkpoint_id = ch.base_checkpoint_id
            LIMIT 1) p
        WHERE ch.format = 'delta' AND p.thread_id = ch.thread_id AND p.namespace = ch.namespace
    ), base AS (
        SELECT * FROM chain ORDER BY depth DESC LIMIT 1
    ), keyed AS (
        -- Every key a chain member sets or removes; the nearest one wins.
        SELECT DISTINCT ON (k.part, k.key) k.part, k.key, k.value, k.removed
        FROM (
            SELECT ch.depth, 's' AS part, e.key, e.value, false AS removed FROM chain ch, jsonb_each(ch.state) e
            UNION ALL
            SELECT ch.depth, 's', r, NULL, true FROM chain ch, unnest(ch.state_removed) r
            UNION ALL
            SELECT ch.depth, 't', e.key, e.value, false FROM chain ch, jsonb_each(ch.tool_results) e
            UNION ALL
            SELECT ch.depth, 't', r, NULL, true FROM chain ch, unnest(ch.tool_results_removed) r
        ) k
        ORDER BY k.part, k.key, k.depth
    )
    SELECT b.format,
           b.messages || coalesce((SELECT jsonb_agg(e.value ORDER BY ch.depth DESC, e.ordinality)
                                   FROM chain ch, jsonb_array_elements(ch.messages) WITH ORDINALITY e
                                   WHERE ch.depth < b.depth), '[]'),
           coalesce((SELECT jsonb_object_agg(k.key, k.value) FROM keyed k WHERE k.part = 's' AND NOT k.removed), '{}'),
           coalesce((SELECT jsonb_object_agg(k.key, k.value) FROM keyed k WHERE k.part = 't' AND NOT k.removed), '{}')
      INTO v_base, v_messages, v_state, v_tools
    FROM base b;

    IF v_base IS DISTINCT FROM 'full' THEN
        RAISE EXCEPTION 'checkpoint % cannot be rebuilt: its chain of deltas does not reach a full snapshot', p_checkpoint_id
            USING ERRCODE = 'PC004';
    END IF;
    RETURN QUERY SELECT v_messages, v_state, v_tools;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.materialize IS
    'The whole messages, state and tool_results of a checkpoint, in either format (no row for an unknown id). Usage: SELECT * FROM pgcheckpoint.materialize(''<checkpoint id>''). Error PC004: a delta chain that does not reach a full snapshot (a damaged table).';

DROP AGGREGATE pgcheckpoint.delta_merge(jsonb, text[]);
DROP FUNCTION pgcheckpoint.delta_merge_step(jsonb, jsonb, text[]);
DROP FUNCTION pgcheckpoint.delta_chain(uuid);
