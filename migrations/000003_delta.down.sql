-- Undoes 000003_delta.up.sql. Every delta checkpoint is first rewritten
-- whole, so no content is lost; then the functions of 000001 and 000002 come
-- back as they were.

WITH whole AS (
    SELECT c.thread_id, c.namespace, c.seq, m.messages, m.state, m.tool_results
    FROM pgcheckpoint.checkpoints c
    CROSS JOIN LATERAL pgcheckpoint.materialize(c.checkpoint_id) m
    WHERE c.format = 'delta'
)
UPDATE pgcheckpoint.checkpoints c
SET format = 'full', messages = w.messages, state = w.state, tool_results = w.tool_results
FROM whole w
WHERE c.thread_id = w.thread_id AND c.namespace = w.namespace AND c.seq = w.seq;

DROP FUNCTION pgcheckpoint.checkpoint_put(text, text, uuid, uuid, text, text[], text, jsonb, jsonb, jsonb, jsonb, text, bigint, integer, bytea, jsonb, jsonb);

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
    v_ns       text := coalesce(p_namespace, '');
    v_metadata jsonb := coalesce(p_metadata, '{}');
    v_messages jsonb := coalesce(p_messages, '[]');
    v_state    jsonb := coalesce(p_state, '{}');
    v_tools    jsonb := coalesce(p_tool_results, '{}');
    v_summary  text := coalesce(p_summary, '');
    v_last        jsonb;
    v_same        boolean;
    v_thread_seen boolean;
    v_rewound_to  uuid;
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
    IF v_summary = '' THEN
        v_last := v_messages -> -1;
        IF jsonb_typeof(v_last) = 'object' THEN
            v_summary := format('[%s] %s',
                coalesce(v_last ->> 'role', 'unknown'),
                left(coalesce(v_last ->> 'content', ''), 100));
        END IF;
    END IF;

    PERFORM pg_advisory_xact_lock(1885563760, hashtext(p_thread_id)); -- pgcheckpoint.lock_thread

    -- src has one row unless the id exists already (a retry); parent is the
    -- wanted parent (given, or rewound to) when there is one, else the newest
    -- checkpoint. No row is inserted when a wanted parent is missing.
    WITH src AS (
        SELECT t.thread_id IS NOT NULL AS thread_seen,
               t.rewound_to,
               coalesce(p_parent_checkpoint_id, t.rewound_to) AS wanted,
               CASE WHEN coalesce(p_parent_checkpoint_id, t.rewound_to) IS NULL
                    THEN l.checkpoint_id ELSE w.checkpoint_id END AS parent_id,
               CASE WHEN coalesce(p_parent_checkpoint_id, t.rewound_to) IS NULL
                    THEN l.step ELSE w.step END AS parent_step,
               l.seq AS last_seq,
               CASE WHEN v_summary = ''
                    THEN format('State: %s keys', (SELECT count(*) FROM jsonb_object_keys(v_state)))
                    ELSE v_summary END AS summary
        FROM (SELECT 1) AS one
        LEFT JOIN pgcheckpoint.threads t
               ON t.thread_id = p_thread_id AND t.namespace = v_ns
        LEFT JOIN LATERAL (
            SELECT c.checkpoint_id, c.step, c.seq
            FROM pgcheckpoint.checkpoints c
            WHERE c.thread_id = p_thread_id AND c.namespace = v_ns
            ORDER BY c.seq DESC
            LIMIT 1) l ON true
        -- By id alone, then thread and namespace checked on the row: given
        -- the thread too, a plan made before the table has statistics may
        -- walk the thread's primary key instead, reading every checkpoint.
        LEFT JOIN LATERAL (
            SELECT c.checkpoint_id, c.step
            FROM (SELECT c.checkpoint_id, c.step, c.thread_id, c.namespace
                  FROM pgcheckpoint.checkpoints c
                  WHERE c.checkpoint_id = coalesce(p_parent_checkpoint_id, t.rewound_to)
                  LIMIT 1) c
            WHERE c.thread_id = p_thread_id AND c.namespace = v_ns) w ON true
        WHERE NOT EXISTS (SELECT 1 FROM pgcheckpoint.checkpoints e WHERE e.checkpoint_id = p_checkpoint_id)
    ), ins AS (
        INSERT INTO pgcheckpoint.checkpoints AS c (
            thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step,
            trigger, tags, summary, metadata, messages, state, tool_results,
            next_node, size_bytes)
        SELECT p_thread_id, v_ns, coalesce(src.last_seq, 0) + 1, p_checkpoint_id, src.parent_id,
               coalesce(src.parent_step, 0) + 1, coalesce(p_trigger, 'manual'), coalesce(p_tags, '{}'),
               src.summary, v_metadata, v_messages, v_state, v_tools, coalesce(p_next_node, ''),
               coalesce(p_size_bytes, 0)
        FROM src
        WHERE src.wanted IS NULL OR src.parent_id IS NOT NULL
        RETURNING c.parent_checkpoint_id, c.step, c.created_at
    )
    SELECT ins.parent_checkpoint_id, ins.step, ins.created_at, src.thread_seen, src.rewound_to
      INTO parent_checkpoint_id, step, created_at, v_thread_seen, v_rewound_to
    FROM src JOIN ins ON true;

    checkpoint_id := p_checkpoint_id;
    IF FOUND THEN
        IF NOT v_thread_seen THEN
            INSERT INTO pgcheckpoint.threads (thread_id, namespace) VALUES (p_thread_id, v_ns);
        ELSIF v_rewound_to IS NOT NULL THEN
            UPDATE pgcheckpoint.threads t SET rewound_to = NULL
            WHERE t.thread_id = p_thread_id AND t.namespace = v_ns;
        END IF;
        thread_id := p_thread_id;
        namespace := v_ns;
        inserted := true;
        RETURN;
    END IF;

    -- Nothing inserted: a retry of an existing checkpoint, or a bad parent.
    SELECT c.thread_id, c.namespace, c.parent_checkpoint_id, c.step, c.created_at,
           c.thread_id = p_thread_id AND c.namespace = v_ns
           AND c.messages = v_messages AND c.state = v_state AND c.tool_results = v_tools
           AND c.metadata = v_metadata AND c.next_node = coalesce(p_next_node, '')
      INTO thread_id, namespace, parent_checkpoint_id, step, created_at, v_same
    FROM pgcheckpoint.checkpoints c
    WHERE c.checkpoint_id = p_checkpoint_id
    LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'parent checkpoint % not found in thread % namespace %',
            coalesce(p_parent_checkpoint_id::text, 'rewound-to'), p_thread_id, quote_literal(v_ns)
            USING ERRCODE = 'PC001';
    END IF;
    IF NOT v_same THEN
        RAISE EXCEPTION 'checkpoint % already exists with other content', p_checkpoint_id
            USING ERRCODE = 'PC002',
                  HINT = 'Use a new checkpoint id for a new checkpoint; reuse an id only to retry the same write.';
    END IF;
    inserted := false;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.checkpoint_put IS
    'Writes one checkpoint on a thread under the thread lock, as a child of the head (or of the given parent), which makes it the head. step = parent step + 1. Idempotent on checkpoint_id. Errors: PC001 parent not found, PC002 id reused for other content, PC003 invalid argument.';

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_delete_before(p_thread_id text, p_namespace text, p_step bigint)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count    bigint;
    v_head_seq bigint;
BEGIN
    PERFORM pgcheckpoint.lock_thread(p_thread_id);
    v_head_seq := pgcheckpoint.head_seq(p_thread_id, p_namespace);
    DELETE FROM pgcheckpoint.checkpoints c
    WHERE c.thread_id = p_thread_id AND c.namespace = p_namespace
      AND c.step < p_step
      AND c.seq IS DISTINCT FROM v_head_seq;
    GET DIAGNOSTICS v_count = ROW_COUNT;
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
        WITH line AS (
            SELECT l.checkpoint_id, l.depth FROM pgcheckpoint.lineage(v_head_id) l
        ), upto AS (
            SELECT l.checkpoint_id FROM line l
            WHERE l.depth < (SELECT min(x.depth) FROM line x WHERE x.checkpoint_id = p_checkpoint_id)
        )
        DELETE FROM pgcheckpoint.checkpoints c
        USING upto u
        WHERE c.checkpoint_id = u.checkpoint_id AND c.thread_id = v_thread AND c.namespace = v_ns;
        GET DIAGNOSTICS v_truncated = ROW_COUNT;
    END IF;

    UPDATE pgcheckpoint.threads t SET rewound_to = p_checkpoint_id
    WHERE t.thread_id = v_thread AND t.namespace = v_ns;

    RETURN QUERY SELECT v_thread, v_ns, p_checkpoint_id, v_step, v_head_step, v_count, v_truncated;
END;
$$;

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
    INSERT INTO pgcheckpoint.threads (thread_id, namespace, branch_name, branched_from, branched_from_thread)
    VALUES (p_new_thread_id, v_src.namespace, p_branch_name, p_source_id, v_src.thread_id);
    INSERT INTO pgcheckpoint.checkpoints (
        thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, step, trigger, tags,
        summary, metadata, format, messages, state, tool_results, next_node, size_bytes)
    VALUES (
        p_new_thread_id, v_src.namespace, 1, p_checkpoint_id, p_source_id, v_src.step + 1, 'manual',
        ARRAY['branch', p_branch_name], format('Branch %s from %s', quote_literal(p_branch_name), p_source_id),
        v_src.metadata, v_src.format, v_src.messages, v_src.state, v_src.tool_results, v_src.next_node,
        v_src.size_bytes);
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

    INSERT INTO pgcheckpoint.checkpoints (
        thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id, step,
        created_at, trigger, tags, summary, metadata, format, messages, state, tool_results,
        next_node, size_bytes)
    SELECT p_target_thread_id, c.namespace, c.seq, m.new_id,
           coalesce(p.new_id, c.parent_checkpoint_id), coalesce(mp.new_id, c.merge_parent_id), c.step,
           c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.format, c.messages, c.state,
           c.tool_results, c.next_node, c.size_bytes
    FROM pgcheckpoint.checkpoints c
    JOIN pgcheckpoint_copy_map m ON m.old_id = c.checkpoint_id
    LEFT JOIN pgcheckpoint_copy_map p ON p.old_id = c.parent_checkpoint_id
    LEFT JOIN pgcheckpoint_copy_map mp ON mp.old_id = c.merge_parent_id
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

CREATE OR REPLACE FUNCTION pgcheckpoint.delete_for_runs(p_run_ids text[])
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1885563760, hashtext(x.thread_id))
    FROM (SELECT DISTINCT c.thread_id
          FROM unnest(p_run_ids) r
          JOIN pgcheckpoint.checkpoints c ON c.metadata @> jsonb_build_object('run_id', r)) x
    ORDER BY hashtext(x.thread_id);
    DELETE FROM pgcheckpoint.checkpoints c
    USING unnest(p_run_ids) r
    WHERE c.metadata @> jsonb_build_object('run_id', r);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
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
    FOR v_thread IN SELECT DISTINCT x FROM unnest(p_thread_ids) x ORDER BY 1 LOOP
        IF p_keep_latest THEN
            PERFORM pg_advisory_xact_lock(1885563760, hashtext(v_thread));
            DELETE FROM pgcheckpoint.checkpoints c
            USING pgcheckpoint.threads t
            WHERE t.thread_id = v_thread AND c.thread_id = t.thread_id AND c.namespace = t.namespace
              AND c.seq <> coalesce(pgcheckpoint.head_seq(t.thread_id, t.namespace), 0);
            GET DIAGNOSTICS v_n = ROW_COUNT;
            UPDATE pgcheckpoint.threads t SET rewound_to = NULL WHERE t.thread_id = v_thread;
        ELSE
            v_n := pgcheckpoint.thread_delete(v_thread);
        END IF;
        v_count := v_count + v_n;
    END LOOP;
    RETURN v_count;
END;
$$;

DROP FUNCTION pgcheckpoint.delete_checkpoints(uuid[]);
DROP FUNCTION pgcheckpoint.materialize(uuid);
DROP FUNCTION pgcheckpoint.key_digests(jsonb);
DROP FUNCTION pgcheckpoint.message_digests(jsonb);

ALTER TABLE pgcheckpoint.checkpoints
    DROP COLUMN tool_results_digests,
    DROP COLUMN state_digests,
    DROP COLUMN messages_digest,
    DROP COLUMN messages_count,
    DROP COLUMN tool_results_removed,
    DROP COLUMN state_removed,
    DROP COLUMN delta_depth,
    DROP COLUMN delta_run,
    DROP COLUMN base_checkpoint_id,
    DROP CONSTRAINT checkpoints_format_known,
    ADD CONSTRAINT checkpoints_format_known CHECK (format IN ('full'));

COMMENT ON COLUMN pgcheckpoint.checkpoints.format IS 'How messages, state and tool_results are stored: ''full'' holds the whole snapshot.';
COMMENT ON COLUMN pgcheckpoint.checkpoints.messages IS 'The conversation as a JSON array, lz4-compressed when large. Strings are NUL-escaped: U+0000 is stored as U+0001 ''0'' and U+0001 as U+0001 U+0001 (jsonb cannot hold U+0000).';
COMMENT ON COLUMN pgcheckpoint.checkpoints.state IS 'The agent''s state as a JSON object (NUL-escaped like messages).';
COMMENT ON COLUMN pgcheckpoint.checkpoints.tool_results IS 'Tool results as a JSON object, stored whole (NUL-escaped like messages).';
