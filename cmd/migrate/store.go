package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// migrator is what the commands do to one store's schema.
type migrator interface {
	Up(ctx context.Context) error
	Down(ctx context.Context, n int) error
	DownAll(ctx context.Context) error
	Goto(ctx context.Context, version uint) error
	Force(ctx context.Context, version int) error
	Version(ctx context.Context) (version uint, dirty bool, err error)
	Check(ctx context.Context) error
	Latest() uint
	// repair says what to do about a schema left dirty at version v.
	repair(v uint) string
}

// postgresMigrator is schema.Migrator, the Postgres schema's migrations.
type postgresMigrator struct{ *schema.Migrator }

func (postgresMigrator) Latest() uint { return schema.Latest() }

// sqliteMigrator migrates a SQLite file (package sqlite). Its schema is
// one migration, so down and goto come down to all or nothing.
type sqliteMigrator struct {
	path   string
	create bool // up creates the file; the other commands never do
	db     *sql.DB
}

func (m *sqliteMigrator) open(ctx context.Context) (*sql.DB, error) {
	if m.db == nil {
		db, err := sqlite.OpenDB(ctx, m.path, sqlite.Options{Migrate: m.create})
		if err != nil {
			return nil, err
		}
		m.db = db
	}
	return m.db, nil
}

func (m *sqliteMigrator) close() {
	if m.db != nil {
		m.db.Close()
	}
}

func (m *sqliteMigrator) Latest() uint { return sqlite.LatestVersion() }

func (m *sqliteMigrator) Up(ctx context.Context) error {
	db, err := m.open(ctx)
	if err != nil {
		return err
	}
	return sqlite.Migrate(ctx, db)
}

func (m *sqliteMigrator) DownAll(ctx context.Context) error {
	db, err := m.open(ctx)
	if err != nil {
		return err
	}
	return sqlite.MigrateDown(ctx, db)
}

func (m *sqliteMigrator) Down(ctx context.Context, n int) error {
	if n != 1 {
		return fmt.Errorf("down %d: the SQLite schema is one migration (version %d): use down 1 or down -all", n, m.Latest())
	}
	return m.DownAll(ctx)
}

func (m *sqliteMigrator) Goto(ctx context.Context, version uint) error {
	switch version {
	case 0:
		return m.DownAll(ctx)
	case m.Latest():
		return m.Up(ctx)
	}
	return fmt.Errorf("goto %d: the SQLite schema has versions 0 and %d", version, m.Latest())
}

func (m *sqliteMigrator) Force(ctx context.Context, version int) error {
	db, err := m.open(ctx)
	if err != nil {
		return err
	}
	return sqlite.Force(ctx, db, version)
}

// repair says what to do about a migration left dirty at version v.
func (m *sqliteMigrator) repair(uint) string {
	return "it ran in one transaction and left nothing: run `migrate force -1`, then `migrate up`"
}

func (postgresMigrator) repair(v uint) string {
	if v == 0 {
		return "a down migration failed part way; repair the schema by hand, then run `migrate force VERSION`"
	}
	return fmt.Sprintf("migration %d failed part way; repair it by hand, then run `migrate force VERSION`", v)
}

func (m *sqliteMigrator) Version(ctx context.Context) (uint, bool, error) {
	db, err := m.open(ctx)
	if err != nil {
		return 0, false, err
	}
	return sqlite.Version(ctx, db)
}

func (m *sqliteMigrator) Check(ctx context.Context) error {
	db, err := m.open(ctx)
	if err != nil {
		return err
	}
	return sqlite.CheckVersion(ctx, db)
}
