-- One name for each routine: the deprecated aliases go.
--
-- Migration 12 renamed the routines that broke the naming rule (README,
-- "Names") and kept the old names the README had shown as thin aliases
-- that call the new ones. Nothing has been released under the old names,
-- so nobody's pg_cron job or script needs them: they are dropped, and each
-- routine of the schema has one name. No routine or query of
-- pgcheckpoint's own calls an alias (integration/naming_test.go checks
-- that the schema has none).

DROP FUNCTION pgcheckpoint.branch(uuid,text,text,uuid);

DROP FUNCTION pgcheckpoint.copy_thread(text,text);

DROP FUNCTION pgcheckpoint.delete_checkpoints(uuid[]);

DROP FUNCTION pgcheckpoint.delete_for_runs(text[]);

DROP FUNCTION pgcheckpoint.expire_thread(text);

DROP FUNCTION pgcheckpoint.gc_batch(text,integer,interval,text,integer);

DROP PROCEDURE pgcheckpoint.gc_sweep(text,integer,interval,integer,interval,interval);

DROP FUNCTION pgcheckpoint.gc_thread(text,text,integer,interval);

DROP FUNCTION pgcheckpoint.gc_threads(text[],text,integer,interval);

DROP FUNCTION pgcheckpoint.head(text,text);

DROP FUNCTION pgcheckpoint.head_seq(text,text);

DROP FUNCTION pgcheckpoint.lineage(uuid,integer);

DROP FUNCTION pgcheckpoint.lock_checkpoint_id(uuid);

DROP FUNCTION pgcheckpoint.lock_thread(text);

DROP FUNCTION pgcheckpoint.materialize(uuid);

DROP FUNCTION pgcheckpoint.merge(text,text,uuid,text);

DROP FUNCTION pgcheckpoint.prune(text[],boolean);

DROP FUNCTION pgcheckpoint.rewind(uuid,boolean);

DROP FUNCTION pgcheckpoint.tree(text);

DROP FUNCTION pgcheckpoint.unescape_text(text,text);
