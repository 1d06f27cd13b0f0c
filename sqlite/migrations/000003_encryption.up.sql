-- Encryption at rest (issue 30): the data keys of encrypted threads, each
-- wrapped by a key-encryption key the application's KeyProvider holds
-- outside the database (see the Postgres migration 000020_encryption and
-- engine.Encryption). A shredded thread's row keeps the time of the
-- shredding and no key, so the thread never gets a new one.
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
