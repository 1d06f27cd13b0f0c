package engine

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
)

// Sentinel errors. Match them with errors.Is; the returned error wraps one of
// them with what was wrong and what to do about it. Every call that returns
// ErrInvalidInput (or an error wrapping it) has written nothing.
var (
	// ErrNotFound: the checkpoint, thread or parent named does not exist.
	ErrNotFound = errors.New("pgcheckpoint: not found")

	// ErrInvalidInput: an argument is malformed (empty or over-long thread
	// id, NUL in a text field, unknown trigger, a checkpoint id that is not
	// a UUIDv7, ...). ErrInvalidJSON and ErrSnapshotTooLarge wrap it.
	ErrInvalidInput = errors.New("pgcheckpoint: invalid input")

	// ErrInvalidJSON: a JSON argument does not parse, has the wrong shape
	// (messages must be an array; state, tool results and metadata objects),
	// or holds text Postgres rejects (an unpaired UTF-16 surrogate escape).
	ErrInvalidJSON = fmt.Errorf("%w: invalid JSON", ErrInvalidInput)

	// ErrSnapshotTooLarge: messages + state + tool results exceed
	// Config.MaxSnapshotBytes.
	ErrSnapshotTooLarge = fmt.Errorf("%w: snapshot too large", ErrInvalidInput)

	// ErrIDConflict: a Snapshot reused an existing checkpoint id for other
	// content or another thread. A retry of the very same write is not a
	// conflict: it returns the stored checkpoint.
	ErrIDConflict = errors.New("pgcheckpoint: checkpoint id already used for other content")

	// ErrHeadMoved: an Append with AppendInput.OnHead set found another
	// checkpoint at the head of its thread and namespace (another writer
	// wrote first, or a Rewind moved it). Nothing was written: read the
	// head again (Latest) and append to it, or write the whole checkpoint.
	ErrHeadMoved = errors.New("pgcheckpoint: the head is not the checkpoint the append was made on")

	// ErrDamaged: a checkpoint cannot be read because what is stored for
	// it is damaged: its chain of deltas does not reach a full snapshot (a
	// base deleted or changed by hand, a format neither 'full' nor 'delta';
	// SQLSTATE PC004 from the SQL functions). Every delta written on it
	// reads the same; checkpoints below the damage still read. Restore the
	// rows from a backup or an export.
	ErrDamaged = errors.New("pgcheckpoint: stored checkpoint is damaged")

	// ErrPermission: the database refused the call for want of a privilege
	// (SQLSTATE 42501): a read-only role tried to write, or a role lacks a
	// grant the call needs; or the session can only read (25006: a hot
	// standby, default_transaction_read_only). Nothing was written. Use a
	// role that may write, or grant this one what schema/roles/roles.sql
	// grants the application role.
	ErrPermission = errors.New("pgcheckpoint: permission denied")

	// ErrTransient: the database failed the call for a reason that passes:
	// the connection was lost or refused, the server is shutting down or
	// starting, a serialization failure or deadlock, too many connections,
	// a SQLite file busy past its timeout. A write may or may not have
	// committed (the acknowledgment may be what was lost): retry it with
	// the same checkpoint id, which is safe, or let Config.Retry do it.
	ErrTransient = errors.New("pgcheckpoint: transient database failure")
)

// transientPG reports whether a Postgres driver error passes: class 08
// (connection exception), admin or crash shutdown, cannot connect now,
// serialization failure, deadlock, too many connections; or, below the
// protocol, a connection that failed, closed or was reset, or a connection
// attempt that timed out (connect_timeout). Errors the server gives for the
// request itself (bad input, permissions, a failed login) are not
// transient, nor are TLS failures, a cancelled context or a deadline that
// passed during a statement: those are the caller's to fix. (Retries also
// stop once the caller's context is done, whatever the error.)
func transientPG(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.Is(err, context.Canceled) || (errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &connectErr)) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "40001", "40P01", "53300":
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
)

// constraintCheckpointID is the unique constraint on checkpoint ids.
const constraintCheckpointID = "checkpoints_checkpoint_id_key"

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
		return fmt.Errorf("%s%w", what, ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlstateNotFound:
			return fmt.Errorf("%s%w: %s", what, ErrNotFound, pgErr.Message)
		case sqlstateIDConflict:
			return fmt.Errorf("%s%w: %s", what, ErrIDConflict, pgErr.Message)
		case "23505": // unique_violation
			if pgErr.ConstraintName == constraintCheckpointID {
				// A write on another thread stored the id meanwhile.
				return fmt.Errorf("%s%w: %s", what, ErrIDConflict, pgErr.Message)
			}
		case sqlstateHeadMoved:
			return fmt.Errorf("%s%w: %s", what, ErrHeadMoved, pgErr.Message)
		case sqlstateDamaged:
			return fmt.Errorf("%s%w: %w", what, ErrDamaged, err)
		case sqlstateInvalidInput, "23514": // check_violation
			return fmt.Errorf("%s%w: %s", what, ErrInvalidInput, pgErr.Message)
		case "22P02", "22P05", "22021", "22025", "2202E": // bad text in JSON input
			return fmt.Errorf("%s%w: %s", what, ErrInvalidJSON, pgErr.Message)
		case "22003": // numeric_value_out_of_range: a JSON number jsonb cannot hold
			return fmt.Errorf("%s%w: a number is out of range: %s", what, ErrInvalidJSON, pgErr.Message)
		case "54001": // statement_too_complex: JSON nested deeper than the server parses
			return fmt.Errorf("%s%w: nested too deeply: %s", what, ErrInvalidJSON, pgErr.Message)
		case "22008": // datetime_field_overflow
			return fmt.Errorf("%s%w: %s", what, ErrInvalidInput, pgErr.Message)
		case "42501": // insufficient_privilege
			return fmt.Errorf("%s%w: the database role lacks a privilege (a read-only role may only read): %w", what, ErrPermission, err)
		case "25006": // read_only_sql_transaction
			return fmt.Errorf("%s%w: the session is read-only: %w", what, ErrPermission, err)
		}
	}
	if transientPG(err) {
		return fmt.Errorf("%s%w: %w", what, ErrTransient, err)
	}
	if what == "" {
		return err
	}
	return fmt.Errorf("%s%w", what, err)
}
