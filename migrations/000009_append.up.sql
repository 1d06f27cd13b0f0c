-- checkpoint_append: a checkpoint written from what changed since the head
-- (see the function's comment). It continues the head's list digest chain
-- (migration 6) from the appended messages' digests alone.

CREATE FUNCTION pgcheckpoint.checkpoint_append(
    p_thread_id                text,
    p_namespace                text,
    p_checkpoint_id            uuid,
    p_on_head                  uuid,
    p_trigger                  text,
    p_tags                     text[],
    p_summary                  text,
    p_metadata                 jsonb,
    p_messages                 jsonb,
    p_set_state                jsonb,
    p_set_tool_results         jsonb,
    p_remove_state             text[],
    p_remove_tool_results      text[],
    p_next_node                text,
    p_size_bytes               bigint,
    p_delta_run                integer DEFAULT 50,
    p_message_digests          bytea DEFAULT NULL,
    p_set_state_digests        jsonb DEFAULT NULL,
    p_set_tool_results_digests jsonb DEFAULT NULL,
    OUT thread_id            text,
    OUT namespace            text,
    OUT checkpoint_id        uuid,
    OUT parent_checkpoint_id uuid,
    OUT step                 bigint,
    OUT created_at           timestamptz,
    OUT inserted             boolean
)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
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
    v_rewound_to  uuid;
    v_last_seq    bigint;
    -- The head (scalars, as in checkpoint_put).
    v_head_id     uuid;
    v_head_step   bigint;
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

    PERFORM pg_advisory_xact_lock(1885563760, hashtext(p_thread_id)); -- pgcheckpoint.lock_thread
    PERFORM pgcheckpoint.lock_checkpoint_id(p_checkpoint_id);
    LOCK TABLE pgcheckpoint.checkpoints IN ROW EXCLUSIVE MODE; -- see lock_checkpoint_id

    checkpoint_id := p_checkpoint_id;
    IF EXISTS (SELECT 1 FROM pgcheckpoint.checkpoints e WHERE e.checkpoint_id = p_checkpoint_id) THEN
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
        CROSS JOIN LATERAL pgcheckpoint.materialize(c.checkpoint_id) m
        LEFT JOIN LATERAL pgcheckpoint.materialize(c.parent_checkpoint_id) pm ON true
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

    -- The head as Latest finds it (head_seq), by key.
    SELECT (SELECT t.rewound_to FROM pgcheckpoint.threads t WHERE t.thread_id = p_thread_id AND t.namespace = v_ns),
           (SELECT l.seq FROM pgcheckpoint.checkpoints l
            WHERE l.thread_id = p_thread_id AND l.namespace = v_ns
            ORDER BY l.seq DESC
            LIMIT 1),
           h.checkpoint_id, h.step, h.delta_run, h.delta_depth, h.messages_count,
           h.messages_digest, h.state_digests, h.tool_results_digests
      INTO v_rewound_to, v_last_seq, v_head_id, v_head_step, v_head_run, v_head_depth, v_head_count,
           v_head_digest, v_head_state, v_head_tools
    FROM pgcheckpoint.checkpoints h
    WHERE h.thread_id = p_thread_id AND h.namespace = v_ns
      AND h.seq = pgcheckpoint.head_seq(p_thread_id, v_ns);
    IF v_head_id IS NULL THEN
        RAISE EXCEPTION 'thread % namespace % has no checkpoint to append to', p_thread_id, quote_literal(v_ns)
            USING ERRCODE = 'PC001', HINT = 'Write the first checkpoint whole (checkpoint_put).';
    END IF;
    IF p_on_head IS NOT NULL AND p_on_head <> v_head_id THEN
        RAISE EXCEPTION 'the head of thread % namespace % is %, not %', p_thread_id, quote_literal(v_ns), v_head_id, p_on_head
            USING ERRCODE = 'PC005';
    END IF;

    IF p_delta_run <= 1 OR v_head_run + 1 >= p_delta_run OR v_head_count IS NULL
       OR octet_length(v_head_digest) IS DISTINCT FROM 32 OR v_head_state IS NULL OR v_head_tools IS NULL THEN
        -- Stored whole: the head's content with the change, written by
        -- checkpoint_put on the head (which computes the digests, and may
        -- still store a delta on the run's anchor).
        SELECT * INTO v_put
        FROM pgcheckpoint.materialize(v_head_id) m
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
                 ELSE (SELECT m.messages FROM pgcheckpoint.materialize(v_head_id) m) END,
            v_state_dig);
    END IF;
    INSERT INTO pgcheckpoint.checkpoints AS c (
        thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step,
        trigger, tags, summary, metadata, format, base_checkpoint_id, delta_run, delta_depth,
        messages, state, tool_results, state_removed, tool_results_removed, messages_count,
        messages_digest, state_digests, tool_results_digests, next_node, size_bytes)
    VALUES (
        p_thread_id, v_ns, v_last_seq + 1, p_checkpoint_id, v_head_id, v_head_step + 1,
        coalesce(p_trigger, 'manual'), coalesce(p_tags, '{}'), v_summary, v_metadata,
        'delta', v_head_id, v_head_run + 1, v_head_depth + 1, v_messages, v_set_state, v_set_tools,
        ARRAY(SELECT k FROM jsonb_object_keys(v_head_state) k WHERE k = ANY (v_rm_state) ORDER BY k),
        ARRAY(SELECT k FROM jsonb_object_keys(v_head_tools) k WHERE k = ANY (v_rm_tools) ORDER BY k),
        v_head_count + v_msg_count,
        CASE WHEN v_msg_count = 0 THEN v_head_digest
             ELSE pgcheckpoint.list_digest_at(pgcheckpoint.message_chain(v_head_digest, v_msg_dig), v_msg_count) END,
        v_state_dig, v_tools_dig, coalesce(p_next_node, ''), coalesce(p_size_bytes, 0))
    RETURNING c.parent_checkpoint_id, c.step, c.created_at
      INTO parent_checkpoint_id, step, created_at;
    IF v_rewound_to IS NOT NULL THEN
        UPDATE pgcheckpoint.threads t SET rewound_to = NULL
        WHERE t.thread_id = p_thread_id AND t.namespace = v_ns;
    END IF;
    thread_id := p_thread_id;
    namespace := v_ns;
    inserted := true;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.checkpoint_append IS
    'Writes one checkpoint on the head of a thread from a change: the head''s messages with p_messages appended, its state without p_remove_state keys and with p_set_state''s members (jsonb ||), tool results likewise; it reads back as if written whole by checkpoint_put. Stored as a delta on the head made of the change alone when the head has digests and its run may grow (digests continued from the head''s: message_digests holds 16 bytes per appended message, see message_digests), else whole through checkpoint_put. p_on_head: NULL appends to whatever the head is; else the head must be that checkpoint. Takes the thread and id locks as checkpoint_put does; idempotent on checkpoint_id (a retry of the same append on the same parent). Errors: PC001 thread without checkpoint, PC002 id reused, PC003 invalid argument, PC005 the head is not p_on_head.';

-- It writes: not for PUBLIC (see migration 8); the application role has
-- EXECUTE on new routines by schema/roles/roles.sql's default privileges.
REVOKE EXECUTE ON FUNCTION pgcheckpoint.checkpoint_append(text, text, uuid, uuid, text, text[], text, jsonb, jsonb, jsonb, jsonb,
    text[], text[], text, bigint, integer, bytea, jsonb, jsonb) FROM PUBLIC;
