-- What every listing of checkpoints returns: a checkpoint without its
-- content. The engine reads listings through it (one row type, one mapping);
-- in psql it answers "what is in this thread" without detoasting content.
CREATE VIEW pgcheckpoint.checkpoint_info AS
SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id,
       c.step, c.created_at, c.trigger, c.tags, c.summary, c.metadata, c.format, c.next_node, c.size_bytes
FROM pgcheckpoint.checkpoints c;

COMMENT ON VIEW pgcheckpoint.checkpoint_info IS
    'Each checkpoint without its content (messages, state, tool results and delta columns): what listings show. Summary and metadata are in stored form (U+0000 kept as an escape, see the engine docs).';
