-- Reverts 000036_baseline.up.sql: drops every object it made (a function that
-- returns a view's rows, then the view, then its table; the other
-- functions last, which defaults and policies call). The pgcheckpoint schema stays, as the migration tool made it: it
-- holds the version table. Generated with the up migration.

DROP FUNCTION
    pgcheckpoint.checkpoint_line_range(uuid,integer);

DROP VIEW
    pgcheckpoint.checkpoint_info,
    pgcheckpoint.tenant_checkpoint_info,
    pgcheckpoint.tenant_checkpoints,
    pgcheckpoint.tenant_data_keys,
    pgcheckpoint.tenant_pending_writes,
    pgcheckpoint.tenant_thread_heads,
    pgcheckpoint.tenant_thread_locks,
    pgcheckpoint.tenant_threads;

DROP TABLE
    pgcheckpoint.checkpoints,
    pgcheckpoint.data_keys,
    pgcheckpoint.pending_writes,
    pgcheckpoint.thread_locks,
    pgcheckpoint.threads;

DROP AGGREGATE
    pgcheckpoint.delta_merge(jsonb,text[]);

DROP FUNCTION
    pgcheckpoint.checkpoint_append(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text[],text[],text,bigint,integer,bytea,jsonb,jsonb,bigint,bigint,boolean),
    pgcheckpoint.checkpoint_check(text,text,uuid,text,text[],text,text),
    pgcheckpoint.checkpoint_content_json(uuid,text,jsonb,jsonb,jsonb),
    pgcheckpoint.checkpoint_default_summary(jsonb,jsonb),
    pgcheckpoint.checkpoint_delete_before(text,text,bigint),
    pgcheckpoint.checkpoint_delete_for_runs(text[]),
    pgcheckpoint.checkpoint_delete_keys(text[],text[],bigint[],uuid[]),
    pgcheckpoint.checkpoint_delete_many(uuid[]),
    pgcheckpoint.checkpoint_delete_many_in(text[],uuid[]),
    pgcheckpoint.checkpoint_delta(jsonb,jsonb,jsonb,bytea,jsonb,jsonb,uuid,integer,integer,integer,bytea,jsonb,jsonb,integer),
    pgcheckpoint.checkpoint_last_message(uuid),
    pgcheckpoint.checkpoint_lineage(uuid,integer),
    pgcheckpoint.checkpoint_materialize(uuid),
    pgcheckpoint.checkpoint_materialize_json(uuid),
    pgcheckpoint.checkpoint_put(text,text,uuid,uuid,text,text[],text,jsonb,jsonb,jsonb,jsonb,text,bigint,integer,bytea,jsonb,jsonb,boolean,uuid),
    pgcheckpoint.checkpoint_rebuild_json(uuid),
    pgcheckpoint.checkpoint_rewind(uuid,boolean),
    pgcheckpoint.checkpoint_thread_lock(uuid,text),
    pgcheckpoint.current_tenant(),
    pgcheckpoint.delta_chain(uuid),
    pgcheckpoint.delta_keys(jsonb,jsonb,jsonb),
    pgcheckpoint.delta_merge_step(jsonb,jsonb,text[]),
    pgcheckpoint.delta_run_continues(integer,integer),
    pgcheckpoint.json_compact_size(jsonb),
    pgcheckpoint.json_text(jsonb),
    pgcheckpoint.key_digests(jsonb),
    pgcheckpoint.message_chain(bytea,bytea),
    pgcheckpoint.message_chain_at(bytea,integer),
    pgcheckpoint.message_digests(jsonb),
    pgcheckpoint.message_summary(jsonb),
    pgcheckpoint.pending_writes_json(text,text,bigint),
    pgcheckpoint.quoted_text(text),
    pgcheckpoint.retention_policy_check(text,integer,interval),
    pgcheckpoint.run_anchor(uuid,integer),
    pgcheckpoint.thread_after_write(text,text),
    pgcheckpoint.thread_branch(uuid,text,text,uuid),
    pgcheckpoint.thread_copy(text,text),
    pgcheckpoint.thread_delete(text),
    pgcheckpoint.thread_expire(text),
    pgcheckpoint.thread_gc(text,text,integer,interval),
    pgcheckpoint.thread_gc_batch(text,integer,interval,text,integer),
    pgcheckpoint.thread_gc_batch_oldest(text,integer,interval,integer,timestamp with time zone,timestamp with time zone,text),
    pgcheckpoint.thread_gc_doomed_many(text[],text,integer,interval),
    pgcheckpoint.thread_gc_many(text[],text,integer,interval),
    pgcheckpoint.thread_head(text,text),
    pgcheckpoint.thread_head_for_write(text,text,uuid,uuid),
    pgcheckpoint.thread_head_seq(text,text),
    pgcheckpoint.thread_list_heads(text,integer),
    pgcheckpoint.thread_lock(text),
    pgcheckpoint.thread_lock_many(text[]),
    pgcheckpoint.thread_merge(text,text,uuid,text),
    pgcheckpoint.thread_prune_many(text[],boolean),
    pgcheckpoint.thread_refuse_plaintext(text,boolean),
    pgcheckpoint.thread_rewind_to_step(text,text,bigint),
    pgcheckpoint.thread_sealed(text),
    pgcheckpoint.thread_set_expiry(text,timestamp with time zone,boolean),
    pgcheckpoint.thread_tree(text),
    pgcheckpoint.unescaped_text(text,text),
    pgcheckpoint.uuid_v7(timestamp with time zone);

DROP PROCEDURE
    pgcheckpoint.thread_gc_sweep(text,integer,interval,integer,interval,interval,text);

COMMENT ON SCHEMA pgcheckpoint IS NULL;
