-- One name for each routine: the deprecated aliases go.
--
-- Migration 12 renamed the routines that broke the naming rule (README,
-- "Names") and kept the old names the README had shown as thin aliases
-- that call the new ones. Nothing was released under the old names, so
-- they go now rather than a release later, and each routine of the schema
-- has one name. No routine or query of
-- pgcheckpoint's own calls an alias (integration/naming_test.go checks
-- that the schema has none), and the comments that still named one
-- (materialize, in three comments of migrations 11 and 14) name its
-- routine now.

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


-- The comments that named an alias.

COMMENT ON FUNCTION pgcheckpoint.checkpoint_last_message(uuid) IS
    'The last message of a checkpoint, as checkpoint_materialize(...) -> -1 would give it, without rebuilding its messages: NULL when it has none or the id is unknown. Usage: SELECT pgcheckpoint.checkpoint_last_message(''<checkpoint id>''). Error PC004 as checkpoint_materialize.';

COMMENT ON FUNCTION pgcheckpoint.checkpoint_materialize_json(uuid) IS
    'checkpoint_materialize''s columns as JSON text, in bytes (what jsonb''s binary send format carries, in the client encoding, without its version byte); no row for an unknown id. What the engine reads: the text of checkpoint_materialize(...), without building the jsonb. Usage: SELECT convert_from(messages, ''UTF8'') FROM pgcheckpoint.checkpoint_materialize_json(''<checkpoint id>''). Error PC004 as checkpoint_materialize.';

COMMENT ON FUNCTION pgcheckpoint.checkpoint_rebuild_json(uuid) IS
    'A checkpoint''s whole content rebuilt from pgcheckpoint.delta_chain, as JSON text in bytes (see checkpoint_materialize_json, which reads a full checkpoint without it). No row for an unknown id. Error PC004 as checkpoint_materialize.';
