package postgres

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// serializationFailure is a pgx.Tx whose every statement fails with a
// serialization failure, a transient error outside a transaction; only
// SendBatch (what the store sends a statement in, after the tenant's
// setting) is implemented.
type serializationFailure struct {
	pgx.Tx
	statements atomic.Int64
}

func (f *serializationFailure) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults {
	f.statements.Add(1)
	return failedBatch{&pgconn.PgError{Code: "40001", Message: "could not serialize access"}}
}

// pool is a DB that is not a transaction; it is never called.
type pool struct{ DB }

// Inside the caller's transaction a failed statement aborts it: nothing is
// retried there, whether the Engine came from WithTx or from a store made over tx.
func TestNoRetryInsideTheCallersTransaction(t *testing.T) {
	ctx := context.Background()
	cfg := engine.Config{Retry: engine.RetryPolicy{Attempts: 5, Backoff: 1, MaxBackoff: 1}}
	single := Options{SingleStatement: true}
	for name, open := range map[string]func(pgx.Tx) *engine.Engine{
		"NewStore(tx)": func(tx pgx.Tx) *engine.Engine { return engine.New(NewStore(tx, single), cfg) },
		"WithTx": func(tx pgx.Tx) *engine.Engine {
			e, err := engine.New(NewStore(pool{}, single), cfg).WithTx(tx)
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
	} {
		tx := &serializationFailure{}
		_, err := open(tx).Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
		if !errors.Is(err, engine.ErrTransient) {
			t.Errorf("%s: %v, want ErrTransient", name, err)
		}
		if n := tx.statements.Load(); n != 1 {
			t.Errorf("%s: %d statements sent in the transaction, want 1 (no retry)", name, n)
		}
	}
}
