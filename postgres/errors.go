package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// transientPG reports whether a Postgres driver error passes: class 08
// (connection exception), admin or crash shutdown, cannot connect now,
// serialization failure, deadlock, a lock not granted within the
// session's lock_timeout (another client held the thread), too many
// connections; or, below the
// protocol, a connection that failed, closed or was reset, or a connection
// attempt that timed out (connect_timeout). Errors the server gives for the
// request itself (bad input, permissions, a failed login) are not
// transient, nor are TLS failures, a cancelled context or a deadline that
// passed during a statement, the context's or the server's
// statement_timeout (57014; a retry would run as long again): those are
// the caller's to fix. (Retries also
// stop once the caller's context is done, whatever the error.)
func transientPG(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.Is(err, context.Canceled) || (errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &connectErr)) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "40001", "40P01", "55P03", "53300":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var netErr net.Error
	return pgconn.SafeToRetry(err) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// SQLSTATE codes raised by pgcheckpoint's SQL functions.
const (
	sqlstateNotFound     = "PC001"
	sqlstateIDConflict   = "PC002"
	sqlstateInvalidInput = "PC003"
	sqlstateDamaged      = "PC004"
	sqlstateHeadMoved    = "PC005"
	sqlstateTooLarge     = "PC006"
	sqlstateEncrypted    = "PC007"
)

// constraintCheckpointID is the unique constraint on checkpoint ids (in a
// tenant).
const constraintCheckpointID = "checkpoints_checkpoint_id_tenant_id_key"

// storeError is dbError for the Postgres store, whose caller, the Engine,
// says what failed.
func storeError(err error) error {
	return dbError("", err)
}

// dbError maps a driver error to the package's sentinels, keeping the
// original in the chain. what names the operation, for the message ("":
// the caller names it).
func dbError(what string, err error) error {
	if err == nil {
		return nil
	}
	if what != "" {
		what += ": "
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s%w", what, engine.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlstateNotFound:
			return fmt.Errorf("%s%w: %s", what, engine.ErrNotFound, pgErr.Message)
		case sqlstateIDConflict:
			return fmt.Errorf("%s%w: %s", what, engine.ErrIDConflict, pgErr.Message)
		case "23505": // unique_violation
			if pgErr.ConstraintName == constraintCheckpointID {
				// A write on another thread stored the id meanwhile.
				return fmt.Errorf("%s%w: %s", what, engine.ErrIDConflict, pgErr.Message)
			}
		case sqlstateHeadMoved:
			return fmt.Errorf("%s%w: %s", what, engine.ErrHeadMoved, pgErr.Message)
		case sqlstateTooLarge:
			return fmt.Errorf("%s%w: %s", what, engine.ErrSnapshotTooLarge, pgErr.Message)
		case sqlstateEncrypted:
			return fmt.Errorf("%s%w: %s", what, engine.ErrEncrypted, pgErr.Message)
		case sqlstateDamaged:
			return fmt.Errorf("%s%w: %w", what, engine.ErrDamaged, err)
		case sqlstateInvalidInput, "23514": // check_violation
			return fmt.Errorf("%s%w: %s", what, engine.ErrInvalidInput, pgErr.Message)
		case "22P02", "22P05", "22021", "22025", "2202E": // bad text in JSON input
			return fmt.Errorf("%s%w: %s", what, engine.ErrInvalidJSON, pgErr.Message)
		case "22003": // numeric_value_out_of_range: a JSON number jsonb cannot hold
			return fmt.Errorf("%s%w: a number is out of range: %s", what, engine.ErrInvalidJSON, pgErr.Message)
		case "54001": // statement_too_complex: JSON nested deeper than the server parses
			return fmt.Errorf("%s%w: nested too deeply: %s", what, engine.ErrInvalidJSON, pgErr.Message)
		case "22008": // datetime_field_overflow
			return fmt.Errorf("%s%w: %s", what, engine.ErrInvalidInput, pgErr.Message)
		case "42501": // insufficient_privilege
			return fmt.Errorf("%s%w: the database role lacks a privilege (a read-only role may only read): %w", what, engine.ErrPermission, err)
		case "25006": // read_only_sql_transaction
			return fmt.Errorf("%s%w: the session is read-only: %w", what, engine.ErrPermission, err)
		case "3F000", "42P01": // invalid_schema_name, undefined_table: no schema, or not all of it
			return fmt.Errorf("%s%w: the pgcheckpoint schema is missing: run `migrate up` (schema.Migrate): %w", what, engine.ErrNotMigrated, err)
		case "53100": // disk_full; not 53200 out_of_memory, which is the server's memory, not storage
			return fmt.Errorf("%s%w: the database server's disk is full: %w", what, engine.ErrStorageFull, err)
		}
	}
	if transientPG(err) {
		return fmt.Errorf("%s%w: %w", what, engine.ErrTransient, err)
	}
	if what == "" {
		return err
	}
	return fmt.Errorf("%s%w", what, err)
}
