package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// storedRow is a checkpoint row as stored, with its digests.
type storedRow struct {
	format, messagesDigest   string
	base                     sql.NullString
	messagesCount            sql.NullInt64
	stateDigests, toolDigest map[string]string
}

func storedRows(t *testing.T, path string) map[string]storedRow {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT checkpoint_id, format, base_checkpoint_id, messages_count, hex(messages_digest),
		coalesce(state_digests, 'null'), coalesce(tool_results_digests, 'null') FROM checkpoints`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]storedRow{}
	for rows.Next() {
		var id uuid.UUID
		var r storedRow
		var state, tools string
		if err := rows.Scan(&id, &r.format, &r.base, &r.messagesCount, &r.messagesDigest, &state, &tools); err != nil {
			t.Fatal(err)
		}
		// Key digests compare as objects: their key order and key
		// spelling do not matter to a store.
		if err := json.Unmarshal([]byte(state), &r.stateDigests); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tools), &r.toolDigest); err != nil {
			t.Fatal(err)
		}
		out[id.String()] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// An import stores the digests a write stores: for a thread written with
// compact JSON (so the export spells every value as it was sent), every
// imported row, whole, delta on its parent or on an anchor, has the
// message count, list digest and key digests of its source row, which the
// import rebuilt from the delta chain. A digest that described older
// content would make a later write a wrong delta.
func TestImportComputesTheDigestsAWriteStores(t *testing.T) {
	ctx := context.Background()
	cfg := engine.Config{DeltaRun: 4, DeltaMinBytes: -1}
	src := setup(t, cfg)
	r := rand.New(rand.NewPCG(7, 8))
	var ids []uuid.UUID
	var conv []string
	state := map[string]string{}
	tools := map[string]string{}
	keys := []string{"a", "b", `\u00e9`, "d\\u0000", "e"}
	object := func(m map[string]string) json.RawMessage {
		var parts []string
		for _, k := range keys {
			if v, ok := m[k]; ok {
				parts = append(parts, fmt.Sprintf(`"%s":%s`, k, v))
			}
		}
		return json.RawMessage("{" + strings.Join(parts, ",") + "}")
	}
	for i := range 120 {
		switch k := r.IntN(10); {
		case k < 2 && len(ids) > 0:
			// Rewind: the next write builds on an older checkpoint.
			to := r.IntN(len(ids))
			if _, err := src.eng.Rewind(ctx, ids[to]); err != nil {
				t.Fatal(err)
			}
			cp, err := src.eng.Get(ctx, ids[to])
			if err != nil {
				t.Fatal(err)
			}
			conv = nil
			var ms []json.RawMessage
			if err := json.Unmarshal(cp.Messages, &ms); err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				conv = append(conv, string(m))
			}
			state, tools = fromObject(t, cp.State, keys), fromObject(t, cp.ToolResults, keys)
			continue
		case k < 4:
			delete(state, keys[r.IntN(len(keys))])
		case k < 5:
			delete(tools, keys[r.IntN(len(keys))])
		case k < 6:
			tools[keys[r.IntN(len(keys))]] = fmt.Sprintf(`[%d,"t"]`, r.IntN(3))
		}
		state[keys[r.IntN(len(keys))]] = fmt.Sprintf(`{"v":%d}`, r.IntN(4))
		conv = append(conv, fmt.Sprintf(`{"role":"user","content":"step %d"}`, i))
		res, err := src.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "d",
			Messages: json.RawMessage("[" + strings.Join(conv, ",") + "]"), State: object(state), ToolResults: object(tools)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	var buf bytes.Buffer
	st, err := src.eng.Export(ctx, "d", &buf)
	if err != nil {
		t.Fatal(err)
	}
	dst := setup(t, cfg)
	if _, err := dst.eng.Import(ctx, &buf, engine.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	want, got := storedRows(t, src.path), storedRows(t, dst.path)
	anchors := 0
	for id, w := range want {
		if !reflect.DeepEqual(got[id], w) {
			t.Fatalf("checkpoint %s:\n imported %+v\n   source %+v", id, got[id], w)
		}
		if w.base.Valid {
			if base := want[w.base.String]; base.base.Valid && w.format == "delta" {
				anchors++
			}
		}
	}
	if st.Deltas < 60 || anchors == 0 {
		t.Fatalf("the history stored %d deltas, %d on deltas; want both", st.Deltas, anchors)
	}
}

// fromObject is the model of an object read back: its members by the
// spelling of their key in keys.
func fromObject(t *testing.T, obj json.RawMessage, keys []string) map[string]string {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(obj, &members); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		var decoded string
		if err := json.Unmarshal([]byte(`"`+k+`"`), &decoded); err != nil {
			t.Fatal(err)
		}
		if v, ok := members[decoded]; ok {
			out[k] = string(v)
		}
	}
	return out
}

// An import into a database held by one connection (in memory: the write
// connection is the only one) finishes: every check it makes reads in its
// own transaction. (It waited forever for a second connection: for a data
// key, and for a parent or branch source in the database.)
func TestImportIntoAMemoryDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func() *engine.Engine {
		st, err := sqlite.Open(ctx, sqlite.Memory, sqlite.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return engine.New(st, engine.Config{})
	}
	src, dst := open(), open()
	var ids []uuid.UUID
	for _, m := range []string{`["a"]`, `["a","b"]`} {
		r, err := src.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(m)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	br, err := src.Branch(ctx, ids[0], "b")
	if err != nil {
		t.Fatal(err)
	}
	// The thread, then its branch alone, whose parent and source are in
	// the database by then.
	for _, thread := range []string{"t", br.ThreadID} {
		var file bytes.Buffer
		if _, err := src.Export(ctx, thread, &file); err != nil {
			t.Fatal(err)
		}
		if _, err := dst.Import(ctx, &file, engine.ImportOptions{}); err != nil {
			t.Fatalf("import of %s into a database in memory: %v", thread, err)
		}
	}
}

// cancelOnRead cancels its context at its first read.
type cancelOnRead struct {
	r      *bytes.Reader
	cancel context.CancelFunc
}

func (c cancelOnRead) Read(p []byte) (int, error) {
	c.cancel()
	return c.r.Read(p)
}

// An import whose context ends as it begins fails with the context's end,
// and does not tell to delete a thread that does not exist (the advice of
// a thread that exists was added to any error of the look-up).
func TestImportCancelledGivesNoAdviceOfAThreadThatExists(t *testing.T) {
	ctx := context.Background()
	open := func() *sqlite.Store {
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "t.db"), sqlite.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	src := engine.New(open(), engine.Config{})
	if _, err := src.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := src.Export(ctx, "t", &file); err != nil {
		t.Fatal(err)
	}
	dst := engine.New(open(), engine.Config{})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err := dst.Import(cctx, cancelOnRead{bytes.NewReader(file.Bytes()), cancel}, engine.ImportOptions{})
	if err == nil || strings.Contains(err.Error(), "delete it first") {
		t.Fatalf("an import whose context ended: %v; want the context's end alone", err)
	}
}
