package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
)

// TestExportMemory measures `ckpt import` and `ckpt export` on a long
// thread, on both stores: the peak RSS of each process (as /usr/bin/time
// reports it), the export's size and the stored size. It runs when
// PGCHECKPOINT_EXPORT_MEASURE gives the number of checkpoints:
//
//	PGCHECKPOINT_EXPORT_MEASURE=20000 go test -run TestExportMemory -v ./integration/
//
// Writing such a thread through Snapshot would send the whole conversation
// at every step (20,000 steps of a conversation growing 1 KB a step send
// 200 GB), so the test writes the export itself, as the stores would store
// the thread with the default DeltaRun (50): one message of about 1 KB and
// a changed state key per step, a delta on the parent for 49 steps, then a
// delta on the run's anchor, then after 49 anchors a whole checkpoint. The
// import then checks every line as any import does, and the export of the
// imported thread must hold the same rows. PGCHECKPOINT_EXPORT_MEASURE_RUN
// sets another run limit: with a long one (200) the thread's only whole
// checkpoint is its first, so memory can be told from the largest row.
// The import holds each checkpoint to the default MaxSnapshotBytes (10
// MiB): past about 10,000 checkpoints this thread's are over it, and the
// import refuses them.
func TestExportMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PGCHECKPOINT_EXPORT_MEASURE"))
	if n <= 0 {
		t.Skip("set PGCHECKPOINT_EXPORT_MEASURE to the number of checkpoints to measure")
	}
	run, _ := strconv.Atoi(os.Getenv("PGCHECKPOINT_EXPORT_MEASURE_RUN"))
	if run <= 1 {
		run = engine.DefaultDeltaRun
	}
	bin := buildCommand(t, "ckpt")
	dir := t.TempDir()
	file := filepath.Join(dir, "long.jsonl")
	st, whole, largest := writeLongExport(t, file, "long", n, run)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("export of %d checkpoints (%d deltas): %.1f MB, its largest line %.1f MB; a format 1 export (every checkpoint whole) would hold %.1f GB",
		st.Checkpoints, st.Deltas, mb(fi.Size()), mb(largest), float64(whole)/(1<<30))

	sqliteFile := filepath.Join(dir, "long.db")
	eng, err := pgcheckpoint.Open(context.Background(), "sqlite:"+sqliteFile, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	pg := pgtest.NewDB(t)
	for _, store := range []struct{ name, url string }{{"postgres", pg.URL}, {"sqlite", "sqlite:" + sqliteFile}} {
		env := []string{"DATABASE_URL=" + store.url}
		in, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		r := measured(t, bin, env, in, nil, "import", "--json")
		in.Close()
		var got struct{ Checkpoints int64 }
		if r.err != nil || json.Unmarshal(r.stdout, &got) != nil || got.Checkpoints != st.Checkpoints {
			t.Fatalf("%s: import: %v %s %s", store.name, r.err, r.stdout, r.stderr)
		}
		var stored int64
		if store.name == "postgres" {
			err = pg.Pool.QueryRow(context.Background(),
				`SELECT pg_total_relation_size('pgcheckpoint.checkpoints') + pg_total_relation_size('pgcheckpoint.threads')`).Scan(&stored)
			if err != nil {
				t.Fatal(err)
			}
		} else if fi, err := os.Stat(sqliteFile); err == nil {
			stored = fi.Size()
		}
		out, err := os.Create(filepath.Join(dir, store.name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		e := measured(t, bin, env, nil, out, "export", "long", "--branches")
		out.Close()
		if e.err != nil {
			t.Fatalf("%s: export: %v %s", store.name, e.err, e.stderr)
		}
		again, err := os.Stat(out.Name())
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%d checkpoint(s) (%d delta(s))", st.Checkpoints, st.Deltas); !bytes.Contains(e.stderr, []byte(want)) {
			t.Fatalf("%s: the export of the import is not the same rows: %s, want %s", store.name, e.stderr, want)
		}
		t.Logf("%s: stored %.1f MB; import %.1fs, peak RSS %.0f MB; export %.1fs, peak RSS %.0f MB, %.1f MB",
			store.name, mb(stored), r.took.Seconds(), mb(r.maxRSS), e.took.Seconds(), mb(e.maxRSS), mb(again.Size()))
	}
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

type measuredRun struct {
	stdout, stderr []byte
	maxRSS         int64 // bytes
	took           time.Duration
	err            error
}

// measured runs the CLI under /usr/bin/time, which reports the peak RSS
// of its child. (The child's own getrusage would not do: Go starts a child
// with vfork, so the child's high-water mark includes the test's memory.)
func measured(t *testing.T, bin string, env []string, stdin *os.File, stdout *os.File, args ...string) measuredRun {
	t.Helper()
	const timeBin = "/usr/bin/time"
	if _, err := os.Stat(timeBin); err != nil {
		t.Skipf("%s is needed to measure peak RSS: %v", timeBin, err)
	}
	cmd := exec.Command(timeBin, append([]string{"-f", "maxrss_kib %M", bin}, args...)...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdout != nil {
		cmd.Stdout = stdout
	}
	start := time.Now()
	err := cmd.Run()
	r := measuredRun{stdout: out.Bytes(), took: time.Since(start), err: err}
	stderr := bytes.TrimRight(errOut.Bytes(), "\n")
	i := bytes.LastIndexByte(stderr, '\n')
	last := stderr[i+1:]
	if kib, ok := bytes.CutPrefix(last, []byte("maxrss_kib ")); ok {
		n, _ := strconv.ParseInt(string(kib), 10, 64)
		r.maxRSS = n << 10
		stderr = stderr[:max(i, 0)]
	}
	r.stderr = stderr
	return r
}

// writeLongExport writes an export of one thread of n checkpoints stored as
// a writer with run limit deltaRun stores it (see TestExportMemory), and
// returns its stats, the sum of the checkpoints' whole sizes and the size of
// its largest line.
func writeLongExport(t *testing.T, path, thread string, n, deltaRun int) (_ engine.ExportStats, whole, largest int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	sum := sha256.New() // for the trailer
	enc := json.NewEncoder(io.MultiWriter(bw, sum))
	enc.SetEscapeHTML(false)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(enc.Encode(engine.ExportHeader{Kind: "pgcheckpoint-export", Format: engine.ExportFormat, ThreadID: thread}))
	must(enc.Encode(engine.ExportThread{Kind: "thread", ThreadID: thread, Metadata: json.RawMessage(`{}`), CreatedAt: start}))

	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"the", "agent", "calls", "a", "tool", "flight", "hotel", "search", "result", "price", "date", "city", "plan"}
	var msgs []json.RawMessage // the whole conversation, one message per step
	type row struct {
		id         uuid.UUID
		run, depth int
		base       int // index of the base row; -1: whole
		msgCount   int
	}
	rows := make([]row, 0, n)
	var st engine.ExportStats
	var prev uuid.UUID
	var msgBytes int64 // the whole conversation's JSON, but for one bracket
	for i := range n {
		var text bytes.Buffer
		for text.Len() < 1000 {
			text.WriteString(words[r.IntN(len(words))])
			text.WriteByte(' ')
		}
		m, _ := json.Marshal(map[string]string{"role": []string{"user", "assistant"}[i%2], "content": text.String()})
		msgs = append(msgs, m)
		state := json.RawMessage(fmt.Sprintf(`{"step":%d,"goal":"plan a trip"}`, i+1))
		// The stores' rule (see sqlite/delta.go planDelta).
		cur := row{id: uuid.Must(uuid.NewV7()), base: -1, msgCount: len(msgs)}
		if i > 0 {
			parent := rows[i-1]
			base := i - 1
			if parent.run+1 >= deltaRun {
				for base >= 0 && rows[base].run > 0 {
					base = rows[base].base
				}
				if rows[base].depth+1 >= deltaRun {
					base = -1
				}
			}
			if base >= 0 {
				cur.base, cur.depth = base, rows[base].depth+1
				if base == i-1 {
					cur.run = parent.run + 1
				}
			}
		}
		c := engine.ExportCheckpoint{
			Kind: "checkpoint", ThreadID: thread, Seq: int64(i + 1), ID: cur.id, Step: int64(i + 1),
			CreatedAt: start.Add(time.Duration(i) * time.Second), Trigger: engine.TriggerLLMCall, Tags: []string{},
			Summary: fmt.Sprintf("step %d", i+1), Storage: engine.StorageFull, Metadata: json.RawMessage(`{}`),
			State: state, ToolResults: json.RawMessage(`{}`), PendingWrites: []engine.ExportPendingWrite{},
		}
		if i > 0 {
			c.ParentID = &prev
		}
		from := 0
		if cur.base >= 0 {
			c.Storage, c.BaseID, c.DeltaRun, c.DeltaDepth = engine.StorageDelta, &rows[cur.base].id, int64(cur.run), int64(cur.depth)
			c.State = json.RawMessage(fmt.Sprintf(`{"step":%d}`, i+1))
			from = rows[cur.base].msgCount
			st.Deltas++
		}
		part, _ := json.Marshal(msgs[from:])
		c.Messages = part
		msgBytes += int64(len(m) + 1) // the message and its comma (or the bracket)
		c.SizeBytes = msgBytes + 1 + int64(len(state)) + 2
		whole += c.SizeBytes
		largest = max(largest, int64(len(part)))
		must(enc.Encode(c))
		rows = append(rows, cur)
		prev = cur.id
		st.Checkpoints++
	}
	st.Threads = 1
	must(json.NewEncoder(bw).Encode(engine.ExportTrailer{Kind: "trailer", Counts: st, SHA256: hex.EncodeToString(sum.Sum(nil))}))
	must(bw.Flush())
	return st, whole, largest
}
