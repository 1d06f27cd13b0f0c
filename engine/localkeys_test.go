package engine_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// A malformed key file is ErrInvalidInput that names the entry by its
// place, never by its text: a key pasted without its id, or with a space
// for '=', is key material, and the error would carry it into a log.
func TestParseLocalKeysKeepsKeysOutOfErrors(t *testing.T) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString(raw)
	good := "k1=" + key
	for name, text := range map[string]string{
		"a key without its id":     key,
		"a key after a space":      "k1 " + key,
		"a key after a colon":      "k1:" + key,
		"a second key without id":  good + "\n" + key,
		"a short key":              "k1=" + key[:20] + "=",
		"a key of 33 bytes":        "k1=" + base64.StdEncoding.EncodeToString(append(raw, 1)),
		"an id given twice":        good + "\n" + good,
		"a key that is not base64": "k1=" + key[:10] + "!" + key[11:],
		"an id holding a space":    "k 1=" + key,
	} {
		_, err := engine.ParseLocalKeys(text)
		if !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
			continue
		}
		for _, part := range []string{key[:8], key[8:16], key[16:24], key[24:32], key[32:40]} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("%s: the error holds key material: %v", name, err)
				break
			}
		}
	}
	if _, err := engine.ParseLocalKeys("# keys\n" + good + "\nold=" + key); err != nil {
		t.Errorf("a good file: %v", err)
	}
}
