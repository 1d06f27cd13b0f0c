-- Encryption at rest (issue 30): the data keys of encrypted threads, each
-- wrapped (encrypted) by a key-encryption key the application's
-- KeyProvider holds outside the database. The content of an encrypted
-- thread's checkpoints is ciphertext that only these keys, unwrapped by
-- the provider, open; see engine.Encryption. A row of a shredded thread
-- keeps the time of the shredding and no key, so the thread never gets a
-- new one.
CREATE TABLE pgcheckpoint.data_keys (
    tenant_id    text        NOT NULL DEFAULT pgcheckpoint.current_tenant(),
    thread_id    text        NOT NULL CHECK (length(thread_id) BETWEEN 1 AND 255),
    kek_id       text        NOT NULL,
    wrapped_key  bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    rewrapped_at timestamptz,
    shredded_at  timestamptz,
    PRIMARY KEY (thread_id, tenant_id),
    CONSTRAINT data_keys_shredded_has_no_key CHECK ((wrapped_key IS NULL) = (shredded_at IS NOT NULL))
);

COMMENT ON TABLE pgcheckpoint.data_keys IS
    'The data key of each encrypted thread, wrapped by a key-encryption key held outside the database (engine.KeyProvider). Deleting a key (ShredThread) leaves its thread''s content unreadable.';
COMMENT ON COLUMN pgcheckpoint.data_keys.tenant_id IS 'The tenant of the thread: the session''s (pgcheckpoint.current_tenant()); ''default'' without tenancy.';
COMMENT ON COLUMN pgcheckpoint.data_keys.thread_id IS 'The thread whose content the key encrypts.';
COMMENT ON COLUMN pgcheckpoint.data_keys.kek_id IS 'The id, in the KeyProvider, of the key-encryption key that wrapped the key; '''' once shredded.';
COMMENT ON COLUMN pgcheckpoint.data_keys.wrapped_key IS 'The data key, encrypted by the key-encryption key kek_id (bound to tenant and thread); NULL once shredded.';
COMMENT ON COLUMN pgcheckpoint.data_keys.created_at IS 'When the thread''s first encrypted write made the key.';
COMMENT ON COLUMN pgcheckpoint.data_keys.rewrapped_at IS 'When the key was last wrapped again under a new key-encryption key (RewrapKeys, ckpt rewrap).';
COMMENT ON COLUMN pgcheckpoint.data_keys.shredded_at IS 'When the key was deleted (ShredThread): the thread''s content is erased.';

-- Row-level security, as on every table (migration 19).
ALTER TABLE pgcheckpoint.data_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgcheckpoint.data_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant ON pgcheckpoint.data_keys
    USING (tenant_id = pgcheckpoint.current_tenant()) WITH CHECK (tenant_id = pgcheckpoint.current_tenant());
COMMENT ON POLICY tenant ON pgcheckpoint.data_keys IS 'A session sees and writes the rows of its tenant (pgcheckpoint.current_tenant()) alone; none with no tenant set.';
