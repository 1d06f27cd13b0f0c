DROP FUNCTION pgcheckpoint.pending_writes_json(text, text, bigint);
DROP VIEW pgcheckpoint.checkpoint_info;
