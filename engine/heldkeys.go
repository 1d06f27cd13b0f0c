package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// KeyShredder is a KeyProvider that holds data keys itself (the database
// keeps only a reference to each): ShredThread calls ShredKey for the
// wrapping it shredded in the thread's key row, so that no copy of that
// row (a backup of the database, a replica, an export) unwraps again;
// RewrapKeys calls it for the wrapping a rotation replaced, and a
// thread's first write for a new key that another writer's beat. ShredKey
// must succeed for a key it no longer holds.
type KeyShredder interface {
	KeyProvider
	// ShredKey destroys what the provider holds for a data key that
	// WrapKey returned as (kekID, wrapped) with aad.
	ShredKey(ctx context.Context, kekID string, wrapped, aad []byte) error
}

// KeyPruner is a KeyShredder that can also destroy, in bulk, the data
// keys that no key row names: see Engine.PruneKeys.
type KeyPruner interface {
	KeyShredder
	// PruneKeys destroys every data key the provider holds that it made
	// before before, for a thread of one of tenants (the associated data
	// WrapKey was given names the tenant and thread), and whose wrapped
	// form (as WrapKey returned it) referenced reports false for, and
	// returns how many it destroyed. The keys of other tenants, and any
	// whose tenant it cannot tell, are kept.
	PruneKeys(ctx context.Context, tenants []string, before time.Time, referenced func(wrapped []byte) bool) (int, error)
}

// HeldKeys is a KeyShredder for development and tests, as LocalKeys is a
// KeyProvider: each data key is kept in a file of its own in Dir,
// wrapped there by KEKs, and the database's key row holds only the file's
// random 16-byte reference. ShredThread deletes the file, so a backup of
// the database taken before the shredding no longer reads the thread:
// crypto-shredding that reaches backups, provided Dir itself is kept out
// of the database's backups. A production provider does the same over a
// KMS or Vault (a stored secret per data key, destroyed by ShredKey).
// A key whose row never committed (a first write rolled back, a process
// stopped between the file and the row) stays until Engine.PruneKeys
// removes it.
//
// A key file is named by its tenant and its reference: heldTenantTag of
// the tenant, "-", the reference in hex. HeldKeys serves only the
// Engine's own data keys (the associated data names the tenant and
// thread): WrapKey refuses other associated data.
type HeldKeys struct {
	Dir  string      // where the keys are kept; made if missing
	KEKs KeyProvider // wraps each key in its file (LocalKeys, a KMS)
}

const heldRefSize = 16

// heldTenantTag is the start of the names of a tenant's key files: 16 hex
// digits of the SHA-256 of its name.
func heldTenantTag(tenant string) string {
	sum := sha256.Sum256([]byte(tenant))
	return hex.EncodeToString(sum[:8])
}

// path is the file of a reference made with aad: its tenant's tag and
// its hex text, never stored text.
func (h *HeldKeys) path(ref, aad []byte) (string, error) {
	if len(ref) != heldRefSize {
		return "", fmt.Errorf("a held key reference of %d bytes; they are %d", len(ref), heldRefSize)
	}
	tenant, ok := wrapADTenant(aad)
	if !ok {
		return "", errors.New("HeldKeys holds the engine's data keys alone: the associated data does not name a tenant and thread")
	}
	return filepath.Join(h.Dir, heldTenantTag(tenant)+"-"+hex.EncodeToString(ref)), nil
}

// WrapKey implements KeyProvider: it wraps dataKey with KEKs, writes it
// to a new file and returns the file's reference.
func (h *HeldKeys) WrapKey(ctx context.Context, dataKey, aad []byte) (string, []byte, error) {
	kek, wrapped, err := h.KEKs.WrapKey(ctx, dataKey, aad)
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		return "", nil, err
	}
	ref := make([]byte, heldRefSize)
	_, _ = rand.Read(ref)
	path, err := h.path(ref, aad)
	if err != nil {
		return "", nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", nil, err
	}
	_, err = f.Write(wrapped)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(h.Dir) // the file's name is durable before a key row names it
	}
	if err != nil {
		_ = os.Remove(path)
		return "", nil, err
	}
	return kek, ref, nil
}

// syncDir makes the names in dir durable (a file made or removed there).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// UnwrapKey implements KeyProvider: it reads the file of ref and unwraps
// it with KEKs. It fails for a shredded key.
func (h *HeldKeys) UnwrapKey(ctx context.Context, kekID string, ref, aad []byte) ([]byte, error) {
	path, err := h.path(ref, aad)
	if err != nil {
		return nil, err
	}
	wrapped, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("no data key is held for this reference (shredded, or never held here)")
	}
	if err != nil {
		return nil, err
	}
	return h.KEKs.UnwrapKey(ctx, kekID, wrapped, aad)
}

// ShredKey implements KeyShredder: it deletes the file of ref.
func (h *HeldKeys) ShredKey(_ context.Context, _ string, ref, aad []byte) error {
	path, err := h.path(ref, aad)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The deletion is durable when ShredKey returns (no Dir: no key was
	// ever held there). Engine.ShredThread shreds the key row first, then
	// calls ShredKey: a reader never meets a row whose key is gone.
	if err := syncDir(h.Dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// PruneKeys implements KeyPruner: it deletes the key files in Dir of
// tenants last written before before whose reference referenced reports
// false. Files of other tenants, and files whose names are not a tenant's
// tag and a reference, are left alone.
func (h *HeldKeys) PruneKeys(_ context.Context, tenants []string, before time.Time, referenced func(ref []byte) bool) (int, error) {
	tags := map[string]bool{}
	for _, t := range tenants {
		tags[heldTenantTag(t)] = true
	}
	list, err := os.ReadDir(h.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range list {
		tag, hexRef, _ := strings.Cut(f.Name(), "-")
		ref, err := hex.DecodeString(hexRef)
		if !tags[tag] || err != nil || len(ref) != heldRefSize || !f.Type().IsRegular() {
			continue
		}
		info, err := f.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // shredded meanwhile
		}
		if err != nil {
			return n, err
		}
		if !info.ModTime().Before(before) || referenced(ref) {
			continue
		}
		if err := os.Remove(filepath.Join(h.Dir, f.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	if n > 0 {
		return n, syncDir(h.Dir)
	}
	return n, nil
}
