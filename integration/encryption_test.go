package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/url"
	"os/exec"
	"testing"

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
