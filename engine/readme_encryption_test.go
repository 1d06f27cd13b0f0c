package engine_test

import (
	"os"
	"strings"
	"testing"
)

// The README's "Encryption at rest" code is in ExampleEngine_ShredThread,
// line by line, so the example's run checks what the README shows.
func TestReadmeEncryptionCodeIsTheExamples(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("encrypt_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "### Encryption at rest\n")
	if !ok {
		t.Fatal(`README has no section "Encryption at rest"`)
	}
	_, code, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the section has no Go code")
	}
	code, _, _ = strings.Cut(code, "```")
	for _, line := range strings.Split(code, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.Contains(string(example), line) {
			t.Errorf("README line %q is not in ExampleEngine_ShredThread", line)
		}
	}
}
