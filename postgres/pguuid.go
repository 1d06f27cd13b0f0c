package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgcheckpoint/pgcheckpoint/internal/enginedb"
)

// binaryUUIDs is the DBTX the Postgres store runs its queries (package db's
// and package enginedb's) through: it hands pgx the store's UUIDs
// (google/uuid, the type both packages use) in a form pgx copies as 16
// bytes. pgx sees a uuid.UUID as a database/sql
// Valuer and Scanner and goes through its text: an argument is formatted,
// fails to encode as a binary string (pgx builds an error for that), and
// is parsed back; a result is formatted by pgx and parsed by uuid.Scan.
// That cost about 5 µs of client CPU per UUID, three to four per Snapshot,
// on the reference machine (go test -cpuprofile of BenchmarkSpeed).
//
// It also scans every timestamptz in UTC (see uuidDests), where pgx gives
// the process's local zone: every store returns its times in UTC, so a time
// prints and marshals the same whichever store wrote it.
type binaryUUIDs struct{ enginedb.DBTX }

func (b binaryUUIDs) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return b.DBTX.Exec(ctx, sql, uuidArgs(args)...)
}

func (b binaryUUIDs) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := b.DBTX.Query(ctx, sql, uuidArgs(args)...)
	if err != nil {
		return rows, err
	}
	return uuidRows{rows}, nil
}

func (b binaryUUIDs) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return uuidRow{b.DBTX.QueryRow(ctx, sql, uuidArgs(args)...)}
}

func (b binaryUUIDs) SendBatch(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	for _, q := range batch.QueuedQueries {
		q.Arguments = uuidArgs(q.Arguments)
	}
	return uuidBatchResults{b.DBTX.SendBatch(ctx, batch)}
}

// uuidArgs returns args with each uuid.UUID, uuid.NullUUID and []uuid.UUID
// as pgtype values (a copy when one is converted).
func uuidArgs(args []any) []any {
	var out []any
	for i, a := range args {
		var v any
		switch a := a.(type) {
		case uuid.UUID:
			v = pgtype.UUID{Bytes: a, Valid: true}
		case uuid.NullUUID:
			v = pgtype.UUID{Bytes: a.UUID, Valid: a.Valid}
		case []uuid.UUID:
			if a == nil {
				continue // SQL NULL, as pgx sends it
			}
			s := make([]pgtype.UUID, len(a))
			for j, u := range a {
				s[j] = pgtype.UUID{Bytes: u, Valid: true}
			}
			v = s
		default:
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = v
	}
	if out == nil {
		return args
	}
	return out
}

// uuidDests returns dest with each *uuid.UUID and *uuid.NullUUID as a
// pgtype.UUIDScanner writing into it, and each *time.Time and
// *pgtype.Timestamptz as a pgtype.TimestamptzScanner writing the time in
// UTC (a copy when one is converted).
func uuidDests(dest []any) []any {
	var out []any
	for i, d := range dest {
		var v any
		switch d := d.(type) {
		case *uuid.UUID:
			v = uuidScanner{d}
		case *uuid.NullUUID:
			v = nullUUIDScanner{d}
		case *time.Time:
			v = utcScanner{d}
		case *pgtype.Timestamptz:
			v = nullUTCScanner{d}
		default:
			continue
		}
		if out == nil {
			out = append([]any(nil), dest...)
		}
		out[i] = v
	}
	if out == nil {
		return dest
	}
	return out
}

// uuidScanner scans into a uuid.UUID; NULL leaves it zero, as uuid.Scan
// does.
type uuidScanner struct{ p *uuid.UUID }

func (s uuidScanner) ScanUUID(v pgtype.UUID) error {
	*s.p = uuid.UUID{}
	if v.Valid {
		*s.p = v.Bytes
	}
	return nil
}

type nullUUIDScanner struct{ p *uuid.NullUUID }

func (s nullUUIDScanner) ScanUUID(v pgtype.UUID) error {
	*s.p = uuid.NullUUID{UUID: v.Bytes, Valid: v.Valid}
	return nil
}

// utcScanner scans a timestamptz into a time.Time in UTC. NULL and the
// infinities are errors, as pgx makes them for a time.Time.
type utcScanner struct{ p *time.Time }

func (s utcScanner) ScanTimestamptz(v pgtype.Timestamptz) error {
	switch {
	case !v.Valid:
		return errors.New("cannot scan NULL into *time.Time")
	case v.InfinityModifier != pgtype.Finite:
		return fmt.Errorf("cannot scan %v into *time.Time", v.InfinityModifier)
	}
	*s.p = v.Time.UTC()
	return nil
}

// nullUTCScanner scans a timestamptz into a pgtype.Timestamptz, its time in
// UTC.
type nullUTCScanner struct{ p *pgtype.Timestamptz }

func (s nullUTCScanner) ScanTimestamptz(v pgtype.Timestamptz) error {
	v.Time = v.Time.UTC()
	*s.p = v
	return nil
}

type uuidRow struct{ pgx.Row }

func (r uuidRow) Scan(dest ...any) error { return r.Row.Scan(uuidDests(dest)...) }

type uuidRows struct{ pgx.Rows }

func (r uuidRows) Scan(dest ...any) error { return r.Rows.Scan(uuidDests(dest)...) }

type uuidBatchResults struct{ pgx.BatchResults }

func (b uuidBatchResults) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if err != nil {
		return rows, err
	}
	return uuidRows{rows}, nil
}

func (b uuidBatchResults) QueryRow() pgx.Row { return uuidRow{b.BatchResults.QueryRow()} }
