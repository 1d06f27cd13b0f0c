-- Delta snapshots: a checkpoint may store only what changed since an
-- ancestor (its base), and pgcheckpoint.materialize() rebuilds it in plain
-- SQL.
--
-- A delta checkpoint (format 'delta') holds, against its base, an ancestor
-- in the same thread and namespace:
--   messages      the messages appended to the base's (a JSON array);
--   state         the top-level state keys set or changed (a JSON object);
--   state_removed the top-level state keys the base had and this one lacks;
--   tool_results, tool_results_removed: likewise for tool results.
-- The base is the parent, except at the end of a run: after R-1 deltas in a
-- row on their parents (R, the run limit, is the writer's choice, default
-- 50), the next checkpoint's base is where that run started (an anchor: a
-- full checkpoint or an earlier anchor), and after R-1 anchors in a row the
-- next is stored whole. So a read follows at most 2(R-1) links, and storage
-- grows with what changed: an anchor holds the messages of one run, not the
-- whole conversation. Anything else (an edited or dropped message, a delta
-- no smaller than the whole, a base missing digests) is stored whole (format
-- 'full'). Metadata, tags, summary and next node are always stored whole.
--
-- To tell an append from an edit without reading the parent's messages, each
-- checkpoint keeps digests of its whole content: a digest of its message
-- list (from a 16-byte digest per message) and one per state and tool
-- result key.

ALTER TABLE pgcheckpoint.checkpoints
    DROP CONSTRAINT checkpoints_format_known,
    ADD CONSTRAINT checkpoints_format_known CHECK (format IN ('full', 'delta')),
    ADD COLUMN base_checkpoint_id   uuid,
    ADD COLUMN delta_run            integer NOT NULL DEFAULT 0,
    ADD COLUMN delta_depth          integer NOT NULL DEFAULT 0,
    ADD COLUMN state_removed        text[]  NOT NULL DEFAULT '{}',
    ADD COLUMN tool_results_removed text[]  NOT NULL DEFAULT '{}',
    ADD COLUMN messages_count       integer,
    ADD COLUMN messages_digest      bytea,
    ADD COLUMN state_digests        jsonb,
    ADD COLUMN tool_results_digests jsonb;

COMMENT ON COLUMN pgcheckpoint.checkpoints.format IS
    '''full'': messages, state and tool_results hold the whole snapshot. ''delta'': they hold only the changes since base_checkpoint_id (an ancestor in the same thread and namespace); read it with pgcheckpoint.materialize(checkpoint_id).';
COMMENT ON COLUMN pgcheckpoint.checkpoints.messages IS
    'The conversation as a JSON array (format ''delta'': only the messages appended to the base''s), lz4-compressed when large. Strings are NUL-escaped: U+0000 is stored as U+0001 ''0'' and U+0001 as U+0001 U+0001 (jsonb cannot hold U+0000).';
COMMENT ON COLUMN pgcheckpoint.checkpoints.state IS
    'The agent''s state as a JSON object (format ''delta'': only the top-level keys set or changed since the base), NUL-escaped like messages.';
COMMENT ON COLUMN pgcheckpoint.checkpoints.tool_results IS
    'Tool results as a JSON object, stored whole (format ''delta'': only the top-level keys set or changed since the base), NUL-escaped like messages.';
COMMENT ON COLUMN pgcheckpoint.checkpoints.base_checkpoint_id IS
    'Format ''delta'': the checkpoint this one is a delta against: the parent, or at the end of a run the anchor the run started from. NULL for a full snapshot.';
COMMENT ON COLUMN pgcheckpoint.checkpoints.delta_run IS
    'Format ''delta'': how many deltas on their parents lead back to the anchor (full snapshot or anchor) of this run; 0 for a full snapshot or an anchor.';
COMMENT ON COLUMN pgcheckpoint.checkpoints.delta_depth IS
    'How many base links lead from this checkpoint to a full one, at most (a read follows them): 0 for a full snapshot.';
COMMENT ON COLUMN pgcheckpoint.checkpoints.state_removed IS 'Format ''delta'': the top-level state keys of the base that this checkpoint no longer has.';
COMMENT ON COLUMN pgcheckpoint.checkpoints.tool_results_removed IS 'Format ''delta'': the tool result keys of the base that this checkpoint no longer has.';
COMMENT ON COLUMN pgcheckpoint.checkpoints.messages_count IS 'The number of messages of the whole snapshot (either format). NULL on rows written before delta storage.';
COMMENT ON COLUMN pgcheckpoint.checkpoints.messages_digest IS
    'SHA-256 of the concatenated 16-byte per-message digests of the whole message list: a descendant whose first messages_count digests hash to this is an append. NULL: unknown (a child is stored whole).';
COMMENT ON COLUMN pgcheckpoint.checkpoints.state_digests IS
    'Per top-level state key, a digest of its value (base64 of 16 bytes of SHA-256 of its text: as the engine sent it, or as jsonb spells it for writes from SQL), for the whole state: what a descendant compares to find changed keys. NULL: unknown.';
COMMENT ON COLUMN pgcheckpoint.checkpoints.tool_results_digests IS 'Like state_digests, for tool_results.';

-- Per-message digests computed by the database: 16 bytes of SHA-256 of each
-- element's jsonb text, concatenated. The engine sends its own (16 bytes of
-- SHA-256 of each element's text as sent), which saves the database this
-- work. The two agree only where the text sent is spelled as jsonb spells
-- it; where they disagree the checkpoint is stored whole, never as a wrong
-- delta.
CREATE FUNCTION pgcheckpoint.message_digests(p_messages jsonb)
RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(string_agg(substring(sha256(convert_to(e.value::text, 'UTF8')) FROM 1 FOR 16), ''::bytea
                               ORDER BY e.ordinality), ''::bytea)
    FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS e
$$;

COMMENT ON FUNCTION pgcheckpoint.message_digests IS
    'The per-message digests of a JSON array as the database computes them: 16 bytes of SHA-256 of each element''s jsonb text, concatenated.';

CREATE FUNCTION pgcheckpoint.key_digests(p_object jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(jsonb_object_agg(e.key,
               encode(substring(sha256(convert_to(e.value::text, 'UTF8')) FROM 1 FOR 16), 'base64')), '{}')
    FROM jsonb_each(p_object) AS e
$$;

COMMENT ON FUNCTION pgcheckpoint.key_digests IS
    'Per top-level key of a JSON object, base64 of 16 bytes of SHA-256 of the value''s jsonb text.';

-- materialize rebuilds a checkpoint's whole content. A full checkpoint is
-- returned as stored. A delta one is rebuilt from its chain: the checkpoint,
-- its base, and so on back to a full one (delta_depth links), each a lookup
-- by checkpoint id in the same thread and namespace. Messages are the full
-- one's followed by each delta's appended ones, oldest first; a state or
-- tool result key takes its value from the nearest checkpoint in the chain
-- that sets it, unless a nearer one removed it.
CREATE FUNCTION pgcheckpoint.materialize(p_checkpoint_id uuid)
RETURNS TABLE (messages jsonb, state jsonb, tool_results jsonb)
LANGUAGE plpgsql STABLE
ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_format   text;
    v_base     text;
    v_messages jsonb;
    v_state    jsonb;
    v_tools    jsonb;
BEGIN
    SELECT c.format, c.messages, c.state, c.tool_results
      INTO v_format, v_messages, v_state, v_tools
    FROM pgcheckpoint.checkpoints c
    WHERE c.checkpoint_id = p_checkpoint_id
    LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF v_format = 'full' THEN
        RETURN QUERY SELECT v_messages, v_state, v_tools;
        RETURN;
    END IF;

    WITH RECURSIVE chain AS (
        SELECT 0 AS depth, c.thread_id, c.namespace, c.base_checkpoint_id, c.format,
               c.messages, c.state, c.tool_results, c.state_removed, c.tool_results_removed
        FROM pgcheckpoint.checkpoints c
        WHERE c.checkpoint_id = p_checkpoint_id
        UNION ALL
        -- The base by id alone, then checked to be in the same thread and
        -- namespace (see checkpoint_put).
        SELECT ch.depth + 1, p.thread_id, p.namespace, p.base_checkpoint_id, p.format,
               p.messages, p.state, p.tool_results, p.state_removed, p.tool_results_removed
        FROM chain ch
        CROSS JOIN LATERAL (
            SELECT * FROM pgcheckpoint.checkpoints p
            WHERE p.checkpoint_id = ch.base_checkpoint_id
            LIMIT 1) p
        WHERE ch.format = 'delta' AND p.thread_id = ch.thread_id AND p.namespace = ch.namespace
    ), base AS (
        SELECT * FROM chain ORDER BY depth DESC LIMIT 1
    ), keyed AS (
        -- Every key a chain member sets or removes; the nearest one wins.
        SELECT DISTINCT ON (k.part, k.key) k.part, k.key, k.value, k.removed
        FROM (
            SELECT ch.depth, 's' AS part, e.key, e.value, false AS removed FROM chain ch, jsonb_each(ch.state) e
            UNION ALL
            SELECT ch.depth, 's', r, NULL, true FROM chain ch, unnest(ch.state_removed) r
            UNION ALL
            SELECT ch.depth, 't', e.key, e.value, false FROM chain ch, jsonb_each(ch.tool_results) e
            UNION ALL
            SELECT ch.depth, 't', r, NULL, true FROM chain ch, unnest(ch.tool_results_removed) r
        ) k
        ORDER BY k.part, k.key, k.depth
    )
    SELECT b.format,
           b.messages || coalesce((SELECT jsonb_agg(e.value ORDER BY ch.depth DESC, e.ordinality)
                                   FROM chain ch, jsonb_array_elements(ch.messages) WITH ORDINALITY e
                                   WHERE ch.depth < b.depth), '[]'),
           coalesce((SELECT jsonb_object_agg(k.key, k.value) FROM keyed k WHERE k.part = 's' AND NOT k.removed), '{}'),
           coalesce((SELECT jsonb_object_agg(k.key, k.value) FROM keyed k WHERE k.part = 't' AND NOT k.removed), '{}')
      INTO v_base, v_messages, v_state, v_tools
    FROM base b;

    IF v_base IS DISTINCT FROM 'full' THEN
        RAISE EXCEPTION 'checkpoint % cannot be rebuilt: its chain of deltas does not reach a full snapshot', p_checkpoint_id
            USING ERRCODE = 'PC004';
    END IF;
    RETURN QUERY SELECT v_messages, v_state, v_tools;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.materialize IS
    'The whole messages, state and tool_results of a checkpoint, in either format (no row for an unknown id). Usage: SELECT * FROM pgcheckpoint.materialize(''<checkpoint id>''). Error PC004: a delta chain that does not reach a full snapshot (a damaged table).';

-- delete_checkpoints is the one way pgcheckpoint deletes some checkpoints of
-- a thread and keeps others. A kept delta checkpoint whose base is deleted
-- would lose it, so it is first rewritten whole (a rebase), from what the
-- table holds before the delete; the deltas on it then rest on a full one.
-- A thread rewound to a deleted checkpoint is no longer rewound (its head
-- becomes the newest checkpoint).
CREATE FUNCTION pgcheckpoint.delete_checkpoints(p_checkpoint_ids uuid[])
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_threads text[];
    v_count   bigint;
BEGIN
    -- The lock of every thread touched, in lock key order: the order of
    -- every function that takes several, so that none deadlocks with
    -- another. A caller holding some already takes them again at no cost.
    v_threads := ARRAY(
        SELECT DISTINCT c.thread_id
        FROM unnest(p_checkpoint_ids) i
        CROSS JOIN LATERAL (
            SELECT c.thread_id FROM pgcheckpoint.checkpoints c WHERE c.checkpoint_id = i) c);
    PERFORM pg_advisory_xact_lock(1885563760, k.h)
    FROM (SELECT DISTINCT hashtext(x) AS h FROM unnest(v_threads) x) k
    ORDER BY k.h;

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
        FROM orphans o CROSS JOIN LATERAL pgcheckpoint.materialize(o.checkpoint_id) m
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
$$;

COMMENT ON FUNCTION pgcheckpoint.delete_checkpoints IS
    'Deletes the given checkpoints (with their pending writes) under their threads'' locks, first rewriting as full snapshots the kept delta checkpoints that build on them, so every kept checkpoint stays readable; a thread rewound to a deleted checkpoint is no longer rewound. Returns the number deleted.';

-- checkpoint_put, now storing deltas. New parameters: p_delta_run, the run
-- limit R (1: every checkpoint is stored whole and no digests are kept),
-- and the digests of the new content as the engine
-- computes them: p_message_digests (16 bytes per message) and
-- p_state_digests, p_tool_results_digests ({"key": base64 of 16 bytes}).
-- NULL digests are computed by the database (slower: SHA-256 in SQL). A
-- caller that passes digests vouches for them: digests that do not match the
-- content make a wrong delta.
DROP FUNCTION pgcheckpoint.checkpoint_put(text, text, uuid, uuid, text, text[], text, jsonb, jsonb, jsonb, jsonb, text, bigint);

CREATE FUNCTION pgcheckpoint.checkpoint_put(
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
    v_last      jsonb;
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
    -- Digests of the whole new content (none when p_delta_run = 1).
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
    IF octet_length(p_message_digests) <> 16 * v_msg_count THEN
        RAISE EXCEPTION 'message_digests must hold 16 bytes per message (% messages, % bytes)',
            v_msg_count, octet_length(p_message_digests) USING ERRCODE = 'PC003';
    END IF;
    IF jsonb_typeof(p_state_digests) IS DISTINCT FROM 'object' AND p_state_digests IS NOT NULL
       OR jsonb_typeof(p_tool_results_digests) IS DISTINCT FROM 'object' AND p_tool_results_digests IS NOT NULL THEN
        RAISE EXCEPTION 'state_digests and tool_results_digests must be JSON objects' USING ERRCODE = 'PC003';
    END IF;
    IF v_summary = '' THEN
        v_last := v_messages -> -1;
        IF jsonb_typeof(v_last) = 'object' THEN
            v_summary := format('[%s] %s',
                coalesce(v_last ->> 'role', 'unknown'),
                left(coalesce(v_last ->> 'content', ''), 100));
        ELSE
            v_summary := format('State: %s keys', (SELECT count(*) FROM jsonb_object_keys(v_state)));
        END IF;
    END IF;

    PERFORM pg_advisory_xact_lock(1885563760, hashtext(p_thread_id)); -- pgcheckpoint.lock_thread

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
        v_msg_dig := coalesce(p_message_digests, pgcheckpoint.message_digests(v_messages));
        v_msg_sum := sha256(v_msg_dig);
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
           AND sha256(substring(v_msg_dig FROM 1 FOR 16 * v_base_count)) = v_base_digest
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

COMMENT ON FUNCTION pgcheckpoint.checkpoint_put IS
    'Writes one checkpoint on a thread under the thread lock, as a child of the head (or of the given parent), which makes it the head. step = parent step + 1. Stored as a delta against the parent (or the anchor of its run) when the messages are an append and the delta is smaller (see checkpoints.format); p_delta_run = 1 stores every checkpoint whole. Idempotent on checkpoint_id. Errors: PC001 parent not found, PC002 id reused for other content, PC003 invalid argument.';

-- The functions that copy content or delete some of a thread's checkpoints,
-- made delta-aware: copies read whole content through materialize(), and
-- partial deletes go through delete_checkpoints().

CREATE OR REPLACE FUNCTION pgcheckpoint.branch(p_source_id uuid, p_new_thread_id text, p_branch_name text, p_checkpoint_id uuid)
RETURNS TABLE (thread_id text, checkpoint_id uuid, step bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_src pgcheckpoint.checkpoints%ROWTYPE;
BEGIN
    IF p_new_thread_id IS NULL OR length(p_new_thread_id) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'thread_id must be 1 to 255 characters' USING ERRCODE = 'PC003';
    END IF;
    PERFORM pg_advisory_xact_lock(1885563760, hashtext(p_new_thread_id));
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
    FROM pgcheckpoint.materialize(p_source_id) m;
    IF NOT FOUND THEN
        -- Deleted since it was read (the source's thread lock is not held).
        RAISE EXCEPTION 'source checkpoint % not found', p_source_id USING ERRCODE = 'PC001';
    END IF;
    RETURN QUERY SELECT p_new_thread_id, p_checkpoint_id, v_src.step + 1;
END;
$$;

CREATE OR REPLACE FUNCTION pgcheckpoint.merge(p_branch_thread_id text, p_into_thread_id text, p_checkpoint_id uuid)
RETURNS TABLE (thread_id text, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_src pgcheckpoint.checkpoints%ROWTYPE;
    v_put record;
BEGIN
    SELECT * INTO v_src FROM pgcheckpoint.checkpoints c
    WHERE c.thread_id = p_branch_thread_id AND c.namespace = ''
      AND c.seq = pgcheckpoint.head_seq(p_branch_thread_id, '');
    IF NOT FOUND THEN
        RAISE EXCEPTION 'branch thread % has no checkpoint', p_branch_thread_id USING ERRCODE = 'PC001';
    END IF;
    IF p_branch_thread_id = p_into_thread_id THEN
        RAISE EXCEPTION 'cannot merge thread % into itself', p_into_thread_id USING ERRCODE = 'PC003';
    END IF;
    SELECT m.* INTO v_src.messages, v_src.state, v_src.tool_results
    FROM pgcheckpoint.materialize(v_src.checkpoint_id) m;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'branch thread % has no checkpoint', p_branch_thread_id USING ERRCODE = 'PC001';
    END IF;
    SELECT * INTO v_put FROM pgcheckpoint.checkpoint_put(
        p_into_thread_id, '', p_checkpoint_id, NULL, 'manual', ARRAY['merge'],
        format('Merge of %s', p_branch_thread_id), v_src.metadata, v_src.messages, v_src.state,
        v_src.tool_results, v_src.next_node, v_src.size_bytes);
    IF v_put.inserted THEN
        UPDATE pgcheckpoint.checkpoints c SET merge_parent_id = v_src.checkpoint_id
        WHERE c.checkpoint_id = p_checkpoint_id;
    END IF;
    RETURN QUERY SELECT p_into_thread_id, p_checkpoint_id, v_put.parent_checkpoint_id, v_src.checkpoint_id, v_put.step;
END;
$$;

CREATE OR REPLACE FUNCTION pgcheckpoint.copy_thread(p_source_thread_id text, p_target_thread_id text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count bigint;
BEGIN
    IF p_target_thread_id IS NULL OR length(p_target_thread_id) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'thread_id must be 1 to 255 characters' USING ERRCODE = 'PC003';
    END IF;
    IF p_source_thread_id = p_target_thread_id THEN
        RAISE EXCEPTION 'cannot copy thread % onto itself', p_source_thread_id USING ERRCODE = 'PC003';
    END IF;
    -- Both locks, in a fixed order, so two crossed copies cannot deadlock.
    PERFORM pg_advisory_xact_lock(1885563760, hashtext(x))
    FROM unnest(ARRAY[p_source_thread_id, p_target_thread_id]) x ORDER BY hashtext(x);
    IF NOT EXISTS (SELECT 1 FROM pgcheckpoint.threads t WHERE t.thread_id = p_source_thread_id) THEN
        RAISE EXCEPTION 'thread % not found', p_source_thread_id USING ERRCODE = 'PC001';
    END IF;
    IF EXISTS (SELECT 1 FROM pgcheckpoint.threads t WHERE t.thread_id = p_target_thread_id) THEN
        RAISE EXCEPTION 'thread % already exists', p_target_thread_id USING ERRCODE = 'PC003';
    END IF;

    CREATE TEMP TABLE pgcheckpoint_copy_map ON COMMIT DROP AS
    SELECT c.checkpoint_id AS old_id, pgcheckpoint.uuid_v7() AS new_id
    FROM pgcheckpoint.checkpoints c
    WHERE c.thread_id = p_source_thread_id
    ORDER BY c.namespace, c.seq;

    INSERT INTO pgcheckpoint.threads (thread_id, namespace, rewound_to, metadata, created_at,
                                      branch_name, branched_from, branched_from_thread)
    SELECT p_target_thread_id, t.namespace, m.new_id, t.metadata, t.created_at,
           t.branch_name, t.branched_from, t.branched_from_thread
    FROM pgcheckpoint.threads t
    LEFT JOIN pgcheckpoint_copy_map m ON m.old_id = t.rewound_to
    WHERE t.thread_id = p_source_thread_id;

    -- Deltas are copied as deltas: their bases are in the same thread and
    -- are copied too, with the links mapped.
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
    JOIN pgcheckpoint_copy_map m ON m.old_id = c.checkpoint_id
    LEFT JOIN pgcheckpoint_copy_map p ON p.old_id = c.parent_checkpoint_id
    LEFT JOIN pgcheckpoint_copy_map mp ON mp.old_id = c.merge_parent_id
    LEFT JOIN pgcheckpoint_copy_map b ON b.old_id = c.base_checkpoint_id
    WHERE c.thread_id = p_source_thread_id;
    GET DIAGNOSTICS v_count = ROW_COUNT;

    INSERT INTO pgcheckpoint.pending_writes (thread_id, namespace, checkpoint_seq, checkpoint_id, task_id,
                                             idx, channel, value, created_at)
    SELECT p_target_thread_id, w.namespace, w.checkpoint_seq, m.new_id, w.task_id, w.idx, w.channel,
           w.value, w.created_at
    FROM pgcheckpoint.pending_writes w
    JOIN pgcheckpoint_copy_map m ON m.old_id = w.checkpoint_id
    WHERE w.thread_id = p_source_thread_id;

    DROP TABLE pgcheckpoint_copy_map;
    RETURN v_count;
END;
$$;

CREATE OR REPLACE FUNCTION pgcheckpoint.rewind(p_checkpoint_id uuid, p_truncate boolean DEFAULT false)
RETURNS TABLE (
    thread_id       text,
    namespace       text,
    checkpoint_id   uuid,
    step            bigint,
    head_step       bigint,
    checkpoints     bigint,
    truncated       bigint
)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
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
    PERFORM pg_advisory_xact_lock(1885563760, hashtext(v_thread));
    -- Read again under the lock: it may have been deleted meanwhile.
    SELECT c.step INTO v_step
    FROM pgcheckpoint.checkpoints c WHERE c.checkpoint_id = p_checkpoint_id LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'checkpoint % not found', p_checkpoint_id USING ERRCODE = 'PC001';
    END IF;
    v_head_seq := pgcheckpoint.head_seq(v_thread, v_ns);
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
            FROM pgcheckpoint.lineage(v_head_id, greatest(v_head_step - v_step, 0)::integer) l
        )
        SELECT pgcheckpoint.delete_checkpoints(array_agg(l.checkpoint_id)) INTO v_truncated
        FROM line l
        WHERE l.depth < (SELECT min(x.depth) FROM line x WHERE x.checkpoint_id = p_checkpoint_id)
          AND l.thread_id = v_thread AND l.namespace = v_ns;
        v_truncated := coalesce(v_truncated, 0);
    END IF;

    UPDATE pgcheckpoint.threads t SET rewound_to = p_checkpoint_id
    WHERE t.thread_id = v_thread AND t.namespace = v_ns;

    RETURN QUERY SELECT v_thread, v_ns, p_checkpoint_id, v_step, v_head_step, v_count, v_truncated;
END;
$$;

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_delete_before(p_thread_id text, p_namespace text, p_step bigint)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head_seq bigint;
BEGIN
    PERFORM pgcheckpoint.lock_thread(p_thread_id);
    v_head_seq := pgcheckpoint.head_seq(p_thread_id, p_namespace);
    RETURN pgcheckpoint.delete_checkpoints(ARRAY(
        SELECT c.checkpoint_id FROM pgcheckpoint.checkpoints c
        WHERE c.thread_id = p_thread_id AND c.namespace = p_namespace
          AND c.step < p_step
          AND c.seq IS DISTINCT FROM v_head_seq));
END;
$$;

CREATE OR REPLACE FUNCTION pgcheckpoint.delete_for_runs(p_run_ids text[])
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- delete_checkpoints takes the threads' locks, then reads the rows again.
    RETURN pgcheckpoint.delete_checkpoints(ARRAY(
        SELECT c.checkpoint_id FROM pgcheckpoint.checkpoints c, unnest(p_run_ids) r
        WHERE c.metadata @> jsonb_build_object('run_id', r)));
END;
$$;

CREATE OR REPLACE FUNCTION pgcheckpoint.prune(p_thread_ids text[], p_keep_latest boolean)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_thread text;
    v_n      bigint;
    v_count  bigint := 0;
BEGIN
    -- Every lock first, in lock key order (see delete_checkpoints).
    PERFORM pg_advisory_xact_lock(1885563760, k.h)
    FROM (SELECT DISTINCT hashtext(x) AS h FROM unnest(p_thread_ids) x) k
    ORDER BY k.h;
    FOR v_thread IN SELECT DISTINCT x FROM unnest(p_thread_ids) x ORDER BY 1 LOOP
        IF p_keep_latest THEN
            WITH heads AS MATERIALIZED (
                SELECT t.namespace, pgcheckpoint.head_seq(t.thread_id, t.namespace) AS seq
                FROM pgcheckpoint.threads t
                WHERE t.thread_id = v_thread
            )
            SELECT pgcheckpoint.delete_checkpoints(ARRAY(
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
$$;
