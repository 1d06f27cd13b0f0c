package eino_test

import (
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/internal/readmecheck"
)

// The README's "Using with Eino" code is Example's body, so CI compiles
// and runs what the README shows.
func TestReadmeShowsTheExample(t *testing.T) {
	readmecheck.SameAsExample(t, "../../README.md", "### Using with Eino", "example_test.go", "Example")
}
