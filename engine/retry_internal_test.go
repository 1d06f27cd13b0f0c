package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
		if errors.Is(got, ErrTransient) != c.transient {
			t.Errorf("%s (%v): transient %v, want %v", c.name, c.err, !c.transient, c.transient)
		}
		if !errors.Is(got, c.err) && !errors.Is(got, ErrNotFound) && !errors.Is(got, ErrIDConflict) && !errors.Is(got, ErrInvalidInput) {
			t.Errorf("%s: the driver's error is not kept in the chain: %v", c.name, got)
		}
	}
}

// A policy's waits: jittered between half and all of the backoff, doubled
// up to MaxBackoff, and no wait that would end past MaxElapsed.
func TestRetryPolicyWaits(t *testing.T) {
	t.Parallel()
	fail := fmt.Errorf("%w: lost", ErrTransient)
	var at []time.Time
	p := RetryPolicy{Attempts: 6, Backoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, MaxElapsed: time.Minute}
	err := p.retry(context.Background(), func() error { at = append(at, time.Now()); return fail })
	if !errors.Is(err, fail) || len(at) != 6 {
		t.Fatalf("%d attempts, %v; want 6 and the last error", len(at), err)
	}
	for i := 1; i < len(at); i++ {
		want := min(20*time.Millisecond<<(i-1), 40*time.Millisecond)
		if wait := at[i].Sub(at[i-1]); wait < want/2 {
			t.Errorf("wait %d: %v, want at least %v", i, wait, want/2)
		}
	}
	// Uncapped, the five waits would take at least 310ms; capped, at most 180.
	if total := at[5].Sub(at[0]); total > 300*time.Millisecond {
		t.Errorf("five waits took %v: MaxBackoff does not cap them", total)
	}

	at = nil
	p = RetryPolicy{Attempts: 1000, Backoff: 30 * time.Millisecond, MaxBackoff: 30 * time.Millisecond, MaxElapsed: 100 * time.Millisecond}
	start := time.Now()
	_ = p.retry(context.Background(), func() error { at = append(at, time.Now()); return fail })
	if took := time.Since(start); took > 250*time.Millisecond || len(at) < 3 {
		t.Errorf("MaxElapsed 100ms: %d attempts in %v", len(at), took)
	}
}
