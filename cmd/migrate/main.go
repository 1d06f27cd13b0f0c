// Command migrate applies pgcheckpoint's schema migrations, for deploy
// pipelines. Any number of copies may run at once, directly or through
// PgBouncer in transaction mode: each command is one transaction, they
// queue on a transaction-level advisory lock, and those that find the work
// done do nothing. SIGINT or SIGTERM cancels the command (its query on the
// server too) and changes nothing; a second one ends the process at once.
//
//	migrate -database postgres://... up
//	migrate version
//	migrate list
//	migrate sql V up > pgcheckpoint_V.up.sql
//
// The database comes from -database or DATABASE_URL. Run with no arguments
// for the list of commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/pgcheckpoint/pgcheckpoint/internal/cliflags"
	"github.com/pgcheckpoint/pgcheckpoint/internal/dburl"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
	"github.com/pgcheckpoint/pgcheckpoint/internal/version"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

const usage = `usage: migrate [-database URL] COMMAND [ARGS]
       migrate --version

The URL is postgres://..., postgresql://... or a keyword/value string
("host=/tmp dbname=app user=me") for Postgres, or sqlite:FILE for a SQLite
file (which up creates; SQLite's schema is one migration: up, down 1 or
down -all, force -1 and version apply to it), as pgcheckpoint.Open and
ckpt take them.

Commands:
  up             apply every migration not yet applied
  down N         revert the last N migrations
  down -all      revert every migration
  goto V         migrate up or down to version V (0: revert every migration)
  version        print the applied version (creates nothing)
  check          exit 0 if the database is at the latest version, 1 if
                 migrations are pending (or it is dirty); changes nothing
  force V        record version V as applied and clear the dirty flag, running
                 no SQL (after repairing a failed migration by hand; -1: none)
  list           list the embedded migrations of the store the URL names
                 (Postgres's when no URL is given)
  sql V [up|down]
                 print the SQL of that store's migration V (default up),
                 for other tools

  help           this text

-version (or --version) prints this program's version, its VCS revision and
the schema versions it migrates to, and exits.

The database URL comes from -database (or --database, before or after the
command) or the DATABASE_URL environment variable. Exit status: 0 success,
1 failure, 2 bad usage.
`

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop) // a second signal gets the default action
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	var ue usageError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "migrate: %s\n\n%s", termsafe.Text(err.Error()), usage)
		os.Exit(2)
	default:
		// A URL's text or a server's error may hold control characters.
		fmt.Fprintf(os.Stderr, "migrate: %s\n", termsafe.Text(err.Error()))
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dbURL := fs.String("database", "", "postgres://..., host=... dbname=... or sqlite:FILE (default $DATABASE_URL)")
	all := fs.Bool("all", false, "with down: revert every migration")
	showVersion := fs.Bool("version", false, "print the version and exit")
	args, err := cliflags.Parse(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return nil
		}
		return usageError{err.Error()}
	}
	if *showVersion {
		fmt.Fprint(stdout, version.String("migrate"))
		return nil
	}
	if len(args) == 0 {
		return usageError{"no command given"}
	}
	cmd, rest := args[0], args[1:]
	if *all && cmd != "down" {
		return usageError{"-all goes with down"}
	}
	if cmd == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}

	url := *dbURL
	if url == "" {
		url = os.Getenv("DATABASE_URL")
	}

	// Commands that read no database: the migrations of the store the URL
	// names, Postgres's when there is none.
	switch cmd {
	case "list", "sql":
		fsys, err := migrationsFor(url)
		if err != nil {
			return err
		}
		if cmd == "list" {
			if len(rest) != 0 {
				return usageError{"list takes no arguments"}
			}
			for _, m := range schema.MigrationsIn(fsys) {
				fmt.Fprintf(stdout, "%06d %s\n", m.Version, m.Name)
			}
			return nil
		}
		if len(rest) < 1 || len(rest) > 2 {
			return usageError{"sql takes a version and optionally up or down"}
		}
		v, err := strconv.ParseUint(rest[0], 10, 32)
		if err != nil {
			return usageError{fmt.Sprintf("sql: version %q is not a number", rest[0])}
		}
		up := true
		if len(rest) == 2 {
			switch rest[1] {
			case "up":
			case "down":
				up = false
			default:
				return usageError{fmt.Sprintf("sql: direction %q is neither up nor down", rest[1])}
			}
		}
		text, err := schema.SQLIn(fsys, uint(v), up)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, text)
		return nil
	}

	if url == "" {
		return usageError{"no database: pass -database URL or set DATABASE_URL"}
	}
	kind, target, err := dburl.Parse(url)
	if err != nil {
		return usageError{err.Error()}
	}
	if kind == dburl.KindPostgres {
		if _, err := dburl.PostgresConfig(url); err != nil {
			return usageError{err.Error()}
		}
	}
	var m migrator = postgresMigrator{schema.NewMigrator(url)}
	if kind == dburl.KindSQLite {
		sm := &sqliteMigrator{path: target, create: cmd == "up"}
		defer sm.close()
		m = sm
	}

	switch cmd {
	case "up":
		if len(rest) != 0 {
			return usageError{"up takes no arguments"}
		}
		if err := m.Up(ctx); err != nil {
			return err
		}
	case "down":
		if *all && len(rest) == 0 {
			if err := m.DownAll(ctx); err != nil {
				return err
			}
			break
		}
		if *all || len(rest) != 1 {
			return usageError{"down takes N (how many to revert) or -all"}
		}
		n, err := strconv.Atoi(rest[0])
		if err != nil || n < 1 {
			return usageError{fmt.Sprintf("down: %q is not a positive number (use -all to revert everything)", rest[0])}
		}
		if err := m.Down(ctx, n); err != nil {
			return err
		}
	case "goto":
		if len(rest) != 1 {
			return usageError{"goto takes a version"}
		}
		v, err := strconv.ParseUint(rest[0], 10, 32)
		if err != nil {
			return usageError{fmt.Sprintf("goto: version %q is not a number", rest[0])}
		}
		if err := m.Goto(ctx, uint(v)); err != nil {
			return err
		}
	case "force":
		if len(rest) != 1 {
			return usageError{"force takes a version (-1 for none)"}
		}
		v, err := strconv.Atoi(rest[0])
		if err != nil || v < -1 {
			return usageError{fmt.Sprintf("force: version %q is not a number >= -1", rest[0])}
		}
		if err := m.Force(ctx, v); err != nil {
			return err
		}
	case "version":
		if len(rest) != 0 {
			return usageError{"version takes no arguments"}
		}
	case "check":
		if len(rest) != 0 {
			return usageError{"check takes no arguments"}
		}
		if err := m.Check(ctx); err != nil {
			return err
		}
	default:
		return usageError{fmt.Sprintf("unknown command %q", cmd)}
	}
	return printVersion(ctx, m, stdout)
}

// migrationsFor returns the migrations of the store url names: the
// Postgres schema's (package schema) for a Postgres URL or none, the
// SQLite store's for a sqlite: URL.
func migrationsFor(url string) (fs.FS, error) {
	if url == "" {
		return schema.FS, nil
	}
	kind, _, err := dburl.Parse(url)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	if kind == dburl.KindSQLite {
		return fs.Sub(sqlite.Migrations, "migrations")
	}
	return schema.FS, nil
}

func printVersion(ctx context.Context, m migrator, w io.Writer) error {
	v, dirty, err := m.Version(ctx)
	if err != nil {
		return err
	}
	state := ""
	if dirty {
		state = " (dirty: " + m.repair(v) + ")"
	}
	fmt.Fprintf(w, "version %d of %d%s\n", v, m.Latest(), state)
	return nil
}
