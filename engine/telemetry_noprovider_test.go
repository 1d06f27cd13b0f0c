package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// getSetup writes one checkpoint of a 3.8 KB state on a fresh Postgres
// database and returns an Engine over it (no providers in Config, so
// OpenTelemetry's global ones, none installed) and the checkpoint's id.
func getSetup(tb testing.TB) (*engine.Engine, uuid.UUID) {
	d := pgtest.NewDB(tb)
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{})
	m := map[string]any{"plan": []string{"search", "book", "confirm"}, "cursor": 7}
	for i := range 30 {
		m[fmt.Sprintf("k%02d", i)] = strings.Repeat(string(rune('a'+i%26)), 120)
	}
	state, _ := json.Marshal(m)
	res, err := eng.Snapshot(context.Background(), engine.SnapshotInput{ThreadID: "bench", State: state})
	if err != nil {
		tb.Fatal(err)
	}
	return eng, res.ID
}

// BenchmarkGetTelemetry: a Get on Postgres with no OpenTelemetry provider
// installed, through the Engine (its telemetry included) and, as the
// baseline, straight from its store.
func BenchmarkGetTelemetry(b *testing.B) {
	eng, id := getSetup(b)
	ctx := context.Background()
	for name, get := range map[string]func() error{
		"engine": func() error { _, err := eng.Get(ctx, id); return err },
		"store":  func() error { _, err := eng.Store().Get(ctx, id); return err },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := get(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTelemetryNoProvider: the telemetry of one Get alone with no
// provider installed: what runs of the Engine's span and of the store
// call's span and measurements (see telemetryOfGet).
func BenchmarkTelemetryNoProvider(b *testing.B) {
	eng, id := getSetup(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		engine.TelemetryOfGet(ctx, eng, id)
	}
}

// envTelemetryChild marks the test binary TestTelemetryWithNoProviderCostsNothing
// runs: a process where no test has installed a global provider yet.
const envTelemetryChild = "PGCHECKPOINT_TELEMETRY_CHILD"

// With no provider installed (OpenTelemetry's global defaults), a Get
// allocates exactly what its store's Get does: no span, attribute or
// measurement is made. An Engine made before the application installs its
// providers then reports to them. It runs in a process of its own, as
// OpenTelemetry's global providers, once installed, stay behind the
// default ones for good.
func TestTelemetryWithNoProviderCostsNothing(t *testing.T) {
	if os.Getenv(envTelemetryChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTelemetryWithNoProviderCostsNothing$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), envTelemetryChild+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	eng, id := getSetup(t)
	ctx := context.Background()
	if engine.TelemetryOfGet(ctx, eng, id) {
		t.Fatal("telemetry is on with no provider installed")
	}
	if n := testing.AllocsPerRun(100, func() { engine.TelemetryOfGet(ctx, eng, id) }); n != 0 {
		t.Errorf("the telemetry of a Get allocates %v times with no provider installed, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { engine.TelemetryOfCall(ctx, eng) }); n != 0 {
		t.Errorf("an Engine call's span with attributes allocates %v times with no provider installed, want 0", n)
	}
	get := func() {
		if _, err := eng.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	storeGet := func() {
		if _, err := eng.Store().Get(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	get()
	storeGet()
	if viaEngine, viaStore := testing.AllocsPerRun(200, get), testing.AllocsPerRun(200, storeGet); viaEngine != viaStore {
		t.Errorf("a Get allocates %v times through the Engine, %v through its store: want the same with no provider installed", viaEngine, viaStore)
	}

	spans := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	get()
	names := map[string]bool{}
	for _, s := range spans.GetSpans() {
		names[s.Name] = true
	}
	if !names["pgcheckpoint.Get"] || !names["pgcheckpoint.store.Get"] {
		t.Errorf("spans after providers were installed: %v, want pgcheckpoint.Get and pgcheckpoint.store.Get", names)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var durations uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "pgcheckpoint.duration" {
				for _, p := range h.DataPoints {
					durations += p.Count
				}
			}
		}
	}
	if durations != 1 {
		t.Errorf("%d durations recorded after providers were installed, want 1", durations)
	}
}
