-- Drops what 000001_init.up.sql created. The pgcheckpoint schema itself stays:
-- it also holds the migration tool's version table.
DROP FUNCTION IF EXISTS pgcheckpoint.checkpoint_put(text, text, uuid, uuid, text, text[], text, jsonb, jsonb, jsonb, jsonb, text, bigint);
DROP TABLE IF EXISTS pgcheckpoint.pending_writes;
DROP TABLE IF EXISTS pgcheckpoint.checkpoints;
DROP TABLE IF EXISTS pgcheckpoint.threads;
