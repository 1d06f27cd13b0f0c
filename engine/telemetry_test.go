package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// Spans and metrics through the OpenTelemetry SDK's in-memory exporter and
// manual reader, on a real SQLite store.
func TestTelemetry(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "t.db"), sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(store, engine.Config{TracerProvider: tp, MeterProvider: mp,
		Triggers: []engine.Trigger{engine.TriggerToolCall}})
	defer eng.Close()

	// The caller's span is the parent.
	ctx, parent := tp.Tracer("app").Start(ctx, "agent step")
	id := engine.NewCheckpointID()
	in := engine.SnapshotInput{ID: id, ThreadID: "run-1", Namespace: "sub", Trigger: engine.TriggerToolCall, State: json.RawMessage(`{"a":1}`)}
	if _, err := eng.Snapshot(ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Snapshot(ctx, in); err != nil { // a retry: existing
		t.Fatal(err)
	}
	if r, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run-1", Trigger: engine.TriggerLLMCall}); err != nil || !r.Skipped {
		t.Fatalf("disabled trigger: %+v %v", r, err)
	}
	if _, err := eng.Get(ctx, engine.NewCheckpointID()); !errors.Is(err, engine.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: ""}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatal(err)
	}
	parent.End()

	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		byName[s.Name] = append(byName[s.Name], s)
	}
	// One span per Engine call, a child of the caller's; under it, one per
	// store call.
	calls := byName["pgcheckpoint.Snapshot"]
	if len(calls) != 4 {
		t.Fatalf("%d Snapshot spans, want 4: %v", len(calls), byName)
	}
	for _, c := range calls {
		if c.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("a Snapshot span's parent is not the caller's span")
		}
	}
	if refused := calls[3]; refused.Status.Code != codes.Error || len(refused.Events) == 0 {
		t.Errorf("the refused Snapshot's span records no error: %+v", refused.Status)
	}
	puts := byName["pgcheckpoint.store.Put"]
	if len(puts) != 2 {
		t.Fatalf("%d store Put spans, want 2 (the skipped and the refused snapshots reach no store): %v", len(puts), byName)
	}
	put := puts[0]
	if put.Parent.SpanID() != calls[0].SpanContext.SpanID() || put.SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("the store Put's parent is not its Snapshot span")
	}
	want := map[attribute.Key]string{
		"pgcheckpoint.thread_id": "run-1", "pgcheckpoint.namespace": "sub", "pgcheckpoint.checkpoint_id": id.String(),
	}
	got := map[attribute.Key]attribute.Value{}
	for _, a := range put.Attributes {
		got[a.Key] = a.Value
	}
	for k, v := range want {
		if got[k].AsString() != v {
			t.Errorf("Put span attribute %s = %q, want %q", k, got[k].AsString(), v)
		}
	}
	if got["pgcheckpoint.step"].AsInt64() != 1 || got["pgcheckpoint.bytes"].AsInt64() != 7 {
		t.Errorf("Put span step %v, bytes %v", got["pgcheckpoint.step"], got["pgcheckpoint.bytes"])
	}
	gets := byName["pgcheckpoint.store.Get"]
	if len(gets) != 1 || gets[0].Status.Code != codes.Error || len(gets[0].Events) == 0 {
		t.Errorf("the failed Get's span does not record the error: %+v", gets)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]map[string]int64{}
	var durations uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				sums[m.Name] = map[string]int64{}
				for _, p := range d.DataPoints {
					key := ""
					for _, kv := range p.Attributes.ToSlice() {
						key += kv.Value.AsString()
					}
					sums[m.Name][key] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					durations += p.Count
				}
			}
		}
	}
	if s := sums["pgcheckpoint.snapshots"]; s["written"] != 1 || s["existing"] != 1 || s["skipped"] != 1 {
		t.Errorf("snapshots counted %v, want written 1, existing 1, skipped 1", s)
	}
	if sums["pgcheckpoint.stored.bytes"][""] != 7 {
		t.Errorf("bytes stored %v, want 7", sums["pgcheckpoint.stored.bytes"])
	}
	if sums["pgcheckpoint.failures"]["Get"] != 1 {
		t.Errorf("failures %v, want one Get", sums["pgcheckpoint.failures"])
	}
	if durations != 3 {
		t.Errorf("%d durations recorded, want 3 (Put, Put, Get)", durations)
	}
}

// Without providers in Config, the Engine reports to OpenTelemetry's global
// ones, as installed by the application (no-ops until then).
func TestTelemetryGlobalProviders(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prevTP, prevMP := otel.GetTracerProvider(), otel.GetMeterProvider()
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	defer func() {
		otel.SetTracerProvider(prevTP)
		otel.SetMeterProvider(prevMP)
	}()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "t.db"), sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(store, engine.Config{})
	defer eng.Close()
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range spans.GetSpans() {
		names[s.Name] = true
	}
	if !names["pgcheckpoint.Snapshot"] || !names["pgcheckpoint.store.Put"] {
		t.Errorf("spans %v, want pgcheckpoint.Snapshot and pgcheckpoint.store.Put", names)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) == 0 {
		t.Errorf("no metrics through the global meter provider")
	}
}

// TestWrapToolAppendsWithoutReadingTheHead: on a thread with a head, a
// wrapped tool's two checkpoints are appends (store spans PutAppend), and
// no store call reads the head's content: their cost follows what they add.
func TestWrapToolAppendsWithoutReadingTheHead(t *testing.T) {
	ctx := context.Background()
	eng, spans := tracedEngine(t, engine.Config{DeltaMinBytes: -1})
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run", Messages: json.RawMessage(`[{"role":"user","content":"go"}]`)}); err != nil {
		t.Fatal(err)
	}
	spans.Reset()
	search := engine.WrapTool(eng, "run", "search", func(_ context.Context, q string) (int, error) { return len(q), nil })
	if _, err := search(ctx, "flights"); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, s := range spans.GetSpans() {
		counts[s.Name]++
	}
	if counts["pgcheckpoint.store.PutAppend"] != 2 || counts["pgcheckpoint.store.Put"] != 0 ||
		counts["pgcheckpoint.store.Head"] != 0 || counts["pgcheckpoint.store.Get"] != 0 {
		t.Fatalf("store spans of a wrapped tool call: %v; want 2 PutAppend and no Put, Head or Get", counts)
	}
	head, err := eng.Latest(ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	if head.Step != 3 || head.Format != "delta" || string(head.ToolResults) != `{"search":7}` {
		t.Fatalf("head after the tool call: step %d, %s, tool results %s", head.Step, head.Format, head.ToolResults)
	}
}

// panicReader is a caller's reader that panics.
type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("the reader failed") }

// A caller's reader that panics inside Import (a handler that net/http
// recovers, say): the store's span and the call's end with the panic as
// their error, where the store's was left open and never exported and the
// call's said it went well; the store is usable after it.
func TestTelemetrySpansEndWhenTheCallersCodePanics(t *testing.T) {
	ctx := context.Background()
	eng, spans := tracedEngine(t, engine.Config{})
	func() {
		defer func() {
			if r := recover(); r != "the reader failed" {
				t.Errorf("the panic came out as %v", r)
			}
		}()
		_, _ = eng.Import(ctx, panicReader{}, engine.ImportOptions{})
	}()
	ended := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		ended[s.Name] = s
	}
	for _, name := range []string{"pgcheckpoint.store.Import", "pgcheckpoint.Import"} {
		if s, ok := ended[name]; !ok || s.Status.Code != codes.Error {
			t.Errorf("span %s: ended %v, status %+v; want ended with an error (spans ended: %d)", name, ok, s.Status, len(ended))
		}
	}
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); err != nil {
		t.Errorf("a snapshot after the panic: %v", err)
	}
}

// tracedEngine is an Engine with cfg over a SQLite file, its spans
// recorded in memory.
func tracedEngine(t *testing.T, cfg engine.Config) (*engine.Engine, *tracetest.InMemoryExporter) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(store, cfg)
	t.Cleanup(func() { eng.Close() })
	return eng, spans
}
