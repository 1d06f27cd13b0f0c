// Package eino makes pgcheckpoint the checkpoint store of Eino
// (github.com/cloudwego/eino): interrupted graphs resume from Postgres (or a
// SQLite file), with every checkpoint kept, listed, diffed and rewound like
// any other pgcheckpoint thread.
//
//	eng, err := pgcheckpoint.Open(ctx, os.Getenv("DATABASE_URL"), pgcheckpoint.Options{Migrate: true})
//	runnable, err := graph.Compile(ctx, compose.WithCheckPointStore(eino.New(eng)))
//	out, err := runnable.Invoke(ctx, input, compose.WithCheckPointID("order-42"))
//
// An Eino checkpoint id is a pgcheckpoint thread (root namespace). Every Set
// writes a new checkpoint on it, so the thread holds the run's history; Get
// returns its head, so after a Rewind Eino resumes from the rewound-to
// checkpoint. Eino's default serializer writes JSON, which is stored as the
// checkpoint's state: `ckpt show` and `ckpt diff` show it, and delta storage
// keeps only the changed top-level keys. Bytes that are not a JSON object
// (a custom serializer's), or one the stores cannot hold as JSON (text that
// is not UTF-8, a lone surrogate escape, a number beyond Postgres's
// numeric), are stored base64-encoded under the state key
// "eino_checkpoint_base64": exact, but opaque to diffs and stored whole;
// so is an object of that key alone, which would otherwise read back as
// the bytes it encodes.
//
// # Tenants
//
// A Store reads and writes the tenant of its Engine: NewForTenant (or New
// over eng.ForTenant(tenant)) keeps each customer's Eino runs apart, so two
// tenants may use the same checkpoint id, each with its own history. New
// over an Engine that names no tenant uses engine.DefaultTenant.
//
// The package is a module of its own, so pgcheckpoint's core never depends
// on Eino; another framework's checkpoint interface is one more small
// module like this one.
package eino

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// base64Key holds checkpoints that are not JSON objects.
const base64Key = "eino_checkpoint_base64"

// Store is an Eino compose.CheckPointStore over a pgcheckpoint Engine. It
// is safe for concurrent use.
type Store struct {
	eng *engine.Engine
}

// New returns a Store over eng, in eng's tenant.
func New(eng *engine.Engine) *Store { return &Store{eng: eng} }

// NewForTenant returns a Store over eng bound to tenant: its checkpoints
// are that tenant's alone (see engine.Engine.ForTenant). Close eng, not
// the Engine the Store uses. Errors: engine.ErrInvalidInput for a bad
// tenant name (engine.CheckTenant).
func NewForTenant(eng *engine.Engine, tenant string) (*Store, error) {
	t, err := eng.ForTenant(tenant)
	if err != nil {
		return nil, fmt.Errorf("pgcheckpoint eino: %w", err)
	}
	return New(t), nil
}

// Get returns the head of thread checkPointID: the latest checkpoint, or
// the one a Rewind made the head. ok is false for an unknown id.
func (s *Store) Get(ctx context.Context, checkPointID string) ([]byte, bool, error) {
	head, err := s.eng.Latest(ctx, checkPointID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("eino checkpoint %q: %w", checkPointID, err)
	}
	if enc, ok := wrapped(head.State); ok {
		b, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, false, fmt.Errorf("eino checkpoint %q: %w", checkPointID, err)
		}
		return b, true, nil
	}
	return head.State, true, nil
}

// wrapped reports whether state is a checkpoint Set stored base64-encoded
// (an object of base64Key alone, a string) and returns the encoding.
func wrapped(state []byte) (string, bool) {
	var w map[string]json.RawMessage
	if json.Unmarshal(state, &w) != nil || len(w) != 1 {
		return "", false
	}
	var enc string
	if raw, ok := w[base64Key]; !ok || json.Unmarshal(raw, &enc) != nil {
		return "", false
	}
	return enc, true
}

// Set writes checkPoint as a new checkpoint of thread checkPointID, child
// of its head.
func (s *Store) Set(ctx context.Context, checkPointID string, checkPoint []byte) error {
	snapshot := func(state []byte) (engine.SnapshotResult, error) {
		return s.eng.Snapshot(ctx, engine.SnapshotInput{
			ThreadID: checkPointID,
			Trigger:  engine.TriggerTaskBoundary,
			Summary:  "eino checkpoint",
			Metadata: json.RawMessage(`{"eino": true}`),
			State:    state,
		})
	}
	// A JSON object is stored as it is, unless Get would read it as one
	// stored base64-encoded, or the stores cannot hold it as JSON
	// (ErrInvalidJSON, nothing written: text that is not UTF-8, say, which
	// Eino's default serializer writes for such a map key): those are
	// wrapped too. Only JSON's own white space is trimmed, so that bytes
	// that are not JSON come back exactly.
	state := bytes.Trim(checkPoint, " \t\r\n")
	_, looksWrapped := wrapped(state)
	wrap := len(state) == 0 || state[0] != '{' || !json.Valid(state) || looksWrapped
	var res engine.SnapshotResult
	var err error
	if !wrap {
		res, err = snapshot(state)
		wrap = errors.Is(err, engine.ErrInvalidJSON)
	}
	if wrap {
		state, _ = json.Marshal(map[string]string{base64Key: base64.StdEncoding.EncodeToString(checkPoint)})
		res, err = snapshot(state)
	}
	if err != nil {
		return fmt.Errorf("eino checkpoint %q: %w", checkPointID, err)
	}
	if res.Skipped {
		// Reporting success would let Eino resume later from an older
		// checkpoint.
		return fmt.Errorf("eino checkpoint %q: %w", checkPointID, ErrNotStored)
	}
	return nil
}

// ErrNotStored is returned by Set when the Engine is configured not to
// write task_boundary checkpoints (Config.Triggers): Eino's checkpoint was
// not stored.
var ErrNotStored = errors.New("pgcheckpoint eino: the engine does not write task_boundary checkpoints (Config.Triggers); the Eino checkpoint was not stored")

// Delete deletes thread checkPointID, every checkpoint of it (the shape of
// Eino's optional checkpoint deleter). Deleting an unknown id is not an
// error.
func (s *Store) Delete(ctx context.Context, checkPointID string) error {
	if _, err := s.eng.DeleteThreads(ctx, checkPointID); err != nil {
		return fmt.Errorf("eino checkpoint %q: %w", checkPointID, err)
	}
	return nil
}
