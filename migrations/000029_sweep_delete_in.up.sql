-- The sweep's batch (thread_gc_many) deletes through
-- checkpoint_delete_many_in, which is told the threads: it no longer looks
-- up each doomed id's thread to find the locks to take (issue 28).
-- checkpoint_delete_many is that look-up, then checkpoint_delete_many_in:
-- one body of the deletion for both.

CREATE FUNCTION pgcheckpoint.checkpoint_delete_many_in(p_thread_ids text[], p_checkpoint_ids uuid[])
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_count bigint;
BEGIN
    -- The threads' locks (see thread_lock_many); a caller that holds them
    -- (thread_gc_many) takes them again at the cost of one row update each.
    PERFORM pgcheckpoint.thread_lock_many(p_thread_ids);

    -- Read under the locks, so every write to these threads is either seen
    -- here or waits for this transaction.
    WITH doomed AS (
        SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id
        FROM (SELECT DISTINCT x AS id FROM unnest(p_checkpoint_ids) x) i
        CROSS JOIN LATERAL (
            SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id FROM pgcheckpoint.tenant_checkpoints c
            WHERE c.checkpoint_id = i.id) c
        WHERE c.thread_id = ANY (p_thread_ids)
    ), orphans AS (
        -- Kept deltas based on a doomed checkpoint. A base is an ancestor,
        -- written earlier: only later rows can be its deltas.
        SELECT k.thread_id, k.namespace, k.seq, k.checkpoint_id
        FROM (SELECT d.thread_id, d.namespace, min(d.seq) AS from_seq FROM doomed d GROUP BY 1, 2) t
        JOIN pgcheckpoint.tenant_checkpoints k
          ON k.thread_id = t.thread_id AND k.namespace = t.namespace AND k.seq > t.from_seq
        WHERE k.format = 'delta'
          AND k.base_checkpoint_id IN (SELECT d.checkpoint_id FROM doomed d)
          AND k.checkpoint_id NOT IN (SELECT d.checkpoint_id FROM doomed d)
    ), whole AS (
        SELECT o.thread_id, o.namespace, o.seq, m.messages, m.state, m.tool_results
        FROM orphans o CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize(o.checkpoint_id) m
    ), rebased AS (
        UPDATE pgcheckpoint.tenant_checkpoints c
        SET format = 'full', base_checkpoint_id = NULL, delta_run = 0, delta_depth = 0,
            messages = w.messages, state = w.state,
            tool_results = w.tool_results, state_removed = '{}', tool_results_removed = '{}'
        FROM whole w
        WHERE c.thread_id = w.thread_id AND c.namespace = w.namespace AND c.seq = w.seq
        RETURNING 1
    ), unrewound AS (
        UPDATE pgcheckpoint.tenant_threads t SET rewound_to = NULL
        FROM doomed d
        WHERE t.thread_id = d.thread_id AND t.namespace = d.namespace AND t.rewound_to = d.checkpoint_id
        RETURNING 1
    ), deleted AS (
        DELETE FROM pgcheckpoint.tenant_checkpoints c
        USING doomed d
        WHERE c.thread_id = d.thread_id AND c.namespace = d.namespace AND c.seq = d.seq
        RETURNING 1
    )
    SELECT count(*) INTO v_count FROM deleted;
    RETURN v_count;
END;
$function$;
COMMENT ON FUNCTION pgcheckpoint.checkpoint_delete_many_in(text[],uuid[]) IS 'checkpoint_delete_many of the given threads: deletes those of the given checkpoints that belong to one of the threads (an id of another thread is left), under the threads'' locks, rebasing kept deltas and clearing a rewind to a deleted checkpoint as checkpoint_delete_many does. For a caller that knows the threads (thread_gc_many): no look-up of each id''s thread. Returns the number deleted.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.checkpoint_delete_many_in(text[],uuid[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_delete_many(p_checkpoint_ids uuid[])
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- The threads the ids name; checkpoint_delete_many_in locks them, then
    -- reads the rows again.
    RETURN pgcheckpoint.checkpoint_delete_many_in(ARRAY(
        SELECT DISTINCT c.thread_id
        FROM unnest(p_checkpoint_ids) i
        CROSS JOIN LATERAL (
            SELECT c.thread_id FROM pgcheckpoint.tenant_checkpoints c WHERE c.checkpoint_id = i) c),
        p_checkpoint_ids);
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_gc_many(p_thread_ids text[], p_policy text, p_n integer, p_age interval)
 RETURNS TABLE(threads integer, expired integer, failed integer, deleted bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    v_thread  text;
    v_rest    text[];
    v_expired integer := 0;
    v_failed  integer := 0;
    v_deleted bigint := 0;
    v_n       bigint;
BEGIN
    PERFORM pgcheckpoint.retention_policy_check(p_policy, p_n, p_age);
    PERFORM pgcheckpoint.thread_lock_many(p_thread_ids);
    v_rest := ARRAY(SELECT DISTINCT x FROM unnest(p_thread_ids) x ORDER BY 1);
    -- Expired threads each alone; one whose expiry fails is left as it was.
    FOR v_thread IN
        SELECT DISTINCT t.thread_id FROM pgcheckpoint.tenant_threads t
        WHERE t.thread_id = ANY (v_rest) AND t.expires_at <= now()
        ORDER BY 1
    LOOP
        BEGIN
            v_n := pgcheckpoint.thread_expire(v_thread);
            IF v_n IS NOT NULL THEN
                v_expired := v_expired + 1;
                v_deleted := v_deleted + v_n;
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pgcheckpoint: sweep skipped thread %: % (SQLSTATE %)', v_thread, SQLERRM, SQLSTATE;
            v_failed := v_failed + 1;
        END;
        v_rest := array_remove(v_rest, v_thread);
    END LOOP;
    -- The others in one statement. Should it fail, each alone (thread_gc),
    -- so that a thread that fails is the only one left as it was.
    IF p_policy <> 'keep_all' AND cardinality(v_rest) > 0 THEN
        BEGIN
            -- The threads are known and locked: no look-up of each id's.
            v_deleted := v_deleted + pgcheckpoint.checkpoint_delete_many_in(v_rest, ARRAY(
                SELECT d.checkpoint_id FROM pgcheckpoint.thread_gc_doomed_many(v_rest, p_policy, p_n, p_age) d));
        EXCEPTION WHEN OTHERS THEN
            FOREACH v_thread IN ARRAY v_rest LOOP
                BEGIN
                    SELECT count(*) INTO v_n FROM pgcheckpoint.thread_gc(v_thread, p_policy, p_n, p_age);
                    v_deleted := v_deleted + v_n;
                EXCEPTION WHEN OTHERS THEN
                    RAISE WARNING 'pgcheckpoint: sweep skipped thread %: % (SQLSTATE %)', v_thread, SQLERRM, SQLSTATE;
                    v_failed := v_failed + 1;
                END;
            END LOOP;
        END;
    END IF;
    UPDATE pgcheckpoint.tenant_threads t SET swept_at = now() WHERE t.thread_id = ANY (p_thread_ids);
    RETURN QUERY SELECT (SELECT count(DISTINCT x)::integer FROM unnest(p_thread_ids) x), v_expired, v_failed, v_deleted;
END;
$function$;
