-- checkpoint_rebuild_json: the full row's messages, the bulk of a long
-- conversation, are turned into text once, outside any sort or function scan
-- (which wrote them to a temporary file past work_mem: Latest of a
-- 50,000-step thread read 4.4 MB through two temporary files). Same text.

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_rebuild_json(p_checkpoint_id uuid)
 RETURNS bytea[]
 LANGUAGE plpgsql
 STABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_base  jsonb; -- the messages of the chain's full row, its oldest
    v_rest  bytea; -- the deltas' messages as JSON text, without brackets
    v_state jsonb;
    v_tools jsonb;
    v_text  bytea;
BEGIN
    -- The full row's messages, the bulk of a long conversation, are turned
    -- into text once, here, never inside a sort or a function scan, which
    -- would write them to a temporary file past work_mem. The deltas'
    -- texts are joined in chain order, oldest first.
    WITH ch AS MATERIALIZED (
        SELECT ch.* FROM pgcheckpoint.delta_chain(p_checkpoint_id) ch
    )
    SELECT (SELECT c.messages FROM ch c ORDER BY c.depth DESC LIMIT 1),
           (SELECT string_agg(substr(d.b, 3, octet_length(d.b) - 3), decode('2c20', 'hex') ORDER BY d.depth DESC) -- ', '
            FROM (SELECT c.depth, jsonb_send(c.messages) AS b -- a version byte, then the text
                  FROM ch c
                  WHERE c.depth < (SELECT max(o.depth) FROM ch o)
                    AND NOT (pg_column_size(c.messages) <= 8 AND jsonb_array_length(c.messages) = 0)
                  OFFSET 0) d),
           (SELECT pgcheckpoint.delta_merge(c.state, c.state_removed ORDER BY c.depth DESC)
                   FILTER (WHERE c.state <> '{}' OR cardinality(c.state_removed) > 0) FROM ch c),
           (SELECT pgcheckpoint.delta_merge(c.tool_results, c.tool_results_removed ORDER BY c.depth DESC)
                   FILTER (WHERE c.tool_results <> '{}' OR cardinality(c.tool_results_removed) > 0) FROM ch c)
      INTO v_base, v_rest, v_state, v_tools;
    IF v_base IS NULL THEN
        RETURN NULL; -- an unknown id
    END IF;
    IF pg_column_size(v_base) <= 8 AND jsonb_array_length(v_base) = 0 THEN
        v_text := CASE WHEN v_rest IS NULL THEN decode('5b5d', 'hex') -- []
                       ELSE decode('5b', 'hex') || v_rest || decode('5d', 'hex') END;
    ELSIF v_rest IS NULL THEN
        v_text := substr(jsonb_send(v_base), 2);
    ELSE
        v_text := jsonb_send(v_base);
        v_text := substr(v_text, 2, octet_length(v_text) - 2) || decode('2c20', 'hex') || v_rest || decode('5d', 'hex');
    END IF;
    RETURN ARRAY[v_text, substr(jsonb_send(v_state), 2), substr(jsonb_send(v_tools), 2)];
END;
$function$;
