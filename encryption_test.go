package pgcheckpoint_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/enginetest"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// TestEncryption runs the encryption suite (enginetest.RunEncryption) on
// SQLite: tampering through the file's own SQL, and the file's bytes with
// its WAL for what a copy of it holds. The Postgres run is in package
// integration.
func TestEncryption(t *testing.T) {
	path := func(url string) string { return strings.TrimPrefix(url, "sqlite:") }
	enginetest.RunEncryption(t, enginetest.EncryptionHarness{
		Harness: enginetest.Harness{Name: "sqlite", NewURL: func(t testing.TB) string {
			return "sqlite:" + filepath.Join(t.TempDir(), "test.db")
		}},
		SQL: func(t testing.TB, url string) *sql.DB {
			db, err := sqlite.OpenDB(context.Background(), path(url), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		Dump: func(t testing.TB, url string) []byte {
			var all []byte
			for _, suffix := range []string{"", "-wal", "-shm"} {
				b, err := os.ReadFile(path(url) + suffix)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				all = append(all, b...)
			}
			return all
		},
	})
}
