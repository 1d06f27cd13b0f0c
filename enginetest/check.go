package enginetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// jsonEqual fails the test unless got and want hold the same JSON value.
// Stores may spell a value differently (Postgres returns jsonb's normal
// form, with keys reordered and spaces added; SQLite the text as written),
// so values are compared, not bytes: object key order and spacing do not
// count, numbers compare by exact decimal value. Strings must be equal
// exactly, NUL and U+0001 included, and an escaped lone surrogate must come
// back as that same escape (Go's decoder would turn it into U+FFFD).
func jsonEqual(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if err := jsonDiff(got, want); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// jsonDiff is jsonEqual's comparison: nil when got and want hold the same
// JSON value, else an error that shows both.
func jsonDiff(got, want []byte) error {
	g, err := jsonValue(got)
	if err != nil {
		return fmt.Errorf("got invalid JSON %s: %v", clip(got), err)
	}
	w, err := jsonValue(want)
	if err != nil {
		return fmt.Errorf("want invalid JSON %s: %v", clip(want), err)
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Errorf("JSON values differ:\n got  %s\n want %s", clip(got), clip(want))
	}
	return nil
}

// jsonNumber is a JSON number in canonical form (big.Rat.RatString), a
// type of its own so that 1 and "1" differ.
type jsonNumber string

// jsonValue decodes JSON text for comparison: numbers as jsonNumber, lone
// surrogate escapes kept apart from U+FFFD (see markLoneSurrogates).
func jsonValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(markLoneSurrogates(b)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the value")
	}
	return canonicalNumbers(v), nil
}

func canonicalNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(x)); ok {
			return jsonNumber(r.RatString())
		}
		return jsonNumber(x)
	case []any:
		for i := range x {
			x[i] = canonicalNumbers(x[i])
		}
	case map[string]any:
		for k, y := range x {
			x[k] = canonicalNumbers(y)
		}
	}
	return v
}

// loneMark replaces the backslash-u of a lone surrogate escape in text to
// compare: U+FFFE (a noncharacter no test writes) and "lone:".
const loneMark = `\ufffelone:`

// markLoneSurrogates rewrites each escaped lone surrogate (\uD800 to
// \uDFFF not in a high-low pair) as loneMark and its four hex digits, so
// that it decodes to text of its own instead of U+FFFD.
func markLoneSurrogates(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] != 'u' || i+6 > len(b) {
			i++ // an escaped character: skip it
			continue
		}
		r, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		if err != nil || r < 0xD800 || r > 0xDFFF {
			i += 5
			continue
		}
		if r < 0xDC00 && i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
			if lo, err := strconv.ParseUint(string(b[i+8:i+12]), 16, 16); err == nil && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 11 // a pair
				continue
			}
		}
		out = append(out, b[last:i]...)
		out = append(out, loneMark...)
		out = append(out, bytes.ToLower(b[i+2:i+6])...)
		last = i + 6
		i += 5
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// clip shortens text for a message.
func clip(b []byte) string {
	const max = 600
	if len(b) > max {
		return fmt.Sprintf("%q... (%d bytes)", b[:max], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// mustJSON marshals v; any error is a bug in the test.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// listThreads returns every thread, through ListThreads pages.
func listThreads(t testing.TB, ctx context.Context, eng *engine.Engine) []engine.ThreadInfo {
	t.Helper()
	var all []engine.ThreadInfo
	after := ""
	for {
		page, err := eng.ListThreads(ctx, engine.ThreadListOptions{Limit: 500, After: after})
		if err != nil {
			t.Fatalf("list threads: %v", err)
		}
		all = append(all, page...)
		if len(page) < 500 {
			return all
		}
		after = page[len(page)-1].ThreadID
	}
}

// listAll returns every checkpoint of a thread and namespace, newest
// first, through ListCheckpoints pages.
func listAll(t testing.TB, ctx context.Context, eng *engine.Engine, thread, namespace string) []engine.CheckpointInfo {
	t.Helper()
	var all []engine.CheckpointInfo
	var before uuid.UUID
	for {
		page, err := eng.ListCheckpoints(ctx, thread, engine.ListOptions{Namespace: namespace, Limit: 1000, Before: before})
		if err != nil {
			t.Fatalf("list checkpoints of %q/%q: %v", thread, namespace, err)
		}
		all = append(all, page...)
		if len(page) < 1000 {
			return all
		}
		before = page[len(page)-1].ID
	}
}

// oldestFirst returns the ids of infos, oldest first (infos are newest first).
func oldestFirst(infos []engine.CheckpointInfo) []uuid.UUID {
	out := make([]uuid.UUID, len(infos))
	for i, c := range infos {
		out[len(infos)-1-i] = c.ID
	}
	return out
}

// inventory is everything a database holds, as the public API shows it:
// each thread's export (thread rows of every namespace, checkpoints with
// their content whole, deltas applied, and pending writes).
type inventory struct {
	threadRows  int
	threads     []engine.ExportThread // the thread rows
	checkpoints map[uuid.UUID]engine.ExportCheckpoint
	writes      int
	// dump is every export, concatenated, with the threads asked for that
	// do not exist: two equal dumps mean nothing was written.
	dump string
}

// counts returns thread rows, checkpoints and pending writes.
func (inv *inventory) counts() [3]int {
	return [3]int{inv.threadRows, len(inv.checkpoints), inv.writes}
}

// inventory exports every thread ListThreads lists, and the threads named
// in probe (which a failed call may have created without a checkpoint,
// where ListThreads would not show them).
func (e *env) inventory(probe ...string) *inventory {
	e.t.Helper()
	return takeInventory(e.t, e.ctx, e.eng, probe...)
}

func takeInventory(t testing.TB, ctx context.Context, eng *engine.Engine, probe ...string) *inventory {
	t.Helper()
	inv := &inventory{checkpoints: map[uuid.UUID]engine.ExportCheckpoint{}}
	var names []string
	for _, th := range listThreads(t, ctx, eng) {
		names = append(names, th.ThreadID)
	}
	for _, p := range probe {
		if !slices.Contains(names, p) {
			names = append(names, p)
		}
	}
	var dump strings.Builder
	for _, name := range names {
		var buf bytes.Buffer
		_, err := eng.Export(ctx, name, &buf)
		if errors.Is(err, engine.ErrNotFound) {
			fmt.Fprintf(&dump, "thread %q: none\n", name)
			continue
		}
		if err != nil {
			t.Fatalf("export %q: %v", name, err)
		}
		dump.Write(buf.Bytes())
		sc := bufio.NewScanner(&buf)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var line engine.ExportCheckpoint
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("export %q: line %s: %v", name, clip(sc.Bytes()), err)
			}
			switch line.Kind {
			case "thread":
				inv.threadRows++
				var row engine.ExportThread
				if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
					t.Fatalf("export %q: line %s: %v", name, clip(sc.Bytes()), err)
				}
				inv.threads = append(inv.threads, row)
			case "checkpoint":
				if _, dup := inv.checkpoints[line.ID]; dup {
					t.Fatalf("checkpoint %s exported twice", line.ID)
				}
				if line.Storage == engine.StorageDelta {
					if err := applyExportedDelta(&line, inv.checkpoints); err != nil {
						t.Fatalf("export %q: checkpoint %s: %v", name, line.ID, err)
					}
				}
				inv.checkpoints[line.ID] = line
				inv.writes += len(line.PendingWrites)
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	inv.dump = dump.String()
	return inv
}

// applyExportedDelta rebuilds the whole content of an exported delta from
// its base (whole already: exported before it) as the export format says: the
// base's messages followed by the delta's, the base's keys without the
// removed ones and with the delta's set. It is the test's own reading of
// the format, which checkReadable compares with Get.
func applyExportedDelta(c *engine.ExportCheckpoint, whole map[uuid.UUID]engine.ExportCheckpoint) error {
	base, ok := whole[*c.BaseID]
	if !ok || base.ThreadID != c.ThreadID || base.Namespace != c.Namespace {
		return fmt.Errorf("base %s is not an earlier checkpoint of its thread and namespace", *c.BaseID)
	}
	var msgs, more []json.RawMessage
	if err := json.Unmarshal(base.Messages, &msgs); err != nil {
		return err
	}
	if err := json.Unmarshal(c.Messages, &more); err != nil {
		return err
	}
	msgs = append(msgs, more...)
	state, err := applyKeys(base.State, c.State, c.StateRemoved)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	tools, err := applyKeys(base.ToolResults, c.ToolResults, c.ToolResultsRemoved)
	if err != nil {
		return fmt.Errorf("tool results: %w", err)
	}
	c.Messages, c.State, c.ToolResults = mustJSON(append([]json.RawMessage{}, msgs...)), state, tools
	c.Storage, c.BaseID, c.StateRemoved, c.ToolResultsRemoved = engine.StorageFull, nil, nil, nil
	return nil
}

// applyKeys is base's members without removed, with set's.
func applyKeys(base, set, removed json.RawMessage) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if err := json.Unmarshal(base, &obj); err != nil {
		return nil, err
	}
	var gone []string
	if len(removed) > 0 {
		if err := json.Unmarshal(removed, &gone); err != nil {
			return nil, err
		}
	}
	for _, k := range gone {
		delete(obj, k)
	}
	if err := json.Unmarshal(set, &obj); err != nil {
		return nil, err
	}
	return mustJSON(obj), nil
}

// unchanged fails the test when the database differs from before (an
// inventory taken with the same probes).
func (e *env) unchanged(what string, before *inventory, probe ...string) {
	e.t.Helper()
	if after := e.inventory(probe...); after.dump != before.dump {
		e.t.Errorf("%s changed the database: counts (thread rows, checkpoints, writes) %v -> %v\n--- before\n%s\n--- after\n%s",
			what, before.counts(), after.counts(), before.dump, after.dump)
	}
}

// checkTree checks every checkpoint of the database: its parent (and merge
// parent) exists and its step is the parent's step + 1 (so it suits tests
// that delete no checkpoint with children); every thread's head is one of
// its checkpoints; every checkpoint reads back (see checkReadable).
func (e *env) checkTree() {
	e.t.Helper()
	inv := checkReadable(e.t, e.ctx, e.eng)
	for id, c := range inv.checkpoints {
		if c.ParentID != nil {
			p, ok := inv.checkpoints[*c.ParentID]
			if !ok {
				e.t.Fatalf("checkpoint %s (step %d): parent %s is missing", id, c.Step, *c.ParentID)
			}
			if c.Step != p.Step+1 {
				e.t.Fatalf("checkpoint %s has step %d, its parent %d", id, c.Step, p.Step)
			}
		} else if c.Step != 1 {
			e.t.Fatalf("checkpoint %s has no parent and step %d", id, c.Step)
		}
		if c.MergeParentID != nil {
			if _, ok := inv.checkpoints[*c.MergeParentID]; !ok {
				e.t.Fatalf("checkpoint %s: merge parent %s is missing", id, *c.MergeParentID)
			}
		}
	}
}

// checkReadable checks that every checkpoint of the database reads back
// with Get as Export shows it, and that every thread's head (as
// ListThreads shows it) is one of its checkpoints. It returns the
// inventory.
func checkReadable(t testing.TB, ctx context.Context, eng *engine.Engine) *inventory {
	t.Helper()
	inv := takeInventory(t, ctx, eng)
	for id, c := range inv.checkpoints {
		got, err := eng.Get(ctx, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if got.Step != c.Step || got.ThreadID != c.ThreadID || got.Seq != c.Seq || got.Namespace != c.Namespace {
			t.Fatalf("get %s: step %d seq %d thread %q; export says %d %d %q", id, got.Step, got.Seq, got.ThreadID, c.Step, c.Seq, c.ThreadID)
		}
		jsonEqual(t, "messages of "+id.String(), got.Messages, c.Messages)
		jsonEqual(t, "state of "+id.String(), got.State, c.State)
		jsonEqual(t, "tool results of "+id.String(), got.ToolResults, c.ToolResults)
		jsonEqual(t, "metadata of "+id.String(), got.Metadata, c.Metadata)
	}
	for _, th := range listThreads(t, ctx, eng) {
		if th.HeadID == uuid.Nil {
			// A thread whose checkpoints were all deleted (ForRuns
			// deletes heads too) may be listed without a head.
			if _, err := eng.LatestIn(ctx, th.ThreadID, th.Namespace); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("thread %q is listed without a head, and its head is %v", th.ThreadID, err)
			}
			continue
		}
		c, ok := inv.checkpoints[th.HeadID]
		if !ok || c.ThreadID != th.ThreadID || c.Namespace != th.Namespace || c.Step != th.HeadStep {
			t.Fatalf("thread %q: head %s (step %d) is not one of its checkpoints", th.ThreadID, th.HeadID, th.HeadStep)
		}
	}
	return inv
}

// checkChain checks that the root namespace of a thread written by
// Snapshot alone (no explicit parents, no rewinds) holds want checkpoints
// with steps 1..want, no step twice, forming one unbroken chain of parents
// from the head, whose step is want. It returns the checkpoints by id.
func checkChain(t testing.TB, ctx context.Context, eng *engine.Engine, thread string, want int) map[uuid.UUID]engine.CheckpointInfo {
	t.Helper()
	all := listAll(t, ctx, eng, thread, "")
	byID := map[uuid.UUID]engine.CheckpointInfo{}
	steps := map[int64]bool{}
	for _, c := range all {
		byID[c.ID] = c
		if steps[c.Step] {
			t.Fatalf("thread %q: step %d twice", thread, c.Step)
		}
		steps[c.Step] = true
		if c.Step < 1 || c.Step > int64(want) {
			t.Fatalf("thread %q: step %d outside 1..%d", thread, c.Step, want)
		}
	}
	if len(byID) != want || len(all) != want {
		t.Fatalf("thread %q: %d checkpoints listed (%d distinct), want %d", thread, len(all), len(byID), want)
	}
	head, err := eng.Latest(ctx, thread)
	if err != nil {
		t.Fatalf("latest of %q: %v", thread, err)
	}
	if head.Step != int64(want) {
		t.Fatalf("thread %q: head step %d, want %d", thread, head.Step, want)
	}
	walked := 0
	for id := head.ID; id != uuid.Nil; walked++ {
		c, ok := byID[id]
		if !ok {
			t.Fatalf("thread %q: chain broken after %d links: %s is not listed", thread, walked, id)
		}
		if c.Step != int64(want-walked) {
			t.Fatalf("thread %q: checkpoint %s has step %d, want %d", thread, id, c.Step, want-walked)
		}
		id = c.ParentID
	}
	if walked != want {
		t.Fatalf("thread %q: the chain from the head has %d links, want %d", thread, walked, want)
	}
	return byID
}
