package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// EnvDirs names the environment variable that, when set, replaces Find's
// whole search: Find looks only in the directories it lists (separated by
// the OS's path list separator, ':' on Unix), in order. Set to the empty
// string, it makes Find report ErrNotFound, which is how the "nothing
// installed" paths of the demo and the test harness are tested.
const EnvDirs = "PGCHECKPOINT_LOCALPG_DIRS"

// ErrNotFound is returned (wrapped, with where Find looked) when no
// directory holds all of initdb, pg_ctl and postgres.
var ErrNotFound = errors.New("localpg: no PostgreSQL server binaries (initdb, pg_ctl, postgres) found")

// serverBinaries must all be in one directory for it to count.
var serverBinaries = []string{"initdb", "pg_ctl", "postgres"}

// wellKnownDirs are the places searched after PATH and pg_config, as glob
// patterns; the matches of one pattern are tried newest version first.
// Tests replace it.
var wellKnownDirs = []string{
	"/usr/lib/postgresql/*/bin",          // Debian, Ubuntu
	"/usr/pgsql-*/bin",                   // Red Hat and its kin (PGDG packages)
	"/opt/homebrew/opt/postgresql@*/bin", // Homebrew, Apple silicon
	"/usr/local/opt/postgresql@*/bin",    // Homebrew, Intel
	"/opt/homebrew/bin",
	"/usr/local/bin",
}

// pgConfigTimeout bounds the run of pg_config.
const pgConfigTimeout = 5 * time.Second

// Find returns a directory holding the PostgreSQL server binaries initdb,
// pg_ctl and postgres. It looks, in order: in the directories on PATH (an
// initdb that is a symbolic link also counts through the directory it
// points into); in the directory `pg_config --bindir` prints; in the usual
// install locations (see the package doc). EnvDirs, when set, replaces that
// search. The error wraps ErrNotFound when no directory qualifies.
func Find() (binDir string, err error) {
	if v, ok := os.LookupEnv(EnvDirs); ok {
		for _, dir := range filepath.SplitList(v) {
			if dir != "" && hasServer(dir) {
				return dir, nil
			}
		}
		return "", fmt.Errorf("%w in %s=%q", ErrNotFound, EnvDirs, v)
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue // like exec.LookPath: never a binary relative to the working directory
		}
		if hasServer(dir) {
			return dir, nil
		}
		if target, err := filepath.EvalSymlinks(filepath.Join(dir, exe("initdb"))); err == nil {
			if real := filepath.Dir(target); real != dir && hasServer(real) {
				return real, nil
			}
		}
	}
	if dir := pgConfigBinDir(); dir != "" && hasServer(dir) {
		return dir, nil
	}
	for _, pattern := range wellKnownDirs {
		for _, dir := range globNewestFirst(pattern) {
			if hasServer(dir) {
				return dir, nil
			}
		}
	}
	return "", fmt.Errorf("%w on PATH, via pg_config --bindir, or in %s; install the PostgreSQL server "+
		"(e.g. apt-get install postgresql, dnf install postgresql-server, brew install postgresql@16) "+
		"or set %s to the directory that holds them",
		ErrNotFound, strings.Join(wellKnownDirs, ", "), EnvDirs)
}

// hasServer reports whether dir holds every server binary as an executable
// file.
func hasServer(dir string) bool {
	for _, name := range serverBinaries {
		fi, err := os.Stat(filepath.Join(dir, exe(name)))
		if err != nil || !fi.Mode().IsRegular() {
			return false
		}
		if runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// pgConfigBinDir returns what the pg_config on PATH prints for --bindir, or
// "" when there is none or it fails.
func pgConfigBinDir() string {
	path, err := exec.LookPath("pg_config")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgConfigTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--bindir")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	dir := strings.TrimSpace(string(out))
	if !filepath.IsAbs(dir) {
		return ""
	}
	return dir
}

// globNewestFirst returns the matches of pattern, those with the highest
// version numbers in their paths first (so 16 comes before 9.6).
func globNewestFirst(pattern string) []string {
	matches, _ := filepath.Glob(pattern)
	sort.SliceStable(matches, func(i, j int) bool {
		return compareVersions(versionNumbers(matches[i]), versionNumbers(matches[j])) > 0
	})
	return matches
}

// versionNumbers returns the runs of digits in s as numbers, in order.
func versionNumbers(s string) []int {
	var nums []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		n, err := strconv.Atoi(f)
		if err != nil {
			n = int(^uint(0) >> 1) // absurdly long: sorts first, and hasServer decides
		}
		nums = append(nums, n)
	}
	return nums
}

// compareVersions compares number lists element by element; a longer list
// whose prefix equals the shorter one is the greater.
func compareVersions(a, b []int) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] > b[i] {
				return 1
			}
			return -1
		}
	}
	return len(a) - len(b)
}

// exe adds the executable suffix of the OS to name.
func exe(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}
