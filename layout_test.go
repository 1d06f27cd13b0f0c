package pgcheckpoint_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The house shows its architecture: the Engine imports no store, and each
// store package imports the Engine (go list -deps, tests excluded).
func TestStoresStandBesideTheEngine(t *testing.T) {
	t.Parallel()
	const module = "github.com/pgcheckpoint/pgcheckpoint/"
	deps := func(pkg string) []string {
		t.Helper()
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v\n%s", pkg, err, out)
		}
		return strings.Fields(string(out))
	}
	stores := []string{"postgres", "sqlite"}
	engineDeps := deps("engine")
	for _, store := range stores {
		if slices.Contains(engineDeps, module+store) {
			t.Errorf("package engine imports the %s store", store)
		}
		if !slices.Contains(deps(store), module+"engine") {
			t.Errorf("the %s store does not import package engine", store)
		}
	}
	for _, d := range engineDeps {
		if strings.HasPrefix(d, module+"internal/enginedb") || d == module+"db" {
			t.Errorf("package engine imports %s, a Postgres store's plumbing", d)
		}
	}
}
