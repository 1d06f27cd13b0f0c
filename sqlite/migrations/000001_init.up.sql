-- pgcheckpoint on SQLite: threads, checkpoints and pending writes, the same
-- rows as the Postgres schema (schema/*.up.sql) in SQLite's types:
--   ids (uuid)        TEXT, the canonical 36-character form;
--   times             INTEGER, microseconds since the Unix epoch (UTC), as
--                     precise as Postgres timestamptz;
--   JSON (jsonb)      TEXT, exactly as the engine handed it over (its stored
--                     form, NUL characters escaped: see engine/nul.go);
--   text[]            TEXT holding a JSON array of strings.
-- Every key starts with thread_id, as on Postgres.
--
-- Every statement is IF NOT EXISTS: several processes that open a new file
-- with Options.Migrate at once may each run this migration; all of them
-- succeed and the schema is made once.

CREATE TABLE IF NOT EXISTS threads (
    thread_id            TEXT    NOT NULL CHECK (length(thread_id) BETWEEN 1 AND 255),
    namespace            TEXT    NOT NULL DEFAULT '' CHECK (length(namespace) <= 255),
    -- Set by a rewind: the head until the next write, which clears it.
    rewound_to           TEXT,
    metadata             TEXT    NOT NULL DEFAULT '{}',
    created_at           INTEGER NOT NULL,
    -- For a branch: its name, the checkpoint and the thread it was forked from.
    branch_name          TEXT,
    branched_from        TEXT,
    branched_from_thread TEXT,
    -- Retention: when a sweep last went through, when the thread expires and
    -- what expiry does then.
    swept_at             INTEGER,
    expires_at           INTEGER,
    expire_action        TEXT    NOT NULL DEFAULT 'delete' CHECK (expire_action IN ('delete', 'keep_latest')),
    PRIMARY KEY (thread_id, namespace)
);

CREATE INDEX IF NOT EXISTS threads_branched_from_thread_idx ON threads (branched_from_thread)
    WHERE branched_from_thread IS NOT NULL;

-- The columns are ordered small first, content last: SQLite reads a row's
-- columns in order, so listings and lookups that stop before the content
-- never read its overflow pages.
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id            TEXT    NOT NULL,
    namespace            TEXT    NOT NULL DEFAULT '',
    -- Write order within the thread and namespace, from 1.
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
    PRIMARY KEY (thread_id, namespace, seq)
);

CREATE TABLE IF NOT EXISTS pending_writes (
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
        REFERENCES checkpoints (thread_id, namespace, seq) ON DELETE CASCADE
);
