-- Reverts 000030_rebuild_json_once.up.sql: checkpoint_rebuild_json as the
-- baseline made it.

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_rebuild_json(p_checkpoint_id uuid)
 RETURNS bytea[]
 LANGUAGE plpgsql
 STABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_content bytea[];
BEGIN
    SELECT ARRAY[
           coalesce(string_agg(substr(s.b, CASE WHEN x.depth = x.first THEN 2 ELSE 3 END,
                                      octet_length(s.b) - CASE WHEN x.depth = x.first THEN 1 ELSE 2 END
                                                        - CASE WHEN x.depth = x.last THEN 0 ELSE 1 END),
                               decode('2c20', 'hex') ORDER BY x.depth DESC) -- ', '
                        FILTER (WHERE NOT x.empty),
                    decode('5b5d', 'hex')), -- []
           substr(jsonb_send(pgcheckpoint.delta_merge(x.state, x.state_removed ORDER BY x.depth DESC)
                             FILTER (WHERE x.state <> '{}' OR cardinality(x.state_removed) > 0)), 2),
           substr(jsonb_send(pgcheckpoint.delta_merge(x.tool_results, x.tool_results_removed ORDER BY x.depth DESC)
                             FILTER (WHERE x.tool_results <> '{}' OR cardinality(x.tool_results_removed) > 0)), 2)]
      INTO v_content
    FROM (SELECT e.*, max(e.depth) FILTER (WHERE NOT e.empty) OVER () AS first,
                      min(e.depth) FILTER (WHERE NOT e.empty) OVER () AS last
          FROM (SELECT ch.*, pg_column_size(ch.messages) <= 8 AND jsonb_array_length(ch.messages) = 0 AS empty
                FROM pgcheckpoint.delta_chain(p_checkpoint_id) ch) e) x
    -- jsonb's send format: a version byte, then the text.
    CROSS JOIN LATERAL jsonb_send(x.messages) AS s(b)
    HAVING count(*) > 0;
    RETURN v_content;
END;
$function$;
