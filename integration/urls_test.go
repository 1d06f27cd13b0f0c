package integration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// urlSecret is a password given in URLs that no output may show.
const urlSecret = "s3cret-pw"

// pgForms is one Postgres database's URL in each form every entry point
// takes: postgres://, postgresql:// and keyword/value. With prefer false
// they keep the test server's TLS choice (sslmode=disable, if it had it);
// with true they leave sslmode to its default, prefer, which tries TLS
// first. database and user, when not empty, replace the server URL's.
func pgForms(t *testing.T, serverURL, database, user, password string, prefer bool) (postgres, postgresql, keywordValue string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	if database == "" {
		database = cfg.Database
	}
	if user == "" {
		user, password = cfg.User, cfg.Password
	}
	q := url.Values{}
	kv := []string{"port=" + fmt.Sprint(cfg.Port), "dbname=" + kvQuote(database), "user=" + kvQuote(user)}
	u := url.URL{Path: "/" + database, User: url.User(user)}
	if strings.HasPrefix(cfg.Host, "/") {
		q.Set("host", cfg.Host) // a Unix socket's directory
		q.Set("port", fmt.Sprint(cfg.Port))
	} else {
		u.Host = fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	}
	kv = append([]string{"host=" + kvQuote(cfg.Host)}, kv...)
	if password != "" {
		u.User = url.UserPassword(user, password)
		kv = append(kv, "password="+kvQuote(password))
	}
	if cfg.TLSConfig == nil && !prefer {
		q.Set("sslmode", "disable")
		kv = append(kv, "sslmode=disable")
	}
	u.RawQuery = q.Encode()
	u.Scheme = "postgres"
	postgres = u.String()
	u.Scheme = "postgresql"
	return postgres, u.String(), strings.Join(kv, " ")
}

// kvQuote quotes a value of a keyword/value connection string.
func kvQuote(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// schemaCall is one of package schema's entry points that take a URL.
type schemaCall struct {
	name    string
	changes bool // it changes the database (not run on the shared one)
	call    func(ctx context.Context, url string) error
}

var schemaCalls = []schemaCall{
	{"Migrate", false, schema.Migrate},
	{"Check", false, schema.Check},
	{"Migrator.Up", false, func(ctx context.Context, u string) error { return schema.NewMigrator(u).Up(ctx) }},
	{"Migrator.Version", false, func(ctx context.Context, u string) error {
		_, _, err := schema.NewMigrator(u).Version(ctx)
		return err
	}},
	{"Migrator.Check", false, func(ctx context.Context, u string) error { return schema.NewMigrator(u).Check(ctx) }},
	{"Migrator.Goto(latest)", false, func(ctx context.Context, u string) error { return schema.NewMigrator(u).Goto(ctx, schema.Latest()) }},
	{"Migrator.Force(latest)", false, func(ctx context.Context, u string) error {
		return schema.NewMigrator(u).Force(ctx, int(schema.Latest()))
	}},
	{"Migrator.Down", true, func(ctx context.Context, u string) error { return schema.NewMigrator(u).Down(ctx, 1) }},
	{"Migrator.DownAll", true, func(ctx context.Context, u string) error { return schema.NewMigrator(u).DownAll(ctx) }},
}

// Every entry point that takes a database (pgcheckpoint.Open, package
// schema, ckpt and migrate) takes the same URL forms, or refuses one with
// a typed error that names the right entry point; none shows a password.
func TestEveryEntryPointTakesTheSameURLs(t *testing.T) {
	t.Parallel()
	ckpt, migrate := buildCommand(t, "ckpt"), buildCommand(t, "migrate")
	env := envWithout("DATABASE_URL")
	d := pgtest.NewDB(t)
	pgURL, pgqlURL, kvURL := pgForms(t, d.URL, "", "", "", false)
	file := filepath.Join(t.TempDir(), "walk.db")
	latest := fmt.Sprintf("version %d of %d", schema.Latest(), schema.Latest())
	sqliteLatest := fmt.Sprintf("version %d of %d", sqlite.LatestVersion(), sqlite.LatestVersion())

	const sqliteAdvice = "migrate a SQLite file with pgcheckpoint.Open(ctx, url, pgcheckpoint.Options{Migrate: true}), sqlite.Open(ctx, path, sqlite.Options{Migrate: true}) or `migrate -database sqlite:PATH up`"
	type cli struct {
		code int
		out  string // in stdout or stderr
	}
	for _, c := range []struct {
		name      string
		url       string
		open      error  // what Open returns (errors.Is); nil: it works
		openMsg   string // in Open's error
		schema    error  // what each schema call returns; nil: it works
		schemaMsg string
		ckpt      cli // ckpt threads
		migrate   cli // migrate up
	}{
		{"postgres://", pgURL, nil, "", nil, "", cli{0, ""}, cli{0, latest}},
		{"postgresql://", pgqlURL, nil, "", nil, "", cli{0, ""}, cli{0, latest}},
		{"keyword/value", kvURL, nil, "", nil, "", cli{0, ""}, cli{0, latest}},
		{"sqlite:PATH", "sqlite:" + file, nil, "", schema.ErrNotPostgres, sqliteAdvice, cli{0, ""}, cli{0, sqliteLatest}},
		// ckpt opens without migrating: a new in-memory database is empty.
		{"sqlite::memory:", "sqlite::memory:", nil, "", schema.ErrNotPostgres, sqliteAdvice, cli{1, "not migrated"}, cli{0, sqliteLatest}},

		{"empty", "", pgcheckpoint.ErrBadURL, "none given", schema.ErrBadURL, "none given", cli{2, "no database"}, cli{2, "no database"}},
		{"mysql://", "mysql://u:" + urlSecret + "@h/db", pgcheckpoint.ErrBadURL, `"mysql://...": want postgres://`, schema.ErrBadURL, `"mysql://...": want postgres://`,
			cli{2, `"mysql://...": want postgres://`}, cli{2, `"mysql://...": want postgres://`}},
		{"sqlite: with no path", "sqlite:", pgcheckpoint.ErrBadURL, "has no file path", schema.ErrBadURL, "has no file path", cli{2, "has no file path"}, cli{2, "has no file path"}},
		{"postgres:// with a password, malformed", "postgres://u:" + urlSecret + "@h:notaport/db", pgcheckpoint.ErrBadURL, "cannot parse: invalid port",
			schema.ErrBadURL, "cannot parse: invalid port", cli{2, "invalid port"}, cli{2, "invalid port"}},
		{"keyword/value with a password, malformed", "host=h password=" + urlSecret + " port=notaport", pgcheckpoint.ErrBadURL, "cannot parse: invalid port",
			schema.ErrBadURL, "cannot parse: invalid port", cli{2, "invalid port"}, cli{2, "invalid port"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			noSecret := func(where, text string) {
				t.Helper()
				if strings.Contains(text, urlSecret) {
					t.Errorf("%s shows the password: %s", where, text)
				}
			}

			eng, err := pgcheckpoint.Open(ctx, c.url, pgcheckpoint.Options{Migrate: true})
			switch {
			case c.open == nil && err != nil:
				t.Errorf("Open: %v", err)
			case c.open == nil:
				if _, err := eng.ListThreads(ctx, engine.ThreadListOptions{}); err != nil {
					t.Errorf("Open, then ListThreads: %v", err)
				}
				eng.Close()
			case !errors.Is(err, c.open) || !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), c.openMsg):
				t.Errorf("Open: %v; want %v (and engine.ErrInvalidInput) with %q", err, c.open, c.openMsg)
			}
			noSecret("Open", fmt.Sprint(err))

			for _, s := range schemaCalls {
				if s.changes && c.schema == nil {
					continue
				}
				err := s.call(ctx, c.url)
				if c.schema == nil && err != nil || c.schema != nil && (!errors.Is(err, c.schema) || !strings.Contains(fmt.Sprint(err), c.schemaMsg)) {
					t.Errorf("schema.%s: %v; want %v with %q", s.name, err, c.schema, c.schemaMsg)
				}
				noSecret("schema."+s.name, fmt.Sprint(err))
			}

			for _, run := range []struct {
				bin  string
				args []string
				want cli
			}{
				{ckpt, []string{"--database", c.url, "threads"}, c.ckpt},
				{migrate, []string{"-database", c.url, "up"}, c.migrate},
			} {
				r := runCLI(t, run.bin, env, run.args...)
				noStackTrace(t, r)
				if r.code != run.want.code || !strings.Contains(r.stdout+r.stderr, run.want.out) {
					t.Errorf("%s %q: exit %d, want %d with %q\n%s%s", filepath.Base(run.bin), run.args, r.code, run.want.code, run.want.out, r.stdout, r.stderr)
				}
				noSecret(filepath.Base(run.bin), r.stdout+r.stderr)
			}
		})
	}
}

// A database that does not exist, or a login the server refuses, reads as
// that, once, at every entry point: not as the TLS attempt pgx makes first
// under sslmode=prefer, the default.
func TestConnectErrorsNameTheCause(t *testing.T) {
	t.Parallel()
	ckpt, migrate := buildCommand(t, "ckpt"), buildCommand(t, "migrate")
	env := envWithout("DATABASE_URL", "PGPASSWORD", "PGSSLMODE")
	// A new database for the server's address and a user it knows, and
	// one that is never created.
	d := pgtest.NewDB(t)
	const missing = "pgct_nosuchdb"
	noDB, _, noDBKV := pgForms(t, d.URL, missing, "", "", true)
	// A role that does not exist: refused on a trust cluster (28000) as on
	// one that asks for passwords (28P01).
	noRole, _, _ := pgForms(t, d.URL, "", "pgct_nosuchrole", urlSecret, true)

	for _, c := range []struct {
		name, url string
		code      string // SQLSTATE, or its class
		cause     string // in the message exactly once
	}{
		{"missing database", noDB, "3D000", fmt.Sprintf("database %q does not exist", missing)},
		{"missing database, keyword/value", noDBKV, "3D000", fmt.Sprintf("database %q does not exist", missing)},
		{"authentication", noRole, "28", "authentication failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			check := func(where, msg string) {
				t.Helper()
				if strings.Count(msg, c.cause) != 1 || !strings.Contains(msg, "SQLSTATE "+c.code) ||
					strings.Contains(strings.ToLower(msg), "tls") || strings.Contains(msg, urlSecret) {
					t.Errorf("%s: %q; want %q once, SQLSTATE %s, no TLS and no password", where, msg, c.cause, c.code)
				}
			}
			checkErr := func(where string, err error) {
				t.Helper()
				var pe *pgconn.PgError
				if !errors.Is(err, pgcheckpoint.ErrConnect) || !errors.Is(err, schema.ErrConnect) || !errors.As(err, &pe) || !strings.HasPrefix(pe.Code, c.code) {
					t.Errorf("%s: %v; want ErrConnect wrapping SQLSTATE %s", where, err, c.code)
					return
				}
				check(where, err.Error())
			}

			_, err := pgcheckpoint.Open(ctx, c.url, pgcheckpoint.Options{})
			checkErr("Open", err)
			for _, s := range schemaCalls {
				checkErr("schema."+s.name, s.call(ctx, c.url))
			}
			cfg, err := pgxpool.ParseConfig(c.url)
			if err != nil {
				t.Fatal(err)
			}
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			checkErr("schema.MigratePool", schema.MigratePool(ctx, pool))
			checkErr("schema.CheckPool", schema.CheckPool(ctx, pool))

			for _, args := range [][]string{
				{ckpt, "--database", c.url, "threads"},
				{migrate, "-database", c.url, "version"},
			} {
				r := runCLI(t, args[0], env, args[1:]...)
				noStackTrace(t, r)
				if r.code != 1 || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("%s: exit %d, want 1 and one line:\n%s", filepath.Base(args[0]), r.code, r.stderr)
				}
				check(filepath.Base(args[0]), r.stderr)
			}
		})
	}
}
