package eino_test

import (
	"os"
	"strings"
	"testing"
)

// The README's "Using with Eino" code is Example's body, so CI compiles
// and runs what the README shows.
func TestReadmeShowsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(readme)
	start := strings.Index(sec, "### Using with Eino")
	if start < 0 {
		t.Fatal("README has no section \"Using with Eino\"")
	}
	sec = sec[start:]
	code := sec[strings.Index(sec, "```go\n")+6:]
	code = code[:strings.Index(code, "```")]
	ex := string(example)
	body := ex[strings.Index(ex, "\tctx := context.Background()"):strings.Index(ex, "\t// Output:")]
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		l = strings.TrimPrefix(l, "\t")
		lines = append(lines, strings.ReplaceAll(l, "\t", "    "))
	}
	if want := strings.Join(lines, "\n") + "\n"; code != want {
		t.Fatalf("the README's Eino code differs from Example's body:\n--- README\n%s--- example\n%s", code, want)
	}
}
