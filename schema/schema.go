package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// FS holds the migrations, NNNNNN_name.up.sql and NNNNNN_name.down.sql.
// They are plain SQL, usable by any migration tool.
//
//go:embed *.sql
var FS embed.FS

// Name of the Postgres schema that holds every pgcheckpoint object,
// including the migration version table.
const Name = "pgcheckpoint"

// VersionTable is the table, in schema Name, where the applied version is kept.
const VersionTable = "schema_migrations"

// migrateLockKey is the advisory lock that serialises pgcheckpoint
// migrations across processes ("pgckpmig" in ASCII).
const migrateLockKey int64 = 0x70_67_63_6b_70_6d_69_67

var (
	// ErrDirty means an earlier migration failed part way and the database
	// was left marked dirty at that version. Nothing runs until an operator
	// has repaired the schema by hand and called Force with the version the
	// schema really is at.
	ErrDirty = errors.New("pgcheckpoint schema is dirty")

	// ErrUnknownVersion means no migration has the requested version.
	ErrUnknownVersion = errors.New("no such migration version")
)

// Migration describes one embedded migration.
type Migration struct {
	Version uint   // the NNNNNN prefix
	Name    string // the part after the version, e.g. "init"
}

var fileRE = regexp.MustCompile(`^(\d+)_(.+)\.(up|down)\.sql$`)

// Migrations lists the embedded migrations in version order.
func Migrations() []Migration {
	entries, _ := fs.ReadDir(FS, ".")
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
func SQL(version uint, up bool) (string, error) {
	dir := "down"
	if up {
		dir = "up"
	}
	for _, m := range Migrations() {
		if m.Version == version {
			b, err := fs.ReadFile(FS, fmt.Sprintf("%06d_%s.%s.sql", m.Version, m.Name, dir))
			if err != nil {
				return "", err
			}
			return string(b), nil
		}
	}
	return "", fmt.Errorf("%w: %d (latest is %d)", ErrUnknownVersion, version, Latest())
}

// Migrator applies the embedded migrations to one database. Every operation
// first takes a session-level advisory lock, so any number of processes may
// run migrations at once: they queue, and the ones that find the work done
// do nothing.
type Migrator struct {
	url  string        // or
	pool *pgxpool.Pool // the application's own pool
}

// NewMigrator returns a Migrator for the database at url (a postgres://
// URL or a key=value connection string). It does not connect yet.
func NewMigrator(url string) *Migrator {
	return &Migrator{url: url}
}

// NewMigratorFromPool returns a Migrator that runs over the application's
// own pool (its BeforeConnect, AfterConnect, IAM or TLS settings apply):
// the lock on one of the pool's connections, golang-migrate over a
// *sql.DB made from the pool (stdlib.OpenDBFromPool). The pool must reach
// Postgres directly, not through a pooler in transaction mode, which
// cannot keep a session-level lock. Up, Down, Goto and Force hold two of
// the pool's connections at once (the lock's and golang-migrate's): they
// return ErrPoolTooSmall at once for a pool of MaxConns 1, which would
// otherwise wait for itself.
func NewMigratorFromPool(pool *pgxpool.Pool) *Migrator {
	return &Migrator{pool: pool}
}

// Migrate brings the database at url up to the latest version. It is the
// call for applications that migrate on start.
func Migrate(ctx context.Context, url string) error {
	return NewMigrator(url).Up(ctx)
}

// MigratePool is Migrate over the application's own pool (see
// NewMigratorFromPool).
func MigratePool(ctx context.Context, pool *pgxpool.Pool) error {
	return NewMigratorFromPool(pool).Up(ctx)
}

// ErrPoolTooSmall is returned by a Migrator from NewMigratorFromPool whose
// pool has MaxConns below 2: a migration needs two connections at once.
var ErrPoolTooSmall = errors.New("pgcheckpoint migrate: the pool allows one connection; a migration holds two (the lock and golang-migrate's): give it MaxConns of 2 or more, or migrate from a URL (schema.Migrate)")

// ErrPending is returned by Check when migrations are not applied yet.
var ErrPending = errors.New("pgcheckpoint schema is not up to date")

// Check is Migrator.Check for the database at url: nil when it is at the
// latest version, ErrPending when migrations are to be applied. It changes
// nothing. For a readiness probe, or a deploy step that must not migrate.
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
// migrations are to be applied; ErrDirty; an error for a database at a
// version newer than this program knows.
func (m *Migrator) Check(ctx context.Context) error {
	v, dirty, err := m.Version(ctx)
	switch {
	case err != nil:
		return err
	case dirty:
		return fmt.Errorf("%w at version %d: repair it, then run `migrate force VERSION`", ErrDirty, v)
	case v < Latest():
		return fmt.Errorf("%w: version %d of %d; run `migrate up` (schema.Migrate)", ErrPending, v, Latest())
	case v > Latest():
		return fmt.Errorf("%w: version %d, newer than this program's %d: upgrade the program", ErrUnknownVersion, v, Latest())
	}
	return nil
}

// Up applies every migration not yet applied. A database already at the
// latest version is not an error.
func (m *Migrator) Up(ctx context.Context) error {
	return m.run(ctx, func(mg *migrate.Migrate) error { return mg.Up() })
}

// Down reverts n migrations (n >= 1).
func (m *Migrator) Down(ctx context.Context, n int) error {
	if n < 1 {
		return fmt.Errorf("down: n must be at least 1, got %d (use DownAll to revert everything)", n)
	}
	return m.run(ctx, func(mg *migrate.Migrate) error { return mg.Steps(-n) })
}

// DownAll reverts every migration. The pgcheckpoint schema stays, holding
// only the version table.
func (m *Migrator) DownAll(ctx context.Context) error {
	return m.run(ctx, func(mg *migrate.Migrate) error { return mg.Down() })
}

// Goto migrates up or down to the given version.
func (m *Migrator) Goto(ctx context.Context, version uint) error {
	if _, err := SQL(version, true); err != nil {
		return err
	}
	return m.run(ctx, func(mg *migrate.Migrate) error { return mg.Migrate(version) })
}

// Force records version as applied and clears the dirty flag, running no
// SQL. Use it after repairing a failed migration by hand; -1 means "no
// version".
func (m *Migrator) Force(ctx context.Context, version int) error {
	if version != -1 {
		if _, err := SQL(uint(version), true); err != nil {
			return err
		}
	}
	return m.run(ctx, func(mg *migrate.Migrate) error { return mg.Force(version) })
}

// Version reports the applied version (0 when none) and whether the last
// migration failed part way (dirty). It only reads: on an empty database it
// creates nothing.
func (m *Migrator) Version(ctx context.Context) (version uint, dirty bool, err error) {
	q, release, err := m.conn(ctx)
	if err != nil {
		return 0, false, err
	}
	defer release()
	var table *string
	if err := q.QueryRow(ctx, "SELECT to_regclass($1)::text", Name+"."+VersionTable).Scan(&table); err != nil {
		return 0, false, fmt.Errorf("pgcheckpoint migrate: read the version: %w", err)
	}
	if table == nil {
		return 0, false, nil
	}
	var v int64
	err = q.QueryRow(ctx, "SELECT version, dirty FROM "+Name+"."+VersionTable+" LIMIT 1").Scan(&v, &dirty)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && v < 0 {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("pgcheckpoint migrate: read the version: %w", err)
	}
	return uint(v), dirty, nil
}

// conn returns a connection for the session-level work (the lock, the
// version): a new one from the URL, or one of the pool's.
func (m *Migrator) conn(ctx context.Context) (*pgx.Conn, func(), error) {
	if m.pool != nil {
		c, err := m.pool.Acquire(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("pgcheckpoint migrate: connect: %w", err)
		}
		return c.Conn(), c.Release, nil
	}
	cfg, err := pgx.ParseConfig(m.url)
	if err != nil {
		return nil, nil, fmt.Errorf("pgcheckpoint migrate: bad database URL: %w", err)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("pgcheckpoint migrate: connect: %w", err)
	}
	return c, func() { c.Close(context.WithoutCancel(ctx)) }, nil
}

// sqlDB returns the *sql.DB golang-migrate runs on.
func (m *Migrator) sqlDB() (*sql.DB, error) {
	if m.pool != nil {
		return stdlib.OpenDBFromPool(m.pool), nil // its Close leaves the pool open
	}
	cfg, err := pgx.ParseConfig(m.url)
	if err != nil {
		return nil, fmt.Errorf("pgcheckpoint migrate: bad database URL: %w", err)
	}
	return stdlib.OpenDB(*cfg), nil
}

// run holds the advisory lock on its own connection while op runs on a
// golang-migrate instance, then translates golang-migrate's errors.
func (m *Migrator) run(ctx context.Context, op func(*migrate.Migrate) error) error {
	if m.pool != nil && m.pool.Config().MaxConns < 2 {
		return ErrPoolTooSmall
	}
	lockConn, release, err := m.conn(ctx)
	if err != nil {
		return err
	}
	defer release()
	if _, err := lockConn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLockKey); err != nil {
		return fmt.Errorf("pgcheckpoint migrate: wait for the migration lock: %w", err)
	}
	defer lockConn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLockKey)
	// The version table lives in our schema, so the schema must exist before
	// golang-migrate looks for the table. Only created when missing: even
	// CREATE SCHEMA IF NOT EXISTS needs CREATE on the database, and an
	// application role (schema/roles/roles.sql), which lacks it, may run Up
	// on start against a database its owner has migrated.
	var exists bool
	if err := lockConn.QueryRow(ctx, "SELECT to_regnamespace($1) IS NOT NULL", Name).Scan(&exists); err != nil {
		return fmt.Errorf("pgcheckpoint migrate: look for schema %s: %w", Name, err)
	}
	if !exists {
		if _, err := lockConn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+Name); err != nil {
			return fmt.Errorf("pgcheckpoint migrate: create schema %s: %w", Name, err)
		}
	}

	sqlDB, err := m.sqlDB()
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	mg, err := newMigrate(ctx, sqlDB)
	if err != nil {
		return err
	}
	defer mg.Close()

	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			mg.GracefulStop <- true
		case <-done:
		}
	}()

	err = op(mg)
	if errors.Is(err, migrate.ErrNoChange) {
		return nil
	}
	var dirty migrate.ErrDirty
	if errors.As(err, &dirty) {
		return fmt.Errorf("%w at version %d: migration %d failed part way; repair the schema by hand until it is wholly at version %d or wholly at the version before, then run `migrate force VERSION` with that version",
			ErrDirty, dirty.Version, dirty.Version, dirty.Version)
	}
	if err != nil {
		return fmt.Errorf("pgcheckpoint migrate: %w", err)
	}
	return ctx.Err()
}

func newMigrate(ctx context.Context, sqlDB *sql.DB) (*migrate.Migrate, error) {
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("pgcheckpoint migrate: connect: %w", err)
	}
	src, err := iofs.New(FS, ".")
	if err != nil {
		return nil, fmt.Errorf("pgcheckpoint migrate: read embedded migrations: %w", err)
	}
	drv, err := migratepgx.WithInstance(sqlDB, &migratepgx.Config{
		SchemaName:      Name,
		MigrationsTable: VersionTable,
	})
	if err != nil {
		return nil, fmt.Errorf("pgcheckpoint migrate: %w", err)
	}
	mg, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		return nil, fmt.Errorf("pgcheckpoint migrate: %w", err)
	}
	return mg, nil
}
