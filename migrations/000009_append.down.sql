DROP FUNCTION pgcheckpoint.checkpoint_append(text, text, uuid, uuid, text, text[], text, jsonb, jsonb, jsonb, jsonb,
    text[], text[], text, bigint, integer, bytea, jsonb, jsonb);
