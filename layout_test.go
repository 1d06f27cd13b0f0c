package pgcheckpoint_test

import (
	"os"
	"os/exec"
	"regexp"
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

// The Eino adapter requires the core by a version, as a consumer's build
// sees it: no replace (a consumer's build ignores one), and the version of
// the CHANGELOG's newest section. go.work uses both modules, so the
// repository builds and tests the adapter against the core beside it.
func TestAdapterRequiresTheCoreByVersion(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mod := read("adapters/eino/go.mod")
	if regexp.MustCompile(`(?m)^\s*replace\b`).MatchString(mod) {
		t.Errorf("adapters/eino/go.mod has a replace directive:\n%s", mod)
	}
	req := regexp.MustCompile(`(?m)^\s*github\.com/pgcheckpoint/pgcheckpoint (v\S+)`).FindStringSubmatch(mod)
	latest := regexp.MustCompile(`(?m)^## (\d+\.\d+\.\d+)`).FindStringSubmatch(read("CHANGELOG.md"))
	if req == nil || latest == nil || req[1] != "v"+latest[1] {
		t.Errorf("adapters/eino/go.mod requires the core at %v; the CHANGELOG's newest version is %v", req, latest)
	}
	work := read("go.work")
	for _, use := range []string{"\t.\n", "\t./adapters/eino\n"} {
		if !strings.Contains(work, use) {
			t.Errorf("go.work does not use %q:\n%s", strings.TrimSpace(use), work)
		}
	}
}
