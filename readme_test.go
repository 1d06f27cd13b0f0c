package pgcheckpoint_test

import (
	"os"
	"strings"
	"testing"
)

// The code of the README's "Tenants in the API and on SQLite" is
// Example_tenants' body, so CI compiles and runs what the README shows.
func TestReadmeShowsTheTenantExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(readme)
	start := strings.Index(sec, "\n### Tenants in the API and on SQLite\n")
	if start < 0 {
		t.Fatal("README has no section \"Tenants in the API and on SQLite\"")
	}
	sec = sec[start:]
	code := sec[strings.Index(sec, "```go\n")+6:]
	code = code[:strings.Index(code, "```")]
	ex := string(example)
	ex = ex[strings.Index(ex, "func Example_tenants()"):]
	body := ex[strings.Index(ex, "\tctx := context.Background()"):strings.Index(ex, "\t// Output:")]
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		l = strings.TrimPrefix(l, "\t")
		lines = append(lines, strings.ReplaceAll(l, "\t", "    "))
	}
	if want := strings.Join(lines, "\n") + "\n"; code != want {
		t.Fatalf("the README's tenant code differs from Example_tenants' body:\n--- README\n%s--- example\n%s", code, want)
	}
}
