-- A page of ListThreads reads its threads' heads in one plan, and a page
-- of TimeTravelPoints its rows by key (issue 28).
--
-- The listing called thread_head_seq once per thread: a PL/pgSQL call with
-- its own settings, which the planner cannot inline, cost about 40 us a
-- thread (4.5 ms of a 100-thread page's 5.6 ms on 10,000 threads; the same
-- index probes in the plan take 1.7 ms). The head rule now lives in the
-- view tenant_thread_heads, which a statement inlines: the rewound-to
-- checkpoint when it is one of the thread and namespace, else the newest.
-- thread_head_seq reads the view, so the rule stays in one place.

CREATE VIEW pgcheckpoint.tenant_thread_heads WITH (security_invoker = true) AS
SELECT t.thread_id, t.namespace, t.metadata, t.created_at,
       h.seq, h.checkpoint_id AS head_checkpoint_id, h.step AS head_step, h.summary AS head_summary,
       h.created_at AS head_created_at
FROM pgcheckpoint.tenant_threads t
LEFT JOIN LATERAL (
    (SELECT c.seq, c.checkpoint_id, c.step, c.summary, c.created_at FROM pgcheckpoint.tenant_checkpoints c
     WHERE c.checkpoint_id = t.rewound_to AND c.thread_id = t.thread_id AND c.namespace = t.namespace
     LIMIT 1)
    UNION ALL
    (SELECT c.seq, c.checkpoint_id, c.step, c.summary, c.created_at FROM pgcheckpoint.tenant_checkpoints c
     WHERE c.thread_id = t.thread_id AND c.namespace = t.namespace
     ORDER BY c.seq DESC
     LIMIT 1)
    LIMIT 1) h ON true;
COMMENT ON VIEW pgcheckpoint.tenant_thread_heads IS 'Each thread and namespace of the session''s tenant (its metadata and creation time) with its head (seq, id, step, summary, creation time): the rewound-to checkpoint when the thread was rewound since its last write (and it is one of the thread and namespace), else the newest; NULLs when there is no checkpoint. thread_head_seq and the thread listing read it.';

-- The privileges of tenant_threads (see migration 21).
DO $grant$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT a.privilege_type, a.grantee
        FROM pg_catalog.pg_class c
        CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
        WHERE c.oid = 'pgcheckpoint.threads'::regclass AND a.grantee <> c.relowner AND a.privilege_type = 'SELECT'
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON pgcheckpoint.tenant_thread_heads TO %s', r.privilege_type,
            CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r.grantee)) END);
    END LOOP;
END;
$grant$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_head_seq(p_thread_id text, p_namespace text DEFAULT ''::text)
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    v_seq bigint;
BEGIN
    SELECT h.seq INTO v_seq
    FROM pgcheckpoint.tenant_thread_heads h
    WHERE h.thread_id = p_thread_id AND h.namespace = p_namespace;
    IF NOT FOUND THEN
        -- Checkpoints without their thread row (a bulk load): the newest.
        SELECT c.seq INTO v_seq
        FROM pgcheckpoint.tenant_checkpoints c
        WHERE c.thread_id = p_thread_id AND c.namespace = p_namespace
        ORDER BY c.seq DESC
        LIMIT 1;
    END IF;
    RETURN v_seq;
END;
$function$;

-- A page of TimeTravelPoints (the store's lineage query joins
-- checkpoint_lineage to tenant_checkpoint_info) read every checkpoint of
-- the thread: the planner took the function for 1,000 rows and hashed the
-- thread's rows rather than probe the key of each ancestor, so a page cost
-- what the whole thread holds (114 ms at 10,000 steps against 2.5 ms for
-- the same 100 rows read by key). A page is 100 rows by default.
ALTER FUNCTION pgcheckpoint.checkpoint_lineage(uuid, integer) ROWS 100;
