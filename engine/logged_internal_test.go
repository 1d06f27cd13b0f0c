package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// A log line shows an error's message escaped, whoever wrote it (a key
// provider's message may quote a thread id as it is), and the error stays
// itself for errors.Is.
func TestLoggedErrorEscapes(t *testing.T) {
	err := fmt.Errorf("provider: thread t\x1b[2J\u202e\u0085: %w", ErrTransient)
	got := loggedError{err}
	if c := termsafe.First(got.Error()); c >= 0 {
		t.Fatalf("the message holds %U: %q", c, got.Error())
	}
	if got.Error() != termsafe.Text(err.Error()) {
		t.Fatalf("message %q", got.Error())
	}
	if !errors.Is(got, ErrTransient) {
		t.Fatal("errors.Is does not see the error")
	}
}
