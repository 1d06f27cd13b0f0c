-- The deprecated aliases of migration 12 again, as it made them: each old
-- name calls its new one, with the same comment and, for a routine that
-- can write, no EXECUTE for PUBLIC (the application role gets it from the
-- owner's default privileges, as it did then; see schema/roles/roles.sql).

CREATE FUNCTION pgcheckpoint.branch(p_source_id uuid, p_new_thread_id text, p_branch_name text, p_checkpoint_id uuid)
RETURNS TABLE(thread_id text, checkpoint_id uuid, step bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_branch(p_source_id, p_new_thread_id, p_branch_name, p_checkpoint_id) $$;
COMMENT ON FUNCTION pgcheckpoint.branch(uuid,text,text,uuid) IS 'Deprecated: use pgcheckpoint.thread_branch; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.branch(uuid,text,text,uuid) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.copy_thread(p_source_thread_id text, p_target_thread_id text)
RETURNS TABLE(old_checkpoint_id uuid, new_checkpoint_id uuid)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_copy(p_source_thread_id, p_target_thread_id) $$;
COMMENT ON FUNCTION pgcheckpoint.copy_thread(text,text) IS 'Deprecated: use pgcheckpoint.thread_copy; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.copy_thread(text,text) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.delete_checkpoints(p_checkpoint_ids uuid[])
RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.checkpoint_delete_many(p_checkpoint_ids) $$;
COMMENT ON FUNCTION pgcheckpoint.delete_checkpoints(uuid[]) IS 'Deprecated: use pgcheckpoint.checkpoint_delete_many; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.delete_checkpoints(uuid[]) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.delete_for_runs(p_run_ids text[])
RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.checkpoint_delete_for_runs(p_run_ids) $$;
COMMENT ON FUNCTION pgcheckpoint.delete_for_runs(text[]) IS 'Deprecated: use pgcheckpoint.checkpoint_delete_for_runs; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.delete_for_runs(text[]) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.expire_thread(p_thread_id text)
RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.thread_expire(p_thread_id) $$;
COMMENT ON FUNCTION pgcheckpoint.expire_thread(text) IS 'Deprecated: use pgcheckpoint.thread_expire; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.expire_thread(text) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.gc_batch(p_policy text, p_n integer, p_age interval, p_after_thread_id text, p_batch_size integer)
RETURNS TABLE(last_thread_id text, threads integer, expired integer, failed integer, deleted bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_gc_batch(p_policy, p_n, p_age, p_after_thread_id, p_batch_size) $$;
COMMENT ON FUNCTION pgcheckpoint.gc_batch(text,integer,interval,text,integer) IS 'Deprecated: use pgcheckpoint.thread_gc_batch; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.gc_batch(text,integer,interval,text,integer) FROM PUBLIC;

CREATE PROCEDURE pgcheckpoint.gc_sweep(IN p_policy text, IN p_n integer DEFAULT NULL::integer, IN p_age interval DEFAULT NULL::interval, IN p_batch_size integer DEFAULT 5, IN p_time_budget interval DEFAULT '00:00:50'::interval, IN p_pause interval DEFAULT '00:00:00'::interval)
LANGUAGE plpgsql
AS $$ BEGIN CALL pgcheckpoint.thread_gc_sweep(p_policy, p_n, p_age, p_batch_size, p_time_budget, p_pause); END $$;
COMMENT ON PROCEDURE pgcheckpoint.gc_sweep(text,integer,interval,integer,interval,interval) IS 'Deprecated: use pgcheckpoint.thread_gc_sweep; removed in a later release.';
REVOKE EXECUTE ON PROCEDURE pgcheckpoint.gc_sweep(text,integer,interval,integer,interval,interval) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.gc_thread(p_thread_id text, p_policy text, p_n integer DEFAULT NULL::integer, p_age interval DEFAULT NULL::interval)
RETURNS TABLE(thread_id text, namespace text, checkpoint_id uuid, step bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_gc(p_thread_id, p_policy, p_n, p_age) $$;
COMMENT ON FUNCTION pgcheckpoint.gc_thread(text,text,integer,interval) IS 'Deprecated: use pgcheckpoint.thread_gc; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.gc_thread(text,text,integer,interval) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.gc_threads(p_thread_ids text[], p_policy text, p_n integer, p_age interval)
RETURNS TABLE(threads integer, expired integer, failed integer, deleted bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_gc_many(p_thread_ids, p_policy, p_n, p_age) $$;
COMMENT ON FUNCTION pgcheckpoint.gc_threads(text[],text,integer,interval) IS 'Deprecated: use pgcheckpoint.thread_gc_many; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.gc_threads(text[],text,integer,interval) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.head(p_thread_id text, p_namespace text DEFAULT ''::text)
RETURNS uuid
LANGUAGE sql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.thread_head(p_thread_id, p_namespace) $$;
COMMENT ON FUNCTION pgcheckpoint.head(text,text) IS 'Deprecated: use pgcheckpoint.thread_head; removed in a later release.';

CREATE FUNCTION pgcheckpoint.head_seq(p_thread_id text, p_namespace text DEFAULT ''::text)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.thread_head_seq(p_thread_id, p_namespace) $$;
COMMENT ON FUNCTION pgcheckpoint.head_seq(text,text) IS 'Deprecated: use pgcheckpoint.thread_head_seq; removed in a later release.';

CREATE FUNCTION pgcheckpoint.lineage(p_checkpoint_id uuid, p_max_depth integer DEFAULT NULL::integer)
RETURNS TABLE(depth integer, thread_id text, namespace text, seq bigint, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint, created_at timestamp with time zone, trigger text, tags text[], summary text, metadata jsonb, next_node text, size_bytes bigint)
LANGUAGE sql STABLE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.checkpoint_lineage(p_checkpoint_id, p_max_depth) $$;
COMMENT ON FUNCTION pgcheckpoint.lineage(uuid,integer) IS 'Deprecated: use pgcheckpoint.checkpoint_lineage; removed in a later release.';

CREATE FUNCTION pgcheckpoint.lock_checkpoint_id(p_checkpoint_id uuid)
RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.checkpoint_id_lock(p_checkpoint_id) $$;
COMMENT ON FUNCTION pgcheckpoint.lock_checkpoint_id(uuid) IS 'Deprecated: use pgcheckpoint.checkpoint_id_lock; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.lock_checkpoint_id(uuid) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.lock_thread(p_thread_id text)
RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.thread_lock(p_thread_id) $$;
COMMENT ON FUNCTION pgcheckpoint.lock_thread(text) IS 'Deprecated: use pgcheckpoint.thread_lock; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.lock_thread(text) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.materialize(p_checkpoint_id uuid)
RETURNS TABLE(messages jsonb, state jsonb, tool_results jsonb)
LANGUAGE sql STABLE PARALLEL UNSAFE ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.checkpoint_materialize(p_checkpoint_id) $$;
COMMENT ON FUNCTION pgcheckpoint.materialize(uuid) IS 'Deprecated: use pgcheckpoint.checkpoint_materialize; removed in a later release.';

CREATE FUNCTION pgcheckpoint.merge(p_branch_thread_id text, p_into_thread_id text, p_checkpoint_id uuid, p_namespace text DEFAULT ''::text)
RETURNS TABLE(thread_id text, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_merge(p_branch_thread_id, p_into_thread_id, p_checkpoint_id, p_namespace) $$;
COMMENT ON FUNCTION pgcheckpoint.merge(text,text,uuid,text) IS 'Deprecated: use pgcheckpoint.thread_merge; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.merge(text,text,uuid,text) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.prune(p_thread_ids text[], p_keep_latest boolean)
RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.thread_prune_many(p_thread_ids, p_keep_latest) $$;
COMMENT ON FUNCTION pgcheckpoint.prune(text[],boolean) IS 'Deprecated: use pgcheckpoint.thread_prune_many; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.prune(text[],boolean) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.rewind(p_checkpoint_id uuid, p_truncate boolean DEFAULT false)
RETURNS TABLE(thread_id text, namespace text, checkpoint_id uuid, step bigint, head_step bigint, checkpoints bigint, truncated bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.checkpoint_rewind(p_checkpoint_id, p_truncate) $$;
COMMENT ON FUNCTION pgcheckpoint.rewind(uuid,boolean) IS 'Deprecated: use pgcheckpoint.checkpoint_rewind; removed in a later release.';
REVOKE EXECUTE ON FUNCTION pgcheckpoint.rewind(uuid,boolean) FROM PUBLIC;

CREATE FUNCTION pgcheckpoint.tree(p_thread_id text)
RETURNS TABLE(thread_id text, namespace text, seq bigint, checkpoint_id uuid, parent_checkpoint_id uuid, merge_parent_id uuid, step bigint, created_at timestamp with time zone, trigger text, tags text[], summary text, is_head boolean)
LANGUAGE sql STABLE PARALLEL UNSAFE ROWS 1000
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM pgcheckpoint.thread_tree(p_thread_id) $$;
COMMENT ON FUNCTION pgcheckpoint.tree(text) IS 'Deprecated: use pgcheckpoint.thread_tree; removed in a later release.';

CREATE FUNCTION pgcheckpoint.unescape_text(p_text text, p_nul text DEFAULT '�'::text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT pgcheckpoint.unescaped_text(p_text, p_nul) $$;
COMMENT ON FUNCTION pgcheckpoint.unescape_text(text,text) IS 'Deprecated: use pgcheckpoint.unescaped_text; removed in a later release.';


-- The comments as they were.

COMMENT ON FUNCTION pgcheckpoint.checkpoint_last_message(uuid) IS
    'The last message of a checkpoint, as checkpoint_materialize(...) -> -1 would give it, without rebuilding its messages: NULL when it has none or the id is unknown. Usage: SELECT pgcheckpoint.checkpoint_last_message(''<checkpoint id>''). Error PC004 as materialize.';

COMMENT ON FUNCTION pgcheckpoint.checkpoint_materialize_json(uuid) IS
    'materialize''s columns as JSON text, in bytes (what jsonb''s binary send format carries, in the client encoding, without its version byte); no row for an unknown id. What the engine reads: the text of materialize(...), without building the jsonb. Usage: SELECT convert_from(messages, ''UTF8'') FROM pgcheckpoint.checkpoint_materialize_json(''<checkpoint id>''). Error PC004 as materialize.';

COMMENT ON FUNCTION pgcheckpoint.checkpoint_rebuild_json(uuid) IS
    'A checkpoint''s whole content rebuilt from pgcheckpoint.delta_chain, as JSON text in bytes (see checkpoint_materialize_json, which reads a full checkpoint without it). No row for an unknown id. Error PC004 as materialize.';
