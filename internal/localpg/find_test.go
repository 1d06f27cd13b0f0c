package localpg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeInstall makes dir with fake, executable versions of the named
// binaries.
func fakeInstall(t *testing.T, dir string, names ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakePgConfig makes dir/pg_config print bindir for --bindir.
func fakePgConfig(t *testing.T, dir, bindir string) {
	t.Helper()
	script := "#!/bin/sh\n[ \"$1\" = --bindir ] && echo '" + bindir + "' && exit 0\nexit 1\n"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pg_config"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// isolateSearch makes Find see only PATH=path and the given well-known
// patterns, for the rest of the test.
func isolateSearch(t *testing.T, path string, wellKnown ...string) {
	t.Setenv(EnvDirs, "")
	os.Unsetenv(EnvDirs)
	t.Setenv("PATH", path)
	saved := wellKnownDirs
	wellKnownDirs = wellKnown
	t.Cleanup(func() { wellKnownDirs = saved })
}

func TestFindSearchOrder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake binaries are shell scripts")
	}
	all := []string{"initdb", "pg_ctl", "postgres"}
	root := t.TempDir()
	onPath := fakeInstall(t, filepath.Join(root, "path"), all...)
	partial := fakeInstall(t, filepath.Join(root, "partial"), "initdb", "pg_ctl") // no postgres
	configured := fakeInstall(t, filepath.Join(root, "configured"), all...)
	tools := filepath.Join(root, "tools")
	fakePgConfig(t, tools, configured)
	debian := filepath.Join(root, "lib", "postgresql")
	fakeInstall(t, filepath.Join(debian, "9.6", "bin"), all...)
	v10 := fakeInstall(t, filepath.Join(debian, "10", "bin"), all...)
	fakeInstall(t, filepath.Join(debian, "16", "bin"), "initdb", "pg_ctl") // incomplete: skipped
	brew := fakeInstall(t, filepath.Join(root, "brew", "bin"), all...)
	noExec := fakeInstall(t, filepath.Join(root, "noexec"), all...)
	if err := os.Chmod(filepath.Join(noExec, "postgres"), 0o644); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(root, "linked")
	if err := os.MkdirAll(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(v10, "initdb"), filepath.Join(linked, "initdb")); err != nil {
		t.Fatal(err)
	}
	wellKnown := []string{filepath.Join(debian, "*", "bin"), filepath.Join(root, "brew", "bin")}
	list := func(dirs ...string) string { return strings.Join(dirs, string(os.PathListSeparator)) }

	for _, tc := range []struct {
		name      string
		path      string
		wellKnown []string
		want      string
	}{
		{"PATH before pg_config", list(partial, onPath, tools), wellKnown, onPath},
		{"a relative PATH entry is ignored", list("relative", tools), wellKnown, configured},
		{"pg_config when PATH has no complete set", list(partial, noExec, tools), wellKnown, configured},
		{"an initdb symlink on PATH counts through its target", list(linked, tools), wellKnown, v10},
		{"well-known places, newest complete version first", list(partial), wellKnown, v10},
		{"well-known places in their order", list(partial), []string{filepath.Join(root, "none*"), wellKnown[1], wellKnown[0]}, brew},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolateSearch(t, tc.path, tc.wellKnown...)
			got, err := Find()
			if err != nil || got != tc.want {
				t.Fatalf("Find() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}

	t.Run("nothing found", func(t *testing.T) {
		isolateSearch(t, list(partial, noExec), filepath.Join(root, "none*"))
		_, err := Find()
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Find() error %v, want ErrNotFound", err)
		}
		for _, want := range []string{"PATH", "pg_config", EnvDirs, "none*"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		if _, err := Start(context.Background(), Options{TempDir: t.TempDir()}); !errors.Is(err, ErrNotFound) {
			t.Errorf("Start() error %v, want ErrNotFound", err)
		}
	})

	t.Run(EnvDirs+" replaces the search", func(t *testing.T) {
		isolateSearch(t, list(onPath, tools), wellKnown...)
		t.Setenv(EnvDirs, list(partial, brew, configured))
		if got, err := Find(); err != nil || got != brew {
			t.Fatalf("Find() = %q, %v; want %q", got, err, brew)
		}
		t.Setenv(EnvDirs, "")
		if got, err := Find(); !errors.Is(err, ErrNotFound) {
			t.Fatalf("with %s empty, Find() = %q, %v; want ErrNotFound", EnvDirs, got, err)
		}
	})
}

func TestVersionOrder(t *testing.T) {
	in := []string{"/p/9.6/bin", "/p/10/bin", "/p/16/bin", "/p/9/bin", "/p/16.2/bin", "/p/x/bin"}
	dir := t.TempDir()
	for _, p := range in {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := globNewestFirst(filepath.Join(dir, "p", "*", "bin"))
	for i := range got {
		got[i] = strings.TrimPrefix(got[i], dir)
	}
	want := "/p/16.2/bin /p/16/bin /p/10/bin /p/9.6/bin /p/9/bin /p/x/bin"
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}
