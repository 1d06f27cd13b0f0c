-- Tenants (issue 29): a tenant_id column, first in every key, on every
-- table; every existing row goes to the tenant 'default'
-- (engine.DefaultTenant). Two tenants may use the same thread ids and
-- checkpoint ids: a checkpoint id is unique per tenant. Every query of the
-- store filters by the tenant it is bound to (see package sqlite); a file
-- is one trust domain: whoever can open it reads every tenant.
--
-- SQLite cannot change a primary key: each table is rebuilt (made anew,
-- filled, the old one dropped, the new one renamed), with every index the
-- old one had, now led by tenant_id. The first statement adds tenant_id to
-- the old threads table, which fails on a file this migration already ran
-- on: a second process that runs it at once fails with nothing changed,
-- where a rebuild run twice would move every tenant's rows to 'default'
-- (sqlite.Migrate then finds the migration applied and clears the dirty
-- flag golang-migrate set).

ALTER TABLE threads ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';

CREATE TABLE threads_v2 (
    tenant_id            TEXT    NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 255),
    thread_id            TEXT    NOT NULL CHECK (length(thread_id) BETWEEN 1 AND 255),
    namespace            TEXT    NOT NULL DEFAULT '' CHECK (length(namespace) <= 255),
    -- Set by a rewind: the head until the next write, which clears it.
    rewound_to           TEXT,
    metadata             TEXT    NOT NULL DEFAULT '{}',
    created_at           INTEGER NOT NULL,
    -- For a branch: its name, the checkpoint and the thread it was forked
    -- from (of the same tenant).
    branch_name          TEXT,
    branched_from        TEXT,
    branched_from_thread TEXT,
    -- Retention: when a sweep last went through, when the thread expires and
    -- what expiry does then.
    swept_at             INTEGER,
    expires_at           INTEGER,
    expire_action        TEXT    NOT NULL DEFAULT 'delete' CHECK (expire_action IN ('delete', 'keep_latest')),
    PRIMARY KEY (tenant_id, thread_id, namespace)
);

INSERT INTO threads_v2 (tenant_id, thread_id, namespace, rewound_to, metadata, created_at, branch_name,
                        branched_from, branched_from_thread, swept_at, expires_at, expire_action)
SELECT tenant_id, thread_id, namespace, rewound_to, metadata, created_at, branch_name,
       branched_from, branched_from_thread, swept_at, expires_at, expire_action
FROM threads;

-- The columns are ordered small first, content last: SQLite reads a row's
-- columns in order, so listings and lookups that stop before the content
-- never read its overflow pages.
CREATE TABLE checkpoints_v2 (
    tenant_id            TEXT    NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 255),
    thread_id            TEXT    NOT NULL,
    namespace            TEXT    NOT NULL DEFAULT '',
    -- Write order within the thread and namespace, from 1.
    seq                  INTEGER NOT NULL,
    checkpoint_id        TEXT    NOT NULL,
    parent_checkpoint_id TEXT,
    merge_parent_id      TEXT,
    step                 INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    trigger              TEXT    NOT NULL DEFAULT 'manual',
    tags                 TEXT    NOT NULL DEFAULT '[]',
    summary              TEXT    NOT NULL DEFAULT '',
    next_node            TEXT    NOT NULL DEFAULT '',
    size_bytes           INTEGER NOT NULL DEFAULT 0,
    -- 'full': messages, state and tool_results are the whole snapshot.
    -- 'delta': only the changes since base_checkpoint_id, an earlier
    -- checkpoint of the same thread and namespace (see package sqlite).
    format               TEXT    NOT NULL DEFAULT 'full' CHECK (format IN ('full', 'delta')),
    base_checkpoint_id   TEXT,
    delta_run            INTEGER NOT NULL DEFAULT 0,
    delta_depth          INTEGER NOT NULL DEFAULT 0,
    -- Digests of the whole content, compared by a child to find what
    -- changed: the message count, SHA-256 of the concatenated 16-byte
    -- message digests, and a JSON object of per-key digests. NULL: unknown
    -- (the child is stored whole).
    messages_count       INTEGER,
    messages_digest      BLOB,
    state_digests        TEXT,
    tool_results_digests TEXT,
    metadata             TEXT    NOT NULL DEFAULT '{}',
    state_removed        TEXT    NOT NULL DEFAULT '[]',
    tool_results_removed TEXT    NOT NULL DEFAULT '[]',
    messages             TEXT    NOT NULL DEFAULT '[]',
    state                TEXT    NOT NULL DEFAULT '{}',
    tool_results         TEXT    NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, thread_id, namespace, seq),
    UNIQUE (tenant_id, checkpoint_id)
);

INSERT INTO checkpoints_v2 (tenant_id, thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id,
    step, created_at, trigger, tags, summary, next_node, size_bytes, format, base_checkpoint_id, delta_run, delta_depth,
    messages_count, messages_digest, state_digests, tool_results_digests, metadata, state_removed, tool_results_removed,
    messages, state, tool_results)
SELECT 'default', thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id,
    step, created_at, trigger, tags, summary, next_node, size_bytes, format, base_checkpoint_id, delta_run, delta_depth,
    messages_count, messages_digest, state_digests, tool_results_digests, metadata, state_removed, tool_results_removed,
    messages, state, tool_results
FROM checkpoints;

CREATE TABLE pending_writes_v2 (
    tenant_id      TEXT    NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 255),
    thread_id      TEXT    NOT NULL,
    namespace      TEXT    NOT NULL DEFAULT '',
    checkpoint_seq INTEGER NOT NULL,
    checkpoint_id  TEXT    NOT NULL,
    task_id        TEXT    NOT NULL CHECK (task_id <> ''),
    idx            INTEGER NOT NULL CHECK (idx >= 0),
    channel        TEXT    NOT NULL,
    value          TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, thread_id, namespace, checkpoint_seq, task_id, idx),
    FOREIGN KEY (tenant_id, thread_id, namespace, checkpoint_seq)
        REFERENCES checkpoints_v2 (tenant_id, thread_id, namespace, seq) ON DELETE CASCADE
);

INSERT INTO pending_writes_v2 (tenant_id, thread_id, namespace, checkpoint_seq, checkpoint_id, task_id, idx, channel,
                               value, created_at)
SELECT 'default', thread_id, namespace, checkpoint_seq, checkpoint_id, task_id, idx, channel, value, created_at
FROM pending_writes;

DROP TABLE pending_writes;
DROP TABLE checkpoints;
DROP INDEX IF EXISTS threads_branched_from_thread_idx;
DROP TABLE threads;

ALTER TABLE threads_v2 RENAME TO threads;
ALTER TABLE checkpoints_v2 RENAME TO checkpoints;
ALTER TABLE pending_writes_v2 RENAME TO pending_writes;

CREATE INDEX threads_branched_from_thread_idx ON threads (tenant_id, branched_from_thread)
    WHERE branched_from_thread IS NOT NULL;
