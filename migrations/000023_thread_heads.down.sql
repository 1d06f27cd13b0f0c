-- Back to version 21: thread_head_seq reads the tables itself, the view
-- goes, checkpoint_lineage is taken for 1,000 rows again.

ALTER FUNCTION pgcheckpoint.checkpoint_lineage(uuid, integer) ROWS 1000;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_head_seq(p_thread_id text, p_namespace text DEFAULT ''::text)
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    v_rewound_to uuid;
    v_seq        bigint;
BEGIN
    SELECT t.rewound_to INTO v_rewound_to
    FROM pgcheckpoint.tenant_threads t
    WHERE t.thread_id = p_thread_id AND t.namespace = p_namespace;
    IF v_rewound_to IS NOT NULL THEN
        -- By id alone (see checkpoint_put), then checked.
        SELECT CASE WHEN c.thread_id = p_thread_id AND c.namespace = p_namespace THEN c.seq END
          INTO v_seq
        FROM pgcheckpoint.tenant_checkpoints c
        WHERE c.checkpoint_id = v_rewound_to
        LIMIT 1;
        IF v_seq IS NOT NULL THEN
            RETURN v_seq;
        END IF;
    END IF;
    SELECT c.seq INTO v_seq
    FROM pgcheckpoint.tenant_checkpoints c
    WHERE c.thread_id = p_thread_id AND c.namespace = p_namespace
    ORDER BY c.seq DESC
    LIMIT 1;
    RETURN v_seq;
END;
$function$;

DROP VIEW pgcheckpoint.tenant_thread_heads;
