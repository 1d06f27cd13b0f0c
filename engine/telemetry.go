package engine

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Telemetry, through the OpenTelemetry API: a span for every Engine call,
// named "pgcheckpoint.<Method>" (e.g. pgcheckpoint.Snapshot), child of the
// caller's span (from ctx), its error recorded, also one refused before any
// I/O; under it a span for each call to the store, named
// "pgcheckpoint.store.<Operation>" (one per attempt when Config.Retry
// retries), with the thread, namespace, checkpoint id, step, storage format
// and bytes where the call knows them; and metrics:
//
//	pgcheckpoint.snapshots        counter, by result: written, existing (a retried id), skipped (trigger disabled)
//	pgcheckpoint.stored.bytes     counter: messages + state + tool results of the snapshots written
//	pgcheckpoint.failures         counter, by operation
//	pgcheckpoint.duration         histogram, seconds, by operation
//
// Without providers installed (Config.TracerProvider, Config.MeterProvider,
// or the global ones of package otel) all of it is a no-op, and costs next
// to nothing: no span is started, no attribute made, no measurement taken
// when nothing would receive it. A pgx tracer on
// the pool (e.g. otelpgx, set as ConnConfig.Tracer) adds a span per SQL
// statement; they are children of these spans, since the Engine passes
// its ctx down.

const instrumentation = "github.com/pgcheckpoint/pgcheckpoint/engine"

// Attribute keys of the spans and metrics.
const (
	attrThread    = attribute.Key("pgcheckpoint.thread_id")
	attrNamespace = attribute.Key("pgcheckpoint.namespace")
	attrID        = attribute.Key("pgcheckpoint.checkpoint_id")
	attrStep      = attribute.Key("pgcheckpoint.step")
	attrFormat    = attribute.Key("pgcheckpoint.format")
	attrBytes     = attribute.Key("pgcheckpoint.bytes")
	attrOperation = attribute.Key("pgcheckpoint.operation")
	attrResult    = attribute.Key("pgcheckpoint.result")
)

// telemetry holds the Engine's tracer and instruments.
type telemetry struct {
	tracer trace.Tracer
	// idle is the provider tracer came from when that is OpenTelemetry's
	// default global one, which records nothing until an application
	// installs a provider (otel.SetTracerProvider) and then hands every
	// span to it; nil for any other provider.
	idle trace.TracerProvider
	// noop: tracer is a no-op one for good (a noop.TracerProvider).
	noop bool

	snapshots metric.Int64Counter
	bytes     metric.Int64Counter
	failures  metric.Int64Counter
	duration  metric.Float64Histogram
}

func newTelemetry(cfg Config) *telemetry {
	tp, mp := cfg.TracerProvider, cfg.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentation)
	t := &telemetry{tracer: tp.Tracer(instrumentation)}
	if _, ok := tp.(noop.TracerProvider); ok {
		t.noop = true
	} else if isGlobalDefault(tp) {
		t.idle = tp
	}
	// An instrument that cannot be made is a no-op one: telemetry never
	// fails the caller.
	t.snapshots, _ = m.Int64Counter("pgcheckpoint.snapshots", metric.WithDescription("Snapshots, by result: written, existing (a retried id), skipped (trigger disabled)."))
	t.bytes, _ = m.Int64Counter("pgcheckpoint.stored.bytes", metric.WithUnit("By"), metric.WithDescription("Messages + state + tool results of the snapshots written, as sent."))
	t.failures, _ = m.Int64Counter("pgcheckpoint.failures", metric.WithDescription("Failed store calls, by operation."))
	t.duration, _ = m.Float64Histogram("pgcheckpoint.duration", metric.WithUnit("s"), metric.WithDescription("Duration of store calls, by operation."))
	return t
}

// globalDefaultPkg and globalDefaultName name the type of OpenTelemetry's
// default global TracerProvider (otel.GetTracerProvider before any
// otel.SetTracerProvider). It is unexported, so it is known by its name:
// should a release of OpenTelemetry rename it, isGlobalDefault says false
// and the Engine starts spans as it would for any provider (correct, only
// slower; TestTelemetryWithNoProviderCostsNothing fails to say so).
const (
	globalDefaultPkg  = "go.opentelemetry.io/otel/internal/global"
	globalDefaultName = "tracerProvider"
)

// isGlobalDefault reports whether tp is OpenTelemetry's default global
// TracerProvider.
func isGlobalDefault(tp trace.TracerProvider) bool {
	ty := reflect.TypeOf(tp)
	return ty.Kind() == reflect.Pointer && ty.Elem().PkgPath() == globalDefaultPkg && ty.Elem().Name() == globalDefaultName
}

// tracing reports whether a span started now would go anywhere: false for
// a no-op provider, and for the default global one while no provider has
// been installed in its place. (An application that installs a provider
// and then puts the default back, as tests do, gets no spans from then
// on, although the default would still forward them.)
func (t *telemetry) tracing() bool {
	if t.idle != nil {
		return otel.GetTracerProvider() != t.idle
	}
	return !t.noop
}

// on reports whether a store call's span or measurements would go
// anywhere; when not, tracedStore calls the store and nothing else.
func (t *telemetry) on(ctx context.Context) bool {
	return t.tracing() || t.duration.Enabled(ctx) || t.failures.Enabled(ctx) ||
		t.snapshots.Enabled(ctx) || t.bytes.Enabled(ctx)
}

// span starts the span of one store call; end ends it, recording err and
// the call's duration.
func (t *telemetry) span(ctx context.Context, op string, attrs ...attribute.KeyValue) (context.Context, func(err error, more ...attribute.KeyValue)) {
	start := time.Now()
	ctx, s := t.tracer.Start(ctx, "pgcheckpoint.store."+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, func(err error, more ...attribute.KeyValue) {
		opAttr := metric.WithAttributes(attrOperation.String(op))
		s.SetAttributes(more...)
		if err != nil {
			s.RecordError(err)
			s.SetStatus(codes.Error, err.Error())
			t.failures.Add(ctx, 1, opAttr)
		}
		t.duration.Record(ctx, time.Since(start).Seconds(), opAttr)
		s.End()
	}
}

// skipped counts a snapshot not written because its trigger is disabled.
func (t *telemetry) skipped(ctx context.Context) {
	if !t.snapshots.Enabled(ctx) {
		return
	}
	t.snapshots.Add(ctx, 1, metric.WithAttributes(attrResult.String("skipped")))
}

// tracedStore is a Store with a span around every call (see telemetry).
// Each method first asks telemetry.on, so that with nothing installed a
// call costs one check, not the attributes, span and measurements.
type tracedStore struct {
	Store
	t *telemetry
}

func threadAttrs(threadID, namespace string) []attribute.KeyValue {
	return []attribute.KeyValue{attrThread.String(threadID), attrNamespace.String(namespace)}
}

// attrs are a delete's span attributes: the thread, namespace and step of
// a delete below a step; none for one by run ids.
func (q DeleteQuery) attrs() []attribute.KeyValue {
	if q.RunIDs != nil {
		return nil
	}
	return append(threadAttrs(q.ThreadID, q.Namespace), attrStep.Int64(q.BeforeStep))
}

func idAttr(id uuid.UUID) attribute.KeyValue { return attrID.String(id.String()) }

func infoAttrs(c CheckpointInfo) []attribute.KeyValue {
	return []attribute.KeyValue{attrThread.String(c.ThreadID), attrNamespace.String(c.Namespace),
		attrStep.Int64(c.Step), attrFormat.String(c.Format), attrBytes.Int64(c.SizeBytes)}
}

func (s tracedStore) Put(ctx context.Context, p PutRequest) (SnapshotResult, error) {
	if !s.t.on(ctx) {
		return s.Store.Put(ctx, p)
	}
	ctx, end := s.t.span(ctx, "Put", append(threadAttrs(p.ThreadID, p.Namespace), idAttr(p.ID), attrBytes.Int64(p.SizeBytes))...)
	r, err := s.Store.Put(ctx, p)
	end(err, attrStep.Int64(r.Step))
	s.t.written(ctx, r, err, p.SizeBytes)
	return r, err
}

func (s tracedStore) PutAppend(ctx context.Context, a AppendRequest) (SnapshotResult, error) {
	if !s.t.on(ctx) {
		return s.Store.PutAppend(ctx, a)
	}
	ctx, end := s.t.span(ctx, "PutAppend", append(threadAttrs(a.ThreadID, a.Namespace), idAttr(a.ID), attrBytes.Int64(a.SizeBytes))...)
	r, err := s.Store.PutAppend(ctx, a)
	end(err, attrStep.Int64(r.Step))
	s.t.written(ctx, r, err, a.SizeBytes)
	return r, err
}

// written counts a write in the snapshot metrics (size: bytes as sent).
func (t *telemetry) written(ctx context.Context, r SnapshotResult, err error, size int64) {
	if err != nil {
		return
	}
	result := "written"
	if !r.Created {
		result = "existing"
	} else {
		t.bytes.Add(ctx, size)
	}
	t.snapshots.Add(ctx, 1, metric.WithAttributes(attrResult.String(result)))
}

func (s tracedStore) Get(ctx context.Context, id uuid.UUID) (*Checkpoint, error) {
	if !s.t.on(ctx) {
		return s.Store.Get(ctx, id)
	}
	ctx, end := s.t.span(ctx, "Get", idAttr(id))
	c, err := s.Store.Get(ctx, id)
	if err != nil {
		end(err)
		return nil, err
	}
	end(nil, infoAttrs(c.CheckpointInfo)...)
	return c, nil
}

func (s tracedStore) HeadID(ctx context.Context, threadID, namespace string) (uuid.UUID, error) {
	if !s.t.on(ctx) {
		return s.Store.HeadID(ctx, threadID, namespace)
	}
	ctx, end := s.t.span(ctx, "HeadID", threadAttrs(threadID, namespace)...)
	id, err := s.Store.HeadID(ctx, threadID, namespace)
	if err != nil {
		end(err)
		return uuid.Nil, err
	}
	end(nil, idAttr(id))
	return id, nil
}

func (s tracedStore) Head(ctx context.Context, threadID, namespace string) (*Checkpoint, error) {
	if !s.t.on(ctx) {
		return s.Store.Head(ctx, threadID, namespace)
	}
	ctx, end := s.t.span(ctx, "Head", threadAttrs(threadID, namespace)...)
	c, err := s.Store.Head(ctx, threadID, namespace)
	if err != nil {
		end(err)
		return nil, err
	}
	end(nil, append(infoAttrs(c.CheckpointInfo), idAttr(c.ID))...)
	return c, nil
}

func (s tracedStore) ListCheckpoints(ctx context.Context, q ListQuery) ([]CheckpointInfo, error) {
	if !s.t.on(ctx) {
		return s.Store.ListCheckpoints(ctx, q)
	}
	ctx, end := s.t.span(ctx, "ListCheckpoints", threadAttrs(q.ThreadID, q.Namespace)...)
	r, err := s.Store.ListCheckpoints(ctx, q)
	end(err)
	return r, err
}

func (s tracedStore) ListThreads(ctx context.Context, after string, limit int) ([]ThreadInfo, error) {
	if !s.t.on(ctx) {
		return s.Store.ListThreads(ctx, after, limit)
	}
	ctx, end := s.t.span(ctx, "ListThreads")
	r, err := s.Store.ListThreads(ctx, after, limit)
	end(err)
	return r, err
}

func (s tracedStore) PutWrites(ctx context.Context, w WritesRequest) (int64, error) {
	if !s.t.on(ctx) {
		return s.Store.PutWrites(ctx, w)
	}
	ctx, end := s.t.span(ctx, "PutWrites", idAttr(w.ID))
	n, err := s.Store.PutWrites(ctx, w)
	end(err)
	return n, err
}

func (s tracedStore) DeleteCheckpoints(ctx context.Context, q DeleteQuery) (int64, error) {
	if !s.t.on(ctx) {
		return s.Store.DeleteCheckpoints(ctx, q)
	}
	ctx, end := s.t.span(ctx, "DeleteCheckpoints", q.attrs()...)
	n, err := s.Store.DeleteCheckpoints(ctx, q)
	end(err)
	return n, err
}

func (s tracedStore) PruneThreads(ctx context.Context, threadIDs []string, p Policy) (DeleteResult, error) {
	if !s.t.on(ctx) {
		return s.Store.PruneThreads(ctx, threadIDs, p)
	}
	ctx, end := s.t.span(ctx, "PruneThreads", threadsAttrs(threadIDs)...)
	r, err := s.Store.PruneThreads(ctx, threadIDs, p)
	end(err)
	return r, err
}

func (s tracedStore) PreviewPrune(ctx context.Context, threadIDs []string, p Policy) (DeleteResult, error) {
	if !s.t.on(ctx) {
		return s.Store.PreviewPrune(ctx, threadIDs, p)
	}
	ctx, end := s.t.span(ctx, "PreviewPrune", threadsAttrs(threadIDs)...)
	r, err := s.Store.PreviewPrune(ctx, threadIDs, p)
	end(err)
	return r, err
}

func (s tracedStore) Rewind(ctx context.Context, id uuid.UUID, truncate bool) (*RewindResult, error) {
	if !s.t.on(ctx) {
		return s.Store.Rewind(ctx, id, truncate)
	}
	ctx, end := s.t.span(ctx, "Rewind", idAttr(id))
	r, err := s.Store.Rewind(ctx, id, truncate)
	if err != nil {
		end(err)
		return nil, err
	}
	end(nil, threadAttrs(r.ThreadID, r.Namespace)...)
	return r, nil
}

func (s tracedStore) RewindToStep(ctx context.Context, threadID, namespace string, step int64) (uuid.UUID, *RewindResult, error) {
	if !s.t.on(ctx) {
		return s.Store.RewindToStep(ctx, threadID, namespace, step)
	}
	ctx, end := s.t.span(ctx, "RewindToStep", append(threadAttrs(threadID, namespace), attrStep.Int64(step))...)
	id, r, err := s.Store.RewindToStep(ctx, threadID, namespace, step)
	end(err)
	return id, r, err
}

func (s tracedStore) Lineage(ctx context.Context, id uuid.UUID, limit int) ([]CheckpointInfo, error) {
	if !s.t.on(ctx) {
		return s.Store.Lineage(ctx, id, limit)
	}
	ctx, end := s.t.span(ctx, "Lineage", idAttr(id))
	r, err := s.Store.Lineage(ctx, id, limit)
	end(err)
	return r, err
}

func (s tracedStore) Tree(ctx context.Context, threadID string) ([]TreeNode, error) {
	if !s.t.on(ctx) {
		return s.Store.Tree(ctx, threadID)
	}
	ctx, end := s.t.span(ctx, "Tree", attrThread.String(threadID))
	r, err := s.Store.Tree(ctx, threadID)
	end(err)
	return r, err
}

func (s tracedStore) Branch(ctx context.Context, fromID uuid.UUID, newThreadID, name string, id uuid.UUID) (BranchResult, error) {
	if !s.t.on(ctx) {
		return s.Store.Branch(ctx, fromID, newThreadID, name, id)
	}
	ctx, end := s.t.span(ctx, "Branch", idAttr(fromID), attrThread.String(newThreadID))
	r, err := s.Store.Branch(ctx, fromID, newThreadID, name, id)
	end(err)
	return r, err
}

func (s tracedStore) Branches(ctx context.Context, threadID string) ([]BranchInfo, error) {
	if !s.t.on(ctx) {
		return s.Store.Branches(ctx, threadID)
	}
	ctx, end := s.t.span(ctx, "Branches", attrThread.String(threadID))
	r, err := s.Store.Branches(ctx, threadID)
	end(err)
	return r, err
}

func (s tracedStore) Merge(ctx context.Context, branchThread, intoThread, namespace string, id uuid.UUID) (MergeResult, error) {
	if !s.t.on(ctx) {
		return s.Store.Merge(ctx, branchThread, intoThread, namespace, id)
	}
	ctx, end := s.t.span(ctx, "Merge", append(threadAttrs(intoThread, namespace), idAttr(id))...)
	r, err := s.Store.Merge(ctx, branchThread, intoThread, namespace, id)
	end(err, attrStep.Int64(r.Step))
	return r, err
}

func (s tracedStore) CopyThread(ctx context.Context, src, dst string) ([]CopiedID, error) {
	if !s.t.on(ctx) {
		return s.Store.CopyThread(ctx, src, dst)
	}
	ctx, end := s.t.span(ctx, "CopyThread", attrThread.String(src))
	ids, err := s.Store.CopyThread(ctx, src, dst)
	end(err)
	return ids, err
}

func (s tracedStore) SweepBatch(ctx context.Context, p Policy, after string, size int) (SweepBatchResult, error) {
	if !s.t.on(ctx) {
		return s.Store.SweepBatch(ctx, p, after, size)
	}
	ctx, end := s.t.span(ctx, "SweepBatch")
	r, err := s.Store.SweepBatch(ctx, p, after, size)
	end(err)
	return r, err
}

func (s tracedStore) PreviewSweepBatch(ctx context.Context, p Policy, after string, size int) (SweepBatchResult, error) {
	if !s.t.on(ctx) {
		return s.Store.PreviewSweepBatch(ctx, p, after, size)
	}
	ctx, end := s.t.span(ctx, "PreviewSweepBatch")
	r, err := s.Store.PreviewSweepBatch(ctx, p, after, size)
	end(err)
	return r, err
}

func (s tracedStore) Expiry(ctx context.Context, threadID string) (time.Time, bool, error) {
	if !s.t.on(ctx) {
		return s.Store.Expiry(ctx, threadID)
	}
	ctx, end := s.t.span(ctx, "Expiry", attrThread.String(threadID))
	at, keepLatest, err := s.Store.Expiry(ctx, threadID)
	end(err)
	return at, keepLatest, err
}

func (s tracedStore) SetExpiry(ctx context.Context, threadID string, at time.Time, p Policy) (int64, error) {
	if !s.t.on(ctx) {
		return s.Store.SetExpiry(ctx, threadID, at, p)
	}
	ctx, end := s.t.span(ctx, "SetExpiry", attrThread.String(threadID))
	n, err := s.Store.SetExpiry(ctx, threadID, at, p)
	end(err)
	return n, err
}

func (s tracedStore) Export(ctx context.Context, threadID string, opts ExportOptions, sink ExportSink) (err error) {
	if !s.t.on(ctx) {
		return s.Store.Export(ctx, threadID, opts, sink)
	}
	ctx, end := s.t.span(ctx, "Export", attrThread.String(threadID))
	returned := false // sink writes to the caller's writer
	defer endUnlessReturned(func(err error) { end(err) }, &err, &returned)
	err = s.Store.Export(ctx, threadID, opts, sink)
	returned = true
	return err
}

func (s tracedStore) Import(ctx context.Context, fn func(ImportWriter) error) (err error) {
	if !s.t.on(ctx) {
		return s.Store.Import(ctx, fn)
	}
	ctx, end := s.t.span(ctx, "Import")
	returned := false // fn reads the caller's reader, calls its Progress
	defer endUnlessReturned(func(err error) { end(err) }, &err, &returned)
	err = s.Store.Import(ctx, fn)
	returned = true
	return err
}

// errNotReturned ends the span of a call that did not return: the caller's
// code it ran (a reader, a writer, a callback) panicked or called
// runtime.Goexit. Nothing recovers the panic, which goes on as it was (a
// recover would also stop a panic(nil) under GODEBUG=panicnil=1): the span
// is ended, not left open and never exported, and says so.
var errNotReturned = errors.New("the call did not return: a panic or runtime.Goexit in the caller's code it ran")

// endUnlessReturned, deferred, ends a span with *err, or with
// errNotReturned when *returned is false.
func endUnlessReturned(end func(error), err *error, returned *bool) {
	if !*returned {
		end(errNotReturned)
		return
	}
	end(*err)
}

// call starts the span of one Engine call, the parent of the store calls
// it makes; done ends it, recording the call's error (also an error the
// Engine returned before reaching the store, such as bad input). attrs
// are copied only when the span records, so a caller's attributes of
// strings and numbers as they are cost nothing otherwise; make any other
// only when it is used (see callID).
func (t *telemetry) call(ctx context.Context, method string, attrs ...attribute.KeyValue) (context.Context, func(error)) {
	if !t.tracing() {
		return ctx, endNothing
	}
	ctx, s := t.tracer.Start(ctx, "pgcheckpoint."+method, trace.WithAttributes(slices.Clone(attrs)...))
	return ctx, func(err error) {
		if err != nil {
			s.RecordError(err)
			s.SetStatus(codes.Error, err.Error())
		}
		s.End()
	}
}

// callID is call for a method about one checkpoint: its only attribute,
// the id as text, is made only when the span records.
func (t *telemetry) callID(ctx context.Context, method string, id uuid.UUID) (context.Context, func(error)) {
	if !t.tracing() {
		return ctx, endNothing
	}
	return t.call(ctx, method, idAttr(id))
}

// endNothing is call's done when no span was started.
func endNothing(error) {}
