-- Tenants kept apart by Postgres itself (issue 29).
--
-- * Every table gains tenant_id, text NOT NULL: the rows there are now in
--   tenant 'default' (engine.DefaultTenant), and a new row takes the
--   session's tenant, pgcheckpoint.current_tenant(), unless it names one.
-- * The tenant is the second column of every key, after the thread
--   (DESIGN invariant 5): (thread_id, tenant_id, ...). Two tenants may use
--   the same thread id and the same checkpoint id (UNIQUE (checkpoint_id,
--   tenant_id) replaces migration 18's UNIQUE (checkpoint_id)), and a
--   sharded Postgres could distribute every table by (thread_id,
--   tenant_id) and keep a thread's rows on one node. Thread (or id) first,
--   a lookup is an index lookup whether or not row-level security adds the
--   tenant to it: a session that bypasses it (a superuser) still finds a
--   thread without reading the whole tenant's index; a listing of one
--   tenant's threads has threads_tenant_idx.
-- * Row-level security, ENABLEd and FORCEd (the tables' owner is held to
--   it too): a session reads and writes only the rows whose tenant_id is
--   its tenant, the setting pgcheckpoint.tenant, which the Postgres store
--   sets transaction-locally for every statement. With no tenant set
--   (unset or ''), nothing is readable and nothing writable. Superusers
--   and roles with BYPASSRLS are not held (see schema/roles/roles.sql).
-- * The SQL functions are SECURITY INVOKER (none is SECURITY DEFINER): they
--   run under the caller's policies and tenant. The view checkpoint_info
--   becomes security_invoker, so that its reader's policies apply, not its
--   owner's. The functions that name a key in ON CONFLICT name the new
--   one; thread_lock refuses a session with no tenant (SQLSTATE 42501), so
--   a write with none fails on its first step with a message that says
--   what to set; thread_gc_sweep takes the tenant to sweep as p_tenant,
--   set again in each batch's transaction (a CALL that commits cannot be
--   preceded by a SET LOCAL), or the session's.
--
-- The version table, pgcheckpoint.schema_migrations, has no tenant: it is
-- the schema's, not a tenant's.

-- No SET clause, so that Postgres inlines it into every policy and default
-- (a call of a function with a SET clause costs a few microseconds, on every
-- row a filter reads: measured, a listing of 1,000 checkpoints took 3 times
-- as long); every name and operator in it is schema-qualified instead.
CREATE FUNCTION pgcheckpoint.current_tenant()
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT CASE WHEN pg_catalog.current_setting('pgcheckpoint.tenant', true) OPERATOR(pg_catalog.=) ''
                THEN NULL
                ELSE pg_catalog.current_setting('pgcheckpoint.tenant', true) END
$function$;
COMMENT ON FUNCTION pgcheckpoint.current_tenant() IS 'The session''s tenant: the setting pgcheckpoint.tenant, NULL when it is unset or '''' (after a transaction-local set ends, an unset placeholder setting reads '''', not NULL). Set it for a transaction with SET LOCAL pgcheckpoint.tenant = ''acme'' or SELECT set_config(''pgcheckpoint.tenant'', ''acme'', true); the row-level security policies of every table compare tenant_id with it, and new rows take it as their tenant_id.';

-- The column. Existing rows read the ADD COLUMN default, 'default', with
-- no rewrite of the table; new rows get the session's tenant.
ALTER TABLE pgcheckpoint.checkpoints ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE pgcheckpoint.pending_writes ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE pgcheckpoint.threads ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE pgcheckpoint.thread_locks ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE pgcheckpoint.checkpoints ALTER COLUMN tenant_id SET DEFAULT pgcheckpoint.current_tenant();
ALTER TABLE pgcheckpoint.pending_writes ALTER COLUMN tenant_id SET DEFAULT pgcheckpoint.current_tenant();
ALTER TABLE pgcheckpoint.threads ALTER COLUMN tenant_id SET DEFAULT pgcheckpoint.current_tenant();
ALTER TABLE pgcheckpoint.thread_locks ALTER COLUMN tenant_id SET DEFAULT pgcheckpoint.current_tenant();

-- The keys, thread (or checkpoint id) first, then the tenant.
ALTER TABLE pgcheckpoint.pending_writes DROP CONSTRAINT pending_writes_thread_id_namespace_checkpoint_seq_fkey;
ALTER TABLE pgcheckpoint.pending_writes DROP CONSTRAINT pending_writes_pkey;
ALTER TABLE pgcheckpoint.checkpoints DROP CONSTRAINT checkpoints_pkey;
ALTER TABLE pgcheckpoint.checkpoints DROP CONSTRAINT checkpoints_checkpoint_id_key;
ALTER TABLE pgcheckpoint.threads DROP CONSTRAINT threads_pkey;
ALTER TABLE pgcheckpoint.thread_locks DROP CONSTRAINT thread_locks_pkey;

ALTER TABLE pgcheckpoint.checkpoints ADD CONSTRAINT checkpoints_pkey PRIMARY KEY (thread_id, tenant_id, namespace, seq);
ALTER TABLE pgcheckpoint.checkpoints ADD CONSTRAINT checkpoints_checkpoint_id_tenant_id_key UNIQUE (checkpoint_id, tenant_id);
ALTER TABLE pgcheckpoint.pending_writes ADD CONSTRAINT pending_writes_pkey PRIMARY KEY (thread_id, tenant_id, namespace, checkpoint_seq, task_id, idx);
ALTER TABLE pgcheckpoint.pending_writes ADD CONSTRAINT pending_writes_checkpoint_fkey
    FOREIGN KEY (thread_id, tenant_id, namespace, checkpoint_seq)
    REFERENCES pgcheckpoint.checkpoints (thread_id, tenant_id, namespace, seq) ON DELETE CASCADE;
ALTER TABLE pgcheckpoint.threads ADD CONSTRAINT threads_pkey PRIMARY KEY (thread_id, tenant_id, namespace);
-- A tenant's threads in thread id order (ListThreads, a sweep's pages).
CREATE INDEX threads_tenant_idx ON pgcheckpoint.threads (tenant_id, thread_id);
ALTER TABLE pgcheckpoint.thread_locks ADD CONSTRAINT thread_locks_pkey PRIMARY KEY (thread_id, tenant_id);

DROP INDEX pgcheckpoint.threads_branched_from_thread_idx;
DROP INDEX pgcheckpoint.threads_expires_at_idx;
DROP INDEX pgcheckpoint.threads_swept_at_idx;
CREATE INDEX threads_branched_from_thread_idx ON pgcheckpoint.threads (branched_from_thread, tenant_id) WHERE branched_from_thread IS NOT NULL;
CREATE INDEX threads_expires_at_idx ON pgcheckpoint.threads (tenant_id, expires_at) WHERE expires_at IS NOT NULL;
-- Not begun with the tenant: begun with
-- (tenant_id, ...), a plan made before the table has statistics took it
-- for a lookup of a thread (its tenant_id matches), reading every entry
-- of the tenant. A sweep reads it in swept_at order, the tenant compared
-- in the index; thread_id orders the ties.
CREATE INDEX threads_swept_at_idx ON pgcheckpoint.threads (swept_at NULLS FIRST, tenant_id, thread_id);

COMMENT ON COLUMN pgcheckpoint.checkpoints.tenant_id IS 'The tenant the checkpoint belongs to: the second column of every key, after the thread (or the checkpoint id). Row-level security shows a session only its tenant''s rows (pgcheckpoint.current_tenant()); a new row takes that tenant.';
COMMENT ON COLUMN pgcheckpoint.pending_writes.tenant_id IS 'The tenant of the checkpoint (see checkpoints.tenant_id).';
COMMENT ON COLUMN pgcheckpoint.threads.tenant_id IS 'The tenant of the thread (see checkpoints.tenant_id).';
COMMENT ON COLUMN pgcheckpoint.thread_locks.tenant_id IS 'The tenant of the thread (see checkpoints.tenant_id).';
COMMENT ON COLUMN pgcheckpoint.checkpoints.checkpoint_id IS 'UUIDv7 (time-ordered), unique in its tenant. May be generated by the client, which makes retried writes idempotent.';
COMMENT ON CONSTRAINT checkpoints_checkpoint_id_tenant_id_key ON pgcheckpoint.checkpoints IS 'A checkpoint id names one checkpoint in its tenant, whatever the thread, the client or the isolation level. Two tenants may hold the same id.';

COMMENT ON FUNCTION pgcheckpoint.checkpoint_id_lock(uuid) IS 'Takes an advisory lock on a checkpoint id until the end of the transaction: (1885563753, uuid_hash(checkpoint_id)) in pg_locks. Writes no longer take it (version 16): the unique constraint checkpoints_checkpoint_id_tenant_id_key holds ids unique in a tenant. Kept for scripts that call it; its key is the id alone, whatever the tenant.';
COMMENT ON FUNCTION pgcheckpoint.checkpoint_put(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text,bigint,integer,bytea,jsonb,jsonb) IS 'Writes one checkpoint on a thread under the thread lock, as a child of the head (or of the given parent), which makes it the head. step = parent step + 1. Stored as a delta against the parent (or the anchor of its run) when the messages are an append and the delta is smaller (see checkpoints.format); p_delta_run = 1 stores every checkpoint whole. Idempotent on checkpoint_id, which is unique in its tenant (constraint checkpoints_checkpoint_id_tenant_id_key: a write of an id that a write on another thread stored meanwhile fails with SQLSTATE 23505 on it). Under REPEATABLE READ or SERIALIZABLE, a write whose snapshot is older than what the thread lock''s previous holder committed fails with SQLSTATE 40001: retry it. Errors: PC001 parent not found, PC002 id reused for other content (or 23505 as above), PC003 invalid argument (an id that is not a UUIDv7, an unknown trigger, ...), 40001 serialization failure.';

-- Row-level security.
ALTER TABLE pgcheckpoint.checkpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgcheckpoint.checkpoints FORCE ROW LEVEL SECURITY;
ALTER TABLE pgcheckpoint.pending_writes ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgcheckpoint.pending_writes FORCE ROW LEVEL SECURITY;
ALTER TABLE pgcheckpoint.threads ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgcheckpoint.threads FORCE ROW LEVEL SECURITY;
ALTER TABLE pgcheckpoint.thread_locks ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgcheckpoint.thread_locks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON pgcheckpoint.checkpoints
    USING (tenant_id = pgcheckpoint.current_tenant()) WITH CHECK (tenant_id = pgcheckpoint.current_tenant());
CREATE POLICY tenant ON pgcheckpoint.pending_writes
    USING (tenant_id = pgcheckpoint.current_tenant()) WITH CHECK (tenant_id = pgcheckpoint.current_tenant());
CREATE POLICY tenant ON pgcheckpoint.threads
    USING (tenant_id = pgcheckpoint.current_tenant()) WITH CHECK (tenant_id = pgcheckpoint.current_tenant());
CREATE POLICY tenant ON pgcheckpoint.thread_locks
    USING (tenant_id = pgcheckpoint.current_tenant()) WITH CHECK (tenant_id = pgcheckpoint.current_tenant());
COMMENT ON POLICY tenant ON pgcheckpoint.checkpoints IS 'A session sees and writes the rows of its tenant (pgcheckpoint.current_tenant()) alone; none with no tenant set.';
COMMENT ON POLICY tenant ON pgcheckpoint.pending_writes IS 'A session sees and writes the rows of its tenant (pgcheckpoint.current_tenant()) alone; none with no tenant set.';
COMMENT ON POLICY tenant ON pgcheckpoint.threads IS 'A session sees and writes the rows of its tenant (pgcheckpoint.current_tenant()) alone; none with no tenant set.';
COMMENT ON POLICY tenant ON pgcheckpoint.thread_locks IS 'A session sees and writes the rows of its tenant (pgcheckpoint.current_tenant()) alone; none with no tenant set.';

-- A view runs with its owner's rights unless it is security_invoker: its
-- reader's policies (and tenant) must apply.
ALTER VIEW pgcheckpoint.checkpoint_info SET (security_invoker = true);

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_after_write(p_thread_id text, p_namespace text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    INSERT INTO pgcheckpoint.threads AS t (thread_id, namespace) VALUES (p_thread_id, p_namespace)
    ON CONFLICT (tenant_id, thread_id, namespace) DO UPDATE SET rewound_to = NULL
    WHERE t.rewound_to IS NOT NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_lock(p_thread_id text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- An UPDATE, not SELECT ... FOR UPDATE: under REPEATABLE READ and
    -- SERIALIZABLE, updating a row that another transaction updated and
    -- committed after this one's snapshot fails with 40001, where a lock
    -- alone would be granted. Every holder updates it, so whatever the
    -- previous holder changed, this transaction either sees it or fails.
    -- The row is the session's tenant's (row-level security).
    UPDATE pgcheckpoint.thread_locks l SET taken = l.taken + 1 WHERE l.thread_id = p_thread_id;
    IF NOT FOUND AND p_thread_id IS NOT NULL THEN
        IF pgcheckpoint.current_tenant() IS NULL THEN
            RAISE EXCEPTION 'no tenant is set: set pgcheckpoint.tenant in the transaction (SET LOCAL pgcheckpoint.tenant = ''...'')'
                USING ERRCODE = '42501';
        END IF;
        -- The thread's first lock (or the first since it was deleted): two
        -- first writers meet on the key, the second waits for the first.
        INSERT INTO pgcheckpoint.thread_locks AS l (thread_id) VALUES (p_thread_id)
        ON CONFLICT (tenant_id, thread_id) DO UPDATE SET taken = l.taken + 1;
    END IF;
END;
$function$;
COMMENT ON FUNCTION pgcheckpoint.thread_lock(text) IS 'Takes the thread''s lock until the end of the transaction: updates (or creates) its row in thread_locks, in the session''s tenant. Every routine that changes a thread takes it first (several threads: thread_lock_many), so the thread''s writers queue and each sees what the one before wrote; under REPEATABLE READ or SERIALIZABLE, a transaction whose snapshot is older than the previous holder''s commit fails with SQLSTATE 40001 (retry it). Needs UPDATE on thread_locks, so a role that may only read cannot take or hold it. A NULL thread id takes nothing. Error 42501: no tenant is set (pgcheckpoint.current_tenant()).';

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_head_for_write(p_thread_id text, p_namespace text, p_checkpoint_id uuid, p_parent_checkpoint_id uuid)
 RETURNS TABLE(thread_seen boolean, rewound_to uuid, wanted_parent uuid, next_seq bigint, parent_checkpoint_id uuid, next_step bigint, parent_delta_run integer, parent_delta_depth integer, parent_messages_count integer, parent_messages_digest bytea, parent_state_digests jsonb, parent_tool_results_digests jsonb)
 LANGUAGE sql
 STABLE
AS $function$
    SELECT t.thread_id IS NOT NULL,
           t.rewound_to,
           coalesce(p_parent_checkpoint_id, t.rewound_to),
           coalesce(l.seq, 0) OPERATOR(pg_catalog.+) 1,
           p.checkpoint_id,
           coalesce(p.step, 0) OPERATOR(pg_catalog.+) 1,
           p.delta_run, p.delta_depth, p.messages_count, p.messages_digest, p.state_digests, p.tool_results_digests
    FROM (SELECT 1) AS one
    LEFT JOIN pgcheckpoint.threads t
           ON t.thread_id OPERATOR(pg_catalog.=) p_thread_id AND t.namespace OPERATOR(pg_catalog.=) p_namespace
    -- The newest checkpoint: the next seq, and the parent unless another
    -- is wanted.
    LEFT JOIN LATERAL (
        SELECT c.checkpoint_id, c.seq
        FROM pgcheckpoint.checkpoints c
        WHERE c.thread_id OPERATOR(pg_catalog.=) p_thread_id AND c.namespace OPERATOR(pg_catalog.=) p_namespace
        ORDER BY c.seq DESC
        LIMIT 1) l ON true
    -- The parent: the wanted one (given, else the rewound-to checkpoint),
    -- else the newest. By id alone, then thread and namespace checked on
    -- the row: given the thread too, a plan made before the table has
    -- statistics may walk the thread's primary key instead, reading every
    -- checkpoint. (Looking the newest up again by id costs a write less
    -- than choosing between two lookups column by column.)
    -- The id is computed in a subquery of its own (OFFSET 0 keeps it
    -- one): the lookup then compares the id with a plain value, which
    -- row-level security lets into the index condition beside the
    -- tenant's; compared with the coalesce expression itself, it would
    -- be a filter on every checkpoint of the tenant.
    LEFT JOIN LATERAL (
        SELECT coalesce(p_parent_checkpoint_id, t.rewound_to, l.checkpoint_id) AS id OFFSET 0) want ON true
    LEFT JOIN LATERAL (
        SELECT c.*
        FROM (SELECT c.checkpoint_id, c.step, c.delta_run, c.delta_depth, c.messages_count, c.messages_digest,
                     c.state_digests, c.tool_results_digests, c.thread_id, c.namespace
              FROM pgcheckpoint.checkpoints c
              WHERE c.checkpoint_id OPERATOR(pg_catalog.=) want.id
              LIMIT 1) c
        WHERE c.thread_id OPERATOR(pg_catalog.=) p_thread_id AND c.namespace OPERATOR(pg_catalog.=) p_namespace) p ON true
    WHERE NOT EXISTS (SELECT FROM pgcheckpoint.checkpoints e WHERE e.checkpoint_id OPERATOR(pg_catalog.=) p_checkpoint_id)
$function$;

DROP PROCEDURE pgcheckpoint.thread_gc_sweep(text,integer,interval,integer,interval,interval);
CREATE PROCEDURE pgcheckpoint.thread_gc_sweep(IN p_policy text, IN p_n integer DEFAULT NULL::integer, IN p_age interval DEFAULT NULL::interval, IN p_batch_size integer DEFAULT 5, IN p_time_budget interval DEFAULT '00:00:50'::interval, IN p_pause interval DEFAULT '00:00:00'::interval, IN p_tenant text DEFAULT NULL::text)
 LANGUAGE plpgsql
AS $procedure$
-- It commits, so it can have no SET clause: every name and operator is
-- schema-qualified, and a batch's work is thread_gc_batch_oldest's.
DECLARE
    v_start pg_catalog.timestamptz := pg_catalog.now();
BEGIN
    PERFORM pgcheckpoint.retention_policy_check(p_policy, p_n, p_age);
    IF p_batch_size IS NULL OR p_batch_size OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'batch size must be 1 or more' USING ERRCODE = 'PC003';
    END IF;
    LOOP
        -- Each batch is a transaction of its own: a transaction-local
        -- tenant is set again in each.
        IF p_tenant IS NOT NULL THEN
            PERFORM pg_catalog.set_config('pgcheckpoint.tenant', p_tenant, true);
        END IF;
        IF pgcheckpoint.current_tenant() IS NULL THEN
            RAISE EXCEPTION 'no tenant to sweep: pass p_tenant, or set pgcheckpoint.tenant' USING ERRCODE = 'PC003';
        END IF;
        EXIT WHEN pgcheckpoint.thread_gc_batch_oldest(p_policy, p_n, p_age, p_batch_size, v_start) OPERATOR(pg_catalog.=) 0;
        COMMIT;
        EXIT WHEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_start OPERATOR(pg_catalog.>=) p_time_budget;
        IF p_pause OPERATOR(pg_catalog.>) '0'::pg_catalog.interval THEN
            -- Leave the CPU to the application's writes for a while.
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', p_pause));
        END IF;
    END LOOP;
END;
$procedure$;
COMMENT ON PROCEDURE pgcheckpoint.thread_gc_sweep(text,integer,interval,integer,interval,interval,text) IS 'Sweeps all threads of one tenant (p_tenant, else the session''s pgcheckpoint.tenant), least recently swept first: expiry, then the policy, in batches of p_batch_size threads (thread_gc_batch_oldest), committing after each and sleeping p_pause between, until every thread is done or p_time_budget is spent; the next call takes up the rest. Usage: CALL pgcheckpoint.thread_gc_sweep(''keep_last_n'', 10, p_tenant => ''acme''); a pg_cron job per tenant. Error PC003: bad policy, or no tenant.';
REVOKE EXECUTE ON PROCEDURE pgcheckpoint.thread_gc_sweep(text,integer,interval,integer,interval,interval,text) FROM PUBLIC;
