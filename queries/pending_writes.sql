-- name: PendingWritePutMany :one
-- Records a task's writes after a checkpoint, positions 0..n-1, in one
-- statement. A retried write of the same task and position is ignored.
-- found = 0 means the checkpoint does not exist. The checkpoint's row is
-- locked FOR KEY SHARE where it is read: a delete of it waits for this
-- statement's transaction, and one that committed meanwhile leaves
-- nothing to lock (found = 0; 40001 under REPEATABLE READ), so the writes
-- never land on another checkpoint written at its seq since. Values that
-- are not sealed (@sealed false) are refused for an encrypted thread:
-- PC007, nothing written (see pgcheckpoint.thread_refuse_plaintext).
WITH target AS (
    SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id
    FROM pgcheckpoint.tenant_checkpoints c
    WHERE c.checkpoint_id = @checkpoint_id::uuid
    LIMIT 1
    FOR KEY SHARE
), checked AS (
    SELECT pgcheckpoint.thread_refuse_plaintext(target.thread_id, @sealed::boolean) FROM target
), inserted AS (
    INSERT INTO pgcheckpoint.tenant_pending_writes
        (thread_id, namespace, checkpoint_seq, checkpoint_id, task_id, idx, channel, value)
    SELECT target.thread_id, target.namespace, target.seq, target.checkpoint_id, @task_id::text,
           (w.ord - 1)::int, w.channel, (@vals::jsonb[])[w.ord]
    FROM target, checked,
         unnest(@channels::text[]) WITH ORDINALITY AS w(channel, ord)
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM target) AS found,
       (SELECT count(*) FROM inserted) AS inserted;
