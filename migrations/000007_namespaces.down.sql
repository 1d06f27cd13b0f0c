-- Undoes 000007_namespaces.up.sql: merge acts on the root namespace only,
-- as 000003_delta.up.sql left it.

DROP FUNCTION pgcheckpoint.merge(text, text, uuid, text);

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

COMMENT ON FUNCTION pgcheckpoint.merge IS
    'Writes on the target thread a checkpoint with the branch head''s content; parent: the target''s head; merge_parent_id: the branch head. Errors: PC001 empty branch, PC003 merge into itself.';
