-- Every session kept to its tenant, whatever its role (issue 29).
--
-- Row-level security (migration 19) holds every role but superusers and
-- roles with BYPASSRLS: an Engine connected as one of those, bound to
-- tenant B, read and changed tenant A's rows of the same thread id. Now
-- the statements of the Postgres store (queries/) and every SQL function
-- read and write the tables only through the views tenant_checkpoints,
-- tenant_pending_writes, tenant_threads, tenant_thread_locks and
-- tenant_data_keys: each is its table's rows WHERE tenant_id =
-- pgcheckpoint.current_tenant(), WITH CHECK OPTION, so the tenant rule
-- holds for every session, a superuser's included, in one place per
-- table. Row-level security stays, the second wall, for whoever reads the
-- tables themselves (psql, pg_dump).
--
-- * A session with no tenant set (unset or '') reads nothing and writes
--   nothing through the functions and the views, whatever its role: a
--   write fails (thread_lock: SQLSTATE 42501; a row's tenant_id would be
--   NULL: 23502). Set it, as the store does, per transaction:
--   SET LOCAL pgcheckpoint.tenant = 'default' (or ALTER DATABASE ... SET
--   pgcheckpoint.tenant = 'default' for psql sessions and pg_cron jobs of
--   an installation without tenants).
-- * The tables themselves, read by a role that bypasses row-level
--   security (the operator role of schema/roles/roles.sql, a superuser),
--   show every tenant; so does the view checkpoint_info, which is unchanged
--   (a DBA's view of the table). tenant_checkpoint_info is the same view
--   of the session's tenant alone, which the store's listings read.
-- * The views are simple (auto-updatable, inlined into each statement):
--   the tenant filter joins the thread (or checkpoint id) in the index
--   condition of the keys (thread_id, tenant_id, ...) and (checkpoint_id,
--   tenant_id). They are security_invoker, so the reader's privileges and
--   row-level security apply to the tables beneath; each gets the
--   privileges its table has (copied below). A view is its table's
--   columns at the time it is made: a migration that adds a column makes
--   the view again.

CREATE VIEW pgcheckpoint.tenant_checkpoints WITH (security_invoker = true) AS
    SELECT * FROM pgcheckpoint.checkpoints WHERE tenant_id OPERATOR(pg_catalog.=) pgcheckpoint.current_tenant()
    WITH LOCAL CHECK OPTION;
CREATE VIEW pgcheckpoint.tenant_pending_writes WITH (security_invoker = true) AS
    SELECT * FROM pgcheckpoint.pending_writes WHERE tenant_id OPERATOR(pg_catalog.=) pgcheckpoint.current_tenant()
    WITH LOCAL CHECK OPTION;
CREATE VIEW pgcheckpoint.tenant_threads WITH (security_invoker = true) AS
    SELECT * FROM pgcheckpoint.threads WHERE tenant_id OPERATOR(pg_catalog.=) pgcheckpoint.current_tenant()
    WITH LOCAL CHECK OPTION;
CREATE VIEW pgcheckpoint.tenant_thread_locks WITH (security_invoker = true) AS
    SELECT * FROM pgcheckpoint.thread_locks WHERE tenant_id OPERATOR(pg_catalog.=) pgcheckpoint.current_tenant()
    WITH LOCAL CHECK OPTION;
CREATE VIEW pgcheckpoint.tenant_data_keys WITH (security_invoker = true) AS
    SELECT * FROM pgcheckpoint.data_keys WHERE tenant_id OPERATOR(pg_catalog.=) pgcheckpoint.current_tenant()
    WITH LOCAL CHECK OPTION;
CREATE VIEW pgcheckpoint.tenant_checkpoint_info WITH (security_invoker = true) AS
    SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id, c.step,
           c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.format, c.next_node, c.size_bytes
    FROM pgcheckpoint.checkpoints c WHERE c.tenant_id OPERATOR(pg_catalog.=) pgcheckpoint.current_tenant();

COMMENT ON VIEW pgcheckpoint.tenant_checkpoints IS 'The checkpoints of the session''s tenant (pgcheckpoint.current_tenant()); none with no tenant set, whatever the role (a superuser''s too). Every SQL function and every statement of the store reads and writes checkpoints through it; a row written through it must be of the tenant (CHECK OPTION).';
COMMENT ON VIEW pgcheckpoint.tenant_pending_writes IS 'The pending writes of the session''s tenant (see tenant_checkpoints).';
COMMENT ON VIEW pgcheckpoint.tenant_threads IS 'The threads of the session''s tenant (see tenant_checkpoints).';
COMMENT ON VIEW pgcheckpoint.tenant_thread_locks IS 'The thread locks of the session''s tenant (see tenant_checkpoints).';
COMMENT ON VIEW pgcheckpoint.tenant_data_keys IS 'The data keys of the session''s tenant (see tenant_checkpoints).';
COMMENT ON VIEW pgcheckpoint.tenant_checkpoint_info IS 'checkpoint_info of the session''s tenant alone (as tenant_checkpoints): what the store''s listings read.';

-- Each view gets the privileges of the relation it shows (the roles
-- script's grants, given before the views existed).
DO $grant$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT v.name, a.privilege_type, a.grantee
        FROM (VALUES ('checkpoints', 'tenant_checkpoints'), ('pending_writes', 'tenant_pending_writes'),
                     ('threads', 'tenant_threads'), ('thread_locks', 'tenant_thread_locks'),
                     ('data_keys', 'tenant_data_keys'), ('checkpoint_info', 'tenant_checkpoint_info')) AS v(rel, name)
        JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass('pgcheckpoint.' || v.rel)
        CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
        WHERE a.grantee <> c.relowner
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON pgcheckpoint.%I TO %s', r.privilege_type, r.name,
            CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r.grantee)) END);
    END LOOP;
END;
$grant$;

-- Every SQL function that reads or writes a table, as it was, on the
-- views instead of the tables.

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_append(p_thread_id text, p_namespace text, p_checkpoint_id uuid, p_on_head uuid, p_trigger text, p_tags text[], p_summary text, p_metadata jsonb, p_messages jsonb, p_set_state jsonb, p_set_tool_results jsonb, p_remove_state text[], p_remove_tool_results text[], p_next_node text, p_size_bytes bigint, p_delta_run integer DEFAULT 50, p_message_digests bytea DEFAULT NULL::bytea, p_set_state_digests jsonb DEFAULT NULL::jsonb, p_set_tool_results_digests jsonb DEFAULT NULL::jsonb, p_max_size_bytes bigint DEFAULT NULL::bigint, OUT thread_id text, OUT namespace text, OUT checkpoint_id uuid, OUT parent_checkpoint_id uuid, OUT step bigint, OUT created_at timestamp with time zone, OUT inserted boolean)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_ns        text := coalesce(p_namespace, '');
    v_metadata  jsonb := coalesce(p_metadata, '{}');
    v_messages  jsonb := coalesce(p_messages, '[]');
    v_set_state jsonb := coalesce(p_set_state, '{}');
    v_set_tools jsonb := coalesce(p_set_tool_results, '{}');
    v_rm_state  text[] := coalesce(p_remove_state, '{}');
    v_rm_tools  text[] := coalesce(p_remove_tool_results, '{}');
    v_summary   text := coalesce(p_summary, '');
    v_msg_count integer;
    v_msg_dig   bytea;
    v_state_dig jsonb;
    v_tools_dig jsonb;
    v_same      boolean;
    -- The head (see thread_head_for_write; scalars, as in checkpoint_put).
    v_thread_seen boolean;
    v_rewound_to  uuid;
    v_next_seq    bigint;
    v_head_id     uuid;
    v_next_step   bigint;
    v_head_run    integer;
    v_head_depth  integer;
    v_head_count  integer;
    v_head_digest bytea;
    v_head_state  jsonb;
    v_head_tools  jsonb;
    v_size        bigint; -- the new checkpoint's size_bytes
    v_put record;
BEGIN
    IF p_thread_id IS NULL OR length(p_thread_id) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'thread_id must be 1 to 255 characters' USING ERRCODE = 'PC003';
    END IF;
    IF p_checkpoint_id IS NULL THEN
        RAISE EXCEPTION 'checkpoint_id must not be null' USING ERRCODE = 'PC003';
    END IF;
    PERFORM pgcheckpoint.checkpoint_check(p_checkpoint_id, p_trigger);
    IF jsonb_typeof(v_messages) <> 'array' THEN
        RAISE EXCEPTION 'messages must be a JSON array' USING ERRCODE = 'PC003';
    END IF;
    IF jsonb_typeof(v_set_state) <> 'object' OR jsonb_typeof(v_set_tools) <> 'object' OR jsonb_typeof(v_metadata) <> 'object' THEN
        RAISE EXCEPTION 'set_state, set_tool_results and metadata must be JSON objects' USING ERRCODE = 'PC003';
    END IF;
    IF p_delta_run IS NULL OR p_delta_run < 1 THEN
        RAISE EXCEPTION 'delta_run must be 1 or more' USING ERRCODE = 'PC003';
    END IF;
    IF v_set_state ?| v_rm_state OR v_set_tools ?| v_rm_tools THEN
        RAISE EXCEPTION 'a key is both set and removed' USING ERRCODE = 'PC003';
    END IF;
    v_msg_count := jsonb_array_length(v_messages);
    IF octet_length(p_message_digests) <> 16 * v_msg_count THEN
        RAISE EXCEPTION 'message_digests must hold 16 bytes per appended message (% messages, % bytes)',
            v_msg_count, octet_length(p_message_digests) USING ERRCODE = 'PC003';
    END IF;
    IF jsonb_typeof(p_set_state_digests) IS DISTINCT FROM 'object' AND p_set_state_digests IS NOT NULL
       OR jsonb_typeof(p_set_tool_results_digests) IS DISTINCT FROM 'object' AND p_set_tool_results_digests IS NOT NULL THEN
        RAISE EXCEPTION 'set_state_digests and set_tool_results_digests must be JSON objects' USING ERRCODE = 'PC003';
    END IF;

    PERFORM pgcheckpoint.thread_lock(p_thread_id);

    SELECT h.thread_seen, h.rewound_to, h.next_seq, h.parent_checkpoint_id, h.next_step,
           h.parent_delta_run, h.parent_delta_depth, h.parent_messages_count, h.parent_messages_digest,
           h.parent_state_digests, h.parent_tool_results_digests
      INTO v_thread_seen, v_rewound_to, v_next_seq, v_head_id, v_next_step,
           v_head_run, v_head_depth, v_head_count, v_head_digest, v_head_state, v_head_tools
    FROM pgcheckpoint.thread_head_for_write(p_thread_id, v_ns, p_checkpoint_id, NULL) h;

    checkpoint_id := p_checkpoint_id;
    IF NOT FOUND THEN
        -- A retry: the same append made on the same parent is a no-op.
        SELECT c.thread_id, c.namespace, c.parent_checkpoint_id, c.step, c.created_at,
               c.thread_id = p_thread_id AND c.namespace = v_ns
               AND (p_on_head IS NULL OR c.parent_checkpoint_id = p_on_head)
               AND c.metadata = v_metadata AND c.next_node = coalesce(p_next_node, '')
               AND m.messages = pm.messages || v_messages
               AND m.state = (pm.state - v_rm_state) || v_set_state
               AND m.tool_results = (pm.tool_results - v_rm_tools) || v_set_tools
          INTO thread_id, namespace, parent_checkpoint_id, step, created_at, v_same
        FROM pgcheckpoint.tenant_checkpoints c
        CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize(c.checkpoint_id) m
        LEFT JOIN LATERAL pgcheckpoint.checkpoint_materialize(c.parent_checkpoint_id) pm ON true
        WHERE c.checkpoint_id = p_checkpoint_id
        LIMIT 1;
        IF NOT coalesce(v_same, false) THEN
            RAISE EXCEPTION 'checkpoint % already exists, and not as this append', p_checkpoint_id
                USING ERRCODE = 'PC002',
                      HINT = 'Use a new checkpoint id for a new checkpoint; reuse an id only to retry the same write.';
        END IF;
        inserted := false;
        RETURN;
    END IF;
    IF v_head_id IS NULL THEN
        RAISE EXCEPTION 'thread % namespace % has no checkpoint to append to', p_thread_id, quote_literal(v_ns)
            USING ERRCODE = 'PC001', HINT = 'Write the first checkpoint whole (checkpoint_put).';
    END IF;
    IF p_on_head IS NOT NULL AND p_on_head <> v_head_id THEN
        RAISE EXCEPTION 'the head of thread % namespace % is %, not %', p_thread_id, quote_literal(v_ns), v_head_id, p_on_head
            USING ERRCODE = 'PC005';
    END IF;

    -- The size limit. The head's size plus the change's bounds the new
    -- content (a key the change sets again counts twice in it); over the
    -- limit, the content the append makes is measured, and only that
    -- refuses it.
    SELECT c.size_bytes + coalesce(p_size_bytes, 0) INTO v_size
    FROM pgcheckpoint.tenant_checkpoints c
    WHERE c.checkpoint_id = v_head_id
    LIMIT 1;
    IF v_size > p_max_size_bytes THEN
        SELECT octet_length((m.messages || v_messages)::text)
               + octet_length(((m.state - v_rm_state) || v_set_state)::text)
               + octet_length(((m.tool_results - v_rm_tools) || v_set_tools)::text)
          INTO v_size
        FROM pgcheckpoint.checkpoint_materialize(v_head_id) m;
        IF v_size > p_max_size_bytes THEN
            RAISE EXCEPTION 'the append makes % bytes of messages, state and tool results on thread % namespace %, over the limit of %',
                v_size, p_thread_id, quote_literal(v_ns), p_max_size_bytes
                USING ERRCODE = 'PC006',
                      HINT = 'Write less, or start the content afresh with checkpoint_put (a snapshot of what the agent still needs).';
        END IF;
    END IF;

    IF NOT coalesce(pgcheckpoint.delta_run_continues(v_head_run, p_delta_run), false) OR v_head_count IS NULL
       OR octet_length(v_head_digest) IS DISTINCT FROM 32 OR v_head_state IS NULL OR v_head_tools IS NULL THEN
        -- Stored whole: the head's content with the change, written by
        -- checkpoint_put on the head (which computes the digests, and may
        -- still store a delta on the run's anchor).
        SELECT * INTO v_put
        FROM pgcheckpoint.checkpoint_materialize(v_head_id) m
        CROSS JOIN LATERAL pgcheckpoint.checkpoint_put(
            p_thread_id, v_ns, p_checkpoint_id, v_head_id, p_trigger, p_tags, v_summary, v_metadata,
            m.messages || v_messages, (m.state - v_rm_state) || v_set_state,
            (m.tool_results - v_rm_tools) || v_set_tools, p_next_node, v_size, p_delta_run) r;
        thread_id := v_put.thread_id;
        namespace := v_put.namespace;
        parent_checkpoint_id := v_put.parent_checkpoint_id;
        step := v_put.step;
        created_at := v_put.created_at;
        inserted := v_put.inserted;
        RETURN;
    END IF;

    -- A delta on the head made of the change alone; the digests go on from
    -- the head's.
    v_msg_dig := coalesce(p_message_digests, pgcheckpoint.message_digests(v_messages));
    v_state_dig := (v_head_state - v_rm_state) || coalesce(p_set_state_digests, pgcheckpoint.key_digests(v_set_state));
    v_tools_dig := (v_head_tools - v_rm_tools) || coalesce(p_set_tool_results_digests, pgcheckpoint.key_digests(v_set_tools));
    IF v_summary = '' THEN
        -- The default summary needs the last message (the change's, else
        -- the head's, found without rebuilding the head) and the number
        -- of state keys, which the new state digests have.
        v_summary := pgcheckpoint.checkpoint_default_summary(
            CASE WHEN v_msg_count > 0 THEN v_messages
                 ELSE pg_catalog.jsonb_build_array(pgcheckpoint.checkpoint_last_message(v_head_id)) END,
            v_state_dig);
    END IF;
    INSERT INTO pgcheckpoint.tenant_checkpoints AS c (
        thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step,
        trigger, tags, summary, metadata, format, base_checkpoint_id, delta_run, delta_depth,
        messages, state, tool_results, state_removed, tool_results_removed, messages_count,
        messages_digest, state_digests, tool_results_digests, next_node, size_bytes)
    SELECT p_thread_id, v_ns, v_next_seq, p_checkpoint_id, v_head_id, v_next_step,
           coalesce(p_trigger, 'manual'), coalesce(p_tags, '{}'), v_summary, v_metadata,
           'delta', v_head_id, v_head_run + 1, v_head_depth + 1, v_messages, s.changed, t.changed,
           s.removed, t.removed, v_head_count + v_msg_count,
           CASE WHEN v_msg_count = 0 THEN v_head_digest
                ELSE pgcheckpoint.message_chain_at(pgcheckpoint.message_chain(v_head_digest, v_msg_dig), v_msg_count) END,
           v_state_dig, v_tools_dig, coalesce(p_next_node, ''), v_size
    FROM pgcheckpoint.delta_keys(v_set_state, v_state_dig, v_head_state) s,
         pgcheckpoint.delta_keys(v_set_tools, v_tools_dig, v_head_tools) t
    RETURNING c.parent_checkpoint_id, c.step, c.created_at
      INTO parent_checkpoint_id, step, created_at;
    IF NOT v_thread_seen OR v_rewound_to IS NOT NULL THEN
        PERFORM pgcheckpoint.thread_after_write(p_thread_id, v_ns);
    END IF;
    thread_id := p_thread_id;
    namespace := v_ns;
    inserted := true;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_delete_before(p_thread_id text, p_namespace text, p_step bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_head_seq bigint;
BEGIN
    PERFORM pgcheckpoint.thread_lock(p_thread_id);
    v_head_seq := pgcheckpoint.thread_head_seq(p_thread_id, p_namespace);
    RETURN pgcheckpoint.checkpoint_delete_many(ARRAY(
        SELECT c.checkpoint_id FROM pgcheckpoint.tenant_checkpoints c
        WHERE c.thread_id = p_thread_id AND c.namespace = p_namespace
          AND c.step < p_step
          AND c.seq IS DISTINCT FROM v_head_seq));
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_delete_for_runs(p_run_ids text[])
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- checkpoint_delete_many takes the threads' locks, then reads the rows again.
    RETURN pgcheckpoint.checkpoint_delete_many(ARRAY(
        SELECT c.checkpoint_id FROM pgcheckpoint.tenant_checkpoints c, unnest(p_run_ids) r
        WHERE c.metadata @> jsonb_build_object('run_id', r)));
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_delete_many(p_checkpoint_ids uuid[])
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_threads text[];
    v_count   bigint;
BEGIN
    -- The lock of every thread touched (see thread_lock_many). A caller
    -- holding some already takes them again at no cost.
    v_threads := ARRAY(
        SELECT DISTINCT c.thread_id
        FROM unnest(p_checkpoint_ids) i
        CROSS JOIN LATERAL (
            SELECT c.thread_id FROM pgcheckpoint.tenant_checkpoints c WHERE c.checkpoint_id = i) c);
    PERFORM pgcheckpoint.thread_lock_many(v_threads);

    -- Read under the locks, so every write to these threads is either seen
    -- here or waits for this transaction.
    WITH doomed AS (
        SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id
        FROM (SELECT DISTINCT x AS id FROM unnest(p_checkpoint_ids) x) i
        CROSS JOIN LATERAL (
            SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id FROM pgcheckpoint.tenant_checkpoints c
            WHERE c.checkpoint_id = i.id) c
        WHERE c.thread_id = ANY (v_threads)
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

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_lineage(p_checkpoint_id uuid, p_max_depth integer DEFAULT NULL::integer)
 RETURNS TABLE(depth integer, thread_id text, namespace text, seq bigint, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint, created_at timestamp with time zone, trigger text, tags text[], summary text, metadata jsonb, next_node text, size_bytes bigint)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    WITH RECURSIVE walk AS (
        SELECT 0 AS depth, c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id,
               c.merge_parent_id, c.step, c.created_at, c.trigger, c.tags, c.summary, c.metadata,
               c.next_node, c.size_bytes
        FROM (SELECT x.thread_id, x.namespace, x.seq, x.checkpoint_id, x.parent_checkpoint_id, x.merge_parent_id,
                     x.step, x.created_at, x.trigger, x.tags, x.summary, x.metadata, x.next_node, x.size_bytes
              FROM pgcheckpoint.tenant_checkpoints x WHERE x.checkpoint_id = p_checkpoint_id LIMIT 1) c
        UNION ALL
        SELECT w.depth + 1, c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id,
               c.merge_parent_id, c.step, c.created_at, c.trigger, c.tags, c.summary, c.metadata,
               c.next_node, c.size_bytes
        FROM walk w
        JOIN LATERAL (SELECT x.thread_id, x.namespace, x.seq, x.checkpoint_id, x.parent_checkpoint_id,
                             x.merge_parent_id, x.step, x.created_at, x.trigger, x.tags, x.summary,
                             x.metadata, x.next_node, x.size_bytes
                      FROM pgcheckpoint.tenant_checkpoints x
                      WHERE x.checkpoint_id = w.parent_checkpoint_id LIMIT 1) c ON true
        WHERE p_max_depth IS NULL OR w.depth < p_max_depth
    )
    SELECT * FROM walk
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_materialize(p_checkpoint_id uuid)
 RETURNS TABLE(messages jsonb, state jsonb, tool_results jsonb)
 LANGUAGE plpgsql
 STABLE ROWS 1
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_format   text;
    v_messages jsonb;
    v_state    jsonb;
    v_tools    jsonb;
BEGIN
    SELECT c.format, c.messages, c.state, c.tool_results
      INTO v_format, v_messages, v_state, v_tools
    FROM pgcheckpoint.tenant_checkpoints c
    WHERE c.checkpoint_id = p_checkpoint_id
    LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF v_format = 'full' THEN
        RETURN QUERY SELECT v_messages, v_state, v_tools;
        RETURN;
    END IF;

    RETURN QUERY
    WITH chain AS MATERIALIZED (
        SELECT * FROM pgcheckpoint.delta_chain(p_checkpoint_id)
    )
    SELECT coalesce((SELECT jsonb_agg(e.value ORDER BY ch.depth DESC, e.ordinality)
                     FROM chain ch, jsonb_array_elements(ch.messages) WITH ORDINALITY e), '[]'),
           (SELECT pgcheckpoint.delta_merge(ch.state, ch.state_removed ORDER BY ch.depth DESC) FROM chain ch),
           (SELECT pgcheckpoint.delta_merge(ch.tool_results, ch.tool_results_removed ORDER BY ch.depth DESC) FROM chain ch)
    -- No chain rows (the row gone since read above): no row rather than
    -- empty content.
    WHERE EXISTS (SELECT FROM chain);
END;
$function$;

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

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_put(p_thread_id text, p_namespace text, p_checkpoint_id uuid, p_parent_checkpoint_id uuid, p_trigger text, p_tags text[], p_summary text, p_metadata jsonb, p_messages jsonb, p_state jsonb, p_tool_results jsonb, p_next_node text, p_size_bytes bigint, p_delta_run integer DEFAULT 50, p_message_digests bytea DEFAULT NULL::bytea, p_state_digests jsonb DEFAULT NULL::jsonb, p_tool_results_digests jsonb DEFAULT NULL::jsonb, OUT thread_id text, OUT namespace text, OUT checkpoint_id uuid, OUT parent_checkpoint_id uuid, OUT step bigint, OUT created_at timestamp with time zone, OUT inserted boolean)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    v_ns        text := coalesce(p_namespace, '');
    v_metadata  jsonb := coalesce(p_metadata, '{}');
    v_messages  jsonb := coalesce(p_messages, '[]');
    v_state     jsonb := coalesce(p_state, '{}');
    v_tools     jsonb := coalesce(p_tool_results, '{}');
    v_summary   text := coalesce(p_summary, '');
    v_msg_count integer;
    v_same      boolean;
    -- The head (see thread_head_for_write; scalars, not a record: a record variable
    -- costs each call about a fifth of the function's time).
    v_thread_seen   boolean;
    v_rewound_to    uuid;
    v_wanted        uuid;
    v_next_seq      bigint;
    v_parent_id     uuid;
    v_next_step     bigint;
    v_parent_run    integer;
    v_parent_depth  integer;
    v_parent_count  integer;
    v_parent_digest bytea;
    v_parent_state  jsonb;
    v_parent_tools  jsonb;
    -- Digests of the whole new content (none when p_delta_run = 1):
    -- v_msg_dig the message chain, v_msg_sum its last value.
    v_msg_dig   bytea;
    v_msg_sum   bytea;
    v_state_dig jsonb := p_state_digests;
    v_tools_dig jsonb := p_tool_results_digests;
BEGIN
    IF p_thread_id IS NULL OR length(p_thread_id) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'thread_id must be 1 to 255 characters' USING ERRCODE = 'PC003';
    END IF;
    IF p_checkpoint_id IS NULL THEN
        RAISE EXCEPTION 'checkpoint_id must not be null' USING ERRCODE = 'PC003';
    END IF;
    PERFORM pgcheckpoint.checkpoint_check(p_checkpoint_id, p_trigger);
    IF jsonb_typeof(v_messages) <> 'array' THEN
        RAISE EXCEPTION 'messages must be a JSON array' USING ERRCODE = 'PC003';
    END IF;
    IF jsonb_typeof(v_state) <> 'object' OR jsonb_typeof(v_tools) <> 'object' OR jsonb_typeof(v_metadata) <> 'object' THEN
        RAISE EXCEPTION 'state, tool_results and metadata must be JSON objects' USING ERRCODE = 'PC003';
    END IF;
    IF p_delta_run IS NULL OR p_delta_run < 1 THEN
        RAISE EXCEPTION 'delta_run must be 1 or more' USING ERRCODE = 'PC003';
    END IF;
    v_msg_count := jsonb_array_length(v_messages);
    IF octet_length(p_message_digests) <> 32 * v_msg_count THEN
        RAISE EXCEPTION 'message_digests must hold the message chain, 32 bytes per message (% messages, % bytes)',
            v_msg_count, octet_length(p_message_digests) USING ERRCODE = 'PC003';
    END IF;
    IF jsonb_typeof(p_state_digests) IS DISTINCT FROM 'object' AND p_state_digests IS NOT NULL
       OR jsonb_typeof(p_tool_results_digests) IS DISTINCT FROM 'object' AND p_tool_results_digests IS NOT NULL THEN
        RAISE EXCEPTION 'state_digests and tool_results_digests must be JSON objects' USING ERRCODE = 'PC003';
    END IF;
    IF v_summary = '' THEN
        v_summary := pgcheckpoint.checkpoint_default_summary(v_messages, v_state);
    END IF;

    PERFORM pgcheckpoint.thread_lock(p_thread_id);

    SELECT h.thread_seen, h.rewound_to, h.wanted_parent, h.next_seq, h.parent_checkpoint_id, h.next_step,
           h.parent_delta_run, h.parent_delta_depth, h.parent_messages_count, h.parent_messages_digest,
           h.parent_state_digests, h.parent_tool_results_digests
      INTO v_thread_seen, v_rewound_to, v_wanted, v_next_seq, v_parent_id, v_next_step,
           v_parent_run, v_parent_depth, v_parent_count, v_parent_digest, v_parent_state, v_parent_tools
    FROM pgcheckpoint.thread_head_for_write(p_thread_id, v_ns, p_checkpoint_id, p_parent_checkpoint_id) h;

    checkpoint_id := p_checkpoint_id;
    IF NOT FOUND THEN
        -- A retry of an existing checkpoint: the same content is a no-op.
        SELECT c.thread_id, c.namespace, c.parent_checkpoint_id, c.step, c.created_at,
               c.thread_id = p_thread_id AND c.namespace = v_ns
               AND m.messages = v_messages AND m.state = v_state AND m.tool_results = v_tools
               AND c.metadata = v_metadata AND c.next_node = coalesce(p_next_node, '')
          INTO thread_id, namespace, parent_checkpoint_id, step, created_at, v_same
        FROM pgcheckpoint.tenant_checkpoints c
        CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize(c.checkpoint_id) m
        WHERE c.checkpoint_id = p_checkpoint_id
        LIMIT 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'checkpoint % was deleted while this write was retried', p_checkpoint_id
                USING ERRCODE = 'PC001';
        END IF;
        IF NOT v_same THEN
            RAISE EXCEPTION 'checkpoint % already exists with other content', p_checkpoint_id
                USING ERRCODE = 'PC002',
                      HINT = 'Use a new checkpoint id for a new checkpoint; reuse an id only to retry the same write.';
        END IF;
        inserted := false;
        RETURN;
    END IF;
    IF v_wanted IS NOT NULL AND v_parent_id IS NULL THEN
        RAISE EXCEPTION 'parent checkpoint % not found in thread % namespace %',
            coalesce(p_parent_checkpoint_id::text, 'rewound-to'), p_thread_id, quote_literal(v_ns)
            USING ERRCODE = 'PC001';
    END IF;

    IF p_delta_run > 1 THEN
        v_msg_dig := coalesce(p_message_digests, pgcheckpoint.message_chain(NULL, pgcheckpoint.message_digests(v_messages)));
        v_msg_sum := pgcheckpoint.message_chain_at(v_msg_dig, v_msg_count);
        IF v_state_dig IS NULL OR v_tools_dig IS NULL THEN
            SELECT coalesce(v_state_dig, pgcheckpoint.key_digests(v_state)),
                   coalesce(v_tools_dig, pgcheckpoint.key_digests(v_tools))
              INTO v_state_dig, v_tools_dig;
        END IF;
    END IF;

    INSERT INTO pgcheckpoint.tenant_checkpoints AS c (
        thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step,
        trigger, tags, summary, metadata, format, base_checkpoint_id, delta_run, delta_depth,
        messages, state, tool_results, state_removed, tool_results_removed, messages_count,
        messages_digest, state_digests, tool_results_digests, next_node, size_bytes)
    SELECT p_thread_id, v_ns, v_next_seq, p_checkpoint_id, v_parent_id, v_next_step,
           coalesce(p_trigger, 'manual'), coalesce(p_tags, '{}'), v_summary, v_metadata,
           d.format, d.base_checkpoint_id, d.delta_run, d.delta_depth,
           d.messages, d.state, d.tool_results, d.state_removed, d.tool_results_removed, v_msg_count,
           v_msg_sum, v_state_dig, v_tools_dig, coalesce(p_next_node, ''), coalesce(p_size_bytes, 0)
    FROM pgcheckpoint.checkpoint_delta(v_messages, v_state, v_tools, v_msg_dig, v_state_dig, v_tools_dig,
                                       v_parent_id, v_parent_run, v_parent_depth, v_parent_count, v_parent_digest,
                                       v_parent_state, v_parent_tools, p_delta_run) d
    RETURNING c.parent_checkpoint_id, c.step, c.created_at
      INTO parent_checkpoint_id, step, created_at;

    IF NOT v_thread_seen OR v_rewound_to IS NOT NULL THEN
        PERFORM pgcheckpoint.thread_after_write(p_thread_id, v_ns);
    END IF;
    thread_id := p_thread_id;
    namespace := v_ns;
    inserted := true;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_rewind(p_checkpoint_id uuid, p_truncate boolean DEFAULT false)
 RETURNS TABLE(thread_id text, namespace text, checkpoint_id uuid, step bigint, head_step bigint, checkpoints bigint, truncated bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_thread    text;
    v_ns        text;
    v_step      bigint;
    v_head_seq  bigint;
    v_head_id   uuid;
    v_head_step bigint;
    v_count     bigint;
    v_truncated bigint := 0;
BEGIN
    SELECT c.thread_id, c.namespace INTO v_thread, v_ns
    FROM pgcheckpoint.tenant_checkpoints c WHERE c.checkpoint_id = p_checkpoint_id LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'checkpoint % not found', p_checkpoint_id USING ERRCODE = 'PC001';
    END IF;
    PERFORM pgcheckpoint.thread_lock(v_thread);
    -- Read again under the lock: it may have been deleted meanwhile.
    SELECT c.step INTO v_step
    FROM pgcheckpoint.tenant_checkpoints c WHERE c.checkpoint_id = p_checkpoint_id LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'checkpoint % not found', p_checkpoint_id USING ERRCODE = 'PC001';
    END IF;
    v_head_seq := pgcheckpoint.thread_head_seq(v_thread, v_ns);
    SELECT c.checkpoint_id, c.step INTO v_head_id, v_head_step
    FROM pgcheckpoint.tenant_checkpoints c
    WHERE c.thread_id = v_thread AND c.namespace = v_ns AND c.seq = v_head_seq;
    SELECT count(*) INTO v_count
    FROM pgcheckpoint.tenant_checkpoints c WHERE c.thread_id = v_thread AND c.namespace = v_ns;

    IF p_truncate AND v_head_id <> p_checkpoint_id THEN
        -- The head's line back to the target; delete it only if the target
        -- is on it, and never the target itself.
        -- Steps fall by one per link: the target is at most this deep.
        WITH line AS (
            SELECT l.checkpoint_id, l.depth, l.thread_id, l.namespace
            FROM pgcheckpoint.checkpoint_lineage(v_head_id, greatest(v_head_step - v_step, 0)::integer) l
        )
        SELECT pgcheckpoint.checkpoint_delete_many(array_agg(l.checkpoint_id)) INTO v_truncated
        FROM line l
        WHERE l.depth < (SELECT min(x.depth) FROM line x WHERE x.checkpoint_id = p_checkpoint_id)
          AND l.thread_id = v_thread AND l.namespace = v_ns;
        v_truncated := coalesce(v_truncated, 0);
    END IF;

    UPDATE pgcheckpoint.tenant_threads t SET rewound_to = p_checkpoint_id
    WHERE t.thread_id = v_thread AND t.namespace = v_ns;

    RETURN QUERY SELECT v_thread, v_ns, p_checkpoint_id, v_step, v_head_step, v_count, v_truncated;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.delta_chain(p_checkpoint_id uuid)
 RETURNS TABLE(depth integer, checkpoint_id uuid, format text, messages jsonb, state jsonb, tool_results jsonb, state_removed text[], tool_results_removed text[])
 LANGUAGE plpgsql
 STABLE PARALLEL SAFE ROWS 20
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE chain AS (
        SELECT 0 AS depth, c.checkpoint_id, c.thread_id, c.namespace, c.seq, c.base_checkpoint_id, c.format,
               c.messages, c.state, c.tool_results, c.state_removed, c.tool_results_removed
        FROM pgcheckpoint.tenant_checkpoints c
        WHERE c.checkpoint_id = p_checkpoint_id
        UNION ALL
        SELECT ch.depth + 1, b.checkpoint_id, b.thread_id, b.namespace, b.seq, b.base_checkpoint_id, b.format,
               b.messages, b.state, b.tool_results, b.state_removed, b.tool_results_removed
        FROM chain ch
        CROSS JOIN LATERAL (
            SELECT b.checkpoint_id, b.thread_id, b.namespace, b.seq, b.base_checkpoint_id, b.format,
                   b.messages, b.state, b.tool_results, b.state_removed, b.tool_results_removed
            FROM pgcheckpoint.tenant_checkpoints b
            WHERE b.checkpoint_id = ch.base_checkpoint_id
            LIMIT 1) b
        WHERE ch.format = 'delta' AND b.thread_id = ch.thread_id AND b.namespace = ch.namespace AND b.seq < ch.seq
    )
    SELECT ch.depth, ch.checkpoint_id, ch.format, ch.messages, ch.state, ch.tool_results,
           ch.state_removed, ch.tool_results_removed
    FROM chain ch
    WHERE (SELECT o.format FROM chain o ORDER BY o.depth DESC LIMIT 1) = 'full'
    ORDER BY ch.depth DESC;
    IF NOT FOUND AND EXISTS (SELECT FROM pgcheckpoint.tenant_checkpoints c WHERE c.checkpoint_id = p_checkpoint_id) THEN
        RAISE EXCEPTION 'checkpoint % cannot be rebuilt: its chain of deltas does not reach a full snapshot', p_checkpoint_id
            USING ERRCODE = 'PC004',
                  HINT = 'A delta names its base in base_checkpoint_id, an earlier checkpoint of its thread and namespace, '
                      || 'down to one whose format is ''full''. The chain breaks at a base that is missing or elsewhere, '
                      || 'or at a checkpoint whose format is neither ''full'' nor ''delta''.';
    END IF;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.pending_writes_json(p_thread_id text, p_namespace text, p_seq bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF NOT EXISTS (SELECT FROM pgcheckpoint.tenant_pending_writes w
                   WHERE w.thread_id = p_thread_id AND w.namespace = p_namespace AND w.checkpoint_seq = p_seq) THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT jsonb_agg(jsonb_build_object('task_id', w.task_id, 'idx', w.idx, 'channel', w.channel, 'value', w.value)
                             ORDER BY w.task_id, w.idx)
            FROM pgcheckpoint.tenant_pending_writes w
            WHERE w.thread_id = p_thread_id AND w.namespace = p_namespace AND w.checkpoint_seq = p_seq);
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.run_anchor(p_checkpoint_id uuid, p_delta_run integer)
 RETURNS TABLE(checkpoint_id uuid, delta_depth integer, messages_count integer, messages_digest bytea, state_digests jsonb, tool_results_digests jsonb)
 LANGUAGE plpgsql
 STABLE STRICT ROWS 1
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE run AS (
        SELECT c.*, c.thread_id AS start_thread, c.namespace AS start_namespace FROM (
            SELECT c.checkpoint_id, c.base_checkpoint_id, c.delta_run, c.delta_depth, c.messages_count,
                   c.messages_digest, c.state_digests, c.tool_results_digests, c.thread_id, c.namespace
            FROM pgcheckpoint.tenant_checkpoints c
            WHERE c.checkpoint_id = p_checkpoint_id
            LIMIT 1) c
        UNION ALL
        SELECT b.*, r.start_thread, r.start_namespace FROM run r
        CROSS JOIN LATERAL (
            SELECT b.checkpoint_id, b.base_checkpoint_id, b.delta_run, b.delta_depth, b.messages_count,
                   b.messages_digest, b.state_digests, b.tool_results_digests, b.thread_id, b.namespace
            FROM pgcheckpoint.tenant_checkpoints b
            WHERE b.checkpoint_id = r.base_checkpoint_id
            LIMIT 1) b
        WHERE r.delta_run > 0
    )
    SELECT r.checkpoint_id, r.delta_depth, r.messages_count, r.messages_digest, r.state_digests, r.tool_results_digests
    FROM run r
    WHERE r.delta_run = 0 AND r.thread_id = r.start_thread AND r.namespace = r.start_namespace
      AND r.delta_depth + 1 < p_delta_run;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_after_write(p_thread_id text, p_namespace text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    INSERT INTO pgcheckpoint.tenant_threads AS t (thread_id, namespace) VALUES (p_thread_id, p_namespace)
    ON CONFLICT (tenant_id, thread_id, namespace) DO UPDATE SET rewound_to = NULL
    WHERE t.rewound_to IS NOT NULL;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_branch(p_source_id uuid, p_new_thread_id text, p_branch_name text, p_checkpoint_id uuid)
 RETURNS TABLE(thread_id text, checkpoint_id uuid, step bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_src pgcheckpoint.tenant_checkpoints%ROWTYPE;
BEGIN
    IF p_new_thread_id IS NULL OR length(p_new_thread_id) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'thread_id must be 1 to 255 characters' USING ERRCODE = 'PC003';
    END IF;
    IF p_checkpoint_id IS NULL THEN
        RAISE EXCEPTION 'checkpoint_id must not be null' USING ERRCODE = 'PC003';
    END IF;
    PERFORM pgcheckpoint.checkpoint_check(p_checkpoint_id, NULL);
    PERFORM pgcheckpoint.thread_lock(p_new_thread_id);
    SELECT * INTO v_src FROM pgcheckpoint.tenant_checkpoints c WHERE c.checkpoint_id = p_source_id LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source checkpoint % not found', p_source_id USING ERRCODE = 'PC001';
    END IF;
    IF EXISTS (SELECT 1 FROM pgcheckpoint.tenant_threads t WHERE t.thread_id = p_new_thread_id) THEN
        RAISE EXCEPTION 'thread % already exists', p_new_thread_id USING ERRCODE = 'PC003';
    END IF;
    IF EXISTS (SELECT 1 FROM pgcheckpoint.tenant_checkpoints c WHERE c.checkpoint_id = p_checkpoint_id) THEN
        RAISE EXCEPTION 'checkpoint % already exists', p_checkpoint_id USING ERRCODE = 'PC002';
    END IF;
    INSERT INTO pgcheckpoint.tenant_threads (thread_id, namespace, branch_name, branched_from, branched_from_thread)
    VALUES (p_new_thread_id, v_src.namespace, p_branch_name, p_source_id, v_src.thread_id);
    -- The first checkpoint of a branch is stored whole: deltas never cross
    -- threads. Its digests are the source's, as its content is.
    INSERT INTO pgcheckpoint.tenant_checkpoints (
        thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step, trigger, tags,
        summary, metadata, format, messages, state, tool_results, messages_count, messages_digest,
        state_digests, tool_results_digests, next_node, size_bytes)
    SELECT p_new_thread_id, v_src.namespace, 1, p_checkpoint_id, p_source_id, v_src.step + 1, 'manual',
           ARRAY['branch', p_branch_name], format('Branch %s from %s', quote_literal(p_branch_name), p_source_id),
           v_src.metadata, 'full', m.messages, m.state, m.tool_results, v_src.messages_count,
           v_src.messages_digest, v_src.state_digests, v_src.tool_results_digests, v_src.next_node,
           v_src.size_bytes
    FROM pgcheckpoint.checkpoint_materialize(p_source_id) m;
    IF NOT FOUND THEN
        -- Deleted since it was read (the source's thread lock is not held).
        RAISE EXCEPTION 'source checkpoint % not found', p_source_id USING ERRCODE = 'PC001';
    END IF;
    RETURN QUERY SELECT p_new_thread_id, p_checkpoint_id, v_src.step + 1;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_copy(p_source_thread_id text, p_target_thread_id text)
 RETURNS TABLE(old_checkpoint_id uuid, new_checkpoint_id uuid)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_target_thread_id IS NULL OR length(p_target_thread_id) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'thread_id must be 1 to 255 characters' USING ERRCODE = 'PC003';
    END IF;
    IF p_source_thread_id = p_target_thread_id THEN
        RAISE EXCEPTION 'cannot copy thread % onto itself', p_source_thread_id USING ERRCODE = 'PC003';
    END IF;
    -- Both locks, in a fixed order, so two crossed copies cannot deadlock.
    PERFORM pgcheckpoint.thread_lock_many(ARRAY[p_source_thread_id, p_target_thread_id]);
    IF NOT EXISTS (SELECT 1 FROM pgcheckpoint.tenant_threads t WHERE t.thread_id = p_source_thread_id) THEN
        RAISE EXCEPTION 'thread % not found', p_source_thread_id USING ERRCODE = 'PC001';
    END IF;
    IF EXISTS (SELECT 1 FROM pgcheckpoint.tenant_threads t WHERE t.thread_id = p_target_thread_id) THEN
        RAISE EXCEPTION 'thread % already exists', p_target_thread_id USING ERRCODE = 'PC003';
    END IF;

    -- ids is materialized once (uuid_v7 is volatile), so every insert below
    -- sees the same new id for a checkpoint. Links to checkpoints outside
    -- the thread (a branch's source) are kept; deltas are copied as deltas,
    -- their bases being in the thread too. The inserts run in one statement,
    -- and the foreign keys are checked at its end.
    RETURN QUERY
    WITH ids AS MATERIALIZED (
        SELECT s.checkpoint_id AS old_id, pgcheckpoint.uuid_v7() AS new_id, s.namespace, s.seq
        FROM (SELECT c.checkpoint_id, c.namespace, c.seq
              FROM pgcheckpoint.tenant_checkpoints c
              WHERE c.thread_id = p_source_thread_id
              ORDER BY c.namespace, c.seq) s
    ), copied_threads AS (
        INSERT INTO pgcheckpoint.tenant_threads (thread_id, namespace, rewound_to, metadata, created_at,
                                          branch_name, branched_from, branched_from_thread)
        SELECT p_target_thread_id, t.namespace, m.new_id, t.metadata, t.created_at,
               t.branch_name, t.branched_from, t.branched_from_thread
        FROM pgcheckpoint.tenant_threads t
        LEFT JOIN ids m ON m.old_id = t.rewound_to
        WHERE t.thread_id = p_source_thread_id
    ), copied_checkpoints AS (
        INSERT INTO pgcheckpoint.tenant_checkpoints (
            thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id, step,
            created_at, trigger, tags, summary, metadata, format, base_checkpoint_id, delta_run, delta_depth,
            messages, state, tool_results, state_removed, tool_results_removed, messages_count, messages_digest,
            state_digests, tool_results_digests, next_node, size_bytes)
        SELECT p_target_thread_id, c.namespace, c.seq, m.new_id,
               coalesce(p.new_id, c.parent_checkpoint_id), coalesce(mp.new_id, c.merge_parent_id), c.step,
               c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.format, b.new_id, c.delta_run,
               c.delta_depth, c.messages,
               c.state, c.tool_results, c.state_removed, c.tool_results_removed, c.messages_count,
               c.messages_digest, c.state_digests, c.tool_results_digests, c.next_node, c.size_bytes
        FROM pgcheckpoint.tenant_checkpoints c
        JOIN ids m ON m.old_id = c.checkpoint_id
        LEFT JOIN ids p ON p.old_id = c.parent_checkpoint_id
        LEFT JOIN ids mp ON mp.old_id = c.merge_parent_id
        LEFT JOIN ids b ON b.old_id = c.base_checkpoint_id
        WHERE c.thread_id = p_source_thread_id
    ), copied_writes AS (
        INSERT INTO pgcheckpoint.tenant_pending_writes (thread_id, namespace, checkpoint_seq, checkpoint_id, task_id,
                                                 idx, channel, value, created_at)
        SELECT p_target_thread_id, w.namespace, w.checkpoint_seq, m.new_id, w.task_id, w.idx, w.channel,
               w.value, w.created_at
        FROM pgcheckpoint.tenant_pending_writes w
        JOIN ids m ON m.old_id = w.checkpoint_id
        WHERE w.thread_id = p_source_thread_id
    )
    SELECT ids.old_id, ids.new_id FROM ids ORDER BY ids.namespace, ids.seq;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_delete(p_thread_id text)
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_count bigint;
BEGIN
    PERFORM pgcheckpoint.thread_lock(p_thread_id);
    -- Pending writes go with their checkpoints (ON DELETE CASCADE).
    DELETE FROM pgcheckpoint.tenant_checkpoints c WHERE c.thread_id = p_thread_id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    DELETE FROM pgcheckpoint.tenant_threads t WHERE t.thread_id = p_thread_id;
    -- The lock's row too: this transaction holds it until it ends, and the
    -- thread's next writer makes a new one.
    DELETE FROM pgcheckpoint.tenant_thread_locks l WHERE l.thread_id = p_thread_id;
    RETURN v_count;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_expire(p_thread_id text)
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_action text;
    v_n      bigint;
BEGIN
    PERFORM pgcheckpoint.thread_lock(p_thread_id);
    SELECT t.expire_action INTO v_action
    FROM pgcheckpoint.tenant_threads t
    WHERE t.thread_id = p_thread_id AND t.expires_at <= now()
    ORDER BY t.expires_at
    LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF v_action = 'delete' THEN
        RETURN pgcheckpoint.thread_delete(p_thread_id);
    END IF;
    v_n := pgcheckpoint.thread_prune_many(ARRAY[p_thread_id], true);
    UPDATE pgcheckpoint.tenant_threads t SET expires_at = NULL WHERE t.thread_id = p_thread_id;
    RETURN v_n;
END;
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

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_gc_batch(p_policy text, p_n integer, p_age interval, p_after_thread_id text, p_batch_size integer)
 RETURNS TABLE(last_thread_id text, threads integer, expired integer, failed integer, deleted bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_ids text[];
BEGIN
    PERFORM pgcheckpoint.retention_policy_check(p_policy, p_n, p_age);
    IF p_batch_size IS NULL OR p_batch_size < 1 THEN
        RAISE EXCEPTION 'batch size must be 1 or more' USING ERRCODE = 'PC003';
    END IF;
    v_ids := ARRAY(
        SELECT DISTINCT t.thread_id FROM pgcheckpoint.tenant_threads t
        WHERE t.thread_id > coalesce(p_after_thread_id, '')
        ORDER BY 1
        LIMIT p_batch_size);
    RETURN QUERY SELECT v_ids[cardinality(v_ids)], g.threads, g.expired, g.failed, g.deleted
    FROM pgcheckpoint.thread_gc_many(v_ids, p_policy, p_n, p_age) g;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_gc_batch_oldest(p_policy text, p_n integer, p_age interval, p_batch_size integer, p_swept_before timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_ids text[];
BEGIN
    v_ids := ARRAY(
        SELECT t.thread_id FROM pgcheckpoint.tenant_threads t
        WHERE t.swept_at IS NULL OR t.swept_at < p_swept_before
        ORDER BY t.swept_at NULLS FIRST, t.thread_id
        LIMIT p_batch_size);
    IF cardinality(v_ids) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM pgcheckpoint.thread_gc_many(v_ids, p_policy, p_n, p_age);
    RETURN cardinality(v_ids);
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

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_head(p_thread_id text, p_namespace text DEFAULT ''::text)
 RETURNS uuid
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT c.checkpoint_id
    FROM pgcheckpoint.tenant_checkpoints c
    WHERE c.thread_id = p_thread_id AND c.namespace = p_namespace
      AND c.seq = pgcheckpoint.thread_head_seq(p_thread_id, p_namespace)
$function$;

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
    LEFT JOIN pgcheckpoint.tenant_threads t
           ON t.thread_id OPERATOR(pg_catalog.=) p_thread_id AND t.namespace OPERATOR(pg_catalog.=) p_namespace
    -- The newest checkpoint: the next seq, and the parent unless another
    -- is wanted.
    LEFT JOIN LATERAL (
        SELECT c.checkpoint_id, c.seq
        FROM pgcheckpoint.tenant_checkpoints c
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
              FROM pgcheckpoint.tenant_checkpoints c
              WHERE c.checkpoint_id OPERATOR(pg_catalog.=) want.id
              LIMIT 1) c
        WHERE c.thread_id OPERATOR(pg_catalog.=) p_thread_id AND c.namespace OPERATOR(pg_catalog.=) p_namespace) p ON true
    WHERE NOT EXISTS (SELECT FROM pgcheckpoint.tenant_checkpoints e WHERE e.checkpoint_id OPERATOR(pg_catalog.=) p_checkpoint_id)
$function$;

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
    UPDATE pgcheckpoint.tenant_thread_locks l SET taken = l.taken + 1 WHERE l.thread_id = p_thread_id;
    IF NOT FOUND AND p_thread_id IS NOT NULL THEN
        IF pgcheckpoint.current_tenant() IS NULL THEN
            RAISE EXCEPTION 'no tenant is set: set pgcheckpoint.tenant in the transaction (SET LOCAL pgcheckpoint.tenant = ''...'')'
                USING ERRCODE = '42501';
        END IF;
        -- The thread's first lock (or the first since it was deleted): two
        -- first writers meet on the key, the second waits for the first.
        INSERT INTO pgcheckpoint.tenant_thread_locks AS l (thread_id) VALUES (p_thread_id)
        ON CONFLICT (tenant_id, thread_id) DO UPDATE SET taken = l.taken + 1;
    END IF;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_merge(p_branch_thread_id text, p_into_thread_id text, p_checkpoint_id uuid, p_namespace text DEFAULT ''::text)
 RETURNS TABLE(thread_id text, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_ns  text := coalesce(p_namespace, '');
    v_src pgcheckpoint.tenant_checkpoints%ROWTYPE;
    v_put record;
BEGIN
    SELECT * INTO v_src FROM pgcheckpoint.tenant_checkpoints c
    WHERE c.thread_id = p_branch_thread_id AND c.namespace = v_ns
      AND c.seq = pgcheckpoint.thread_head_seq(p_branch_thread_id, v_ns);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'branch thread % has no checkpoint in namespace %', p_branch_thread_id, quote_literal(v_ns)
            USING ERRCODE = 'PC001';
    END IF;
    IF p_branch_thread_id = p_into_thread_id THEN
        RAISE EXCEPTION 'cannot merge thread % into itself', p_into_thread_id USING ERRCODE = 'PC003';
    END IF;
    SELECT m.* INTO v_src.messages, v_src.state, v_src.tool_results
    FROM pgcheckpoint.checkpoint_materialize(v_src.checkpoint_id) m;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'branch thread % has no checkpoint in namespace %', p_branch_thread_id, quote_literal(v_ns)
            USING ERRCODE = 'PC001';
    END IF;
    SELECT * INTO v_put FROM pgcheckpoint.checkpoint_put(
        p_into_thread_id, v_ns, p_checkpoint_id, NULL, 'manual', ARRAY['merge'],
        format('Merge of %s', p_branch_thread_id), v_src.metadata, v_src.messages, v_src.state,
        v_src.tool_results, v_src.next_node, v_src.size_bytes);
    -- The merge's parent is the target's head, found under the target's
    -- lock by checkpoint_put: none means there is nothing to merge into,
    -- and the checkpoint just written (with the thread row it made) goes
    -- with this error.
    IF v_put.parent_checkpoint_id IS NULL THEN
        RAISE EXCEPTION 'thread % has no checkpoint in namespace % to merge into', p_into_thread_id, quote_literal(v_ns)
            USING ERRCODE = 'PC001';
    END IF;
    IF v_put.inserted THEN
        UPDATE pgcheckpoint.tenant_checkpoints c SET merge_parent_id = v_src.checkpoint_id
        WHERE c.checkpoint_id = p_checkpoint_id;
    END IF;
    RETURN QUERY SELECT p_into_thread_id, p_checkpoint_id, v_put.parent_checkpoint_id, v_src.checkpoint_id, v_put.step;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_prune_many(p_thread_ids text[], p_keep_latest boolean)
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_thread text;
    v_n      bigint;
    v_count  bigint := 0;
BEGIN
    -- Every lock first (see thread_lock_many).
    PERFORM pgcheckpoint.thread_lock_many(p_thread_ids);
    FOR v_thread IN SELECT DISTINCT x FROM unnest(p_thread_ids) x ORDER BY 1 LOOP
        IF p_keep_latest THEN
            WITH heads AS MATERIALIZED (
                SELECT t.namespace, pgcheckpoint.thread_head_seq(t.thread_id, t.namespace) AS seq
                FROM pgcheckpoint.tenant_threads t
                WHERE t.thread_id = v_thread
            )
            SELECT pgcheckpoint.checkpoint_delete_many(ARRAY(
                SELECT c.checkpoint_id
                FROM pgcheckpoint.tenant_checkpoints c
                JOIN heads h ON h.namespace = c.namespace
                WHERE c.thread_id = v_thread AND c.seq IS DISTINCT FROM h.seq))
              INTO v_n;
        ELSE
            v_n := pgcheckpoint.thread_delete(v_thread);
        END IF;
        v_count := v_count + v_n;
    END LOOP;
    RETURN v_count;
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_tree(p_thread_id text)
 RETURNS TABLE(thread_id text, namespace text, seq bigint, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint, created_at timestamp with time zone, trigger text, tags text[], summary text, is_head boolean)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    WITH RECURSIVE family AS (
        SELECT p_thread_id AS thread_id
        UNION
        SELECT t.thread_id
        FROM pgcheckpoint.tenant_threads t
        JOIN family f ON t.branched_from_thread = f.thread_id
    ), heads AS MATERIALIZED ( -- once per thread, not once per checkpoint
        SELECT t.thread_id, t.namespace, pgcheckpoint.thread_head_seq(t.thread_id, t.namespace) AS head_seq
        FROM pgcheckpoint.tenant_threads t
        JOIN family f ON f.thread_id = t.thread_id
    )
    SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id,
           c.step, c.created_at, c.trigger, c.tags, c.summary, c.seq = h.head_seq AS is_head
    FROM heads h
    JOIN pgcheckpoint.tenant_checkpoints c ON c.thread_id = h.thread_id AND c.namespace = h.namespace
    ORDER BY c.thread_id, c.namespace, c.seq
$function$;
