-- One naming rule for the SQL API, and the thread lock written once.
--
-- Routines are named <entity>_<verb>[_<qualifier>], entity first (thread_,
-- checkpoint_, pending_write_ or pending_writes_; retention_policy_ for
-- the policy check); one that takes a set of its entity's keys (an array)
-- ends in _many. A helper that computes a value is named by that value,
-- noun first: message_digests, message_chain_at, json_text, unescaped_text.
-- The README holds the rule and the table of old and new names.
--
-- A rename keeps the routine's oid, so its privileges and comment stay.
-- The routines whose definition named an old routine are redefined with
-- the new name, and so are those that spelled the thread lock's key: they
-- call thread_lock (one thread) or thread_lock_many (several, in lock key
-- order). thread_lock has no SET clause so that Postgres inlines it into
-- its caller's plan; its names are schema-qualified instead.
--
-- The old names the README documented for psql stay one release as
-- deprecated aliases calling the new ones, with the same privileges.
--
-- Generated from the catalog of a database at version 11 by a one-off
-- command, internal/cmd/renamemigration, removed once this migration was
-- final (it is in the history of the commit that added this file).

-- The renames.

ALTER FUNCTION pgcheckpoint.branch(uuid,text,text,uuid) RENAME TO thread_branch;

ALTER FUNCTION pgcheckpoint.copy_thread(text,text) RENAME TO thread_copy;

ALTER FUNCTION pgcheckpoint.delete_checkpoints(uuid[]) RENAME TO checkpoint_delete_many;

ALTER FUNCTION pgcheckpoint.delete_for_runs(text[]) RENAME TO checkpoint_delete_for_runs;

ALTER FUNCTION pgcheckpoint.expire_thread(text) RENAME TO thread_expire;

ALTER FUNCTION pgcheckpoint.gc_batch(text,integer,interval,text,integer) RENAME TO thread_gc_batch;

ALTER FUNCTION pgcheckpoint.gc_check_policy(text,integer,interval) RENAME TO retention_policy_check;

ALTER PROCEDURE pgcheckpoint.gc_sweep(text,integer,interval,integer,interval,interval) RENAME TO thread_gc_sweep;

ALTER FUNCTION pgcheckpoint.gc_thread(text,text,integer,interval) RENAME TO thread_gc;

ALTER FUNCTION pgcheckpoint.gc_threads(text[],text,integer,interval) RENAME TO thread_gc_many;

ALTER FUNCTION pgcheckpoint.head(text,text) RENAME TO thread_head;

ALTER FUNCTION pgcheckpoint.head_seq(text,text) RENAME TO thread_head_seq;

ALTER FUNCTION pgcheckpoint.lineage(uuid,integer) RENAME TO checkpoint_lineage;

ALTER FUNCTION pgcheckpoint.list_digest_at(bytea,integer) RENAME TO message_chain_at;

ALTER FUNCTION pgcheckpoint.lock_checkpoint_id(uuid) RENAME TO checkpoint_id_lock;

ALTER FUNCTION pgcheckpoint.lock_thread(text) RENAME TO thread_lock;

ALTER FUNCTION pgcheckpoint.materialize(uuid) RENAME TO checkpoint_materialize;

ALTER FUNCTION pgcheckpoint.merge(text,text,uuid,text) RENAME TO thread_merge;

ALTER FUNCTION pgcheckpoint.prune(text[],boolean) RENAME TO thread_prune_many;

ALTER FUNCTION pgcheckpoint.rewind(uuid,boolean) RENAME TO checkpoint_rewind;

ALTER FUNCTION pgcheckpoint.tree(text) RENAME TO thread_tree;

ALTER FUNCTION pgcheckpoint.unescape_text(text,text) RENAME TO unescaped_text;


-- The thread lock, for a set of threads.

CREATE FUNCTION pgcheckpoint.thread_lock_many(p_thread_ids text[])
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pgcheckpoint.thread_lock(t.id)
    FROM (SELECT DISTINCT x AS id FROM unnest(p_thread_ids) x) t
    ORDER BY hashtext(t.id)
$$;

COMMENT ON FUNCTION pgcheckpoint.thread_lock_many IS
    'Takes the lock of each thread in the array (see thread_lock) until the end of the transaction, in lock key order: every routine that takes several takes them in this one order, so that none deadlocks with another. Locks already held are taken again at no cost; NULL ids are skipped.';

REVOKE EXECUTE ON FUNCTION pgcheckpoint.thread_lock_many(text[]) FROM PUBLIC;


-- The renamed routines under their new names (sqlc does not follow a rename),
-- and those that named a renamed routine or spelled the lock key.

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_branch(p_source_id uuid, p_new_thread_id text, p_branch_name text, p_checkpoint_id uuid)
 RETURNS TABLE(thread_id text, checkpoint_id uuid, step bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_src pgcheckpoint.checkpoints%ROWTYPE;
BEGIN
    IF p_new_thread_id IS NULL OR length(p_new_thread_id) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'thread_id must be 1 to 255 characters' USING ERRCODE = 'PC003';
    END IF;
    PERFORM pgcheckpoint.thread_lock(p_new_thread_id);
    PERFORM pgcheckpoint.checkpoint_id_lock(p_checkpoint_id);
    LOCK TABLE pgcheckpoint.checkpoints IN ROW EXCLUSIVE MODE; -- see checkpoint_id_lock
    SELECT * INTO v_src FROM pgcheckpoint.checkpoints c WHERE c.checkpoint_id = p_source_id LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source checkpoint % not found', p_source_id USING ERRCODE = 'PC001';
    END IF;
    IF EXISTS (SELECT 1 FROM pgcheckpoint.threads t WHERE t.thread_id = p_new_thread_id) THEN
        RAISE EXCEPTION 'thread % already exists', p_new_thread_id USING ERRCODE = 'PC003';
    END IF;
    IF EXISTS (SELECT 1 FROM pgcheckpoint.checkpoints c WHERE c.checkpoint_id = p_checkpoint_id) THEN
        RAISE EXCEPTION 'checkpoint % already exists', p_checkpoint_id USING ERRCODE = 'PC002';
    END IF;
    INSERT INTO pgcheckpoint.threads (thread_id, namespace, branch_name, branched_from, branched_from_thread)
    VALUES (p_new_thread_id, v_src.namespace, p_branch_name, p_source_id, v_src.thread_id);
    -- The first checkpoint of a branch is stored whole: deltas never cross
    -- threads. Its digests are the source's, as its content is.
    INSERT INTO pgcheckpoint.checkpoints (
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

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_append(p_thread_id text, p_namespace text, p_checkpoint_id uuid, p_on_head uuid, p_trigger text, p_tags text[], p_summary text, p_metadata jsonb, p_messages jsonb, p_set_state jsonb, p_set_tool_results jsonb, p_remove_state text[], p_remove_tool_results text[], p_next_node text, p_size_bytes bigint, p_delta_run integer DEFAULT 50, p_message_digests bytea DEFAULT NULL::bytea, p_set_state_digests jsonb DEFAULT NULL::jsonb, p_set_tool_results_digests jsonb DEFAULT NULL::jsonb, OUT thread_id text, OUT namespace text, OUT checkpoint_id uuid, OUT parent_checkpoint_id uuid, OUT step bigint, OUT created_at timestamp with time zone, OUT inserted boolean)
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
    v_put record;
BEGIN
    IF p_thread_id IS NULL OR length(p_thread_id) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'thread_id must be 1 to 255 characters' USING ERRCODE = 'PC003';
    END IF;
    IF p_checkpoint_id IS NULL THEN
        RAISE EXCEPTION 'checkpoint_id must not be null' USING ERRCODE = 'PC003';
    END IF;
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
    PERFORM pgcheckpoint.checkpoint_id_lock(p_checkpoint_id);
    LOCK TABLE pgcheckpoint.checkpoints IN ROW EXCLUSIVE MODE; -- see checkpoint_id_lock

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
        FROM pgcheckpoint.checkpoints c
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
            (m.tool_results - v_rm_tools) || v_set_tools, p_next_node, p_size_bytes, p_delta_run) r;
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
        -- The default summary needs the last message and the number of
        -- state keys, which the new state digests have.
        v_summary := pgcheckpoint.checkpoint_default_summary(
            CASE WHEN v_msg_count > 0 THEN v_messages
                 ELSE (SELECT m.messages FROM pgcheckpoint.checkpoint_materialize(v_head_id) m) END,
            v_state_dig);
    END IF;
    INSERT INTO pgcheckpoint.checkpoints AS c (
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
           v_state_dig, v_tools_dig, coalesce(p_next_node, ''), coalesce(p_size_bytes, 0)
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
        SELECT c.checkpoint_id FROM pgcheckpoint.checkpoints c
        WHERE c.thread_id = p_thread_id AND c.namespace = p_namespace
          AND c.step < p_step
          AND c.seq IS DISTINCT FROM v_head_seq));
END;
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_delta(p_messages jsonb, p_state jsonb, p_tool_results jsonb, p_message_chain bytea, p_state_digests jsonb, p_tool_results_digests jsonb, p_parent_checkpoint_id uuid, p_parent_delta_run integer, p_parent_delta_depth integer, p_parent_messages_count integer, p_parent_messages_digest bytea, p_parent_state_digests jsonb, p_parent_tool_results_digests jsonb, p_delta_run integer)
 RETURNS TABLE(format text, base_checkpoint_id uuid, delta_run integer, delta_depth integer, messages jsonb, state jsonb, tool_results jsonb, state_removed text[], tool_results_removed text[])
 LANGUAGE sql
 STABLE
AS $function$
    SELECT CASE WHEN d.delta THEN 'delta' ELSE 'full' END,
           CASE WHEN d.delta THEN b.checkpoint_id END,
           CASE WHEN d.delta THEN b.run ELSE 0 END,
           CASE WHEN d.delta THEN b.delta_depth OPERATOR(pg_catalog.+) 1 ELSE 0 END,
           CASE WHEN d.delta THEN x.messages ELSE p_messages END,
           CASE WHEN d.delta THEN x.state ELSE p_state END,
           CASE WHEN d.delta THEN x.tool_results ELSE p_tool_results END,
           CASE WHEN d.delta THEN x.state_removed ELSE '{}'::pg_catalog.text[] END,
           CASE WHEN d.delta THEN x.tool_results_removed ELSE '{}'::pg_catalog.text[] END
    FROM (
        -- The base: the parent while its run may grow, else the anchor its
        -- run started from (none when the anchors are as deep as allowed).
        SELECT CASE WHEN g.grows THEN p_parent_checkpoint_id ELSE a.checkpoint_id END AS checkpoint_id,
               CASE WHEN g.grows THEN p_parent_delta_run OPERATOR(pg_catalog.+) 1 ELSE 0 END AS run,
               CASE WHEN g.grows THEN p_parent_delta_depth ELSE a.delta_depth END AS delta_depth,
               CASE WHEN g.grows THEN p_parent_messages_count ELSE a.messages_count END AS messages_count,
               CASE WHEN g.grows THEN p_parent_messages_digest ELSE a.messages_digest END AS messages_digest,
               CASE WHEN g.grows THEN p_parent_state_digests ELSE a.state_digests END AS state_digests,
               CASE WHEN g.grows THEN p_parent_tool_results_digests ELSE a.tool_results_digests END AS tool_results_digests
        FROM (SELECT coalesce(pgcheckpoint.delta_run_continues(p_parent_delta_run, p_delta_run), false) AS grows) g
        LEFT JOIN LATERAL (
            SELECT a.* FROM pgcheckpoint.run_anchor(p_parent_checkpoint_id, p_delta_run) a
            WHERE NOT g.grows AND p_delta_run OPERATOR(pg_catalog.>) 1) a ON true
        OFFSET 0) b
    -- A delta when the base's messages are a prefix of these (by the
    -- chained list digest), both have key digests, and the delta is
    -- smaller than the whole. OFFSET 0 keeps each part computed once.
    CROSS JOIN LATERAL (
        SELECT b.checkpoint_id IS NOT NULL
               AND p_message_chain IS NOT NULL AND p_state_digests IS NOT NULL AND p_tool_results_digests IS NOT NULL
               AND b.state_digests IS NOT NULL AND b.tool_results_digests IS NOT NULL
               AND b.messages_count OPERATOR(pg_catalog.<=) pg_catalog.jsonb_array_length(p_messages)
               AND pgcheckpoint.message_chain_at(p_message_chain, b.messages_count) OPERATOR(pg_catalog.=) b.messages_digest
               AS prefix
        OFFSET 0) f
    LEFT JOIN LATERAL (
        SELECT CASE WHEN b.messages_count OPERATOR(pg_catalog.<) pg_catalog.jsonb_array_length(p_messages)
                    THEN pg_catalog.jsonb_path_query_array(p_messages, '$[$n to last]',
                                                           pg_catalog.jsonb_build_object('n', b.messages_count))
                    ELSE '[]'::pg_catalog.jsonb
               END AS messages,
               s.changed AS state, s.removed AS state_removed,
               t.changed AS tool_results, t.removed AS tool_results_removed
        FROM pgcheckpoint.delta_keys(p_state, p_state_digests, b.state_digests) s,
             pgcheckpoint.delta_keys(p_tool_results, p_tool_results_digests, b.tool_results_digests) t
        WHERE f.prefix
        OFFSET 0) x ON true
    CROSS JOIN LATERAL (
        SELECT coalesce(f.prefix, false)
               AND (pg_catalog.pg_column_size(x.messages) OPERATOR(pg_catalog.+) pg_catalog.pg_column_size(x.state)
                    OPERATOR(pg_catalog.+) pg_catalog.pg_column_size(x.tool_results))
                 OPERATOR(pg_catalog.<) (pg_catalog.pg_column_size(p_messages) OPERATOR(pg_catalog.+) pg_catalog.pg_column_size(p_state)
                    OPERATOR(pg_catalog.+) pg_catalog.pg_column_size(p_tool_results))
               AS delta
        OFFSET 0) d
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
    -- Then the id's, so that thread_head_for_write sees any other write of this id,
    -- on any thread (ids are unique in the whole table); and the table's
    -- ROW EXCLUSIVE lock before it looks (see checkpoint_id_lock).
    PERFORM pgcheckpoint.checkpoint_id_lock(p_checkpoint_id);
    LOCK TABLE pgcheckpoint.checkpoints IN ROW EXCLUSIVE MODE;

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
        FROM pgcheckpoint.checkpoints c
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

    INSERT INTO pgcheckpoint.checkpoints AS c (
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
    IF NOT EXISTS (SELECT 1 FROM pgcheckpoint.threads t WHERE t.thread_id = p_source_thread_id) THEN
        RAISE EXCEPTION 'thread % not found', p_source_thread_id USING ERRCODE = 'PC001';
    END IF;
    IF EXISTS (SELECT 1 FROM pgcheckpoint.threads t WHERE t.thread_id = p_target_thread_id) THEN
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
              FROM pgcheckpoint.checkpoints c
              WHERE c.thread_id = p_source_thread_id
              ORDER BY c.namespace, c.seq) s
    ), copied_threads AS (
        INSERT INTO pgcheckpoint.threads (thread_id, namespace, rewound_to, metadata, created_at,
                                          branch_name, branched_from, branched_from_thread)
        SELECT p_target_thread_id, t.namespace, m.new_id, t.metadata, t.created_at,
               t.branch_name, t.branched_from, t.branched_from_thread
        FROM pgcheckpoint.threads t
        LEFT JOIN ids m ON m.old_id = t.rewound_to
        WHERE t.thread_id = p_source_thread_id
    ), copied_checkpoints AS (
        INSERT INTO pgcheckpoint.checkpoints (
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
        FROM pgcheckpoint.checkpoints c
        JOIN ids m ON m.old_id = c.checkpoint_id
        LEFT JOIN ids p ON p.old_id = c.parent_checkpoint_id
        LEFT JOIN ids mp ON mp.old_id = c.merge_parent_id
        LEFT JOIN ids b ON b.old_id = c.base_checkpoint_id
        WHERE c.thread_id = p_source_thread_id
    ), copied_writes AS (
        INSERT INTO pgcheckpoint.pending_writes (thread_id, namespace, checkpoint_seq, checkpoint_id, task_id,
                                                 idx, channel, value, created_at)
        SELECT p_target_thread_id, w.namespace, w.checkpoint_seq, m.new_id, w.task_id, w.idx, w.channel,
               w.value, w.created_at
        FROM pgcheckpoint.pending_writes w
        JOIN ids m ON m.old_id = w.checkpoint_id
        WHERE w.thread_id = p_source_thread_id
    )
    SELECT ids.old_id, ids.new_id FROM ids ORDER BY ids.namespace, ids.seq;
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
            SELECT c.thread_id FROM pgcheckpoint.checkpoints c WHERE c.checkpoint_id = i) c);
    PERFORM pgcheckpoint.thread_lock_many(v_threads);

    -- Read under the locks, so every write to these threads is either seen
    -- here or waits for this transaction.
    WITH doomed AS (
        SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id
        FROM (SELECT DISTINCT x AS id FROM unnest(p_checkpoint_ids) x) i
        CROSS JOIN LATERAL (
            SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id FROM pgcheckpoint.checkpoints c
            WHERE c.checkpoint_id = i.id) c
        WHERE c.thread_id = ANY (v_threads)
    ), orphans AS (
        -- Kept deltas based on a doomed checkpoint. A base is an ancestor,
        -- written earlier: only later rows can be its deltas.
        SELECT k.thread_id, k.namespace, k.seq, k.checkpoint_id
        FROM (SELECT d.thread_id, d.namespace, min(d.seq) AS from_seq FROM doomed d GROUP BY 1, 2) t
        JOIN pgcheckpoint.checkpoints k
          ON k.thread_id = t.thread_id AND k.namespace = t.namespace AND k.seq > t.from_seq
        WHERE k.format = 'delta'
          AND k.base_checkpoint_id IN (SELECT d.checkpoint_id FROM doomed d)
          AND k.checkpoint_id NOT IN (SELECT d.checkpoint_id FROM doomed d)
    ), whole AS (
        SELECT o.thread_id, o.namespace, o.seq, m.messages, m.state, m.tool_results
        FROM orphans o CROSS JOIN LATERAL pgcheckpoint.checkpoint_materialize(o.checkpoint_id) m
    ), rebased AS (
        UPDATE pgcheckpoint.checkpoints c
        SET format = 'full', base_checkpoint_id = NULL, delta_run = 0, delta_depth = 0,
            messages = w.messages, state = w.state,
            tool_results = w.tool_results, state_removed = '{}', tool_results_removed = '{}'
        FROM whole w
        WHERE c.thread_id = w.thread_id AND c.namespace = w.namespace AND c.seq = w.seq
        RETURNING 1
    ), unrewound AS (
        UPDATE pgcheckpoint.threads t SET rewound_to = NULL
        FROM doomed d
        WHERE t.thread_id = d.thread_id AND t.namespace = d.namespace AND t.rewound_to = d.checkpoint_id
        RETURNING 1
    ), deleted AS (
        DELETE FROM pgcheckpoint.checkpoints c
        USING doomed d
        WHERE c.thread_id = d.thread_id AND c.namespace = d.namespace AND c.seq = d.seq
        RETURNING 1
    )
    SELECT count(*) INTO v_count FROM deleted;
    RETURN v_count;
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
        SELECT c.checkpoint_id FROM pgcheckpoint.checkpoints c, unnest(p_run_ids) r
        WHERE c.metadata @> jsonb_build_object('run_id', r)));
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
    v_n := pgcheckpoint.thread_prune_many(ARRAY[p_thread_id], true);
    UPDATE pgcheckpoint.threads t SET expires_at = NULL WHERE t.thread_id = p_thread_id;
    RETURN v_n;
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
        SELECT DISTINCT t.thread_id FROM pgcheckpoint.threads t
        WHERE t.thread_id > coalesce(p_after_thread_id, '')
        ORDER BY 1
        LIMIT p_batch_size);
    RETURN QUERY SELECT v_ids[cardinality(v_ids)], g.threads, g.expired, g.failed, g.deleted
    FROM pgcheckpoint.thread_gc_many(v_ids, p_policy, p_n, p_age) g;
END;
$function$;

CREATE OR REPLACE PROCEDURE pgcheckpoint.thread_gc_sweep(IN p_policy text, IN p_n integer DEFAULT NULL::integer, IN p_age interval DEFAULT NULL::interval, IN p_batch_size integer DEFAULT 5, IN p_time_budget interval DEFAULT '00:00:50'::interval, IN p_pause interval DEFAULT '00:00:00'::interval)
 LANGUAGE plpgsql
AS $procedure$
DECLARE
    v_start timestamptz := pg_catalog.now();
    v_ids   text[];
BEGIN
    PERFORM pgcheckpoint.retention_policy_check(p_policy, p_n, p_age);
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
        PERFORM pgcheckpoint.thread_gc_many(v_ids, p_policy, p_n, p_age);
        COMMIT;
        EXIT WHEN pg_catalog.clock_timestamp() - v_start >= p_time_budget;
        IF p_pause > interval '0' THEN
            -- Leave the CPU to the application's writes for a while.
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', p_pause));
        END IF;
    END LOOP;
END;
$procedure$;

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
        UPDATE pgcheckpoint.threads t SET swept_at = now() WHERE t.thread_id = v_thread;
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
    FROM pgcheckpoint.checkpoints c
    WHERE c.thread_id = p_thread_id AND c.namespace = p_namespace
      AND c.seq = pgcheckpoint.thread_head_seq(p_thread_id, p_namespace)
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.json_text(p_value jsonb)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    -- jsonb prints every control character as an escape (U+0001 as \u0001),
    -- so U+0001 to U+0003 never appear raw in its text: there they stand
    -- for the escaped U+0001, an escaped backslash and the NUL while the
    -- storage escape is reversed.
    SELECT CASE pg_catalog.jsonb_typeof(p_value)
               WHEN 'null' THEN NULL
               WHEN 'string' THEN pgcheckpoint.unescaped_text(p_value OPERATOR(pg_catalog.#>>) '{}')
               ELSE pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                        pgcheckpoint.unescaped_text(
                            pg_catalog.replace(pg_catalog.replace(p_value::pg_catalog.text, '\\', E'\x02'), '\u0001', E'\x01'),
                            E'\x03'),
                        E'\x01', '\u0001'), E'\x03', '\u0000'), E'\x02', '\\')
           END
$function$;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_merge(p_branch_thread_id text, p_into_thread_id text, p_checkpoint_id uuid, p_namespace text DEFAULT ''::text)
 RETURNS TABLE(thread_id text, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_ns  text := coalesce(p_namespace, '');
    v_src pgcheckpoint.checkpoints%ROWTYPE;
    v_put record;
BEGIN
    SELECT * INTO v_src FROM pgcheckpoint.checkpoints c
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
    IF v_put.inserted THEN
        UPDATE pgcheckpoint.checkpoints c SET merge_parent_id = v_src.checkpoint_id
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
                FROM pgcheckpoint.threads t
                WHERE t.thread_id = v_thread
            )
            SELECT pgcheckpoint.checkpoint_delete_many(ARRAY(
                SELECT c.checkpoint_id
                FROM pgcheckpoint.checkpoints c
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
    FROM pgcheckpoint.checkpoints c WHERE c.checkpoint_id = p_checkpoint_id LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'checkpoint % not found', p_checkpoint_id USING ERRCODE = 'PC001';
    END IF;
    PERFORM pgcheckpoint.thread_lock(v_thread);
    -- Read again under the lock: it may have been deleted meanwhile.
    SELECT c.step INTO v_step
    FROM pgcheckpoint.checkpoints c WHERE c.checkpoint_id = p_checkpoint_id LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'checkpoint % not found', p_checkpoint_id USING ERRCODE = 'PC001';
    END IF;
    v_head_seq := pgcheckpoint.thread_head_seq(v_thread, v_ns);
    SELECT c.checkpoint_id, c.step INTO v_head_id, v_head_step
    FROM pgcheckpoint.checkpoints c
    WHERE c.thread_id = v_thread AND c.namespace = v_ns AND c.seq = v_head_seq;
    SELECT count(*) INTO v_count
    FROM pgcheckpoint.checkpoints c WHERE c.thread_id = v_thread AND c.namespace = v_ns;

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

    UPDATE pgcheckpoint.threads t SET rewound_to = p_checkpoint_id
    WHERE t.thread_id = v_thread AND t.namespace = v_ns;

    RETURN QUERY SELECT v_thread, v_ns, p_checkpoint_id, v_step, v_head_step, v_count, v_truncated;
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
    DELETE FROM pgcheckpoint.checkpoints c WHERE c.thread_id = p_thread_id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    DELETE FROM pgcheckpoint.threads t WHERE t.thread_id = p_thread_id;
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
        FROM pgcheckpoint.threads t
        JOIN family f ON t.branched_from_thread = f.thread_id
    ), heads AS MATERIALIZED ( -- once per thread, not once per checkpoint
        SELECT t.thread_id, t.namespace, pgcheckpoint.thread_head_seq(t.thread_id, t.namespace) AS head_seq
        FROM pgcheckpoint.threads t
        JOIN family f ON f.thread_id = t.thread_id
    )
    SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id,
           c.step, c.created_at, c.trigger, c.tags, c.summary, c.seq = h.head_seq AS is_head
    FROM heads h
    JOIN pgcheckpoint.checkpoints c ON c.thread_id = h.thread_id AND c.namespace = h.namespace
    ORDER BY c.thread_id, c.namespace, c.seq
$function$;


-- Comments that named a renamed routine.

COMMENT ON FUNCTION pgcheckpoint.checkpoint_put(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text,bigint,integer,bytea,jsonb,jsonb) IS
    'Writes one checkpoint on a thread under the thread lock, as a child of the head (or of the given parent), which makes it the head. step = parent step + 1. Stored as a delta against the parent (or the anchor of its run) when the messages are an append and the delta is smaller (see checkpoints.format); p_delta_run = 1 stores every checkpoint whole. Idempotent on checkpoint_id, which is unique in the table (see checkpoint_id_lock). Errors: PC001 parent not found, PC002 id reused for other content, PC003 invalid argument.';

COMMENT ON FUNCTION pgcheckpoint.thread_gc_batch(text,integer,interval,text,integer) IS
    'One batch of a sweep in thread id order, in one transaction: thread_gc_many for up to p_batch_size threads after p_after_thread_id. Returns the last thread done (NULL when none was left), how many threads, expired, failed, and how many checkpoints deleted.';

COMMENT ON PROCEDURE pgcheckpoint.thread_gc_sweep(text,integer,interval,integer,interval,interval) IS
    'Sweeps all threads, least recently swept first: expiry, then the policy, in batches of p_batch_size threads, committing after each and sleeping p_pause between, until every thread is done or p_time_budget is spent; the next call takes up the rest. Usage: CALL pgcheckpoint.thread_gc_sweep(''keep_last_n'', 10).';

COMMENT ON FUNCTION pgcheckpoint.thread_gc(text,text,integer,interval) IS
    'Applies a retention policy (keep_all, keep_last_n(n), keep_age(age), keep_milestones(n)) to one thread, every namespace, in one transaction; never deletes a head or a branch source; rebases kept deltas. Returns the deleted checkpoints. Usage: SELECT * FROM pgcheckpoint.thread_gc(''run-42'', ''keep_last_n'', 10). Error PC003: bad policy.';

COMMENT ON FUNCTION pgcheckpoint.json_text(jsonb) IS
    'What ->> gives for a JSON value read from a stored column, as it was written (see unescaped_text): a string''s text (U+0000 shown as U+FFFD), NULL for null, anything else as JSON text (U+0000 spelled \u0000).';

COMMENT ON FUNCTION pgcheckpoint.checkpoint_lineage(uuid,integer) IS
    'A checkpoint and its ancestors back to the root, newest first (depth 0 is the checkpoint), across branch threads. Usage: SELECT * FROM pgcheckpoint.checkpoint_lineage(''<id>'').';

COMMENT ON FUNCTION pgcheckpoint.thread_lock(text) IS
    'Takes the thread''s lock until the end of the transaction: advisory lock (1885563760, hashtext(thread_id)) in pg_locks. Every routine that changes a thread takes it first (several threads: thread_lock_many), so the thread''s writers queue and each sees what the one before wrote. No SET clause, so that Postgres inlines it into its caller''s plan (it costs nothing over the bare lock); every name in it is schema-qualified instead.';

COMMENT ON FUNCTION pgcheckpoint.checkpoint_materialize(uuid) IS
    'The whole messages, state and tool_results of a checkpoint, in either format (no row for an unknown id), rebuilt from pgcheckpoint.delta_chain with pgcheckpoint.delta_merge. Usage: SELECT * FROM pgcheckpoint.checkpoint_materialize(''<checkpoint id>''). Error PC004: a delta chain that does not reach a full snapshot (a damaged table).';

COMMENT ON FUNCTION pgcheckpoint.thread_tree(text) IS
    'The checkpoints of a thread and of every branch forked from it (recursively), with both parents: the edges of the tree. Usage: SELECT * FROM pgcheckpoint.thread_tree(''run-42'').';

COMMENT ON TABLE pgcheckpoint.threads IS
    'One row per agent run (thread) and namespace, created by its first checkpoint. The head (the checkpoint the next write builds on) is rewound_to when set, else the newest checkpoint: see pgcheckpoint.thread_head().';

COMMENT ON COLUMN pgcheckpoint.checkpoints.format IS
    '''full'': messages, state and tool_results hold the whole snapshot. ''delta'': they hold only the changes since base_checkpoint_id (an ancestor in the same thread and namespace); read it with pgcheckpoint.checkpoint_materialize(checkpoint_id).';

COMMENT ON COLUMN pgcheckpoint.threads.expires_at IS
    'When the thread expires (TTL); NULL: never. A sweep (pgcheckpoint.thread_gc_sweep, thread_gc_batch, thread_gc_many) applies expire_action to an expired thread. Set on every namespace row of the thread.';

COMMENT ON COLUMN pgcheckpoint.threads.swept_at IS
    'When a sweep (thread_gc_batch, thread_gc_sweep) last went through the thread; NULL: never. thread_gc_sweep takes the least recently swept threads first.';


-- The deprecated aliases (OR REPLACE for sqlc, which still sees the old names).

CREATE OR REPLACE FUNCTION pgcheckpoint.branch(p_source_id uuid, p_new_thread_id text, p_branch_name text, p_checkpoint_id uuid)
RETURNS TABLE(thread_id text, checkpoint_id uuid, step bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_branch(p_source_id, p_new_thread_id, p_branch_name, p_checkpoint_id) $$;
COMMENT ON FUNCTION pgcheckpoint.branch(uuid,text,text,uuid) IS 'Deprecated: use pgcheckpoint.thread_branch; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.branch(uuid,text,text,uuid) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.copy_thread(p_source_thread_id text, p_target_thread_id text)
RETURNS TABLE(old_checkpoint_id uuid, new_checkpoint_id uuid)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_copy(p_source_thread_id, p_target_thread_id) $$;
COMMENT ON FUNCTION pgcheckpoint.copy_thread(text,text) IS 'Deprecated: use pgcheckpoint.thread_copy; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.copy_thread(text,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.delete_checkpoints(p_checkpoint_ids uuid[])
RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.checkpoint_delete_many(p_checkpoint_ids) $$;
COMMENT ON FUNCTION pgcheckpoint.delete_checkpoints(uuid[]) IS 'Deprecated: use pgcheckpoint.checkpoint_delete_many; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.delete_checkpoints(uuid[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.delete_for_runs(p_run_ids text[])
RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.checkpoint_delete_for_runs(p_run_ids) $$;
COMMENT ON FUNCTION pgcheckpoint.delete_for_runs(text[]) IS 'Deprecated: use pgcheckpoint.checkpoint_delete_for_runs; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.delete_for_runs(text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.expire_thread(p_thread_id text)
RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.thread_expire(p_thread_id) $$;
COMMENT ON FUNCTION pgcheckpoint.expire_thread(text) IS 'Deprecated: use pgcheckpoint.thread_expire; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.expire_thread(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.gc_batch(p_policy text, p_n integer, p_age interval, p_after_thread_id text, p_batch_size integer)
RETURNS TABLE(last_thread_id text, threads integer, expired integer, failed integer, deleted bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_gc_batch(p_policy, p_n, p_age, p_after_thread_id, p_batch_size) $$;
COMMENT ON FUNCTION pgcheckpoint.gc_batch(text,integer,interval,text,integer) IS 'Deprecated: use pgcheckpoint.thread_gc_batch; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.gc_batch(text,integer,interval,text,integer) FROM PUBLIC;

CREATE OR REPLACE PROCEDURE pgcheckpoint.gc_sweep(IN p_policy text, IN p_n integer DEFAULT NULL::integer, IN p_age interval DEFAULT NULL::interval, IN p_batch_size integer DEFAULT 5, IN p_time_budget interval DEFAULT '00:00:50'::interval, IN p_pause interval DEFAULT '00:00:00'::interval)
LANGUAGE plpgsql
AS $$ BEGIN CALL pgcheckpoint.thread_gc_sweep(p_policy, p_n, p_age, p_batch_size, p_time_budget, p_pause); END $$;
COMMENT ON PROCEDURE pgcheckpoint.gc_sweep(text,integer,interval,integer,interval,interval) IS 'Deprecated: use pgcheckpoint.thread_gc_sweep; removed in a later release.';
REVOKE EXECUTE ON PROCEDURE pgcheckpoint.gc_sweep(text,integer,interval,integer,interval,interval) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.gc_thread(p_thread_id text, p_policy text, p_n integer DEFAULT NULL::integer, p_age interval DEFAULT NULL::interval)
RETURNS TABLE(thread_id text, namespace text, checkpoint_id uuid, step bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_gc(p_thread_id, p_policy, p_n, p_age) $$;
COMMENT ON FUNCTION pgcheckpoint.gc_thread(text,text,integer,interval) IS 'Deprecated: use pgcheckpoint.thread_gc; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.gc_thread(text,text,integer,interval) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.gc_threads(p_thread_ids text[], p_policy text, p_n integer, p_age interval)
RETURNS TABLE(threads integer, expired integer, failed integer, deleted bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_gc_many(p_thread_ids, p_policy, p_n, p_age) $$;
COMMENT ON FUNCTION pgcheckpoint.gc_threads(text[],text,integer,interval) IS 'Deprecated: use pgcheckpoint.thread_gc_many; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.gc_threads(text[],text,integer,interval) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.head(p_thread_id text, p_namespace text DEFAULT ''::text)
RETURNS uuid
LANGUAGE sql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.thread_head(p_thread_id, p_namespace) $$;
COMMENT ON FUNCTION pgcheckpoint.head(text,text) IS 'Deprecated: use pgcheckpoint.thread_head; removed in a later release.';

CREATE OR REPLACE FUNCTION pgcheckpoint.head_seq(p_thread_id text, p_namespace text DEFAULT ''::text)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.thread_head_seq(p_thread_id, p_namespace) $$;
COMMENT ON FUNCTION pgcheckpoint.head_seq(text,text) IS 'Deprecated: use pgcheckpoint.thread_head_seq; removed in a later release.';

CREATE OR REPLACE FUNCTION pgcheckpoint.lineage(p_checkpoint_id uuid, p_max_depth integer DEFAULT NULL::integer)
RETURNS TABLE(depth integer, thread_id text, namespace text, seq bigint, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint, created_at timestamp with time zone, trigger text, tags text[], summary text, metadata jsonb, next_node text, size_bytes bigint)
LANGUAGE sql STABLE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.checkpoint_lineage(p_checkpoint_id, p_max_depth) $$;
COMMENT ON FUNCTION pgcheckpoint.lineage(uuid,integer) IS 'Deprecated: use pgcheckpoint.checkpoint_lineage; removed in a later release.';

CREATE OR REPLACE FUNCTION pgcheckpoint.lock_checkpoint_id(p_checkpoint_id uuid)
RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.checkpoint_id_lock(p_checkpoint_id) $$;
COMMENT ON FUNCTION pgcheckpoint.lock_checkpoint_id(uuid) IS 'Deprecated: use pgcheckpoint.checkpoint_id_lock; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.lock_checkpoint_id(uuid) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.lock_thread(p_thread_id text)
RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.thread_lock(p_thread_id) $$;
COMMENT ON FUNCTION pgcheckpoint.lock_thread(text) IS 'Deprecated: use pgcheckpoint.thread_lock; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.lock_thread(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.materialize(p_checkpoint_id uuid)
RETURNS TABLE(messages jsonb, state jsonb, tool_results jsonb)
LANGUAGE sql STABLE PARALLEL UNSAFE ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.checkpoint_materialize(p_checkpoint_id) $$;
COMMENT ON FUNCTION pgcheckpoint.materialize(uuid) IS 'Deprecated: use pgcheckpoint.checkpoint_materialize; removed in a later release.';

CREATE OR REPLACE FUNCTION pgcheckpoint.merge(p_branch_thread_id text, p_into_thread_id text, p_checkpoint_id uuid, p_namespace text DEFAULT ''::text)
RETURNS TABLE(thread_id text, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_merge(p_branch_thread_id, p_into_thread_id, p_checkpoint_id, p_namespace) $$;
COMMENT ON FUNCTION pgcheckpoint.merge(text,text,uuid,text) IS 'Deprecated: use pgcheckpoint.thread_merge; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.merge(text,text,uuid,text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.prune(p_thread_ids text[], p_keep_latest boolean)
RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.thread_prune_many(p_thread_ids, p_keep_latest) $$;
COMMENT ON FUNCTION pgcheckpoint.prune(text[],boolean) IS 'Deprecated: use pgcheckpoint.thread_prune_many; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.prune(text[],boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.rewind(p_checkpoint_id uuid, p_truncate boolean DEFAULT false)
RETURNS TABLE(thread_id text, namespace text, checkpoint_id uuid, step bigint, head_step bigint, checkpoints bigint, truncated bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.checkpoint_rewind(p_checkpoint_id, p_truncate) $$;
COMMENT ON FUNCTION pgcheckpoint.rewind(uuid,boolean) IS 'Deprecated: use pgcheckpoint.checkpoint_rewind; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.rewind(uuid,boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.tree(p_thread_id text)
RETURNS TABLE(thread_id text, namespace text, seq bigint, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint, created_at timestamp with time zone, trigger text, tags text[], summary text, is_head boolean)
LANGUAGE sql STABLE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_tree(p_thread_id) $$;
COMMENT ON FUNCTION pgcheckpoint.tree(text) IS 'Deprecated: use pgcheckpoint.thread_tree; removed in a later release.';

CREATE OR REPLACE FUNCTION pgcheckpoint.unescape_text(p_text text, p_nul text DEFAULT '�'::text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.unescaped_text(p_text, p_nul) $$;
COMMENT ON FUNCTION pgcheckpoint.unescape_text(text,text) IS 'Deprecated: use pgcheckpoint.unescaped_text; removed in a later release.';

