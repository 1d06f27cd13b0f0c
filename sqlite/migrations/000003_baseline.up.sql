-- The SQLite store's schema at version 3, whole. Before 0.1.0 every
-- migration was folded into this one (docs/contributing.md, "Migrations");
-- it was generated from a file migrated to version 3 with
--
--   go test ./integration -run '^TestFoldMigrations$' -fold
--
-- and is never edited: a later migration changes what it made.
--
-- The same rows as the Postgres schema (schema/current.sql) in SQLite's
-- types: ids (uuid) TEXT, the canonical 36-character form; times INTEGER,
-- microseconds since the Unix epoch (UTC), as precise as Postgres
-- timestamptz; JSON (jsonb) TEXT, exactly as the engine handed it over
-- (its stored form, NUL characters escaped: see engine/nul.go); text[]
-- TEXT holding a JSON array of strings. Every key starts with tenant_id,
-- then thread_id.
--
-- Every statement is IF NOT EXISTS: several processes that open a new file
-- with Options.Migrate at once may each run this migration; all of them
-- succeed and the schema is made once.

CREATE TABLE IF NOT EXISTS threads (
    tenant_id            TEXT    NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 255),
    thread_id            TEXT    NOT NULL CHECK (length(thread_id) BETWEEN 1 AND 255),
    namespace            TEXT    NOT NULL DEFAULT '' CHECK (length(namespace) <= 255),
    -- Set by a rewind: the head until the next write, which clears it.
    rewound_to           TEXT,
    metadata             TEXT    NOT NULL DEFAULT '{}',
    created_at           INTEGER NOT NULL,
    -- For a branch: its name, the checkpoint and the thread it was forked
    -- from (of the same tenant).
    branch_name          TEXT    CHECK (branch_name IS NULL OR length(branch_name) BETWEEN 1 AND 255),
    branched_from        TEXT,
    branched_from_thread TEXT,
    -- Retention: when a sweep last went through, when the thread expires and
    -- what expiry does then.
    swept_at             INTEGER,
    expires_at           INTEGER,
    expire_action        TEXT    NOT NULL DEFAULT 'delete' CHECK (expire_action IN ('delete', 'keep_latest')),
    PRIMARY KEY (tenant_id, thread_id, namespace)
);

CREATE TABLE IF NOT EXISTS checkpoints (
    tenant_id            TEXT    NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 255),
    thread_id            TEXT    NOT NULL CHECK (length(thread_id) BETWEEN 1 AND 255),
    namespace            TEXT    NOT NULL DEFAULT '' CHECK (length(namespace) <= 255),
    -- Write order within the thread and namespace, from 1.
    seq                  INTEGER NOT NULL,
    checkpoint_id        TEXT    NOT NULL,
    parent_checkpoint_id TEXT,
    merge_parent_id      TEXT,
    step                 INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    trigger              TEXT    NOT NULL DEFAULT 'manual'
        CHECK (trigger IN ('tool_call', 'llm_call', 'state_change', 'task_boundary', 'manual', 'interval')),
    -- A JSON array of at most 256 (a check here cannot read its elements:
    -- the engine holds each to 255 characters).
    tags                 TEXT    NOT NULL DEFAULT '[]' CHECK (json_type(tags) = 'array' AND json_array_length(tags) <= 256),
    summary              TEXT    NOT NULL DEFAULT '' CHECK (length(summary) <= 4096),
    next_node            TEXT    NOT NULL DEFAULT '' CHECK (length(next_node) <= 255),
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

CREATE TABLE IF NOT EXISTS pending_writes (
    tenant_id      TEXT    NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 255),
    thread_id      TEXT    NOT NULL,
    namespace      TEXT    NOT NULL DEFAULT '',
    checkpoint_seq INTEGER NOT NULL,
    checkpoint_id  TEXT    NOT NULL,
    task_id        TEXT    NOT NULL CHECK (length(task_id) BETWEEN 1 AND 255),
    idx            INTEGER NOT NULL CHECK (idx >= 0),
    channel        TEXT    NOT NULL CHECK (length(channel) BETWEEN 1 AND 255),
    value          TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, thread_id, namespace, checkpoint_seq, task_id, idx),
    FOREIGN KEY (tenant_id, thread_id, namespace, checkpoint_seq)
        REFERENCES checkpoints (tenant_id, thread_id, namespace, seq) ON DELETE CASCADE
);

CREATE INDEX IF NOT EXISTS threads_branched_from_thread_idx ON threads (tenant_id, branched_from_thread)
    WHERE branched_from_thread IS NOT NULL;

CREATE TABLE IF NOT EXISTS data_keys (
    tenant_id    TEXT    NOT NULL CHECK (length(tenant_id) BETWEEN 1 AND 255),
    thread_id    TEXT    NOT NULL CHECK (length(thread_id) BETWEEN 1 AND 255),
    kek_id       TEXT    NOT NULL,
    wrapped_key  BLOB,
    created_at   INTEGER NOT NULL,
    rewrapped_at INTEGER,
    shredded_at  INTEGER,
    PRIMARY KEY (tenant_id, thread_id),
    CHECK ((wrapped_key IS NULL) = (shredded_at IS NOT NULL))
);
