package integration

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// A write that finds the server's disk full (SQLSTATE 53100) is
// engine.ErrStorageFull, not ErrTransient (so Config.Retry leaves it), and
// writes nothing. The disk is real: a 2 MiB tmpfs mounted as a tablespace
// that the checkpoints table is moved to. It needs root (to mount) and a
// server on this machine (the tablespace is a directory of the server's);
// elsewhere it skips, saying why. The classification alone is tested
// without a server in package postgres (TestStorageFullClassification).
func TestFullDiskIsStorageFull(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs as a full disk")
	}
	b := setup(t)
	var dataDir string
	if err := b.db.Pool.QueryRow(b.ctx, "SHOW data_directory").Scan(&dataDir); err != nil {
		t.Skipf("cannot read the server's data directory (not a superuser?): %v", err)
	}
	st, err := os.Stat(dataDir)
	if err != nil {
		t.Skipf("the server is not on this machine (its data directory %s: %v)", dataDir, err)
	}
	owner := st.Sys().(*syscall.Stat_t)
	dir, err := os.MkdirTemp("", "pgcheckpoint-full-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	opts := "size=2m,mode=0700,uid=" + strconv.Itoa(int(owner.Uid)) + ",gid=" + strconv.Itoa(int(owner.Gid))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	space := pgx.Identifier{"pgcheckpoint_full_" + b.db.Name}.Sanitize()
	if _, err := b.db.Pool.Exec(b.ctx, "CREATE TABLESPACE "+space+" LOCATION '"+dir+"'"); err != nil {
		t.Skipf("cannot make the tmpfs a tablespace: %v", err)
	}
	t.Cleanup(func() {
		for _, q := range []string{"ALTER TABLE pgcheckpoint.checkpoints SET TABLESPACE pg_default", "DROP TABLESPACE " + space} {
			if _, err := b.db.Pool.Exec(b.ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	if _, err := b.db.Pool.Exec(b.ctx, "ALTER TABLE pgcheckpoint.checkpoints SET TABLESPACE "+space); err != nil {
		t.Fatal(err)
	}
	b.snap(t, engine.SnapshotInput{ThreadID: "t"})
	before := b.count(t)

	// 4 MB that does not compress, over the 2 MiB disk.
	noise := make([]byte, 2<<20)
	rand.Read(noise)
	state, _ := json.Marshal(map[string]string{"noise": hex.EncodeToString(noise)})
	retrying := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{Retry: engine.RetryPolicy{Attempts: 3}})
	_, err = retrying.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "t", State: state})
	if !errors.Is(err, engine.ErrStorageFull) || errors.Is(err, engine.ErrTransient) {
		t.Fatalf("snapshot on a full disk: %v; want ErrStorageFull and not ErrTransient", err)
	}
	t.Logf("snapshot on a full disk: %v", err)
	if after := b.count(t); after != before {
		t.Fatalf("the refused snapshot wrote rows: %v -> %v", before, after)
	}
}
