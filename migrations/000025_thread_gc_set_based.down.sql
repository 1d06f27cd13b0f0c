-- Reverts 000025: thread_lock_many, thread_gc and thread_gc_many as the
-- baseline made them.

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_lock_many(p_thread_ids text[])
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT pgcheckpoint.thread_lock(t.id)
    FROM (SELECT DISTINCT x AS id FROM unnest(p_thread_ids) x WHERE x IS NOT NULL) t
    ORDER BY hashtext(t.id), t.id
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_gc(p_thread_id text, p_policy text, p_n integer DEFAULT NULL::integer, p_age interval DEFAULT NULL::interval)
 RETURNS TABLE(thread_id text, namespace text, checkpoint_id uuid, step bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_ids   uuid[];
    v_ns    text[];
    v_steps bigint[];
BEGIN
    PERFORM pgcheckpoint.retention_policy_check(p_policy, p_n, p_age);
    IF p_policy = 'keep_all' THEN
        RETURN;
    END IF;
    PERFORM pgcheckpoint.thread_lock(p_thread_id);

    WITH heads AS MATERIALIZED (
        SELECT t.namespace, pgcheckpoint.thread_head_seq(t.thread_id, t.namespace) AS seq
        FROM pgcheckpoint.tenant_threads t
        WHERE t.thread_id = p_thread_id
    ), ranked AS (
        SELECT c.namespace, c.seq, c.checkpoint_id, c.step, c.created_at,
               row_number() OVER (PARTITION BY c.namespace ORDER BY c.seq) AS pos,
               count(*) OVER (PARTITION BY c.namespace) AS total
        FROM pgcheckpoint.tenant_checkpoints c
        WHERE c.thread_id = p_thread_id
    ), marks AS (
        -- keep_milestones: the n positions between the first and the newest.
        SELECT DISTINCT l.namespace, (1 + round(i * (l.total - 1)::numeric / (p_n + 1)))::bigint AS pos
        FROM (SELECT DISTINCT r.namespace, r.total FROM ranked r) l, generate_series(1, p_n) i
        WHERE p_policy = 'keep_milestones'
    ), doomed AS (
        SELECT r.checkpoint_id, r.namespace, r.step
        FROM ranked r
        LEFT JOIN marks m ON m.namespace = r.namespace AND m.pos = r.pos
        WHERE NOT CASE p_policy
                WHEN 'keep_last_n' THEN r.pos > r.total - p_n
                WHEN 'keep_age' THEN r.created_at >= now() - p_age
                WHEN 'keep_milestones' THEN r.pos = 1 OR r.pos = r.total OR m.pos IS NOT NULL
                END
          AND NOT EXISTS (SELECT 1 FROM heads h WHERE h.namespace = r.namespace AND h.seq = r.seq)
          -- A branch's source, while the branch exists.
          AND NOT EXISTS (SELECT 1 FROM pgcheckpoint.tenant_threads b
                          WHERE b.branched_from_thread = p_thread_id AND b.branched_from = r.checkpoint_id)
    )
    SELECT array_agg(d.checkpoint_id), array_agg(d.namespace), array_agg(d.step)
      INTO v_ids, v_ns, v_steps
    FROM doomed d;

    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    PERFORM pgcheckpoint.checkpoint_delete_many(v_ids);
    RETURN QUERY SELECT p_thread_id, u.ns, u.id, u.step FROM unnest(v_ids, v_ns, v_steps) AS u(id, ns, step);
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_gc_many(p_thread_ids text[], p_policy text, p_n integer, p_age interval)
 RETURNS TABLE(threads integer, expired integer, failed integer, deleted bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_thread  text;
    v_threads integer := 0;
    v_expired integer := 0;
    v_failed  integer := 0;
    v_deleted bigint := 0;
    v_n       bigint;
BEGIN
    PERFORM pgcheckpoint.retention_policy_check(p_policy, p_n, p_age);
    PERFORM pgcheckpoint.thread_lock_many(p_thread_ids);
    FOR v_thread IN SELECT DISTINCT x FROM unnest(p_thread_ids) x ORDER BY 1 LOOP
        BEGIN
            v_n := pgcheckpoint.thread_expire(v_thread);
            IF v_n IS NOT NULL THEN
                v_expired := v_expired + 1;
            ELSIF p_policy <> 'keep_all' THEN
                SELECT count(*) INTO v_n FROM pgcheckpoint.thread_gc(v_thread, p_policy, p_n, p_age);
            END IF;
            v_deleted := v_deleted + coalesce(v_n, 0);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pgcheckpoint: sweep skipped thread %: % (SQLSTATE %)', v_thread, SQLERRM, SQLSTATE;
            v_failed := v_failed + 1;
        END;
        UPDATE pgcheckpoint.tenant_threads t SET swept_at = now() WHERE t.thread_id = v_thread;
        v_threads := v_threads + 1;
    END LOOP;
    RETURN QUERY SELECT v_threads, v_expired, v_failed, v_deleted;
END;
$function$;
COMMENT ON FUNCTION pgcheckpoint.thread_gc_many(text[],text,integer,interval) IS 'Sweeps the given threads in one transaction: each expired or put through the policy, and marked swept (threads.swept_at); a thread that fails is left as it was (WARNING). Returns how many threads, expired, failed, and how many checkpoints deleted.';

DROP FUNCTION pgcheckpoint.thread_gc_doomed_many(text[], text, integer, interval);
