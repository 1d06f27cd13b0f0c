-- Queries about pending writes (DDL in ../migrations/).
-- Each is about one tenant, as in checkpoints.sql.

-- name: PendingWriteInsert :execrows
-- Records one write; a position already recorded keeps its value (0 rows).
INSERT INTO pending_writes (tenant_id, thread_id, namespace, checkpoint_seq, checkpoint_id, task_id, idx, channel, value,
                            created_at)
VALUES (@tenant_id, @thread_id, @namespace, @checkpoint_seq, @checkpoint_id, @task_id, @idx, @channel, @value, @created_at)
ON CONFLICT DO NOTHING;

-- name: PendingWriteListByCheckpoint :many
SELECT task_id, idx, channel, value, created_at
FROM pending_writes
WHERE tenant_id = @tenant_id AND thread_id = @thread_id AND namespace = @namespace AND checkpoint_seq = @checkpoint_seq
ORDER BY task_id, idx;

-- name: PendingWriteListByThread :many
SELECT * FROM pending_writes WHERE tenant_id = @tenant_id AND thread_id = @thread_id
ORDER BY namespace, checkpoint_seq, task_id, idx;
