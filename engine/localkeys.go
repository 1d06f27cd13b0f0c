package engine

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// LocalKeys is a KeyProvider over key-encryption keys held in memory,
// read from a key file or an environment variable (ParseLocalKeys): for
// development, tests and the ckpt command. In production, hold the KEKs in
// a KMS and implement KeyProvider over it.
type LocalKeys struct {
	current string
	keys    map[string]cipher.AEAD
}

// NewLocalKeys returns a LocalKeys that wraps with the key named current
// and unwraps with any of keys (each 32 bytes: AES-256). Errors:
// ErrInvalidInput for a key of another length, an empty or odd id, or a
// current key that is not among keys.
func NewLocalKeys(current string, keys map[string][]byte) (*LocalKeys, error) {
	l := &LocalKeys{current: current, keys: map[string]cipher.AEAD{}}
	for id, k := range keys {
		if id == "" || strings.ContainsAny(id, "=,; \t\r\n") {
			return nil, fmt.Errorf("%w: key id %q: ids are non-empty, without '=', ',', ';' or spaces", ErrInvalidInput, id)
		}
		if len(k) != 32 {
			return nil, fmt.Errorf("%w: key %q is %d bytes; key-encryption keys are 32 bytes (AES-256)", ErrInvalidInput, id, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		if l.keys[id], err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	if _, ok := l.keys[current]; !ok {
		return nil, fmt.Errorf("%w: the current key %q is not among the keys given", ErrInvalidInput, current)
	}
	return l, nil
}

// ParseLocalKeys reads keys written as "id=base64" (standard base64 of 32
// bytes), separated by newlines, commas or semicolons; the first is the
// current key (the one that wraps), the others only unwrap: list the new
// key first and the old ones after it while rotating (see
// Engine.RewrapKeys), then drop the old. Errors: ErrInvalidInput, which
// names a bad entry by its place in text, never by its text.
func ParseLocalKeys(text string) (*LocalKeys, error) {
	keys := map[string][]byte{}
	current := ""
	entry := 0
	// An error names an entry by its place, never by its text: a
	// malformed entry may be key material (a key without its id, or with
	// a space for '='), which an error would carry into a log.
	for _, f := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == ',' || r == ';' }) {
		f = strings.TrimSpace(f)
		if f == "" || strings.HasPrefix(f, "#") {
			continue
		}
		entry++
		id, b64, ok := strings.Cut(f, "=")
		id = strings.TrimSpace(id)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: key entry %d has no '=' (want id=base64)", ErrInvalidInput, entry)
		case id == "" || strings.ContainsAny(id, " \t"):
			return nil, fmt.Errorf("%w: key entry %d: its id is empty or holds spaces (want id=base64)", ErrInvalidInput, entry)
		}
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w: key entry %d: the key is not standard base64 (want id=base64)", ErrInvalidInput, entry)
		case len(k) != 32:
			return nil, fmt.Errorf("%w: key entry %d: the key is %d bytes; key-encryption keys are 32 bytes (AES-256), want id=base64", ErrInvalidInput, entry, len(k))
		}
		if _, dup := keys[id]; dup {
			return nil, fmt.Errorf("%w: key entry %d: its id is given before", ErrInvalidInput, entry)
		}
		keys[id] = k
		if current == "" {
			current = id
		}
	}
	if current == "" {
		return nil, fmt.Errorf("%w: no key given", ErrInvalidInput)
	}
	return NewLocalKeys(current, keys)
}

// LocalKeysFromFile reads ParseLocalKeys's format from a file. Errors:
// ErrInvalidInput, or the file's error.
func LocalKeysFromFile(path string) (*LocalKeys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	return ParseLocalKeys(string(b))
}

// LocalKeysFromEnv reads ParseLocalKeys's format from environment
// variable name. Errors: ErrInvalidInput, also when it is unset.
func LocalKeysFromEnv(name string) (*LocalKeys, error) {
	v, ok := os.LookupEnv(name)
	if !ok {
		return nil, fmt.Errorf("%w: environment variable %s is not set", ErrInvalidInput, name)
	}
	return ParseLocalKeys(v)
}

// NewKeyText returns a new random key in ParseLocalKeys's format, named id.
func NewKeyText(id string) string {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return id + "=" + base64.StdEncoding.EncodeToString(k)
}

// WrapKey implements KeyProvider: AES-256-GCM under the current key, a
// random nonce before the ciphertext.
func (l *LocalKeys) WrapKey(_ context.Context, dataKey, aad []byte) (string, []byte, error) {
	a := l.keys[l.current]
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(dataKey)+a.Overhead())
	_, _ = rand.Read(nonce)
	return l.current, a.Seal(nonce, nonce, dataKey, aad), nil
}

// UnwrapKey implements KeyProvider.
func (l *LocalKeys) UnwrapKey(_ context.Context, kekID string, wrapped, aad []byte) ([]byte, error) {
	a, ok := l.keys[kekID]
	if !ok {
		return nil, fmt.Errorf("no key-encryption key %q here", kekID)
	}
	if len(wrapped) < a.NonceSize()+a.Overhead() {
		return nil, fmt.Errorf("wrapped key too short")
	}
	k, err := a.Open(nil, wrapped[:a.NonceSize()], wrapped[a.NonceSize():], aad)
	if err != nil {
		return nil, fmt.Errorf("the wrapped key does not open under %q", kekID)
	}
	return k, nil
}
