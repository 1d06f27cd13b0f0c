-- Reads that cost about what reading a whole row costs (issue 17).
--
-- materialize() rebuilt a delta checkpoint in jsonb: its recursive query
-- aggregated every message of the chain into a new array, concatenated it
-- to the full snapshot's (each step a whole decode and encode of the
-- conversation), and a client then had the whole converted to text once
-- more. At step 1,000 of a conversation that appends ~1 KB per step, a
-- read cost 1.8 times a read of the same content stored whole.
--
-- The rule of a rebuild is now in two pieces that every reader uses:
-- delta_chain (which rows, in which order) and the delta_merge aggregate
-- (how state and tool result keys combine). materialize() builds jsonb
-- from them, faster than before; checkpoint_rebuild_json() builds the JSON text, as
-- bytes, from each row's own text (jsonb's send format): the messages of a
-- delta are the concatenation of the elements of the chain's arrays, so
-- their text is the concatenation of those arrays' texts without their
-- brackets. Nothing is decoded into a new jsonb value, and a client has
-- nothing to convert or validate. checkpoint_materialize_json() is what the engine
-- reads: a full checkpoint's columns as they are, a delta through
-- checkpoint_rebuild_json, inlined into the engine's query.
--
-- The storage format does not change: rows written by earlier versions
-- read as before.

-- delta_chain: the rows a checkpoint's content is rebuilt from, oldest
-- first: a full snapshot, then each delta on the one before, ending with
-- the checkpoint itself (a full checkpoint is its own chain). Each base is
-- looked up by id alone, then checked to be in the same thread and
-- namespace and written before (a lower seq), so even a damaged table
-- (a base in another thread, a cycle of bases) gives a finite chain.
CREATE FUNCTION pgcheckpoint.delta_chain(p_checkpoint_id uuid)
RETURNS TABLE (
    depth                integer,
    checkpoint_id        uuid,
    format               text,
    messages             jsonb,
    state                jsonb,
    tool_results         jsonb,
    state_removed        text[],
    tool_results_removed text[]
)
LANGUAGE plpgsql STABLE PARALLEL SAFE
ROWS 20
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE chain AS (
        SELECT 0 AS depth, c.checkpoint_id, c.thread_id, c.namespace, c.seq, c.base_checkpoint_id, c.format,
               c.messages, c.state, c.tool_results, c.state_removed, c.tool_results_removed
        FROM pgcheckpoint.checkpoints c
        WHERE c.checkpoint_id = p_checkpoint_id
        UNION ALL
        SELECT ch.depth + 1, b.checkpoint_id, b.thread_id, b.namespace, b.seq, b.base_checkpoint_id, b.format,
               b.messages, b.state, b.tool_results, b.state_removed, b.tool_results_removed
        FROM chain ch
        CROSS JOIN LATERAL (
            SELECT b.checkpoint_id, b.thread_id, b.namespace, b.seq, b.base_checkpoint_id, b.format,
                   b.messages, b.state, b.tool_results, b.state_removed, b.tool_results_removed
            FROM pgcheckpoint.checkpoints b
            WHERE b.checkpoint_id = ch.base_checkpoint_id
            LIMIT 1) b
        WHERE ch.format = 'delta' AND b.thread_id = ch.thread_id AND b.namespace = ch.namespace AND b.seq < ch.seq
    )
    SELECT ch.depth, ch.checkpoint_id, ch.format, ch.messages, ch.state, ch.tool_results,
           ch.state_removed, ch.tool_results_removed
    FROM chain ch
    WHERE (SELECT o.format FROM chain o ORDER BY o.depth DESC LIMIT 1) = 'full'
    ORDER BY ch.depth DESC;
    IF NOT FOUND AND EXISTS (SELECT FROM pgcheckpoint.checkpoints c WHERE c.checkpoint_id = p_checkpoint_id) THEN
        RAISE EXCEPTION 'checkpoint % cannot be rebuilt: its chain of deltas does not reach a full snapshot', p_checkpoint_id
            USING ERRCODE = 'PC004';
    END IF;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.delta_chain IS
    'The rows a checkpoint''s content is rebuilt from, oldest first: a full snapshot, each delta on the one before, the checkpoint itself last (depth 0); one row for a full checkpoint, none for an unknown id. Usage: SELECT depth, checkpoint_id, format FROM pgcheckpoint.delta_chain(''<checkpoint id>''). Error PC004: a chain that does not reach a full snapshot (a damaged table).';

-- One step of delta_merge: the object so far without the removed keys,
-- then with the set ones. The empty cases return an operand as it is.
CREATE FUNCTION pgcheckpoint.delta_merge_step(p_object jsonb, p_set jsonb, p_removed text[])
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cardinality(p_removed) > 0 THEN
        p_object := p_object - p_removed;
    END IF;
    RETURN p_object || p_set;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.delta_merge_step IS
    'The step of the delta_merge aggregate: (p_object - p_removed) || p_set.';

CREATE AGGREGATE pgcheckpoint.delta_merge(jsonb, text[]) (
    SFUNC = pgcheckpoint.delta_merge_step,
    STYPE = jsonb,
    INITCOND = '{}'
);

COMMENT ON AGGREGATE pgcheckpoint.delta_merge(jsonb, text[]) IS
    'The object a chain of key changes builds, applied in the aggregate''s order (oldest first): each drops its removed keys, then sets its keys. Usage: SELECT pgcheckpoint.delta_merge(state, state_removed ORDER BY depth DESC) FROM pgcheckpoint.delta_chain(''<checkpoint id>'').';

-- materialize, from delta_chain and delta_merge; a full checkpoint is
-- returned as stored, as before.
CREATE OR REPLACE FUNCTION pgcheckpoint.materialize(p_checkpoint_id uuid)
RETURNS TABLE (messages jsonb, state jsonb, tool_results jsonb)
LANGUAGE plpgsql STABLE
ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_format   text;
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
$$;

COMMENT ON FUNCTION pgcheckpoint.materialize IS
    'The whole messages, state and tool_results of a checkpoint, in either format (no row for an unknown id), rebuilt from pgcheckpoint.delta_chain with pgcheckpoint.delta_merge. Usage: SELECT * FROM pgcheckpoint.materialize(''<checkpoint id>''). Error PC004: a delta chain that does not reach a full snapshot (a damaged table).';

-- checkpoint_rebuild_json: the rebuild of materialize(), as JSON text: the bytes
-- jsonb's binary send format carries (without its version byte), text in
-- the session's client encoding, as a client reading a text column gets
-- it. The message list is the chain's non-empty arrays' texts joined with
-- ', ' (jsonb's own separator), each without its brackets but for the
-- first's '[' and the last's ']': the bytes materialize's array would send,
-- built in one aggregate (bracketing the whole afterwards copied it twice,
-- a fifth of the read at step 1,000).
--
-- An array is empty when it is at most 8 bytes and has no element: the
-- size, read without decompressing, settles the common case (an empty
-- jsonb array is a 4-byte header and a varlena header; the smallest
-- non-empty one is 9 bytes).
CREATE FUNCTION pgcheckpoint.checkpoint_rebuild_json(p_checkpoint_id uuid)
RETURNS TABLE (messages bytea, state bytea, tool_results bytea)
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT coalesce(string_agg(substr(s.b, CASE WHEN x.depth = x.first THEN 2 ELSE 3 END,
                                      octet_length(s.b) - CASE WHEN x.depth = x.first THEN 1 ELSE 2 END
                                                        - CASE WHEN x.depth = x.last THEN 0 ELSE 1 END),
                               decode('2c20', 'hex') ORDER BY x.depth DESC) -- ', '
                        FILTER (WHERE NOT x.empty),
                    decode('5b5d', 'hex')), -- []
           substr(jsonb_send(pgcheckpoint.delta_merge(x.state, x.state_removed ORDER BY x.depth DESC)
                             FILTER (WHERE x.state <> '{}' OR cardinality(x.state_removed) > 0)), 2),
           substr(jsonb_send(pgcheckpoint.delta_merge(x.tool_results, x.tool_results_removed ORDER BY x.depth DESC)
                             FILTER (WHERE x.tool_results <> '{}' OR cardinality(x.tool_results_removed) > 0)), 2)
    FROM (SELECT e.*, max(e.depth) FILTER (WHERE NOT e.empty) OVER () AS first,
                      min(e.depth) FILTER (WHERE NOT e.empty) OVER () AS last
          FROM (SELECT ch.*, pg_column_size(ch.messages) <= 8 AND jsonb_array_length(ch.messages) = 0 AS empty
                FROM pgcheckpoint.delta_chain(p_checkpoint_id) ch) e) x
    -- jsonb's send format: a version byte, then the text.
    CROSS JOIN LATERAL jsonb_send(x.messages) AS s(b)
    HAVING count(*) > 0;
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.checkpoint_rebuild_json IS
    'A checkpoint''s whole content rebuilt from pgcheckpoint.delta_chain, as JSON text in bytes (see checkpoint_materialize_json, which reads a full checkpoint without it). No row for an unknown id. Error PC004 as materialize.';

-- checkpoint_materialize_json: materialize's columns as JSON text, in bytes: a full
-- checkpoint's columns as stored, a delta's from checkpoint_rebuild_json.
--
-- LANGUAGE sql without SET search_path, so that the planner inlines it
-- into a caller's query: a full checkpoint is then read by an index scan
-- of the caller's plan, with no function call (measured: a call costs a
-- Get of 4 KB about a quarter, and every node of the plan a few percent).
-- Every name in the body is schema-qualified instead, operators included,
-- so a caller's search_path cannot change what it calls. checkpoint_rebuild_json is
-- strict: for a full checkpoint its argument is NULL and it is not called.
CREATE FUNCTION pgcheckpoint.checkpoint_materialize_json(p_checkpoint_id uuid)
RETURNS TABLE (messages bytea, state bytea, tool_results bytea)
LANGUAGE sql STABLE PARALLEL SAFE
ROWS 1
AS $$
    SELECT CASE WHEN c.format OPERATOR(pg_catalog.=) 'full'
                THEN pg_catalog.substr(pg_catalog.jsonb_send(c.messages), 2) ELSE d.messages END,
           CASE WHEN c.format OPERATOR(pg_catalog.=) 'full'
                THEN pg_catalog.substr(pg_catalog.jsonb_send(c.state), 2) ELSE d.state END,
           CASE WHEN c.format OPERATOR(pg_catalog.=) 'full'
                THEN pg_catalog.substr(pg_catalog.jsonb_send(c.tool_results), 2) ELSE d.tool_results END
    FROM pgcheckpoint.checkpoints c
    LEFT JOIN LATERAL pgcheckpoint.checkpoint_rebuild_json(
        CASE WHEN c.format OPERATOR(pg_catalog.<>) 'full' THEN c.checkpoint_id END) d ON true
    WHERE c.checkpoint_id OPERATOR(pg_catalog.=) p_checkpoint_id
$$;

COMMENT ON FUNCTION pgcheckpoint.checkpoint_materialize_json IS
    'materialize''s columns as JSON text, in bytes (what jsonb''s binary send format carries, in the client encoding, without its version byte); no row for an unknown id. What the engine reads: the text of materialize(...), without building the jsonb. Usage: SELECT convert_from(messages, ''UTF8'') FROM pgcheckpoint.checkpoint_materialize_json(''<checkpoint id>''). Error PC004 as materialize.';
