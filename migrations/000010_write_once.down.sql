-- Undoes 000010_write_once.up.sql: lock_thread as 000001 made it,
-- list_digest_at, checkpoint_default_summary and checkpoint_put as 000006
-- left them, checkpoint_append as 000009 made it, and the functions of
-- 000010 dropped, and the format check back.

ALTER TABLE pgcheckpoint.checkpoints
    ADD CONSTRAINT checkpoints_format_known CHECK (format IN ('full', 'delta'));

CREATE OR REPLACE FUNCTION pgcheckpoint.lock_thread(p_thread_id text)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_advisory_xact_lock(1885563760, hashtext(p_thread_id)) $$;

CREATE OR REPLACE FUNCTION pgcheckpoint.list_digest_at(p_chain bytea, p_count integer)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN p_count = 0 THEN '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea
                WHEN octet_length(p_chain) >= 32 * p_count THEN substring(p_chain FROM 32 * (p_count - 1) + 1 FOR 32)
           END
$$;

COMMENT ON FUNCTION pgcheckpoint.list_digest_at IS
    'L(p_count), the list digest of the first p_count messages, from a message chain (see message_chain): 32 zero bytes for 0; NULL when the chain is shorter.';

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_default_summary(p_messages jsonb, p_state jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- Concatenation, not format() (stable), and a key count without a
    -- subquery, so that the function is inlined; the count takes each
    -- value's type, not the value (keyvalue() would copy every value).
    SELECT CASE WHEN pg_catalog.jsonb_typeof(p_messages OPERATOR(pg_catalog.->) -1) OPERATOR(pg_catalog.=) 'object'
                THEN '[' OPERATOR(pg_catalog.||)
                     coalesce(pgcheckpoint.json_text(p_messages OPERATOR(pg_catalog.->) -1 OPERATOR(pg_catalog.->) 'role'), 'unknown')
                     OPERATOR(pg_catalog.||) '] ' OPERATOR(pg_catalog.||)
                     pg_catalog.left(coalesce(pgcheckpoint.json_text(
                         p_messages OPERATOR(pg_catalog.->) -1 OPERATOR(pg_catalog.->) 'content'), ''), 100)
                ELSE 'State: ' OPERATOR(pg_catalog.||)
                     pg_catalog.jsonb_array_length(pg_catalog.jsonb_path_query_array(p_state, 'strict $.*.type()'))::pg_catalog.text
                     OPERATOR(pg_catalog.||) ' keys'
           END
$$;

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_put(
    p_thread_id            text,
    p_namespace            text,
    p_checkpoint_id        uuid,
    p_parent_checkpoint_id uuid,
    p_trigger              text,
    p_tags                 text[],
    p_summary              text,
    p_metadata             jsonb,
    p_messages             jsonb,
    p_state                jsonb,
    p_tool_results         jsonb,
    p_next_node            text,
    p_size_bytes           bigint,
    p_delta_run            integer DEFAULT 50,
    p_message_digests      bytea DEFAULT NULL,
    p_state_digests        jsonb DEFAULT NULL,
    p_tool_results_digests jsonb DEFAULT NULL,
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
-- Every statement here is a lookup by key: a generic plan is always right,
-- and re-planning per call would double the cost.
SET plan_cache_mode = force_generic_plan
AS $$
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
    v_thread_seen boolean;
    v_rewound_to  uuid;
    v_wanted      uuid;
    v_last_seq    bigint;
    v_parent_id   uuid;
    v_parent_step bigint;
    -- What is stored: the whole snapshot unless a delta is chosen.
    v_format    text := 'full';
    v_depth     integer := 0;
    v_run       integer := 0;
    -- The base candidate: the parent, or the anchor its run started from.
    -- (Scalars, not a record: a record variable costs each call about a
    -- fifth of the function's time.)
    v_base_id     uuid;
    v_base_depth  integer;
    v_base_run    integer;
    v_base_count  integer;
    v_base_digest bytea;
    v_base_state  jsonb;
    v_base_tools  jsonb;
    v_put_msgs  jsonb := v_messages;
    v_put_state jsonb := v_state;
    v_put_tools jsonb := v_tools;
    v_state_rm  text[] := '{}';
    v_tools_rm  text[] := '{}';
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

    PERFORM pg_advisory_xact_lock(1885563760, hashtext(p_thread_id)); -- pgcheckpoint.lock_thread
    -- Then the id's, so that the check below sees any other write of this
    -- id, on any thread (ids are unique in the whole table); and the
    -- table's ROW EXCLUSIVE lock before the check (see lock_checkpoint_id).
    PERFORM pgcheckpoint.lock_checkpoint_id(p_checkpoint_id);
    LOCK TABLE pgcheckpoint.checkpoints IN ROW EXCLUSIVE MODE;

    -- One row unless the id exists already (a retry): the thread row, the
    -- newest checkpoint, and the parent, which is the wanted one (given, or
    -- rewound to) when there is one, else the newest.
    SELECT t.thread_id IS NOT NULL, t.rewound_to, coalesce(p_parent_checkpoint_id, t.rewound_to), l.seq,
           p.checkpoint_id, p.step, p.delta_depth, p.delta_run, p.messages_count, p.messages_digest,
           p.state_digests, p.tool_results_digests
      INTO v_thread_seen, v_rewound_to, v_wanted, v_last_seq, v_parent_id, v_parent_step, v_base_depth,
           v_base_run, v_base_count, v_base_digest, v_base_state, v_base_tools
    FROM (SELECT 1) AS one
    LEFT JOIN pgcheckpoint.threads t
           ON t.thread_id = p_thread_id AND t.namespace = v_ns
    LEFT JOIN LATERAL (
        SELECT c.checkpoint_id, c.seq
        FROM pgcheckpoint.checkpoints c
        WHERE c.thread_id = p_thread_id AND c.namespace = v_ns
        ORDER BY c.seq DESC
        LIMIT 1) l ON true
    -- By id alone, then thread and namespace checked on the row: given the
    -- thread too, a plan made before the table has statistics may walk the
    -- thread's primary key instead, reading every checkpoint.
    LEFT JOIN LATERAL (
        SELECT c.*
        FROM (SELECT c.checkpoint_id, c.step, c.delta_depth, c.delta_run, c.messages_count, c.messages_digest,
                     c.state_digests, c.tool_results_digests, c.thread_id, c.namespace
              FROM pgcheckpoint.checkpoints c
              WHERE c.checkpoint_id = coalesce(p_parent_checkpoint_id, t.rewound_to, l.checkpoint_id)
              LIMIT 1) c
        WHERE c.thread_id = p_thread_id AND c.namespace = v_ns) p ON true
    WHERE NOT EXISTS (SELECT 1 FROM pgcheckpoint.checkpoints e WHERE e.checkpoint_id = p_checkpoint_id);

    checkpoint_id := p_checkpoint_id;
    IF NOT FOUND THEN
        -- A retry of an existing checkpoint: the same content is a no-op.
        SELECT c.thread_id, c.namespace, c.parent_checkpoint_id, c.step, c.created_at,
               c.thread_id = p_thread_id AND c.namespace = v_ns
               AND m.messages = v_messages AND m.state = v_state AND m.tool_results = v_tools
               AND c.metadata = v_metadata AND c.next_node = coalesce(p_next_node, '')
          INTO thread_id, namespace, parent_checkpoint_id, step, created_at, v_same
        FROM pgcheckpoint.checkpoints c
        CROSS JOIN LATERAL pgcheckpoint.materialize(c.checkpoint_id) m
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
        v_msg_sum := pgcheckpoint.list_digest_at(v_msg_dig, v_msg_count);
        IF v_state_dig IS NULL OR v_tools_dig IS NULL THEN
            SELECT coalesce(v_state_dig, pgcheckpoint.key_digests(v_state)),
                   coalesce(v_tools_dig, pgcheckpoint.key_digests(v_tools))
              INTO v_state_dig, v_tools_dig;
        END IF;

        -- The base: the parent, unless its run is as long as allowed; then
        -- the anchor the run started from (found by following the run's
        -- base links back), unless the anchors are as deep as allowed.
        IF v_base_run + 1 < p_delta_run THEN
            v_base_id := v_parent_id;
        ELSIF v_parent_id IS NOT NULL THEN
            WITH RECURSIVE run AS (
                SELECT c.* FROM (
                    SELECT c.checkpoint_id, c.base_checkpoint_id, c.delta_run, c.delta_depth, c.messages_count,
                           c.messages_digest, c.state_digests, c.tool_results_digests, c.thread_id, c.namespace
                    FROM pgcheckpoint.checkpoints c
                    WHERE c.checkpoint_id = v_parent_id
                    LIMIT 1) c
                UNION ALL
                SELECT b.* FROM run r
                CROSS JOIN LATERAL (
                    SELECT b.checkpoint_id, b.base_checkpoint_id, b.delta_run, b.delta_depth, b.messages_count,
                           b.messages_digest, b.state_digests, b.tool_results_digests, b.thread_id, b.namespace
                    FROM pgcheckpoint.checkpoints b
                    WHERE b.checkpoint_id = r.base_checkpoint_id
                    LIMIT 1) b
                WHERE r.delta_run > 0
            )
            SELECT r.checkpoint_id, r.delta_depth, 0, r.messages_count, r.messages_digest,
                   r.state_digests, r.tool_results_digests
              INTO v_base_id, v_base_depth, v_base_run, v_base_count, v_base_digest, v_base_state, v_base_tools
            FROM run r
            WHERE r.delta_run = 0 AND r.thread_id = p_thread_id AND r.namespace = v_ns
              AND r.delta_depth + 1 < p_delta_run;
        END IF;

        -- A delta when the base's messages are a prefix of these (by digest)
        -- and the delta is smaller than the whole.
        IF v_base_id IS NOT NULL
           AND v_base_count <= v_msg_count
           AND v_base_state IS NOT NULL AND v_base_tools IS NOT NULL
           AND pgcheckpoint.list_digest_at(v_msg_dig, v_base_count) = v_base_digest
        THEN
            -- The common cases (nothing appended, state or tool results
            -- unchanged) cost a comparison.
            IF v_base_count < v_msg_count THEN
                v_put_msgs := jsonb_path_query_array(v_messages, '$[$n to last]',
                                                     jsonb_build_object('n', v_base_count));
            ELSE
                v_put_msgs := '[]';
            END IF;
            IF v_state_dig = v_base_state THEN
                v_put_state := '{}';
            ELSE
                SELECT (SELECT coalesce(jsonb_object_agg(e.key, v_state -> e.key), '{}') FROM jsonb_each(v_state_dig) e
                        WHERE e.value IS DISTINCT FROM v_base_state -> e.key),
                       ARRAY(SELECT k FROM jsonb_object_keys(v_base_state) k WHERE NOT v_state ? k ORDER BY k)
                  INTO v_put_state, v_state_rm;
            END IF;
            IF v_tools_dig = v_base_tools THEN
                v_put_tools := '{}';
            ELSE
                SELECT (SELECT coalesce(jsonb_object_agg(e.key, v_tools -> e.key), '{}') FROM jsonb_each(v_tools_dig) e
                        WHERE e.value IS DISTINCT FROM v_base_tools -> e.key),
                       ARRAY(SELECT k FROM jsonb_object_keys(v_base_tools) k WHERE NOT v_tools ? k ORDER BY k)
                  INTO v_put_tools, v_tools_rm;
            END IF;
            IF pg_column_size(v_put_msgs) + pg_column_size(v_put_state) + pg_column_size(v_put_tools)
               < pg_column_size(v_messages) + pg_column_size(v_state) + pg_column_size(v_tools) THEN
                v_format := 'delta';
                v_depth := v_base_depth + 1;
                v_run := CASE WHEN v_base_id = v_parent_id THEN v_base_run + 1 ELSE 0 END;
            ELSE
                v_base_id := NULL;
                v_put_msgs := v_messages;
                v_put_state := v_state;
                v_put_tools := v_tools;
                v_state_rm := '{}';
                v_tools_rm := '{}';
            END IF;
        ELSE
            v_base_id := NULL;
        END IF;
    END IF;

    INSERT INTO pgcheckpoint.checkpoints AS c (
        thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step,
        trigger, tags, summary, metadata, format, base_checkpoint_id, delta_run, delta_depth,
        messages, state, tool_results, state_removed, tool_results_removed, messages_count,
        messages_digest, state_digests, tool_results_digests, next_node, size_bytes)
    VALUES (
        p_thread_id, v_ns, coalesce(v_last_seq, 0) + 1, p_checkpoint_id, v_parent_id,
        coalesce(v_parent_step, 0) + 1, coalesce(p_trigger, 'manual'), coalesce(p_tags, '{}'),
        v_summary, v_metadata, v_format, v_base_id, v_run, v_depth, v_put_msgs, v_put_state, v_put_tools,
        v_state_rm, v_tools_rm, v_msg_count, v_msg_sum, v_state_dig, v_tools_dig,
        coalesce(p_next_node, ''), coalesce(p_size_bytes, 0))
    RETURNING c.parent_checkpoint_id, c.step, c.created_at
      INTO parent_checkpoint_id, step, created_at;

    IF NOT v_thread_seen THEN
        INSERT INTO pgcheckpoint.threads (thread_id, namespace) VALUES (p_thread_id, v_ns);
    ELSIF v_rewound_to IS NOT NULL THEN
        UPDATE pgcheckpoint.threads t SET rewound_to = NULL
        WHERE t.thread_id = p_thread_id AND t.namespace = v_ns;
    END IF;
    thread_id := p_thread_id;
    namespace := v_ns;
    inserted := true;
END;
$$;

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_append(
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

DROP FUNCTION pgcheckpoint.thread_after_write(text, text);
DROP FUNCTION pgcheckpoint.checkpoint_delta(jsonb, jsonb, jsonb, bytea, jsonb, jsonb, uuid, integer, integer, integer, bytea,
    jsonb, jsonb, integer);
DROP FUNCTION pgcheckpoint.delta_keys(jsonb, jsonb, jsonb);
DROP FUNCTION pgcheckpoint.run_anchor(uuid, integer);
DROP FUNCTION pgcheckpoint.thread_head_for_write(text, text, uuid, uuid);
DROP FUNCTION pgcheckpoint.delta_run_continues(integer, integer);
DROP FUNCTION pgcheckpoint.message_summary(jsonb);
