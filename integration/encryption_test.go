package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx" driver

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// pgDump is the pg_dump of the server the tests use.
const pgDump = "/usr/lib/postgresql/15/bin/pg_dump"

// TestEncryption runs the encryption suite (enginetest.RunEncryption) on
// Postgres: tampering through SQL as the database's owner would, and
// pg_dump for what a dump holds. The SQLite run is in the module's root
// package.
func TestEncryption(t *testing.T) {
	enginetest.RunEncryption(t, enginetest.EncryptionHarness{
		Harness: enginetest.Harness{Name: "postgres", NewURL: func(t testing.TB) string { return pgtest.NewDB(t).URL },
			TenantURL: func(t testing.TB) string { return setupTenants(t).appURL }},
		SQL: func(t testing.TB, dbURL string) *sql.DB {
			u, err := url.Parse(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("search_path", "pgcheckpoint")
			u.RawQuery = q.Encode()
			db, err := sql.Open("pgx", u.String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		Dump: func(t testing.TB, dbURL string) []byte {
			if _, err := exec.LookPath(pgDump); err != nil {
				t.Skipf("no %s: %v", pgDump, err)
			}
			out, err := exec.Command(pgDump, "--dbname="+dbURL).Output()
			if err != nil {
				t.Fatalf("pg_dump: %v", err)
			}
			return out
		},
	})
}

// A data key made inside a caller's transaction that rolls back is not
// kept by the engine: the thread's next write makes and stores a new one,
// and everything reads back in another process.
func TestEncryptionKeyMadeInARolledBackTransaction(t *testing.T) {
	d := pgtest.NewDB(t)
	ctx := context.Background()
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{Encryption: engine.Encryption{Keys: keys}}
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), cfg)
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inTx, err := eng.WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inTx.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["rolled back"]`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["kept"]`)})
	if err != nil {
		t.Fatal(err)
	}
	other := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), cfg)
	got, err := other.Get(ctx, res.ID)
	if err != nil || string(got.Messages) != `["kept"]` {
		t.Fatalf("another engine reads %v: %v", got, err)
	}
}

// A held data key made inside a caller's transaction that rolls back is
// named by no row: PruneKeys leaves it while it is newer than the grace
// (its row could be uncommitted still) and removes it once older; the
// thread's next write makes a key of its own, which reads back.
func TestHeldKeyOfARolledBackTransactionIsPruned(t *testing.T) {
	d := pgtest.NewDB(t)
	ctx := context.Background()
	keks, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := func() []string { return enginetest.HeldKeyFiles(t, dir) }
	cfg := engine.Config{Encryption: engine.Encryption{Keys: &engine.HeldKeys{Dir: dir, KEKs: keks}}}
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), cfg)
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inTx, err := eng.WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inTx.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["rolled back"]`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	orphan := files()
	if len(orphan) != 1 {
		t.Fatalf("key files after the rollback: %v, want the rolled-back write's", orphan)
	}
	if n, err := eng.PruneKeys(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("prune within the grace: %d, %v; want none", n, err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, orphan[0]), old, old); err != nil {
		t.Fatal(err)
	}
	res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["kept"]`)})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := eng.PruneKeys(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("prune past the grace: %d, %v; want the rolled-back key", n, err)
	}
	if left := files(); len(left) != 1 || left[0] == orphan[0] {
		t.Fatalf("key files after the prune: %v; want the committed key alone", left)
	}
	other := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), cfg)
	if got, err := other.Get(ctx, res.ID); err != nil || string(got.Messages) != `["kept"]` {
		t.Fatalf("another engine reads %v: %v", got, err)
	}
}

// Under HeldKeys, RewrapKeys, ShredThread and PruneKeys are refused in a
// caller's transaction (ErrInvalidInput, the transaction still usable):
// the provider would destroy keys before the commit, and the rollback
// leave rows naming them. Nothing changes: the key files are as they
// were, and the thread reads after the rollback. LocalKeys keeps nothing
// to destroy: RewrapKeys runs in a transaction.
func TestHeldKeysAreNotDestroyedInATransaction(t *testing.T) {
	d := pgtest.NewDB(t)
	ctx := context.Background()
	keks, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := func() []string { return enginetest.HeldKeyFiles(t, dir) }
	cfg := engine.Config{Encryption: engine.Encryption{Keys: &engine.HeldKeys{Dir: dir, KEKs: keks}, KeyCacheTTL: -1}}
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), cfg)
	res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["kept"]`)})
	if err != nil {
		t.Fatal(err)
	}
	before := files()
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, before[0]), old, old); err != nil {
		t.Fatal(err)
	}
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	inTx, err := eng.WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	// The key row is gone in tx: a prune that went ahead would destroy
	// the key the committed row names.
	if _, err := tx.Exec(ctx, "DELETE FROM pgcheckpoint.data_keys"); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"RewrapKeys":  func() error { _, err := inTx.RewrapKeys(ctx); return err },
		"ShredThread": func() error { _, err := inTx.ShredThread(ctx, "t"); return err },
		"PruneKeys":   func() error { _, err := inTx.PruneKeys(ctx, time.Hour); return err },
	}
	for _, name := range []string{"RewrapKeys", "ShredThread", "PruneKeys"} {
		if err := calls[name](); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("%s in a transaction: %v, want ErrInvalidInput", name, err)
		}
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the transaction after the refusals: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if after := files(); !slices.Equal(after, before) {
		t.Fatalf("key files after the refused calls: %v, want %v", after, before)
	}
	if got, err := eng.Get(ctx, res.ID); err != nil || string(got.Messages) != `["kept"]` {
		t.Fatalf("the thread after the rollback: %v, %v", got, err)
	}

	d = pgtest.NewDB(t)
	local := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{Encryption: engine.Encryption{Keys: keks}})
	if _, err := local.Snapshot(ctx, engine.SnapshotInput{ThreadID: "l", Messages: json.RawMessage(`["local"]`)}); err != nil {
		t.Fatal(err)
	}
	tx, err = d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	inTx, err = local.WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inTx.RewrapKeys(ctx); err != nil {
		t.Fatalf("RewrapKeys under LocalKeys in a transaction: %v", err)
	}
}

// The SQL functions that rebuild a checkpoint from its deltas
// (checkpoint_materialize for psql, checkpoint_materialize_json for the
// engine) return an encrypted thread's structure: every message and every
// top-level key of the state and tool results, each value a ciphertext of
// its own and none in plaintext; the engine reads that back exactly.
func TestEncryptedDeltasRebuiltBySQL(t *testing.T) {
	d := pgtest.NewDB(t)
	ctx := context.Background()
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{DeltaMinBytes: -1, Encryption: engine.Encryption{Keys: keys}})
	var messages []string
	state := map[string]string{"kept": "MARKER-kept-state"}
	tools := map[string]string{}
	var head engine.SnapshotResult
	for i := range 5 {
		messages = append(messages, fmt.Sprintf("MARKER-message-%d", i))
		state[fmt.Sprintf("step%d", i)] = fmt.Sprintf("MARKER-state-%d", i)
		tools[fmt.Sprintf("call%d", i%2)] = fmt.Sprintf("MARKER-tool-%d", i)
		in := engine.SnapshotInput{ThreadID: "t"}
		for v, p := range map[*json.RawMessage]any{&in.Messages: messages, &in.State: state, &in.ToolResults: tools} {
			if *v, err = json.Marshal(p); err != nil {
				t.Fatal(err)
			}
		}
		if head, err = eng.Snapshot(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	got, err := eng.Latest(ctx, "t")
	if err != nil || got.Format != engine.StorageDelta {
		t.Fatalf("head: %v (want a delta), %v", got, err)
	}
	// Values are ciphertexts: check the structure, not the values.
	sealed := func(what string, v any) {
		if s, ok := v.(string); !ok || !strings.HasPrefix(s, "$pgc1$") {
			t.Errorf("%s: %v is not a ciphertext", what, v)
		}
	}
	for fn, query := range map[string]string{
		"checkpoint_materialize": "SELECT messages::text, state::text, tool_results::text FROM pgcheckpoint.checkpoint_materialize($1)",
		"checkpoint_materialize_json": `SELECT convert_from(messages, 'UTF8'), convert_from(state, 'UTF8'), convert_from(tool_results, 'UTF8')
			FROM pgcheckpoint.checkpoint_materialize_json($1)`,
	} {
		var m, s, tr []byte
		if err := d.Pool.QueryRow(ctx, query, head.ID).Scan(&m, &s, &tr); err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		if text := string(m) + string(s) + string(tr); strings.Contains(text, "MARKER") {
			t.Errorf("%s returns plaintext: %s", fn, text)
		}
		var gotMessages []any
		var gotState, gotTools map[string]any
		for v, p := range map[*[]byte]any{&m: &gotMessages, &s: &gotState, &tr: &gotTools} {
			if err := json.Unmarshal(*v, p); err != nil {
				t.Fatalf("%s: %v", fn, err)
			}
		}
		if len(gotMessages) != len(messages) {
			t.Errorf("%s: %d messages, want %d", fn, len(gotMessages), len(messages))
		}
		for i, v := range gotMessages {
			sealed(fmt.Sprintf("%s message %d", fn, i), v)
		}
		for name, pair := range map[string][2]any{"state": {gotState, state}, "tool results": {gotTools, tools}} {
			got, want := pair[0].(map[string]any), pair[1].(map[string]string)
			if len(got) != len(want) {
				t.Errorf("%s: %s has %d keys, want %d", fn, name, len(got), len(want))
			}
			for k := range want {
				sealed(fmt.Sprintf("%s %s key %q", fn, name, k), got[k])
			}
		}
	}
	var wantState map[string]string
	if err := json.Unmarshal(got.State, &wantState); err != nil || !maps.Equal(wantState, state) || !strings.Contains(string(got.Messages), "MARKER-message-4") {
		t.Fatalf("the engine reads back %s %s: %v", got.Messages, got.State, err)
	}
}

// An encrypted CopyThread on a pool of one connection, the key cache off:
// what the copy reads besides its source (data keys, the lineage of a
// branch's source) is read before its import's transaction takes the
// connection, so the copy cannot wait on itself.
func TestEncryptedCopyOnAPoolOfOne(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pool := poolOf(t, d.URL, 1)
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{Encryption: engine.Encryption{Keys: keys, KeyCacheTTL: -1}})
	var last engine.SnapshotResult
	for i := range 3 {
		if last, err = eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "src", Messages: json.RawMessage(fmt.Sprintf(`["SECRET %d"]`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	br, err := eng.Branch(ctx, last.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Append(ctx, engine.AppendInput{ThreadID: br.ThreadID, Messages: json.RawMessage(`["SECRET on the branch"]`)}); err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{"src": "src-copy", br.ThreadID: "branch-copy"} {
		if _, err := eng.CopyThread(ctx, from, to); err != nil {
			t.Fatalf("copy of %s on a pool of one: %v", from, err)
		}
		head, err := eng.Latest(ctx, to)
		if err != nil || !strings.Contains(string(head.Messages), "SECRET") {
			t.Fatalf("the copy %s: %v", to, err)
		}
	}
}
