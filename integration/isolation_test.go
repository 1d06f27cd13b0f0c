package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// The promises of the write paths hold at every isolation level a database
// or a caller may choose. Under REPEATABLE READ and SERIALIZABLE a
// transaction's snapshot is taken by its first statement, before the
// thread's lock is granted: what the lock's holder wrote is then invisible
// to the write that waited for it. Such a write must not go on as if
// nothing happened; it fails with ErrTransient (SQLSTATE 40001), which
// Config.Retry retries, and the retry sees everything.

// isolation is how a test's writes get their isolation level: the
// database's default_transaction_isolation, or the caller's transaction
// (Engine.WithTx on a pgx.RepeatableRead transaction, retried whole by the
// test on ErrTransient as a caller would).
type isolation struct {
	name     string
	database string // default_transaction_isolation; "" keeps read committed
	withTx   bool
}

var isolations = []isolation{
	{name: "database-repeatable-read", database: "repeatable read"},
	{name: "database-serializable", database: "serializable"},
	{name: "withtx-repeatable-read", withTx: true},
}

// testedIsolations is isolations, less serializable under -short: a long
// run (see enginetest.SkipLong); REPEATABLE READ meets the same stale
// snapshots, serializable adds failures the retries ride out.
func testedIsolations() []isolation {
	if !testing.Short() {
		return isolations
	}
	var out []isolation
	for _, iso := range isolations {
		if iso.database != "serializable" {
			out = append(out, iso)
		}
	}
	return out
}

// retryHard is a retry policy that rides out the serialization failures
// of many writers on one thread under REPEATABLE READ.
var retryHard = engine.RetryPolicy{Attempts: 60, Backoff: 2 * time.Millisecond, MaxBackoff: 40 * time.Millisecond}

// isoEnv is one test's database under one isolation.
type isoEnv struct {
	iso  isolation
	db   *pgtest.DB
	pool *pgxpool.Pool // connections at iso.database's level
	ctx  context.Context
}

func newIsoEnv(t *testing.T, iso isolation) *isoEnv {
	t.Helper()
	d := pgtest.NewDB(t)
	ctx := context.Background()
	pool := d.Pool
	if iso.database != "" {
		if _, err := d.Pool.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET default_transaction_isolation = '%s'`,
			pgx.Identifier{d.Name}.Sanitize(), iso.database)); err != nil {
			t.Fatal(err)
		}
		cfg, err := pgxpool.ParseConfig(d.URL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 24
		if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		var level string
		if err := pool.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&level); err != nil || level != iso.database {
			t.Fatalf("new sessions run at %q (%v), want %q", level, err, iso.database)
		}
	}
	return &isoEnv{iso: iso, db: d, pool: pool, ctx: ctx}
}

// engine returns an engine over the test's pool with cfg.
func (e *isoEnv) engine(cfg engine.Config) *engine.Engine {
	return engine.New(postgres.NewStore(e.pool, postgres.Options{}), cfg)
}

// singleEngine returns an engine over the test's pool with cfg whose
// writes are single calls of checkpoint_put (postgres.Options.SingleStatement).
func (e *isoEnv) singleEngine(cfg engine.Config) *engine.Engine {
	return engine.New(postgres.NewStore(e.pool, postgres.Options{SingleStatement: true}), cfg)
}

// querier runs SQL: the test's pool, or the caller's transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// writeFunc is one write, through eng or through SQL on q.
type writeFunc func(eng *engine.Engine, q querier) error

// write runs one write through eng: directly, or with iso.withTx inside a
// repeatable read transaction that has read something first (so its
// snapshot is older than the write), committed after. A write that fails
// with ErrTransient is run again (the whole transaction, rolled back), up
// to the policy's attempts (none: once), as a caller would; the engine's
// own Config.Retry retries its calls before that.
func (e *isoEnv) write(eng *engine.Engine, retry engine.RetryPolicy, fn writeFunc) error {
	var err error
	for attempt := 1; ; attempt++ {
		if e.iso.withTx {
			err = e.writeInTx(eng, fn)
		} else {
			err = fn(eng, e.pool)
		}
		if !errors.Is(err, engine.ErrTransient) || attempt >= max(retry.Attempts, 1) {
			return err
		}
		time.Sleep(time.Duration(attempt%20) * time.Millisecond)
	}
}

func (e *isoEnv) writeInTx(eng *engine.Engine, fn writeFunc) error {
	tx, err := e.pool.BeginTx(e.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(e.ctx))
	if _, err := tx.Exec(e.ctx, `SELECT count(*) FROM pgcheckpoint.threads`); err != nil {
		return err
	}
	inTx, err := eng.WithTx(tx)
	if err != nil {
		return err
	}
	if err := fn(inTx, tx); err != nil {
		return err
	}
	if err := tx.Commit(e.ctx); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40001" {
			return fmt.Errorf("%w: %w", engine.ErrTransient, err)
		}
		return err
	}
	return nil
}

// hold opens a READ COMMITTED transaction on the test's database, the one
// that holds what a case's other call waits for, and returns eng bound to
// it; it is rolled back at the test's end unless committed.
func (e *isoEnv) hold(t *testing.T, eng *engine.Engine) (*engine.Engine, pgx.Tx) {
	t.Helper()
	tx, err := e.db.Pool.BeginTx(e.ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.WithoutCancel(e.ctx)) })
	inTx, err := eng.WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	return inTx, tx
}

// waitOn runs call on eng (retried as write does) while holderTx stays
// open, waits until it waits for a lock, then commits holderTx and
// returns what call ended with.
func (e *isoEnv) waitOn(t *testing.T, holderTx pgx.Tx, eng *engine.Engine, call func(eng *engine.Engine) error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- e.write(eng, retryHard, func(eng *engine.Engine, _ querier) error { return call(eng) })
	}()
	waitForIsoLockWaiter(t, e, done)
	if err := holderTx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	return <-done
}

// eachLevel runs fn, in parallel, at read committed and at each of
// testedIsolations.
func eachLevel(t *testing.T, fn func(t *testing.T, iso isolation)) {
	for _, iso := range append([]isolation{{name: "read-committed"}}, testedIsolations()...) {
		t.Run(iso.name, func(t *testing.T) {
			t.Parallel()
			fn(t, iso)
		})
	}
}

// countID is how many checkpoints hold id.
func (e *isoEnv) countID(t *testing.T, id uuid.UUID) int {
	t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(e.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// One client-made id written to two threads at once, round after round,
// through every write path (pipelined whole and delta, checkpoint_put,
// checkpoint_append), on new and on written threads: one checkpoint holds
// it, and the other writer gets ErrIDConflict (after Config.Retry's retry
// of a serialization failure).
func TestIsolationOneIDOneCheckpoint(t *testing.T) {
	t.Parallel()
	for _, iso := range testedIsolations() {
		t.Run(iso.name, func(t *testing.T) {
			t.Parallel()
			e := newIsoEnv(t, iso)
			engines := []*engine.Engine{
				e.engine(engine.Config{Retry: retryHard}),                          // CheckpointPutWhole
				e.engine(engine.Config{DeltaMinBytes: -1, Retry: retryHard}),       // CheckpointPutFast
				e.singleEngine(engine.Config{Retry: retryHard}),                    // checkpoint_put
				e.singleEngine(engine.Config{DeltaMinBytes: -1, Retry: retryHard}), // checkpoint_put, deltas
			}
			const rounds = 40
			for r := range rounds {
				id := engine.NewCheckpointID()
				seeded := r%2 == 0
				threads := [2]string{fmt.Sprintf("r%02d-a", r), fmt.Sprintf("r%02d-b", r)}
				if seeded {
					for _, th := range threads {
						if _, err := engines[0].Snapshot(e.ctx, engine.SnapshotInput{ThreadID: th, Messages: json.RawMessage(`[{"role":"user","content":"seed"}]`)}); err != nil {
							t.Fatal(err)
						}
					}
				}
				var (
					wg      sync.WaitGroup
					start   = make(chan struct{})
					errs    [2]error
					created [2]bool
				)
				for w := range threads {
					eng := engines[(r+w)%len(engines)]
					byAppend := seeded && (r/2+w)%3 == 0
					wg.Go(func() {
						<-start
						errs[w] = e.write(eng, retryHard, func(eng *engine.Engine, _ querier) error {
							var res engine.SnapshotResult
							var err error
							if byAppend {
								res, err = eng.Append(e.ctx, engine.AppendInput{ThreadID: threads[w], ID: id,
									Messages: json.RawMessage(fmt.Sprintf(`[{"role":"assistant","content":"writer %d"}]`, w))})
							} else {
								res, err = eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: threads[w], ID: id,
									Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"seed"},{"role":"assistant","content":"writer %d"}]`, w))})
							}
							created[w] = res.Created
							return err
						})
					})
				}
				close(start)
				wg.Wait()
				won := 0
				for w := range threads {
					switch {
					case errs[w] == nil && created[w]:
						won++
					case !errors.Is(errs[w], engine.ErrIDConflict):
						t.Errorf("round %d: writer %d: %v, want success or ErrIDConflict", r, w, errs[w])
					}
				}
				if n := e.countID(t, id); n != 1 || won != 1 {
					t.Fatalf("round %d: %d checkpoints hold id %s and %d writers created it, want 1 and 1 (errors %v)", r, n, id, won, errs)
				}
			}
		})
	}
}

// Eight writers on one thread, every write path among them, with
// Config.Retry set: no error but ErrTransient (when the retries run out),
// and the thread is one chain of distinct steps holding every write that
// succeeded.
func TestIsolationManyWritersOneChain(t *testing.T) {
	t.Parallel()
	for _, iso := range testedIsolations() {
		t.Run(iso.name, func(t *testing.T) {
			t.Parallel()
			e := newIsoEnv(t, iso)
			engines := []*engine.Engine{
				e.engine(engine.Config{Retry: retryHard}),
				e.engine(engine.Config{DeltaMinBytes: -1, Retry: retryHard}),
				e.singleEngine(engine.Config{Retry: retryHard}),
				e.engine(engine.Config{DeltaMinBytes: -1, DeltaRun: 3, Retry: retryHard}),
			}
			const thread, writers, each = "shared", 8, 20
			if _, err := engines[0].Snapshot(e.ctx, engine.SnapshotInput{ThreadID: thread,
				Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`)}); err != nil {
				t.Fatal(err)
			}
			var (
				wg        sync.WaitGroup
				mu        sync.Mutex
				ok        = 1
				transient int
			)
			for w := range writers {
				eng := engines[w%len(engines)]
				wg.Go(func() {
					for i := range each {
						err := e.write(eng, retryHard, func(eng *engine.Engine, _ querier) error {
							msg := json.RawMessage(fmt.Sprintf(`[{"role":"assistant","content":"w%d-%d"}]`, w, i))
							if (w+i)%2 == 0 {
								_, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: thread, Messages: msg})
								return err
							}
							_, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: thread, Messages: msg})
							return err
						})
						mu.Lock()
						switch {
						case err == nil:
							ok++
						case errors.Is(err, engine.ErrTransient):
							transient++
						default:
							t.Errorf("writer %d, write %d: %v", w, i, err)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if transient > 0 {
				t.Logf("%d of %d writes failed with ErrTransient after the retries", transient, writers*each)
			}
			if ok < writers*each/2 {
				t.Errorf("only %d of %d writes succeeded", ok-1, writers*each)
			}
			checkLinearThread(t, e.db.Pool, thread, ok)
			checkThreadReads(t, e, thread)
		})
	}
}

// checkThreadReads reads every checkpoint of a thread whole: none is
// damaged (a delta whose base is gone).
func checkThreadReads(t *testing.T, e *isoEnv, thread string) {
	t.Helper()
	rows, err := e.db.Pool.Query(e.ctx, `SELECT checkpoint_id FROM pgcheckpoint.checkpoints WHERE thread_id = $1`, thread)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(postgres.NewStore(e.db.Pool, postgres.Options{}), engine.Config{})
	for _, id := range ids {
		if _, err := eng.Get(e.ctx, id); err != nil {
			t.Errorf("checkpoint %s of %q: %v", id, thread, err)
		}
	}
}

// staleCase is a change made by a transaction holding a thread's lock and
// a write that waited for it, its snapshot taken before the change
// committed.
type staleCase struct {
	name string
	// prepare writes what the case needs, returning values for the rest.
	prepare func(t *testing.T, e *isoEnv, eng *engine.Engine) staleState
	// hold makes the change inside the holder's transaction.
	hold func(t *testing.T, e *isoEnv, s *staleState, inTx *engine.Engine)
	// wait is the write that waits; check checks its outcome when it
	// succeeded.
	wait  func(e *isoEnv, s *staleState, eng *engine.Engine, q querier) error
	check func(t *testing.T, e *isoEnv, s *staleState)
}

type staleState struct {
	thread, other string
	id, target    uuid.UUID
	held          engine.SnapshotResult
	waited        engine.SnapshotResult
	file          []byte
	deleted       int64
}

// seedThread writes n checkpoints on thread, a conversation that grows by
// one message a step (so that deltas can be made of it).
func seedThread(t *testing.T, e *isoEnv, eng *engine.Engine, thread string, n int) []engine.SnapshotResult {
	t.Helper()
	var out []engine.SnapshotResult
	for i := range n {
		res, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: thread,
			Messages: growingMessages(i + 1), State: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1))})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res)
	}
	return out
}

// growingMessages is the messages of step n of seedThread.
func growingMessages(n int) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":"step %d"}`, i+1)
	}
	b.WriteByte(']')
	return b.Bytes()
}

var staleCases = []staleCase{
	{
		name: "snapshot-after-a-write",
		prepare: func(t *testing.T, e *isoEnv, eng *engine.Engine) staleState {
			seedThread(t, e, eng, "t", 2)
			return staleState{thread: "t"}
		},
		hold: func(t *testing.T, e *isoEnv, s *staleState, inTx *engine.Engine) {
			var err error
			if s.held, err = inTx.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: s.thread}); err != nil {
				t.Fatal(err)
			}
		},
		wait: func(e *isoEnv, s *staleState, eng *engine.Engine, _ querier) (err error) {
			s.waited, err = eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: s.thread})
			return err
		},
		check: func(t *testing.T, e *isoEnv, s *staleState) {
			if s.waited.ParentID != s.held.ID || s.waited.Step != s.held.Step+1 {
				t.Errorf("the waiting write has parent %s step %d, want %s step %d", s.waited.ParentID, s.waited.Step, s.held.ID, s.held.Step+1)
			}
			checkLinearThread(t, e.db.Pool, s.thread, 4)
		},
	},
	{
		name: "append-after-a-write",
		prepare: func(t *testing.T, e *isoEnv, eng *engine.Engine) staleState {
			seedThread(t, e, eng, "t", 2)
			return staleState{thread: "t"}
		},
		hold: func(t *testing.T, e *isoEnv, s *staleState, inTx *engine.Engine) {
			var err error
			if s.held, err = inTx.Append(e.ctx, engine.AppendInput{ThreadID: s.thread, SetState: json.RawMessage(`{"held":true}`)}); err != nil {
				t.Fatal(err)
			}
		},
		wait: func(e *isoEnv, s *staleState, eng *engine.Engine, _ querier) (err error) {
			s.waited, err = eng.Append(e.ctx, engine.AppendInput{ThreadID: s.thread, SetState: json.RawMessage(`{"waited":true}`)})
			return err
		},
		check: func(t *testing.T, e *isoEnv, s *staleState) {
			if s.waited.ParentID != s.held.ID {
				t.Errorf("the waiting append has parent %s, want %s", s.waited.ParentID, s.held.ID)
			}
			checkLinearThread(t, e.db.Pool, s.thread, 4)
			cp, err := engine.New(postgres.NewStore(e.db.Pool, postgres.Options{}), engine.Config{}).Get(e.ctx, s.waited.ID)
			if err != nil || !bytes.Contains(cp.State, []byte(`"held"`)) {
				t.Errorf("the waiting append's state lacks the held one's key: %s (%v)", cp.State, err)
			}
		},
	},
	{
		name: "snapshot-after-a-rewind",
		prepare: func(t *testing.T, e *isoEnv, eng *engine.Engine) staleState {
			seeded := seedThread(t, e, eng, "t", 3)
			return staleState{thread: "t", target: seeded[0].ID}
		},
		hold: func(t *testing.T, e *isoEnv, s *staleState, inTx *engine.Engine) {
			if _, err := inTx.Rewind(e.ctx, s.target); err != nil {
				t.Fatal(err)
			}
		},
		wait: func(e *isoEnv, s *staleState, eng *engine.Engine, _ querier) (err error) {
			s.waited, err = eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: s.thread})
			return err
		},
		check: func(t *testing.T, e *isoEnv, s *staleState) {
			if s.waited.ParentID != s.target || s.waited.Step != 2 {
				t.Errorf("the write after the rewind has parent %s step %d, want the rewound-to %s, step 2", s.waited.ParentID, s.waited.Step, s.target)
			}
		},
	},
	afterADelta("delete-after-a-delta", func(e *isoEnv, s *staleState, eng *engine.Engine) (engine.DeleteResult, error) {
		return eng.DeleteCheckpoints(e.ctx, engine.BeforeStep(s.thread, 3))
	}),
	// A prune (thread_gc_many) deletes the first two: the anchor too.
	afterADelta("prune-after-a-delta", func(e *isoEnv, s *staleState, eng *engine.Engine) (engine.DeleteResult, error) {
		return eng.PruneThreads(e.ctx, engine.KeepLastN(1), s.thread)
	}),
	// A sweep (thread_gc_batch) likewise, every thread in its batch.
	afterADelta("sweep-after-a-delta", func(e *isoEnv, _ *staleState, eng *engine.Engine) (engine.DeleteResult, error) {
		r, err := eng.Sweep(e.ctx, engine.KeepLastN(1), engine.SweepOptions{})
		return engine.DeleteResult{Deleted: r.Deleted}, err
	}),
	{
		name: "same-id-on-another-thread",
		prepare: func(t *testing.T, e *isoEnv, eng *engine.Engine) staleState {
			seedThread(t, e, eng, "t", 1)
			seedThread(t, e, eng, "u", 1)
			return staleState{thread: "t", other: "u", id: engine.NewCheckpointID()}
		},
		hold: func(t *testing.T, e *isoEnv, s *staleState, inTx *engine.Engine) {
			var err error
			if s.held, err = inTx.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: s.thread, ID: s.id}); err != nil {
				t.Fatal(err)
			}
		},
		wait: func(e *isoEnv, s *staleState, eng *engine.Engine, _ querier) (err error) {
			s.waited, err = eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: s.other, ID: s.id})
			return err
		},
	},
	{
		name: "same-id-by-branch",
		prepare: func(t *testing.T, e *isoEnv, eng *engine.Engine) staleState {
			seeded := seedThread(t, e, eng, "t", 1)
			return staleState{thread: "t", target: seeded[0].ID, id: engine.NewCheckpointID()}
		},
		hold: func(t *testing.T, e *isoEnv, s *staleState, inTx *engine.Engine) {
			var err error
			if s.held, err = inTx.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: s.thread, ID: s.id}); err != nil {
				t.Fatal(err)
			}
		},
		wait: func(e *isoEnv, s *staleState, _ *engine.Engine, q querier) error {
			return sqlWrite(e, q, `SELECT * FROM pgcheckpoint.thread_branch($1, 'side', 'side', $2)`, s.target, s.id)
		},
	},
	{
		name: "same-id-by-merge",
		prepare: func(t *testing.T, e *isoEnv, eng *engine.Engine) staleState {
			seeded := seedThread(t, e, eng, "t", 1)
			if _, err := e.db.Pool.Exec(e.ctx, `SELECT * FROM pgcheckpoint.thread_branch($1, 'side', 'side', $2)`, seeded[0].ID, engine.NewCheckpointID()); err != nil {
				t.Fatal(err)
			}
			seedThread(t, e, eng, "u", 1)
			return staleState{thread: "t", other: "u", id: engine.NewCheckpointID()}
		},
		hold: func(t *testing.T, e *isoEnv, s *staleState, inTx *engine.Engine) {
			var err error
			if s.held, err = inTx.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: s.thread, ID: s.id}); err != nil {
				t.Fatal(err)
			}
		},
		wait: func(e *isoEnv, s *staleState, _ *engine.Engine, q querier) error {
			return sqlWrite(e, q, `SELECT * FROM pgcheckpoint.thread_merge('side', $1, $2)`, s.other, s.id)
		},
	},
	{
		name: "same-id-by-import",
		prepare: func(t *testing.T, e *isoEnv, eng *engine.Engine) staleState {
			seedThread(t, e, eng, "t", 1)
			src := seedThread(t, e, eng, "exported", 1)
			var file bytes.Buffer
			if _, err := eng.Export(e.ctx, "exported", &file); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.DeleteThreads(e.ctx, "exported"); err != nil {
				t.Fatal(err)
			}
			return staleState{thread: "t", id: src[0].ID, file: file.Bytes()}
		},
		hold: func(t *testing.T, e *isoEnv, s *staleState, inTx *engine.Engine) {
			var err error
			if s.held, err = inTx.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: s.thread, ID: s.id}); err != nil {
				t.Fatal(err)
			}
		},
		wait: func(e *isoEnv, s *staleState, eng *engine.Engine, _ querier) error {
			_, err := eng.Import(e.ctx, bytes.NewReader(s.file), engine.ImportOptions{})
			return err
		},
	},
}

// afterADelta is the case of a delete (del) that waits while the third
// checkpoint of prepareThirdIsADelta's thread, a delta on the first, is
// written; del deletes the first two, the anchor too, so it must rewrite
// the third whole first, so it must see it.
func afterADelta(name string, del func(e *isoEnv, s *staleState, eng *engine.Engine) (engine.DeleteResult, error)) staleCase {
	return staleCase{
		name:    name,
		prepare: prepareThirdIsADelta,
		hold:    holdThirdAsADelta,
		wait: func(e *isoEnv, s *staleState, eng *engine.Engine, _ querier) error {
			res, err := del(e, s, eng)
			s.deleted = res.Deleted
			return err
		},
		check: checkStaleThreadReads,
	}
}

// prepareThirdIsADelta seeds two checkpoints on thread "t" of a
// DeltaRun 2 engine, whose third will be a delta on the first (the
// anchor).
func prepareThirdIsADelta(t *testing.T, e *isoEnv, eng *engine.Engine) staleState {
	t.Helper()
	// The layout, seen on a thread written the same way.
	probe := seedThread(t, e, eng, "probe", 3)
	var format string
	var base uuid.UUID
	if err := e.db.Pool.QueryRow(e.ctx, `SELECT format, base_checkpoint_id FROM pgcheckpoint.checkpoints
		WHERE checkpoint_id = $1`, probe[2].ID).Scan(&format, &base); err != nil || format != "delta" || base != probe[0].ID {
		t.Fatalf("the third checkpoint is %s on %s (%v), want a delta on the first", format, base, err)
	}
	seedThread(t, e, eng, "t", 2)
	return staleState{thread: "t"}
}

// holdThirdAsADelta writes the third checkpoint of prepareThirdIsADelta's
// thread.
func holdThirdAsADelta(t *testing.T, e *isoEnv, s *staleState, inTx *engine.Engine) {
	t.Helper()
	var err error
	if s.held, err = inTx.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: s.thread,
		Messages: growingMessages(3), State: json.RawMessage(`{"n":3}`)}); err != nil {
		t.Fatal(err)
	}
}

// checkStaleThreadReads checks that every checkpoint of the case's thread
// reads whole, the held write's among them.
func checkStaleThreadReads(t *testing.T, e *isoEnv, s *staleState) {
	t.Helper()
	if e.countID(t, s.held.ID) != 1 {
		t.Errorf("the held write %s is gone", s.held.ID)
	}
	checkThreadReads(t, e, s.thread)
}

// sqlWrite runs a writing SQL function through the engine's connection
// (the caller's transaction with withTx), mapping a serialization failure
// to ErrTransient and the functions' own codes as the engine does.
func sqlWrite(e *isoEnv, q querier, sql string, args ...any) error {
	_, err := q.Exec(e.ctx, sql, args...)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001":
			return fmt.Errorf("%w: %w", engine.ErrTransient, err)
		case "PC002":
			return fmt.Errorf("%w: %w", engine.ErrIDConflict, err)
		case "23505":
			if pgErr.ConstraintName == "checkpoints_checkpoint_id_tenant_id_key" {
				return fmt.Errorf("%w: %w", engine.ErrIDConflict, err)
			}
		}
	}
	return err
}

// A write whose snapshot was taken before the thread's lock holder
// committed (the holder wrote, appended, rewound; the same id by every
// path that takes one) never acts on what it saw: it fails with
// ErrTransient, or, retried, sees the holder's change. Each case is made
// to happen: the holder's transaction stays open until the waiting write
// is blocked.
func TestIsolationStaleSnapshotAfterTheLock(t *testing.T) {
	t.Parallel()
	for _, iso := range testedIsolations() {
		for _, c := range staleCases {
			for _, retry := range []bool{false, true} {
				name := iso.name + "/" + c.name + map[bool]string{false: "/no-retry", true: "/retry"}[retry]
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					e := newIsoEnv(t, iso)
					policy := engine.RetryPolicy{}
					if retry {
						policy = retryHard
					}
					cfg := engine.Config{DeltaMinBytes: -1, DeltaRun: 2}
					eng := engine.New(postgres.NewStore(e.db.Pool, postgres.Options{}), cfg)
					s := c.prepare(t, e, eng)

					holder, holderTx := e.hold(t, eng)
					c.hold(t, e, &s, holder)

					cfg.Retry = policy
					waiter := e.engine(cfg)
					done := make(chan error, 1)
					go func() {
						done <- e.write(waiter, policy, func(eng *engine.Engine, q querier) error { return c.wait(e, &s, eng, q) })
					}()
					waitForIsoLockWaiter(t, e, done)
					if err := holderTx.Commit(e.ctx); err != nil {
						t.Fatal(err)
					}
					switch err := <-done; {
					case err == nil:
						if c.check == nil {
							t.Fatalf("the waiting write of id %s succeeded, want ErrIDConflict or ErrTransient", s.id)
						}
						c.check(t, e, &s)
					case errors.Is(err, engine.ErrTransient) && !retry:
					case errors.Is(err, engine.ErrIDConflict) && c.check == nil:
					default:
						t.Fatalf("the waiting write: %v", err)
					}
					if s.id != uuid.Nil {
						if n := e.countID(t, s.id); n != 1 {
							t.Fatalf("%d checkpoints hold id %s, want 1", n, s.id)
						}
					}
				})
			}
		}
	}
}

// waitForIsoLockWaiter waits until a session of the test's database waits
// for a lock (the thread's, or a row or transaction another holds).
func waitForIsoLockWaiter(t *testing.T, e *isoEnv, done <-chan error) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting bool
		if err := e.db.Pool.QueryRow(e.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the write finished while the holder's transaction was open: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the write never waited for the holder's transaction")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A sweep never deletes a live branch's source, whichever of the two
// commits first and at every isolation level: one holds its transaction
// open (a branch made from the source, or a prune that deletes it) while
// the other runs. The branch's first write takes its source's thread lock,
// so the two queue there: a prune after the branch sees it and keeps the
// source; a branch after the prune finds its source gone (ErrNotFound), or
// under REPEATABLE READ fails with ErrTransient and, retried, finds it
// gone.
func TestIsolationBranchAndSweepOfItsSource(t *testing.T) {
	t.Parallel()
	type op func(e *isoEnv, eng *engine.Engine, src uuid.UUID) error
	branch := func(e *isoEnv, eng *engine.Engine, src uuid.UUID) error {
		_, err := eng.Branch(e.ctx, src, "side")
		return err
	}
	prune := func(e *isoEnv, eng *engine.Engine, _ uuid.UUID) error {
		_, err := eng.PruneThreads(e.ctx, engine.KeepLastN(1), "t")
		return err
	}
	sweep := func(e *isoEnv, eng *engine.Engine, _ uuid.UUID) error {
		_, err := eng.Sweep(e.ctx, engine.KeepLastN(1), engine.SweepOptions{})
		return err
	}
	orders := []struct {
		name       string
		hold, wait op
	}{
		{"branch-then-prune", branch, prune},
		{"branch-then-sweep", branch, sweep},
		{"prune-then-branch", prune, branch},
		{"sweep-then-branch", sweep, branch},
	}
	eachLevel(t, func(t *testing.T, iso isolation) {
		for _, o := range orders {
			t.Run(o.name, func(t *testing.T) {
				t.Parallel()
				e := newIsoEnv(t, iso)
				eng := e.engine(engine.Config{})
				src := seedThread(t, e, eng, "t", 3)[0].ID

				holder, holderTx := e.hold(t, eng)
				if err := o.hold(e, holder, src); err != nil {
					t.Fatal(err)
				}
				// The other waits for the holder's locks.
				waited := e.waitOn(t, holderTx, eng, func(eng *engine.Engine) error { return o.wait(e, eng, src) })
				var branches int
				if err := e.db.Pool.QueryRow(e.ctx, `SELECT count(*) FROM pgcheckpoint.threads WHERE branched_from = $1`, src).Scan(&branches); err != nil {
					t.Fatal(err)
				}
				switch sources := e.countID(t, src); {
				case branches > 0 && sources == 0:
					t.Fatalf("a branch of %s exists and its source was deleted (the second call: %v)", src, waited)
				case branches == 0 && !errors.Is(waited, engine.ErrNotFound):
					t.Fatalf("no branch was made and the branch returned %v, want ErrNotFound", waited)
				case branches == 1 && waited != nil:
					t.Fatalf("the second call: %v", waited)
				}
				checkThreadReads(t, e, "t")
			})
		}
	})
}

// Pending writes go to the checkpoint they name or nowhere: a checkpoint
// deleted (a rewind that truncates) while its writes are recorded, and a
// new head written at its seq in the same transaction, never receives
// them, at every isolation level. The writes' call waits for the
// deleter, then finds its checkpoint gone (ErrNotFound; under REPEATABLE
// READ after ErrTransient and a retry).
func TestIsolationPendingWritesOfACheckpointDeletedMeanwhile(t *testing.T) {
	t.Parallel()
	eachLevel(t, func(t *testing.T, iso isolation) {
		e := newIsoEnv(t, iso)
		eng := e.engine(engine.Config{})
		seeded := seedThread(t, e, eng, "t", 3)
		gone := seeded[2].ID

		holder, holderTx := e.hold(t, eng)
		if _, err := holder.RewindAndTruncate(e.ctx, seeded[1].ID); err != nil {
			t.Fatal(err)
		}
		head, err := holder.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		// The case needs the new head at the deleted one's seq (seqs
		// go on from the highest left).
		var goneSeq, headSeq int64
		if err := e.db.Pool.QueryRow(e.ctx, `SELECT seq FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, gone).Scan(&goneSeq); err != nil {
			t.Fatal(err)
		}
		if err := holderTx.QueryRow(e.ctx, `SELECT seq FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, head.ID).Scan(&headSeq); err != nil || headSeq != goneSeq {
			t.Fatalf("the new head is at seq %d (%v), the deleted checkpoint at %d", headSeq, err, goneSeq)
		}

		waiter := e.engine(engine.Config{Retry: retryHard})
		err = e.waitOn(t, holderTx, waiter, func(eng *engine.Engine) error {
			_, err := eng.PutWrites(e.ctx, gone, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`"for the deleted one"`)}})
			return err
		})
		if !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("the writes for the deleted checkpoint: %v, want ErrNotFound", err)
		}
		var n int
		if err := e.db.Pool.QueryRow(e.ctx, `SELECT count(*) FROM pgcheckpoint.pending_writes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		cp, err := eng.Get(e.ctx, head.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 || len(cp.PendingWrites) != 0 {
			t.Fatalf("%d pending writes stored; the new head (at the deleted one's seq) reads %d of them", n, len(cp.PendingWrites))
		}
	})
}

// An expiry cleared while a sweep runs is kept: the sweep that finds the
// thread expired either deletes it first (and clearing then finds no
// thread: ErrNotFound) or waits for the clearing and keeps the thread, at
// every isolation level. Here the clearing holds its transaction open
// while the sweep starts.
func TestIsolationExpiryClearedWhileASweepRuns(t *testing.T) {
	t.Parallel()
	eachLevel(t, func(t *testing.T, iso isolation) {
		e := newIsoEnv(t, iso)
		eng := e.engine(engine.Config{})
		seedThread(t, e, eng, "t", 2)
		if err := eng.SetThreadExpiry(e.ctx, "t", time.Now().Add(-time.Hour), engine.KeepNone()); err != nil {
			t.Fatal(err)
		}

		holder, holderTx := e.hold(t, eng)
		if err := holder.SetThreadExpiry(e.ctx, "t", time.Time{}, engine.KeepNone()); err != nil {
			t.Fatal(err)
		}
		err := e.waitOn(t, holderTx, eng, func(eng *engine.Engine) error {
			_, err := eng.Sweep(e.ctx, engine.KeepAll(), engine.SweepOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("the sweep: %v", err)
		}
		at, _, err := eng.ThreadExpiry(e.ctx, "t")
		if err != nil || !at.IsZero() {
			t.Fatalf("thread t after the sweep: expiry %v (%v), want the thread, not expiring", at, err)
		}
		checkLinearThread(t, e.db.Pool, "t", 2)
	})
}

// A rewind to a checkpoint whose id moves to another thread while the
// rewind waits for the first thread's lock (deleted there, written again
// with the same id on another thread, in one transaction) rewinds the
// thread where the checkpoint is once the lock is held, never the first
// thread to a checkpoint of another (which would leave it unwritable): the
// rewind that finds it moved is ErrTransient (a serialization failure,
// where taking the other thread's lock then would take locks out of
// order), and its retry rewinds b.
func TestIsolationRewindToACheckpointThatMovedThread(t *testing.T) {
	t.Parallel()
	eachLevel(t, func(t *testing.T, iso isolation) {
		e := newIsoEnv(t, iso)
		eng := e.engine(engine.Config{})
		moved := engine.NewCheckpointID()
		if _, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "a", ID: moved}); err != nil {
			t.Fatal(err)
		}
		aHead := seedThread(t, e, eng, "a", 2)[1]
		seedThread(t, e, eng, "b", 1)

		holder, holderTx := e.hold(t, eng)
		if res, err := holder.DeleteCheckpoints(e.ctx, engine.BeforeStep("a", 2)); err != nil || res.Deleted != 1 {
			t.Fatalf("delete the first of a: %+v, %v", res, err)
		}
		if _, err := holder.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "b", ID: moved}); err != nil {
			t.Fatal(err)
		}
		var got *engine.RewindResult
		err := e.waitOn(t, holderTx, eng, func(eng *engine.Engine) (err error) {
			got, err = eng.Rewind(e.ctx, moved)
			return err
		})
		if err != nil {
			t.Fatalf("the rewind: %v", err)
		}
		if got.ThreadID != "b" {
			t.Errorf("the rewind acted on thread %q, want b, where the checkpoint is", got.ThreadID)
		}
		var rewound *uuid.UUID
		if err := e.db.Pool.QueryRow(e.ctx, `SELECT rewound_to FROM pgcheckpoint.threads WHERE thread_id = 'a'`).Scan(&rewound); err != nil || rewound != nil {
			t.Errorf("thread a is rewound to %v (%v), want not rewound", rewound, err)
		}
		res, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "a"})
		if err != nil || res.ParentID != aHead.ID {
			t.Fatalf("a write on thread a after the rewind: parent %s (%v), want its head %s", res.ParentID, err, aHead.ID)
		}

		// Again, unretried.
		again := engine.NewCheckpointID()
		if _, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "a", ID: again}); err != nil {
			t.Fatal(err)
		}
		aHead = seedThread(t, e, eng, "a", 1)[0]
		holder, holderTx = e.hold(t, eng)
		if res, err := holder.DeleteCheckpoints(e.ctx, engine.BeforeStep("a", aHead.Step)); err != nil || res.Deleted == 0 {
			t.Fatalf("delete below a's head: %+v, %v", res, err)
		}
		if _, err := holder.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "b", ID: again}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := eng.Rewind(e.ctx, again)
			done <- err
		}()
		waitForIsoLockWaiter(t, e, done)
		if err := holderTx.Commit(e.ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, engine.ErrTransient) {
			t.Fatalf("a rewind that found its checkpoint moved to another thread: %v, want ErrTransient", err)
		}
	})
}

// An encrypted copy (which reads the thread, reseals it and writes the
// copy) of a branch deleted meanwhile, together with its source, by a
// transaction holding the branch's lock: the copy waits, then finds no
// thread (ErrNotFound) and writes nothing; it never makes a branch whose
// source retention has deleted.
func TestIsolationEncryptedCopyOfABranchDeletedMeanwhile(t *testing.T) {
	t.Parallel()
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	eachLevel(t, func(t *testing.T, iso isolation) {
		e := newIsoEnv(t, iso)
		eng := e.engine(engine.Config{Encryption: engine.Encryption{Keys: keys}})
		seeded := seedThread(t, e, eng, "y", 3)
		br, err := eng.Branch(e.ctx, seeded[0].ID, "b")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: br.ThreadID, Messages: json.RawMessage(`[{"role":"user","content":"on the branch"}]`)}); err != nil {
			t.Fatal(err)
		}

		holder, holderTx := e.hold(t, eng)
		if _, err := holder.DeleteThreads(e.ctx, br.ThreadID); err != nil {
			t.Fatal(err)
		}
		if res, err := holder.PruneThreads(e.ctx, engine.KeepLastN(1), "y"); err != nil || !slices.ContainsFunc(res.IDs, func(d engine.Deleted) bool { return d.ID == seeded[0].ID }) {
			t.Fatalf("the prune of y deleted %v (%v), want the branch's source %s among them", res.IDs, err, seeded[0].ID)
		}
		err = e.waitOn(t, holderTx, eng, func(eng *engine.Engine) error {
			_, err := eng.CopyThread(e.ctx, br.ThreadID, "copy")
			return err
		})
		if !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("the copy of the deleted branch: %v, want ErrNotFound", err)
		}
		var n int
		if err := e.db.Pool.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM pgcheckpoint.threads WHERE thread_id = 'copy')
			+ (SELECT count(*) FROM pgcheckpoint.checkpoints WHERE thread_id = 'copy')
			+ (SELECT count(*) FROM pgcheckpoint.data_keys WHERE thread_id = 'copy')`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("the copy left %d rows (%v)", n, err)
		}
	})
}

// A rewind to a step while another transaction holds the thread, having
// rewound it to another line: the step is looked for on the line of the
// head that transaction left, once it commits, not on the line the head
// was on when the call began (which the rewind would then make current
// again, undoing the other rewind with a checkpoint of the line it left).
func TestIsolationRewindToStepWhileTheThreadIsRewound(t *testing.T) {
	t.Parallel()
	eachLevel(t, func(t *testing.T, iso isolation) {
		e := newIsoEnv(t, iso)
		eng := e.engine(engine.Config{})
		first := seedThread(t, e, eng, "t", 4) // steps 1-4
		if _, err := eng.Rewind(e.ctx, first[1].ID); err != nil {
			t.Fatal(err)
		}
		second := seedThread(t, e, eng, "t", 2) // steps 3-4 of a second line

		holder, holderTx := e.hold(t, eng)
		if _, err := holder.Rewind(e.ctx, first[3].ID); err != nil { // back to the first line
			t.Fatal(err)
		}
		var got *engine.RewindResult
		err := e.waitOn(t, holderTx, eng, func(eng *engine.Engine) (err error) {
			got, err = eng.RewindToStep(e.ctx, "t", 3)
			return err
		})
		if err != nil {
			t.Fatalf("the rewind to step 3: %v", err)
		}
		if got.Checkpoint.ID != first[2].ID {
			line := "another"
			if got.Checkpoint.ID == second[0].ID {
				line = "the second"
			}
			t.Fatalf("the rewind to step 3 chose %s (of %s line), want %s, step 3 of the first line, the head's once the other rewind committed",
				got.Checkpoint.ID, line, first[2].ID)
		}
	})
}

// An encrypting Append in a caller's transaction at READ COMMITTED that
// waits for the thread's lock while another transaction appends: the head
// it read has moved, and the failure aborted the caller's transaction, so
// the call ends with ErrTransient (retry the transaction), where it read
// the head again inside the aborted transaction and returned its 25P02.
// Nothing of it is written.
func TestIsolationEncryptedAppendInATransactionThatWaited(t *testing.T) {
	t.Parallel()
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	e := newIsoEnv(t, isolation{name: "read-committed"})
	eng := e.engine(engine.Config{Encryption: engine.Encryption{Keys: keys}})
	seedThread(t, e, eng, "t", 2)
	holder, holderTx := e.hold(t, eng)
	if _, err := holder.Append(e.ctx, engine.AppendInput{ThreadID: "t", Messages: json.RawMessage(`[{"role":"user","content":"held"}]`)}); err != nil {
		t.Fatal(err)
	}
	tx, err := e.pool.BeginTx(e.ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(e.ctx))
	inTx, err := eng.WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	id := engine.NewCheckpointID()
	done := make(chan error, 1)
	go func() {
		_, err := inTx.Append(e.ctx, engine.AppendInput{ThreadID: "t", ID: id, Messages: json.RawMessage(`[{"role":"user","content":"waited"}]`)})
		done <- err
	}()
	waitForIsoLockWaiter(t, e, done)
	if err := holderTx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, engine.ErrTransient) || errors.Is(err, engine.ErrHeadMoved) {
		t.Errorf("an encrypting Append in a transaction that waited for the lock: %v, want ErrTransient", err)
	}
	_ = tx.Rollback(e.ctx)
	if n := e.countID(t, id); n != 0 {
		t.Errorf("the refused append left %d checkpoints", n)
	}
	if c, err := eng.Latest(e.ctx, "t"); err != nil || !bytes.HasSuffix(c.Messages, []byte(`{"role":"user","content":"held"}]`)) {
		t.Errorf("the head after: %v, messages %s", err, c.Messages)
	}
}

// A sweep under REPEATABLE READ that meets a serialization failure (a
// pending write, which takes no thread lock, committed on a checkpoint of
// an expired thread while the sweep's delete waited for it) fails its
// batch, which Config.Retry runs again on a fresh snapshot: the thread
// expires. (The failure was caught thread by thread: the thread was
// counted Failed, left as it was, and the call returned no error.)
func TestIsolationSweepRetriesASerializationFailure(t *testing.T) {
	t.Parallel()
	e := newIsoEnv(t, isolation{name: "database-repeatable-read", database: "repeatable read"})
	eng := e.engine(engine.Config{Retry: retryHard})
	s := seedThread(t, e, eng, "t", 3)
	if err := eng.SetThreadExpiry(e.ctx, "t", time.Now().Add(-time.Hour), engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	holder, holderTx := e.hold(t, eng)
	if _, err := holder.PutWrites(e.ctx, s[0].ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var res engine.SweepResult
	go func() {
		var err error
		res, err = eng.Sweep(e.ctx, engine.KeepAll(), engine.SweepOptions{})
		done <- err
	}()
	waitForIsoLockWaiter(t, e, done)
	if err := holderTx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || res.Expired != 1 || res.Failed != 0 {
		t.Fatalf("sweep: %+v, %v; want the thread expired, none failed", res, err)
	}
	if _, err := eng.Latest(e.ctx, "t"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("the expired thread after the sweep: %v, want ErrNotFound", err)
	}
}

// A thread a sweep cannot take within its lock_timeout is left as it was
// and counted Failed, and the batch's other threads are swept: held by a
// writer (its thread lock: the batch failed whole, so one busy thread
// stopped every sweep at its batch) or by an uncommitted pending write
// (a row lock, met once the thread's lock is held). Only a serialization
// failure fails the whole batch (TestIsolationSweepRetriesASerializationFailure).
func TestSweepLeavesAThreadHeldPastTheLockTimeout(t *testing.T) {
	t.Parallel()
	for _, holdBy := range []string{"a write", "a pending write"} {
		e := newIsoEnv(t, isolation{name: "read-committed"})
		eng := e.engine(engine.Config{})
		var held uuid.UUID
		for _, thread := range []string{"a", "t", "z"} {
			s := seedThread(t, e, eng, thread, 2)
			if thread == "t" {
				held = s[0].ID
			}
			if err := eng.SetThreadExpiry(e.ctx, thread, time.Now().Add(-time.Hour), engine.KeepNone()); err != nil {
				t.Fatal(err)
			}
		}
		holder, _ := e.hold(t, eng)
		var err error
		if holdBy == "a write" {
			_, err = holder.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t"})
		} else {
			_, err = holder.PutWrites(e.ctx, held, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}})
		}
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgxpool.ParseConfig(e.db.URL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["lock_timeout"] = "200ms"
		pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		sweeper := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{Retry: engine.RetryPolicy{Attempts: 3}})
		res, err := sweeper.Sweep(e.ctx, engine.KeepAll(), engine.SweepOptions{})
		pool.Close()
		if err != nil || res.Expired != 2 || res.Failed != 1 || !res.Done {
			t.Fatalf("held by %s: sweep: %+v, %v; want a and z expired, t failed", holdBy, res, err)
		}
		if _, err := eng.Latest(e.ctx, "t"); err != nil {
			t.Errorf("held by %s: the held thread: %v", holdBy, err)
		}
		var swept bool
		if err := e.db.Pool.QueryRow(e.ctx, `SELECT swept_at IS NOT NULL FROM pgcheckpoint.threads WHERE thread_id = 't'`).Scan(&swept); err != nil {
			t.Fatal(err)
		}
		if holdBy == "a write" && swept {
			t.Errorf("the thread the sweep could not lock is marked swept: the next sweep would take it last")
		}
	}
}

// The SQL procedure, as a pg_cron job calls it: a thread another
// transaction holds past lock_timeout is tried once in the call and left,
// and the threads after it are swept. (Its batches picked the least
// recently swept threads, and the thread left unmarked came first again
// in every batch: with batches of one, no thread after it was ever swept,
// and the call spent its whole time budget on it.)
func TestSQLSweepLeavesAThreadHeldPastTheLockTimeout(t *testing.T) {
	t.Parallel()
	e := newIsoEnv(t, isolation{name: "read-committed"})
	eng := e.engine(engine.Config{})
	for _, thread := range []string{"a", "t", "z"} {
		seedThread(t, e, eng, thread, 3)
	}
	holder, _ := e.hold(t, eng)
	if _, err := holder.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(e.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["lock_timeout"] = "100ms"
	var skipped []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if n.Severity == "WARNING" {
			skipped = append(skipped, n.Message)
		}
	}
	conn, err := pgx.ConnectConfig(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(e.ctx)
	if _, err := conn.Exec(e.ctx, `CALL pgcheckpoint.thread_gc_sweep('keep_last_n', 1, NULL, 1, '20 seconds', p_tenant => 'default')`); err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 {
		t.Errorf("the held thread was tried %d times in one call, want once (first: %q)", len(skipped), append(skipped, "")[0])
	}
	for thread, want := range map[string]int{"a": 1, "t": 3, "z": 1} {
		var n int
		if err := e.db.Pool.QueryRow(e.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints WHERE thread_id = $1`, thread).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("thread %s holds %d checkpoints after the sweep, want %d", thread, n, want)
		}
	}
}

// Under a REPEATABLE READ database, a rewind, a merge and an expiry that
// wait for the thread's lock while another transaction writes the thread
// fail with a serialization failure, which Config.Retry runs again (they
// returned ErrTransient whatever the policy): each ends done, with an
// encrypting engine too (its merge writes the merge itself).
func TestIsolationRewindMergeAndExpiryRetried(t *testing.T) {
	t.Parallel()
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	for _, encrypted := range []bool{false, true} {
		e := newIsoEnv(t, isolation{name: "database-repeatable-read", database: "repeatable read"})
		cfg := engine.Config{Retry: retryHard}
		if encrypted {
			cfg.Encryption = engine.Encryption{Keys: keys}
		}
		eng := e.engine(cfg)
		s := seedThread(t, e, eng, "t", 3)
		br, err := eng.Branch(e.ctx, s[0].ID, "b")
		if err != nil {
			t.Fatal(err)
		}
		for name, call := range map[string]func() error{
			"Rewind": func() error { _, err := eng.Rewind(e.ctx, s[1].ID); return err },
			"RewindAndTruncate": func() error {
				_, err := eng.RewindAndTruncate(e.ctx, s[1].ID)
				return err
			},
			"RewindToStep": func() error { _, err := eng.RewindToStep(e.ctx, "t", s[1].Step); return err },
			"MergeBranch":  func() error { _, err := eng.MergeBranch(e.ctx, br.ThreadID, "t"); return err },
			"SetThreadExpiry": func() error {
				return eng.SetThreadExpiry(e.ctx, "t", time.Now().Add(time.Hour), engine.KeepLatest())
			},
		} {
			holder, holderTx := e.hold(t, eng)
			if _, err := holder.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", Messages: growingMessages(2)}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- call() }()
			waitForIsoLockWaiter(t, e, done)
			if err := holderTx.Commit(e.ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Errorf("encrypted %v: %s after a write it waited for, with Config.Retry: %v", encrypted, name, err)
			}
		}
	}
}
