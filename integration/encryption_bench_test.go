package integration

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// BenchmarkEncryption measures what encryption at rest (Config.Encryption,
// a LocalKeys provider, the default key cache) costs, each against the
// same call without encryption in the same database, alternated iteration
// by iteration (x-plain: the ratio of medians):
//
//	snapshot     Snapshot of a 3.8 KB state (goal: at most 1.15)
//	get          Get by id of it, then unmarshalled (goal: at most 1.15)
//	latest-delta Latest of a 30-step thread of it stored as deltas
//	             (DeltaMinBytes -1 on both sides), then unmarshalled
//	storage-1000 the checkpoint tables after 1,000 steps of the delta
//	             benchmark's conversation (~1 KB message and a state key per
//	             step, default configuration: deltas), each in a database of
//	             its own (goal: at most 1.30; values compressed by default),
//	             and with Encryption.NoCompress
//
// The figures mean something only on a durable server (fsync and
// synchronous_commit on) with nothing else running.
func BenchmarkEncryption(b *testing.B) {
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("bench"))
	if err != nil {
		b.Fatal(err)
	}
	encrypted := engine.Config{Encryption: engine.Encryption{Keys: keys}}
	b.Run("snapshot", func(b *testing.B) {
		d := pgtest.NewDB(b)
		ctx := context.Background()
		plain := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
		enc := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), encrypted)
		state := benchratio.State()
		b.ReportMetric(alternate(b, func() error {
			_, err := plain.Snapshot(ctx, engine.SnapshotInput{ThreadID: "plain", State: state})
			return err
		}, func() error {
			_, err := enc.Snapshot(ctx, engine.SnapshotInput{ThreadID: "enc", State: state})
			return err
		}), "x-plain")
	})
	b.Run("get", func(b *testing.B) {
		d := pgtest.NewDB(b)
		ctx := context.Background()
		plain := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
		enc := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), encrypted)
		state := benchratio.State()
		p, err := plain.Snapshot(ctx, engine.SnapshotInput{ThreadID: "plain", State: state})
		if err != nil {
			b.Fatal(err)
		}
		e, err := enc.Snapshot(ctx, engine.SnapshotInput{ThreadID: "enc", State: state})
		if err != nil {
			b.Fatal(err)
		}
		get := func(eng *engine.Engine, c engine.SnapshotResult) func() error {
			return func() error {
				got, err := eng.Get(ctx, c.ID)
				if err != nil {
					return err
				}
				var m map[string]any
				return json.Unmarshal(got.State, &m)
			}
		}
		b.ReportMetric(alternate(b, get(plain, p), get(enc, e)), "x-plain")
	})
	b.Run("latest-delta", func(b *testing.B) {
		d := pgtest.NewDB(b)
		ctx := context.Background()
		deltas := encrypted
		deltas.DeltaMinBytes = -1
		plain := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{DeltaMinBytes: -1})
		enc := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), deltas)
		state := benchratio.State()
		for range 30 {
			for _, s := range []struct {
				eng    *engine.Engine
				thread string
			}{{plain, "plain"}, {enc, "enc"}} {
				if _, err := s.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: s.thread, State: state}); err != nil {
					b.Fatal(err)
				}
			}
		}
		latest := func(eng *engine.Engine, thread string) func() error {
			return func() error {
				got, err := eng.Latest(ctx, thread)
				if err != nil {
					return err
				}
				if got.Format != engine.StorageDelta {
					b.Fatalf("%s's head is stored %s", thread, got.Format)
				}
				var m map[string]any
				return json.Unmarshal(got.State, &m)
			}
		}
		b.ReportMetric(alternate(b, latest(plain, "plain"), latest(enc, "enc")), "x-plain")
	})
	b.Run("storage-1000", func(b *testing.B) {
		ctx := context.Background()
		uncompressed := encrypted
		uncompressed.Encryption.NoCompress = true
		dbs := []*pgtest.DB{pgtest.NewDB(b), pgtest.NewDB(b), pgtest.NewDB(b)}
		engs := []*engine.Engine{
			engine.New(postgres.NewStore(dbs[0].Pool, postgres.Options{}), engine.Config{}),
			engine.New(postgres.NewStore(dbs[1].Pool, postgres.Options{}), encrypted),
			engine.New(postgres.NewStore(dbs[2].Pool, postgres.Options{}), uncompressed),
		}
		conv := newConversation()
		for i := 1; i <= 1000; i++ {
			msgs, state := conv.step(i)
			for _, eng := range engs {
				if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "long", Messages: msgs, State: state}); err != nil {
					b.Fatal(err)
				}
			}
		}
		sizes := make([]float64, len(dbs))
		for j, eng := range engs {
			list, err := eng.ListCheckpoints(ctx, "long", engine.ListOptions{Limit: engine.MaxListLimit})
			if err != nil {
				b.Fatal(err)
			}
			deltas := 0
			for _, c := range list {
				if c.Format == "delta" {
					deltas++
				}
			}
			if deltas < 900 {
				b.Fatalf("engine %d stored %d of 1,000 steps as deltas", j, deltas)
			}
			sizes[j] = float64(checkpointBytes(b, dbs[j]))
		}
		b.ReportMetric(sizes[0]/1e6, "plain-MB")
		b.ReportMetric(sizes[1]/1e6, "encrypted-MB")
		b.ReportMetric(sizes[2]/1e6, "uncompressed-MB")
		b.ReportMetric(sizes[1]/sizes[0], "x-plain")
		b.ReportMetric(sizes[2]/sizes[0], "x-plain-uncompressed")
	})
}
