-- Time travel, branches, merges and the checkpoint tree.

ALTER TABLE pgcheckpoint.threads
    ADD COLUMN branch_name        text,
    ADD COLUMN branched_from      uuid,
    ADD COLUMN branched_from_thread text;

COMMENT ON COLUMN pgcheckpoint.threads.branch_name IS 'For a branch: the name it was given.';
COMMENT ON COLUMN pgcheckpoint.threads.branched_from IS 'For a branch: the checkpoint it was forked from (its first checkpoint''s parent).';
COMMENT ON COLUMN pgcheckpoint.threads.branched_from_thread IS 'For a branch: the thread of the checkpoint it was forked from.';

-- Branches(thread) and the tree's walk from a thread to its branches.
CREATE INDEX threads_branched_from_thread_idx ON pgcheckpoint.threads (branched_from_thread)
    WHERE branched_from_thread IS NOT NULL;

ALTER TABLE pgcheckpoint.checkpoints ADD COLUMN merge_parent_id uuid;

COMMENT ON COLUMN pgcheckpoint.checkpoints.merge_parent_id IS 'For a merge: the head of the branch merged in, the second parent (parent_checkpoint_id is the first).';

-- The lineage of a checkpoint: the checkpoint itself (depth 0), its parent
-- (depth 1), and so on back to the root, across threads where a branch was
-- forked. Each step is one lookup by checkpoint id. p_max_depth bounds the
-- walk (NULL: no bound).
CREATE FUNCTION pgcheckpoint.lineage(p_checkpoint_id uuid, p_max_depth integer DEFAULT NULL)
RETURNS TABLE (
    depth                integer,
    thread_id            text,
    namespace            text,
    seq                  bigint,
    checkpoint_id        uuid,
    parent_checkpoint_id uuid,
    merge_parent_id      uuid,
    step                 bigint,
    created_at           timestamptz,
    trigger              text,
    tags                 text[],
    summary              text,
    metadata             jsonb,
    next_node            text,
    size_bytes           bigint
)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH RECURSIVE walk AS (
        SELECT 0 AS depth, c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id,
               c.merge_parent_id, c.step, c.created_at, c.trigger, c.tags, c.summary, c.metadata,
               c.next_node, c.size_bytes
        FROM (SELECT x.thread_id, x.namespace, x.seq, x.checkpoint_id, x.parent_checkpoint_id, x.merge_parent_id,
                     x.step, x.created_at, x.trigger, x.tags, x.summary, x.metadata, x.next_node, x.size_bytes
              FROM pgcheckpoint.checkpoints x WHERE x.checkpoint_id = p_checkpoint_id LIMIT 1) c
        UNION ALL
        SELECT w.depth + 1, c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id,
               c.merge_parent_id, c.step, c.created_at, c.trigger, c.tags, c.summary, c.metadata,
               c.next_node, c.size_bytes
        FROM walk w
        JOIN LATERAL (SELECT x.thread_id, x.namespace, x.seq, x.checkpoint_id, x.parent_checkpoint_id,
                             x.merge_parent_id, x.step, x.created_at, x.trigger, x.tags, x.summary,
                             x.metadata, x.next_node, x.size_bytes
                      FROM pgcheckpoint.checkpoints x
                      WHERE x.checkpoint_id = w.parent_checkpoint_id LIMIT 1) c ON true
        WHERE p_max_depth IS NULL OR w.depth < p_max_depth
    )
    SELECT * FROM walk
$$;

COMMENT ON FUNCTION pgcheckpoint.lineage IS
    'A checkpoint and its ancestors back to the root, newest first (depth 0 is the checkpoint), across branch threads. Usage: SELECT * FROM pgcheckpoint.lineage(''<id>'').';

-- The tree of a thread: every checkpoint of the thread and of the branches
-- forked from it, and from those, recursively, with both parents, so the
-- edges are (parent_checkpoint_id -> checkpoint_id) and
-- (merge_parent_id -> checkpoint_id).
CREATE FUNCTION pgcheckpoint.tree(p_thread_id text)
RETURNS TABLE (
    thread_id            text,
    namespace            text,
    seq                  bigint,
    checkpoint_id        uuid,
    parent_checkpoint_id uuid,
    merge_parent_id      uuid,
    step                 bigint,
    created_at           timestamptz,
    trigger              text,
    tags                 text[],
    summary              text,
    is_head              boolean
)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH RECURSIVE family AS (
        SELECT p_thread_id AS thread_id
        UNION
        SELECT t.thread_id
        FROM pgcheckpoint.threads t
        JOIN family f ON t.branched_from_thread = f.thread_id
    ), heads AS MATERIALIZED ( -- once per thread, not once per checkpoint
        SELECT t.thread_id, t.namespace, pgcheckpoint.head_seq(t.thread_id, t.namespace) AS head_seq
        FROM pgcheckpoint.threads t
        JOIN family f ON f.thread_id = t.thread_id
    )
    SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id,
           c.step, c.created_at, c.trigger, c.tags, c.summary, c.seq = h.head_seq AS is_head
    FROM heads h
    JOIN pgcheckpoint.checkpoints c ON c.thread_id = h.thread_id AND c.namespace = h.namespace
    ORDER BY c.thread_id, c.namespace, c.seq
$$;

COMMENT ON FUNCTION pgcheckpoint.tree IS
    'The checkpoints of a thread and of every branch forked from it (recursively), with both parents: the edges of the tree. Usage: SELECT * FROM pgcheckpoint.tree(''run-42'').';

-- rewind makes p_checkpoint_id the head of its thread: the next checkpoint
-- written there takes it as parent. Nothing is deleted unless p_truncate,
-- which deletes the checkpoints between the target and the head on the
-- head's line (the target's descendants on that line), and only those.
CREATE FUNCTION pgcheckpoint.rewind(p_checkpoint_id uuid, p_truncate boolean DEFAULT false)
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

COMMENT ON FUNCTION pgcheckpoint.rewind IS
    'Makes a checkpoint the head of its thread; the next write takes it as parent. Deletes nothing unless p_truncate, which deletes only the checkpoints after it on the head''s line. Error PC001: unknown checkpoint.';

-- branch starts a new thread whose first checkpoint is a copy of the source
-- checkpoint's content with the source as parent.
CREATE FUNCTION pgcheckpoint.branch(p_source_id uuid, p_new_thread_id text, p_branch_name text, p_checkpoint_id uuid)
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

COMMENT ON FUNCTION pgcheckpoint.branch IS
    'Forks a new thread from a checkpoint: its first checkpoint has the source as parent and the source''s content; the thread row records the branch name and source. Errors: PC001 unknown source, PC003 bad or existing thread id.';

-- merge writes, on the target thread, a checkpoint with the content of the
-- branch's head; its parent is the target's head and its merge parent the
-- branch's head.
CREATE FUNCTION pgcheckpoint.merge(p_branch_thread_id text, p_into_thread_id text, p_checkpoint_id uuid)
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

COMMENT ON FUNCTION pgcheckpoint.merge IS
    'Writes on the target thread a checkpoint with the branch head''s content; parent: the target''s head; merge_parent_id: the branch head. Errors: PC001 empty branch, PC003 merge into itself.';

-- A UUIDv7 made in SQL (Postgres 15 has none): 48 bits of Unix time in
-- milliseconds, then random bits, with the version and variant set.
CREATE FUNCTION pgcheckpoint.uuid_v7(p_at timestamptz DEFAULT clock_timestamp())
RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM p_at) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

COMMENT ON FUNCTION pgcheckpoint.uuid_v7 IS 'A new UUIDv7 (time-ordered) for the given time, default now.';

-- copy_thread copies every checkpoint of a thread (all namespaces), with
-- content, metadata, order (seq), steps and pending writes, to a new thread.
-- Checkpoint ids are global in pgcheckpoint (Get and idempotent retries look
-- them up alone), so the copies get new UUIDv7s; parent links inside the
-- thread are mapped to the new ids, links outside it (a branch's source) are
-- kept. The source is not changed.
CREATE FUNCTION pgcheckpoint.copy_thread(p_source_thread_id text, p_target_thread_id text)
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

COMMENT ON FUNCTION pgcheckpoint.copy_thread IS
    'Copies a thread (checkpoints in order, content, metadata, pending writes) to a new thread, with new checkpoint ids. Returns the number of checkpoints copied. Errors: PC001 unknown source, PC003 target exists or bad id.';

-- delete_for_runs deletes the checkpoints (and their pending writes) whose
-- metadata run_id is one of p_run_ids, under the lock of each thread touched.
CREATE FUNCTION pgcheckpoint.delete_for_runs(p_run_ids text[])
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

COMMENT ON FUNCTION pgcheckpoint.delete_for_runs IS
    'Deletes the checkpoints whose metadata has a run_id in the list, with their pending writes. Returns the number deleted.';

-- prune keeps, for each thread given, only the head of each namespace
-- (p_keep_latest) or deletes the threads whole.
CREATE FUNCTION pgcheckpoint.prune(p_thread_ids text[], p_keep_latest boolean)
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

COMMENT ON FUNCTION pgcheckpoint.prune IS
    'For each thread: keep only the head of each namespace (p_keep_latest) or delete the thread. Returns the number of checkpoints deleted.';
