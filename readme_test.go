package pgcheckpoint_test

import (
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/internal/readmecheck"
)

// The code of the README's "Tenants in the API and on SQLite" is
// Example_tenants' body, so CI compiles and runs what the README shows.
func TestReadmeShowsTheTenantExample(t *testing.T) {
	readmecheck.SameAsExample(t, "README.md", "### Tenants in the API and on SQLite", "example_test.go", "Example_tenants")
}
