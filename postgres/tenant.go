package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// setTenant sets the tenant of the transaction it runs in (transaction-
// local: it ends with the transaction, so it never outlives it on a pooled
// server connection). Every statement and SQL function reads and writes
// through the views of the session's tenant (tenant_checkpoints, ...),
// which show that transaction the tenant's rows alone
// whatever the role, a superuser's too; row-level security holds the
// other roles to the same (see pgcheckpoint.current_tenant()).
const setTenant = "SELECT pg_catalog.set_config('pgcheckpoint.tenant', $1, true)"

// ForTenant implements engine.TenantStore: a copy of s, over the same
// connection and with the same options, whose every statement runs in
// tenant. A name engine.CheckTenant refuses makes a store whose every call
// fails with engine.ErrInvalidInput, sending nothing (Engine.ForTenant
// refuses it before).
func (s *Store) ForTenant(tenant string) engine.Store {
	return s.over(s.conn, tenant)
}

// Tenant implements engine.TenantStore: the tenant s reads and writes,
// engine.DefaultTenant unless s was made by ForTenant.
func (s *Store) Tenant() string { return s.tenant }

// tenantDB is the DB every statement of a Store goes through: it sets the
// store's tenant, transaction-locally, in the transaction of each
// statement. A statement outside a transaction is sent in one pgx Batch
// after the setting: a batch ends in one Sync, so both run in one implicit
// transaction, in one round trip (with any query exec mode, and through
// PgBouncer in transaction mode, which keeps a transaction on one server
// connection). A batch gets the setting ahead of its own statements. A
// transaction (Begin) sets it first thing; in the caller's transaction
// every statement sets it again, so a savepoint the caller rolled back
// cannot take it away, and the caller's transaction keeps it after the
// store's statements (it is transaction-local).
type tenantDB struct {
	DB
	tenant string
	err    error         // the tenant's name is refused: every call fails with it
	pool   *pgxpool.Pool // Options.SessionTenant: the pool, whose sessions keep their tenant
}

// setSessionTenant sets the tenant of a session (Options.SessionTenant).
const setSessionTenant = "SELECT pg_catalog.set_config('pgcheckpoint.tenant', $1, false)"

// sessionKey is where a connection's CustomData keeps the tenant the
// store set its session to (Options.SessionTenant).
const sessionKey = "pgcheckpoint.sessionTenant"

// directKey is where a connection's CustomData records that it talks to
// the server process it connected to (Options.SessionTenant).
const directKey = "pgcheckpoint.direct"

// ErrPooledSession is what a call of a store made with
// Options.SessionTenant returns, having sent nothing else, when the
// connection it took from its pool reaches Postgres through a pooler: the
// server process that answers (pg_backend_pid()) is not the one the
// connection was told about when it connected (its BackendKeyData, which
// a pooler makes up). A session's tenant set there could be read by another
// client's transaction. Use the default (the tenant set in each
// transaction), which works behind any pooler.
var ErrPooledSession = errors.New("pgcheckpoint: postgres.Options.SessionTenant over a connection through a pooler")

// sessionBatch acquires a connection of t.pool and returns it with a batch
// that starts with the setting of the session's tenant unless the store
// set it already on that connection (then the batch is empty). done
// records the setting when the batch succeeded, and forgets what the
// connection had otherwise (a failed implicit transaction takes its
// setting back with it); it releases the connection. A connection is first
// checked to reach its own server process (ErrPooledSession), once.
func (t tenantDB) sessionBatch(ctx context.Context) (c *pgxpool.Conn, b *pgx.Batch, done func(error), err error) {
	c, err = t.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	data := c.Conn().PgConn().CustomData()
	if data[directKey] == nil {
		var pid int64
		if err := c.QueryRow(ctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&pid); err != nil {
			c.Release()
			return nil, nil, nil, err
		}
		if pid != int64(c.Conn().PgConn().PID()) {
			c.Release()
			return nil, nil, nil, ErrPooledSession
		}
		data[directKey] = true
	}
	b = &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 2)}
	if data[sessionKey] != t.tenant {
		b.Queue(setSessionTenant, t.tenant)
	}
	setting := len(b.QueuedQueries) > 0
	done = func(err error) {
		switch {
		case err != nil:
			delete(data, sessionKey)
		case setting:
			data[sessionKey] = t.tenant
		}
		c.Release()
	}
	return c, b, done, nil
}

func (t tenantDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.err != nil {
		return pgconn.CommandTag{}, t.err
	}
	if t.pool != nil {
		c, b, done, err := t.sessionBatch(ctx)
		if err != nil {
			return pgconn.CommandTag{}, err
		}
		var tag pgconn.CommandTag
		if len(b.QueuedQueries) == 0 {
			tag, err = c.Exec(ctx, sql, args...)
		} else {
			b.Queue(sql, args...)
			br := c.SendBatch(ctx, b)
			_, err = br.Exec()
			var qerr error
			tag, qerr = br.Exec()
			err = firstError(err, qerr, br.Close())
		}
		done(err)
		return tag, err
	}
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 2)}
	b.Queue(setTenant, t.tenant)
	b.Queue(sql, args...)
	br := t.DB.SendBatch(ctx, b)
	_, err := br.Exec()
	tag, qerr := br.Exec()
	return tag, firstError(err, qerr, br.Close())
}

func (t tenantDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.err != nil {
		return nil, t.err
	}
	if t.pool != nil {
		c, b, done, err := t.sessionBatch(ctx)
		if err != nil {
			return nil, err
		}
		b.Queue(sql, args...)
		br := c.SendBatch(ctx, b)
		if len(b.QueuedQueries) > 1 {
			if _, err := br.Exec(); err != nil {
				done(firstError(err, br.Close()))
				return nil, err
			}
		}
		rows, err := br.Query()
		if err != nil {
			err = firstError(err, br.Close())
			done(err)
			return nil, err
		}
		return &batchRows{Rows: rows, br: br, done: done}, nil
	}
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 2)}
	b.Queue(setTenant, t.tenant)
	b.Queue(sql, args...)
	br := t.DB.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, firstError(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t tenantDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return batchRow{rows: rows, err: err}
}

func (t tenantDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.err != nil {
		return failedBatch{t.err}
	}
	if t.pool != nil {
		c, set, done, err := t.sessionBatch(ctx)
		if err != nil {
			return failedBatch{err}
		}
		setting := len(set.QueuedQueries) > 0
		set.QueuedQueries = append(set.QueuedQueries, b.QueuedQueries...)
		br := &onceBatchResults{BatchResults: c.SendBatch(ctx, set), done: done}
		if setting {
			_, _ = br.Exec()
		}
		return br
	}
	set := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	set.Queue(setTenant, t.tenant)
	set.QueuedQueries = append(set.QueuedQueries, b.QueuedQueries...)
	br := &onceBatchResults{BatchResults: t.DB.SendBatch(ctx, set)}
	// A setting that fails leaves its error in br, which the batch's own
	// results then report.
	_, _ = br.Exec()
	return br
}

// CopyFrom copies in a transaction (a savepoint in the caller's) that
// sets the tenant first. (COPY FROM refuses a table under row-level
// security: the store's import inserts instead.)
func (t tenantDB) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error) {
	if t.err != nil {
		return 0, t.err
	}
	tx, err := t.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	n, err := tx.CopyFrom(ctx, table, columns, rows)
	if err != nil {
		return n, err
	}
	return n, tx.Commit(ctx)
}

// Begin begins a transaction (a savepoint in a transaction) in the tenant.
func (t tenantDB) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.err != nil {
		return nil, t.err
	}
	tx, err := t.DB.Begin(ctx)
	return t.inTenant(ctx, tx, err)
}

// BeginTx is Begin with options, for a DB that has it (a pool or a
// connection).
func (t tenantDB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	if t.err != nil {
		return nil, t.err
	}
	b, ok := t.DB.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	})
	if !ok {
		return t.Begin(ctx)
	}
	tx, err := b.BeginTx(ctx, opts)
	return t.inTenant(ctx, tx, err)
}

func (t tenantDB) inTenant(ctx context.Context, tx pgx.Tx, err error) (pgx.Tx, error) {
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, setTenant, t.tenant); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	return tx, nil
}

// batchRows are the rows of a statement sent after the setting: when they
// end, the batch is closed, and its end's error (where the implicit
// transaction commits: a serialization failure, a deferred check) is
// theirs.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
	done   func(error) // Options.SessionTenant: records the setting, releases the connection
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
	if r.done != nil {
		r.done(firstError(r.Rows.Err(), r.err))
	}
}

// onceBatchResults are the results of every batch the store sends: Close
// closes them once and gives every later call that first error. Over a
// pool, pgx's Close hands the connection back, and pgx's Close called
// again still touches that connection, by then another caller's: after a
// failed batch it drops the batch's statements from the connection's
// statement cache, a map the other caller is using (a data race, and a
// fatal concurrent map write at worst). sqlc's batch QueryRow and Exec
// close the results themselves, and the store closes them again to read
// the error of the batch's end (oneRow, refusedRow). done, when set
// (Options.SessionTenant), records the setting and releases the
// connection, once.
type onceBatchResults struct {
	pgx.BatchResults
	done   func(error)
	closed bool
	err    error
}

func (b *onceBatchResults) Close() error {
	if !b.closed {
		b.closed = true
		b.err = b.BatchResults.Close()
		if b.done != nil {
			b.done(b.err)
		}
	}
	return b.err
}

func (r *batchRows) Err() error {
	return firstError(r.Rows.Err(), r.err)
}

// batchRow is QueryRow's row over batchRows, as pgx's own: no row is
// pgx.ErrNoRows.
type batchRow struct {
	rows pgx.Rows
	err  error
}

func (r batchRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// failedBatch is the results of a batch that was not sent.
type failedBatch struct{ err error }

func (b failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b failedBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b failedBatch) QueryRow() pgx.Row                { return batchRow{err: b.err} }
func (b failedBatch) Close() error                     { return b.err }
func (b failedBatch) Tx() pgx.Tx                       { return nil }

// firstError returns the first error that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
