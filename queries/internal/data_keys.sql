-- The data keys of encrypted threads (DDL in schema/current.sql).

-- name: DataKeyGet :one
SELECT thread_id, kek_id, wrapped_key, shredded_at
FROM pgcheckpoint.tenant_data_keys
WHERE thread_id = @thread_id::text;

-- name: DataKeyInsert :one
-- The thread's key as stored: the one given, or the one that was there
-- (another writer's, or a shredded one).
WITH ins AS (
    INSERT INTO pgcheckpoint.tenant_data_keys (thread_id, kek_id, wrapped_key)
    VALUES (@thread_id::text, @kek_id::text, @wrapped_key::bytea)
    ON CONFLICT (tenant_id, thread_id) DO NOTHING
    RETURNING thread_id, kek_id, wrapped_key, shredded_at
)
SELECT thread_id, kek_id, wrapped_key, shredded_at FROM ins
UNION ALL
SELECT thread_id, kek_id, wrapped_key, shredded_at
FROM pgcheckpoint.tenant_data_keys
WHERE thread_id = @thread_id::text AND NOT EXISTS (SELECT 1 FROM ins);

-- name: DataKeyList :many
SELECT thread_id, kek_id, wrapped_key, shredded_at
FROM pgcheckpoint.tenant_data_keys
WHERE thread_id > @after::text
ORDER BY thread_id
LIMIT @max_rows::int;

-- name: DataKeyRewrap :execrows
UPDATE pgcheckpoint.tenant_data_keys
SET kek_id = @new_kek_id::text, wrapped_key = @new_wrapped_key::bytea, rewrapped_at = now()
WHERE thread_id = @thread_id::text
  AND kek_id = @old_kek_id::text AND wrapped_key = @old_wrapped_key::bytea;

-- name: DataKeyShred :execrows
-- Shreds the thread's key if it is still the one the engine read (0 rows:
-- it changed meanwhile, or is shredded already).
UPDATE pgcheckpoint.tenant_data_keys
SET kek_id = '', wrapped_key = NULL, shredded_at = now()
WHERE thread_id = @thread_id::text
  AND kek_id = @kek_id::text AND wrapped_key = @wrapped_key::bytea;

-- name: DataKeyTombstone :execrows
-- Records a thread as shredded when it has no key, so it never gets one
-- (0 rows: it has a key row).
INSERT INTO pgcheckpoint.tenant_data_keys (thread_id, kek_id, wrapped_key, shredded_at)
VALUES (@thread_id::text, '', NULL, now())
ON CONFLICT (tenant_id, thread_id) DO NOTHING;

-- name: ThreadBranchSource :many
-- The thread a branch was forked from (no row: not a branch), where the
-- keys of the content its first checkpoint copied are.
SELECT branched_from_thread::text
FROM pgcheckpoint.tenant_threads
WHERE thread_id = @thread_id::text AND branched_from_thread IS NOT NULL
LIMIT 1;

-- name: DataKeyImport :execrows
-- An import's data key (0 rows: the thread has another one already). The
-- same key, not shredded, is taken as it is (1 row): the key of a thread
-- deleted since (DeleteThreads leaves it, as an encrypting writer may hold
-- it cached) and imported back from its own export.
INSERT INTO pgcheckpoint.tenant_data_keys AS k (thread_id, kek_id, wrapped_key, shredded_at)
VALUES (@thread_id::text, @kek_id::text, sqlc.narg(wrapped_key)::bytea, sqlc.narg(shredded_at)::timestamptz)
ON CONFLICT (tenant_id, thread_id) DO UPDATE SET kek_id = k.kek_id
WHERE k.kek_id = EXCLUDED.kek_id AND k.wrapped_key = EXCLUDED.wrapped_key
  AND k.shredded_at IS NULL AND EXCLUDED.shredded_at IS NULL;
