-- Back to version 1, which has no tenants: the rows of the tenant
-- 'default' are kept, every other tenant's rows are dropped (version 1
-- has no key to keep them apart). Tables are rebuilt as the up migration
-- does, in reverse.

CREATE TABLE threads_v1 (
    thread_id            TEXT    NOT NULL CHECK (length(thread_id) BETWEEN 1 AND 255),
    namespace            TEXT    NOT NULL DEFAULT '' CHECK (length(namespace) <= 255),
    rewound_to           TEXT,
    metadata             TEXT    NOT NULL DEFAULT '{}',
    created_at           INTEGER NOT NULL,
    branch_name          TEXT,
    branched_from        TEXT,
    branched_from_thread TEXT,
    swept_at             INTEGER,
    expires_at           INTEGER,
    expire_action        TEXT    NOT NULL DEFAULT 'delete' CHECK (expire_action IN ('delete', 'keep_latest')),
    PRIMARY KEY (thread_id, namespace)
);

INSERT INTO threads_v1 (thread_id, namespace, rewound_to, metadata, created_at, branch_name, branched_from,
                        branched_from_thread, swept_at, expires_at, expire_action)
SELECT thread_id, namespace, rewound_to, metadata, created_at, branch_name, branched_from,
       branched_from_thread, swept_at, expires_at, expire_action
FROM threads WHERE tenant_id = 'default';

CREATE TABLE checkpoints_v1 (
    thread_id            TEXT    NOT NULL,
    namespace            TEXT    NOT NULL DEFAULT '',
    seq                  INTEGER NOT NULL,
    checkpoint_id        TEXT    NOT NULL UNIQUE,
    parent_checkpoint_id TEXT,
    merge_parent_id      TEXT,
    step                 INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    trigger              TEXT    NOT NULL DEFAULT 'manual',
    tags                 TEXT    NOT NULL DEFAULT '[]',
    summary              TEXT    NOT NULL DEFAULT '',
    next_node            TEXT    NOT NULL DEFAULT '',
    size_bytes           INTEGER NOT NULL DEFAULT 0,
    format               TEXT    NOT NULL DEFAULT 'full' CHECK (format IN ('full', 'delta')),
    base_checkpoint_id   TEXT,
    delta_run            INTEGER NOT NULL DEFAULT 0,
    delta_depth          INTEGER NOT NULL DEFAULT 0,
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
    PRIMARY KEY (thread_id, namespace, seq)
);

INSERT INTO checkpoints_v1 (thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id,
    step, created_at, trigger, tags, summary, next_node, size_bytes, format, base_checkpoint_id, delta_run, delta_depth,
    messages_count, messages_digest, state_digests, tool_results_digests, metadata, state_removed, tool_results_removed,
    messages, state, tool_results)
SELECT thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id,
    step, created_at, trigger, tags, summary, next_node, size_bytes, format, base_checkpoint_id, delta_run, delta_depth,
    messages_count, messages_digest, state_digests, tool_results_digests, metadata, state_removed, tool_results_removed,
    messages, state, tool_results
FROM checkpoints WHERE tenant_id = 'default';

CREATE TABLE pending_writes_v1 (
    thread_id      TEXT    NOT NULL,
    namespace      TEXT    NOT NULL DEFAULT '',
    checkpoint_seq INTEGER NOT NULL,
    checkpoint_id  TEXT    NOT NULL,
    task_id        TEXT    NOT NULL CHECK (task_id <> ''),
    idx            INTEGER NOT NULL CHECK (idx >= 0),
    channel        TEXT    NOT NULL,
    value          TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (thread_id, namespace, checkpoint_seq, task_id, idx),
    FOREIGN KEY (thread_id, namespace, checkpoint_seq)
        REFERENCES checkpoints_v1 (thread_id, namespace, seq) ON DELETE CASCADE
);

INSERT INTO pending_writes_v1 (thread_id, namespace, checkpoint_seq, checkpoint_id, task_id, idx, channel, value,
                               created_at)
SELECT thread_id, namespace, checkpoint_seq, checkpoint_id, task_id, idx, channel, value, created_at
FROM pending_writes WHERE tenant_id = 'default';

DROP TABLE pending_writes;
DROP TABLE checkpoints;
DROP INDEX IF EXISTS threads_branched_from_thread_idx;
DROP TABLE threads;

ALTER TABLE threads_v1 RENAME TO threads;
ALTER TABLE checkpoints_v1 RENAME TO checkpoints;
ALTER TABLE pending_writes_v1 RENAME TO pending_writes;

CREATE INDEX threads_branched_from_thread_idx ON threads (branched_from_thread)
    WHERE branched_from_thread IS NOT NULL;
