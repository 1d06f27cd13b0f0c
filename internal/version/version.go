// Package version says which pgcheckpoint a command is: the module version
// and VCS revision the Go toolchain recorded in the binary, and the schema
// versions the binary migrates to and expects. ckpt --version and
// migrate --version print it:
//
//	fmt.Print(version.String("ckpt"))
package version

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// Devel is the module version of a binary built from a source tree rather
// than from a tagged module (go install ...@v0.1.0): the Go toolchain's own
// word for it.
const Devel = "(devel)"

// Info is what a binary knows of its own version.
type Info struct {
	Command  string // the command's name, e.g. "ckpt"
	Module   string // the main module's path ("" when the build info has none)
	Version  string // the module version, e.g. "v0.1.0", or Devel
	Revision string // the VCS revision, "" when none was recorded
	Time     string // the revision's commit time (RFC 3339), "" when none
	Modified bool   // the source tree had changes the revision does not hold
	Go       string // the Go toolchain, e.g. "go1.26.0"

	// The schema versions this binary migrates to and expects: the latest
	// Postgres migration (package schema) and the latest SQLite one
	// (package sqlite).
	Postgres uint
	SQLite   uint
}

// Read returns the running binary's Info.
func Read(command string) Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return FromBuildInfo(command, bi)
}

// FromBuildInfo returns the Info of a binary with build info bi (nil: the
// binary has none, as when built without module support).
func FromBuildInfo(command string, bi *debug.BuildInfo) Info {
	in := Info{Command: command, Version: Devel, Postgres: schema.Latest(), SQLite: sqlite.LatestVersion()}
	if bi == nil {
		return in
	}
	in.Module, in.Go = bi.Main.Path, bi.GoVersion
	if v := bi.Main.Version; v != "" {
		in.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is what COMMAND --version prints: the running binary's Info, one
// fact a line.
func String(command string) string { return Read(command).String() }

// String spells in as --version prints it, e.g.
//
//	ckpt v0.1.0
//	module   github.com/pgcheckpoint/pgcheckpoint
//	revision 3f2a9c1e... (2026-11-27T12:00:00Z)
//	schema   Postgres version 18, SQLite version 1
//	go       go1.26.0
//
// A binary built from a source tree says "(devel)" as its version, and a
// build that recorded no revision says so.
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", in.Command, in.Version)
	if in.Module != "" {
		fmt.Fprintf(&b, "module   %s\n", in.Module)
	}
	switch {
	case in.Revision == "":
		b.WriteString("revision none recorded by the build\n")
	default:
		rev := in.Revision
		if in.Time != "" {
			rev += " (" + in.Time + ")"
		}
		if in.Modified {
			rev += ", with uncommitted changes"
		}
		fmt.Fprintf(&b, "revision %s\n", rev)
	}
	fmt.Fprintf(&b, "schema   Postgres version %d, SQLite version %d\n", in.Postgres, in.SQLite)
	if in.Go != "" {
		fmt.Fprintf(&b, "go       %s\n", in.Go)
	}
	return b.String()
}
