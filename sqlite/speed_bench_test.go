package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// speedWarmup is how many runs of each kind come before the clock starts:
// every connection has then compiled what it runs.
const speedWarmup = 50

// BenchmarkSpeed measures the SQLite rows of the speed table (docs/performance.md,
// "Speed") as ratios against a bare table of the same bytes in a file of
// its own, with the store's durable settings (WAL, synchronous=FULL) and
// the same driver, the two alternated in the same run:
//
//	get          Get by id of a 3.8 KB state, then unmarshalled, against a
//	             primary-key SELECT of the same bytes, unmarshalled alike
//	snapshot     Snapshot of that state, against one INSERT of it
//	writers-8    8 writers on distinct threads, writes/s, against 8
//	             goroutines of bare INSERTs
//	latest-long  Latest at step 1,000 of a conversation appending ~1 KB per
//	             step (stored as deltas), against a primary-key SELECT of the
//	             same whole content (messages and state) from one row, both
//	             read from their database files (the WALs checkpointed)
//
// Each reports x-bare (writes-x-bare for writers-8: above 1 is faster).
//
//	go test -run '^$' -bench BenchmarkSpeed -benchtime 400x -count 5 ./sqlite/
func BenchmarkSpeed(b *testing.B) {
	b.Run("get", speedGet)
	b.Run("snapshot", speedSnapshot)
	b.Run("writers-8", speedWriters)
	b.Run("latest-long", speedLatestLong)
}

// bareTable is a table of the same bytes in a file of its own, with the
// store's settings (WAL, synchronous=FULL, one writing connection) and
// its statements prepared once, as a bare table is best used.
type bareTable struct {
	insert, get, getWhole *sql.Stmt
	db                    *sql.DB
	storePath             string // the store's file
}

// speedSetup opens a store and, in another file of the same directory, the
// bare table.
func speedSetup(b *testing.B) (*engine.Engine, *bareTable) {
	ctx := context.Background()
	dir := b.TempDir()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "store.db"), sqlite.Options{Migrate: true})
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(s, engine.Config{})
	b.Cleanup(func() { eng.Close() })
	bare, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "bare.db")+
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(30000)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	bare.SetMaxOpenConns(1)
	b.Cleanup(func() { bare.Close() })
	if _, err := bare.Exec(`CREATE TABLE bare (id BLOB PRIMARY KEY, thread_id TEXT NOT NULL, messages TEXT NOT NULL, state TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	t := &bareTable{db: bare, storePath: filepath.Join(dir, "store.db")}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&t.insert, `INSERT INTO bare VALUES (?, ?, ?, ?)`},
		{&t.get, `SELECT state FROM bare WHERE id = ?`},
		{&t.getWhole, `SELECT messages, state FROM bare WHERE id = ?`},
	} {
		if *p.stmt, err = bare.PrepareContext(ctx, p.sql); err != nil {
			b.Fatal(err)
		}
	}
	return eng, t
}

func speedGet(b *testing.B) {
	eng, bare := speedSetup(b)
	ctx := context.Background()
	state := benchratio.State()
	bareID, err := bare.write(ctx, "bench", json.RawMessage(`[]`), state)
	if err != nil {
		b.Fatal(err)
	}
	res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "bench", State: state})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(benchratio.Alternate(b, speedWarmup, func() error {
		var raw []byte
		if err := bare.get.QueryRowContext(ctx, bareID).Scan(&raw); err != nil {
			return err
		}
		var m map[string]any
		return json.Unmarshal(raw, &m)
	}, func() error {
		c, err := eng.Get(ctx, res.ID)
		if err != nil {
			return err
		}
		var m map[string]any
		return json.Unmarshal(c.State, &m)
	}), "x-bare")
}

// write inserts one row in its own transaction and returns its id.
func (t *bareTable) write(ctx context.Context, thread string, messages, state json.RawMessage) ([]byte, error) {
	id := engine.NewCheckpointID()
	_, err := t.insert.ExecContext(ctx, id[:], thread, string(messages), string(state))
	return id[:], err
}

func speedSnapshot(b *testing.B) {
	eng, bare := speedSetup(b)
	ctx := context.Background()
	state := benchratio.State()
	b.ReportMetric(benchratio.Alternate(b, speedWarmup, func() error {
		_, err := bare.write(ctx, "bench", json.RawMessage(`[]`), state)
		return err
	}, func() error {
		_, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "bench", State: state})
		return err
	}), "x-bare")
}

func speedWriters(b *testing.B) {
	eng, bare := speedSetup(b)
	ctx := context.Background()
	state := benchratio.State()
	b.ReportMetric(benchratio.Throughput(b, 8, speedWarmup, 10, func(thread string) error {
		_, err := bare.write(ctx, thread, json.RawMessage(`[]`), state)
		return err
	}, func(thread string) error {
		_, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, State: state})
		return err
	}), "writes-x-bare")
}

func speedLatestLong(b *testing.B) {
	eng, bare := speedSetup(b)
	ctx := context.Background()
	const steps = 1000
	var messages, state json.RawMessage
	for step := 1; step <= steps; step++ {
		messages, state = conversation(step)
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "long", Messages: messages, State: state}); err != nil {
			b.Fatal(err)
		}
	}
	bareID, err := bare.write(ctx, "long", messages, state)
	if err != nil {
		b.Fatal(err)
	}
	bare.checkpointWALs(b)
	b.ReportMetric(benchratio.Alternate(b, speedWarmup, func() error {
		var m, s []byte
		return bare.getWhole.QueryRowContext(ctx, bareID).Scan(&m, &s)
	}, func() error {
		_, err := eng.Latest(ctx, "long")
		return err
	}), "x-bare")
}

// checkpointWALs copies the WAL of the bare table's file and of the
// store's into their database files, so that both read from there, as a
// conversation's older rows are read (a row still in the WAL is read
// through the page cache; one in the file, page by page from the file).
func (t *bareTable) checkpointWALs(b *testing.B) {
	ctx := context.Background()
	store, err := sqlite.OpenDB(ctx, t.storePath, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	for _, db := range []*sql.DB{t.db, store} {
		var busy, log, done int
		if err := db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &log, &done); err != nil || busy != 0 {
			b.Fatalf("checkpoint the WAL: %v (busy %d)", err, busy)
		}
	}
}
