-- checkpoint_append stores an append at the end of a delta run as a delta
-- on the run's anchor made of the run's deltas and the change, with digests
-- continued from the head's: it no longer rebuilds the head and rehashes
-- every message at every DeltaRun-th append.

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
    -- The new row's storage: a delta on v_base_id (the head, or the
    -- anchor of the head's run) of what was appended and set since it,
    -- or whole (v_base_id NULL).
    v_base_id     uuid;
    v_base_run    integer;
    v_base_depth  integer;
    v_base_state  jsonb;
    v_base_tools  jsonb;
    v_new_msgs    jsonb;
    v_new_state   jsonb;
    v_new_tools   jsonb;
    v_state_rm    text[] := '{}';
    v_tools_rm    text[] := '{}';
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

    IF v_head_count IS NULL OR octet_length(v_head_digest) IS DISTINCT FROM 32 OR v_head_state IS NULL OR v_head_tools IS NULL THEN
        -- A head without digests: stored whole, the head's content with
        -- the change, written by checkpoint_put on the head (which
        -- computes the digests, and may store a delta on the run's anchor).
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

    -- The digests go on from the head's.
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

    -- Where it is stored, as checkpoint_delta decides for the whole
    -- content (delta_run_continues, run_anchor), from the change and the
    -- head's run alone: nothing before the run's anchor is read or hashed.
    IF coalesce(pgcheckpoint.delta_run_continues(v_head_run, p_delta_run), false) THEN
        -- A delta on the head made of the change.
        v_base_id := v_head_id;
        v_base_run := v_head_run + 1;
        v_base_depth := v_head_depth;
        v_base_state := v_head_state;
        v_base_tools := v_head_tools;
        v_new_msgs := v_messages;
        v_new_state := v_set_state;
        v_new_tools := v_set_tools;
    ELSE
        -- The run is as long as allowed: a delta on its anchor made of the
        -- run's deltas (oldest first) and the change.
        SELECT a.checkpoint_id, 0, a.delta_depth, a.state_digests, a.tool_results_digests
          INTO v_base_id, v_base_run, v_base_depth, v_base_state, v_base_tools
        FROM pgcheckpoint.run_anchor(v_head_id, p_delta_run) a
        WHERE a.messages_count IS NOT NULL AND octet_length(a.messages_digest) = 32
          AND a.state_digests IS NOT NULL AND a.tool_results_digests IS NOT NULL;
        IF v_base_id IS NOT NULL THEN
            WITH RECURSIVE run AS (
                SELECT 0 AS depth, c.base_checkpoint_id, c.delta_run, c.messages, c.state, c.tool_results
                FROM pgcheckpoint.tenant_checkpoints c
                WHERE c.checkpoint_id = v_head_id
                UNION ALL
                -- The run's deltas only: the anchor's content is not read.
                SELECT r.depth + 1, b.base_checkpoint_id, b.delta_run, b.messages, b.state, b.tool_results
                FROM run r
                CROSS JOIN LATERAL (
                    SELECT b.base_checkpoint_id, b.delta_run, b.messages, b.state, b.tool_results
                    FROM pgcheckpoint.tenant_checkpoints b
                    WHERE b.checkpoint_id = r.base_checkpoint_id AND b.delta_run > 0
                    LIMIT 1) b
                WHERE r.delta_run > 0
            )
            -- Of each key set in the run, its last value: delta_keys
            -- keeps those the new digests have (not removed since).
            SELECT (SELECT jsonb_path_query_array(jsonb_agg(r.messages ORDER BY r.depth DESC), '$[*][*]') FROM run r)
                   || v_messages,
                   coalesce((SELECT jsonb_object_agg(e.key, e.value ORDER BY r.depth DESC) FROM run r, jsonb_each(r.state) e), '{}')
                   || v_set_state,
                   coalesce((SELECT jsonb_object_agg(e.key, e.value ORDER BY r.depth DESC) FROM run r, jsonb_each(r.tool_results) e), '{}')
                   || v_set_tools
              INTO v_new_msgs, v_new_state, v_new_tools;
        ELSE
            -- No anchor (after p_delta_run - 1 anchors): whole.
            SELECT m.messages || v_messages, (m.state - v_rm_state) || v_set_state,
                   (m.tool_results - v_rm_tools) || v_set_tools
              INTO v_new_msgs, v_new_state, v_new_tools
            FROM pgcheckpoint.checkpoint_materialize(v_head_id) m;
        END IF;
    END IF;

    IF v_base_id IS NOT NULL THEN
        -- Of the keys set since the base, those whose digest differs from
        -- the base's; the base's keys that are gone.
        SELECT s.changed, s.removed, t.changed, t.removed
          INTO v_new_state, v_state_rm, v_new_tools, v_tools_rm
        FROM pgcheckpoint.delta_keys(v_new_state, v_state_dig, v_base_state) s,
             pgcheckpoint.delta_keys(v_new_tools, v_tools_dig, v_base_tools) t;
    END IF;
    INSERT INTO pgcheckpoint.tenant_checkpoints AS c (
        thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step,
        trigger, tags, summary, metadata, format, base_checkpoint_id, delta_run, delta_depth,
        messages, state, tool_results, state_removed, tool_results_removed, messages_count,
        messages_digest, state_digests, tool_results_digests, next_node, size_bytes)
    VALUES (p_thread_id, v_ns, v_next_seq, p_checkpoint_id, v_head_id, v_next_step,
           coalesce(p_trigger, 'manual'), coalesce(p_tags, '{}'), v_summary, v_metadata,
           CASE WHEN v_base_id IS NULL THEN 'full' ELSE 'delta' END, v_base_id,
           coalesce(v_base_run, 0), coalesce(v_base_depth + 1, 0), v_new_msgs, v_new_state, v_new_tools,
           v_state_rm, v_tools_rm, v_head_count + v_msg_count,
           CASE WHEN v_msg_count = 0 THEN v_head_digest
                ELSE pgcheckpoint.message_chain_at(pgcheckpoint.message_chain(v_head_digest, v_msg_dig), v_msg_count) END,
           v_state_dig, v_tools_dig, coalesce(p_next_node, ''), v_size)
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
COMMENT ON FUNCTION pgcheckpoint.checkpoint_append(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text[],text[],text,bigint,integer,bytea,jsonb,jsonb,bigint) IS 'Writes one checkpoint on the head of a thread from a change: the head''s messages with p_messages appended, its state without p_remove_state keys and with p_set_state''s members (jsonb ||), tool results likewise; it reads back as if written whole by checkpoint_put. When the head has digests, the new ones go on from them (message_digests holds 16 bytes per appended message, see message_digests) and it is stored from the change and the head''s run alone, never reading or hashing content before the run''s anchor: while the head''s run may grow (delta_run_continues), a delta on the head made of the change; at the end of the run, a delta on its anchor (run_anchor) made of the run''s deltas and the change; whole when the run has no anchor. A head without digests: whole, through checkpoint_put. p_on_head: NULL appends to whatever the head is; else the head must be that checkpoint. Takes the thread lock as checkpoint_put does; idempotent on checkpoint_id (a retry of the same append on the same parent). p_size_bytes: the change''s size as the client sent it; the checkpoint''s size_bytes is the head''s plus it, or the size of the content it makes (as jsonb text) when that sum is over p_max_size_bytes. p_max_size_bytes: NULL, no limit; else the most that content may hold. Errors: PC001 thread without checkpoint, PC002 id reused (23505 and 40001 as checkpoint_put), PC003 invalid argument, PC005 the head is not p_on_head, PC006 the content it makes is over p_max_size_bytes.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.checkpoint_append(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text[],text[],text,bigint,integer,bytea,jsonb,jsonb,bigint) FROM PUBLIC;
