package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// BenchmarkSpeed measures each row of the speed table (docs/performance.md, "The speed table")
// as a ratio against a baseline measured in the same run, the two
// alternated iteration by iteration so both meet the same machine:
//
//	get            Get by id of a 3.8 KB state, then unmarshalled, against a
//	               primary-key SELECT of the same bytes, unmarshalled alike
//	latest-long    Latest at step 1,000 of a conversation appending ~1 KB per
//	               step (default config), against a primary-key SELECT of
//	               the newest whole row (messages and state)
//	list-1000      the metadata of 1,000 checkpoints in pages of 100 (and,
//	               as page-1000, in one page), against one SELECT of the
//	               same columns of the same rows from a plain table
//	snapshot       Snapshot of a 3.8 KB state on one connection, against a
//	               bare INSERT (BenchmarkSnapshotLatency's default)
//	writers-8      8 writers on distinct threads, writes/s, against bare
//	               INSERTs (BenchmarkSnapshotThroughput8's default)
//	snapshot-long  a Snapshot at step 1,000 of that conversation, against a
//	               Snapshot at step 10 of it
//	append-long    an Append (one ~1 KB message, two state keys) at the end
//	               of that conversation, on its head, against a Snapshot at
//	               step 10 of the same conversation on another thread
//	append-state-long
//	               the same with the two state keys alone (no message: the
//	               default summary then comes from the head's last message)
//
// Each reports its ratio as x-bare (x-step10 for snapshot-long and
// append-long). The
// conversation has PGCHECKPOINT_BENCH_STEPS steps (default 1,000; CI runs
// fewer, to see that the benchmark works, not to read its figures). The
// figures mean something only on a durable server (fsync and
// synchronous_commit on), freshly started, with nothing else running; the
// docs/performance.md gives the command.
func BenchmarkSpeed(b *testing.B) {
	b.Run("get", benchGet)
	b.Run("latest-long", benchLatestLong)
	b.Run("list-1000", benchList1000)
	b.Run("snapshot", func(b *testing.B) { benchLatency(b, engine.Config{}) })
	b.Run("writers-8", func(b *testing.B) { benchThroughput8(b, engine.Config{}) })
	b.Run("snapshot-long", benchSnapshotLong)
	b.Run("append-long", func(b *testing.B) { benchAppendLong(b, true) })
	b.Run("append-state-long", func(b *testing.B) { benchAppendLong(b, false) })
}

// alternate is benchratio.Alternate after the benchmarks' warmup.
func alternate(tb *testing.B, a, b func() error) float64 {
	return benchratio.Alternate(tb, warmup, a, b)
}

func benchGet(b *testing.B) {
	d := pgtest.NewDB(b)
	ctx := context.Background()
	if _, err := d.Pool.Exec(ctx, `CREATE TABLE bench_plain (id uuid PRIMARY KEY, thread_id text NOT NULL, state jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
	state := benchratio.State()
	bareID := engine.NewCheckpointID()
	if _, err := d.Pool.Exec(ctx, `INSERT INTO bench_plain VALUES ($1, 'bench', $2)`, bareID, state); err != nil {
		b.Fatal(err)
	}
	res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "bench", State: state})
	if err != nil {
		b.Fatal(err)
	}
	bare := func() error {
		// []byte, the cheapest read: pgx copies the bytes, where a
		// json.RawMessage would also go through encoding/json.
		var raw []byte
		if err := d.Pool.QueryRow(ctx, `SELECT state FROM bench_plain WHERE id = $1`, bareID).Scan(&raw); err != nil {
			return err
		}
		var m map[string]any
		return json.Unmarshal(raw, &m)
	}
	get := func() error {
		c, err := eng.Get(ctx, res.ID)
		if err != nil {
			return err
		}
		var m map[string]any
		return json.Unmarshal(c.State, &m)
	}
	b.ReportMetric(alternate(b, bare, get), "x-bare")
}

// longSteps is how many steps conversationLong writes.
func longSteps(b *testing.B) int {
	n := 1000
	if s := os.Getenv("PGCHECKPOINT_BENCH_STEPS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 20 {
			b.Fatalf("PGCHECKPOINT_BENCH_STEPS=%q: want a number of at least 20", s)
		}
	}
	return n
}

// conversationLong writes longSteps steps of newConversation on thread
// "long" with cfg and returns the engine, the checkpoints at step 9 and at
// the step before the last, and the last step's content.
func conversationLong(b *testing.B, d *pgtest.DB, cfg engine.Config) (eng *engine.Engine, at9, beforeLast uuid.UUID, msgs, state json.RawMessage) {
	ctx := context.Background()
	eng = engine.New(postgres.NewStore(d.Pool, postgres.Options{}), cfg)
	conv := newConversation()
	steps := longSteps(b)
	b.ReportMetric(float64(steps), "steps")
	for i := 1; i <= steps; i++ {
		msgs, state = conv.step(i)
		res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "long", Messages: msgs, State: state})
		if err != nil {
			b.Fatal(err)
		}
		switch i {
		case 9:
			at9 = res.ID
		case steps - 1:
			beforeLast = res.ID
		}
	}
	return eng, at9, beforeLast, msgs, state
}

func benchLatestLong(b *testing.B) {
	d := pgtest.NewDB(b)
	ctx := context.Background()
	eng, _, _, msgs, state := conversationLong(b, d, engine.Config{})
	if _, err := d.Pool.Exec(ctx, `CREATE TABLE bench_whole (id uuid PRIMARY KEY, messages jsonb NOT NULL, state jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	id := engine.NewCheckpointID()
	if _, err := d.Pool.Exec(ctx, `INSERT INTO bench_whole VALUES ($1, $2, $3)`, id, msgs, state); err != nil {
		b.Fatal(err)
	}
	bare := func() error {
		var m, s []byte // as in benchGet: no encoding/json pass
		return d.Pool.QueryRow(ctx, `SELECT messages, state FROM bench_whole WHERE id = $1`, id).Scan(&m, &s)
	}
	latest := func() error {
		_, err := eng.Latest(ctx, "long")
		return err
	}
	b.ReportMetric(alternate(b, bare, latest), "x-bare")
}

func benchList1000(b *testing.B) {
	d := pgtest.NewDB(b)
	ctx := context.Background()
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
	state := benchratio.State()
	for i := range 1000 {
		md := json.RawMessage(fmt.Sprintf(`{"run_id":"run-%d","user":"u-7"}`, i/100))
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "listed", State: state, Metadata: md, Tags: []string{"bench"}}); err != nil {
			b.Fatal(err)
		}
	}
	// The baseline: the same columns of the same rows, copied to a plain
	// table with the same key, read in one statement.
	if _, err := d.Pool.Exec(ctx, `CREATE TABLE bench_meta AS
		SELECT thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id, step, created_at,
		       trigger, tags, summary, metadata, format, next_node, size_bytes
		FROM pgcheckpoint.checkpoints;
		ALTER TABLE bench_meta ADD PRIMARY KEY (thread_id, namespace, seq)`); err != nil {
		b.Fatal(err)
	}
	bare := func() error {
		rows, err := d.Pool.Query(ctx, `SELECT * FROM bench_meta WHERE thread_id = 'listed' AND namespace = '' ORDER BY seq DESC`)
		if err != nil {
			return err
		}
		type meta struct {
			ThreadID, Namespace string
			Seq                 int64
			ID                  uuid.UUID
			Parent, MergeParent *uuid.UUID
			Step                int64
			CreatedAt           time.Time
			Trigger             string
			Tags                []string
			Summary             string
			Metadata            json.RawMessage
			Format, NextNode    string
			SizeBytes           int64
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[meta])
		if err == nil && len(got) != 1000 {
			err = fmt.Errorf("bare read %d rows", len(got))
		}
		return err
	}
	list := func(page int) func() error {
		return func() error {
			var before uuid.UUID
			n := 0
			for {
				infos, err := eng.ListCheckpoints(ctx, "listed", engine.ListOptions{Limit: page, Before: before})
				if err != nil {
					return err
				}
				n += len(infos)
				if len(infos) < page {
					break
				}
				before = infos[len(infos)-1].ID
			}
			if n != 1000 {
				return fmt.Errorf("listed %d checkpoints", n)
			}
			return nil
		}
	}
	b.Run("page-100", func(b *testing.B) { b.ReportMetric(alternate(b, bare, list(100)), "x-bare") })
	b.Run("page-1000", func(b *testing.B) { b.ReportMetric(alternate(b, bare, list(1000)), "x-bare") })
}

func benchSnapshotLong(b *testing.B) {
	d := pgtest.NewDB(b)
	ctx := context.Background()
	eng, at9, beforeLast, msgs, state := conversationLong(b, d, engine.Config{})
	// Step 10's content: the same conversation replayed to step 10.
	conv := newConversation()
	var msgs10, state10 json.RawMessage
	for i := 1; i <= 10; i++ {
		msgs10, state10 = conv.step(i)
	}
	at10 := func() error {
		_, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "long", ParentID: at9, Messages: msgs10, State: state10})
		return err
	}
	atLast := func() error {
		_, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "long", ParentID: beforeLast, Messages: msgs, State: state})
		return err
	}
	b.ReportMetric(alternate(b, at10, atLast), "x-step10")
}

func benchAppendLong(b *testing.B, withMessage bool) {
	d := pgtest.NewDB(b)
	ctx := context.Background()
	eng, _, _, _, _ := conversationLong(b, d, engine.Config{})
	// Step 10 of the same conversation, on a thread of its own, so the
	// appends stay on the long thread's head.
	conv := newConversation()
	var at9 uuid.UUID
	var msgs10, state10 json.RawMessage
	for i := 1; i <= 10; i++ {
		msgs, state := conv.step(i)
		if i == 10 {
			msgs10, state10 = msgs, state
			break
		}
		res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "short", Messages: msgs, State: state})
		if err != nil {
			b.Fatal(err)
		}
		at9 = res.ID
	}
	at10 := func() error {
		_, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "short", ParentID: at9, Messages: msgs10, State: state10})
		return err
	}
	// Each append adds what a step of the conversation adds: a message of
	// about 1 KB (unless !withMessage) and two state keys.
	content := strings.Repeat("the agent reads the result before it answers ", 22)
	step := longSteps(b)
	appendStep := func() error {
		step++
		in := engine.AppendInput{ThreadID: "long",
			SetState: json.RawMessage(fmt.Sprintf(`{"key%02d":"value at step %d","step":%d}`, step%20, step, step))}
		if withMessage {
			in.Messages = json.RawMessage(fmt.Sprintf(`[{"role":"assistant","content":%q}]`, fmt.Sprint(content, step)))
		}
		_, err := eng.Append(ctx, in)
		return err
	}
	b.ReportMetric(alternate(b, at10, appendStep), "x-step10")
}
