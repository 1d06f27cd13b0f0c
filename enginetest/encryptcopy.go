package enginetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// CopyThread of an encrypted thread (deltas, appends, pending writes, a
// second namespace, a rewind, a branch merged back) reads back in the copy
// exactly as in the source, under a key of the copy's own; a ciphertext
// moved between the two threads fails closed; the dump holds no marker; a
// copy that fails writes nothing.
func testEncryptedCopy(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{DeltaMinBytes: -1, Encryption: engine.Encryption{MetadataKeys: []string{"secret"}}})
	db := e.h.SQL(t, e.url)
	markers := e.writeMarkers(eng, "src")
	head, err := eng.Latest(e.ctx, "src")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(head.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	var last engine.SnapshotResult
	for i := range 6 {
		msgs = append(msgs, mustJSON(fmt.Sprintf("SECRET turn %d", i)))
		last = snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "src", Messages: mustJSON(msgs),
			State: json.RawMessage(fmt.Sprintf(`{"turn":"SECRET %d","fixed":"same"}`, i)), Metadata: mustJSON(map[string]string{"secret": fmt.Sprint("meta ", i)})})
	}
	if _, err := eng.PutWrites(e.ctx, last.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`"SECRET write"`)}, {Channel: "d", Value: json.RawMessage(`{"n":2}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "src", Messages: json.RawMessage(`["SECRET appended"]`), SetToolResults: json.RawMessage(`{"tool":"SECRET out"}`)}); err != nil {
		t.Fatal(err)
	}
	snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "src", Namespace: "sub", Messages: json.RawMessage(`["SECRET in sub"]`)})
	br, err := eng.Branch(e.ctx, last.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: br.ThreadID, Messages: json.RawMessage(`["SECRET on the branch"]`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.MergeBranch(e.ctx, br.ThreadID, "src"); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Rewind(e.ctx, last.ID); err != nil { // the head is not the newest
		t.Fatal(err)
	}

	r, err := eng.CopyThread(e.ctx, "src", "dst")
	if err != nil {
		t.Fatalf("copy of an encrypted thread: %v", err)
	}
	if r.Copied != int64(len(r.IDs)) || r.Copied < 10 {
		t.Fatalf("copied %d checkpoints: %+v", r.Copied, r.IDs)
	}
	link := func(id uuid.UUID) uuid.UUID {
		if n, ok := r.NewID(id); ok {
			return n
		}
		return id
	}
	deltas := 0
	for _, p := range r.IDs {
		a, err := eng.Get(e.ctx, p.Old)
		if err != nil {
			t.Fatal(err)
		}
		b, err := eng.Get(e.ctx, p.New)
		if err != nil {
			t.Fatalf("the copy %s of %s: %v", p.New, p.Old, err)
		}
		what := fmt.Sprintf("copy of %s (step %d, namespace %q)", p.Old, a.Step, a.Namespace)
		if b.ThreadID != "dst" || b.Namespace != a.Namespace || b.Step != a.Step || b.ParentID != link(a.ParentID) ||
			b.MergeParentID != link(a.MergeParentID) || b.NextNode != a.NextNode || b.Summary != a.Summary {
			t.Fatalf("%s: %+v, want the place of %+v", what, b.CheckpointInfo, a.CheckpointInfo)
		}
		jsonEqual(t, what+": messages", b.Messages, a.Messages)
		jsonEqual(t, what+": state", b.State, a.State)
		jsonEqual(t, what+": tool results", b.ToolResults, a.ToolResults)
		jsonEqual(t, what+": metadata", b.Metadata, a.Metadata)
		if len(b.PendingWrites) != len(a.PendingWrites) {
			t.Fatalf("%s: %d pending writes, want %d", what, len(b.PendingWrites), len(a.PendingWrites))
		}
		for i := range a.PendingWrites {
			x, y := a.PendingWrites[i], b.PendingWrites[i]
			if x.TaskID != y.TaskID || x.Index != y.Index || x.Channel != y.Channel || !sameJSON(x.Value, y.Value) {
				t.Fatalf("%s: pending write %+v, want %+v", what, y, x)
			}
		}
		if b.Format == "delta" {
			deltas++
		}
		if a.Format != b.Format {
			t.Fatalf("%s: stored %s, the source %s", what, b.Format, a.Format)
		}
	}
	if deltas < 5 {
		t.Fatalf("%d copies stored as deltas", deltas)
	}
	for _, ns := range []string{"", "sub"} {
		a, err := eng.LatestIn(e.ctx, "src", ns)
		if err != nil {
			t.Fatal(err)
		}
		b, err := eng.LatestIn(e.ctx, "dst", ns)
		if err != nil || b.ID != link(a.ID) {
			t.Fatalf("head of the copy in %q: %v, %v; want the copy of %s", ns, b, err, a.ID)
		}
	}
	srcKey, err := eng.Store().DataKey(e.ctx, "src")
	if err != nil {
		t.Fatal(err)
	}
	if dstKey, err := eng.Store().DataKey(e.ctx, "dst"); err != nil || bytes.Equal(dstKey.Wrapped, srcKey.Wrapped) {
		t.Fatalf("the copy's data key: %v, %v; want a key of its own", dstKey, err)
	}
	// The copy keeps working as a thread.
	if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "dst", Messages: json.RawMessage(`["SECRET after the copy"]`)}); err != nil {
		t.Fatal(err)
	}

	// Ciphertexts moved between the source's rows and the copy's.
	column := func(col string, id uuid.UUID) string {
		var v string
		if err := db.QueryRowContext(e.ctx, "SELECT "+col+" FROM checkpoints WHERE checkpoint_id = $1", id.String()).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	set := func(col string, id uuid.UUID, v string) {
		if _, err := db.ExecContext(e.ctx, "UPDATE checkpoints SET "+col+" = $1 WHERE checkpoint_id = $2", v, id.String()); err != nil {
			t.Fatal(err)
		}
	}
	copyOfLast := link(last.ID)
	for _, mv := range []struct {
		name     string
		col      string
		from, to uuid.UUID
	}{
		{"messages moved from the source to the copy", "messages", last.ID, copyOfLast},
		{"messages moved from the copy to the source", "messages", copyOfLast, last.ID},
		{"state moved from the source to the copy", "state", last.ID, copyOfLast},
		{"metadata moved from the source to the copy", "metadata", last.ID, copyOfLast},
	} {
		orig := column(mv.col, mv.to)
		set(mv.col, mv.to, column(mv.col, mv.from))
		c, err := eng.Get(e.ctx, mv.to)
		refused(t, mv.name, c, err, "SECRET", "MARKER")
		set(mv.col, mv.to, orig)
		if _, err := eng.Get(e.ctx, mv.to); err != nil {
			t.Fatalf("%s: put back: %v", mv.name, err)
		}
	}
	if _, err := db.ExecContext(e.ctx, `UPDATE pending_writes SET value = (SELECT value FROM pending_writes WHERE checkpoint_id = $1 AND idx = 0)
		WHERE checkpoint_id = $2 AND idx = 0`, last.ID.String(), copyOfLast.String()); err != nil {
		t.Fatal(err)
	}
	c, err := eng.Get(e.ctx, copyOfLast)
	refused(t, "a pending write moved from the source to the copy", c, err, "SECRET")

	// The dump holds none of the markers, though two threads hold them.
	dump := e.h.Dump(t, e.url)
	if !bytes.Contains(dump, []byte("visible")) {
		t.Fatalf("the dump (%d bytes) does not hold the plaintext metadata: it is not a dump of the database", len(dump))
	}
	for _, m := range append(markers, "SECRET") {
		if bytes.Contains(dump, []byte(m)) {
			t.Errorf("the dump holds %q in plaintext", m)
		}
	}

	// Refused copies write nothing.
	if _, err := eng.CopyThread(e.ctx, "src", "dst"); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("a copy onto an existing thread: %v, want ErrInvalidInput", err)
	}
	if _, err := eng.CopyThread(e.ctx, "src", "src"); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("a copy onto itself: %v, want ErrInvalidInput", err)
	}
	if _, err := eng.CopyThread(e.ctx, "nobody", "x"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a copy of an unknown thread: %v, want ErrNotFound", err)
	}
	set("messages", last.ID, column("messages", copyOfLast)) // a source that does not open
	if _, err := eng.CopyThread(e.ctx, "src", "dst2"); !errors.Is(err, engine.ErrEncrypted) {
		t.Fatalf("a copy of an altered thread: %v, want ErrEncrypted", err)
	}
	var n int
	if err := db.QueryRowContext(e.ctx, `SELECT (SELECT count(*) FROM checkpoints WHERE thread_id = 'dst2') + (SELECT count(*) FROM data_keys WHERE thread_id = 'dst2')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a refused copy left %d rows (%v)", n, err)
	}
}

// A branch that has written nothing of its own holds only its source's
// values, sealed under the source thread's key, and has no data key: its
// copy keeps those values as they are, reads back as the branch does,
// and gets a key of its own for what it writes next.
func testEncryptedCopyOfAFreshBranch(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{})
	var last engine.SnapshotResult
	for i := range 3 {
		last = snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "src",
			Messages: mustJSON([]string{fmt.Sprintf("SECRET %d", i)}), State: json.RawMessage(`{"k":"SECRET"}`)})
	}
	br, err := eng.Branch(e.ctx, last.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	r, err := eng.CopyThread(e.ctx, br.ThreadID, "copy")
	if err != nil {
		t.Fatalf("copy of a branch without writes of its own: %v", err)
	}
	if len(r.IDs) != 1 {
		t.Fatalf("copied %+v, want the branch's one checkpoint", r.IDs)
	}
	a, err := eng.Get(e.ctx, br.CheckpointID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.Get(e.ctx, r.IDs[0].New)
	if err != nil {
		t.Fatalf("the copy: %v", err)
	}
	jsonEqual(t, "messages", b.Messages, a.Messages)
	jsonEqual(t, "state", b.State, a.State)
	if b.ThreadID != "copy" || b.ParentID != last.ID {
		t.Fatalf("the copy is on %q with parent %s, want on copy with parent %s", b.ThreadID, b.ParentID, last.ID)
	}
	if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "copy", Messages: json.RawMessage(`["SECRET after"]`)}); err != nil {
		t.Fatalf("a write on the copy: %v", err)
	}
	head, err := eng.Latest(e.ctx, "copy")
	if err != nil || !bytes.Contains(head.Messages, []byte("SECRET after")) {
		t.Fatalf("the copy's head after a write: %v", err)
	}
}

// A copy made by an Engine bound to a tenant stays in that tenant: its
// rows and its key are the tenant's, and another tenant sees nothing of
// it, nor can take its id.
func testEncryptedCopyInTenant(t *testing.T, e *cryptEnv) {
	url := e.url
	if e.h.TenantURL != nil {
		url = e.h.TenantURL(t)
	}
	base := openURL(t, url, pgcheckpoint.Options{Config: engine.Config{DeltaMinBytes: -1, Encryption: engine.Encryption{Keys: e.keys, KeyCacheTTL: -1}}})
	a, err := base.ForTenant("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := base.ForTenant("b")
	if err != nil {
		t.Fatal(err)
	}
	markers := e.writeMarkers(a, "t")
	if _, err := a.CopyThread(e.ctx, "t", "t-copy"); err != nil {
		t.Fatal(err)
	}
	head, err := a.Latest(e.ctx, "t-copy")
	if err != nil || !bytes.Contains(head.Messages, []byte(markers[1])) || !bytes.Contains(head.State, []byte(markers[3])) {
		t.Fatalf("tenant a's copy reads %v, %v", head, err)
	}
	if _, err := a.Store().DataKey(e.ctx, "t-copy"); err != nil {
		t.Fatalf("tenant a's copy has no key of a's: %v", err)
	}
	if _, err := b.Store().DataKey(e.ctx, "t-copy"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("tenant b sees a key of a's copy: %v", err)
	}
	if c, err := b.Latest(e.ctx, "t-copy"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("tenant b reads a's copy: %v, %v", c, err)
	}
	if _, err := b.CopyThread(e.ctx, "t", "t-copy-b"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("tenant b copies a's thread: %v, want ErrNotFound", err)
	}
	// b's thread of the same id as a's copy is b's own.
	e.writeMarkers(b, "t")
	if _, err := b.CopyThread(e.ctx, "t", "t-copy"); err != nil {
		t.Fatalf("tenant b copies its own thread to an id a uses: %v", err)
	}
	if head, err := a.Latest(e.ctx, "t-copy"); err != nil || !strings.Contains(string(head.Messages), markers[1]) {
		t.Fatalf("tenant a's copy after b's: %v, %v", head, err)
	}
}
