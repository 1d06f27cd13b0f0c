package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
)

// ckpt show and diff decrypt with --keys (or $PGCHECKPOINT_KEYS), say
// plainly when they cannot, and ckpt rewrap moves the keys to a new
// key-encryption key.
func TestEncryptedShowDiffAndRewrap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "enc.db")
	oldKey, newKey := engine.NewKeyText("old"), engine.NewKeyText("new")
	oldFile, bothFile, newFile := writeKeys(t, dir, "old", oldKey), writeKeys(t, dir, "both", newKey, oldKey), writeKeys(t, dir, "new", newKey)
	keys, err := engine.LocalKeysFromFile(oldFile)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := pgcheckpoint.Open(ctx, url, pgcheckpoint.Options{Migrate: true, Config: engine.Config{Encryption: engine.Encryption{Keys: keys}}})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := json.Marshal("MARKER " + hostileText)
	a, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`[` + string(text) + `]`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`[` + string(text) + `,"second"]`)})
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()

	var out, errOut bytes.Buffer
	err = run(ctx, []string{"--database", url, "show", a.ID.String()}, &out, &errOut, terminals{})
	if !errors.Is(err, engine.ErrEncrypted) || !strings.Contains(hint(err), "--keys") || out.Len() != 0 {
		t.Fatalf("show without keys: %v (hint %q), output %q", err, hint(err), out.String())
	}
	shown, _ := runCkpt(t, terminals{stdout: true}, "--database", url, "--keys", oldFile, "show", a.ID.String())
	if !strings.Contains(shown, "MARKER") || strings.ContainsAny(shown, "\x1b\u009b\u202e") {
		t.Fatalf("show with keys, on a terminal: %q", shown)
	}
	diff, _ := runCkpt(t, terminals{}, "--database", url, "--keys", oldFile, "diff", a.ID.String(), b.ID.String())
	if !strings.Contains(diff, "second") {
		t.Fatalf("diff with keys: %q", diff)
	}
	rewrapped, _ := runCkpt(t, terminals{}, "--database", url, "--keys", bothFile, "rewrap")
	if !strings.Contains(rewrapped, "rewrapped 1 data keys") {
		t.Fatalf("rewrap: %q", rewrapped)
	}
	t.Setenv(keysEnv, newKey)
	if shown, _ := runCkpt(t, terminals{}, "--database", url, "show", b.ID.String()); !strings.Contains(shown, "MARKER") {
		t.Fatalf("show with the new key alone: %q", shown)
	}
	err = run(ctx, []string{"--database", url, "--keys", oldFile, "show", b.ID.String()}, &out, &errOut, terminals{})
	if !errors.Is(err, engine.ErrEncrypted) {
		t.Fatalf("show with the old key after rewrap: %v", err)
	}
	if diff, _ := runCkpt(t, terminals{}, "--database", url, "--keys", newFile, "diff", a.ID.String(), b.ID.String()); !strings.Contains(diff, "second") {
		t.Fatalf("diff with the new key file: %q", diff)
	}
}

// With --held-keys (or $PGCHECKPOINT_HELD_KEYS) ckpt reads the data keys
// an engine over HeldKeys keeps in that directory: show and diff decrypt,
// rewrap writes the new wrappings there and deletes the files they
// replace; without the directory, or without --keys, ckpt says so.
func TestHeldKeysShowDiffAndRewrap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	held := filepath.Join(dir, "held")
	url := "sqlite:" + filepath.Join(dir, "held.db")
	oldKey, newKey := engine.NewKeyText("old"), engine.NewKeyText("new")
	oldFile, bothFile, newFile := writeKeys(t, dir, "old", oldKey), writeKeys(t, dir, "both", newKey, oldKey), writeKeys(t, dir, "new", newKey)
	keks, err := engine.LocalKeysFromFile(oldFile)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := pgcheckpoint.Open(ctx, url, pgcheckpoint.Options{Migrate: true, Config: engine.Config{Encryption: engine.Encryption{
		Keys: &engine.HeldKeys{Dir: held, KEKs: keks}}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["MARKER"]`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["MARKER","second"]`)})
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	files := func() []string { return enginetest.HeldKeyFiles(t, held) }
	before := files()

	var out, errOut bytes.Buffer
	err = run(ctx, []string{"--database", url, "--keys", oldFile, "show", a.ID.String()}, &out, &errOut, terminals{})
	if !errors.Is(err, engine.ErrEncrypted) || !strings.Contains(hint(err), "--held-keys") || out.Len() != 0 {
		t.Fatalf("show without the held keys: %v (hint %q), output %q", err, hint(err), out.String())
	}
	err = run(ctx, []string{"--database", url, "--held-keys", held, "show", a.ID.String()}, &out, &errOut, terminals{})
	if ue := (usageError{}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--keys") {
		t.Fatalf("--held-keys without --keys: %v, want a usage error naming --keys", err)
	}
	if shown, _ := runCkpt(t, terminals{}, "--database", url, "--keys", oldFile, "--held-keys", held, "show", a.ID.String()); !strings.Contains(shown, "MARKER") {
		t.Fatalf("show with the held keys: %q", shown)
	}
	t.Setenv(heldKeysEnv, held)
	if diff, _ := runCkpt(t, terminals{}, "--database", url, "--keys", oldFile, "diff", a.ID.String(), b.ID.String()); !strings.Contains(diff, "second") {
		t.Fatalf("diff with $%s: %q", heldKeysEnv, diff)
	}
	if rewrapped, _ := runCkpt(t, terminals{}, "--database", url, "--keys", bothFile, "rewrap"); !strings.Contains(rewrapped, "rewrapped 1 data keys") {
		t.Fatalf("rewrap: %q", rewrapped)
	}
	if after := files(); len(after) != 1 || len(before) != 1 || after[0] == before[0] {
		t.Fatalf("held key files: %v before the rewrap, %v after; want one replaced by one", before, after)
	}
	if shown, _ := runCkpt(t, terminals{}, "--database", url, "--keys", newFile, "show", b.ID.String()); !strings.Contains(shown, "MARKER") {
		t.Fatalf("show with the new key alone: %q", shown)
	}
	err = run(ctx, []string{"--database", url, "--keys", oldFile, "show", b.ID.String()}, &out, &errOut, terminals{})
	if !errors.Is(err, engine.ErrEncrypted) {
		t.Fatalf("show with the old key after rewrap: %v", err)
	}
}

// writeKeys writes a key file named name in dir, one key a line (the
// current first), and returns its path.
func writeKeys(t *testing.T, dir, name string, keys ...string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
