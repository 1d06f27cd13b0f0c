-- name: ThreadExportTree :many
-- The threads an export covers: the thread and, when branches is set,
-- every thread forked from it, recursively, oldest first (a branch after
-- the thread it was forked from), of one tenant. UNION ends even on a
-- cycle of branch links; CROSS JOIN keeps the join order, so each step
-- looks up the threads forked from the ones found by index.
WITH RECURSIVE tree(id) AS (
    SELECT CAST(@thread_id AS TEXT)
    UNION
    SELECT b.thread_id
    FROM tree
    CROSS JOIN threads b ON b.tenant_id = @tenant_id AND b.branched_from_thread = tree.id
    WHERE CAST(@branches AS INTEGER) <> 0
)
SELECT t.thread_id
FROM threads t
WHERE t.tenant_id = @tenant_id AND t.thread_id IN (SELECT id FROM tree)
GROUP BY t.thread_id
ORDER BY min(t.created_at), t.thread_id;

-- name: CheckpointExportPage :many
-- A page of a thread's rows as stored, in namespace then write order,
-- after (after_namespace, after_seq): keyset pages over the primary key,
-- so an export holds one page in memory however long the thread is.
SELECT * FROM checkpoints
WHERE tenant_id = @tenant_id AND thread_id = @thread_id
  AND (namespace > @after_namespace OR (namespace = @after_namespace AND seq > @after_seq))
ORDER BY namespace, seq
LIMIT @max_rows;
