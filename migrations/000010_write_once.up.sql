-- Each rule of a write, written once, in a function every write path uses:
-- checkpoint_put, checkpoint_append and the engine's pipelined inserts
-- (queries/checkpoints.sql, CheckpointPutFast and CheckpointPutWhole).
--
--   thread_head_for_write       the head of a thread as a writer sees it: the parent
--                     (given, else the rewound-to checkpoint, else the
--                     newest), the next seq and step, and whether the new
--                     id is free
--   checkpoint_delta  what is stored of a content on a parent: the base
--                     (the parent while its run may grow, else the anchor
--                     of the run, see run_anchor), the prefix test by the
--                     chained list digest, the changed and removed keys
--                     (delta_keys), and the size test
--   delta_run_continues  the run limit
--   thread_after_write   the thread row after a write: created by the
--                     first, a pending rewind cleared
--
-- thread_head_for_write, checkpoint_delta, delta_keys and delta_run_continues are SQL
-- functions the planner inlines into the statement that calls them, so a
-- pipelined insert costs about what it did when the rules were written out
-- in it (a whole write about 4 microseconds of server CPU more: it now also
-- handles a given parent). Inlining forbids a SET clause (and STRICT or
-- VOLATILE for a table function): instead of SET search_path, every name
-- in them is schema-qualified (operators as OPERATOR(pg_catalog.=)), since
-- their text is parsed with the caller's search_path; an OPERATOR() has
-- one precedence whatever the operator, hence the parentheses. lock_thread
-- and list_digest_at lose their SET clause for the same reason:
-- lock_thread is inlined into the engine's lock statement, which then
-- needs no copy of the lock key.
--
-- checkpoints.format is set by checkpoint_delta alone (or copied from a row
-- it set, or checked by the engine's import), and is no longer a CHECK
-- constraint: as migration 1 says of the JSON shapes, Postgres re-reads a
-- table's CHECK expressions at every INSERT statement, which cost each
-- write about 8 microseconds of server CPU, 5% of a 3.8 KB snapshot's
-- (measured on Postgres 15; any CHECK costs about that, whatever it tests).
--
-- The default summary of a checkpoint with no messages ("State: N keys") no
-- longer carries the message branch's expression, whose setup cost every
-- insert that computed a summary about 10 microseconds: that branch is
-- message_summary, called only when there is a last message.

ALTER TABLE pgcheckpoint.checkpoints DROP CONSTRAINT checkpoints_format_known;

CREATE OR REPLACE FUNCTION pgcheckpoint.lock_thread(p_thread_id text)
RETURNS void
LANGUAGE sql
-- Inlined into its callers (no SET clause, which would prevent it): every
-- name is schema-qualified instead.
AS $$ SELECT pg_catalog.pg_advisory_xact_lock(1885563760, pg_catalog.hashtext(p_thread_id)) $$;

CREATE OR REPLACE FUNCTION pgcheckpoint.list_digest_at(p_chain bytea, p_count integer)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Inlined (no SET clause): names schema-qualified.
AS $$
    SELECT CASE WHEN p_chain IS NULL THEN NULL
                WHEN p_count OPERATOR(pg_catalog.=) 0
                THEN '\x0000000000000000000000000000000000000000000000000000000000000000'::pg_catalog.bytea
                WHEN pg_catalog.octet_length(p_chain) OPERATOR(pg_catalog.>=) (32 OPERATOR(pg_catalog.*) p_count)
                THEN pg_catalog.substring(p_chain, (32 OPERATOR(pg_catalog.*) (p_count OPERATOR(pg_catalog.-) 1)) OPERATOR(pg_catalog.+) 1, 32)
           END
$$;

COMMENT ON FUNCTION pgcheckpoint.list_digest_at IS
    'L(p_count), the list digest of the first p_count messages, from a message chain (see message_chain): 32 zero bytes for 0; NULL when the chain is NULL or shorter.';

CREATE FUNCTION pgcheckpoint.message_summary(p_message jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN '[' || coalesce(pgcheckpoint.json_text(p_message -> 'role'), 'unknown') || '] '
           || left(coalesce(pgcheckpoint.json_text(p_message -> 'content'), ''), 100);
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.message_summary IS
    'The default summary of a checkpoint whose last message is p_message (an object): "[role] first 100 characters of content", the text as written (see json_text). See checkpoint_default_summary.';

CREATE OR REPLACE FUNCTION pgcheckpoint.checkpoint_default_summary(p_messages jsonb, p_state jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- Inlined (no SET clause): names schema-qualified. The message branch
    -- is a call, so a caller without messages does not set up its
    -- expression. The key count takes each value's type, not the value.
    SELECT CASE WHEN pg_catalog.jsonb_typeof(p_messages OPERATOR(pg_catalog.->) -1) OPERATOR(pg_catalog.=) 'object'
                THEN pgcheckpoint.message_summary(p_messages OPERATOR(pg_catalog.->) -1)
                ELSE 'State: ' OPERATOR(pg_catalog.||)
                     pg_catalog.jsonb_array_length(pg_catalog.jsonb_path_query_array(p_state, 'strict $.*.type()'))::pg_catalog.text
                     OPERATOR(pg_catalog.||) ' keys'
           END
$$;

CREATE FUNCTION pgcheckpoint.delta_run_continues(p_run integer, p_delta_run integer)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Inlined (no SET clause): names schema-qualified.
AS $$
    SELECT p_delta_run OPERATOR(pg_catalog.>) 1 AND p_run OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.<) p_delta_run
$$;

COMMENT ON FUNCTION pgcheckpoint.delta_run_continues IS
    'The run limit: whether a delta on a checkpoint whose run is p_run (its delta_run) may extend that run when runs hold fewer than p_delta_run deltas (p_delta_run 1: no deltas). NULL when p_run is.';

CREATE FUNCTION pgcheckpoint.thread_head_for_write(p_thread_id text, p_namespace text, p_checkpoint_id uuid,
                                         p_parent_checkpoint_id uuid)
RETURNS TABLE (thread_seen boolean, rewound_to uuid, wanted_parent uuid, next_seq bigint,
               parent_checkpoint_id uuid, next_step bigint, parent_delta_run integer, parent_delta_depth integer,
               parent_messages_count integer, parent_messages_digest bytea, parent_state_digests jsonb,
               parent_tool_results_digests jsonb)
LANGUAGE sql STABLE
-- Inlined into the statement that calls it (no SET clause, not STRICT,
-- not VOLATILE): every name is schema-qualified instead. Callers hold the
-- thread's and the id's locks (see lock_thread, lock_checkpoint_id) before
-- the statement starts, so its snapshot sees every other write of both.
AS $$
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
    LEFT JOIN LATERAL (
        SELECT c.*
        FROM (SELECT c.checkpoint_id, c.step, c.delta_run, c.delta_depth, c.messages_count, c.messages_digest,
                     c.state_digests, c.tool_results_digests, c.thread_id, c.namespace
              FROM pgcheckpoint.checkpoints c
              WHERE c.checkpoint_id OPERATOR(pg_catalog.=) coalesce(p_parent_checkpoint_id, t.rewound_to, l.checkpoint_id)
              LIMIT 1) c
        WHERE c.thread_id OPERATOR(pg_catalog.=) p_thread_id AND c.namespace OPERATOR(pg_catalog.=) p_namespace) p ON true
    WHERE NOT EXISTS (SELECT FROM pgcheckpoint.checkpoints e WHERE e.checkpoint_id OPERATOR(pg_catalog.=) p_checkpoint_id)
$$;

COMMENT ON FUNCTION pgcheckpoint.thread_head_for_write IS
    'The head of a thread and namespace as a writer of checkpoint p_checkpoint_id sees it, under the thread lock: one row, none when that id exists already (a retry). thread_seen: the thread row exists; rewound_to: a pending rewind; wanted_parent: p_parent_checkpoint_id, else rewound_to; parent_*: the parent (the wanted one, else the newest checkpoint; NULL when the wanted one is not in this thread and namespace, or there is none), with what a delta on it needs; next_seq: the newest seq + 1; next_step: the parent''s step + 1 (1 without a parent).';

CREATE FUNCTION pgcheckpoint.run_anchor(p_checkpoint_id uuid, p_delta_run integer)
RETURNS TABLE (checkpoint_id uuid, delta_depth integer, messages_count integer, messages_digest bytea,
               state_digests jsonb, tool_results_digests jsonb)
LANGUAGE plpgsql STABLE STRICT
-- One row at most: the estimate keeps the generic plan of a statement that
-- calls it as cheap as a custom one (1,000 rows, the default, made the
-- server plan CheckpointPutFast anew at every execution).
ROWS 1
SET search_path = pg_catalog, pg_temp
-- Called at the end of a run only (see checkpoint_delta), so a function of
-- its own, whose plan the session keeps, rather than inlined.
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE run AS (
        SELECT c.*, c.thread_id AS start_thread, c.namespace AS start_namespace FROM (
            SELECT c.checkpoint_id, c.base_checkpoint_id, c.delta_run, c.delta_depth, c.messages_count,
                   c.messages_digest, c.state_digests, c.tool_results_digests, c.thread_id, c.namespace
            FROM pgcheckpoint.checkpoints c
            WHERE c.checkpoint_id = p_checkpoint_id
            LIMIT 1) c
        UNION ALL
        SELECT b.*, r.start_thread, r.start_namespace FROM run r
        CROSS JOIN LATERAL (
            SELECT b.checkpoint_id, b.base_checkpoint_id, b.delta_run, b.delta_depth, b.messages_count,
                   b.messages_digest, b.state_digests, b.tool_results_digests, b.thread_id, b.namespace
            FROM pgcheckpoint.checkpoints b
            WHERE b.checkpoint_id = r.base_checkpoint_id
            LIMIT 1) b
        WHERE r.delta_run > 0
    )
    SELECT r.checkpoint_id, r.delta_depth, r.messages_count, r.messages_digest, r.state_digests, r.tool_results_digests
    FROM run r
    WHERE r.delta_run = 0 AND r.thread_id = r.start_thread AND r.namespace = r.start_namespace
      AND r.delta_depth + 1 < p_delta_run;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.run_anchor IS
    'The anchor that the delta run of checkpoint p_checkpoint_id started from (found by following base links while delta_run > 0), when it is in the same thread and namespace and a delta on it stays under p_delta_run links deep; no row otherwise. See checkpoint_delta.';

CREATE FUNCTION pgcheckpoint.delta_keys(p_object jsonb, p_digests jsonb, p_base_digests jsonb)
RETURNS TABLE (changed jsonb, removed text[])
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- Inlined (no SET clause, not STRICT, not VOLATILE): names schema-qualified.
AS $$
    -- Unchanged (the common case) costs a comparison.
    SELECT CASE WHEN p_digests OPERATOR(pg_catalog.=) p_base_digests THEN '{}'::pg_catalog.jsonb
                ELSE (SELECT coalesce(pg_catalog.jsonb_object_agg(e.key, p_object OPERATOR(pg_catalog.->) e.key), '{}'::pg_catalog.jsonb)
                      FROM pg_catalog.jsonb_each(p_digests) e
                      WHERE NOT coalesce(e.value OPERATOR(pg_catalog.=) (p_base_digests OPERATOR(pg_catalog.->) e.key), false))
           END,
           CASE WHEN p_digests OPERATOR(pg_catalog.=) p_base_digests THEN '{}'::pg_catalog.text[]
                ELSE ARRAY(SELECT k FROM pg_catalog.jsonb_object_keys(p_base_digests) k
                           WHERE NOT p_digests OPERATOR(pg_catalog.?) k ORDER BY k)
           END
$$;

COMMENT ON FUNCTION pgcheckpoint.delta_keys IS
    'The top-level keys of an object p_object (whose key digests are p_digests, see key_digests) that a delta on a base with key digests p_base_digests stores: changed, the members whose digest differs from the base''s or that the base lacks; removed, the base''s keys that p_object lacks, sorted.';

CREATE FUNCTION pgcheckpoint.checkpoint_delta(
    p_messages                    jsonb,
    p_state                       jsonb,
    p_tool_results                jsonb,
    p_message_chain               bytea,
    p_state_digests               jsonb,
    p_tool_results_digests        jsonb,
    p_parent_checkpoint_id        uuid,
    p_parent_delta_run            integer,
    p_parent_delta_depth          integer,
    p_parent_messages_count       integer,
    p_parent_messages_digest      bytea,
    p_parent_state_digests        jsonb,
    p_parent_tool_results_digests jsonb,
    p_delta_run                   integer
)
RETURNS TABLE (format text, base_checkpoint_id uuid, delta_run integer, delta_depth integer,
               messages jsonb, state jsonb, tool_results jsonb, state_removed text[], tool_results_removed text[])
LANGUAGE sql STABLE
-- Inlined (no SET clause, not STRICT, not VOLATILE): names schema-qualified.
AS $$
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
               AND pgcheckpoint.list_digest_at(p_message_chain, b.messages_count) OPERATOR(pg_catalog.=) b.messages_digest
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
$$;

COMMENT ON FUNCTION pgcheckpoint.checkpoint_delta IS
    'How a checkpoint with this content (messages, state, tool results, with their digests: the message chain, see message_chain, and key digests) is stored on the given parent (its id and the thread_head_for_write columns): one row, the columns to insert. A delta (see checkpoints.format) on the base (the parent while delta_run_continues, else the anchor of its run, see run_anchor) when the base''s messages are a prefix of these by the chained list digest and the delta is smaller than the whole; else whole. p_delta_run 1, or no digests: whole.';

CREATE FUNCTION pgcheckpoint.thread_after_write(p_thread_id text, p_namespace text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO pgcheckpoint.threads AS t (thread_id, namespace) VALUES (p_thread_id, p_namespace)
    ON CONFLICT (thread_id, namespace) DO UPDATE SET rewound_to = NULL
    WHERE t.rewound_to IS NOT NULL;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.thread_after_write IS
    'What a write of a checkpoint does to its thread row, under the thread lock: creates it (the thread''s first checkpoint), or clears a pending rewind, as the new checkpoint is the head. Writers call it only when thread_head_for_write said one of those is needed.';

-- It writes: not for PUBLIC (see migration 8).
REVOKE EXECUTE ON FUNCTION pgcheckpoint.thread_after_write(text, text) FROM PUBLIC;

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

    PERFORM pgcheckpoint.lock_thread(p_thread_id);
    -- Then the id's, so that thread_head_for_write sees any other write of this id,
    -- on any thread (ids are unique in the whole table); and the table's
    -- ROW EXCLUSIVE lock before it looks (see lock_checkpoint_id).
    PERFORM pgcheckpoint.lock_checkpoint_id(p_checkpoint_id);
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

    PERFORM pgcheckpoint.lock_thread(p_thread_id);
    PERFORM pgcheckpoint.lock_checkpoint_id(p_checkpoint_id);
    LOCK TABLE pgcheckpoint.checkpoints IN ROW EXCLUSIVE MODE; -- see lock_checkpoint_id

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
    SELECT p_thread_id, v_ns, v_next_seq, p_checkpoint_id, v_head_id, v_next_step,
           coalesce(p_trigger, 'manual'), coalesce(p_tags, '{}'), v_summary, v_metadata,
           'delta', v_head_id, v_head_run + 1, v_head_depth + 1, v_messages, s.changed, t.changed,
           s.removed, t.removed, v_head_count + v_msg_count,
           CASE WHEN v_msg_count = 0 THEN v_head_digest
                ELSE pgcheckpoint.list_digest_at(pgcheckpoint.message_chain(v_head_digest, v_msg_dig), v_msg_count) END,
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
$$;
