-- Back to version 17: the advisory thread lock, the id's advisory lock
-- taken by every write, no unique constraint on checkpoint_id.

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_lock(p_thread_id text)
 RETURNS void
 LANGUAGE sql
AS $function$ SELECT pg_catalog.pg_advisory_xact_lock(1885563760, pg_catalog.hashtext(p_thread_id)) $function$;
COMMENT ON FUNCTION pgcheckpoint.thread_lock(text) IS 'Takes the thread''s lock until the end of the transaction: advisory lock (1885563760, hashtext(thread_id)) in pg_locks. Every routine that changes a thread takes it first (several threads: thread_lock_many), so the thread''s writers queue and each sees what the one before wrote. No SET clause, so that Postgres inlines it into its caller''s plan (it costs nothing over the bare lock); every name in it is schema-qualified instead.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.thread_lock(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_lock_many(p_thread_ids text[])
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT pgcheckpoint.thread_lock(t.id)
    FROM (SELECT DISTINCT x AS id FROM unnest(p_thread_ids) x) t
    ORDER BY hashtext(t.id)
$function$;
COMMENT ON FUNCTION pgcheckpoint.thread_lock_many(text[]) IS 'Takes the lock of each thread in the array (see thread_lock) until the end of the transaction, in lock key order: every routine that takes several takes them in this one order, so that none deadlocks with another. Locks already held are taken again at no cost; NULL ids are skipped.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.thread_lock_many(text[]) FROM PUBLIC;

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
COMMENT ON FUNCTION pgcheckpoint.thread_delete(text) IS 'Deletes a thread (every namespace) with its checkpoints and pending writes, in one transaction. Returns the number of checkpoints deleted.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.thread_delete(text) FROM PUBLIC;

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
COMMENT ON FUNCTION pgcheckpoint.checkpoint_put(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text,bigint,integer,bytea,jsonb,jsonb) IS 'Writes one checkpoint on a thread under the thread lock, as a child of the head (or of the given parent), which makes it the head. step = parent step + 1. Stored as a delta against the parent (or the anchor of its run) when the messages are an append and the delta is smaller (see checkpoints.format); p_delta_run = 1 stores every checkpoint whole. Idempotent on checkpoint_id, which is unique in the table (see checkpoint_id_lock). Errors: PC001 parent not found, PC002 id reused for other content, PC003 invalid argument.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.checkpoint_put(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text,bigint,integer,bytea,jsonb,jsonb) FROM PUBLIC;

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

    -- The size limit. The head's size plus the change's bounds the new
    -- content (a key the change sets again counts twice in it); over the
    -- limit, the content the append makes is measured, and only that
    -- refuses it.
    SELECT c.size_bytes + coalesce(p_size_bytes, 0) INTO v_size
    FROM pgcheckpoint.checkpoints c
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
COMMENT ON FUNCTION pgcheckpoint.checkpoint_append(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text[],text[],text,bigint,integer,bytea,jsonb,jsonb,bigint) IS 'Writes one checkpoint on the head of a thread from a change: the head''s messages with p_messages appended, its state without p_remove_state keys and with p_set_state''s members (jsonb ||), tool results likewise; it reads back as if written whole by checkpoint_put. Stored as a delta on the head made of the change alone when the head has digests and its run may grow (digests continued from the head''s: message_digests holds 16 bytes per appended message, see message_digests), else whole through checkpoint_put. p_on_head: NULL appends to whatever the head is; else the head must be that checkpoint. Takes the thread and id locks as checkpoint_put does; idempotent on checkpoint_id (a retry of the same append on the same parent). p_size_bytes: the change''s size as the client sent it; the checkpoint''s size_bytes is the head''s plus it, or the size of the content it makes (as jsonb text) when that sum is over p_max_size_bytes. p_max_size_bytes: NULL, no limit; else the most that content may hold. Errors: PC001 thread without checkpoint, PC002 id reused, PC003 invalid argument, PC005 the head is not p_on_head, PC006 the content it makes is over p_max_size_bytes.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.checkpoint_append(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text[],text[],text,bigint,integer,bytea,jsonb,jsonb,bigint) FROM PUBLIC;

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
COMMENT ON FUNCTION pgcheckpoint.thread_branch(uuid,text,text,uuid) IS 'Forks a new thread from a checkpoint: its first checkpoint has the source as parent and the source''s content; the thread row records the branch name and source. Errors: PC001 unknown source, PC003 bad or existing thread id.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.thread_branch(uuid,text,text,uuid) FROM PUBLIC;


CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_id_lock(p_checkpoint_id uuid)
 RETURNS void
 LANGUAGE sql
AS $function$ SELECT pg_catalog.pg_advisory_xact_lock(1885563753, pg_catalog.uuid_hash(p_checkpoint_id)) $function$;
COMMENT ON FUNCTION pgcheckpoint.checkpoint_id_lock(uuid) IS 'Takes the lock of a checkpoint id until the end of the transaction: advisory lock (1885563753, uuid_hash(checkpoint_id)) in pg_locks. Every write of a checkpoint with a given id takes it after its thread''s lock and before it looks whether the id exists, so an id is unique in the whole table. An import, which writes too many ids to lock each, instead takes the table in SHARE ROW EXCLUSIVE mode before its commit and looks again; so every write also holds the table''s ROW EXCLUSIVE lock when it looks (an INSERT ... SELECT that looks holds it already; a function that looks in a statement of its own takes it first).';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.checkpoint_id_lock(uuid) FROM PUBLIC;

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
COMMENT ON PROCEDURE pgcheckpoint.thread_gc_sweep(text,integer,interval,integer,interval,interval) IS 'Sweeps all threads, least recently swept first: expiry, then the policy, in batches of p_batch_size threads, committing after each and sleeping p_pause between, until every thread is done or p_time_budget is spent; the next call takes up the rest. Usage: CALL pgcheckpoint.thread_gc_sweep(''keep_last_n'', 10).';
REVOKE EXECUTE ON PROCEDURE pgcheckpoint.thread_gc_sweep(text,integer,interval,integer,interval,interval) FROM PUBLIC;

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
COMMENT ON FUNCTION pgcheckpoint.json_text(jsonb) IS E'What ->> gives for a JSON value read from a stored column, as it was written (see unescaped_text): a string''s text (U+0000 shown as U+FFFD), NULL for null, anything else as JSON text (U+0000 spelled \\u0000).';

DROP FUNCTION pgcheckpoint.thread_gc_batch_oldest(text,integer,interval,integer,timestamp with time zone);

DROP TABLE pgcheckpoint.thread_locks;

ALTER TABLE pgcheckpoint.checkpoints DROP CONSTRAINT checkpoints_checkpoint_id_key;
CREATE INDEX checkpoints_checkpoint_id_idx ON pgcheckpoint.checkpoints USING btree (checkpoint_id);
COMMENT ON COLUMN pgcheckpoint.checkpoints.checkpoint_id IS 'UUIDv7 (time-ordered). May be generated by the client, which makes retried writes idempotent.';

DROP FUNCTION pgcheckpoint.checkpoint_check(uuid,text);
