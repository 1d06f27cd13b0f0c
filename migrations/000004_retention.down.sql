-- Undoes 000004_retention.up.sql.
DROP PROCEDURE IF EXISTS pgcheckpoint.gc_sweep(text, integer, interval, integer, interval, interval);
DROP FUNCTION IF EXISTS pgcheckpoint.gc_batch(text, integer, interval, text, integer);
DROP FUNCTION IF EXISTS pgcheckpoint.gc_threads(text[], text, integer, interval);
DROP FUNCTION IF EXISTS pgcheckpoint.expire_thread(text);
DROP FUNCTION IF EXISTS pgcheckpoint.gc_thread(text, text, integer, interval);
DROP FUNCTION IF EXISTS pgcheckpoint.gc_check_policy(text, integer, interval);
DROP INDEX IF EXISTS pgcheckpoint.threads_swept_at_idx;
DROP INDEX IF EXISTS pgcheckpoint.threads_expires_at_idx;
ALTER TABLE pgcheckpoint.threads
    DROP CONSTRAINT IF EXISTS threads_expire_action_known,
    DROP COLUMN IF EXISTS expire_action,
    DROP COLUMN IF EXISTS expires_at,
    DROP COLUMN IF EXISTS swept_at;
