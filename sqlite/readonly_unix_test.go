//go:build unix

package sqlite_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// A database this process may not write (the file, its directory, or both
// read-only) opens for reading, with or without Options.Migrate: opening
// and reading leave the file's bytes as they were, reads return what was
// written, and every kind of write fails with engine.ErrPermission. A
// read-only file that would need migrating, or creating, is
// engine.ErrPermission too. Root may write any file whatever its mode, so
// as root the test runs itself as user nobody.
func TestReadOnlyFileOpensForReading(t *testing.T) {
	if os.Geteuid() == 0 {
		runAsNobody(t)
		return
	}
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		file, dir os.FileMode
	}{
		{"read-only file", 0o444, 0o755},
		{"read-only directory", 0o644, 0o555},
		{"both", 0o444, 0o555},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
			path := filepath.Join(dir, "agent.db")
			head, export := seedFile(t, path)
			if err := os.Chmod(path, c.file); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, c.dir); err != nil {
				t.Fatal(err)
			}
			if unix.Access(path, unix.W_OK) == nil && unix.Access(dir, unix.W_OK) == nil {
				t.Skip("this user may write the file whatever its mode")
			}
			sum := fileSum(t, path)
			for _, migrate := range []bool{false, true} {
				s, err := sqlite.Open(ctx, path, sqlite.Options{Migrate: migrate})
				if err != nil {
					t.Fatalf("open (migrate %v): %v", migrate, err)
				}
				eng := engine.New(s, engine.Config{})
				if got, err := eng.Latest(ctx, "t"); err != nil || got.ID != head {
					t.Fatalf("latest: %v %v, want %s", got, err, head)
				}
				var buf bytes.Buffer
				if _, err := eng.Export(ctx, "t", &buf); err != nil || buf.String() != export {
					t.Fatalf("export: %v\n%s\nwant\n%s", err, buf.String(), export)
				}
				for what, write := range writes(ctx, eng, head, export) {
					if err := write(); !errors.Is(err, engine.ErrPermission) {
						t.Errorf("%s: %v, want ErrPermission", what, err)
					}
				}
				if err := eng.Close(); err != nil {
					t.Fatal(err)
				}
				if got := fileSum(t, path); got != sum {
					t.Fatalf("migrate %v: the file changed", migrate)
				}
			}
		})
	}

	// A read-only file that would need migrating, and a file a read-only
	// directory cannot hold.
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(ctx, empty, sqlite.Options{Migrate: true}); !errors.Is(err, engine.ErrPermission) {
		t.Errorf("migrate a read-only empty file: %v, want ErrPermission", err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	if _, err := sqlite.Open(ctx, filepath.Join(dir, "new.db"), sqlite.Options{Migrate: true}); !errors.Is(err, engine.ErrPermission) {
		t.Errorf("create a file in a read-only directory: %v, want ErrPermission", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the read-only directory holds %d files", len(ents))
	}
}

// seedFile writes a thread "t" of two checkpoints, with a pending write,
// to a new file at path, and returns its head and its export.
func seedFile(t *testing.T, path string) (head [16]byte, export string) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(s, engine.Config{})
	defer eng.Close()
	var res engine.SnapshotResult
	for i := range 2 {
		if res, err = eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.PutWrites(ctx, res.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := eng.Export(ctx, "t", &buf); err != nil {
		t.Fatal(err)
	}
	return res.ID, buf.String()
}

// writes are the Engine's calls that write, each on the thread "t".
func writes(ctx context.Context, eng *engine.Engine, head [16]byte, export string) map[string]func() error {
	return map[string]func() error{
		"snapshot": func() error { _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); return err },
		"snapshot of a new thread": func() error {
			_, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "new"})
			return err
		},
		"append": func() error {
			_, err := eng.Append(ctx, engine.AppendInput{ThreadID: "t", SetState: json.RawMessage(`{"a":1}`)})
			return err
		},
		"pending writes": func() error {
			_, err := eng.PutWrites(ctx, head, "task2", []engine.Write{{Channel: "c", Value: json.RawMessage(`2`)}})
			return err
		},
		"rewind": func() error { _, err := eng.RewindToStep(ctx, "t", 1); return err },
		"branch": func() error { _, err := eng.Branch(ctx, head, "b"); return err },
		"copy":   func() error { _, err := eng.CopyThread(ctx, "t", "t2"); return err },
		"delete": func() error { _, err := eng.DeleteThreads(ctx, "t"); return err },
		"prune":  func() error { _, err := eng.PruneThreads(ctx, engine.KeepLastN(1), "t"); return err },
		"expiry": func() error { return eng.SetThreadExpiry(ctx, "t", time.Now().Add(time.Hour), engine.KeepLatest()) },
		"import": func() error {
			_, err := eng.Import(ctx, strings.NewReader(strings.ReplaceAll(export, `"t"`, `"t3"`)), engine.ImportOptions{})
			return err
		},
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// runAsNobody runs the calling test again in a copy of this test binary as
// user nobody (65534), in a directory it owns, and fails or skips as that
// run does.
func runAsNobody(t *testing.T) {
	const nobody = 65534
	dir, err := os.MkdirTemp("", "pgcheckpoint-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	t.Logf("as user nobody:\n%s", out)
	if err != nil {
		t.Fatalf("as user nobody: %v", err)
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		t.Skip("skipped as user nobody")
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
