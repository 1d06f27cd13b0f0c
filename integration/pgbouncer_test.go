package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// startPgBouncer starts PgBouncer (the Debian package) on a free loopback
// port in transaction mode, in front of the database at dbURL, and returns
// the URL to reach that database through it. It stops with the test.
func startPgBouncer(t *testing.T, dbURL string) string {
	t.Helper()
	return startPgBouncerPool(t, dbURL, 10)
}

// startPgBouncerPool is startPgBouncer with poolSize server connections
// per database and user.
func startPgBouncerPool(t *testing.T, dbURL string, poolSize int) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			t.Fatalf("this test needs PgBouncer (apt-get install pgbouncer; CI installs it): %v", err)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// Not t.TempDir(): as root, PgBouncer runs as postgres, who must reach
	// its directory.
	dir, err := os.MkdirTemp("", "pgcheckpoint-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pass, _ := u.User.Password()
	db := fmt.Sprintf("host=%s port=%s user=%s dbname=%s", u.Hostname(), u.Port(), u.User.Username(), u.Path[1:])
	if pass != "" {
		db += " password=" + pass
	}
	ini := fmt.Sprintf(`[databases]
* = %s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 200
default_pool_size = %d
logfile = %s
pidfile = %s
`, db, port, poolSize, filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	conf := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(conf, []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{conf}
	if os.Geteuid() == 0 { // it will not run as root
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("as root, PgBouncer runs as the OS user postgres: %v", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		_ = os.Chown(dir, uid, gid)
		args = []string{"-u", "postgres", conf}
	}
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			deadline = time.Time{}
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("PgBouncer did not start: %v\n%s\n%s", err, out.String(), log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	via := *u
	via.Host = fmt.Sprintf("127.0.0.1:%d", port)
	return via.String()
}

// The engine through PgBouncer in transaction mode, with pgx's
// default_query_exec_mode exec or simple_protocol (pgx's default,
// cache_statement, fails there: PgBouncer 1.18 does not carry prepared
// statements from one server connection to the next): writers on one
// thread through each write path (pipelined whole, pipelined delta, single
// statement), reads of what was written exactly, rewind, retention, export
// and import, and a checkpoint in the caller's transaction.
func TestEngineBehindPgBouncerInTransactionMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	via := startPgBouncer(t, b.db.URL)
	for _, mode := range []string{"exec", "simple_protocol"} {
		pool := poolOf(t, via+"&default_query_exec_mode="+mode, 16)
		for _, c := range []struct {
			name   string
			cfg    engine.Config
			single bool
		}{
			{"pipelined whole", engine.Config{FullSnapshots: true}, false},
			{"pipelined delta", engine.Config{DeltaMinBytes: -1}, false},
			{"single statement", engine.Config{DeltaMinBytes: -1}, true},
		} {
			name := mode + ", " + c.name
			thread := "bouncer " + name
			eng := engine.New(postgres.NewStore(pool, postgres.Options{SingleStatement: c.single}), c.cfg)
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 25 {
						if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread,
							Messages: []byte(fmt.Sprintf(`[{"role":"user","content":"w%d i%d"}]`, w, i))}); err != nil {
							t.Errorf("%s: writer %d: %v", name, w, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			var n, steps, top, linked int
			if err := b.db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT c.step), max(c.step),
				count(*) FILTER (WHERE c.step = 1 OR p.step = c.step - 1)
				FROM pgcheckpoint.checkpoints c
				LEFT JOIN pgcheckpoint.checkpoints p ON p.checkpoint_id = c.parent_checkpoint_id AND p.thread_id = c.thread_id
				WHERE c.thread_id = $1`, thread).Scan(&n, &steps, &top, &linked); err != nil {
				t.Fatal(err)
			}
			if n != 200 || steps != 200 || top != 200 || linked != 200 {
				t.Fatalf("%s: %d checkpoints, %d steps, top %d, %d linked to the step before; want 200 of each", name, n, steps, top, linked)
			}

			// What was written reads back, whatever the text (NUL, non-ASCII,
			// escapes) and the encoding of the mode.
			in := engine.SnapshotInput{ThreadID: thread, Tags: []string{"étape", "tag with space"},
				Messages:    []byte(`[{"role":"user","content":"w0 i0"},{"role":"tool","content":"nul \u0000, é, 😀, \\ \" \n"}]`),
				State:       []byte(`{"n":12345,"f":1.5e-7,"nested":{"a":[1,null,true,"\u0000"]}}`),
				ToolResults: []byte(`{"search":{"hits":["TP1","FR2"]}}`),
				Metadata:    []byte(`{"run_id":"r-1","who":"ünïcode"}`),
				NextNode:    "book"}
			res, err := eng.Snapshot(ctx, in)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, err := eng.Get(ctx, res.ID)
			if err != nil {
				t.Fatalf("%s: get: %v", name, err)
			}
			jsonEqual(t, name+": messages", got.Messages, in.Messages)
			jsonEqual(t, name+": state", got.State, in.State)
			jsonEqual(t, name+": tool results", got.ToolResults, in.ToolResults)
			jsonEqual(t, name+": metadata", got.Metadata, in.Metadata)
			if strings.Join(got.Tags, ",") != strings.Join(in.Tags, ",") || got.NextNode != in.NextNode || got.Step != 201 {
				t.Fatalf("%s: read back %+v", name, got.CheckpointInfo)
			}

			list, err := eng.ListCheckpoints(ctx, thread, engine.ListOptions{Limit: 5})
			if err != nil || len(list) != 5 {
				t.Fatalf("%s: list: %v", name, err)
			}
			if _, err := eng.Rewind(ctx, list[4].ID); err != nil {
				t.Fatalf("%s: rewind: %v", name, err)
			}
			if _, err := eng.PruneThreads(ctx, engine.KeepLastN(50), thread); err != nil {
				t.Fatalf("%s: retention: %v", name, err)
			}
			var buf bytes.Buffer
			st, err := eng.Export(ctx, thread, &buf)
			if err != nil {
				t.Fatalf("%s: export: %v", name, err)
			}
			if _, err := eng.DeleteThreads(ctx, thread); err != nil {
				t.Fatal(err)
			}
			if got, err := eng.Import(ctx, &buf, engine.ImportOptions{}); err != nil || got.Checkpoints != st.Checkpoints {
				t.Fatalf("%s: import: %+v %v", name, got, err)
			}
			if head, err := eng.Latest(ctx, thread); err != nil || head.ID != list[4].ID {
				t.Fatalf("%s: head after import: %v %v", name, head, err)
			}

			// The caller's transaction through PgBouncer: one server
			// connection for its length.
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			inTx, err := eng.WithTx(tx)
			if err != nil {
				t.Fatal(err)
			}
			r1, err := inTx.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread})
			if err != nil {
				t.Fatalf("%s: in a transaction: %v", name, err)
			}
			if head, err := inTx.Latest(ctx, thread); err != nil || head.ID != r1.ID {
				t.Fatalf("%s: latest in a transaction: %v %v", name, head, err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if head, err := eng.Latest(ctx, thread); err != nil || head.ID != r1.ID {
				t.Fatalf("%s: after the commit: %v %v", name, head, err)
			}
		}
	}
}
