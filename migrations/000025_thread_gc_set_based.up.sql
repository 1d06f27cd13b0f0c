-- A sweep's batch applies its policy to all of its threads in one
-- statement: thread_gc_doomed_many says what a retention policy deletes of
-- a set of threads (the one statement of that rule, which thread_gc applies
-- to one thread), and thread_gc_many deletes it with one
-- checkpoint_delete_many call, where it ran thread_gc thread by thread.
-- thread_lock_many, which every call here takes, is PL/pgSQL, so its
-- statement is planned once per session.

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_lock_many(p_thread_ids text[])
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- PL/pgSQL, not SQL: its statement is planned once per session, where
    -- a SQL function's was planned again at every call.
    PERFORM pgcheckpoint.thread_lock(t.id)
    FROM (SELECT DISTINCT x AS id FROM unnest(p_thread_ids) x WHERE x IS NOT NULL) t
    ORDER BY hashtext(t.id), t.id;
END;
$function$;

CREATE FUNCTION pgcheckpoint.thread_gc_doomed_many(p_thread_ids text[], p_policy text, p_n integer, p_age interval)
 RETURNS TABLE(thread_id text, namespace text, seq bigint, checkpoint_id uuid, step bigint)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
BEGIN
    -- One generic plan for every policy (the policy is a parameter of it):
    -- a custom plan would be made again at each call.
    RETURN QUERY
    WITH ranked AS (
        SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.step, c.created_at,
               row_number() OVER w AS pos,
               count(*) OVER (PARTITION BY c.thread_id, c.namespace) AS total
        FROM pgcheckpoint.tenant_checkpoints c
        WHERE c.thread_id = ANY (p_thread_ids)
        WINDOW w AS (PARTITION BY c.thread_id, c.namespace ORDER BY c.seq)
    ), heads AS MATERIALIZED (
        SELECT h.thread_id, h.namespace, h.seq
        FROM pgcheckpoint.tenant_thread_heads h
        WHERE h.thread_id = ANY (p_thread_ids)
    ), sources AS MATERIALIZED (
        SELECT b.branched_from_thread AS thread_id, b.branched_from AS checkpoint_id
        FROM pgcheckpoint.tenant_threads b
        WHERE b.branched_from_thread = ANY (p_thread_ids)
    )
    SELECT r.thread_id, r.namespace, r.seq, r.checkpoint_id, r.step
    FROM ranked r
    LEFT JOIN heads h ON h.thread_id = r.thread_id AND h.namespace = r.namespace
    WHERE NOT CASE p_policy
            WHEN 'keep_last_n' THEN r.pos > r.total - p_n
            WHEN 'keep_age' THEN r.created_at >= now() - p_age
            -- keep_milestones: the first, the newest and the n positions
            -- evenly spaced between them.
            WHEN 'keep_milestones' THEN r.pos = 1 OR r.pos = r.total
                 OR EXISTS (SELECT 1 FROM generate_series(1, p_n) i
                            WHERE 1 + round(i * (r.total - 1)::numeric / (p_n + 1)) = r.pos)
            WHEN 'keep_all' THEN true
            END
      -- Never a head: the thread's, or the newest of a namespace that has
      -- no thread row (a bulk load; see thread_head_seq).
      AND r.seq IS DISTINCT FROM coalesce(h.seq, CASE WHEN r.pos = r.total THEN r.seq END)
      -- Never a branch's source, while the branch exists.
      AND NOT EXISTS (SELECT 1 FROM sources s WHERE s.thread_id = r.thread_id AND s.checkpoint_id = r.checkpoint_id);
END;
$function$;
COMMENT ON FUNCTION pgcheckpoint.thread_gc_doomed_many(text[],text,integer,interval) IS 'What a retention policy (keep_all, keep_last_n(n), keep_age(age), keep_milestones(n)) deletes of the given threads now, every namespace: never a head (the rewound-to checkpoint after a rewind), never a branch''s source while the branch exists. The one statement of that rule: thread_gc and thread_gc_many delete what it returns. Reads only (a preview); it does not check the policy (retention_policy_check) and returns nothing for an unknown one. Usage: SELECT * FROM pgcheckpoint.thread_gc_doomed_many(ARRAY[''run-42''], ''keep_last_n'', 10, NULL).';

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
    SELECT array_agg(d.checkpoint_id), array_agg(d.namespace), array_agg(d.step)
      INTO v_ids, v_ns, v_steps
    FROM pgcheckpoint.thread_gc_doomed_many(ARRAY[p_thread_id], p_policy, p_n, p_age) d;
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
            v_deleted := v_deleted + pgcheckpoint.checkpoint_delete_many(ARRAY(
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
COMMENT ON FUNCTION pgcheckpoint.thread_gc_many(text[],text,integer,interval) IS 'Sweeps the given threads in one transaction: each expired one by its expiry, the others through the policy all at once (thread_gc_doomed_many, then checkpoint_delete_many), and every one marked swept (threads.swept_at); a thread that fails is left as it was (WARNING). Returns how many threads, expired, failed, and how many checkpoints deleted.';
