-- What every listing of checkpoints returns: a checkpoint without its
-- content. The engine reads listings through it (one row type, one mapping);
-- in psql it answers "what is in this thread" without detoasting content.
CREATE VIEW pgcheckpoint.checkpoint_info AS
SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id,
       c.step, c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.format, c.next_node, c.size_bytes
FROM pgcheckpoint.checkpoints c;

COMMENT ON VIEW pgcheckpoint.checkpoint_info IS
    'Each checkpoint without its content (messages, state, tool results and delta columns): what listings show. Summary and metadata are in stored form (U+0000 kept as an escape, see the engine docs).';

-- The pending writes of a checkpoint (thread, namespace, seq) as one JSON
-- array ordered by task and index, or NULL when it has none: the ordered
-- aggregate starts a sort even for no rows, which costs a read more than
-- the probe. PL/pgSQL, whose plans a session keeps: a SQL function with
-- subqueries is not inlined, and was planned anew on every call (a Get
-- ran at a quarter of the speed).
CREATE FUNCTION pgcheckpoint.pending_writes_json(p_thread_id text, p_namespace text, p_seq bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pgcheckpoint.pending_writes w
                   WHERE w.thread_id = p_thread_id AND w.namespace = p_namespace AND w.checkpoint_seq = p_seq) THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT jsonb_agg(jsonb_build_object('task_id', w.task_id, 'idx', w.idx, 'channel', w.channel, 'value', w.value)
                             ORDER BY w.task_id, w.idx)
            FROM pgcheckpoint.pending_writes w
            WHERE w.thread_id = p_thread_id AND w.namespace = p_namespace AND w.checkpoint_seq = p_seq);
END;
$$;

COMMENT ON FUNCTION pgcheckpoint.pending_writes_json IS
    'The pending writes of checkpoint (thread, namespace, seq) as a JSON array of {task_id, idx, channel, value}, ordered by task and index; NULL when it has none. Values are in stored form (U+0000 escaped).';
