package version_test

import (
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/internal/version"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

func TestFromBuildInfo(t *testing.T) {
	released := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/pgcheckpoint/pgcheckpoint", Version: "v0.1.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "3f2a9c1e0d4b5a6978877665544332211aabbccd"},
			{Key: "vcs.time", Value: "2026-11-27T12:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	schemas := fmt.Sprintf("schema   Postgres version %d, SQLite version %d\n", schema.Latest(), sqlite.LatestVersion())
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"a tagged module with its revision", released, "ckpt v0.1.0\n" +
			"module   github.com/pgcheckpoint/pgcheckpoint\n" +
			"revision 3f2a9c1e0d4b5a6978877665544332211aabbccd (2026-11-27T12:00:00Z), with uncommitted changes\n" +
			schemas + "go       go1.26.0\n"},
		{"a source tree, no VCS information", &debug.BuildInfo{GoVersion: "go1.26.0",
			Main: debug.Module{Path: "github.com/pgcheckpoint/pgcheckpoint", Version: "(devel)"}}, "ckpt (devel)\n" +
			"module   github.com/pgcheckpoint/pgcheckpoint\n" +
			"revision none recorded by the build\n" +
			schemas + "go       go1.26.0\n"},
		{"no build info at all", nil, "ckpt (devel)\n" +
			"revision none recorded by the build\n" + schemas},
	} {
		if got := version.FromBuildInfo("ckpt", c.bi).String(); got != c.want {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}

// The running binary's own: this test binary's version is the toolchain's
// "(devel)" or a module version, and the schema versions are the
// packages'.
func TestRead(t *testing.T) {
	in := version.Read("migrate")
	if in.Command != "migrate" || in.Version == "" || in.Postgres != schema.Latest() || in.SQLite != sqlite.LatestVersion() {
		t.Errorf("Read = %+v", in)
	}
	if s := version.String("migrate"); !strings.HasPrefix(s, "migrate "+in.Version+"\n") {
		t.Errorf("String = %q", s)
	}
}

func ExampleInfo_String() {
	in := version.Info{
		Command: "migrate", Module: "github.com/pgcheckpoint/pgcheckpoint", Version: "v0.1.0",
		Revision: "3f2a9c1e0d4b5a6978877665544332211aabbccd", Time: "2026-11-27T12:00:00Z",
		Go: "go1.26.0", Postgres: 1, SQLite: 1,
	}
	fmt.Print(in)
	// Output:
	// migrate v0.1.0
	// module   github.com/pgcheckpoint/pgcheckpoint
	// revision 3f2a9c1e0d4b5a6978877665544332211aabbccd (2026-11-27T12:00:00Z)
	// schema   Postgres version 1, SQLite version 1
	// go       go1.26.0
}
