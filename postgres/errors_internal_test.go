package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The one classification of Postgres driver errors: what ErrTransient
// marks (and so what Config.Retry retries), and what it never marks.
func TestTransientClassification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// Real connection failures, no server needed: a closed port, and a
	// listener that accepts and never answers (connect_timeout passes).
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	_, refused := pgconn.Connect(ctx, "postgres://u@"+closedAddr+"/d?sslmode=disable&connect_timeout=5")
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, timedOut := pgconn.Connect(ctx, "postgres://u@"+silent.Addr().String()+"/d?sslmode=disable&connect_timeout=1")
	// A server that refuses TLS when the client requires it: a setup to
	// fix, not to retry.
	noTLS, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer noTLS.Close()
	go func() {
		for {
			c, err := noTLS.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := io.ReadFull(c, make([]byte, 8)); err == nil { // SSLRequest
					c.Write([]byte("N"))
				}
			}()
		}
	}()
	_, tlsRefused := pgconn.Connect(ctx, "postgres://u@"+noTLS.Addr().String()+"/d?sslmode=require&connect_timeout=5")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, cancelledConnect := pgconn.Connect(cctx, "postgres://u@"+silent.Addr().String()+"/d?sslmode=disable")

	pg := func(code string) error {
		return fmt.Errorf("exec: %w", &pgconn.PgError{Severity: "FATAL", Code: code, Message: "from the server"})
	}
	opErr := func(errno error) error {
		return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", errno)}
	}
	cases := []struct {
		name      string
		err       error
		transient bool
	}{
		{"57P01 admin shutdown", pg("57P01"), true},
		{"57P02 crash shutdown", pg("57P02"), true},
		{"57P03 cannot connect now", pg("57P03"), true},
		{"40001 serialization failure", pg("40001"), true},
		{"40P01 deadlock", pg("40P01"), true},
		{"53300 too many connections", pg("53300"), true},
		{"08006 connection failure", pg("08006"), true},
		{"08001 unable to connect", pg("08001"), true},
		{"connection refused", refused, true},
		{"connect_timeout passed", timedOut, true},
		{"conn closed", fmt.Errorf("put: %w", pgconn.ErrConnClosed), true},
		{"io.EOF", fmt.Errorf("receive message: %w", io.EOF), true},
		{"unexpected EOF", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), true},
		{"connection reset", opErr(syscall.ECONNRESET), true},
		{"broken pipe", opErr(syscall.EPIPE), true},
		{"network timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},

		{"23505 unique violation", pg("23505"), false},
		{"22P02 invalid text", pg("22P02"), false},
		{"42P01 undefined table (not migrated)", pg("42P01"), false},
		{"28P01 failed login", pg("28P01"), false},
		{"3D000 no such database", pg("3D000"), false},
		{"42501 permission denied", pg("42501"), false},
		{"57014 statement cancelled", pg("57014"), false},
		{"PC001 not found", pg(sqlstateNotFound), false},
		{"PC002 id conflict", pg(sqlstateIDConflict), false},
		{"PC003 invalid input", pg(sqlstateInvalidInput), false},
		{"PC006 too large", pg(sqlstateTooLarge), false},
		{"TLS refused", tlsRefused, false},
		{"no rows", pgx.ErrNoRows, false},
		{"context cancelled", fmt.Errorf("query: %w", context.Canceled), false},
		{"context cancelled while connecting", cancelledConnect, false},
		{"deadline passed during a statement", fmt.Errorf("query: %w", context.DeadlineExceeded), false},
		{"any other error", errors.New("something else"), false},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: the failure did not happen", c.name)
			continue
		}
		got := dbError("", c.err)
		if errors.Is(got, engine.ErrTransient) != c.transient {
			t.Errorf("%s (%v): transient %v, want %v", c.name, c.err, !c.transient, c.transient)
		}
		if !errors.Is(got, c.err) && !errors.Is(got, engine.ErrNotFound) && !errors.Is(got, engine.ErrIDConflict) && !errors.Is(got, engine.ErrInvalidInput) {
			t.Errorf("%s: the driver's error is not kept in the chain: %v", c.name, got)
		}
	}
}

// Of the insufficient-resources class (53), only disk_full is
// ErrStorageFull; none of it is transient but too many connections.
func TestStorageFullClassification(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code            string
		full, transient bool
	}{
		{"53100", true, false},  // disk_full: the data, WAL or temp files' volume
		{"53200", false, false}, // out_of_memory: the server's memory, not storage
		{"53000", false, false}, // insufficient_resources, unnamed
		{"53400", false, false}, // configuration_limit_exceeded (temp_file_limit)
		{"53300", false, true},  // too_many_connections
	} {
		pgErr := &pgconn.PgError{Code: c.code, Message: "could not extend file: No space left on device"}
		got := dbError("snapshot", fmt.Errorf("exec: %w", pgErr))
		if errors.Is(got, engine.ErrStorageFull) != c.full || errors.Is(got, engine.ErrTransient) != c.transient {
			t.Errorf("%s: %v: storage full %v, transient %v; want %v, %v", c.code, got,
				errors.Is(got, engine.ErrStorageFull), errors.Is(got, engine.ErrTransient), c.full, c.transient)
		}
		if !errors.Is(got, pgErr) && c.full {
			t.Errorf("%s: the driver's error is not kept in the chain: %v", c.code, got)
		}
	}
}
