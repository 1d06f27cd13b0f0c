package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
)

// TestImportHugeLineMemory feeds `ckpt import`, on both stores, an export
// whose third line is 2 GiB long, through a pipe, and measures the
// process: it refuses the line (ErrSnapshotTooLarge) after reading at most
// the longest line an import reads under the default limit (4 *
// engine.DefaultMaxSnapshotBytes + 64 KiB, 40 MiB) and a few buffers, with
// a peak RSS (as /usr/bin/time reports it) of a few times that (at most 8),
// and writes nothing.
func TestImportHugeLineMemory(t *testing.T) {
	t.Parallel()
	enginetest.SkipLong(t, "a 2 GiB line's peak memory")
	const timeBin = "/usr/bin/time"
	if _, err := os.Stat(timeBin); err != nil {
		t.Skipf("%s is needed to measure peak RSS: %v", timeBin, err)
	}
	bin := buildCommand(t, "ckpt")
	lineMax := int64(4*engine.DefaultMaxSnapshotBytes + 64<<10)
	sqliteFile := filepath.Join(t.TempDir(), "huge.db")
	eng, err := pgcheckpoint.Open(context.Background(), "sqlite:"+sqliteFile, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	pg := pgtest.NewDB(t)
	for _, store := range []struct{ name, url string }{{"postgres", pg.URL}, {"sqlite", "sqlite:" + sqliteFile}} {
		head := `{"kind":"pgcheckpoint-export","format":3,"thread_id":"huge"}` + "\n" +
			`{"kind":"thread","thread_id":"huge","namespace":"","metadata":{},"created_at":"2026-01-01T00:00:00Z"}` + "\n" +
			`{"kind":"checkpoint","thread_id":"huge","namespace":"","seq":1,"messages":[{"role":"user","content":"`
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		written := make(chan int64, 1)
		go func() {
			defer pw.Close()
			n, _ := pw.Write([]byte(head))
			total := int64(n)
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			for total < 2<<30 {
				n, err := pw.Write(chunk)
				total += int64(n)
				if err != nil {
					break // the import stopped reading
				}
			}
			written <- total
		}()
		cmd := exec.Command(timeBin, "-f", "maxrss_kib %M", bin, "import")
		cmd.Env = []string{"DATABASE_URL=" + store.url}
		cmd.Stdin = pr
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pr.Close() // the child's copy is the only reader: when it exits, writes fail
		err = cmd.Wait()
		took := time.Since(start)
		read := <-written
		var rss int64
		if i := bytes.LastIndex(stderr.Bytes(), []byte("maxrss_kib ")); i >= 0 {
			kib, _ := strconv.ParseInt(string(bytes.TrimSpace(stderr.Bytes()[i+len("maxrss_kib "):])), 10, 64)
			rss = kib << 10
		}
		want := fmt.Sprintf("record 3: %v: the line is longer than %d bytes", engine.ErrSnapshotTooLarge, lineMax)
		if err == nil || !bytes.Contains(stderr.Bytes(), []byte(want)) {
			t.Fatalf("%s: ckpt import of a 2 GiB line: %v\n%s%s\nwant %q", store.name, err, stdout.Bytes(), stderr.Bytes(), want)
		}
		// What the child read: what was written, less what the pipe held.
		if read > lineMax+int64(len(head))+2<<20 {
			t.Errorf("%s: %d bytes went into the pipe before the import stopped; it reads at most %d of a line", store.name, read, lineMax)
		}
		if rss == 0 || rss > 8*lineMax {
			t.Errorf("%s: peak RSS %d bytes, want some, and at most 8 times the longest line (not the whole 2 GiB)", store.name, rss)
		}
		t.Logf("%s: refused after %.1f MiB into the pipe (the line bound: %.1f MiB), in %.1fs, peak RSS %.0f MiB",
			store.name, mb(read), mb(lineMax), took.Seconds(), mb(rss))
		check, err := pgcheckpoint.Open(context.Background(), store.url, pgcheckpoint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		threads, err := check.ListThreads(context.Background(), engine.ThreadListOptions{})
		check.Close()
		if err != nil || len(threads) != 0 {
			t.Fatalf("%s: after the refused import: threads %v, %v", store.name, threads, err)
		}
	}
}
