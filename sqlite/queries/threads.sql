-- Queries about threads (DDL in ../migrations/).
-- Each is about one tenant, as in checkpoints.sql.

-- name: ThreadInsert :exec
INSERT INTO threads (tenant_id, thread_id, namespace, rewound_to, metadata, created_at, branch_name, branched_from,
                     branched_from_thread, swept_at, expires_at, expire_action)
VALUES (@tenant_id, @thread_id, @namespace, @rewound_to, @metadata, @created_at, @branch_name, @branched_from,
        @branched_from_thread, @swept_at, @expires_at, @expire_action);

-- name: ThreadGet :one
SELECT * FROM threads WHERE tenant_id = @tenant_id AND thread_id = @thread_id AND namespace = @namespace;

-- name: ThreadListRows :many
-- Every namespace row of a thread, in namespace order.
SELECT * FROM threads WHERE tenant_id = @tenant_id AND thread_id = @thread_id ORDER BY namespace;

-- name: ThreadExists :one
-- Whether a thread has a thread row or a checkpoint, in any namespace.
SELECT CAST(EXISTS (SELECT 1 FROM threads t WHERE t.tenant_id = @tenant_id AND t.thread_id = @thread_id)
         OR EXISTS (SELECT 1 FROM checkpoints c WHERE c.tenant_id = @tenant_id AND c.thread_id = @thread_id)
         AS INTEGER) AS found;

-- name: ThreadSetRewoundTo :exec
UPDATE threads SET rewound_to = @rewound_to
WHERE tenant_id = @tenant_id AND thread_id = @thread_id AND namespace = @namespace;

-- name: ThreadClearRewoundTo :exec
-- Un-rewinds a thread's namespace rewound to one of ids, its checkpoints
-- about to be deleted: by the primary key (a rewind names a checkpoint of
-- its own thread and namespace), not a scan of every thread. ids is a
-- JSON array of ids, as for CheckpointListDeltasOn.
UPDATE threads SET rewound_to = NULL
WHERE tenant_id = @tenant_id AND thread_id = @thread_id AND namespace = @namespace
  AND rewound_to IN (SELECT value FROM json_each(CAST(@ids AS TEXT)));

-- name: ThreadDelete :exec
DELETE FROM threads WHERE tenant_id = @tenant_id AND thread_id = @thread_id;

-- name: ThreadListHeads :many
-- One row per thread after a thread id, with the head of its root
-- namespace, or else of its first namespace. The root namespace ('', the
-- least text) is taken without looking at the thread's other rows, and a
-- thread that is not rewound without looking for its rewind: the two
-- probes a listing would otherwise pay per thread (issue 28).
SELECT t.thread_id, t.namespace, t.metadata, t.created_at,
       h.checkpoint_id AS head_checkpoint_id, h.step AS head_step, h.summary AS head_summary,
       h.created_at AS head_created_at
FROM threads t
LEFT JOIN checkpoints h
  ON h.tenant_id = t.tenant_id AND h.thread_id = t.thread_id AND h.namespace = t.namespace
 AND h.seq = coalesce(
        CASE WHEN t.rewound_to IS NOT NULL THEN
        (SELECT r.seq FROM checkpoints r
         WHERE r.tenant_id = t.tenant_id AND r.checkpoint_id = t.rewound_to
           AND r.thread_id = t.thread_id AND r.namespace = t.namespace) END,
        (SELECT max(m.seq) FROM checkpoints m
         WHERE m.tenant_id = t.tenant_id AND m.thread_id = t.thread_id AND m.namespace = t.namespace))
WHERE t.tenant_id = @tenant_id AND t.thread_id > @after
  AND (t.namespace = ''
       OR NOT EXISTS (SELECT 1 FROM threads f
                      WHERE f.tenant_id = t.tenant_id AND f.thread_id = t.thread_id AND f.namespace < t.namespace))
ORDER BY t.thread_id
LIMIT @max_rows;

-- name: ThreadListBranches :many
-- The branches forked from a thread, oldest first.
SELECT thread_id, namespace, branch_name, branched_from, created_at
FROM threads
WHERE tenant_id = @tenant_id AND branched_from_thread = @thread_id
ORDER BY created_at, thread_id;

-- name: ThreadIDsAfter :many
-- Up to max_rows thread ids after a thread id, in order (a sweep batch).
SELECT DISTINCT thread_id FROM threads WHERE tenant_id = @tenant_id AND thread_id > @after
ORDER BY thread_id LIMIT @max_rows;

-- name: ThreadSetExpiry :execrows
-- An expiry keeps nothing ('delete': the thread goes) or the heads
-- ('keep_latest').
UPDATE threads
SET expires_at = @expires_at,
    expire_action = CASE WHEN CAST(@keep_latest AS BOOLEAN) THEN 'keep_latest' ELSE 'delete' END
WHERE tenant_id = @tenant_id AND thread_id = @thread_id;

-- name: ThreadExpiriesDue :many
-- The threads of a sweep batch (after after, up to and including last)
-- whose expiry is due at now, each once, with whether that expiry keeps
-- its heads (false: it deletes the thread): of the thread's rows due, the
-- earliest (SQLite takes a bare column from the row min() chose).
SELECT thread_id, CAST(min(expires_at) AS INTEGER) AS expires_at,
       CAST(expire_action = 'keep_latest' AS BOOLEAN) AS keep_latest
FROM threads
WHERE tenant_id = @tenant_id AND thread_id > @after AND thread_id <= @last AND expires_at <= @now
GROUP BY thread_id
ORDER BY thread_id;

-- name: ThreadClearExpiry :exec
UPDATE threads SET expires_at = NULL WHERE tenant_id = @tenant_id AND thread_id = @thread_id;

-- name: ThreadSetSwept :exec
-- Marks the threads of a sweep batch (after after, up to and including
-- last) swept.
UPDATE threads SET swept_at = @swept_at
WHERE tenant_id = @tenant_id AND thread_id > @after AND thread_id <= @last;

-- name: ThreadGetExpiry :one
-- When a thread expires and what its expiry keeps ('delete' or
-- 'keep_latest'), as ThreadSetExpiry set it on every namespace row; no row
-- for an unknown thread, a NULL time when it does not expire. A namespace
-- first written since has no expiry of its own: the earliest row's is the
-- thread's, as a sweep takes it (ThreadExpiriesDue).
SELECT expires_at, expire_action FROM threads
WHERE tenant_id = @tenant_id AND thread_id = @thread_id
ORDER BY expires_at IS NULL, expires_at, namespace
LIMIT 1;
