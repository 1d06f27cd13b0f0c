package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

func TestMain(m *testing.M) {
	if code, ok := enginetest.Child(); ok {
		os.Exit(code)
	}
	parallelUnlessGiven()
	os.Exit(pgtest.Main(m))
}

// parallelUnlessGiven runs testsPerCPU parallel tests per CPU at once
// unless -parallel was given: the tests wait on Postgres (round trips,
// locks, other processes) more than they compute, so Go's default (one
// per CPU) leaves the CPUs idle much of the run.
func parallelUnlessGiven() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(testsPerCPU*runtime.GOMAXPROCS(0)))
	}
}

// testsPerCPU is how many tests run at once per CPU by default.
const testsPerCPU = 3

type bundle struct {
	db  *pgtest.DB
	eng *engine.Engine
	ctx context.Context
}

// poolOf is a pool of at most maxConns connections to url, closed when
// the test ends.
func poolOf(t testing.TB, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// setup gives a test its own database and an engine that stores every
// checkpoint it can as a delta, however small (DeltaMinBytes -1): the
// tests' snapshots are small, and the code that reads, copies, rewinds and
// deletes must meet delta chains. TestSmallSnapshotsAreStoredWhole covers
// the default minimum.
func setup(t *testing.T) *bundle {
	t.Helper()
	d := pgtest.NewDB(t)
	return &bundle{db: d, eng: engine.New(postgres.NewStore(d.Pool, postgres.Options{}), deltas), ctx: context.Background()}
}

// deltas is the configuration of the engines of tests about delta chains.
var deltas = engine.Config{DeltaMinBytes: -1}

// count returns the number of rows in each pgcheckpoint table, for
// "nothing was written" checks.
func (b *bundle) count(t *testing.T) [3]int64 {
	t.Helper()
	var c [3]int64
	err := b.db.Pool.QueryRow(b.ctx, `SELECT
		(SELECT count(*) FROM pgcheckpoint.threads),
		(SELECT count(*) FROM pgcheckpoint.checkpoints),
		(SELECT count(*) FROM pgcheckpoint.pending_writes)`).Scan(&c[0], &c[1], &c[2])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (b *bundle) snap(t *testing.T, in engine.SnapshotInput) engine.SnapshotResult {
	t.Helper()
	res, err := b.eng.Snapshot(b.ctx, in)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return res
}

// jsonEqual compares two JSON texts after normalisation.
func jsonEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: got invalid JSON %q: %v", what, got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want invalid JSON %q: %v", what, want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("%s:\n got  %s\n want %s", what, gb, wb)
	}
}

// A thread's first checkpoint goes through pgcheckpoint.checkpoint_put (the
// pipelined insert finds no head and writes nothing); the next ones are the
// pipelined lock and insert alone (enginedb.CheckpointPutWhole, or with deltas
// enginedb.CheckpointPutFast), unless postgres.Options.SingleStatement is set.
// Counted with the server's function statistics.
func TestSnapshotPipelinesTheCommonCase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := func() int64 {
		t.Helper()
		var n int64
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions
			WHERE schemaname = 'pgcheckpoint' AND funcname = 'checkpoint_put'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// writeAndCount writes 6 checkpoints on a new thread through an engine on
	// a pool of its own that tracks PL/pgSQL calls, closes the pool (a
	// backend flushes its statistics as it exits) and returns how many
	// calls of checkpoint_put that added.
	writeAndCount := func(thread string, cfg engine.Config, opts postgres.Options) int64 {
		t.Helper()
		before := calls()
		pcfg := b.db.Pool.Config()
		pcfg.ConnConfig.RuntimeParams["track_functions"] = "pl"
		pool, err := pgxpool.NewWithConfig(b.ctx, pcfg)
		if err != nil {
			t.Fatal(err)
		}
		eng := engine.New(postgres.NewStore(pool, opts), cfg)
		for i := range 6 {
			if _, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread,
				Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"%d"}]`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		pool.Close()
		last, stable := calls(), 0
		for deadline := time.Now().Add(10 * time.Second); (last == before || stable < 5) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			if n := calls(); n != last {
				last, stable = n, 0
			} else {
				stable++
			}
		}
		return last - before
	}
	// Small snapshots are stored whole (Config.DeltaMinBytes), by their own
	// statement; with deltas, by the one that computes them.
	if got := writeAndCount("pipelined", engine.Config{}, postgres.Options{}); got != 1 {
		t.Errorf("6 snapshots on a new thread called checkpoint_put %d times, want 1 (the first)", got)
	}
	if got := writeAndCount("pipelined-deltas", deltas, postgres.Options{}); got != 1 {
		t.Errorf("with deltas, 6 snapshots on a new thread called checkpoint_put %d times, want 1 (the first)", got)
	}
	if got := writeAndCount("single", engine.Config{}, postgres.Options{SingleStatement: true}); got != 6 {
		t.Errorf("with SingleStatement, 6 snapshots called checkpoint_put %d times, want 6", got)
	}
	checkLinearThread(t, b.db.Pool, "pipelined", 6)
	checkLinearThread(t, b.db.Pool, "pipelined-deltas", 6)
	checkLinearThread(t, b.db.Pool, "single", 6)
}

// SnapshotSafe over the caller's own pool (engine.New) counts and logs a
// failure of the pool itself.
func TestSnapshotSafeCountsAClosedPool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool, err := pgxpool.New(b.ctx, b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	var logs bytes.Buffer
	closed := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if r := closed.SnapshotSafe(b.ctx, engine.SnapshotInput{ThreadID: "safe"}); r.Err == nil || closed.SnapshotFailures() != 1 {
		t.Fatalf("closed pool: err %v, failures %d", r.Err, closed.SnapshotFailures())
	}
	if !strings.Contains(logs.String(), "closed pool") {
		t.Fatalf("the database failure was not logged:\n%s", logs.String())
	}
}

// JSON text that jsonb cannot hold (an escaped lone surrogate, a string
// that is not UTF-8) is refused as invalid JSON on every write path, and
// nothing is written. The conformance suite lets a store keep such text
// instead, if it reads it back exactly.
func TestTextJsonbCannotHoldIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, eng := range map[string]*engine.Engine{
		"deltas": engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), deltas),
		"whole":  engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{}),
		"single": engine.New(postgres.NewStore(b.db.Pool, postgres.Options{SingleStatement: true}), engine.Config{}),
	} {
		for _, bad := range []string{`{"s":"\ud800"}`, `{"s":"a\udc00b"}`, "{\"s\":\"\xff\"}"} {
			for _, thread := range []string{"new", "existing"} {
				if thread == "existing" {
					b.snap(t, engine.SnapshotInput{ThreadID: thread})
				}
				before := b.count(t)
				if _, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread, State: json.RawMessage(bad)}); !errors.Is(err, engine.ErrInvalidJSON) {
					t.Errorf("%s: %q on %s: %v, want ErrInvalidJSON", name, bad, thread, err)
				}
				if after := b.count(t); after != before {
					t.Errorf("%s: %q on %s: rows %v -> %v", name, bad, thread, before, after)
				}
			}
		}
	}
}
