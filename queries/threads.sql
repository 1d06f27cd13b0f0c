-- name: ThreadListHeads :many
-- A page of threads with their heads (see pgcheckpoint.thread_list_heads).
SELECT h.thread_id::text AS thread_id, h.namespace::text AS namespace, h.metadata::jsonb AS metadata,
       h.created_at::timestamptz AS created_at, h.head_checkpoint_id::uuid AS head_checkpoint_id,
       h.head_step::bigint AS head_step, h.head_summary::text AS head_summary,
       h.head_created_at::timestamptz AS head_created_at
FROM pgcheckpoint.thread_list_heads(@after::text, @max_rows::int) AS h;

-- name: ThreadDelete :one
-- See pgcheckpoint.thread_delete: every table, under the thread lock.
SELECT pgcheckpoint.thread_delete(@thread_id::text)::bigint AS deleted;

-- name: ThreadBranch :one
-- Forks a new thread from a checkpoint (see pgcheckpoint.thread_branch).
SELECT b.thread_id::text AS thread_id, b.checkpoint_id::uuid AS checkpoint_id, b.step::bigint AS step
FROM pgcheckpoint.thread_branch(@source_checkpoint_id::uuid, @new_thread_id::text, @branch_name::text, @checkpoint_id::uuid) AS b;

-- name: ThreadListBranches :many
-- The branches forked from a thread, oldest first.
SELECT t.thread_id, t.namespace, coalesce(t.branch_name, '')::text AS branch_name,
       coalesce(t.branched_from, '00000000-0000-0000-0000-000000000000')::uuid AS branched_from,
       t.created_at
FROM pgcheckpoint.tenant_threads t
WHERE t.branched_from_thread = @thread_id::text
ORDER BY t.created_at, t.thread_id;

-- name: ThreadMerge :one
-- Writes the branch head's content onto the target thread with two parents,
-- both in one namespace (see pgcheckpoint.thread_merge).
SELECT m.thread_id::text AS thread_id, m.checkpoint_id::uuid AS checkpoint_id,
       coalesce(m.parent_checkpoint_id, '00000000-0000-0000-0000-000000000000')::uuid AS parent_checkpoint_id,
       m.merge_parent_id::uuid AS merge_parent_id, m.step::bigint AS step
FROM pgcheckpoint.thread_merge(@branch_thread_id::text, @into_thread_id::text, @checkpoint_id::uuid, @namespace::text) AS m;

-- name: ThreadCopy :many
-- See pgcheckpoint.thread_copy: each source checkpoint's id and its copy's,
-- in namespace then write order.
SELECT c.old_checkpoint_id::uuid AS old_checkpoint_id, c.new_checkpoint_id::uuid AS new_checkpoint_id
FROM pgcheckpoint.thread_copy(@source_thread_id::text, @target_thread_id::text) AS c;

-- name: ThreadPruneMany :one
-- See pgcheckpoint.thread_prune_many.
SELECT pgcheckpoint.thread_prune_many(@thread_ids::text[], @keep_latest::boolean)::bigint AS deleted;
