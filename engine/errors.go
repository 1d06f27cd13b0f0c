package engine

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is; the returned error wraps one of
// them with what was wrong and what to do about it. Every call that returns
// ErrInvalidInput (or an error wrapping it) has written nothing.
var (
	// ErrNotFound: the checkpoint, thread or parent named does not exist.
	ErrNotFound = errors.New("pgcheckpoint: not found")

	// ErrInvalidInput: an argument is malformed (empty or over-long thread
	// id, NUL in a text field, unknown trigger, a checkpoint id that is not
	// a UUIDv7, ...). ErrInvalidJSON and ErrSnapshotTooLarge wrap it.
	ErrInvalidInput = errors.New("pgcheckpoint: invalid input")

	// ErrInvalidJSON: a JSON argument does not parse, has the wrong shape
	// (messages must be an array; state, tool results and metadata objects),
	// or holds what Postgres jsonb cannot: bytes that are not UTF-8, an
	// unpaired UTF-16 surrogate escape, a number beyond numeric's range
	// (131,072 digits before the point, 16,383 after, an exponent under
	// 2^30-1). Both stores refuse the same values, so an export of either
	// imports into the other.
	ErrInvalidJSON = fmt.Errorf("%w: invalid JSON", ErrInvalidInput)

	// ErrSnapshotTooLarge: a write is over Config.MaxSnapshotBytes: a
	// checkpoint (content, metadata, summary, next node and tags; for an
	// Append, the head's content with the change), one PutWrites call, or
	// an import's record. Nothing was written.
	ErrSnapshotTooLarge = fmt.Errorf("%w: snapshot too large", ErrInvalidInput)

	// ErrIDConflict: a Snapshot reused an existing checkpoint id for other
	// content or another thread. A retry of the very same write is not a
	// conflict: it returns the stored checkpoint.
	ErrIDConflict = errors.New("pgcheckpoint: checkpoint id already used for other content")

	// ErrHeadMoved: an Append with AppendInput.OnHead set found another
	// checkpoint at the head of its thread and namespace (another writer
	// wrote first, or a Rewind moved it). Nothing was written: read the
	// head again (Latest) and append to it, or write the whole checkpoint.
	ErrHeadMoved = errors.New("pgcheckpoint: the head is not the checkpoint the append was made on")

	// ErrDamaged: a checkpoint cannot be read because what is stored for
	// it is damaged: its chain of deltas does not reach a full snapshot (a
	// base deleted or changed by hand, a format neither 'full' nor 'delta';
	// SQLSTATE PC004 from the SQL functions). Every delta written on it
	// reads the same; checkpoints below the damage still read. Restore the
	// rows from a backup or an export.
	ErrDamaged = errors.New("pgcheckpoint: stored checkpoint is damaged")

	// ErrPermission: the database refused the call for want of a privilege
	// (SQLSTATE 42501): a read-only role tried to write, or a role lacks a
	// grant the call needs; or the session can only read (25006: a hot
	// standby, default_transaction_read_only); or, on SQLite, a write to a
	// file this process may not write (the file, its directory or its
	// filesystem is read-only; the store opened it for reading). Nothing
	// was written. Use a role that may write, or grant this one what
	// schema/roles/roles.sql grants the application role; for SQLite, a
	// file and directory this process may write.
	ErrPermission = errors.New("pgcheckpoint: permission denied")

	// ErrStorageFull: the database could not write for want of space: the
	// disk or volume is full (Postgres SQLSTATE 53100 disk_full, SQLite
	// SQLITE_FULL). Nothing was written. It is not ErrTransient, so
	// Config.Retry does not retry it: a full disk rarely frees up within a
	// retry's backoff, and retries would only add load. Free space or grow
	// the volume (retention: PruneThreads, Sweep), then write again
	// with the same checkpoint id.
	ErrStorageFull = errors.New("pgcheckpoint: storage full")

	// ErrNotMigrated: the database holds no pgcheckpoint schema, or an
	// older one than this program needs (Postgres: SQLSTATE 3F000 or 42P01
	// at call time, a version behind at Open). Run the migrations:
	// `migrate -database URL up`, schema.Migrate or sqlite.Migrate, or
	// open with pgcheckpoint.Options.Migrate.
	ErrNotMigrated = errors.New("pgcheckpoint: database not migrated")

	// ErrNewerSchema: the database was migrated by a newer version of
	// pgcheckpoint than this program. Upgrade the program; migrating down
	// would drop what the newer version stores.
	ErrNewerSchema = errors.New("pgcheckpoint: database migrated by a newer version of pgcheckpoint")

	// ErrDirtySchema: a migration failed part way and left the schema
	// marked dirty (golang-migrate's flag). Repair the schema by hand, then
	// record the version it is at (`migrate force VERSION`).
	ErrDirtySchema = errors.New("pgcheckpoint: a migration failed part way (dirty schema version)")

	// ErrEncrypted: content under encryption (Config.Encryption) cannot be
	// read or written: the thread's data key is missing or was shredded
	// (ShredThread), the KeyProvider does not have or refuses the
	// key-encryption key that wrapped it (a wrong or revoked key), a
	// ciphertext does not open (altered, or moved from another row, thread,
	// field or position), or a value of a thread that must be encrypted is
	// plaintext. No content is returned with it, not even part of a
	// checkpoint. An Engine without Config.Encryption returns it too for a
	// thread whose content is encrypted, and for a write (Snapshot, Append,
	// PutWrites, ClearMemory, MergeBranch) into a thread that has a data
	// key, shredded or not, or a CopyThread or Branch of one, or a
	// MergeBranch of an encrypted branch: nothing is written.
	ErrEncrypted = errors.New("pgcheckpoint: encrypted content needs its key")

	// ErrKeyNotDestroyed: a KeyShredder (HeldKeys) failed to destroy a
	// data key that no key row names any more (ShredThread shredded the
	// row, RewrapKeys replaced the wrapping): the database is as the call
	// meant, and Engine.PruneKeys destroys the key later; until then the
	// provider still holds it.
	ErrKeyNotDestroyed = errors.New("pgcheckpoint: the key provider did not destroy a data key no row names")

	// ErrTransient: the database failed the call for a reason that passes:
	// the connection was lost or refused, the server is shutting down or
	// starting, a serialization failure or deadlock, a lock another client
	// held past the session's lock_timeout, too many connections, a SQLite
	// file busy past its timeout. A write may or may not have
	// committed (the acknowledgment may be what was lost): retry it with
	// the same checkpoint id, which is safe, or let Config.Retry do it.
	ErrTransient = errors.New("pgcheckpoint: transient database failure")
)
