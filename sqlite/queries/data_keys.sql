-- The data keys of encrypted threads (DDL in ../migrations/).

-- name: DataKeyGet :one
SELECT thread_id, kek_id, wrapped_key, shredded_at
FROM data_keys
WHERE tenant_id = @tenant_id AND thread_id = @thread_id;

-- name: DataKeyInsert :exec
INSERT INTO data_keys (tenant_id, thread_id, kek_id, wrapped_key, created_at)
VALUES (@tenant_id, @thread_id, @kek_id, @wrapped_key, @created_at)
ON CONFLICT (tenant_id, thread_id) DO NOTHING;

-- name: DataKeyList :many
SELECT thread_id, kek_id, wrapped_key, shredded_at
FROM data_keys
WHERE tenant_id = @tenant_id AND thread_id > @after
ORDER BY thread_id
LIMIT @max_rows;

-- name: DataKeyRewrap :execrows
UPDATE data_keys
SET kek_id = @new_kek_id, wrapped_key = @new_wrapped_key, rewrapped_at = @now
WHERE tenant_id = @tenant_id AND thread_id = @thread_id
  AND kek_id = @old_kek_id AND wrapped_key = @old_wrapped_key;

-- name: DataKeyShred :execrows
-- Shreds the thread's key if it is still the one the engine read (0 rows:
-- it changed meanwhile, or is shredded already).
UPDATE data_keys
SET kek_id = '', wrapped_key = NULL, shredded_at = @now
WHERE tenant_id = @tenant_id AND thread_id = @thread_id
  AND kek_id = @kek_id AND wrapped_key = @wrapped_key;

-- name: DataKeyTombstone :execrows
-- Records a thread as shredded when it has no key, so it never gets one
-- (0 rows: it has a key row).
INSERT INTO data_keys (tenant_id, thread_id, kek_id, wrapped_key, created_at, shredded_at)
VALUES (@tenant_id, @thread_id, '', NULL, @now, @now)
ON CONFLICT (tenant_id, thread_id) DO NOTHING;

-- name: ThreadBranchSource :many
-- The thread a branch was forked from (no row: not a branch).
SELECT CAST(branched_from_thread AS TEXT) AS branched_from_thread
FROM threads
WHERE tenant_id = @tenant_id AND thread_id = @thread_id AND branched_from_thread IS NOT NULL
LIMIT 1;

-- name: DataKeyImport :execrows
-- An import's data key (0 rows: the thread has another one already). The
-- same key, not shredded, is taken as it is (1 row): the key of a thread
-- deleted since and imported back from its own export (as on Postgres).
INSERT INTO data_keys (tenant_id, thread_id, kek_id, wrapped_key, created_at, shredded_at)
VALUES (@tenant_id, @thread_id, @kek_id, @wrapped_key, @created_at, @shredded_at)
ON CONFLICT (tenant_id, thread_id) DO UPDATE SET kek_id = data_keys.kek_id
WHERE data_keys.kek_id = excluded.kek_id AND data_keys.wrapped_key = excluded.wrapped_key
  AND data_keys.shredded_at IS NULL AND excluded.shredded_at IS NULL;
