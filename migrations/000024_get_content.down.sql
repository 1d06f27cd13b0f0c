-- Back to version 23's reads: checkpoint_materialize_json joins checkpoint_rebuild_json (a set of one row), and current_tenant reads its setting twice.

DROP FUNCTION pgcheckpoint.checkpoint_materialize_json(uuid);
DROP FUNCTION pgcheckpoint.checkpoint_content_json(uuid,text,jsonb,jsonb,jsonb);
DROP FUNCTION pgcheckpoint.checkpoint_rebuild_json(uuid);

CREATE OR REPLACE FUNCTION pgcheckpoint.current_tenant()
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT CASE WHEN pg_catalog.current_setting('pgcheckpoint.tenant', true) OPERATOR(pg_catalog.=) ''
                THEN NULL
                ELSE pg_catalog.current_setting('pgcheckpoint.tenant', true) END
$function$;
COMMENT ON FUNCTION pgcheckpoint.current_tenant() IS 'The session''s tenant: the setting pgcheckpoint.tenant, NULL when it is unset or '''' (after a transaction-local set ends, an unset placeholder setting reads '''', not NULL). Set it for a transaction with SET LOCAL pgcheckpoint.tenant = ''acme'' or SELECT set_config(''pgcheckpoint.tenant'', ''acme'', true); the row-level security policies of every table compare tenant_id with it, and new rows take it as their tenant_id.';

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_rebuild_json(p_checkpoint_id uuid)
 RETURNS TABLE(messages bytea, state bytea, tool_results bytea)
 LANGUAGE plpgsql
 STABLE PARALLEL SAFE STRICT ROWS 1
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT coalesce(string_agg(substr(s.b, CASE WHEN x.depth = x.first THEN 2 ELSE 3 END,
                                      octet_length(s.b) - CASE WHEN x.depth = x.first THEN 1 ELSE 2 END
                                                        - CASE WHEN x.depth = x.last THEN 0 ELSE 1 END),
                               decode('2c20', 'hex') ORDER BY x.depth DESC) -- ', '
                        FILTER (WHERE NOT x.empty),
                    decode('5b5d', 'hex')), -- []
           substr(jsonb_send(pgcheckpoint.delta_merge(x.state, x.state_removed ORDER BY x.depth DESC)
                             FILTER (WHERE x.state <> '{}' OR cardinality(x.state_removed) > 0)), 2),
           substr(jsonb_send(pgcheckpoint.delta_merge(x.tool_results, x.tool_results_removed ORDER BY x.depth DESC)
                             FILTER (WHERE x.tool_results <> '{}' OR cardinality(x.tool_results_removed) > 0)), 2)
    FROM (SELECT e.*, max(e.depth) FILTER (WHERE NOT e.empty) OVER () AS first,
                      min(e.depth) FILTER (WHERE NOT e.empty) OVER () AS last
          FROM (SELECT ch.*, pg_column_size(ch.messages) <= 8 AND jsonb_array_length(ch.messages) = 0 AS empty
                FROM pgcheckpoint.delta_chain(p_checkpoint_id) ch) e) x
    -- jsonb's send format: a version byte, then the text.
    CROSS JOIN LATERAL jsonb_send(x.messages) AS s(b)
    HAVING count(*) > 0;
END;
$function$;
COMMENT ON FUNCTION pgcheckpoint.checkpoint_rebuild_json(uuid) IS 'A checkpoint''s whole content rebuilt from pgcheckpoint.delta_chain, as JSON text in bytes (see checkpoint_materialize_json, which reads a full checkpoint without it). No row for an unknown id. Error PC004 as checkpoint_materialize.';

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_materialize_json(p_checkpoint_id uuid)
 RETURNS TABLE(messages bytea, state bytea, tool_results bytea)
 LANGUAGE sql
 STABLE PARALLEL SAFE ROWS 1
AS $function$
    SELECT CASE WHEN c.format OPERATOR(pg_catalog.=) 'full'
                THEN pg_catalog.substr(pg_catalog.jsonb_send(c.messages), 2) ELSE d.messages END,
           CASE WHEN c.format OPERATOR(pg_catalog.=) 'full'
                THEN pg_catalog.substr(pg_catalog.jsonb_send(c.state), 2) ELSE d.state END,
           CASE WHEN c.format OPERATOR(pg_catalog.=) 'full'
                THEN pg_catalog.substr(pg_catalog.jsonb_send(c.tool_results), 2) ELSE d.tool_results END
    FROM pgcheckpoint.tenant_checkpoints c
    LEFT JOIN LATERAL pgcheckpoint.checkpoint_rebuild_json(
        CASE WHEN c.format OPERATOR(pg_catalog.<>) 'full' THEN c.checkpoint_id END) d ON true
    WHERE c.checkpoint_id OPERATOR(pg_catalog.=) p_checkpoint_id
$function$;
COMMENT ON FUNCTION pgcheckpoint.checkpoint_materialize_json(uuid) IS 'checkpoint_materialize''s columns as JSON text, in bytes (what jsonb''s binary send format carries, in the client encoding, without its version byte); no row for an unknown id. What the engine reads: the text of checkpoint_materialize(...), without building the jsonb. Usage: SELECT convert_from(messages, ''UTF8'') FROM pgcheckpoint.checkpoint_materialize_json(''<checkpoint id>''). Error PC004 as checkpoint_materialize.';
