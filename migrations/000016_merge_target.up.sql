-- A merge into a thread, or a namespace of it, that has no checkpoint
-- wrote that thread's first checkpoint, creating the thread: it is now
-- PC001 (not found), and nothing is written.

CREATE OR REPLACE FUNCTION pgcheckpoint.thread_merge(p_branch_thread_id text, p_into_thread_id text, p_checkpoint_id uuid, p_namespace text DEFAULT ''::text)
 RETURNS TABLE(thread_id text, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_ns  text := coalesce(p_namespace, '');
    v_src pgcheckpoint.checkpoints%ROWTYPE;
    v_put record;
BEGIN
    SELECT * INTO v_src FROM pgcheckpoint.checkpoints c
    WHERE c.thread_id = p_branch_thread_id AND c.namespace = v_ns
      AND c.seq = pgcheckpoint.thread_head_seq(p_branch_thread_id, v_ns);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'branch thread % has no checkpoint in namespace %', p_branch_thread_id, quote_literal(v_ns)
            USING ERRCODE = 'PC001';
    END IF;
    IF p_branch_thread_id = p_into_thread_id THEN
        RAISE EXCEPTION 'cannot merge thread % into itself', p_into_thread_id USING ERRCODE = 'PC003';
    END IF;
    SELECT m.* INTO v_src.messages, v_src.state, v_src.tool_results
    FROM pgcheckpoint.checkpoint_materialize(v_src.checkpoint_id) m;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'branch thread % has no checkpoint in namespace %', p_branch_thread_id, quote_literal(v_ns)
            USING ERRCODE = 'PC001';
    END IF;
    SELECT * INTO v_put FROM pgcheckpoint.checkpoint_put(
        p_into_thread_id, v_ns, p_checkpoint_id, NULL, 'manual', ARRAY['merge'],
        format('Merge of %s', p_branch_thread_id), v_src.metadata, v_src.messages, v_src.state,
        v_src.tool_results, v_src.next_node, v_src.size_bytes);
    -- The merge's parent is the target's head, found under the target's
    -- lock by checkpoint_put: none means there is nothing to merge into,
    -- and the checkpoint just written (with the thread row it made) goes
    -- with this error.
    IF v_put.parent_checkpoint_id IS NULL THEN
        RAISE EXCEPTION 'thread % has no checkpoint in namespace % to merge into', p_into_thread_id, quote_literal(v_ns)
            USING ERRCODE = 'PC001';
    END IF;
    IF v_put.inserted THEN
        UPDATE pgcheckpoint.checkpoints c SET merge_parent_id = v_src.checkpoint_id
        WHERE c.checkpoint_id = p_checkpoint_id;
    END IF;
    RETURN QUERY SELECT p_into_thread_id, p_checkpoint_id, v_put.parent_checkpoint_id, v_src.checkpoint_id, v_put.step;
END;
$function$;
COMMENT ON FUNCTION pgcheckpoint.thread_merge(text,text,uuid,text) IS 'Writes on the target thread, in namespace p_namespace (default '''', the root), a checkpoint with the content of the branch''s head in that namespace; parent: the target''s head there; merge_parent_id: the branch head. Errors: PC001 no branch checkpoint in the namespace, or no target checkpoint there (a merge creates no thread), PC003 merge into itself.';
