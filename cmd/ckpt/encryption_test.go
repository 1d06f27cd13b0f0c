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
)

// ckpt show and diff decrypt with --keys (or $PGCHECKPOINT_KEYS), say
// plainly when they cannot, and ckpt rewrap moves the keys to a new
// key-encryption key.
func TestEncryptedShowDiffAndRewrap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "enc.db")
	oldKey, newKey := engine.NewKeyText("old"), engine.NewKeyText("new")
	writeKeys := func(name string, keys ...string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	oldFile, bothFile, newFile := writeKeys("old", oldKey), writeKeys("both", newKey, oldKey), writeKeys("new", newKey)
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
