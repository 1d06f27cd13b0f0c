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

func BenchmarkZZLatest(b *testing.B) {
	keys, _ := engine.ParseLocalKeys(engine.NewKeyText("bench"))
	d := pgtest.NewDB(b)
	ctx := context.Background()
	plain := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{DeltaMinBytes: -1})
	enc := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{DeltaMinBytes: -1, Encryption: engine.Encryption{Keys: keys}})
	state := benchratio.State()
	for i := 0; i < 30; i++ {
		plain.Snapshot(ctx, engine.SnapshotInput{ThreadID: "plain", State: state})
		enc.Snapshot(ctx, engine.SnapshotInput{ThreadID: "enc", State: state})
	}
	get := func(eng *engine.Engine, th string) func() error {
		return func() error {
			c, err := eng.Latest(ctx, th)
			if err != nil {
				return err
			}
			var m map[string]any
			return json.Unmarshal(c.State, &m)
		}
	}
	b.ReportMetric(alternate(b, get(plain, "plain"), get(enc, "enc")), "x-plain")
}
