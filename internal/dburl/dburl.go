// Package dburl reads the database URLs that every pgcheckpoint entry point
// takes (pgcheckpoint.Open, package schema, cmd/ckpt, cmd/migrate), and
// words the errors of a Postgres connection, so that each entry point
// accepts the same forms and says the same thing when one fails:
//
//	kind, target, err := dburl.Parse("host=/tmp port=5432 dbname=app") // KindPostgres
//	cfg, err := dburl.PostgresConfig(url)                               // the pool's config
//	if err := pool.Ping(ctx); err != nil {
//		return dburl.ConnectError(cfg.ConnConfig, err)
//	}
//
// No error it returns shows a password the URL holds.
package dburl

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The kinds of store a URL names.
const (
	KindPostgres = "postgres"
	KindSQLite   = "sqlite"
)

// MemoryPath is the SQLite path of a private in-memory database:
// "sqlite::memory:" as a URL.
const MemoryPath = ":memory:"

// DefaultConnectTimeout bounds each attempt to connect to Postgres when the
// URL sets no connect_timeout, so a host that never answers fails instead
// of hanging.
const DefaultConnectTimeout = 10 * time.Second

var (
	// ErrBadURL is a database URL that names no store, or that Postgres
	// cannot parse. Its text begins as engine.ErrInvalidInput's does, but it
	// cannot wrap it: engine's tests import package schema, which imports
	// this one. pgcheckpoint.Open's errors wrap both.
	ErrBadURL = errors.New("pgcheckpoint: invalid input: database URL")

	// ErrNotPostgres is a well-formed URL given to an entry point that
	// takes Postgres only (package schema) but naming a SQLite database.
	// It wraps ErrBadURL.
	ErrNotPostgres = fmt.Errorf("%w: not Postgres", ErrBadURL)

	// ErrConnect is a Postgres server that could not be reached or that
	// refused the connection. The error that wraps it says why once (the
	// server's own error, such as SQLSTATE 3D000 for a database that does
	// not exist or class 28 for a failed authentication) and wraps the
	// driver's error, so errors.As finds a *pgconn.PgError.
	ErrConnect = errors.New("cannot connect to Postgres")
)

// Forms is the list of accepted forms, for messages.
const Forms = "postgres://..., postgresql://..., sqlite:PATH, sqlite::memory: or keyword/value (host=... dbname=...)"

// keywordValue is the start of a libpq keyword/value connection string.
var keywordValue = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)

// Parse tells which store a URL names and returns what that store opens:
//
//	postgres://... or postgresql://...  KindPostgres, the URL as it is
//	host=... dbname=... (keyword/value) KindPostgres, the string as it is
//	sqlite:PATH                         KindSQLite, PATH (relative or absolute)
//	sqlite:///abs/path.db               KindSQLite, /abs/path.db
//	sqlite::memory:                     KindSQLite, MemoryPath
//
// It does not parse a Postgres URL's settings (PostgresConfig does).
// Errors: ErrBadURL, for an empty URL too.
func Parse(url string) (kind, target string, err error) {
	switch {
	case isURL(url), keywordValue.MatchString(url):
		return KindPostgres, url, nil
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return "", "", fmt.Errorf("%w %q has no file path: use sqlite:PATH, e.g. sqlite:agent.db, or sqlite::memory:", ErrBadURL, url)
		}
		if strings.ContainsRune(path, 0) {
			return "", "", fmt.Errorf("%w: the SQLite path contains a NUL character", ErrBadURL)
		}
		return KindSQLite, path, nil
	case strings.TrimSpace(url) == "":
		return "", "", fmt.Errorf("%w: none given: want %s", ErrBadURL, Forms)
	}
	return "", "", fmt.Errorf("%w %s: want %s", ErrBadURL, shown(url), Forms)
}

// PostgresConfig parses a Postgres URL (either form Parse accepts) into the
// configuration of a pool, whose ConnConfig a single connection can use
// (the pool's own settings, pool_max_conns and the like, are taken out of
// it). Without connect_timeout in the URL, each attempt to connect is
// bounded by DefaultConnectTimeout. Errors: ErrBadURL; ErrNotPostgres for
// a SQLite URL.
func PostgresConfig(url string) (*pgxpool.Config, error) {
	kind, _, err := Parse(url)
	if err != nil {
		return nil, err
	}
	if kind != KindPostgres {
		return nil, fmt.Errorf("%w: %s is a SQLite database", ErrNotPostgres, shown(url))
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot parse: %s", ErrBadURL, parseReason(url, err))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	return cfg, nil
}

// parseReason is why pgx could not parse url, without the URL, or, if
// even that shows a secret of the URL, without the details.
func parseReason(url string, err error) string {
	reason := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		// "cannot parse `URL, its password masked`: reason": pgx's masking
		// is its best effort, so the URL is not shown at all.
		if i := strings.LastIndex(reason, "`: "); i >= 0 {
			reason = reason[i+len("`: "):]
		} else {
			reason = "malformed"
		}
	}
	for _, s := range secrets(url) {
		if strings.Contains(reason, s) {
			return "malformed (details withheld: they would show the password)"
		}
	}
	return reason
}

// shown is url as messages quote it: a URL's scheme only (what follows may
// hold a password), and nothing of a string that might hold one.
func shown(url string) string {
	if i := strings.Index(url, "://"); i >= 0 {
		return fmt.Sprintf("%q", url[:i+3]+"...")
	}
	if strings.HasPrefix(url, "sqlite:") || !strings.ContainsAny(url, "@:= \t\n") {
		return fmt.Sprintf("%q", url)
	}
	return "(not shown: it may hold a password)"
}

var (
	// password=VALUE or password='VALUE' in a keyword/value string, or in
	// a URL's query (password=VALUE&...).
	kvPassword = regexp.MustCompile(`(?i)\b(ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]*)`)
	// kvOnlyPassword is kvPassword in a keyword/value string, whose
	// unquoted value runs to the next space that no backslash escapes
	// (as libpq and pgx read it): & is a character of it, as in a URL's
	// query it is not.
	kvOnlyPassword = regexp.MustCompile(`(?i)\b(ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s\\]|\\.)*)`)
	urlUserinfo    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)@`)
)

// secrets lists what in url may be a password, best effort even when url
// is malformed: the password of a URL's user information, and the values
// of password= and sslpassword= (with a keyword/value string's unquoted
// value cut at the next keyword, in case it held a space).
func secrets(s string) []string {
	var out []string
	add := func(v string) {
		if v != "" {
			out = append(out, v)
			if d, err := url.PathUnescape(v); err == nil && d != v {
				out = append(out, d)
			}
		}
	}
	if m := urlUserinfo.FindStringSubmatch(s); m != nil {
		if _, pw, ok := strings.Cut(m[1], ":"); ok {
			add(pw)
		}
	}
	for _, loc := range kvPassword.FindAllStringSubmatchIndex(s, -1) {
		v := s[loc[4]:loc[5]]
		add(strings.Trim(v, "'"))
		if !strings.HasPrefix(v, "'") {
			// An unquoted value ends at a space; what follows, up to the
			// next keyword=, may be the rest of it.
			rest := s[loc[5]:]
			if next := keywordAfterSpace.FindStringIndex(rest); next != nil {
				rest = rest[:next[0]]
			}
			for _, f := range strings.Fields(rest) {
				add(f)
			}
		}
	}
	return out
}

var keywordAfterSpace = regexp.MustCompile(`\s[A-Za-z_][A-Za-z0-9_]*\s*=`)

// isURL reports whether s is a Postgres URL, not a keyword/value string.
func isURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Redact is url with its passwords masked, for printing: a sqlite: URL as
// it is, a Postgres URL or keyword/value string with each password as
// xxxxx, anything else as messages quote it.
func Redact(s string) string {
	kind, _, err := Parse(s)
	switch {
	case err != nil:
		return shown(s)
	case kind == KindSQLite:
		return s
	}
	if m := urlUserinfo.FindStringSubmatchIndex(s); m != nil {
		if i := strings.IndexByte(s[m[2]:m[3]], ':'); i >= 0 {
			s = s[:m[2]+i+1] + "xxxxx" + s[m[3]:]
		}
	}
	if !isURL(s) {
		return kvOnlyPassword.ReplaceAllString(s, "${1}password=xxxxx")
	}
	return kvPassword.ReplaceAllString(s, "${1}password=xxxxx")
}

// ConnectError is ErrConnect for err, a failure to connect with cfg (or to
// get a connection from a pool with that ConnConfig): its message names the
// server and the cause once, and it wraps err. The cause is the server's
// error when it sent one (the last, if several attempts got one), plainly,
// with its SQLSTATE; else each distinct failure. pgx with sslmode=prefer
// tries TLS first and then plaintext: a server that refuses TLS is no
// cause, so that attempt is not reported when another was made.
func ConnectError(cfg *pgx.ConnConfig, err error) error {
	e := &connectError{err: err}
	if cfg != nil {
		e.where = where(&cfg.Config)
	}
	// pgx reports each attempt (per host, and per TLS mode tried) joined
	// in one *pgconn.ConnectError, each prefixed by its address.
	attempts, perAddress := []error{err}, false
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		inner := errors.Unwrap(ce)
		if j, ok := inner.(interface{ Unwrap() []error }); ok {
			attempts, perAddress = j.Unwrap(), true
		} else if inner != nil {
			attempts = []error{inner}
		}
	}
	for i := len(attempts) - 1; i >= 0 && e.server == nil; i-- {
		errors.As(attempts[i], &e.server)
	}
	if e.server != nil {
		e.cause = serverCause(e.server)
		return e
	}
	var causes []string
	seen := map[string]bool{}
	for _, a := range attempts {
		text := a.Error()
		if perAddress && !strings.Contains(e.where, ", ") {
			// One server: where names it, the attempt need not.
			if inner := errors.Unwrap(a); inner != nil {
				text = inner.Error()
			}
		}
		if len(attempts) > 1 && strings.HasSuffix(text, "server refused TLS connection") {
			continue
		}
		text = strings.Join(strings.Fields(text), " ")
		if !seen[text] {
			seen[text] = true
			causes = append(causes, text)
		}
	}
	e.cause = strings.Join(causes, "; ")
	return e
}

// serverCause is the server's error as a connection failure's cause.
func serverCause(pe *pgconn.PgError) string {
	text := fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, pe.Code)
	if strings.HasPrefix(pe.Code, "28") && !strings.Contains(pe.Message, "authentication failed") {
		// invalid_authorization_specification, invalid_password
		text = "authentication failed: " + text
	}
	return text
}

// where names the servers of cfg, host:port (a Unix socket by its path).
func where(cfg *pgconn.Config) string {
	var hosts []string
	seen := map[string]bool{}
	add := func(host string, port uint16) {
		h := fmt.Sprintf("%s:%d", host, port)
		if strings.HasPrefix(host, "/") {
			h = fmt.Sprintf("%s/.s.PGSQL.%d", host, port)
		}
		if !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return strings.Join(hosts, ", ")
}

// connectError is what ConnectError returns.
type connectError struct {
	where  string
	cause  string
	server *pgconn.PgError // the server's error, if it sent one
	err    error
}

func (e *connectError) Error() string {
	if e.where == "" {
		return fmt.Sprintf("%v: %s", ErrConnect, e.cause)
	}
	return fmt.Sprintf("%v at %s: %s", ErrConnect, e.where, e.cause)
}

func (e *connectError) Unwrap() []error {
	if e.server != nil {
		return []error{ErrConnect, e.server, e.err}
	}
	return []error{ErrConnect, e.err}
}
