-- A Get's content in one column, taken from the scan that reads the row:
-- checkpoint_content_json computes it from the row's own columns (the
-- JSON text of a full checkpoint, a rebuild for a delta), so the read
-- statements need neither a join nor a function scan for it; and
-- current_tenant reads its setting once.

CREATE OR REPLACE FUNCTION pgcheckpoint.current_tenant()
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    -- The setting, or NULL for '': '.+' matches every text of one
    -- character or more whole (a dot matches a newline too) and nothing
    -- in ''. One read of the setting, where a CASE reads it twice: every
    -- scan of a tenant view evaluates this, so its cost is in every
    -- statement (NULLIF would do the same with an operator that the
    -- search_path resolves).
    SELECT pg_catalog.substring(pg_catalog.current_setting('pgcheckpoint.tenant', true), '.+')
$function$;

DROP FUNCTION pgcheckpoint.checkpoint_materialize_json(uuid);
DROP FUNCTION pgcheckpoint.checkpoint_rebuild_json(uuid);

CREATE FUNCTION pgcheckpoint.checkpoint_rebuild_json(p_checkpoint_id uuid)
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
COMMENT ON FUNCTION pgcheckpoint.checkpoint_rebuild_json(uuid) IS 'A checkpoint''s whole content rebuilt from pgcheckpoint.delta_chain, as JSON text in bytes: {messages, state, tool_results} (see checkpoint_content_json, which reads a full checkpoint without it). NULL for an unknown id. Error PC004 as checkpoint_materialize.';

CREATE FUNCTION pgcheckpoint.checkpoint_content_json(p_checkpoint_id uuid, p_format text, p_messages jsonb, p_state jsonb, p_tool_results jsonb)
 RETURNS bytea[]
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT CASE WHEN p_format OPERATOR(pg_catalog.=) 'full'
                THEN ARRAY[pg_catalog.substr(pg_catalog.jsonb_send(p_messages), 2),
                           pg_catalog.substr(pg_catalog.jsonb_send(p_state), 2),
                           pg_catalog.substr(pg_catalog.jsonb_send(p_tool_results), 2)]
                ELSE pgcheckpoint.checkpoint_rebuild_json(p_checkpoint_id) END
$function$;
COMMENT ON FUNCTION pgcheckpoint.checkpoint_content_json(uuid,text,jsonb,jsonb,jsonb) IS 'The whole content of the checkpoint row given by its id, format, messages, state and tool_results columns, as JSON text in bytes (what jsonb''s binary send format carries, in the client encoding, without its version byte): {messages, state, tool_results}. A full row''s own columns, a delta rebuilt (checkpoint_rebuild_json). Inlined into the statement that reads the row, so a full checkpoint costs no function call. What the engine reads: usage: SELECT pgcheckpoint.checkpoint_content_json(c.checkpoint_id, c.format, c.messages, c.state, c.tool_results) FROM pgcheckpoint.tenant_checkpoints c WHERE c.checkpoint_id = ''<checkpoint id>''. Error PC004 as checkpoint_materialize.';

CREATE FUNCTION pgcheckpoint.checkpoint_materialize_json(p_checkpoint_id uuid)
 RETURNS TABLE(messages bytea, state bytea, tool_results bytea)
 LANGUAGE sql
 STABLE PARALLEL SAFE ROWS 1
AS $function$
    SELECT j.content[1], j.content[2], j.content[3]
    -- OFFSET 0 keeps the subquery whole, so the content is computed once.
    FROM (SELECT pgcheckpoint.checkpoint_content_json(c.checkpoint_id, c.format, c.messages, c.state, c.tool_results) AS content
          FROM pgcheckpoint.tenant_checkpoints c
          WHERE c.checkpoint_id OPERATOR(pg_catalog.=) p_checkpoint_id
          OFFSET 0) j
$function$;
COMMENT ON FUNCTION pgcheckpoint.checkpoint_materialize_json(uuid) IS 'checkpoint_materialize''s columns as JSON text, in bytes (checkpoint_content_json''s three elements); no row for an unknown id. The text of checkpoint_materialize(...), without building the jsonb. Usage: SELECT convert_from(messages, ''UTF8'') FROM pgcheckpoint.checkpoint_materialize_json(''<checkpoint id>''). Error PC004 as checkpoint_materialize.';
