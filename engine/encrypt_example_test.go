package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// An Engine with Config.Encryption encrypts content before the store sees
// it and decrypts what it reads; a shredded thread reads as ErrEncrypted.
// The key-encryption key comes from a KeyProvider: here a local one, as a
// development key file holds it (engine.LocalKeysFromFile).
func ExampleEngine_ShredThread() {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Memory, sqlite.Options{Migrate: true})
	if err != nil {
		log.Fatal(err)
	}
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("kek-2026"))
	if err != nil {
		log.Fatal(err)
	}
	eng := engine.New(store, engine.Config{Encryption: engine.Encryption{Keys: keys}})
	defer eng.Close()

	for _, thread := range []string{"alice", "bob"} {
		if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread,
			Messages: json.RawMessage(`[{"role":"user","content":"my card is 4111"}]`)}); err != nil {
			log.Fatal(err)
		}
	}
	c, err := eng.Latest(ctx, "alice")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(c.Messages), c.Summary)

	if _, err := eng.ShredThread(ctx, "alice"); err != nil {
		log.Fatal(err)
	}
	_, err = eng.Latest(ctx, "alice")
	fmt.Println("alice:", errors.Is(err, engine.ErrEncrypted))
	_, err = eng.Latest(ctx, "bob")
	fmt.Println("bob:", err)
	// Output:
	// [{"role":"user","content":"my card is 4111"}] (encrypted)
	// alice: true
	// bob: <nil>
}
