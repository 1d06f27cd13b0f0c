package schema

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/internal/dburl"
	"github.com/pgcheckpoint/pgcheckpoint/migrations"
)

// FS holds the migrations, NNNNNN_name.up.sql and NNNNNN_name.down.sql,
// of package migrations (folder migrations/). They are plain SQL, usable by
// any migration tool.
var FS = migrations.FS

// Name of the Postgres schema that holds every pgcheckpoint object,
// including the migration version table.
const Name = "pgcheckpoint"

// VersionTable is the table, in schema Name, where the applied version is kept.
const VersionTable = "schema_migrations"

// MigrationLockKey is the key of the advisory lock that serialises
// pgcheckpoint migrations ("pgckpmig" in ASCII). Every migration takes it
// with pg_advisory_xact_lock, so it is released when its transaction ends
// and can never be left behind. In pg_locks it is the advisory lock with
// classid 1885823851 and objid 1886218599.
const MigrationLockKey int64 = 0x70_67_63_6b_70_6d_69_67

var (
	// ErrDirty means an earlier migration failed part way and the database
	// was left marked dirty at that version: by golang-migrate or an older
	// pgcheckpoint, whose migrations were not one transaction (a Migrator's
	// failed migration changes nothing). Nothing runs until an operator
	// has repaired the schema by hand and called Force with the version the
	// schema really is at.
	ErrDirty = errors.New("pgcheckpoint schema is dirty")

	// ErrUnknownVersion means no migration has the requested version, or
	// the database is at a version newer than this program knows.
	ErrUnknownVersion = errors.New("no such migration version")

	// ErrBadURL means the database URL names no store (it is empty, or
	// not a Postgres URL or keyword/value string), or Postgres cannot parse
	// it. A Postgres URL without a database name is not one: as psql and
	// libpq do, it names the database of the user's name. It is
	// pgcheckpoint.ErrBadURL (one value).
	ErrBadURL = dburl.ErrBadURL

	// ErrNotPostgres means the URL names a SQLite database (sqlite:PATH):
	// this package migrates Postgres. Its message names what migrates a
	// SQLite file. It wraps ErrBadURL.
	ErrNotPostgres = dburl.ErrNotPostgres

	// ErrConnect means the Postgres server could not be reached or refused
	// the connection; the error says why once (the server's own error,
	// such as SQLSTATE 3D000 for a database that does not exist, or class
	// 28 for a failed authentication) and wraps the driver's. It is
	// pgcheckpoint.ErrConnect.
	ErrConnect = dburl.ErrConnect
)

// Migration describes one embedded migration.
type Migration struct {
	Version uint   // the NNNNNN prefix
	Name    string // the part after the version, e.g. "init"
}

var fileRE = regexp.MustCompile(`^(\d+)_(.+)\.(up|down)\.sql$`)

// Migrations lists the embedded migrations in version order.
func Migrations() []Migration { return MigrationsIn(FS) }

// MigrationsIn lists the golang-migrate migrations at the root of fsys
// (NNNNNN_name.up.sql and NNNNNN_name.down.sql) in version order: FS's for
// Migrations, and the same way any store's, such as the SQLite store's
// (sqlite.Migrations, folder migrations), for cmd/migrate.
func MigrationsIn(fsys fs.FS) []Migration {
	entries, _ := fs.ReadDir(fsys, ".")
	seen := map[uint]Migration{}
	for _, e := range entries {
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, _ := strconv.ParseUint(m[1], 10, 64)
		seen[uint(v)] = Migration{Version: uint(v), Name: m[2]}
	}
	out := make([]Migration, 0, len(seen))
	for _, m := range seen {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// Latest returns the highest embedded migration version.
func Latest() uint {
	ms := Migrations()
	return ms[len(ms)-1].Version
}

// SQL returns the text of one migration, up or down, for teams that apply
// migrations with another tool. It returns ErrUnknownVersion when no such
// migration exists.
func SQL(version uint, up bool) (string, error) { return SQLIn(FS, version, up) }

// SQLIn is SQL for the migrations at the root of fsys (see MigrationsIn).
// It returns ErrUnknownVersion when fsys holds no such migration.
func SQLIn(fsys fs.FS, version uint, up bool) (string, error) {
	dir := "down"
	if up {
		dir = "up"
	}
	ms := MigrationsIn(fsys)
	for _, m := range ms {
		if m.Version == version {
			b, err := fs.ReadFile(fsys, fmt.Sprintf("%06d_%s.%s.sql", m.Version, m.Name, dir))
			if err != nil {
				return "", err
			}
			return string(b), nil
		}
	}
	if len(ms) == 0 {
		return "", fmt.Errorf("%w: %d (there are none)", ErrUnknownVersion, version)
	}
	return "", fmt.Errorf("%w: %d (latest is %d)", ErrUnknownVersion, version, ms[len(ms)-1].Version)
}

// Migrator applies the embedded migrations to one database.
//
// Every operation (Up, Down, DownAll, Goto, Force) is one transaction on
// one connection: it takes the transaction-level advisory lock
// MigrationLockKey, reads the version, runs the migrations between it and
// the target and records the new version, all or nothing. So any number of
// processes may migrate at once (they queue on the lock, and those that
// find the work done do nothing); a migration that fails leaves the
// database at the version it was, never dirty; and it works the same
// through a pooler in transaction mode (PgBouncer's pool_mode=transaction),
// which keeps a client on one server connection for a transaction but not
// for a session, so that a session-level lock would be taken on one
// backend and left there. Every statement uses the simple protocol, so no
// prepared statement meets a pooler, whatever the connection's
// default_query_exec_mode. While it waits for the lock, the operation holds
// one connection (one server connection of a pooler).
type Migrator struct {
	url  string        // or
	pool *pgxpool.Pool // the application's own pool
}

// NewMigrator returns a Migrator for the Postgres database at url: a
// postgres:// or postgresql:// URL or a keyword/value string (host=...
// dbname=...), read as pgcheckpoint.Open reads it. It does not connect
// yet: each operation connects, and fails with ErrBadURL, ErrNotPostgres
// (a sqlite: URL) or ErrConnect when it cannot.
func NewMigrator(url string) *Migrator {
	return &Migrator{url: url}
}

// NewMigratorFromPool returns a Migrator that runs over the application's
// own pool (its BeforeConnect, AfterConnect, IAM or TLS settings apply),
// on one of its connections at a time; a pool of one connection will do.
// It may reach Postgres through a pooler in transaction mode. An operation
// that cannot get a connection fails with ErrConnect.
func NewMigratorFromPool(pool *pgxpool.Pool) *Migrator {
	return &Migrator{pool: pool}
}

// Migrate brings the database at url (see NewMigrator) up to the latest
// version. It is the call for applications that migrate on start. Errors:
// those of Migrator.Up, and ErrBadURL, ErrNotPostgres, ErrConnect.
func Migrate(ctx context.Context, url string) error {
	return NewMigrator(url).Up(ctx)
}

// MigratePool is Migrate over the application's own pool (see
// NewMigratorFromPool).
func MigratePool(ctx context.Context, pool *pgxpool.Pool) error {
	return NewMigratorFromPool(pool).Up(ctx)
}

// ErrPending is returned by Check when migrations are not applied yet.
var ErrPending = errors.New("pgcheckpoint schema is not up to date")

// Check is Migrator.Check for the database at url: nil when it is at the
// latest version, ErrPending when migrations are to be applied. It changes
// nothing. For a readiness probe, or a deploy step that must not migrate.
// Errors: those of Migrator.Check, and ErrBadURL, ErrNotPostgres,
// ErrConnect.
func Check(ctx context.Context, url string) error {
	return NewMigrator(url).Check(ctx)
}

// CheckPool is Check over the application's own pool; it uses one of its
// connections.
func CheckPool(ctx context.Context, pool *pgxpool.Pool) error {
	return NewMigratorFromPool(pool).Check(ctx)
}

// Check reports whether the database is at the latest version, changing
// nothing: nil when it is; ErrPending (naming the versions) when
// migrations are to be applied; ErrDirty; ErrUnknownVersion for a
// database at a version newer than this program knows.
func (m *Migrator) Check(ctx context.Context) error {
	v, dirty, err := m.Version(ctx)
	switch {
	case err != nil:
		return err
	case dirty:
		return dirtyError(v)
	case v < Latest():
		return fmt.Errorf("%w: version %d of %d; run `migrate up` (schema.Migrate)", ErrPending, v, Latest())
	case v > Latest():
		return newerError(v)
	}
	return nil
}

// Up applies every migration not yet applied. A database already at the
// latest version is not an error; one left dirty is ErrDirty, one newer
// than this program ErrUnknownVersion.
func (m *Migrator) Up(ctx context.Context) error {
	return m.run(ctx, false, func(uint) (uint, error) { return Latest(), nil })
}

// Down reverts n migrations (n >= 1) from the version it finds once it
// holds the lock; with fewer than n applied it reverts nothing and says so.
func (m *Migrator) Down(ctx context.Context, n int) error {
	if n < 1 {
		return fmt.Errorf("down: n must be at least 1, got %d (use DownAll to revert everything)", n)
	}
	return m.run(ctx, false, func(current uint) (uint, error) {
		applied := versionsUpTo(current)
		if len(applied) < n {
			return 0, fmt.Errorf("down %d: only %d migration(s) applied (version %d); nothing reverted", n, len(applied), current)
		}
		if len(applied) == n {
			return 0, nil
		}
		return applied[len(applied)-n-1], nil
	})
}

// DownAll reverts every migration. The pgcheckpoint schema stays, holding
// only the version table.
func (m *Migrator) DownAll(ctx context.Context) error {
	return m.run(ctx, false, func(uint) (uint, error) { return 0, nil })
}

// Goto migrates up or down to the given version; 0, the version of a
// schema with no migration applied (see Version), reverts them all, as
// DownAll. It returns ErrUnknownVersion when no migration has that version.
func (m *Migrator) Goto(ctx context.Context, version uint) error {
	if version != 0 {
		if _, err := SQL(version, true); err != nil {
			return err
		}
	}
	return m.run(ctx, false, func(uint) (uint, error) { return version, nil })
}

// Force records version as applied and clears the dirty flag, running no
// SQL. Use it after repairing a failed migration by hand; -1 means "no
// version". It returns ErrUnknownVersion when no migration has that
// version.
func (m *Migrator) Force(ctx context.Context, version int) error {
	if version < -1 {
		return fmt.Errorf("%w: %d", ErrUnknownVersion, version)
	}
	if version != -1 {
		if _, err := SQL(uint(version), true); err != nil {
			return err
		}
	}
	return m.run(ctx, true, func(uint) (uint, error) { return uint(max(version, 0)), nil })
}

// Version reports the applied version (0 when none) and whether the last
// migration failed part way (dirty: left so by golang-migrate or an older
// pgcheckpoint, whose migrations were not one transaction). It only reads:
// on an empty database it creates nothing.
func (m *Migrator) Version(ctx context.Context) (version uint, dirty bool, err error) {
	c, release, err := m.conn(ctx)
	if err != nil {
		return 0, false, err
	}
	defer release()
	var table *string
	if err := c.QueryRow(ctx, sqlFindVersionTable, simple, Name+"."+VersionTable).Scan(&table); err != nil {
		return 0, false, fmt.Errorf("pgcheckpoint migrate: read the version: %w", err)
	}
	if table == nil {
		return 0, false, nil
	}
	return readVersion(ctx, c)
}

// simple makes a statement use the simple protocol: nothing is prepared,
// so nothing depends on the server connection a pooler picks.
const simple = pgx.QueryExecModeSimpleProtocol

// The Migrator's own statements, besides the migrations: the only SQL the
// library and its commands run on Postgres that is not in queries/ (the
// test harness, integration/pgtest, creates and drops databases with its
// own). sqlc cannot serve them: the version table is golang-migrate's,
// made here (or by golang-migrate) and by no migration, so it is in
// neither migrations/ nor schema/current.sql, the schema sqlc reads; two
// are DDL; all run before the schema may exist, with the simple protocol
// (sqlc's methods take no exec mode); and package db, which sqlc writes,
// is public API, which these are not.
const (
	sqlFindVersionTable          = "SELECT to_regclass($1)::text"
	sqlFindSchemaAndVersionTable = "SELECT to_regnamespace($1) IS NOT NULL, to_regclass($2) IS NOT NULL"
	sqlCreateSchema              = "CREATE SCHEMA " + Name
	sqlCreateVersionTable        = "CREATE TABLE " + Name + "." + VersionTable + " (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)"
	sqlMigrationLock             = "SELECT pg_advisory_xact_lock($1)"
	sqlLockTimeout               = "SELECT current_setting('lock_timeout')"
	sqlSetLockTimeout            = "SELECT set_config('lock_timeout', $1, true)"
	sqlReadVersion               = "SELECT version, dirty FROM " + Name + "." + VersionTable + " LIMIT 1"
	sqlClearVersion              = "DELETE FROM " + Name + "." + VersionTable
	sqlRecordVersion             = "INSERT INTO " + Name + "." + VersionTable + " (version, dirty) VALUES ($1, false)"
)

// readVersion reads the version table, which must exist. golang-migrate
// records "no version" as no row, or as -1 when a down of the first
// migration failed part way.
func readVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (uint, bool, error) {
	var v int64
	var dirty bool
	err := q.QueryRow(ctx, sqlReadVersion, simple).Scan(&v, &dirty)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("pgcheckpoint migrate: read the version: %w", err)
	}
	return uint(max(v, 0)), dirty, nil
}

// conn returns a connection: a new one from the URL, or one of the pool's.
func (m *Migrator) conn(ctx context.Context) (*pgx.Conn, func(), error) {
	if m.pool != nil {
		c, err := m.pool.Acquire(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("pgcheckpoint migrate: %w", dburl.ConnectError(m.pool.Config().ConnConfig, err))
		}
		return c.Conn(), func() {
			pc := c.Conn().PgConn()
			c.Release()
			if pc.IsClosed() {
				awaitCleanup(pc)
			}
		}, nil
	}
	cfg, err := dburl.PostgresConfig(m.url)
	if errors.Is(err, ErrNotPostgres) {
		return nil, nil, fmt.Errorf("%w; package schema migrates Postgres: migrate a SQLite file with pgcheckpoint.Open(ctx, url, pgcheckpoint.Options{Migrate: true}), sqlite.Open(ctx, path, sqlite.Options{Migrate: true}) or `migrate -database sqlite:PATH up`", err)
	}
	if err != nil {
		return nil, nil, err
	}
	c, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("pgcheckpoint migrate: %w", dburl.ConnectError(cfg.ConnConfig, err))
	}
	return c, func() {
		c.Close(context.WithoutCancel(ctx))
		awaitCleanup(c.PgConn())
	}, nil
}

// awaitCleanup waits, for up to 3 s, until a closed connection is cleaned
// up. One closed under a cancelled query is cleaned up in the background,
// pgx sending a cancel request first: the wait lets that end before the
// caller (the CLI) exits, as PgBouncer 1.18 crashes when a cancel
// request's connection closes before it has passed the request on ("bad
// client state: 0", fixed in 1.19).
func awaitCleanup(c *pgconn.PgConn) {
	select {
	case <-c.CleanupDone():
	case <-time.After(3 * time.Second):
	}
}

// run is every operation that changes the database: in one transaction,
// under the migration lock, it finds the version, asks target for the
// version to reach from there, runs the migrations in between (or, with
// force, none) and records the version reached.
func (m *Migrator) run(ctx context.Context, force bool, target func(current uint) (uint, error)) (err error) {
	defer func() {
		// Over a pool whose pgx sends cancel requests, a cancelled query
		// fails with the server's error (57014); callers look for the
		// context's.
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
	}()
	c, release, err := m.conn(ctx)
	if err != nil {
		return err
	}
	defer release()
	tx, err := c.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgcheckpoint migrate: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := migrationLock(ctx, tx); err != nil {
		return err
	}
	if err := createVersionTable(ctx, tx); err != nil {
		return err
	}
	current, dirty, err := readVersion(ctx, tx)
	if err != nil {
		return err
	}
	if dirty && !force {
		return dirtyError(current)
	}
	to, err := target(current)
	if err != nil {
		return err
	}
	if !force {
		steps, err := path(current, to)
		if err != nil {
			return err
		}
		for _, s := range steps {
			text, err := SQL(s.version, s.up)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, text); err != nil {
				return fmt.Errorf("pgcheckpoint migrate: migration %06d %s failed; nothing was applied, the database is still at version %d: %w",
					s.version, direction(s.up), current, err)
			}
		}
	}
	if to != current || dirty {
		if err := recordVersion(ctx, tx, to); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgcheckpoint migrate: commit: %w", err)
	}
	return nil
}

// migrationLock waits for the migration lock, held by another migrator
// for as long as its migrations take, whatever the session's lock_timeout
// (a DBA's bound for the application's locks would fail every migrator
// but the first at once): only ctx bounds the wait. The migrations' own
// locks are held to lock_timeout again.
func migrationLock(ctx context.Context, tx pgx.Tx) error {
	var saved string
	err := tx.QueryRow(ctx, sqlLockTimeout, simple).Scan(&saved)
	if err == nil {
		_, err = tx.Exec(ctx, sqlSetLockTimeout, simple, "0")
	}
	if err == nil {
		_, err = tx.Exec(ctx, sqlMigrationLock, simple, MigrationLockKey)
	}
	if err == nil {
		_, err = tx.Exec(ctx, sqlSetLockTimeout, simple, saved)
	}
	if err != nil {
		return fmt.Errorf("pgcheckpoint migrate: wait for the migration lock: %w", err)
	}
	return nil
}

// recordVersion makes to the version in the version table, clean; 0 is no
// row, as golang-migrate has it.
func recordVersion(ctx context.Context, tx pgx.Tx, to uint) error {
	if _, err := tx.Exec(ctx, sqlClearVersion, simple); err != nil {
		return fmt.Errorf("pgcheckpoint migrate: record the version: %w", err)
	}
	if to > 0 {
		if _, err := tx.Exec(ctx, sqlRecordVersion, simple, int64(to)); err != nil {
			return fmt.Errorf("pgcheckpoint migrate: record the version: %w", err)
		}
	}
	return nil
}

// createVersionTable creates the schema and the version table (as
// golang-migrate does, so either can migrate the database) unless they
// exist: even CREATE SCHEMA IF NOT EXISTS needs CREATE on the database,
// and an application role (schema/roles/roles.sql), which lacks it, may
// run Up on start against a database its owner has migrated.
func createVersionTable(ctx context.Context, tx pgx.Tx) error {
	var haveSchema, haveTable bool
	if err := tx.QueryRow(ctx, sqlFindSchemaAndVersionTable, simple,
		Name, Name+"."+VersionTable).Scan(&haveSchema, &haveTable); err != nil {
		return fmt.Errorf("pgcheckpoint migrate: look for the version table: %w", err)
	}
	if !haveSchema {
		if _, err := tx.Exec(ctx, sqlCreateSchema, simple); err != nil {
			return fmt.Errorf("pgcheckpoint migrate: create schema %s: %w", Name, err)
		}
	}
	if !haveTable {
		if _, err := tx.Exec(ctx, sqlCreateVersionTable, simple); err != nil {
			return fmt.Errorf("pgcheckpoint migrate: create the version table: %w", err)
		}
	}
	return nil
}

// step is one migration file to run.
type step struct {
	version uint
	up      bool
}

// path lists the migrations that take the database from version from to
// version to: the ups above from in ascending order, or the downs from
// from in descending order.
func path(from, to uint) ([]step, error) {
	if from > Latest() {
		return nil, newerError(from)
	}
	var steps []step
	for _, v := range versionsUpTo(Latest()) {
		if v > from && v <= to {
			steps = append(steps, step{v, true})
		}
	}
	applied := versionsUpTo(from)
	for i := len(applied) - 1; i >= 0 && applied[i] > to; i-- {
		steps = append(steps, step{applied[i], false})
	}
	return steps, nil
}

// versionsUpTo lists the embedded versions up to v, in order.
func versionsUpTo(v uint) []uint {
	var out []uint
	for _, m := range Migrations() {
		if m.Version <= v {
			out = append(out, m.Version)
		}
	}
	return out
}

func direction(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

// dirtyError is ErrDirty with what to do about it.
func dirtyError(v uint) error {
	return fmt.Errorf("%w at version %d: migration %d failed part way; repair the schema by hand until it is wholly at version %d or wholly at the version before, then run `migrate force VERSION` with that version",
		ErrDirty, v, v, v)
}

// newerError is ErrUnknownVersion for a database migrated by a newer program.
func newerError(v uint) error {
	return fmt.Errorf("%w: the database is at version %d, newer than this program's %d: upgrade the program", ErrUnknownVersion, v, Latest())
}
