package integration

import (
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The engine's spans on Postgres: children of the caller's span, with the
// checkpoint's thread and step.
func TestTelemetryOnPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	eng := engine.New(b.db.Pool, engine.Config{TracerProvider: tp})
	ctx, parent := tp.Tracer("app").Start(b.ctx, "request")
	res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "traced"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Get(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	parent.End()
	seen := map[string]bool{}
	ids := map[string]string{} // span id -> name
	for _, s := range spans.GetSpans() {
		ids[s.SpanContext.SpanID().String()] = s.Name
	}
	for _, s := range spans.GetSpans() {
		if s.Name == "request" {
			continue
		}
		seen[s.Name] = true
		wantParent := "request"
		if strings.HasPrefix(s.Name, "pgcheckpoint.store.") {
			wantParent = map[string]string{"pgcheckpoint.store.Put": "pgcheckpoint.Snapshot", "pgcheckpoint.store.Get": "pgcheckpoint.Get"}[s.Name]
		}
		if got := ids[s.Parent.SpanID().String()]; got != wantParent {
			t.Errorf("%s: parent %q, want %q", s.Name, got, wantParent)
		}
		if !strings.HasPrefix(s.Name, "pgcheckpoint.store.") {
			continue
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		if attrs["pgcheckpoint.thread_id"] != "traced" || attrs["pgcheckpoint.step"] != "1" {
			t.Errorf("%s: attributes %v", s.Name, attrs)
		}
	}
	if !seen["pgcheckpoint.store.Put"] || !seen["pgcheckpoint.store.Get"] || !seen["pgcheckpoint.Snapshot"] || !seen["pgcheckpoint.Get"] {
		t.Fatalf("spans %v, want Put and Get", seen)
	}
}
