//go:debug panicnil=1

package engine_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// nilPanicReader panics with nil: under GODEBUG=panicnil=1 (this test
// binary's, by the directive above) recover then returns nil.
type nilPanicReader struct{}

func (nilPanicReader) Read([]byte) (int, error) { panic(nil) }

// returns reports whether f returned, where a panic or runtime.Goexit in it
// does not: under panicnil=1 a panic(nil) that code stopped with recover
// would come back as a return.
func returns(f func()) bool {
	done := make(chan bool)
	go func() {
		ok := false
		defer func() {
			_ = recover()
			done <- ok
		}()
		f()
		ok = true
	}()
	return <-done
}

// A panic(nil) in the caller's code under GODEBUG=panicnil=1 goes on as a
// panic: an Import whose reader panics so does not return (it returned an
// empty import, no error), nor a wrapped tool or a scope's function
// (recorded as a runtime.Goexit, and the wrapper returned a zero result);
// the wrapped tool's panic is recorded.
func TestPanicOfNilGoesOn(t *testing.T) {
	ctx := context.Background()
	eng, _ := tracedEngine(t, engine.Config{})
	if returns(func() {
		_, _ = eng.Import(ctx, io.MultiReader(strings.NewReader(""), nilPanicReader{}), engine.ImportOptions{})
	}) {
		t.Error("an Import whose reader panicked with nil returned")
	}
	tool := engine.WrapTool(eng, "t", "boom", func(context.Context, int) (int, error) { panic(nil) })
	if returns(func() { _, _ = tool(ctx, 1) }) {
		t.Error("a wrapped tool that panicked with nil returned")
	}
	if head, err := eng.Latest(ctx, "t"); err != nil || !strings.Contains(head.Summary, "panic") {
		t.Errorf("the wrapped tool's panic: %v; the head's summary: %q", err, head.Summary)
	}
	if returns(func() { _ = eng.Scope(ctx, "s", nil, func(context.Context) error { panic(nil) }) }) {
		t.Error("a scope whose function panicked with nil returned")
	}
}
