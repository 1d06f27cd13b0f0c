package enginetest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// EncryptionHarness is a Harness with the database access the encryption
// tests need to act as someone who holds the database and not the keys.
type EncryptionHarness struct {
	Harness
	// SQL opens the database behind a URL of NewURL with the store's own
	// driver, tables reachable unqualified (checkpoints, pending_writes,
	// data_keys), parameters written $1, $2, ...; closed when t ends.
	SQL func(t testing.TB, url string) *sql.DB
	// Dump returns every byte the database holds for a URL of NewURL:
	// pg_dump's output, or a SQLite file with its WAL.
	Dump func(t testing.TB, url string) []byte
}

// encryptionTests is the encryption suite (RunEncryption).
var encryptionTests = []struct {
	name   string
	fn     func(t *testing.T, e *cryptEnv)
	tenant bool // RunTenants runs it too
}{
	{name: "RandomHistoriesReadBackUnderEncryption", fn: testEncryptedRandomHistories},
	{name: "AppendHistoriesReadBackUnderEncryption", fn: testEncryptedAppendHistories},
	{name: "DeltasAndRetriesUnderEncryption", fn: testEncryptedDeltasAndRetries},
	{name: "DumpHoldsNoPlaintext", fn: testDumpHoldsNoPlaintext},
	{name: "ValuesAreCompressedUnlessNoCompress", fn: testCompressedByDefault},
	{name: "EncryptedMetadataNeverReadsAsContent", fn: testEncryptedMetadataFailsClosed},
	{name: "EncryptedMetadataOfBranchesAndMerges", fn: testEncryptedMetadataOfBranchesAndMerges},
	{name: "EncryptedMergeOutlivesItsBranch", fn: testEncryptedMergeOutlivesItsBranch},
	{name: "MovedAfterLineagesWereReadFailsClosed", fn: testMovedAfterLineagesRead},
	{name: "DigestsAreKeyedPerThread", fn: testDigestsAreKeyed},
	{name: "TamperingFailsClosed", fn: testTamperingFailsClosed},
	{name: "WrongMissingAndRevokedKeysFailClosed", fn: testWrongKeysFailClosed},
	{name: "PlaintextWritesToEncryptedThreadsAreRefused", fn: testPlaintextWritesRefused},
	{name: "RewrapKeepsEverythingReadable", fn: testRewrap},
	{name: "RewrapGoesPastAKeyThatDoesNotOpen", fn: testRewrapGoesPastAKeyThatDoesNotOpen},
	{name: "ExportsCarryCiphertextAndWrappedKeys", fn: testEncryptedExport},
	{name: "ShreddingErasesOneThread", fn: testShredding},
	{name: "ShreddingIsSeenAtOnceByItsEngine", fn: testShredRacesARead},
	{name: "AShreddedBranchReadsNothing", fn: testShreddedBranchReadsNothing},
	{name: "ShreddingWithHeldKeysReachesBackups", fn: testShreddingReachesBackups},
	{name: "ShreddingRacingARotationLeavesNoHeldKey", fn: testShredRacesRewrap},
	{name: "FirstWritesRacingLeaveOneHeldKey", fn: testFirstWriteRaceLeavesOneKey},
	{name: "PruneKeysKeepsTheKeysOfTenantsNotNamed", fn: testPruneKeys},
	{name: "KeyNotDestroyedIsReported", fn: testKeyNotDestroyed},
	{name: "TenantsKeepTheirKeys", fn: testTenantsKeepTheirKeys, tenant: true},
	{name: "CopyOfAnEncryptedThreadReadsBackUnderItsOwnKey", fn: testEncryptedCopy},
	{name: "CopyOfAnEncryptedThreadStaysInItsTenant", fn: testEncryptedCopyInTenant, tenant: true},
	{name: "CopyOfAFreshEncryptedBranch", fn: testEncryptedCopyOfAFreshBranch},
	{name: "AppendsAreHeldToTheLimitUnderEncryption", fn: testEncryptedAppendLimit},
	{name: "ImportsHoldSealedContentToTheLimit", fn: testImportedSealedContentLimit},
	{name: "ImportsHoldSealedWritesAndMetadataToTheLimit", fn: testImportedSealedWritesAndMetadataLimit},
	{name: "ARetryNamingAnotherParentIsAConflict", fn: testSealedRetryNamesItsParent},
	{name: "ABranchExportedAloneReadsWhereImported", fn: testEncryptedBranchExportedAlone},
	{name: "AnAncestorWithANewerIDOutlivesRetention", fn: testAncestorWithNewerID},
}

// RunEncryption runs the encryption suite against the store h names,
// each test with a database of its own.
func RunEncryption(t *testing.T, h EncryptionHarness) {
	for _, c := range encryptionTests {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := h.NewURL(t)
			c.fn(t, &cryptEnv{t: t, h: h, url: url, ctx: context.Background(), keys: newKeys(t, "k1")})
		})
	}
}

// cryptEnv is what an encryption test works with.
type cryptEnv struct {
	t    *testing.T
	h    EncryptionHarness
	url  string
	ctx  context.Context
	keys *engine.LocalKeys // the test's key-encryption key, "k1"
}

func newKeys(t testing.TB, ids ...string) *engine.LocalKeys {
	t.Helper()
	var text []string
	for _, id := range ids {
		text = append(text, engine.NewKeyText(id))
	}
	return parseKeys(t, strings.Join(text, "\n"))
}

// parseKeys is the LocalKeys of a key file's text.
func parseKeys(t testing.TB, text string) *engine.LocalKeys {
	t.Helper()
	k, err := engine.ParseLocalKeys(text)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// open returns an engine over the test's database encrypting with keys
// (nil: the test's), without a key cache, so every read meets the key row
// as it is now.
func (e *cryptEnv) open(keys engine.KeyProvider, cfg engine.Config) *engine.Engine {
	if keys == nil {
		keys = e.keys
	}
	cfg.Encryption.Keys = keys
	cfg.Encryption.KeyCacheTTL = -1
	return openURL(e.t, e.url, pgcheckpoint.Options{Config: cfg})
}

func (e *cryptEnv) plain(cfg engine.Config) *engine.Engine {
	return openURL(e.t, e.url, pgcheckpoint.Options{Config: cfg})
}

// refused fails unless err is ErrEncrypted with no checkpoint, and its
// message holds none of the markers.
func refused(t *testing.T, what string, c *engine.Checkpoint, err error, markers ...string) {
	t.Helper()
	if !errors.Is(err, engine.ErrEncrypted) {
		t.Fatalf("%s: got %v, want ErrEncrypted", what, err)
	}
	if c != nil {
		t.Fatalf("%s: a checkpoint came back with the error", what)
	}
	for _, m := range markers {
		if strings.Contains(err.Error(), m) {
			t.Fatalf("%s: the error shows content: %v", what, err)
		}
	}
}

// Random histories (edits, rewinds, branches, deletes) written under
// encryption, whole, as deltas and in short runs, read back as written.
func testEncryptedRandomHistories(t *testing.T, e *cryptEnv) {
	configs := []engine.Config{{FullSnapshots: true}, {DeltaMinBytes: -1},
		{DeltaRun: 4, DeltaMinBytes: -1, Encryption: engine.Encryption{NoCompress: true}}}
	for seed := range uint64(Rounds(3, 1)) {
		var writers []HistoryWriter
		for i, c := range configs {
			writers = append(writers, HistoryWriter{Engine: e.open(nil, c), Thread: fmt.Sprintf("enc-%d-%d", seed, i)})
		}
		hist := RandomHistory(t, e.ctx, writers, seed, 60)
		deltas := 0
		for _, h := range hist {
			for i, w := range writers {
				got, err := w.Engine.Get(e.ctx, h.IDs[i])
				if err != nil {
					t.Fatalf("seed %d config %d: get %s: %v", seed, i, h.IDs[i], err)
				}
				jsonEqual(t, "messages", got.Messages, h.Messages)
				jsonEqual(t, "state", got.State, h.State)
				jsonEqual(t, "tool results", got.ToolResults, h.ToolResults)
				if got.Format == "delta" {
					deltas++
				}
			}
		}
		if len(hist) < 10 || deltas < 5 {
			t.Fatalf("seed %d: %d checkpoints left, %d deltas: the history tests too little", seed, len(hist), deltas)
		}
	}
}

// Appends (and snapshots, rewinds, guards) under encryption read back as
// the same content written whole.
func testEncryptedAppendHistories(t *testing.T, e *cryptEnv) {
	for _, run := range []int{engine.DefaultDeltaRun, 3} {
		eng := e.open(nil, engine.Config{DeltaMinBytes: -1, DeltaRun: run})
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprintf("run%d/seed%d", run, seed), func(t *testing.T) {
				appendHistory(t, e.ctx, eng, seed, run)
			})
		}
	}
}

// Under encryption a conversation is still stored as deltas (the
// digests are keyed, not gone), a retried write with the same id is the
// same checkpoint, and pending writes read back.
func testEncryptedDeltasAndRetries(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{DeltaMinBytes: -1})
	var msgs []string
	var last engine.SnapshotResult
	for i := range 12 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"turn %d"}`, i))
		in := engine.SnapshotInput{ThreadID: "t", ID: engine.NewCheckpointID(),
			Messages: json.RawMessage("[" + strings.Join(msgs, ",") + "]"),
			State:    json.RawMessage(fmt.Sprintf(`{"turn":%d,"fixed":"same"}`, i))}
		res := snapWith(t, e.ctx, eng, in)
		again := snapWith(t, e.ctx, eng, in)
		if !res.Created || again.Created || again.ID != res.ID {
			t.Fatalf("turn %d: a retry with the same id made %+v after %+v", i, again, res)
		}
		last = res
	}
	// A retried Append is the same checkpoint too.
	ap := engine.AppendInput{ThreadID: "t", ID: engine.NewCheckpointID(), Messages: json.RawMessage(`["appended"]`),
		SetState: json.RawMessage(`{"fixed":"changed"}`)}
	first, err := eng.Append(e.ctx, ap)
	if err != nil {
		t.Fatal(err)
	}
	again, err := eng.Append(e.ctx, ap)
	if err != nil || again.Created || again.ID != first.ID {
		t.Fatalf("a retried append: %+v, %v after %+v", again, err, first)
	}
	msgs = append(msgs, `"appended"`)
	last = first
	if _, err := eng.PutWrites(e.ctx, last.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`{"w":1}`)}}); err != nil {
		t.Fatal(err)
	}
	list, err := eng.ListCheckpoints(e.ctx, "t", engine.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deltas := 0
	for _, c := range list {
		if c.Format == "delta" {
			deltas++
		}
		if c.Summary != engine.EncryptedSummary {
			t.Fatalf("summary %q: the default summary would quote a message", c.Summary)
		}
	}
	if deltas < 11 {
		t.Fatalf("%d of %d checkpoints stored as deltas under encryption", deltas, len(list))
	}
	got, err := eng.Get(e.ctx, last.ID)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "messages", got.Messages, json.RawMessage("["+strings.Join(msgs, ",")+"]"))
	// A branch reads its source's values with the source's key, and a merge
	// the branch's with the branch's.
	br, err := eng.Branch(e.ctx, last.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	onBranch := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: br.ThreadID,
		Messages: json.RawMessage("[" + strings.Join(msgs, ",") + `,"on the branch"]`)})
	if _, err := eng.Get(e.ctx, br.CheckpointID); err != nil {
		t.Fatalf("the branch's first checkpoint: %v", err)
	}
	m, err := eng.MergeBranch(e.ctx, br.ThreadID, "t")
	if err != nil {
		t.Fatal(err)
	}
	merged, err := eng.Latest(e.ctx, "t")
	if err != nil || merged.ID != m.CheckpointID || !bytes.Contains(merged.Messages, []byte("on the branch")) {
		t.Fatalf("the merge %+v reads %v: %v", m, merged, err)
	}
	if _, err := eng.Get(e.ctx, onBranch.ID); err != nil {
		t.Fatal(err)
	}
	if len(got.PendingWrites) != 1 || !sameJSON(got.PendingWrites[0].Value, json.RawMessage(`{"w":1}`)) {
		t.Fatalf("pending writes %+v", got.PendingWrites)
	}
}

// markers writes a thread whose messages, state, tool results, pending
// writes and one encrypted metadata key each hold a marker, as a
// snapshot, an append and a branch; it returns the markers.
func (e *cryptEnv) writeMarkers(eng *engine.Engine, thread string) []string {
	t := e.t
	mk := func(what string) string { return "MARKER-" + what + "-" + uuid.NewString()[:8] }
	msg, msg2, st, st2, tool, write, meta := mk("message"), mk("appended"), mk("state"), mk("setstate"), mk("tool"), mk("write"), mk("metadata")
	res := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: thread,
		Messages:    mustJSON([]any{map[string]string{"role": "user", "content": msg}}),
		State:       mustJSON(map[string]string{"k": st}),
		ToolResults: mustJSON(map[string]any{"call": map[string]string{"out": tool}}),
		Metadata:    mustJSON(map[string]string{"secret": meta, "plain": "visible"}),
	})
	if _, err := eng.PutWrites(e.ctx, res.ID, "task", []engine.Write{{Channel: "c", Value: mustJSON(write)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: thread,
		Messages: mustJSON([]any{map[string]string{"role": "assistant", "content": msg2}}),
		SetState: mustJSON(map[string]string{"k2": st2})}); err != nil {
		t.Fatal(err)
	}
	return []string{msg, msg2, st, st2, tool, write, meta}
}

// A dump of the database (pg_dump; the SQLite file and its WAL) holds
// none of the content written under encryption, and the content reads
// back through the engine.
func testDumpHoldsNoPlaintext(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{DeltaMinBytes: -1, Encryption: engine.Encryption{MetadataKeys: []string{"secret"}}})
	markers := e.writeMarkers(eng, "dumped")
	raw := e.open(nil, engine.Config{DeltaMinBytes: -1, Encryption: engine.Encryption{MetadataKeys: []string{"secret"}, NoCompress: true}})
	markers = append(markers, e.writeMarkers(raw, "dumped-uncompressed")...)
	// Long enough to be compressed, and read back.
	long := strings.Repeat("MARKER-long-"+uuid.NewString()[:8]+" ", 40)
	if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "dumped", Messages: mustJSON([]string{long})}); err != nil {
		t.Fatal(err)
	}
	markers = append(markers, long[:20])
	head, err := eng.Latest(e.ctx, "dumped")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(head.Messages, []byte(markers[1])) || !bytes.Contains(head.State, []byte(markers[3])) || !bytes.Contains(head.Messages, []byte(long)) {
		t.Fatalf("the head does not read back: %s %s", head.Messages, head.State)
	}
	line, err := eng.Lineage(e.ctx, head.ID)
	if err != nil || len(line) != 3 {
		t.Fatalf("lineage: %d, %v", len(line), err)
	}
	first, err := eng.Get(e.ctx, line[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(first.Metadata, []byte(markers[6])) || !bytes.Contains(first.PendingWrites[0].Value, []byte(markers[5])) {
		t.Fatalf("metadata %s, writes %+v", first.Metadata, first.PendingWrites)
	}
	listed, err := eng.ListCheckpoints(e.ctx, "dumped", engine.ListOptions{})
	if err != nil || !bytes.Contains(listed[len(listed)-1].Metadata, []byte(markers[6])) || !bytes.Contains(line[2].Metadata, []byte(markers[6])) {
		t.Fatalf("listed metadata %v, lineage %s: %v", listed, line[2].Metadata, err)
	}
	// What WrapTool and Scope write of a failure (an error that quotes the
	// call's arguments, a panic's value) is content: encrypted in the
	// messages and tool results, never in a summary or metadata.
	failure := "MARKER-tool-error-" + uuid.NewString()[:8]
	tool := engine.WrapTool(eng, "dumped", "charge", func(context.Context, string) (string, error) {
		return "", errors.New(failure)
	})
	if _, err := tool(e.ctx, "card"); err == nil {
		t.Fatal("the tool's error was lost")
	}
	scoped := "MARKER-scope-error-" + uuid.NewString()[:8]
	if err := eng.Scope(e.ctx, "dumped", nil, func(context.Context) error { return errors.New(scoped) }); err == nil {
		t.Fatal("the scope's error was lost")
	}
	markers = append(markers, failure, scoped)
	withFailure, err := eng.Get(e.ctx, mustNth(t, e.ctx, eng, "dumped", 2))
	if err != nil || !bytes.Contains(withFailure.Messages, []byte(failure)) || strings.Contains(withFailure.Summary, failure) {
		t.Fatalf("the tool's failure: messages hold it %v, summary %q (%v)", bytes.Contains(withFailure.Messages, []byte(failure)), withFailure.Summary, err)
	}
	dump := e.h.Dump(t, e.url)
	if !bytes.Contains(dump, []byte("visible")) {
		t.Fatalf("the dump (%d bytes) does not hold the plaintext metadata: it is not a dump of the database", len(dump))
	}
	for _, m := range markers {
		if bytes.Contains(dump, []byte(m)) {
			t.Errorf("the dump holds %q in plaintext", m)
		}
	}
}

// mustNth returns the id of the checkpoint n before the head of thread
// (0: the head).
func mustNth(t *testing.T, ctx context.Context, eng *engine.Engine, thread string, n int) uuid.UUID {
	t.Helper()
	list, err := eng.ListCheckpoints(ctx, thread, engine.ListOptions{Limit: n + 1})
	if err != nil || len(list) <= n {
		t.Fatalf("list %s: %d, %v", thread, len(list), err)
	}
	return list[n].ID
}

// By default a long value is compressed before it is encrypted, so its
// stored text is shorter than its plaintext; with NoCompress it is longer
// (base64, nonce, tag, origin). Both read back.
func testCompressedByDefault(t *testing.T, e *cryptEnv) {
	var db *sql.DB
	// A long message (DEFLATE) and a short state value (an S2 block).
	long := mustJSON([]string{strings.Repeat("the agent reads the tool result and answers. ", 50)})
	short := mustJSON(map[string]string{"plan": strings.Repeat("search, ", 10)})
	stored := map[bool][2]int{}
	for _, c := range []struct {
		thread     string
		noCompress bool
	}{{"compressed", false}, {"uncompressed", true}} {
		eng := e.open(nil, engine.Config{Encryption: engine.Encryption{NoCompress: c.noCompress}})
		res := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: c.thread, Messages: long, State: short})
		if db == nil {
			db = e.h.SQL(t, e.url) // once the engine has migrated the database
		}
		var messages, state string
		if err := db.QueryRowContext(e.ctx, "SELECT messages, state FROM checkpoints WHERE checkpoint_id = $1", res.ID.String()).Scan(&messages, &state); err != nil {
			t.Fatal(err)
		}
		if shorter := len(messages) < len(long); shorter == c.noCompress {
			t.Errorf("%s: %d bytes of messages stored for %d of plaintext", c.thread, len(messages), len(long))
		}
		stored[c.noCompress] = [2]int{len(messages), len(state)}
		got, err := eng.Get(e.ctx, res.ID)
		if err != nil || !sameJSON(got.Messages, long) || !sameJSON(got.State, short) {
			t.Fatalf("%s: read back %v", c.thread, err)
		}
	}
	if stored[false][1] >= stored[true][1] {
		t.Errorf("a short state value stored in %d bytes compressed, %d with NoCompress", stored[false][1], stored[true][1])
	}
}

// Metadata encrypted under MetadataKeys reads back decrypted through every
// listing, also by an Engine whose MetadataKeys no longer names the key;
// an Engine without the key refuses the listings (ErrEncrypted) rather
// than show the ciphertext.
func testEncryptedMetadataFailsClosed(t *testing.T, e *cryptEnv) {
	marker := "MARKER-meta-" + uuid.NewString()[:8]
	eng := e.open(nil, engine.Config{Encryption: engine.Encryption{MetadataKeys: []string{"secret"}}})
	res := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "m", State: mustJSON(map[string]int{"k": 1}),
		Metadata: mustJSON(map[string]string{"secret": marker, "plain": "visible"})})
	reads := func(eng *engine.Engine) map[string][]byte {
		out := map[string][]byte{}
		var errs []error
		c, err := eng.Get(e.ctx, res.ID)
		if errs = append(errs, err); err == nil {
			out["Get"] = c.Metadata
		}
		list, err := eng.ListCheckpoints(e.ctx, "m", engine.ListOptions{})
		if errs = append(errs, err); err == nil && len(list) == 1 {
			out["ListCheckpoints"] = list[0].Metadata
		}
		line, err := eng.Lineage(e.ctx, res.ID)
		if errs = append(errs, err); err == nil && len(line) == 1 {
			out["Lineage"] = line[0].Metadata
		}
		for i, err := range errs {
			if err != nil && !errors.Is(err, engine.ErrEncrypted) {
				t.Fatalf("read %d: %v, want ErrEncrypted or content", i, err)
			}
		}
		return out
	}
	for name, eng := range map[string]*engine.Engine{"same keys": eng, "no MetadataKeys": e.open(nil, engine.Config{})} {
		got := reads(eng)
		for _, read := range []string{"Get", "ListCheckpoints", "Lineage"} {
			if !bytes.Contains(got[read], []byte(marker)) || !bytes.Contains(got[read], []byte("visible")) {
				t.Errorf("%s: %s reads metadata %s", name, read, got[read])
			}
		}
	}
	if got := reads(e.plain(engine.Config{})); len(got) > 0 {
		t.Errorf("an engine without the key read %q", got)
	}
	// A filter on an encrypted key could match nothing: refused, typed; a
	// filter on a key in the clear still works.
	if list, err := eng.ListCheckpoints(e.ctx, "m", engine.ListOptions{Metadata: mustJSON(map[string]string{"secret": marker})}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Errorf("a metadata filter on an encrypted key: %d rows, %v; want ErrInvalidInput", len(list), err)
	}
	if list, err := eng.ListCheckpoints(e.ctx, "m", engine.ListOptions{Metadata: json.RawMessage(`{"plain":"visible"}`)}); err != nil || len(list) != 1 {
		t.Errorf("a metadata filter on a key in the clear: %d rows, %v; want 1", len(list), err)
	}
}

// Metadata under MetadataKeys that a branch's first checkpoint copied from
// its source, and a merge from the merged branch's head, reads back
// through every read (Get, Latest, ListCheckpoints, TimeTravelPoints,
// Lineage): a branch not yet written to has no data key of its own, and
// those values stay under their source thread's key. Metadata moved from a
// parent in the same thread is still refused.
func testEncryptedMetadataOfBranchesAndMerges(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{Encryption: engine.Encryption{MetadataKeys: []string{"secret"}}})
	meta := func(s string) json.RawMessage { return mustJSON(map[string]string{"secret": s, "plain": "visible"}) }
	src := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "src", Messages: json.RawMessage(`["a"]`), Metadata: meta("MARKER-src")})
	br, err := eng.Branch(e.ctx, src.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	// check reads checkpoint id of thread (its head when head) every way.
	check := func(when, thread string, id uuid.UUID, head bool, marker string) {
		t.Helper()
		c, err := eng.Get(e.ctx, id)
		if err != nil || !bytes.Contains(c.Metadata, []byte(marker)) {
			t.Errorf("%s: Get: %v, %s", when, err, metaOf(c))
		}
		c, err = eng.Latest(e.ctx, thread)
		if err != nil || (head && (c.ID != id || !bytes.Contains(c.Metadata, []byte(marker)))) {
			t.Errorf("%s: Latest: %v, %s", when, err, metaOf(c))
		}
		lists := map[string]func() ([]engine.CheckpointInfo, error){
			"ListCheckpoints": func() ([]engine.CheckpointInfo, error) {
				return eng.ListCheckpoints(e.ctx, thread, engine.ListOptions{})
			},
			"TimeTravelPoints": func() ([]engine.CheckpointInfo, error) {
				return eng.TimeTravelPoints(e.ctx, thread, engine.PointsOptions{})
			},
			"Lineage": func() ([]engine.CheckpointInfo, error) { return eng.Lineage(e.ctx, id) },
		}
		for name, list := range lists {
			infos, err := list()
			i := slices.IndexFunc(infos, func(c engine.CheckpointInfo) bool { return c.ID == id })
			if err != nil || i < 0 || !bytes.Contains(infos[i].Metadata, []byte(marker)) {
				t.Errorf("%s: %s: %v, %d rows", when, name, err, len(infos))
			}
		}
	}
	check("a branch not written to", br.ThreadID, br.CheckpointID, true, "MARKER-src")
	onBranch := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: br.ThreadID, Messages: json.RawMessage(`["a","b"]`), Metadata: meta("MARKER-branch")})
	check("a branch written to", br.ThreadID, br.CheckpointID, false, "MARKER-src")
	m, err := eng.MergeBranch(e.ctx, br.ThreadID, "src")
	if err != nil {
		t.Fatal(err)
	}
	check("a merge", "src", m.CheckpointID, true, "MARKER-branch")
	// An ancestor's own metadata put in the place of a later checkpoint's
	// of the same thread.
	child := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "src", Messages: json.RawMessage(`["c"]`), Metadata: meta("MARKER-child")})
	db := e.h.SQL(t, e.url)
	if _, err := db.ExecContext(e.ctx, `UPDATE checkpoints SET metadata = (SELECT metadata FROM checkpoints WHERE checkpoint_id = $1) WHERE checkpoint_id = $2`,
		src.ID.String(), child.ID.String()); err != nil {
		t.Fatal(err)
	}
	c, err := eng.Get(e.ctx, child.ID)
	refused(t, "an ancestor's metadata moved into a checkpoint of its thread", c, err, "MARKER-src")
	list, err := eng.ListCheckpoints(e.ctx, "src", engine.ListOptions{})
	if !errors.Is(err, engine.ErrEncrypted) {
		t.Errorf("ListCheckpoints with an ancestor's metadata moved: %v, %d rows, want ErrEncrypted", err, len(list))
	}
	// The branch's first checkpoint's copied metadata moved to a later
	// checkpoint of the branch: only a branch's first may hold it.
	if _, err := db.ExecContext(e.ctx, `UPDATE checkpoints SET metadata = (SELECT metadata FROM checkpoints WHERE checkpoint_id = $1) WHERE checkpoint_id = $2`,
		br.CheckpointID.String(), onBranch.ID.String()); err != nil {
		t.Fatal(err)
	}
	c, err = eng.Get(e.ctx, onBranch.ID)
	refused(t, "a branch's copied metadata moved to its next checkpoint", c, err, "MARKER-src")
	// Moved from a checkpoint deleted since: still not its own.
	full := e.open(nil, engine.Config{FullSnapshots: true, Encryption: engine.Encryption{MetadataKeys: []string{"secret"}}})
	var ids []uuid.UUID
	for i := range 3 {
		ids = append(ids, snapWith(t, e.ctx, full, engine.SnapshotInput{ThreadID: "cut", Messages: mustJSON([]int{i}), Metadata: meta(fmt.Sprintf("MARKER-cut-%d", i))}).ID)
	}
	if _, err := db.ExecContext(e.ctx, `UPDATE checkpoints SET metadata = (SELECT metadata FROM checkpoints WHERE checkpoint_id = $1) WHERE checkpoint_id = $2`,
		ids[0].String(), ids[1].String()); err != nil {
		t.Fatal(err)
	}
	if _, err := full.DeleteCheckpoints(e.ctx, engine.BeforeStep("cut", 2)); err != nil {
		t.Fatal(err)
	}
	fresh := e.open(nil, engine.Config{Encryption: engine.Encryption{MetadataKeys: []string{"secret"}}})
	c, err = fresh.Get(e.ctx, ids[1])
	refused(t, "metadata moved from a checkpoint deleted since", c, err, "MARKER-cut-0")
	list, err = fresh.ListCheckpoints(e.ctx, "cut", engine.ListOptions{})
	if !errors.Is(err, engine.ErrEncrypted) {
		t.Errorf("ListCheckpoints with metadata moved from a checkpoint deleted since: %v, %d rows, want ErrEncrypted", err, len(list))
	}
}

// A merge under encryption holds the merged content under the target's
// own key: once the branch is deleted (and its source's checkpoints with
// it), the merge, the checkpoints written on it and the target's head
// still read, in a process that never read the branch. A merge of a
// branch never written to (its head holds its source's values) too.
func testEncryptedMergeOutlivesItsBranch(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{DeltaMinBytes: -1, Encryption: engine.Encryption{MetadataKeys: []string{"secret"}}})
	msg := func(s string) json.RawMessage { return mustJSON([]map[string]string{{"role": "user", "content": s}}) }
	src := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "target", Messages: msg("one"), State: json.RawMessage(`{"k":1}`)})
	br, err := eng.Branch(e.ctx, src.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"two", "three"} {
		if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: br.ThreadID, Messages: msg(m), SetState: json.RawMessage(`{"b":"` + m + `"}`),
			Metadata: mustJSON(map[string]string{"secret": "MARKER-" + m})}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := eng.Latest(e.ctx, br.ThreadID)
	if err != nil {
		t.Fatal(err)
	}
	m, err := eng.MergeBranch(e.ctx, br.ThreadID, "target")
	if err != nil {
		t.Fatal(err)
	}
	if m.MergeParentID != want.ID || m.ParentID != src.ID {
		t.Fatalf("merge %+v: want merge parent %s, parent %s", m, want.ID, src.ID)
	}
	after, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "target", Messages: msg("four")})
	if err != nil {
		t.Fatal(err)
	}
	// A branch never written to, merged: its head is the source's values.
	fresh, err := eng.Branch(e.ctx, src.ID, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	other := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "target-2", Messages: msg("x")})
	m2, err := eng.MergeBranch(e.ctx, fresh.ThreadID, "target-2")
	if err != nil || m2.ParentID != other.ID || m2.MergeParentID != fresh.CheckpointID {
		t.Fatalf("merge of a branch never written to: %+v, %v", m2, err)
	}
	if _, err := eng.DeleteThreads(e.ctx, br.ThreadID, fresh.ThreadID); err != nil {
		t.Fatal(err)
	}
	reader := e.open(nil, engine.Config{}) // has read no lineage
	c, err := reader.Get(e.ctx, m.CheckpointID)
	if err != nil {
		t.Fatalf("the merge, its branch deleted: %v", err)
	}
	if !jsontext.Same(c.Messages, want.Messages) || !jsontext.Same(c.State, want.State) || !jsontext.Same(c.Metadata, want.Metadata) || c.MergeParentID != want.ID {
		t.Errorf("the merge reads %s %s %s (merge parent %s), want the branch head's %s %s %s (%s)",
			c.Messages, c.State, c.Metadata, c.MergeParentID, want.Messages, want.State, want.Metadata, want.ID)
	}
	head, err := reader.Latest(e.ctx, "target")
	if err != nil || head.ID != after.ID || !bytes.Contains(head.Messages, []byte("four")) || !bytes.Contains(head.Messages, []byte("three")) {
		t.Fatalf("the target's head after the merge, its branch deleted: %v", err)
	}
	if _, err := reader.ListCheckpoints(e.ctx, "target", engine.ListOptions{}); err != nil {
		t.Errorf("list the target: %v", err)
	}
	c, err = reader.Latest(e.ctx, "target-2")
	if err != nil || c.ID != m2.CheckpointID || !jsontext.Same(c.Messages, msg("one")) {
		t.Fatalf("the merge of a branch never written to, the branch deleted: %v", err)
	}
	// A store holds a merge to its rule: onto a head, from another thread.
	put := func(thread string, mergeParent uuid.UUID) error {
		_, err := eng.Store().Put(e.ctx, engine.PutRequest{ThreadID: thread, ID: engine.NewCheckpointID(), Trigger: engine.TriggerManual,
			Tags: []string{}, Metadata: json.RawMessage(`{}`), Messages: json.RawMessage(`[]`), State: json.RawMessage(`{}`),
			ToolResults: json.RawMessage(`{}`), DeltaRun: 1, Sealed: true, MergeParentID: mergeParent})
		return err
	}
	for name, err := range map[string]error{
		"onto a thread without a checkpoint": put("nowhere", after.ID),
		"of a checkpoint of the same thread": put("target", src.ID),
		"of an unknown checkpoint":           put("target", engine.NewCheckpointID()),
	} {
		if !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("a merge %s: %v, want ErrNotFound", name, err)
		}
	}
	if c, err := reader.Latest(e.ctx, "target"); err != nil || c.ID != after.ID {
		t.Errorf("refused merges moved the head: %v", err)
	}
	// A retry of a write names the same merge parent, as both stores
	// compare it (the same content with one would be another write).
	again := engine.PutRequest{ThreadID: "target", ID: engine.NewCheckpointID(), Trigger: engine.TriggerManual,
		Tags: []string{}, Metadata: json.RawMessage(`{}`), Messages: json.RawMessage(`["r"]`), State: json.RawMessage(`{}`),
		ToolResults: json.RawMessage(`{}`), DeltaRun: 1, Sealed: true}
	if _, err := eng.Store().Put(e.ctx, again); err != nil {
		t.Fatal(err)
	}
	again.MergeParentID = want.ID
	if _, err := eng.Store().Put(e.ctx, again); !errors.Is(err, engine.ErrIDConflict) {
		t.Errorf("a retry of a write with a merge parent it had not: %v, want ErrIDConflict", err)
	}
}

// metaOf is a checkpoint's metadata, or "(none)" for nil.
func metaOf(c *engine.Checkpoint) string {
	if c == nil {
		return "(none)"
	}
	return string(c.Metadata)
}

// An Engine remembers the parent links it read (so a delta's read needs
// no lineage read): a value moved from a checkpoint it has seen, of
// another line, is still refused.
func testMovedAfterLineagesRead(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{DeltaMinBytes: -1})
	snap := func(msgs ...string) uuid.UUID {
		return snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "c", Messages: mustJSON(msgs)}).ID
	}
	x1 := snap("SECRET-one")
	x2 := snap("SECRET-one", "SECRET-two")
	if _, err := eng.Rewind(e.ctx, x1); err != nil {
		t.Fatal(err)
	}
	x3 := snap("SECRET-one", "SECRET-three") // x1's child on another line than x2
	for _, id := range []uuid.UUID{x2, x3} { // x2 first: its lineage is read, and remembered
		c, err := eng.Get(e.ctx, id)
		if err != nil || c.Format != engine.StorageDelta {
			t.Fatalf("get %s: %v (format %v)", id, err, c)
		}
	}
	db := e.h.SQL(t, e.url)
	if _, err := db.ExecContext(e.ctx, `UPDATE checkpoints SET messages = (SELECT messages FROM checkpoints WHERE checkpoint_id = $1)
		WHERE checkpoint_id = $2`, x2.String(), x3.String()); err != nil {
		t.Fatal(err)
	}
	c, err := eng.Get(e.ctx, x3)
	refused(t, "x2's message moved into x3", c, err, "SECRET")
}

// Whoever holds the database but not the key cannot move, alter or
// replace a ciphertext without the read failing with ErrEncrypted.
func testTamperingFailsClosed(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{FullSnapshots: true})
	db := e.h.SQL(t, e.url)
	content := func(i int, tag string) engine.SnapshotInput {
		return engine.SnapshotInput{
			Messages:    json.RawMessage(fmt.Sprintf(`[{"content":"SECRET %s first %d"},{"content":"SECRET %s second %d"}]`, tag, i, tag, i)),
			State:       json.RawMessage(fmt.Sprintf(`{"a":"SECRET %s state %d","b":"SECRET %s other %d"}`, tag, i, tag, i)),
			ToolResults: json.RawMessage(fmt.Sprintf(`{"a":"SECRET %s tool %d"}`, tag, i)),
		}
	}
	write := func(thread string, i int) uuid.UUID {
		in := content(i, thread)
		in.ThreadID = thread
		id := snapWith(t, e.ctx, eng, in).ID
		if _, err := eng.PutWrites(e.ctx, id, "task", []engine.Write{{Channel: "c", Value: mustJSON(thread + " write")}}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	a1, a2, a3 := write("a", 1), write("a", 2), write("a", 3)
	if _, err := eng.Rewind(e.ctx, a1); err != nil {
		t.Fatal(err)
	}
	a4 := write("a", 4) // a1's child on another line than a2 and a3
	b1 := write("b", 1)
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
	check := func(what string, id uuid.UUID) {
		t.Helper()
		c, err := eng.Get(e.ctx, id)
		refused(t, what, c, err, "SECRET")
	}
	// Each case alters one row, reads it, and puts the row back.
	for _, tc := range []struct {
		name  string
		col   string
		id    uuid.UUID
		value func(orig string) string
	}{
		{"messages moved from another thread", "messages", a2, func(string) string { return column("messages", b1) }},
		{"messages moved from a later checkpoint", "messages", a2, func(string) string { return column("messages", a3) }},
		{"messages moved from an older checkpoint of another line", "messages", a4, func(string) string { return column("messages", a2) }},
		{"a state value moved to the tool results", "tool_results", a2, func(string) string {
			var st map[string]string
			_ = json.Unmarshal([]byte(column("state", a2)), &st)
			return string(mustJSON(map[string]string{"a": st["a"]}))
		}},
		{"a state value moved to another key", "state", a2, func(orig string) string {
			var st map[string]string
			_ = json.Unmarshal([]byte(orig), &st)
			st["a"], st["b"] = st["b"], st["a"]
			return string(mustJSON(st))
		}},
		{"two messages swapped", "messages", a2, func(orig string) string {
			var ms []string
			_ = json.Unmarshal([]byte(orig), &ms)
			ms[0], ms[1] = ms[1], ms[0]
			return string(mustJSON(ms))
		}},
		{"one byte of a ciphertext flipped", "messages", a2, func(orig string) string {
			var ms []string
			_ = json.Unmarshal([]byte(orig), &ms)
			raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(ms[1], "$pgc1$"))
			if err != nil {
				t.Fatalf("stored message %q is not an envelope: %v", ms[1], err)
			}
			raw[len(raw)-20] ^= 1
			ms[1] = "$pgc1$" + base64.StdEncoding.EncodeToString(raw)
			return string(mustJSON(ms))
		}},
		{"a plaintext message", "messages", a2, func(string) string { return `[{"content":"planted"}]` }},
		{"a plaintext state value", "state", a2, func(orig string) string {
			var st map[string]any
			_ = json.Unmarshal([]byte(orig), &st)
			st["a"] = "planted"
			return string(mustJSON(st))
		}},
		{"a plaintext tool result", "tool_results", a2, func(string) string { return `{"a":"planted"}` }},
	} {
		orig := column(tc.col, tc.id)
		set(tc.col, tc.id, tc.value(orig))
		check(tc.name, tc.id)
		set(tc.col, tc.id, orig)
		if _, err := eng.Get(e.ctx, tc.id); err != nil {
			t.Fatalf("%s: put back: %v", tc.name, err)
		}
	}
	// Messages of a later checkpoint, deleted since: a4's child, whose id
	// was made after a4 was written by more than clocks may differ.
	in := content(5, "a")
	in.ThreadID, in.ID = "a", idAt(t, time.Now().Add(time.Hour))
	a5 := snapWith(t, e.ctx, eng, in).ID
	orig, later := column("messages", a4), column("messages", a5)
	if _, err := eng.RewindAndTruncate(e.ctx, a4); err != nil {
		t.Fatal(err)
	}
	set("messages", a4, later)
	if _, err := eng.Get(e.ctx, a5); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the later checkpoint is still there: %v", err)
	}
	check("messages of a later checkpoint deleted since", a4)
	set("messages", a4, orig)
	// A pending write moved to another checkpoint of the thread.
	if _, err := db.ExecContext(e.ctx, `UPDATE pending_writes SET value = (SELECT value FROM pending_writes WHERE checkpoint_id = $1)
		WHERE checkpoint_id = $2`, a1.String(), a2.String()); err != nil {
		t.Fatal(err)
	}
	check("a pending write moved", a2)
	// A plaintext pending write.
	if _, err := db.ExecContext(e.ctx, `UPDATE pending_writes SET value = $1 WHERE checkpoint_id = $2`, `"planted"`, a3.String()); err != nil {
		t.Fatal(err)
	}
	check("a plaintext pending write", a3)
	// A thread's wrapped key copied over another's.
	if _, err := db.ExecContext(e.ctx, `UPDATE data_keys SET wrapped_key = (SELECT wrapped_key FROM data_keys WHERE thread_id = 'a')
		WHERE thread_id = 'b'`); err != nil {
		t.Fatal(err)
	}
	check("a data key moved", b1)
	// A thread's wrapped key planted for a thread that has none: writes
	// to it must not use another thread's key.
	if _, err := db.ExecContext(e.ctx, `INSERT INTO data_keys (tenant_id, thread_id, kek_id, wrapped_key, created_at)
		SELECT tenant_id, 'c', kek_id, wrapped_key, created_at FROM data_keys WHERE thread_id = 'a'`); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "c", Messages: json.RawMessage(`["SECRET"]`)}); !errors.Is(err, engine.ErrEncrypted) {
		t.Fatalf("a write under a planted key: %v, want ErrEncrypted", err)
	}
	// The key row deleted.
	if _, err := db.ExecContext(e.ctx, `DELETE FROM data_keys WHERE thread_id = 'a'`); err != nil {
		t.Fatal(err)
	}
	check("the key dropped", a1)
	c, err := eng.Latest(e.ctx, "a")
	refused(t, "latest without the key", c, err)
}

// A wrong key-encryption key, one the provider no longer holds, and an
// engine without encryption each read nothing of an encrypted thread.
func testWrongKeysFailClosed(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{})
	markers := e.writeMarkers(eng, "secret")
	head, err := eng.Latest(e.ctx, "secret")
	if err != nil {
		t.Fatal(err)
	}
	wrong := e.open(newKeys(t, "k1"), engine.Config{}) // the same id, other bytes
	c, err := wrong.Get(e.ctx, head.ID)
	refused(t, "a wrong key", c, err, markers...)
	revoked := e.open(newKeys(t, "k2"), engine.Config{})
	c, err = revoked.Latest(e.ctx, "secret")
	refused(t, "a revoked key", c, err, markers...)
	if _, err := revoked.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "secret", Messages: json.RawMessage(`[1]`)}); !errors.Is(err, engine.ErrEncrypted) {
		t.Fatalf("a write without the thread's key: %v, want ErrEncrypted", err)
	}
	plain := e.plain(engine.Config{})
	c, err = plain.Get(e.ctx, head.ID)
	refused(t, "no encryption configured", c, err, markers...)
	// A fresh branch holds the source thread's ciphertext and has no data
	// key of its own yet; so does a merge of it: neither reads as content.
	br, err := eng.Branch(e.ctx, head.ID, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	c, err = plain.Latest(e.ctx, br.ThreadID)
	refused(t, "a fresh branch, no encryption configured", c, err, markers...)
	c, err = plain.Get(e.ctx, br.CheckpointID)
	refused(t, "a fresh branch's checkpoint, no encryption configured", c, err, markers...)
	// A plaintext checkpoint of a thread that was written before the
	// thread's first encrypted write (an Engine that did not encrypt yet)
	// is refused when read. (Once the thread has a key, such a write is
	// refused: PlaintextWritesToEncryptedThreadsAreRefused.)
	res, err := plain.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "mixed", Messages: json.RawMessage(`["planted"]`),
		State: json.RawMessage(`{"k":"planted"}`)})
	if err != nil {
		t.Fatal(err)
	}
	snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "mixed", Messages: json.RawMessage(`["sealed"]`)})
	c, err = eng.Get(e.ctx, res.ID)
	refused(t, "a plaintext checkpoint in an encrypted thread", c, err)
}

// An Engine without encryption (a process deployed without the key) writes
// nothing into an encrypted thread: Snapshot, Append, PutWrites and
// ClearMemory fail with ErrEncrypted and leave no row, while the thread has
// its key and after the key is shredded; so do a merge into it and a copy
// of it, and a copy or an import of plaintext onto an id whose encrypted
// thread was deleted (its key stays) is refused. A thread without a key
// takes its writes as before, and the encrypting Engine goes on writing.
func testPlaintextWritesRefused(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{})
	var before int // rows of thread "sealed", once written
	e.writeMarkers(eng, "sealed")
	head, err := eng.Latest(e.ctx, "sealed")
	if err != nil {
		t.Fatal(err)
	}
	db := e.h.SQL(t, e.url)
	rows := func() (n int) {
		t.Helper()
		if err := db.QueryRowContext(e.ctx, `SELECT (SELECT count(*) FROM checkpoints WHERE thread_id = 'sealed')
			+ (SELECT count(*) FROM pending_writes WHERE thread_id = 'sealed')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	plain := e.plain(engine.Config{DeltaMinBytes: -1})
	writes := []struct {
		name string
		fn   func(eng *engine.Engine) error
	}{
		{"Snapshot", func(eng *engine.Engine) error {
			_, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "sealed", Messages: json.RawMessage(`["plain"]`)})
			return err
		}},
		{"Snapshot on a parent", func(eng *engine.Engine) error {
			_, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "sealed", ParentID: head.ID, Messages: json.RawMessage(`["plain"]`)})
			return err
		}},
		{"Append", func(eng *engine.Engine) error {
			_, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "sealed", Messages: json.RawMessage(`["plain"]`)})
			return err
		}},
		{"PutWrites", func(eng *engine.Engine) error {
			_, err := eng.PutWrites(e.ctx, head.ID, "plain-task", []engine.Write{{Channel: "c", Value: json.RawMessage(`"plain"`)}})
			return err
		}},
		{"ClearMemory", func(eng *engine.Engine) error {
			_, err := eng.ClearMemory(e.ctx, "sealed")
			return err
		}},
	}
	refusedAll := func(when string) {
		t.Helper()
		before = rows()
		for _, w := range writes {
			if err := w.fn(plain); !errors.Is(err, engine.ErrEncrypted) {
				t.Errorf("%s: %s without encryption: %v, want ErrEncrypted", when, w.name, err)
			}
		}
		if n := rows(); n != before {
			t.Errorf("%s: refused writes left rows: %d, want %d", when, n, before)
		}
	}
	refusedAll("an encrypted thread")
	// What copies stored values: a merge into the encrypted thread and a
	// copy of it, by an Engine without encryption.
	snapWith(t, e.ctx, plain, engine.SnapshotInput{ThreadID: "plain-branch", Messages: json.RawMessage(`["plain"]`)})
	if _, err := plain.MergeBranch(e.ctx, "plain-branch", "sealed"); !errors.Is(err, engine.ErrEncrypted) {
		t.Errorf("a merge into an encrypted thread without encryption: %v, want ErrEncrypted", err)
	}
	if _, err := plain.CopyThread(e.ctx, "sealed", "sealed-copy"); !errors.Is(err, engine.ErrEncrypted) {
		t.Errorf("a copy of an encrypted thread without encryption: %v, want ErrEncrypted", err)
	}
	if n := rows(); n != before {
		t.Errorf("a refused merge left rows: %d, want %d", n, before)
	}
	// A fresh branch holds its source's sealed values: encrypted at once.
	br, err := eng.Branch(e.ctx, head.ID, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Append(e.ctx, engine.AppendInput{ThreadID: br.ThreadID, Messages: json.RawMessage(`["plain"]`)}); !errors.Is(err, engine.ErrEncrypted) {
		t.Errorf("a write without encryption on a fresh branch of an encrypted thread: %v, want ErrEncrypted", err)
	}
	// Without the key, no branch of it and no merge of its branch
	// elsewhere (the values would go where plaintext is then written).
	if _, err := plain.Branch(e.ctx, head.ID, "plain"); !errors.Is(err, engine.ErrEncrypted) {
		t.Errorf("a branch of an encrypted thread without encryption: %v, want ErrEncrypted", err)
	}
	if _, err := plain.MergeBranch(e.ctx, br.ThreadID, "plain-branch"); !errors.Is(err, engine.ErrEncrypted) {
		t.Errorf("a merge of an encrypted branch without encryption: %v, want ErrEncrypted", err)
	}
	// A refused encrypting merge (no target there) leaves no data key.
	if _, err := eng.MergeBranch(e.ctx, br.ThreadID, "typo"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("a merge into no thread: %v, want ErrNotFound", err)
	}
	snapWith(t, e.ctx, plain, engine.SnapshotInput{ThreadID: "typo", Messages: json.RawMessage(`["plain"]`)})
	// An encrypting Engine's branch of a thread written before encryption
	// was on gets no key: an Engine without encryption goes on with it.
	legacy := snapWith(t, e.ctx, plain, engine.SnapshotInput{ThreadID: "legacy", Messages: json.RawMessage(`["plain"]`)})
	lb, err := eng.Branch(e.ctx, legacy.ID, "lb")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Append(e.ctx, engine.AppendInput{ThreadID: lb.ThreadID, Messages: json.RawMessage(`["more"]`)}); err != nil {
		t.Errorf("a branch of a plaintext thread, made by an encrypting engine, written without encryption: %v", err)
	}
	// The stores refuse a branch of an encrypted thread to an id without a
	// key, as thread_branch from SQL does: a client without the key would
	// write plaintext onto its sealed values. Nothing is written.
	if _, err := eng.Store().Branch(e.ctx, head.ID, "raw", "raw", engine.NewCheckpointID()); !errors.Is(err, engine.ErrEncrypted) {
		t.Errorf("the store's branch of an encrypted thread to an id without a key: %v, want ErrEncrypted", err)
	}
	if _, err := eng.Latest(e.ctx, "raw"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("a refused branch left its thread: %v", err)
	}
	// A thread without a key that holds sealed values (a branch made before
	// branches were given keys: here the branch's key deleted from SQL): an
	// encrypting Engine's branch of it gets a key all the same.
	raw, err := eng.Branch(e.ctx, head.ID, "raw")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := db.ExecContext(e.ctx, `DELETE FROM data_keys WHERE thread_id = $1`, raw.ThreadID); err != nil {
		t.Fatal(err)
	} else if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("deleted %d keys of the branch (%v), want 1", n, err)
	}
	rb, err := eng.Branch(e.ctx, raw.CheckpointID, "rb")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Append(e.ctx, engine.AppendInput{ThreadID: rb.ThreadID, Messages: json.RawMessage(`["plain"]`)}); !errors.Is(err, engine.ErrEncrypted) {
		t.Errorf("a write without encryption on a branch of a keyless thread of sealed values: %v, want ErrEncrypted", err)
	}
	// An id whose encrypted thread was deleted keeps its key: a copy or an
	// import of plaintext onto it is refused, nothing written.
	snapWith(t, e.ctx, plain, engine.SnapshotInput{ThreadID: "reused", Messages: json.RawMessage(`["plain"]`)})
	var file bytes.Buffer
	if _, err := plain.Export(e.ctx, "reused", &file); err != nil {
		t.Fatal(err)
	}
	for _, del := range []*engine.Engine{plain, eng} {
		if _, err := del.DeleteThreads(e.ctx, "reused"); err != nil {
			t.Fatal(err)
		}
		if del == plain {
			snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "reused", Messages: json.RawMessage(`["sealed"]`)})
		}
	}
	if _, err := plain.Import(e.ctx, &file, engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) {
		t.Errorf("an import of plaintext onto a key left by a deleted encrypted thread: %v, want ErrInvalidInput", err)
	}
	if _, err := plain.CopyThread(e.ctx, "plain-branch", "reused"); !errors.Is(err, engine.ErrInvalidInput) {
		t.Errorf("a copy onto a key left by a deleted encrypted thread: %v, want ErrInvalidInput", err)
	}
	if got, err := plain.ListThreads(e.ctx, engine.ThreadListOptions{After: "reuse"}); err != nil || (len(got) > 0 && got[0].ThreadID == "reused") {
		t.Errorf("a refused copy or import left thread \"reused\": %v", err)
	}
	for _, w := range writes[:4] {
		if err := w.fn(eng); err != nil {
			t.Fatalf("%s with encryption: %v", w.name, err)
		}
	}
	if had, err := eng.ShredThread(e.ctx, "sealed"); err != nil || !had {
		t.Fatalf("shred: %v, %v", had, err)
	}
	refusedAll("a shredded thread")
	snapWith(t, e.ctx, plain, engine.SnapshotInput{ThreadID: "open", Messages: json.RawMessage(`["plain"]`)})
	if _, err := plain.Append(e.ctx, engine.AppendInput{ThreadID: "open", Messages: json.RawMessage(`["more"]`)}); err != nil {
		t.Fatalf("a thread without a key: %v", err)
	}
}

// A key the provider cannot unwrap (here one planted under another
// thread's id, which its wrapping does not name) stops no other key's
// rotation: RewrapKeys rewraps the rest, counts it as Failed and names it
// in ErrEncrypted.
func testRewrapGoesPastAKeyThatDoesNotOpen(t *testing.T, e *cryptEnv) {
	oldText, newText := engine.NewKeyText("old"), engine.NewKeyText("new")
	parse := func(s string) *engine.LocalKeys { return parseKeys(t, s) }
	eng := e.open(parse(oldText), engine.Config{})
	for _, thread := range []string{"b-good", "z-good"} {
		snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`["x"]`)})
	}
	db := e.h.SQL(t, e.url)
	if _, err := db.ExecContext(e.ctx, `INSERT INTO data_keys (tenant_id, thread_id, kek_id, wrapped_key, created_at)
		SELECT tenant_id, 'a-bad', kek_id, wrapped_key, created_at FROM data_keys WHERE thread_id = 'z-good'`); err != nil {
		t.Fatal(err)
	}
	rot := e.open(parse(newText+"\n"+oldText), engine.Config{})
	r, err := rot.RewrapKeys(e.ctx)
	if !errors.Is(err, engine.ErrEncrypted) || !strings.Contains(fmt.Sprint(err), `thread "a-bad"`) || r.Failed != 1 || r.Rewrapped != 2 {
		t.Fatalf("rewrap with a key that does not open first: %+v, %v; want 2 rewrapped, 1 failed, ErrEncrypted naming a-bad", r, err)
	}
	for _, thread := range []string{"b-good", "z-good"} {
		if _, err := e.open(parse(newText), engine.Config{}).Latest(e.ctx, thread); err != nil {
			t.Errorf("thread %s under the new key alone: %v", thread, err)
		}
	}
}

// RewrapKeys puts every data key under the new key-encryption key, and
// then the new key alone reads every checkpoint.
func testRewrap(t *testing.T, e *cryptEnv) {
	oldText, newText := engine.NewKeyText("old"), engine.NewKeyText("new")
	parse := func(s string) *engine.LocalKeys { return parseKeys(t, s) }
	eng := e.open(parse(oldText), engine.Config{DeltaMinBytes: -1})
	var ids []uuid.UUID
	for i := range 6 {
		res := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: fmt.Sprintf("r%d", i%3),
			Messages: json.RawMessage(fmt.Sprintf(`[{"n":%d}]`, i))})
		ids = append(ids, res.ID)
	}
	db := e.h.SQL(t, e.url)
	content := func() (out []string) {
		rows, err := db.QueryContext(e.ctx, "SELECT checkpoint_id, messages, state, tool_results FROM checkpoints ORDER BY checkpoint_id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, m, s, tr string
			if err := rows.Scan(&id, &m, &s, &tr); err != nil {
				t.Fatal(err)
			}
			out = append(out, id+m+s+tr)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := content()
	rot := e.open(parse(newText+"\n"+oldText), engine.Config{})
	r, err := rot.RewrapKeys(e.ctx)
	if err != nil || r.Rewrapped != 3 {
		t.Fatalf("rewrap: %+v, %v; want 3 keys", r, err)
	}
	if after := content(); !slices.Equal(before, after) || len(after) != len(ids) {
		t.Fatalf("rewrap rewrote content: %d rows before, %d after", len(before), len(after))
	}
	onlyNew := e.open(parse(newText), engine.Config{})
	onlyOld := e.open(parse(oldText), engine.Config{})
	for _, id := range ids {
		if _, err := onlyNew.Get(e.ctx, id); err != nil {
			t.Fatalf("the new key alone: get %s: %v", id, err)
		}
		c, err := onlyOld.Get(e.ctx, id)
		refused(t, "the old key after rotation", c, err)
	}
}

// ShredThread erases one thread: its checkpoints no longer read, nor does
// a write to it; other threads read as before.
func testShredding(t *testing.T, e *cryptEnv) {
	cached := openURL(t, e.url, pgcheckpoint.Options{Config: engine.Config{Encryption: engine.Encryption{Keys: e.keys}}})
	gone := e.writeMarkers(cached, "erase-me")
	kept := e.writeMarkers(cached, "keep-me")
	goneHead, err := cached.Latest(e.ctx, "erase-me")
	if err != nil {
		t.Fatal(err)
	}
	if had, err := cached.ShredThread(e.ctx, "erase-me"); err != nil || !had {
		t.Fatalf("shred: %v, %v", had, err)
	}
	fresh := e.open(nil, engine.Config{})
	for _, eng := range []*engine.Engine{cached, fresh} {
		c, err := eng.Get(e.ctx, goneHead.ID)
		refused(t, "a shredded thread", c, err, gone...)
		c, err = eng.Get(e.ctx, goneHead.ParentID)
		refused(t, "a shredded thread's first checkpoint", c, err, gone...)
		if _, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "erase-me"}); !errors.Is(err, engine.ErrEncrypted) {
			t.Fatalf("a write to a shredded thread: %v, want ErrEncrypted", err)
		}
		head, err := eng.Latest(e.ctx, "keep-me")
		if err != nil || !bytes.Contains(head.Messages, []byte(kept[1])) {
			t.Fatalf("the other thread: %v", err)
		}
	}
	dump := e.h.Dump(t, e.url)
	for _, m := range gone[:6] { // the metadata is plaintext here

		if bytes.Contains(dump, []byte(m)) {
			t.Errorf("the dump holds %q", m)
		}
	}
}

// A backup of the key rows taken before ShredThread, put back after it,
// reads the thread again when the database held the wrapped data key
// (LocalKeys), and does not with a KeyShredder (HeldKeys), which held the
// key itself and destroyed it; other threads read either way. A rotation
// under HeldKeys leaves no second copy of a key with the provider.
func testShreddingReachesBackups(t *testing.T, e *cryptEnv) {
	e.open(nil, engine.Config{}) // migrates the database
	db := e.h.SQL(t, e.url)
	type row struct {
		kek     string
		wrapped []byte
	}
	backup := func(thread string) row {
		var r row
		if err := db.QueryRowContext(e.ctx, "SELECT kek_id, wrapped_key FROM data_keys WHERE thread_id = $1", thread).Scan(&r.kek, &r.wrapped); err != nil {
			t.Fatal(err)
		}
		return r
	}
	restore := func(thread string, r row) {
		if _, err := db.ExecContext(e.ctx, "UPDATE data_keys SET kek_id = $1, wrapped_key = $2, shredded_at = NULL WHERE thread_id = $3", r.kek, r.wrapped, thread); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	kek := engine.NewKeyText("held")
	parse := func(s string) *engine.LocalKeys {
		k, err := engine.ParseLocalKeys(s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	held := &engine.HeldKeys{Dir: dir, KEKs: parse(kek)}
	for _, c := range []struct {
		name     string
		keys     engine.KeyProvider
		readable bool // after the backup is put back
	}{{"local", e.keys, true}, {"held", held, false}} {
		eng := e.open(c.keys, engine.Config{})
		gone := e.writeMarkers(eng, c.name+"-erased")
		kept := e.writeMarkers(eng, c.name+"-kept")
		saved := backup(c.name + "-erased")
		if had, err := eng.ShredThread(e.ctx, c.name+"-erased"); err != nil || !had {
			t.Fatalf("%s: shred: %v, %v", c.name, had, err)
		}
		restore(c.name+"-erased", saved)
		fresh := e.open(c.keys, engine.Config{})
		got, err := fresh.Latest(e.ctx, c.name+"-erased")
		if c.readable {
			if err != nil || !bytes.Contains(got.Messages, []byte(gone[1])) {
				t.Fatalf("%s: a backup put back: %v (the database held the wrapped key: it reads)", c.name, err)
			}
		} else {
			refused(t, c.name+": a backup put back", got, err, gone...)
		}
		if head, err := fresh.Latest(e.ctx, c.name+"-kept"); err != nil || !bytes.Contains(head.Messages, []byte(kept[1])) {
			t.Fatalf("%s: the other thread: %v", c.name, err)
		}
	}
	// A rotation: the new wrapping replaces the old file, and a backup of
	// the row from before it no longer unwraps.
	files := func() int { return len(HeldKeyFiles(t, dir)) }
	// The other threads' rows would not unwrap under the rotated provider.
	if _, err := db.ExecContext(e.ctx, "DELETE FROM data_keys WHERE thread_id <> 'held-kept'"); err != nil {
		t.Fatal(err)
	}
	before, saved := files(), backup("held-kept")
	rotated := &engine.HeldKeys{Dir: dir, KEKs: parse(engine.NewKeyText("held2") + "\n" + kek)}
	if r, err := e.open(rotated, engine.Config{}).RewrapKeys(e.ctx); err != nil || r.Rewrapped != 1 {
		t.Fatalf("rewrap: %+v, %v", r, err)
	}
	if n := files(); n != before {
		t.Fatalf("%d key files after the rotation, %d before", n, before)
	}
	if _, err := e.open(rotated, engine.Config{}).Latest(e.ctx, "held-kept"); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	restore("held-kept", saved)
	got, err := e.open(rotated, engine.Config{}).Latest(e.ctx, "held-kept")
	refused(t, "a backup from before the rotation", got, err)
}

// The digests that drive delta storage are keyed per thread: the same
// content in two threads has unrelated digests, so equal digests tell
// nothing of equal plaintexts; without encryption they are equal.
func testDigestsAreKeyed(t *testing.T, e *cryptEnv) {
	enc := e.open(nil, engine.Config{DeltaMinBytes: -1})
	plain := e.plain(engine.Config{DeltaMinBytes: -1})
	in := engine.SnapshotInput{Messages: json.RawMessage(`[{"content":"same"}]`), State: json.RawMessage(`{"k":"same"}`)}
	for _, w := range []struct {
		eng    *engine.Engine
		thread string
	}{{enc, "x"}, {enc, "y"}, {plain, "p"}, {plain, "q"}} {
		in.ThreadID = w.thread
		snapWith(t, e.ctx, w.eng, in)
	}
	db := e.h.SQL(t, e.url)
	digests := func(thread string) string {
		var msg []byte
		var state string
		if err := db.QueryRowContext(e.ctx, "SELECT messages_digest, state_digests FROM checkpoints WHERE thread_id = $1", thread).Scan(&msg, &state); err != nil {
			t.Fatal(err)
		}
		if len(msg) == 0 || state == "" {
			t.Fatalf("thread %s has no digests", thread)
		}
		return fmt.Sprintf("%x %s", msg, state)
	}
	if digests("p") != digests("q") {
		t.Fatalf("the same plaintext has other digests without encryption: %s, %s", digests("p"), digests("q"))
	}
	if x, y := digests("x"), digests("y"); x == y || x == digests("p") {
		t.Fatalf("digests under encryption: %s and %s (plaintext's %s)", x, y, digests("p"))
	}
}

// An export of an encrypted thread holds its ciphertexts and its wrapped
// key, never its plaintext, whoever exports it; imported elsewhere, it
// reads with the key-encryption key alone. An export made after the
// thread was shredded holds no key, and its import reads nothing.
func testEncryptedExport(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{DeltaMinBytes: -1})
	markers := e.writeMarkers(eng, "exported")[:6] // the metadata is plaintext here
	want, err := eng.Latest(e.ctx, "exported")
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	st, err := e.plain(engine.Config{}).Export(e.ctx, "exported", &file)
	if err != nil || st.DataKeys != 1 {
		t.Fatalf("export: %+v, %v", st, err)
	}
	for _, m := range markers {
		if bytes.Contains(file.Bytes(), []byte(m)) {
			t.Fatalf("the export holds %q", m)
		}
	}
	if !bytes.Contains(file.Bytes(), []byte(`"kind":"data_key"`)) {
		t.Fatalf("no data key in the export:\n%s", file.Bytes())
	}
	// The thread deleted and imported back from its own export, in the
	// same database: DeleteThreads leaves the data key, the file holds the
	// same one.
	if _, err := eng.DeleteThreads(e.ctx, "exported"); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Import(e.ctx, bytes.NewReader(file.Bytes()), engine.ImportOptions{}); err != nil {
		t.Fatalf("import of a deleted thread's own export: %v", err)
	}
	if back, err := eng.Latest(e.ctx, "exported"); err != nil || !bytes.Equal(back.Messages, want.Messages) || !bytes.Equal(back.State, want.State) {
		t.Fatalf("the thread imported back: %v", err)
	}
	importInto := func(export []byte) string {
		url := e.h.NewURL(t)
		if _, err := openURL(t, url, pgcheckpoint.Options{}).Import(e.ctx, bytes.NewReader(export), engine.ImportOptions{}); err != nil {
			t.Fatalf("import: %v", err)
		}
		return url
	}
	other := importInto(file.Bytes())
	// A key-encryption key's id holding a NUL, which Postgres text cannot
	// keep (a file the SQLite store took would not move to Postgres).
	nul := regexp.MustCompile(`"kek_id":"([^"]*)"`).ReplaceAll(file.Bytes(), []byte(`"kek_id":"a\u0000b"`))
	if bytes.Equal(nul, file.Bytes()) {
		t.Fatal("no kek_id in the export")
	}
	if _, err := openURL(t, e.h.NewURL(t), pgcheckpoint.Options{}).Import(e.ctx, bytes.NewReader(Reseal(nul)), engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), "kek_id contains a NUL") {
		t.Errorf("an import of a kek_id with a NUL: %v, want ErrInvalidInput", err)
	}
	open := func(url string, keys engine.KeyProvider) *engine.Engine {
		return openURL(t, url, pgcheckpoint.Options{Config: engine.Config{Encryption: engine.Encryption{Keys: keys, KeyCacheTTL: -1}}})
	}
	got, err := open(other, e.keys).Latest(e.ctx, "exported")
	if err != nil {
		t.Fatalf("the import read with the key: %v", err)
	}
	jsonEqual(t, "messages", got.Messages, want.Messages)
	jsonEqual(t, "state", got.State, want.State)
	c, err := open(other, newKeys(t, "k1")).Latest(e.ctx, "exported")
	refused(t, "the import read with another key", c, err, markers...)

	if _, err := eng.ShredThread(e.ctx, "exported"); err != nil {
		t.Fatal(err)
	}
	file.Reset()
	if _, err := eng.Export(e.ctx, "exported", &file); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(file.Bytes(), []byte(`"shredded_at"`)) {
		t.Fatalf("the export after shredding holds no shredded key:\n%s", file.Bytes())
	}
	c, err = open(importInto(file.Bytes()), e.keys).Latest(e.ctx, "exported")
	refused(t, "the import of a shredded thread", c, err, markers...)
}

// Data keys belong to a tenant: tenant B's ShredThread and RewrapKeys
// neither reach nor change tenant A's keys, on A's own thread ids; each
// tenant's key opens its own thread of the same id alone. Run where the
// store's isolation applies (Harness.TenantURL).
func testTenantsKeepTheirKeys(t *testing.T, e *cryptEnv) {
	url := e.url
	if e.h.TenantURL != nil {
		url = e.h.TenantURL(t)
	}
	base := openURL(t, url, pgcheckpoint.Options{Config: engine.Config{Encryption: engine.Encryption{Keys: e.keys, KeyCacheTTL: -1}}})
	a, err := base.ForTenant("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := base.ForTenant("b")
	if err != nil {
		t.Fatal(err)
	}
	aMarkers := e.writeMarkers(a, "only-a")
	e.writeMarkers(a, "shared")
	bMarkers := e.writeMarkers(b, "shared")
	keyOf := func(eng *engine.Engine, thread string) engine.WrappedKey {
		k, err := eng.Store().DataKey(e.ctx, thread)
		if err != nil {
			t.Fatalf("data key of %s: %v", thread, err)
		}
		return k
	}
	before := []engine.WrappedKey{keyOf(a, "only-a"), keyOf(a, "shared")}
	if bytes.Equal(before[1].Wrapped, keyOf(b, "shared").Wrapped) {
		t.Fatal("two tenants' threads of one id share a wrapped key")
	}

	r, err := b.RewrapKeys(e.ctx)
	if err != nil || r.Rewrapped != 1 {
		t.Fatalf("tenant b's rewrap: %+v, %v; want its one key rewrapped", r, err)
	}
	if had, err := b.ShredThread(e.ctx, "only-a"); err != nil || had {
		t.Fatalf("tenant b shreds a's thread id: had %v, %v; want no key of b's", had, err)
	}
	if had, err := b.ShredThread(e.ctx, "shared"); err != nil || !had {
		t.Fatalf("tenant b shreds its own thread: had %v, %v", had, err)
	}
	for i, thread := range []string{"only-a", "shared"} {
		if k := keyOf(a, thread); k.KEKID != before[i].KEKID || !bytes.Equal(k.Wrapped, before[i].Wrapped) || !k.ShreddedAt.IsZero() {
			t.Fatalf("tenant a's key of %s changed by tenant b's calls", thread)
		}
		head, err := a.Latest(e.ctx, thread)
		if err != nil {
			t.Fatalf("tenant a reads %s after b's shredding: %v", thread, err)
		}
		if thread == "only-a" && !bytes.Contains(head.Messages, []byte(aMarkers[1])) {
			t.Fatalf("tenant a's %s reads back otherwise", thread)
		}
	}
	c, err := b.Latest(e.ctx, "shared")
	refused(t, "tenant b's shredded thread", c, err, bMarkers...)
	// A's export names the tenant its key is bound to: another tenant's
	// import of it is refused (the key would open nowhere there).
	var file bytes.Buffer
	if _, err := a.Export(e.ctx, "only-a", &file); err != nil {
		t.Fatal(err)
	}
	c3, err := base.ForTenant("c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c3.Import(e.ctx, bytes.NewReader(file.Bytes()), engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), `bound to tenant "a"`) {
		t.Errorf("tenant c imports tenant a's encrypted export: %v, want ErrInvalidInput", err)
	}
	if got, err := c3.ListThreads(e.ctx, engine.ThreadListOptions{}); err != nil || len(got) != 0 {
		t.Errorf("the refused import left tenant c %d threads (%v)", len(got), err)
	}
	// Tenant a's key makes a's thread encrypted, not b's thread of that id:
	// an engine of b without encryption writes it.
	e.writeMarkers(a, "a-later")
	plainBase := openURL(t, url, pgcheckpoint.Options{})
	plainB, err := plainBase.ForTenant("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plainB.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "a-later", Messages: json.RawMessage(`["b's own"]`)}); err != nil {
		t.Fatalf("tenant b writes its thread of the id of a's encrypted thread, without encryption: %v", err)
	}
	if _, err := plainB.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "shared", Messages: json.RawMessage(`["plain"]`)}); !errors.Is(err, engine.ErrEncrypted) {
		t.Fatalf("tenant b writes its own shredded thread without encryption: %v, want ErrEncrypted", err)
	}
}

// An encrypting engine holds an append to Config.MaxSnapshotBytes as a
// plain one does: a store sees only ciphertext, compressed or not, so the
// engine measures the content an append makes (the head's decrypted, the
// change applied) where the head's size and the change's together are
// over the limit. Appends of 1.2 KB each, compressible, under a limit of
// 3,000: the third is refused, nothing written; a key set again over and
// over is accepted, its size the content's, measured in plaintext.
func testEncryptedAppendLimit(t *testing.T, e *cryptEnv) {
	const limit = 3000
	msg := func(i int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"%d %s"}]`, i, strings.Repeat("c", 1200)))
	}
	for name, cfg := range map[string]engine.Config{
		"compressed":   {MaxSnapshotBytes: limit, DeltaMinBytes: -1},
		"uncompressed": {MaxSnapshotBytes: limit, DeltaMinBytes: -1, Encryption: engine.Encryption{NoCompress: true}},
		"whole":        {MaxSnapshotBytes: limit, FullSnapshots: true},
	} {
		eng := e.open(nil, cfg)
		th := "grows " + name
		snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: th})
		for i := range 2 {
			if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: th, Messages: msg(i)}); err != nil {
				t.Fatalf("%s: append %d: %v", name, i, err)
			}
		}
		head, err := eng.Latest(e.ctx, th)
		if err != nil {
			t.Fatal(err)
		}
		_, err = eng.Append(e.ctx, engine.AppendInput{ThreadID: th, Messages: msg(2)})
		if !errors.Is(err, engine.ErrSnapshotTooLarge) {
			t.Fatalf("%s: a third append of 1.2 KB under a limit of %d: %v, want ErrSnapshotTooLarge", name, limit, err)
		}
		if now, err := eng.Latest(e.ctx, th); err != nil || now.ID != head.ID {
			t.Fatalf("%s: the refused append moved the head (%v)", name, err)
		}

		setKeyAgain(t, e.ctx, eng, "replaces "+name, func(i int, set json.RawMessage, got *engine.Checkpoint) {
			// [] and {} around the state, composed without spaces.
			if want := int64(len("[]") + len(set) + len("{}")); got.SizeBytes != want {
				t.Errorf("%s: append %d records SizeBytes %d, want the content's, %d", name, i, got.SizeBytes, want)
			}
		})
	}
}

// A checkpoint's id may be older than its parent's: the id is made before
// the write (and kept over retries) while another writer goes first. Once
// retention deletes that parent, the values it handed on (an Append's
// messages and state, a delta's) still read: an ancestor is not "a later
// checkpoint" by its id. Whole snapshots and appends, each pruned to the
// head alone.
func testAncestorWithNewerID(t *testing.T, e *cryptEnv) {
	for _, cfg := range []engine.Config{{}, {FullSnapshots: true}} {
		eng := e.open(nil, cfg)
		thread := fmt.Sprintf("t-%v", cfg.FullSnapshots)
		snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`["SECRET one"]`), State: json.RawMessage(`{"a":"SECRET a"}`)})
		early := engine.NewCheckpointID() // made first, written last
		time.Sleep(2 * time.Millisecond)  // the parent's id a millisecond later at least
		parent, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: thread, Messages: json.RawMessage(`["SECRET two"]`), SetState: json.RawMessage(`{"b":"SECRET b"}`)})
		if err != nil {
			t.Fatal(err)
		}
		child, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: thread, ID: early, Messages: json.RawMessage(`["SECRET three"]`)})
		if err != nil {
			t.Fatal(err)
		}
		if child.ParentID != parent.ID || bytes.Compare(child.ID[:], parent.ID[:]) >= 0 {
			t.Fatalf("child %s on %s: want an id older than its parent's", child.ID, child.ParentID)
		}
		if _, err := eng.PruneThreads(e.ctx, engine.KeepLastN(1), thread); err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Get(e.ctx, parent.ID); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("the parent after the prune: %v, want ErrNotFound", err)
		}
		fresh := e.open(nil, cfg) // no lineage remembered
		c, err := fresh.Latest(e.ctx, thread)
		if err != nil {
			t.Fatalf("full snapshots %v: the head after its parent was pruned: %v", cfg.FullSnapshots, err)
		}
		if c.ID != child.ID || string(c.Messages) != `["SECRET one","SECRET two","SECRET three"]` || string(c.State) != `{"a":"SECRET a","b":"SECRET b"}` {
			t.Fatalf("full snapshots %v: head %s messages %s state %s", cfg.FullSnapshots, c.ID, c.Messages, c.State)
		}
	}
	// A copy keeps its source's times and makes new ids: a copy of a
	// thread written an hour ago, pruned to its head, still reads (its
	// ids are an hour after its CreatedAt, as are those of a caller's
	// transaction begun long before its writes on Postgres).
	eng := e.open(nil, engine.Config{})
	snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "old", Messages: json.RawMessage(`["SECRET one"]`)})
	for _, m := range []string{`["SECRET two"]`, `["SECRET three"]`} {
		if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "old", Messages: json.RawMessage(m)}); err != nil {
			t.Fatal(err)
		}
	}
	db := e.h.SQL(t, e.url)
	if _, err := db.ExecContext(e.ctx, `UPDATE checkpoints SET created_at = created_at - interval '1 hour' WHERE thread_id = 'old'`); err != nil {
		// SQLite's times are microseconds since 1970.
		if _, err := db.ExecContext(e.ctx, `UPDATE checkpoints SET created_at = created_at - 3600000000 WHERE thread_id = 'old'`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.CopyThread(e.ctx, "old", "copy"); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.PruneThreads(e.ctx, engine.KeepLastN(1), "copy"); err != nil {
		t.Fatal(err)
	}
	c, err := e.open(nil, engine.Config{}).Latest(e.ctx, "copy")
	if err != nil {
		t.Fatalf("a pruned copy of a thread written an hour ago: %v", err)
	}
	if string(c.Messages) != `["SECRET one","SECRET two","SECRET three"]` || time.Since(c.CreatedAt) < time.Hour {
		t.Fatalf("a pruned copy of a thread written an hour ago: messages %s, written %s", c.Messages, c.CreatedAt)
	}
}

// idAt is a new checkpoint id (UUIDv7) made as if at time at.
func idAt(t testing.TB, at time.Time) uuid.UUID {
	t.Helper()
	id := engine.NewCheckpointID()
	ms := at.UnixMilli()
	for i := 5; i >= 0; i-- {
		id[i], ms = byte(ms), ms>>8
	}
	return id
}

// An import cannot measure sealed content's plaintext, so it holds it to
// the most sealing content within Config.MaxSnapshotBytes can make, and
// takes it only for a thread whose data key the file carries. An
// encrypted thread near the limit in short values, which grow most when
// sealed (four times and more), stored whole and as deltas, imports under
// that limit; the same export with one sealed value grown by four times
// the limit (its line still within the longest an import reads) is
// ErrSnapshotTooLarge; a thread of text that only looks
// sealed is ErrInvalidInput though the file carries another thread's key
// (an import took it as long as the file carried any key, and a reader
// without a key then read it as plaintext over the limit). Nothing is
// written by either.
func testImportedSealedContentLimit(t *testing.T, e *cryptEnv) {
	const limit = 6000
	eng := e.open(nil, engine.Config{MaxSnapshotBytes: limit, DeltaMinBytes: -1, Encryption: engine.Encryption{NoCompress: true}})
	words := func(n int) json.RawMessage { // short messages, which grow most when sealed
		return json.RawMessage("[" + strings.TrimSuffix(strings.Repeat(`"`+strings.Repeat("w", 20)+`",`, n), ",") + "]")
	}
	var state strings.Builder
	for i := range 40 {
		fmt.Fprintf(&state, `%s"k%03d":1`, map[bool]string{true: "{", false: ","}[i == 0], i)
	}
	state.WriteString("}")
	snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "k", Messages: words(160), State: json.RawMessage(state.String())})
	for range 4 {
		if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "k", Messages: words(20)}); err != nil {
			t.Fatal(err)
		}
	}
	head, err := eng.Latest(e.ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if head.SizeBytes < limit-200 || head.Format == "full" {
		t.Fatalf("the test needs a delta near the limit: %s, %d bytes", head.Format, head.SizeBytes)
	}
	var file bytes.Buffer
	if _, err := e.plain(engine.Config{}).Export(e.ctx, "k", &file); err != nil {
		t.Fatal(err)
	}
	imported := func(url string) int {
		n := 0
		for _, th := range []string{"k", "lookalike"} {
			list, err := openURL(t, url, pgcheckpoint.Options{}).ListCheckpoints(e.ctx, th, engine.ListOptions{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			n += len(list)
		}
		return n
	}
	into := func(file []byte) (string, error) {
		url := e.h.NewURL(t)
		_, err := openURL(t, url, pgcheckpoint.Options{Config: engine.Config{MaxSnapshotBytes: limit}}).Import(e.ctx, bytes.NewReader(file), engine.ImportOptions{})
		return url, err
	}
	if url, err := into(file.Bytes()); err != nil {
		t.Fatalf("an encrypted thread at the limit, imported under it: %v", err)
	} else if got, err := e.open(nil, engine.Config{}).Latest(e.ctx, "k"); err != nil || imported(url) != 5 {
		t.Fatalf("imported: %d checkpoints, %v", imported(url), err)
	} else if back, err := openURL(t, url, pgcheckpoint.Options{Config: engine.Config{Encryption: engine.Encryption{Keys: e.keys, KeyCacheTTL: -1}}}).Latest(e.ctx, "k"); err != nil || !bytes.Equal(back.Messages, got.Messages) {
		t.Fatalf("the imported thread reads back: %v", err)
	} else if back.SizeBytes != got.SizeBytes {
		t.Fatalf("the imported head's SizeBytes %d, written %d: an honest size is kept", back.SizeBytes, got.SizeBytes)
	}

	// A file that understates the sealed content's size (size_bytes 0)
	// imports with at least the least plaintext that content holds, so a
	// later Append over the limit is measured and refused (it started from
	// 0 and went through).
	understated := Reseal(regexp.MustCompile(`"size_bytes":\d+`).ReplaceAll(file.Bytes(), []byte(`"size_bytes":0`)))
	if url, err := into(understated); err != nil {
		t.Fatalf("an understated export: %v", err)
	} else {
		there := openURL(t, url, pgcheckpoint.Options{Config: engine.Config{MaxSnapshotBytes: limit, Encryption: engine.Encryption{Keys: e.keys, KeyCacheTTL: -1}}})
		if _, err := there.Append(e.ctx, engine.AppendInput{ThreadID: "k", Messages: words(40)}); !errors.Is(err, engine.ErrSnapshotTooLarge) {
			t.Fatalf("an Append past the limit on a head imported with size_bytes 0: %v, want ErrSnapshotTooLarge", err)
		}
	}
	at := bytes.Index(file.Bytes(), []byte(`"$pgc1$`))
	if at < 0 {
		t.Fatal("no sealed value in the export")
	}
	at += len(`"$pgc1$`)
	grown := slices.Concat(file.Bytes()[:at], bytes.Repeat([]byte("A"), 4*limit), file.Bytes()[at:])
	if url, err := into(Reseal(grown)); !errors.Is(err, engine.ErrSnapshotTooLarge) || imported(url) != 0 {
		t.Fatalf("sealed values grown past what sealing the limit makes: %v, %d checkpoints written; want ErrSnapshotTooLarge, none", err, imported(url))
	}

	plain := e.plain(engine.Config{MaxSnapshotBytes: -1})
	snapWith(t, e.ctx, plain, engine.SnapshotInput{ThreadID: "lookalike", Messages: json.RawMessage(`["$pgc1$` + strings.Repeat("x", limit+500) + `"]`)})
	var look bytes.Buffer
	if _, err := plain.Export(e.ctx, "lookalike", &look); err != nil {
		t.Fatal(err)
	}
	forged := Reseal([]byte(regexp.MustCompile(`"size_bytes":\d+`).ReplaceAllString(look.String(), `"size_bytes":0`)))
	if url, err := into(append(file.Bytes(), forged...)); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), `no data key of its thread "lookalike"`) || imported(url) != 0 {
		t.Fatalf("text that only looks sealed, in a file with another thread's key: %v, %d checkpoints written; want ErrInvalidInput, none", err, imported(url))
	}
}

// A sealed pending write and sealed metadata (Encryption.MetadataKeys)
// count on import as the least plaintext they hold, as content does: a
// thread with a pending write and metadata each near the limit imports
// under the limit it was written under (both were held to it by their
// ciphertext's length, a third more, and refused), and the same export
// with the write's sealed value grown by the limit is ErrSnapshotTooLarge,
// nothing written.
func testImportedSealedWritesAndMetadataLimit(t *testing.T, e *cryptEnv) {
	const limit = 2000
	eng := e.open(nil, engine.Config{MaxSnapshotBytes: limit, Encryption: engine.Encryption{NoCompress: true, MetadataKeys: []string{"secret"}}})
	res := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "w", Messages: json.RawMessage(`["hi"]`),
		Metadata: json.RawMessage(`{"secret":"` + strings.Repeat("s", limit-100) + `"}`)})
	if _, err := eng.PutWrites(e.ctx, res.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`"` + strings.Repeat("v", limit-20) + `"`)}}); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := e.plain(engine.Config{}).Export(e.ctx, "w", &file); err != nil {
		t.Fatal(err)
	}
	into := func(file []byte, thread string) (int, error) {
		url := e.h.NewURL(t)
		_, err := openURL(t, url, pgcheckpoint.Options{Config: engine.Config{MaxSnapshotBytes: limit}}).Import(e.ctx, bytes.NewReader(file), engine.ImportOptions{})
		reader := openURL(t, url, pgcheckpoint.Options{Config: engine.Config{Encryption: engine.Encryption{Keys: e.keys, KeyCacheTTL: -1, MetadataKeys: []string{"secret"}}}})
		list, lerr := reader.ListCheckpoints(e.ctx, thread, engine.ListOptions{})
		if lerr != nil {
			t.Fatal(lerr)
		}
		return len(list), err
	}
	if n, err := into(file.Bytes(), "w"); err != nil || n != 1 {
		t.Fatalf("a sealed pending write and metadata near the limit, imported under it: %d checkpoints, %v", n, err)
	}
	at := bytes.Index(file.Bytes(), []byte(`"pending_writes":[`))
	if at < 0 {
		t.Fatal("no pending write in the export")
	}
	at += bytes.Index(file.Bytes()[at:], []byte(`"$pgc1$`)) + len(`"$pgc1$`)
	grown := slices.Concat(file.Bytes()[:at], bytes.Repeat([]byte("A"), limit), file.Bytes()[at:])
	if n, err := into(Reseal(grown), "w"); !errors.Is(err, engine.ErrSnapshotTooLarge) || n != 0 {
		t.Fatalf("a sealed pending write grown past the limit: %d checkpoints, %v; want ErrSnapshotTooLarge, none", n, err)
	}
	// Text that only looks sealed, in a thread the file carries no key of,
	// is not counted as sealed: refused, as content of that kind is (a
	// pending write or metadata over the limit a write keeps to was taken).
	plain := e.plain(engine.Config{MaxSnapshotBytes: -1})
	lookalike := `"$pgc1$` + strings.Repeat("x", limit+200) + `"`
	for name, write := range map[string]func(thread string){
		"pending write": func(thread string) {
			r := snapWith(t, e.ctx, plain, engine.SnapshotInput{ThreadID: thread})
			if _, err := plain.PutWrites(e.ctx, r.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(lookalike)}}); err != nil {
				t.Fatal(err)
			}
		},
		"metadata": func(thread string) {
			snapWith(t, e.ctx, plain, engine.SnapshotInput{ThreadID: thread, Metadata: json.RawMessage(`{"note":` + lookalike + `}`)})
		},
	} {
		thread := "plain " + name
		write(thread)
		var file bytes.Buffer
		if _, err := plain.Export(e.ctx, thread, &file); err != nil {
			t.Fatal(err)
		}
		if n, err := into(file.Bytes(), thread); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), "no data key of its thread") || n != 0 {
			t.Fatalf("a %s that only looks sealed, over the limit: %d checkpoints, %v; want ErrInvalidInput, none", name, n, err)
		}
	}
}

// Under encryption a retry is compared in plaintext (its ciphertext
// differs), and by the parent it names, as a store compares a plaintext
// retry: naming another parent is ErrIDConflict, nothing written.
func testSealedRetryNamesItsParent(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{})
	root := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["root"]`)})
	other := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["other"]`)})
	child := engine.SnapshotInput{ThreadID: "t", ID: engine.NewCheckpointID(), ParentID: root.ID, Messages: json.RawMessage(`["child"]`)}
	snapWith(t, e.ctx, eng, child)
	if again := snapWith(t, e.ctx, eng, child); again.Created || again.ParentID != root.ID {
		t.Fatalf("a retry naming the same parent: %+v", again)
	}
	child.ParentID = other.ID
	if r, err := eng.Snapshot(e.ctx, child); !errors.Is(err, engine.ErrIDConflict) {
		t.Fatalf("a retry naming another parent: %+v, %v; want ErrIDConflict", r, err)
	}
	if n := len(listAll(t, e.ctx, eng, "t", "")); n != 3 {
		t.Fatalf("%d checkpoints after the refused retry, want 3", n)
	}
}

// A branch of an encrypted thread, exported without its source (deleted
// or not), imports and reads back whole: its first checkpoint holds the
// source's values, sealed under the source's key, which the export now
// carries (the import read nothing of the branch, ErrEncrypted on every
// checkpoint). Such a key only goes with a branch of its thread, and never
// onto a thread of the database that has no key.
func testEncryptedBranchExportedAlone(t *testing.T, e *cryptEnv) {
	for _, deleteSource := range []bool{false, true} {
		eng := e.open(nil, engine.Config{DeltaMinBytes: -1})
		src := fmt.Sprintf("source-%v", deleteSource)
		var msgs []string
		var at engine.SnapshotResult
		for i := range 3 {
			msgs = append(msgs, fmt.Sprintf(`"source %d"`, i))
			at = snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: src, Messages: json.RawMessage("[" + strings.Join(msgs, ",") + "]")})
		}
		br, err := eng.Branch(e.ctx, at.ID, "side")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: br.ThreadID, Messages: json.RawMessage(`["on the branch"]`)}); err != nil {
			t.Fatal(err)
		}
		want := map[uuid.UUID]json.RawMessage{}
		for _, c := range listAll(t, e.ctx, eng, br.ThreadID, "") {
			got, err := eng.Get(e.ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			want[c.ID] = got.Messages
		}
		if deleteSource {
			if _, err := eng.DeleteThreads(e.ctx, src); err != nil {
				t.Fatal(err)
			}
		}
		var file bytes.Buffer
		if _, err := e.plain(engine.Config{}).Export(e.ctx, br.ThreadID, &file); err != nil {
			t.Fatal(err)
		}
		url := e.h.NewURL(t)
		if _, err := openURL(t, url, pgcheckpoint.Options{}).Import(e.ctx, bytes.NewReader(file.Bytes()), engine.ImportOptions{}); err != nil {
			t.Fatalf("source deleted %v: the branch's import: %v", deleteSource, err)
		}
		there := openURL(t, url, pgcheckpoint.Options{Config: engine.Config{Encryption: engine.Encryption{Keys: e.keys, KeyCacheTTL: -1}}})
		for id, msgs := range want {
			got, err := there.Get(e.ctx, id)
			if err != nil || !bytes.Equal(got.Messages, msgs) {
				t.Fatalf("source deleted %v: checkpoint %s of the imported branch: %v", deleteSource, id, err)
			}
		}
		if len(want) != 2 {
			t.Fatalf("the branch has %d checkpoints, want 2", len(want))
		}
		// Into a database where the source's id is a thread without a key:
		// refused, nothing written.
		url = e.h.NewURL(t)
		plainThere := openURL(t, url, pgcheckpoint.Options{})
		snapWith(t, e.ctx, plainThere, engine.SnapshotInput{ThreadID: src, Messages: json.RawMessage(`["plain"]`)})
		if _, err := plainThere.Import(e.ctx, bytes.NewReader(file.Bytes()), engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), "holds unencrypted") {
			t.Fatalf("source deleted %v: the branch into a database holding its source's id unencrypted: %v; want ErrInvalidInput", deleteSource, err)
		}
		if _, err := plainThere.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: src, Messages: json.RawMessage(`["still plain"]`)}); err != nil {
			t.Fatalf("source deleted %v: the refused import left its key on the plaintext thread: %v", deleteSource, err)
		}
		// Nor onto a thread of that id the same file holds in plaintext
		// (another database's), in either order: refused, nothing written.
		var plainFile bytes.Buffer
		if _, err := plainThere.Export(e.ctx, src, &plainFile); err != nil {
			t.Fatal(err)
		}
		for _, order := range [][]byte{slices.Concat(plainFile.Bytes(), file.Bytes()), slices.Concat(file.Bytes(), plainFile.Bytes())} {
			empty := openURL(t, e.h.NewURL(t), pgcheckpoint.Options{})
			if _, err := empty.Import(e.ctx, bytes.NewReader(order), engine.ImportOptions{}); !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(fmt.Sprint(err), "holds no sealed value") {
				t.Fatalf("source deleted %v: the branch with a plaintext thread of its source's id: %v; want ErrInvalidInput", deleteSource, err)
			}
		}
	}
	// Two branches of a source shredded since, each exported alone, import
	// into one database: the source's key the first brought stands (the
	// second was refused: the file's key was not the database's, shredded).
	eng := e.open(nil, engine.Config{})
	root := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "shredded-source", Messages: json.RawMessage(`["root"]`)})
	var branches []string
	for _, name := range []string{"one", "two"} {
		br, err := eng.Branch(e.ctx, root.ID, name)
		if err != nil {
			t.Fatal(err)
		}
		branches = append(branches, br.ThreadID)
	}
	if _, err := eng.ShredThread(e.ctx, "shredded-source"); err != nil {
		t.Fatal(err)
	}
	into := openURL(t, e.h.NewURL(t), pgcheckpoint.Options{})
	for _, thread := range branches {
		var f bytes.Buffer
		if _, err := e.plain(engine.Config{}).Export(e.ctx, thread, &f); err != nil {
			t.Fatal(err)
		}
		if _, err := into.Import(e.ctx, bytes.NewReader(f.Bytes()), engine.ImportOptions{}); err != nil {
			t.Fatalf("branch %s of a shredded source, imported after its sibling: %v", thread, err)
		}
	}
}
