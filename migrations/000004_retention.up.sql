-- Retention: policies that delete old checkpoints of a thread, thread
-- expiry (TTL), and a sweep over all threads in short transactions.
--
-- A policy names what to keep in each namespace of a thread, in write order
-- (seq):
--   keep_all            everything (deletes nothing);
--   keep_last_n(n)      the n newest;
--   keep_age(age)       those written within age of now;
--   keep_milestones(n)  the first, the newest, and n evenly spaced between.
-- Whatever the policy, these are never deleted: the head of each namespace
-- (the rewound-to checkpoint after a rewind), and a checkpoint that a branch
-- was forked from, while the branch thread exists. Expiry is not a policy:
-- it deletes the thread, or all but its heads, branch sources included. A kept delta checkpoint
-- whose base goes is first rewritten whole (see delete_checkpoints), so
-- every kept checkpoint stays readable. A kept checkpoint's parent may be
-- deleted: its parent_checkpoint_id then names a checkpoint that is gone,
-- and its lineage ends there.

ALTER TABLE pgcheckpoint.threads
    ADD COLUMN swept_at      timestamptz,
    ADD COLUMN expires_at    timestamptz,
    ADD COLUMN expire_action text NOT NULL DEFAULT 'delete',
    ADD CONSTRAINT threads_expire_action_known CHECK (expire_action IN ('delete', 'keep_latest'));

COMMENT ON COLUMN pgcheckpoint.threads.expires_at IS
    'When the thread expires (TTL); NULL: never. A sweep (pgcheckpoint.gc_sweep, gc_batch, gc_threads) applies expire_action to an expired thread. Set on every namespace row of the thread.';
COMMENT ON COLUMN pgcheckpoint.threads.expire_action IS
    'What expiry does: ''delete'' deletes the thread; ''keep_latest'' keeps only the head of each namespace (and clears expires_at).';

COMMENT ON COLUMN pgcheckpoint.threads.swept_at IS
    'When a sweep (gc_batch, gc_sweep) last went through the thread; NULL: never. gc_sweep takes the least recently swept threads first.';

-- The sweep finds expired threads without reading the others.
CREATE INDEX threads_expires_at_idx ON pgcheckpoint.threads (expires_at) WHERE expires_at IS NOT NULL;
-- gc_sweep takes the least recently swept threads first.
CREATE INDEX threads_swept_at_idx ON pgcheckpoint.threads (swept_at NULLS FIRST, thread_id);

CREATE FUNCTION pgcheckpoint.gc_check_policy(p_policy text, p_n integer, p_age interval)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    CASE p_policy
    WHEN 'keep_all' THEN
        NULL;
    WHEN 'keep_last_n' THEN
        IF p_n IS NULL OR p_n < 1 THEN
            RAISE EXCEPTION 'keep_last_n needs n >= 1, got %', coalesce(p_n::text, 'NULL') USING ERRCODE = 'PC003';
        END IF;
    WHEN 'keep_milestones' THEN
        IF p_n IS NULL OR p_n < 0 THEN
            RAISE EXCEPTION 'keep_milestones needs n >= 0, got %', coalesce(p_n::text, 'NULL') USING ERRCODE = 'PC003';
        END IF;
    WHEN 'keep_age' THEN
        IF p_age IS NULL OR p_age <= interval '0' THEN
            RAISE EXCEPTION 'keep_age needs a positive age, got %', coalesce(p_age::text, 'NULL') USING ERRCODE = 'PC003';
        END IF;
    ELSE
        RAISE EXCEPTION 'unknown retention policy %; use keep_all, keep_last_n, keep_age or keep_milestones',
            coalesce(quote_literal(p_policy), 'NULL') USING ERRCODE = 'PC003';
    END CASE;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.gc_check_policy IS 'Raises PC003 unless the policy and its arguments are valid.';

-- gc_thread applies a policy to one thread (every namespace) under its
-- lock: one statement picks what goes, one delete removes it (after
-- rebasing kept deltas).
CREATE FUNCTION pgcheckpoint.gc_thread(p_thread_id text, p_policy text, p_n integer DEFAULT NULL, p_age interval DEFAULT NULL)
RETURNS TABLE (thread_id text, namespace text, checkpoint_id uuid, step bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_ids   uuid[];
    v_ns    text[];
    v_steps bigint[];
BEGIN
    PERFORM pgcheckpoint.gc_check_policy(p_policy, p_n, p_age);
    IF p_policy = 'keep_all' THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(1885563760, hashtext(p_thread_id)); -- pgcheckpoint.lock_thread

    WITH heads AS MATERIALIZED (
        SELECT t.namespace, pgcheckpoint.head_seq(t.thread_id, t.namespace) AS seq
        FROM pgcheckpoint.threads t
        WHERE t.thread_id = p_thread_id
    ), ranked AS (
        SELECT c.namespace, c.seq, c.checkpoint_id, c.step, c.created_at,
               row_number() OVER (PARTITION BY c.namespace ORDER BY c.seq) AS pos,
               count(*) OVER (PARTITION BY c.namespace) AS total
        FROM pgcheckpoint.checkpoints c
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
          AND NOT EXISTS (SELECT 1 FROM pgcheckpoint.threads b
                          WHERE b.branched_from_thread = p_thread_id AND b.branched_from = r.checkpoint_id)
    )
    SELECT array_agg(d.checkpoint_id), array_agg(d.namespace), array_agg(d.step)
      INTO v_ids, v_ns, v_steps
    FROM doomed d;

    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    PERFORM pgcheckpoint.delete_checkpoints(v_ids);
    RETURN QUERY SELECT p_thread_id, u.ns, u.id, u.step FROM unnest(v_ids, v_ns, v_steps) AS u(id, ns, step);
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.gc_thread IS
    'Applies a retention policy (keep_all, keep_last_n(n), keep_age(age), keep_milestones(n)) to one thread, every namespace, in one transaction; never deletes a head or a branch source; rebases kept deltas. Returns the deleted checkpoints. Usage: SELECT * FROM pgcheckpoint.gc_thread(''run-42'', ''keep_last_n'', 10). Error PC003: bad policy.';

-- expire_thread applies a thread's expiry if it is due; returns the number
-- of checkpoints deleted, or NULL when the thread is not expired.
CREATE FUNCTION pgcheckpoint.expire_thread(p_thread_id text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_action text;
    v_n      bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1885563760, hashtext(p_thread_id)); -- pgcheckpoint.lock_thread
    SELECT t.expire_action INTO v_action
    FROM pgcheckpoint.threads t
    WHERE t.thread_id = p_thread_id AND t.expires_at <= now()
    ORDER BY t.expires_at
    LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF v_action = 'delete' THEN
        RETURN pgcheckpoint.thread_delete(p_thread_id);
    END IF;
    v_n := pgcheckpoint.prune(ARRAY[p_thread_id], true);
    UPDATE pgcheckpoint.threads t SET expires_at = NULL WHERE t.thread_id = p_thread_id;
    RETURN v_n;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.expire_thread IS
    'If the thread has expired (threads.expires_at <= now()), deletes it or keeps only its heads (threads.expire_action) and returns the number of checkpoints deleted; NULL if it has not expired.';

-- gc_threads is one transaction of a sweep: each thread given is expired
-- (see expire_thread) or put through the policy, and marked swept. It takes
-- every lock first, in lock key order (see delete_checkpoints), and holds
-- them until it commits, so keep batches small. A thread that fails (a
-- damaged delta chain, say) is left as it was, reported with a WARNING and
-- counted, and the sweep goes on.
CREATE FUNCTION pgcheckpoint.gc_threads(p_thread_ids text[], p_policy text, p_n integer, p_age interval)
RETURNS TABLE (threads integer, expired integer, failed integer, deleted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_thread  text;
    v_threads integer := 0;
    v_expired integer := 0;
    v_failed  integer := 0;
    v_deleted bigint := 0;
    v_n       bigint;
BEGIN
    PERFORM pgcheckpoint.gc_check_policy(p_policy, p_n, p_age);
    PERFORM pg_advisory_xact_lock(1885563760, k.h)
    FROM (SELECT DISTINCT hashtext(x) AS h FROM unnest(p_thread_ids) x) k
    ORDER BY k.h;
    FOR v_thread IN SELECT DISTINCT x FROM unnest(p_thread_ids) x ORDER BY 1 LOOP
        BEGIN
            v_n := pgcheckpoint.expire_thread(v_thread);
            IF v_n IS NOT NULL THEN
                v_expired := v_expired + 1;
            ELSIF p_policy <> 'keep_all' THEN
                SELECT count(*) INTO v_n FROM pgcheckpoint.gc_thread(v_thread, p_policy, p_n, p_age);
            END IF;
            v_deleted := v_deleted + coalesce(v_n, 0);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pgcheckpoint: sweep skipped thread %: % (SQLSTATE %)', v_thread, SQLERRM, SQLSTATE;
            v_failed := v_failed + 1;
        END;
        UPDATE pgcheckpoint.threads t SET swept_at = now() WHERE t.thread_id = v_thread;
        v_threads := v_threads + 1;
    END LOOP;
    RETURN QUERY SELECT v_threads, v_expired, v_failed, v_deleted;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.gc_threads IS
    'Sweeps the given threads in one transaction: each expired or put through the policy, and marked swept (threads.swept_at); a thread that fails is left as it was (WARNING). Returns how many threads, expired, failed, and how many checkpoints deleted.';

-- gc_batch is gc_threads for the p_batch_size threads after
-- p_after_thread_id in thread id order: a whole pass is a loop that starts
-- from '' and passes on the last thread returned (the engine's Sweep).
CREATE FUNCTION pgcheckpoint.gc_batch(p_policy text, p_n integer, p_age interval, p_after_thread_id text, p_batch_size integer)
RETURNS TABLE (last_thread_id text, threads integer, expired integer, failed integer, deleted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids text[];
BEGIN
    PERFORM pgcheckpoint.gc_check_policy(p_policy, p_n, p_age);
    IF p_batch_size IS NULL OR p_batch_size < 1 THEN
        RAISE EXCEPTION 'batch size must be 1 or more' USING ERRCODE = 'PC003';
    END IF;
    v_ids := ARRAY(
        SELECT DISTINCT t.thread_id FROM pgcheckpoint.threads t
        WHERE t.thread_id > coalesce(p_after_thread_id, '')
        ORDER BY 1
        LIMIT p_batch_size);
    RETURN QUERY SELECT v_ids[cardinality(v_ids)], g.threads, g.expired, g.failed, g.deleted
    FROM pgcheckpoint.gc_threads(v_ids, p_policy, p_n, p_age) g;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.gc_batch IS
    'One batch of a sweep in thread id order, in one transaction: gc_threads for up to p_batch_size threads after p_after_thread_id. Returns the last thread done (NULL when none was left), how many threads, expired, failed, and how many checkpoints deleted.';

-- gc_sweep runs batches of the least recently swept threads, committing
-- after each, until every thread was swept since it started or the time
-- budget is spent; the next call takes up the threads this one left. For
-- pg_cron:
--   SELECT cron.schedule('pgcheckpoint-gc', '* * * * *',
--       $$CALL pgcheckpoint.gc_sweep('keep_last_n', 10)$$);
-- A procedure that commits cannot carry a SET search_path clause; every
-- name in it is schema-qualified instead.
CREATE PROCEDURE pgcheckpoint.gc_sweep(
    p_policy      text,
    p_n           integer DEFAULT NULL,
    p_age         interval DEFAULT NULL,
    p_batch_size  integer DEFAULT 5,
    p_time_budget interval DEFAULT '50 seconds',
    p_pause       interval DEFAULT '0')
LANGUAGE plpgsql
AS $$
DECLARE
    v_start timestamptz := pg_catalog.now();
    v_ids   text[];
BEGIN
    PERFORM pgcheckpoint.gc_check_policy(p_policy, p_n, p_age);
    IF p_batch_size IS NULL OR p_batch_size < 1 THEN
        RAISE EXCEPTION 'batch size must be 1 or more' USING ERRCODE = 'PC003';
    END IF;
    LOOP
        v_ids := ARRAY(
            SELECT t.thread_id FROM pgcheckpoint.threads t
            WHERE t.swept_at IS NULL OR t.swept_at < v_start
            ORDER BY t.swept_at NULLS FIRST, t.thread_id
            LIMIT p_batch_size);
        EXIT WHEN pg_catalog.cardinality(v_ids) = 0;
        PERFORM pgcheckpoint.gc_threads(v_ids, p_policy, p_n, p_age);
        COMMIT;
        EXIT WHEN pg_catalog.clock_timestamp() - v_start >= p_time_budget;
        IF p_pause > interval '0' THEN
            -- Leave the CPU to the application's writes for a while.
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', p_pause));
        END IF;
    END LOOP;
END;
$$;

COMMENT ON PROCEDURE pgcheckpoint.gc_sweep IS
    'Sweeps all threads, least recently swept first: expiry, then the policy, in batches of p_batch_size threads, committing after each and sleeping p_pause between, until every thread is done or p_time_budget is spent; the next call takes up the rest. Usage: CALL pgcheckpoint.gc_sweep(''keep_last_n'', 10).';
