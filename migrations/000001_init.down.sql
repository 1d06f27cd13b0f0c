-- Drops what 000001_init.up.sql created. The pgcheckpoint schema itself stays:
-- it also holds the migration tool's version table.
DROP FUNCTION IF EXISTS pgcheckpoint.checkpoint_delete_before(text, text, bigint);
DROP FUNCTION IF EXISTS pgcheckpoint.thread_delete(text);
DROP FUNCTION IF EXISTS pgcheckpoint.checkpoint_put(text, text, uuid, uuid, text, text[], text, jsonb, jsonb, jsonb, jsonb, text, bigint);
DROP FUNCTION IF EXISTS pgcheckpoint.head(text, text);
DROP FUNCTION IF EXISTS pgcheckpoint.head_seq(text, text);
DROP FUNCTION IF EXISTS pgcheckpoint.lock_thread(text);
DROP TABLE IF EXISTS pgcheckpoint.pending_writes;
DROP TABLE IF EXISTS pgcheckpoint.checkpoints;
DROP TABLE IF EXISTS pgcheckpoint.threads;
