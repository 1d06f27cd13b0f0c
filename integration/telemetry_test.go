package integration

import (
	"context"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// The engine's spans on Postgres: children of the caller's span, with the
// checkpoint's thread and step.
func TestTelemetryOnPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	eng := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{TracerProvider: tp})
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
			attrs[string(a.Key)] = a.Value.String()
		}
		if attrs["pgcheckpoint.thread_id"] != "traced" || attrs["pgcheckpoint.step"] != "1" {
			t.Errorf("%s: attributes %v", s.Name, attrs)
		}
	}
	if !seen["pgcheckpoint.store.Put"] || !seen["pgcheckpoint.store.Get"] || !seen["pgcheckpoint.Snapshot"] || !seen["pgcheckpoint.Get"] {
		t.Fatalf("spans %v, want Put and Get", seen)
	}
}

// A delete below a step names its thread, namespace and step on both its
// spans (the Engine's and the store's); one by run ids names none of them.
func TestTelemetryOfDeletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	eng := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{TracerProvider: tp})
	for range 3 {
		if _, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "traced", Namespace: "sub"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.DeleteCheckpoints(b.ctx, engine.BeforeStepIn("traced", "sub", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.DeleteCheckpoints(b.ctx, engine.ForRuns("r1")); err != nil {
		t.Fatal(err)
	}
	var named, unnamed int
	for _, s := range spans.GetSpans() {
		if !strings.HasSuffix(s.Name, ".DeleteCheckpoints") {
			continue
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.String()
		}
		switch {
		case len(attrs) == 0:
			unnamed++
		case attrs["pgcheckpoint.thread_id"] == "traced" && attrs["pgcheckpoint.namespace"] == "sub" && attrs["pgcheckpoint.step"] == "2":
			named++
		default:
			t.Errorf("%s: attributes %v", s.Name, attrs)
		}
	}
	if named != 2 || unnamed != 2 {
		t.Fatalf("%d delete spans naming thread, namespace and step, %d naming none; want 2 and 2", named, unnamed)
	}
}

// sqlTracer is a pgx tracer as otelpgx is one: a span per statement,
// started from the ctx pgx is given.
type sqlTracer struct{ tracer trace.Tracer }

type sqlSpanKey struct{}

func (s sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, q pgx.TraceQueryStartData) context.Context {
	ctx, span := s.tracer.Start(ctx, "sql")
	return context.WithValue(ctx, sqlSpanKey{}, span)
}

func (s sqlTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	ctx.Value(sqlSpanKey{}).(trace.Span).End()
}

func (s sqlTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	ctx, span := s.tracer.Start(ctx, "sql")
	return context.WithValue(ctx, sqlSpanKey{}, span)
}

func (s sqlTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s sqlTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	ctx.Value(sqlSpanKey{}).(trace.Span).End()
}

// A pgx tracer on the pool (as otelpgx is) puts the SQL statements under
// the engine's store spans: one trace from the caller down to the SQL.
func TestTelemetryComposesWithAPgxTracer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	cfg := b.db.Pool.Config().Copy()
	cfg.ConnConfig.Tracer = sqlTracer{tp.Tracer("pgx")}
	pool, err := pgxpool.NewWithConfig(b.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{TracerProvider: tp})
	if err := pool.Ping(b.ctx); err != nil { // connect before tracing
		t.Fatal(err)
	}
	spans.Reset()

	ctx, parent := tp.Tracer("app").Start(b.ctx, "request")
	res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "traced"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Get(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	parent.End()
	names := map[trace.SpanID]string{}
	for _, s := range spans.GetSpans() {
		names[s.SpanContext.SpanID()] = s.Name
	}
	sql := 0
	for _, s := range spans.GetSpans() {
		if s.Name != "sql" {
			continue
		}
		sql++
		if p := names[s.Parent.SpanID()]; !strings.HasPrefix(p, "pgcheckpoint.store.") || s.SpanContext.TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("a SQL span's parent is %q, want a pgcheckpoint.store span of the caller's trace", p)
		}
	}
	if sql < 2 {
		t.Fatalf("%d SQL spans, want at least one per store call: %v", sql, names)
	}
}

// panickingKeys is a key provider (a KMS client, say) that panics.
type panickingKeys struct{ engine.KeyProvider }

func (panickingKeys) WrapKey(context.Context, []byte, []byte) (string, []byte, error) {
	panic("the KMS client failed")
}

// A panic in the caller's code a call runs (here its key provider) goes on
// untouched, raised from where it began (its trace shows the provider's
// frame), and the call's span ends: no recover stops it (one would also
// stop a panic(nil) under GODEBUG=panicnil=1, which the runtime reads
// afresh when the program sets it).
func TestTelemetryOfAPanicInTheCallersCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{TracerProvider: tp,
		Encryption: engine.Encryption{Keys: panickingKeys{keys}}})
	var stack string
	func() {
		defer func() {
			if p := recover(); p != "the KMS client failed" {
				t.Errorf("the panic came out as %v", p)
			}
			stack = string(debug.Stack())
		}()
		_, _ = eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t"})
	}()
	if !strings.Contains(stack, "panickingKeys.WrapKey") {
		t.Errorf("the panic's trace does not show where it began:\n%s", stack)
	}
	var found bool
	for _, s := range spans.GetSpans() {
		found = found || s.Name == "pgcheckpoint.Snapshot"
	}
	if !found {
		t.Error("no span of the Snapshot ended")
	}
}
