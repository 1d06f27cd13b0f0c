// Package readmecheck holds the one check of the README's Go code: a
// section's code block is the body of a runnable example, line for line,
// so the example's run (go test, `// Output:`) runs what the README shows.
package readmecheck

import (
	"os"
	"strings"
	"testing"
)

// SameAsExample fails t unless the first Go code block after the README
// heading line heading (as "### Title") equals the body of function fn in
// the file example: from its first line to the line before "// Output:",
// one tab of indentation removed and tabs inside shown as four spaces, as
// the README writes Go.
func SameAsExample(t testing.TB, readme, heading, example, fn string) {
	t.Helper()
	code := Block(t, readme, heading)
	src, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	ex := string(src)
	start := strings.Index(ex, "\nfunc "+fn+"() {\n")
	if start < 0 {
		t.Fatalf("%s has no func %s()", example, fn)
	}
	ex = ex[start+len("\nfunc "+fn+"() {\n"):]
	end := strings.Index(ex, "\t// Output:")
	if end < 0 {
		t.Fatalf("%s: %s has no // Output: comment", example, fn)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(ex[:end], "\n"), "\n") {
		l = strings.TrimPrefix(l, "\t")
		lines = append(lines, strings.ReplaceAll(l, "\t", "    "))
	}
	if want := strings.Join(lines, "\n") + "\n"; code != want {
		t.Fatalf("the README's code under %q differs from %s's body:\n--- README\n%s--- %s\n%s", heading, fn, code, example, want)
	}
}

// Block returns the first Go code block after the heading line heading
// of the file readme.
func Block(t testing.TB, readme, heading string) string {
	t.Helper()
	text, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(text), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", readme, heading)
	}
	_, code, ok := strings.Cut(sec, "```go\n")
	if !ok {
		t.Fatalf("%s: no Go code under %q", readme, heading)
	}
	code, _, ok = strings.Cut(code, "```")
	if !ok {
		t.Fatalf("%s: the Go code under %q does not end", readme, heading)
	}
	return code
}
