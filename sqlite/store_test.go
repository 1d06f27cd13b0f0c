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
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

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
	eng := engine.NewWithStore(store, cfg)
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
	if got.Summary != "[user] hi \x00 there" && got.Summary != "[user] hi \x010 there" {
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

func TestIdempotentRetryAndConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{DeltaMinBytes: -1})
	ctx := context.Background()
	base, _ := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: msgs(3, "a")})
	id := engine.NewCheckpointID()
	in := engine.SnapshotInput{ThreadID: "t", ID: id, Messages: msgs(4, "a"), State: json.RawMessage(`{"k":1}`)}
	first, err := b.eng.Snapshot(ctx, in)
	if err != nil || !first.Created {
		t.Fatal(first, err)
	}
	again, err := b.eng.Snapshot(ctx, in)
	if err != nil || again.Created || again.Step != first.Step || again.ParentID != base.ID || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("retry: %+v %v (first %+v)", again, err, first)
	}
	in.State = json.RawMessage(`{"k":2}`)
	if _, err := b.eng.Snapshot(ctx, in); !errors.Is(err, engine.ErrIDConflict) {
		t.Fatalf("other content: %v", err)
	}
	in.State = json.RawMessage(`{"k":1}`)
	in.ThreadID = "other"
	if _, err := b.eng.Snapshot(ctx, in); !errors.Is(err, engine.ErrIDConflict) {
		t.Fatalf("other thread: %v", err)
	}
	checkChain(t, b.eng, "t", 2)
	if list, _ := b.eng.ListThreads(ctx, engine.ThreadListOptions{}); len(list) != 1 {
		t.Fatalf("a failed write left a thread: %+v", list)
	}
}

func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{DeltaMinBytes: -1})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16*50)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				_, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "shared",
					State: json.RawMessage(fmt.Sprintf(`{"g":%d,"i":%d}`, g, i))})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	// Readers at the same time never fail.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			if _, err := b.eng.Latest(ctx, "shared"); err != nil && !errors.Is(err, engine.ErrNotFound) {
				errs <- err
			}
		}
	}()
	wg.Wait()
	<-done
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkChain(t, b.eng, "shared", 800)
}

func TestRewindDeletesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{DeltaMinBytes: -1})
	ctx := context.Background()
	var ids []uuid.UUID
	for i := range 6 {
		r, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: msgs(i+1, "m")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	rw, err := b.eng.Rewind(ctx, ids[2])
	if err != nil || rw.StepsBack != 3 || rw.Checkpoints != 6 || rw.Truncated != 0 {
		t.Fatalf("rewind: %+v %v", rw, err)
	}
	head, _ := b.eng.Latest(ctx, "t")
	if head.ID != ids[2] {
		t.Fatalf("head %s after rewind, want %s", head.ID, ids[2])
	}
	for _, id := range ids {
		if _, err := b.eng.Get(ctx, id); err != nil {
			t.Fatalf("rewind deleted %s: %v", id, err)
		}
	}
	// A write after the rewind builds on the target; the old line stays.
	r, _ := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: msgs(4, "n")})
	if r.ParentID != ids[2] || r.Step != 4 {
		t.Fatalf("after rewind: %+v", r)
	}
	got, err := b.eng.RewindToStep(ctx, "t", 2)
	if err != nil || got.Checkpoint.ID != ids[1] {
		t.Fatalf("rewind to step: %+v %v", got, err)
	}
	// Truncate: back to ids[0] from the head ids[1] deletes only ids[1].
	if _, err := b.eng.Rewind(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	tr, err := b.eng.RewindAndTruncate(ctx, ids[1])
	if err != nil || tr.Truncated != 2 { // r and ids[2], the head's line above ids[1]
		t.Fatalf("truncate: %+v %v", tr, err)
	}
	for i, id := range ids {
		_, err := b.eng.Get(ctx, id)
		if gone := i == 2; gone != errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("checkpoint %d after truncate: %v", i, err)
		}
	}
	if _, err := b.eng.Get(ctx, ids[5]); err != nil {
		t.Fatalf("the other line was touched: %v", err)
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
	eng := engine.NewWithStore(s, engine.Config{})
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

func TestBranchMergeTreeCopy(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{DeltaMinBytes: -1})
	ctx := context.Background()
	var ids []uuid.UUID
	for i := range 4 {
		r, _ := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "main", Messages: msgs(i+1, "m"), State: json.RawMessage(`{"i":1}`)})
		ids = append(ids, r.ID)
	}
	br, err := b.eng.Branch(ctx, ids[1], "alt")
	if err != nil || br.Step != 3 {
		t.Fatalf("branch: %+v %v", br, err)
	}
	got, _ := b.eng.Get(ctx, br.CheckpointID)
	src, _ := b.eng.Get(ctx, ids[1])
	if !bytes.Equal(got.Messages, src.Messages) || got.ParentID != ids[1] || got.Summary != "Branch 'alt' from "+ids[1].String() {
		t.Fatalf("branch checkpoint: %+v", got)
	}
	if _, err := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: br.ThreadID, Messages: msgs(7, "b")}); err != nil {
		t.Fatal(err)
	}
	line, err := b.eng.Lineage(ctx, br.CheckpointID)
	if err != nil || len(line) != 3 || line[1].ID != ids[1] || line[2].ID != ids[0] {
		t.Fatalf("lineage across the branch: %+v %v", line, err)
	}
	m, err := b.eng.MergeBranch(ctx, br.ThreadID, "main")
	if err != nil || m.ParentID != ids[3] || m.Step != 5 {
		t.Fatalf("merge: %+v %v", m, err)
	}
	merged, _ := b.eng.Get(ctx, m.CheckpointID)
	if string(merged.Messages) != string(msgs(7, "b")) || merged.MergeParentID != m.MergeParentID {
		t.Fatalf("merged: %s %s", merged.Messages, merged.MergeParentID)
	}
	if _, err := b.eng.MergeBranch(ctx, "main", "main"); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("merge into itself: %v", err)
	}
	tree, err := b.eng.Tree(ctx, "main")
	if err != nil || len(tree.Nodes) != 7 {
		t.Fatalf("tree: %+v %v", tree, err)
	}
	heads := 0
	for _, n := range tree.Nodes {
		if n.IsHead {
			heads++
		}
	}
	if heads != 2 {
		t.Fatalf("%d heads in the tree", heads)
	}
	brs, _ := b.eng.Branches(ctx, "main")
	if len(brs) != 1 || brs[0].FromID != ids[1] || brs[0].Name != "alt" {
		t.Fatalf("branches: %+v", brs)
	}
	n, err := b.eng.CopyThread(ctx, "main", "copy")
	if err != nil || n != 5 {
		t.Fatalf("copy: %d %v", n, err)
	}
	if _, err := b.eng.CopyThread(ctx, "main", "copy"); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("copy onto an existing thread: %v", err)
	}
	if _, err := b.eng.CopyThread(ctx, "none", "copy2"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("copy of an unknown thread: %v", err)
	}
	a, _ := b.eng.Latest(ctx, "main")
	c, _ := b.eng.Latest(ctx, "copy")
	if a.ID == c.ID || !bytes.Equal(a.Messages, c.Messages) || a.Step != c.Step {
		t.Fatalf("copy head: %+v vs %+v", c.CheckpointInfo, a.CheckpointInfo)
	}
	checkChainCopy, _ := b.eng.ListCheckpoints(ctx, "copy", engine.ListOptions{})
	for _, ci := range checkChainCopy {
		if _, err := b.eng.Get(ctx, ci.ID); err != nil {
			t.Fatalf("copied checkpoint %s: %v", ci.ID, err)
		}
	}
}

func TestRetentionKeepsHeadsAndBranchSources(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{DeltaMinBytes: -1, DeltaRun: 4})
	ctx := context.Background()
	var ids []uuid.UUID
	for i := range 20 {
		r, _ := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "r", Messages: msgs(i+1, "m"), State: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		ids = append(ids, r.ID)
	}
	other, _ := b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "other"})
	br, _ := b.eng.Branch(ctx, ids[3], "keep")
	if _, err := b.eng.Rewind(ctx, ids[5]); err != nil { // the head is now ids[5]
		t.Fatal(err)
	}
	deleted, err := b.eng.ApplyRetention(ctx, "r", engine.KeepLastN(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 16 { // 20 - the 2 newest - head - branch source
		t.Fatalf("deleted %d", len(deleted))
	}
	for _, keep := range []uuid.UUID{ids[3], ids[5], ids[18], ids[19], other.ID, br.CheckpointID} {
		got, err := b.eng.Get(ctx, keep)
		if err != nil {
			t.Fatalf("retention deleted %s: %v", keep, err)
		}
		if keep == ids[19] && string(got.Messages) != string(msgs(20, "m")) {
			t.Fatalf("a kept delta reads %s", got.Messages)
		}
	}
	head, _ := b.eng.Latest(ctx, "r")
	if head.ID != ids[5] {
		t.Fatalf("head moved to %s", head.ID)
	}
	// Milestones: first, newest, and n between.
	for i := range 9 {
		b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "ms", State: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
	}
	deleted, err = b.eng.ApplyRetention(ctx, "ms", engine.KeepMilestones(3))
	if err != nil || len(deleted) != 4 { // of 9 keep positions 1, 3, 5, 7, 9
		t.Fatalf("milestones: %d %v", len(deleted), err)
	}
	list, _ := b.eng.ListCheckpoints(ctx, "ms", engine.ListOptions{})
	var steps []int64
	for _, c := range list {
		steps = append(steps, c.Step)
	}
	if !slices.Equal(steps, []int64{9, 7, 5, 3, 1}) {
		t.Fatalf("milestones kept steps %v", steps)
	}
	// Expiry and sweep.
	if err := b.eng.SetExpiry(ctx, "ms", time.Now().Add(-time.Second), engine.ExpireKeepLatest); err != nil {
		t.Fatal(err)
	}
	res, err := b.eng.Sweep(ctx, engine.KeepAll(), engine.SweepOptions{BatchSize: 2})
	if err != nil || res.Expired != 1 || res.Deleted != 4 || res.Threads != 4 || !res.Done {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	if list, _ := b.eng.ListCheckpoints(ctx, "ms", engine.ListOptions{}); len(list) != 1 || list[0].Step != 9 {
		t.Fatalf("after keep_latest expiry: %+v", list)
	}
}

func TestExportImport(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{DeltaMinBytes: -1, DeltaRun: 3})
	ctx := context.Background()
	for i := range 7 {
		b.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "ex", Messages: msgs(i+1, "e"), State: json.RawMessage(`{"n":"\u0000"}`)})
	}
	head, _ := b.eng.Latest(ctx, "ex")
	b.eng.PutWrites(ctx, head.ID, "t", []engine.Write{{Channel: "c", Value: json.RawMessage(`[1]`)}})
	var buf bytes.Buffer
	st, err := b.eng.Export(ctx, "ex", &buf)
	if err != nil || st.Checkpoints != 7 || st.PendingWrites != 1 {
		t.Fatalf("export: %+v %v", st, err)
	}
	if _, err := b.eng.Import(ctx, bytes.NewReader(buf.Bytes()), engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("import over an existing thread: %v", err)
	}
	other := setup(t, engine.Config{})
	if _, err := other.eng.Import(ctx, bytes.NewReader(buf.Bytes()), engine.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := other.eng.Latest(ctx, "ex")
	if err != nil || !bytes.Equal(got.Messages, head.Messages) || !bytes.Equal(got.State, head.State) || len(got.PendingWrites) != 1 {
		t.Fatalf("imported head: %+v %v", got, err)
	}
	checkChain(t, other.eng, "ex", 7)
}
