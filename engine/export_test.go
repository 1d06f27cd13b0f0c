package engine

import (
	"context"

	"github.com/google/uuid"
)

// TelemetryOfGet runs what Engine.Get and tracedStore.Get run around the
// store's Get when tracedStore finds telemetry off, and reports whether
// telemetry was on. For the tests of package engine_test.
func TelemetryOfGet(ctx context.Context, eng *Engine, id uuid.UUID) bool {
	ctx, done := eng.tel.callID(ctx, "Get", id)
	on := eng.tel.on(ctx)
	done(nil)
	return on
}

// TelemetryOfCall runs the span of an Engine call with attributes.
func TelemetryOfCall(ctx context.Context, eng *Engine) {
	_, done := eng.tel.call(ctx, "LatestIn", attrThread.String("bench"), attrNamespace.String(""))
	done(nil)
}
