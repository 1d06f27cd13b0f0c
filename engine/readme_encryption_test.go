package engine_test

import (
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/internal/readmecheck"
)

// The README's "Encryption at rest" code is ExampleEngine_ShredThread's
// body, so the example's run checks what the README shows.
func TestReadmeShowsTheEncryptionExample(t *testing.T) {
	readmecheck.SameAsExample(t, "../README.md", "### Encryption at rest", "encrypt_example_test.go", "ExampleEngine_ShredThread")
}
