-- Drops what 000002_time_travel.up.sql created.
DROP FUNCTION IF EXISTS pgcheckpoint.prune(text[], boolean);
DROP FUNCTION IF EXISTS pgcheckpoint.delete_for_runs(text[]);
DROP FUNCTION IF EXISTS pgcheckpoint.copy_thread(text, text);
DROP FUNCTION IF EXISTS pgcheckpoint.uuid_v7(timestamptz);
DROP FUNCTION IF EXISTS pgcheckpoint.merge(text, text, uuid);
DROP FUNCTION IF EXISTS pgcheckpoint.branch(uuid, text, text, uuid);
DROP FUNCTION IF EXISTS pgcheckpoint.rewind(uuid, boolean);
DROP FUNCTION IF EXISTS pgcheckpoint.tree(text);
DROP FUNCTION IF EXISTS pgcheckpoint.lineage(uuid, integer);
ALTER TABLE pgcheckpoint.checkpoints DROP COLUMN IF EXISTS merge_parent_id;
DROP INDEX IF EXISTS pgcheckpoint.threads_branched_from_thread_idx;
ALTER TABLE pgcheckpoint.threads
    DROP COLUMN IF EXISTS branched_from_thread,
    DROP COLUMN IF EXISTS branched_from,
    DROP COLUMN IF EXISTS branch_name;
