package dburl

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

const secret = "s3cret-pw"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		url, kind, target string
	}{
		{"postgres://app@db:5432/app", KindPostgres, "postgres://app@db:5432/app"},
		{"postgresql://app@db/app?sslmode=disable", KindPostgres, "postgresql://app@db/app?sslmode=disable"},
		{"host=/tmp port=5432 dbname=app user=me", KindPostgres, "host=/tmp port=5432 dbname=app user=me"},
		{" dbname = app", KindPostgres, " dbname = app"},
		{"sqlite:agent.db", KindSQLite, "agent.db"},
		{"sqlite:///abs/agent.db", KindSQLite, "/abs/agent.db"},
		{"sqlite::memory:", KindSQLite, MemoryPath},
	} {
		kind, target, err := Parse(c.url)
		if err != nil || kind != c.kind || target != c.target {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", c.url, kind, target, err, c.kind, c.target)
		}
	}
	for _, c := range []struct{ url, want string }{
		{"", "none given"},
		{"  ", "none given"},
		{"mysql://u:" + secret + "@h/db", `"mysql://..."`},
		{"u:" + secret + "@h/db", "not shown"},
		{"agent.db", `"agent.db": want postgres://`},
		{"sqlite:", "has no file path"},
		{"sqlite://", "has no file path"},
		{"sqlite:a\x00b", "NUL"},
	} {
		_, _, err := Parse(c.url)
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("Parse(%q) = %v; want ErrBadURL with %q", c.url, err, c.want)
		}
	}
}

func TestPostgresConfig(t *testing.T) {
	cfg, err := PostgresConfig("host=/tmp port=5499 dbname=app user=me pool_max_conns=3")
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.ConnConfig; c.Host != "/tmp" || c.Port != 5499 || c.Database != "app" || c.User != "me" || cfg.MaxConns != 3 || c.ConnectTimeout != DefaultConnectTimeout {
		t.Errorf("config: %+v", cfg)
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["pool_max_conns"]; ok {
		t.Error("pool_max_conns left in the connection's settings: a single connection would send it to the server")
	}
	if cfg, err := PostgresConfig("postgres://me@h/app?connect_timeout=3"); err != nil || cfg.ConnConfig.ConnectTimeout != 3*time.Second {
		t.Errorf("connect_timeout=3: %v, %v", cfg.ConnConfig.ConnectTimeout, err)
	}
	if _, err := PostgresConfig("sqlite:walk.db"); !errors.Is(err, ErrNotPostgres) || !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), "sqlite:walk.db") {
		t.Errorf("sqlite URL: %v; want ErrNotPostgres", err)
	}
	for _, u := range []string{
		"postgres://u:" + secret + "@h:notaport/db",
		"postgres://u@h/db?password=" + secret + "&sslmode=bogus",
		"host=h password=" + secret + " port=notaport",
		"host=h password='" + secret + "' sslmode=bogus",
		"host=h password=" + secret + " " + secret + "x",       // unquoted, with a space
		"postgresql://u:" + secret + "@h/db?connect_timeout=x", // the reason shows the value, not the password
		// The password pasted into another setting, whose value the
		// reason shows: the reason is withheld.
		"postgres://u:" + secret + "@h/db?connect_timeout=" + secret,
		"host=h password=" + secret + " connect_timeout=" + secret,
	} {
		_, err := PostgresConfig(u)
		if !errors.Is(err, ErrBadURL) || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "cannot parse") {
			t.Errorf("PostgresConfig(%q) = %v; want ErrBadURL, no password", u, err)
		}
	}
	// An unquoted password with a space: pgx reads its second half as a
	// keyword, which its reason names.
	if _, err := PostgresConfig("host=h password=" + secret + " half-of-it dbname=d"); !errors.Is(err, ErrBadURL) || strings.Contains(err.Error(), "half-of-it") {
		t.Errorf("a password with a space: %v; want ErrBadURL, not showing the password's second half", err)
	}
	// The reason is shown when it shows no secret.
	if _, err := PostgresConfig("postgres://u@h:notaport/db"); err == nil || !strings.Contains(err.Error(), "invalid port") || strings.Contains(err.Error(), "notaport") {
		t.Errorf("bad port: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:" + secret + "@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u@h/db?sslmode=disable", "postgres://u@h/db?sslmode=disable"},
		{"postgresql://u@h/db?password=" + secret + "&x=1", "postgresql://u@h/db?password=xxxxx&x=1"},
		{"host=h password=" + secret + " dbname=d", "host=h password=xxxxx dbname=d"},
		{"host=h password='" + secret + " x' dbname=d", "host=h password=xxxxx dbname=d"},
		// A keyword/value string's unquoted value runs to an unescaped
		// space, & and escaped spaces in it (the tail was shown).
		{"host=h password=p&" + secret + " dbname=d", "host=h password=xxxxx dbname=d"},
		{`host=h password=ab\ ` + secret + " dbname=d", "host=h password=xxxxx dbname=d"},
		{"host=h password=p&" + secret + " application_name=http://app", "host=h password=xxxxx application_name=http://app"},
		{"sqlite:agent.db", "sqlite:agent.db"},
		{"mysql://u:" + secret + "@h", `"mysql://..."`},
	} {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// fakeServer answers every connection as a Postgres server without TLS
// that then fails the login with fail, and returns its address.
func fakeServer(t *testing.T, fail *pgproto3.ErrorResponse) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := pgproto3.NewBackend(c, c)
				for {
					m, err := b.ReceiveStartupMessage()
					if err != nil {
						return
					}
					switch m.(type) {
					case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
						if _, err := c.Write([]byte("N")); err != nil {
							return
						}
					case *pgproto3.StartupMessage:
						b.Send(fail)
						_ = b.Flush()
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// The server's error is the cause, named once, whatever TLS mode pgx
// tried first; a login refused names authentication.
func TestConnectErrorNamesTheServersError(t *testing.T) {
	for _, c := range []struct {
		code, msg string
		want      string
	}{
		{"3D000", `database "nosuchdb" does not exist`, `: database "nosuchdb" does not exist (SQLSTATE 3D000)`},
		{"28P01", `password authentication failed for user "me"`, `: password authentication failed for user "me" (SQLSTATE 28P01)`},
		{"28000", `role "me" does not exist`, `: authentication failed: role "me" does not exist (SQLSTATE 28000)`},
	} {
		addr := fakeServer(t, &pgproto3.ErrorResponse{Severity: "FATAL", Code: c.code, Message: c.msg})
		for _, mode := range []string{"prefer", "disable", "allow"} {
			url := "postgres://me:" + secret + "@" + addr + "/nosuchdb?sslmode=" + mode
			cfg, err := PostgresConfig(url)
			if err != nil {
				t.Fatal(err)
			}
			_, err = pgx.ConnectConfig(context.Background(), cfg.ConnConfig)
			err = ConnectError(cfg.ConnConfig, err)
			var pe *pgconn.PgError
			msg := err.Error()
			switch {
			case !errors.Is(err, ErrConnect), !errors.As(err, &pe), pe.Code != c.code:
				t.Errorf("%s, sslmode=%s: %v; want ErrConnect wrapping SQLSTATE %s", c.code, mode, err, c.code)
			case msg != "cannot connect to Postgres at "+addr+c.want:
				t.Errorf("%s, sslmode=%s:\n got %q\nwant %q", c.code, mode, msg, "cannot connect to Postgres at "+addr+c.want)
			case strings.Contains(strings.ToLower(msg), "tls"), strings.Contains(msg, secret),
				strings.Count(msg, c.msg) != 1, strings.Count(msg, "authentication failed") > 1:
				t.Errorf("%s, sslmode=%s: %q names TLS, the password or the cause twice", c.code, mode, msg)
			}
		}
	}
}

// A server that cannot be reached: each distinct failure once, the
// address once.
func TestConnectErrorUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()                                                   // nothing listens there now
	cfg, err := PostgresConfig("postgres://me@" + addr + "/db") // sslmode=prefer: two attempts
	if err != nil {
		t.Fatal(err)
	}
	_, err = pgx.ConnectConfig(context.Background(), cfg.ConnConfig)
	err = ConnectError(cfg.ConnConfig, err)
	msg := err.Error()
	if !errors.Is(err, ErrConnect) || !strings.HasPrefix(msg, "cannot connect to Postgres at "+addr+": ") ||
		strings.Count(msg, "connection refused") != 1 || strings.Count(msg, addr) != 2 { // where, and dial's own text
		t.Errorf("unreachable: %q", msg)
	}
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		t.Errorf("the driver's error is not wrapped: %v", err)
	}
}
