//go:build linux

package sqlite_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// On a filesystem that fills up (a 1 MiB tmpfs; mounting one needs root),
// the write that finds no room fails with engine.ErrStorageFull, which is
// not ErrTransient, and writes nothing; once space is freed, the same
// write with the same id succeeds and reads back.
func TestFullDiskIsStorageFull(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a 1 MiB tmpfs (root only): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	// Room to free later.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 256<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "agent.db"), sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(s, engine.Config{FullSnapshots: true})
	defer eng.Close()
	var in engine.SnapshotInput
	var before bytes.Buffer
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("100 writes of 64 KiB fit in 1 MiB")
		}
		before.Reset()
		if i > 0 {
			if _, err := eng.Export(ctx, "t", &before); err != nil {
				t.Fatal(err)
			}
		}
		b := make([]byte, 32<<10)
		rand.Read(b)
		in = engine.SnapshotInput{ThreadID: "t", ID: engine.NewCheckpointID(), State: json.RawMessage(`{"r":"` + hex.EncodeToString(b) + `"}`)}
		_, err = eng.Snapshot(ctx, in)
		if err != nil {
			break
		}
	}
	if !errors.Is(err, engine.ErrStorageFull) || errors.Is(err, engine.ErrTransient) {
		t.Fatalf("the write that filled the disk: %v, want ErrStorageFull, not ErrTransient", err)
	}
	t.Logf("full: %v", err)
	var after bytes.Buffer
	if _, err := eng.Export(ctx, "t", &after); err != nil {
		t.Fatal(err)
	}
	if after.String() != before.String() {
		t.Fatal("the refused write changed the thread")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	res, err := eng.Snapshot(ctx, in)
	if err != nil || !res.Created {
		t.Fatalf("the same write after space was freed: %+v %v", res, err)
	}
	got, err := eng.Get(ctx, in.ID)
	if err != nil || !bytes.Equal(got.State, in.State) {
		t.Fatalf("read back: %v", err)
	}
}
