package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// ckpt, the binary, on Postgres with held data keys: show and diff
// decrypt given --held-keys DIR (or $PGCHECKPOINT_HELD_KEYS) and --keys,
// and say what is missing otherwise; rewrap replaces the held key file;
// --held-keys without --keys is bad usage (exit 2).
func TestCkptHeldKeys(t *testing.T) {
	t.Parallel()
	bin := buildCommand(t, "ckpt")
	d := pgtest.NewDB(t)
	ctx := context.Background()
	dir := t.TempDir()
	held := filepath.Join(dir, "held")
	oldKey, newKey := engine.NewKeyText("old"), engine.NewKeyText("new")
	keks, err := engine.ParseLocalKeys(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(postgres.NewStore(d.Pool, postgres.Options{}), engine.Config{Encryption: engine.Encryption{
		Keys: &engine.HeldKeys{Dir: held, KEKs: keks}}})
	a, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["MARKER"]`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["MARKER","second"]`)})
	if err != nil {
		t.Fatal(err)
	}
	files := func() []string { return enginetest.HeldKeyFiles(t, held) }
	before := files()
	env := func(extra ...string) []string {
		return append([]string{"DATABASE_URL=" + d.URL}, extra...)
	}
	ok := func(env []string, args ...string) string {
		t.Helper()
		r := runCLI(t, bin, env, args...)
		noStackTrace(t, r)
		if r.code != 0 {
			t.Fatalf("ckpt %v: exit %d\n%s", args, r.code, r.stderr)
		}
		return r.stdout
	}

	r := runCLI(t, bin, env("PGCHECKPOINT_KEYS="+oldKey), "show", a.ID.String())
	if r.code != 1 || strings.Contains(r.stdout, "MARKER") || !strings.Contains(r.stderr, "--held-keys DIR") {
		t.Fatalf("show without the held keys: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, bin, env(), "--held-keys", held, "show", a.ID.String())
	if r.code != 2 || !strings.Contains(r.stderr, "--keys FILE") {
		t.Fatalf("--held-keys without keys: exit %d\n%s", r.code, r.stderr)
	}
	if out := ok(env("PGCHECKPOINT_KEYS="+oldKey), "--held-keys", held, "show", a.ID.String()); !strings.Contains(out, "MARKER") {
		t.Fatalf("show: %q", out)
	}
	if out := ok(env("PGCHECKPOINT_KEYS="+oldKey, "PGCHECKPOINT_HELD_KEYS="+held), "diff", a.ID.String(), b.ID.String()); !strings.Contains(out, "second") {
		t.Fatalf("diff with $PGCHECKPOINT_HELD_KEYS: %q", out)
	}
	if out := ok(env("PGCHECKPOINT_KEYS="+newKey+"\n"+oldKey), "--held-keys", held, "--json", "rewrap"); !strings.Contains(out, `"rewrapped": 1`) {
		t.Fatalf("rewrap: %q", out)
	}
	if after := files(); len(after) != 1 || len(before) != 1 || after[0] == before[0] {
		t.Fatalf("held key files: %v before the rewrap, %v after; want one replaced by one", before, after)
	}
	if out := ok(env("PGCHECKPOINT_KEYS="+newKey, "PGCHECKPOINT_HELD_KEYS="+held), "show", b.ID.String()); !strings.Contains(out, "MARKER") {
		t.Fatalf("show with the new key alone: %q", out)
	}
	if r := runCLI(t, bin, env("PGCHECKPOINT_KEYS="+oldKey, "PGCHECKPOINT_HELD_KEYS="+held), "show", b.ID.String()); r.code != 1 || strings.Contains(r.stdout, "MARKER") {
		t.Fatalf("show with the old key after the rewrap: exit %d\n%s", r.code, r.stdout)
	}
}
