package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// bundle is what a test needs: an engine over a store on a fresh file.
type bundle struct {
	path  string
	store *sqlite.Store
	eng   *engine.Engine
}

func setup(t *testing.T, cfg engine.Config) bundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ckpt.db")
	store, err := sqlite.Open(context.Background(), path, sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(store, cfg)
	t.Cleanup(func() { eng.Close() })
	return bundle{path: path, store: store, eng: eng}
}

func msgs(n int, tag string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"role":"user","content":"%s message %d"}`, tag, i)
	}
	b.WriteString("]")
	return b.Bytes()
}

// checkChain fails unless the thread's checkpoints have steps 1..want,
// each step once, each the child of the one before.
func checkChain(t *testing.T, eng *engine.Engine, thread string, want int) {
	t.Helper()
	list, err := eng.ListCheckpoints(context.Background(), thread, engine.ListOptions{Limit: engine.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != want {
		t.Fatalf("%d checkpoints, want %d", len(list), want)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Step < list[j].Step })
	for i, c := range list {
		if c.Step != int64(i+1) {
			t.Fatalf("checkpoint %d has step %d, want %d", i, c.Step, i+1)
		}
		if i == 0 && c.ParentID != uuid.Nil || i > 0 && c.ParentID != list[i-1].ID {
			t.Fatalf("step %d: parent %s, want %v", c.Step, c.ParentID, list[max(i-1, 0)].ID)
		}
	}
}

func TestSnapshotGetLatest(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	ctx := context.Background()
	in := engine.SnapshotInput{
		ThreadID: "t1", Messages: json.RawMessage(`[ {"role": "user", "content": "hi \u0000 there"} ]`),
		State: json.RawMessage(`{"b": 1, "a": [1,2]}`), Metadata: json.RawMessage(`{"run_id":"r1"}`), Tags: []string{"x"},
	}
	r1, err := b.eng.Snapshot(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !r1.Created || r1.Step != 1 || r1.ParentID != uuid.Nil {
		t.Fatalf("first snapshot: %+v", r1)
	}
	got, err := b.eng.Get(ctx, r1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Messages) != `[ {"role": "user", "content": "hi \u0000 there"} ]` || string(got.State) != string(in.State) {
		t.Fatalf("read back %s %s", got.Messages, got.State)
	}
	if got.Summary != "[user] hi \uFFFD there" { // a NUL in a summary shows as U+FFFD
		t.Fatalf("summary %q", got.Summary)
	}
	r2, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t1", State: json.RawMessage(`{"k":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Step != 2 || r2.ParentID != r1.ID {
		t.Fatalf("second snapshot: %+v", r2)
	}
	head, err := b.eng.Latest(ctx, "t1")
	if err != nil || head.ID != r2.ID || head.Summary != "State: 1 keys" {
		t.Fatalf("latest: %+v, %v", head, err)
	}
	if _, err := b.eng.Latest(ctx, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("latest of unknown thread: %v", err)
	}
	if _, err := b.eng.Get(ctx, engine.NewCheckpointID()); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	// A parent of another thread is not found, and nothing is written.
	other, _ := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t2"})
	if _, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t1", ParentID: other.ID}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("foreign parent: %v", err)
	}
	// Bad JSON on a small snapshot (no digests): the store rejects it.
	if _, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t1", State: json.RawMessage(`{"a":`)}); !errors.Is(err, engine.ErrInvalidJSON) {
		t.Fatalf("bad JSON: %v", err)
	}
	checkChain(t, b.eng, "t1", 2)

	// Filters: metadata containment and tags.
	list, err := b.eng.ListCheckpoints(ctx, "t1", engine.ListOptions{Metadata: json.RawMessage(`{"run_id":"r1"}`)})
	if err != nil || len(list) != 1 || list[0].ID != r1.ID {
		t.Fatalf("metadata filter: %v %v", list, err)
	}
	list, err = b.eng.ListCheckpoints(ctx, "t1", engine.ListOptions{Tags: []string{"x"}})
	if err != nil || len(list) != 1 || list[0].ID != r1.ID {
		t.Fatalf("tag filter: %v %v", list, err)
	}
	list, err = b.eng.ListCheckpoints(ctx, "t1", engine.ListOptions{Before: r2.ID})
	if err != nil || len(list) != 1 || list[0].ID != r1.ID {
		t.Fatalf("cursor: %v %v", list, err)
	}
	if _, err := b.eng.ListCheckpoints(ctx, "t1", engine.ListOptions{Before: other.ID}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("foreign cursor: %v", err)
	}
	threads, err := b.eng.ListThreads(ctx, engine.ThreadListOptions{})
	if err != nil || len(threads) != 2 || threads[0].ThreadID != "t1" || threads[0].HeadID != r2.ID || threads[0].HeadStep != 2 {
		t.Fatalf("threads: %+v %v", threads, err)
	}

	// Pending writes: a retry keeps the first values.
	n, err := b.eng.PutWrites(ctx, r2.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}, {Channel: "d", Value: json.RawMessage(`"x"`)}})
	if err != nil || n != 2 {
		t.Fatalf("put writes: %d %v", n, err)
	}
	n, err = b.eng.PutWrites(ctx, r2.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`2`)}})
	if err != nil || n != 0 {
		t.Fatalf("put writes again: %d %v", n, err)
	}
	if _, err := b.eng.PutWrites(ctx, engine.NewCheckpointID(), "task", nil); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("put writes on unknown: %v", err)
	}
	head, _ = b.eng.Latest(ctx, "t1")
	if len(head.PendingWrites) != 2 || string(head.PendingWrites[0].Value) != "1" {
		t.Fatalf("pending writes: %+v", head.PendingWrites)
	}
}

func TestBadOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()

	missing := filepath.Join(dir, "no", "such", "dir", "x.db")
	if _, err := sqlite.Open(ctx, missing, sqlite.Options{Migrate: true}); !errors.Is(err, sqlite.ErrNoDirectory) || !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("something was created: %v", err)
	}

	notDB := filepath.Join(dir, "notes.txt")
	text := bytes.Repeat([]byte("these are not the pages you are looking for\n"), 200)
	os.WriteFile(notDB, text, 0o600)
	if _, err := sqlite.Open(ctx, notDB, sqlite.Options{Migrate: true}); !errors.Is(err, sqlite.ErrNotDatabase) {
		t.Fatalf("not a database: %v", err)
	}
	if got, _ := os.ReadFile(notDB); !bytes.Equal(got, text) {
		t.Fatal("the file was changed")
	}

	fresh := filepath.Join(dir, "fresh.db")
	if _, err := sqlite.Open(ctx, fresh, sqlite.Options{}); !errors.Is(err, sqlite.ErrNotMigrated) {
		t.Fatalf("unmigrated: %v", err)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was created: %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	if _, err := sqlite.Open(ctx, empty, sqlite.Options{}); !errors.Is(err, sqlite.ErrNotMigrated) {
		t.Fatalf("empty file: %v", err)
	}
	db, err := sqlite.OpenDB(ctx, empty, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v, dirty, err := sqlite.Version(ctx, db); v != 0 || dirty || err != nil {
		t.Fatalf("version of an empty file: %d %v %v", v, dirty, err)
	}
	db.Close()
	if st, _ := os.Stat(empty); st.Size() != 0 {
		t.Fatalf("Version wrote %d bytes", st.Size())
	}

	newer := filepath.Join(dir, "newer.db")
	s, err := sqlite.Open(ctx, newer, sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw, _ := sql.Open("sqlite", newer)
	if _, err := raw.Exec(`UPDATE schema_migrations SET version = 99`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	for _, o := range []sqlite.Options{{}, {Migrate: true}} {
		if _, err := sqlite.Open(ctx, newer, o); !errors.Is(err, sqlite.ErrNewerSchema) {
			t.Fatalf("newer schema (%+v): %v", o, err)
		}
	}

	// Down and up again.
	db, _ = sqlite.OpenDB(ctx, fresh, sqlite.Options{Migrate: true})
	defer db.Close()
	if err := sqlite.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := sqlite.Version(ctx, db); v != sqlite.LatestVersion() {
		t.Fatalf("version %d after up", v)
	}
	if err := sqlite.MigrateDown(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := sqlite.CheckVersion(ctx, db); !errors.Is(err, sqlite.ErrNotMigrated) {
		t.Fatalf("after down: %v", err)
	}
}

func TestMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Memory, sqlite.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(s, engine.Config{})
	defer eng.Close()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "m"}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	checkChain(t, eng, "m", 100)
}

// A delta whose chain no longer reaches a full snapshot (a row changed by
// hand in the file) reads as engine.ErrDamaged, from Get and Latest.
func TestDamagedChainReadsAsErrDamaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, engine.Config{DeltaMinBytes: -1})
	var ids []uuid.UUID
	for i := 1; i <= 4; i++ {
		res, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: msgs(i, "d")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	db, err := sql.Open("sqlite", b.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var format string
	if err := db.QueryRowContext(ctx, `SELECT format FROM checkpoints WHERE checkpoint_id = ?`, ids[3].String()).Scan(&format); err != nil || format != "delta" {
		t.Fatalf("the newest checkpoint is stored %q (%v); the test needs a delta", format, err)
	}
	// Break the chain at its root: the first checkpoint, stored whole, is
	// marked a delta (on no base), so no chain reaches a full snapshot.
	if _, err := db.ExecContext(ctx, `UPDATE checkpoints SET format = 'delta' WHERE checkpoint_id = ?`, ids[0].String()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Get(ctx, ids[3]); !errors.Is(err, engine.ErrDamaged) {
		t.Errorf("Get of a delta on a damaged chain: %v, want ErrDamaged", err)
	}
	if _, err := b.eng.Latest(ctx, "t"); !errors.Is(err, engine.ErrDamaged) {
		t.Errorf("Latest on a damaged chain: %v, want ErrDamaged", err)
	}
}

// A page of a lineage (Lineage with a limit, read as a range of the
// thread's rows where it can be) is the first rows of the whole lineage
// (the walk parent by parent), from every checkpoint: on a line with a
// rewind in it, and on a branch, whose lineage goes on into its source.
func TestLineagePageIsPrefixOfWalk(t *testing.T) {
	ctx := context.Background()
	b := setup(t, engine.Config{})
	var ids []uuid.UUID
	snap := func(thread string) uuid.UUID {
		t.Helper()
		r, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Messages: msgs(1, thread)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
		return r.ID
	}
	snap("src")
	second := snap("src")
	snap("src")
	if _, err := b.eng.Rewind(ctx, second); err != nil {
		t.Fatal(err)
	}
	from := snap("src")
	snap("src")
	br, err := b.eng.Branch(ctx, from, "b")
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, br.CheckpointID)
	snap(br.ThreadID)
	snap(br.ThreadID)
	for _, id := range ids {
		whole, err := b.store.Lineage(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for limit := 1; limit <= len(whole)+1; limit++ {
			page, err := b.store.Lineage(ctx, id, limit)
			if err != nil {
				t.Fatal(err)
			}
			want := whole[:min(limit, len(whole))]
			if len(page) != len(want) {
				t.Fatalf("lineage of %s, limit %d: %d checkpoints, want %d", id, limit, len(page), len(want))
			}
			for i := range want {
				if page[i].ID != want[i].ID || page[i].ThreadID != want[i].ThreadID || page[i].Step != want[i].Step {
					t.Fatalf("lineage of %s, limit %d, row %d: %s (%s step %d), want %s (%s step %d)", id, limit, i,
						page[i].ID, page[i].ThreadID, page[i].Step, want[i].ID, want[i].ThreadID, want[i].Step)
				}
			}
		}
	}
}

// A row's own fields keep the engine's bounds however the file is written
// (the sqlite3 shell, another program): the tables' check constraints
// refuse an unknown trigger, more than 256 tags, a summary over 4,096
// characters, a next node, task id or channel over 255, an empty channel,
// a branch name over 255 (the rules of Postgres's checkpoint_check and
// check constraints, but that a check here cannot read the elements of the
// tags' JSON array). A check costs a SQLite insert next to nothing: it is
// compiled into the statement, which the store prepares once.
func TestTableChecksKeepTheTextBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, engine.Config{})
	res, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.PutWrites(ctx, res.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", b.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tags, _ := json.Marshal(make([]string, engine.MaxTags+1))
	for name, stmt := range map[string]string{
		"an unknown trigger":   `UPDATE checkpoints SET "trigger" = 'bogus'`,
		"257 tags":             `UPDATE checkpoints SET tags = '` + string(tags) + `'`,
		"tags not an array":    `UPDATE checkpoints SET tags = '{}'`,
		"a summary of 4,097":   `UPDATE checkpoints SET summary = printf('%.4097c', 's')`,
		"a next node of 256":   `UPDATE checkpoints SET next_node = printf('%.256c', 'n')`,
		"a task id of 256":     `UPDATE pending_writes SET task_id = printf('%.256c', 't')`,
		"an empty channel":     `UPDATE pending_writes SET channel = ''`,
		"a branch name of 256": `UPDATE threads SET branch_name = printf('%.256c', 'b')`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err == nil {
			t.Errorf("%s: written", name)
		}
	}
	got, err := b.eng.Get(ctx, res.ID)
	if err != nil || got.Trigger != engine.TriggerManual || got.Summary == "" || len(got.PendingWrites) != 1 || got.PendingWrites[0].Channel != "c" {
		t.Fatalf("the checkpoint after the refused changes: %+v, %v", got, err)
	}
}
