package enginetest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// heldEnv is a HeldKeys directory and what a test reads of it.
type heldEnv struct {
	*cryptEnv
	dir string
}

func (e *cryptEnv) held() *heldEnv {
	return &heldEnv{cryptEnv: e, dir: e.t.TempDir()}
}

// provider is a HeldKeys over dir whose KEKs are keys (ParseLocalKeys's
// format, the current one first).
func (h *heldEnv) provider(keys ...string) *engine.HeldKeys {
	h.t.Helper()
	text := ""
	for _, k := range keys {
		text += k + "\n"
	}
	l, err := engine.ParseLocalKeys(text)
	if err != nil {
		h.t.Fatal(err)
	}
	return &engine.HeldKeys{Dir: h.dir, KEKs: l}
}

// HeldKeyFiles returns the names of the files in dir, the directory of
// an engine.HeldKeys, sorted; none when dir does not exist. For tests of
// what a shredding or a rotation leaves with the provider.
func HeldKeyFiles(t testing.TB, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range list {
		out = append(out, f.Name())
	}
	slices.Sort(out)
	return out
}

// files returns the references of the key files in dir, sorted: each
// file's name after its tenant's tag.
func (h *heldEnv) files() []string {
	h.t.Helper()
	var out []string
	for _, name := range HeldKeyFiles(h.t, h.dir) {
		_, ref, ok := strings.Cut(name, "-")
		if !ok {
			ref = name
		}
		out = append(out, ref)
	}
	slices.Sort(out)
	return out
}

// named returns the references the live key rows of eng's tenant hold,
// sorted.
func (h *heldEnv) named(eng *engine.Engine) []string {
	h.t.Helper()
	keys, err := eng.Store().DataKeys(h.ctx, "", 1<<20)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if k.Wrapped != nil {
			out = append(out, hex.EncodeToString(k.Wrapped))
		}
	}
	slices.Sort(out)
	return out
}

// age sets the times of the key file of ref (or the file named ref) to d
// ago.
func (h *heldEnv) age(ref string, d time.Duration) {
	h.t.Helper()
	names, err := filepath.Glob(filepath.Join(h.dir, "*-"+ref))
	if err != nil {
		h.t.Fatal(err)
	}
	names = append(names, filepath.Join(h.dir, ref))
	at := time.Now().Add(-d)
	for _, name := range names {
		if err := os.Chtimes(name, at, at); err != nil && !errors.Is(err, os.ErrNotExist) {
			h.t.Fatal(err)
		}
	}
}

// orphan writes a thread with eng and deletes its key row, as a first
// write that rolled back leaves its key: held, named by no row. It
// returns the key's reference.
func (h *heldEnv) orphan(eng *engine.Engine, thread string) string {
	h.t.Helper()
	snapWith(h.t, h.ctx, eng, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`["orphan"]`)})
	w, err := eng.Store().DataKey(h.ctx, thread)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.h.SQL(h.t, h.url).ExecContext(h.ctx, "DELETE FROM data_keys WHERE thread_id = $1", thread); err != nil {
		h.t.Fatal(err)
	}
	return hex.EncodeToString(w.Wrapped)
}

// ShredThread and two RewrapKeys race, round after round, under
// HeldKeys: whichever comes first, once all end the thread is shredded,
// no key of it is left with the provider (the key files are those the
// live rows name), and another thread reads throughout and after.
func testShredRacesRewrap(t *testing.T, e *cryptEnv) {
	h := e.held()
	kekA, kekB := engine.NewKeyText("a"), engine.NewKeyText("b")
	// Two rotations in turn, each wrapping under the other's current key.
	rotations := []*engine.Engine{
		e.open(h.provider(kekB, kekA), engine.Config{}),
		e.open(h.provider(kekA, kekB), engine.Config{}),
	}
	shredder := e.open(h.provider(kekA, kekB), engine.Config{})
	reader := e.open(h.provider(kekA, kekB), engine.Config{})
	writer := e.open(h.provider(kekA, kekB), engine.Config{})
	kept := snapWith(t, e.ctx, writer, engine.SnapshotInput{ThreadID: "kept", Messages: json.RawMessage(`["kept"]`)})
	// The shredded threads' ids sort before "kept": a rotation reaches
	// them first, while the shredding is under way.

	const rounds = 100
	leaks := 0
	for i := range rounds {
		thread := fmt.Sprintf("gone-%d", i)
		gone := snapWith(t, e.ctx, writer, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`["gone"]`)})
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 4)
		wg.Add(4)
		go func() {
			defer wg.Done()
			<-start
			_, errs[0] = shredder.ShredThread(e.ctx, thread)
		}()
		go func() {
			defer wg.Done()
			<-start
			_, errs[1] = rotations[i%2].RewrapKeys(e.ctx)
		}()
		go func() {
			defer wg.Done()
			<-start
			_, errs[2] = reader.Get(e.ctx, kept.ID)
		}()
		go func() {
			defer wg.Done()
			<-start
			_, errs[3] = rotations[(i+1)%2].RewrapKeys(e.ctx)
		}()
		close(start)
		wg.Wait()
		for j, what := range []string{"shred", "a rotation", "a read of another thread", "a second rotation"} {
			if errs[j] != nil {
				t.Fatalf("round %d: %s: %v", i, what, errs[j])
			}
		}
		if files, named := h.files(), h.named(writer); !slices.Equal(files, named) {
			leaks++
			t.Logf("round %d: key files %v; the live rows name %v", i, files, named)
			// The next rounds start from what the rows name.
			for _, f := range files {
				if !slices.Contains(named, f) {
					_ = os.Remove(filepath.Join(h.dir, f))
				}
			}
		}
		if c, err := writer.Get(e.ctx, kept.ID); err != nil || string(c.Messages) != `["kept"]` {
			t.Fatalf("round %d: the other thread: %v", i, err)
		}
		c, err := writer.Get(e.ctx, gone.ID)
		refused(t, fmt.Sprintf("round %d: the shredded thread", i), c, err)
	}
	if leaks > 0 {
		t.Fatalf("%d of %d rounds left a key file of the shredded thread with the provider", leaks, rounds)
	}
}

// Writers racing to make a thread's first key leave one key file: each
// loser destroys the key it made.
func testFirstWriteRaceLeavesOneKey(t *testing.T, e *cryptEnv) {
	h := e.held()
	kek := engine.NewKeyText("k")
	const writers, rounds = 6, 8
	engs := make([]*engine.Engine, writers)
	for i := range engs {
		engs[i] = e.open(h.provider(kek), engine.Config{})
	}
	for r := range rounds {
		thread := fmt.Sprintf("first-%d", r)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, writers)
		for i, eng := range engs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(fmt.Sprintf(`[%d]`, i))})
			}()
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
	}
	if files, named := h.files(), h.named(engs[0]); !slices.Equal(files, named) || len(named) != rounds {
		t.Fatalf("%d key files %v; the %d key rows name %v", len(files), files, len(named), named)
	}
	for _, eng := range engs {
		if cs, err := eng.ListCheckpoints(e.ctx, "first-0", engine.ListOptions{}); err != nil || len(cs) != writers {
			t.Fatalf("first-0: %d checkpoints, %v; want %d", len(cs), err, writers)
		}
	}
}

// PruneKeys destroys the key files no key row names that are older than
// its grace (as a first write that rolled back, or a process stopped
// between making a key and storing its row, leaves them), of the engine's
// tenant and the tenants named alone: it keeps every named key, a new
// unnamed one (a key whose row may not be committed yet), every key of a
// tenant not named, and files of unknown form.
func testPruneKeys(t *testing.T, e *cryptEnv) {
	h := e.held()
	keys := h.provider(engine.NewKeyText("k"))
	eng := e.open(keys, engine.Config{})
	a, err := eng.ForTenant("a")
	if err != nil {
		t.Fatal(err)
	}
	var heads []engine.SnapshotResult
	for _, w := range []*engine.Engine{eng, eng, a} {
		heads = append(heads, snapWith(t, e.ctx, w, engine.SnapshotInput{ThreadID: fmt.Sprintf("t%d", len(heads)), Messages: json.RawMessage(`["kept"]`)}))
	}
	old, fresh, ofA := h.orphan(eng, "old"), h.orphan(eng, "fresh"), h.orphan(a, "of-a")
	// Files of no form HeldKeys makes: a bare reference, another name.
	bare := hex.EncodeToString(make([]byte, 16))
	for _, name := range []string{bare, "notes"} {
		if err := os.WriteFile(filepath.Join(h.dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range h.files() {
		if f != fresh {
			h.age(f, 2*time.Hour)
		}
	}
	if _, err := eng.PruneKeys(e.ctx, time.Second); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("a grace of a second: %v, want ErrInvalidInput", err)
	}
	if _, err := e.open(nil, engine.Config{}).PruneKeys(e.ctx, time.Hour); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("a provider that holds no keys: %v, want ErrInvalidInput", err)
	}
	all := h.files()
	// Without tenant a named, its keys are not considered: a's key and
	// a's orphan stay.
	if n, err := eng.PruneKeys(e.ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("prune without tenant a: %d, %v; want the old orphan of the engine's tenant alone", n, err)
	}
	want := slices.DeleteFunc(slices.Clone(all), func(f string) bool { return f == old })
	if files := h.files(); !slices.Equal(files, want) {
		t.Fatalf("after the prune without tenant a: %v, want %v", files, want)
	}
	if n, err := eng.PruneKeys(e.ctx, time.Hour, "a"); err != nil || n != 1 {
		t.Fatalf("prune with tenant a: %d, %v; want a's orphan alone", n, err)
	}
	want = append(h.named(eng), h.named(a)...)
	want = append(want, fresh, bare, "notes")
	slices.Sort(want)
	if files := h.files(); !slices.Equal(files, want) || slices.Contains(files, ofA) {
		t.Fatalf("after the prune: %v, want %v", files, want)
	}
	for i, w := range []*engine.Engine{eng, eng, a} {
		if _, err := w.Get(e.ctx, heads[i].ID); err != nil {
			t.Fatalf("t%d after the prunes: %v", i, err)
		}
	}
}

// unshredding is HeldKeys whose ShredKey fails.
type unshredding struct{ *engine.HeldKeys }

func (u unshredding) ShredKey(context.Context, string, []byte, []byte) error {
	return errors.New("the provider is down")
}

// A provider that does not destroy a key no row names any more is
// reported with ErrKeyNotDestroyed: by ShredThread (with true, the row
// shredded all the same) and by RewrapKeys (the row rewrapped all the
// same; the thread reads under the new wrapping). The key file stays,
// for PruneKeys.
func testKeyNotDestroyed(t *testing.T, e *cryptEnv) {
	h := e.held()
	kekA, kekB := engine.NewKeyText("a"), engine.NewKeyText("b")
	eng := e.open(unshredding{h.provider(kekA)}, engine.Config{})
	gone := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "gone", Messages: json.RawMessage(`["gone"]`)})
	kept := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "kept", Messages: json.RawMessage(`["kept"]`)})
	had, err := eng.ShredThread(e.ctx, "gone")
	if !had || !errors.Is(err, engine.ErrKeyNotDestroyed) {
		t.Fatalf("shred: %v, %v; want true, ErrKeyNotDestroyed", had, err)
	}
	c, err := eng.Get(e.ctx, gone.ID)
	refused(t, "the shredded thread", c, err)
	rotated := e.open(unshredding{h.provider(kekB, kekA)}, engine.Config{})
	if _, err := rotated.RewrapKeys(e.ctx); !errors.Is(err, engine.ErrKeyNotDestroyed) {
		t.Fatalf("rewrap: %v, want ErrKeyNotDestroyed", err)
	}
	if got, err := e.open(h.provider(kekB), engine.Config{}).Get(e.ctx, kept.ID); err != nil || string(got.Messages) != `["kept"]` {
		t.Fatalf("the rewrapped thread under the new key alone: %v, %v", got, err)
	}
	if files, named := h.files(), h.named(eng); len(files) != 3 || len(named) != 1 {
		t.Fatalf("key files %v, named %v; want the shredded and the replaced keys left besides the named one", files, named)
	}
}

// gatedKeys is a KeyProvider whose next UnwrapKey, once armed, unwraps and
// then waits for release before it returns: a read that read the key row
// before a shredding and ends after it.
type gatedKeys struct {
	engine.KeyProvider
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedKeys) UnwrapKey(ctx context.Context, kek string, wrapped, ad []byte) ([]byte, error) {
	dek, err := g.KeyProvider.UnwrapKey(ctx, kek, wrapped, ad)
	if err == nil && g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
	return dek, err
}

// gatedShredder is gatedKeys over a KeyShredder.
type gatedShredder struct{ *gatedKeys }

func (g gatedShredder) ShredKey(ctx context.Context, kek string, wrapped, ad []byte) error {
	return g.KeyProvider.(engine.KeyShredder).ShredKey(ctx, kek, wrapped, ad)
}

// Once ShredThread returns, its Engine refuses the thread's reads and
// writes (ErrEncrypted), with its key cache on (other processes may use a
// key they cached for Encryption.KeyCacheTTL), also after a read that
// unwrapped the key before the shredding ended after it: that read cached
// the key again, and for a minute the Engine read the thread and wrote to
// it (under HeldKeys, content no one could ever read).
func testShredRacesARead(t *testing.T, e *cryptEnv) {
	for _, held := range []bool{false, true} {
		var inner engine.KeyProvider = e.keys
		if held {
			inner = &engine.HeldKeys{Dir: t.TempDir(), KEKs: e.keys}
		}
		g := &gatedKeys{KeyProvider: inner, entered: make(chan struct{}), release: make(chan struct{})}
		var keys engine.KeyProvider = g
		if held {
			keys = gatedShredder{g}
		}
		thread := fmt.Sprintf("shredded-held-%v", held)
		open := func() *engine.Engine { // the default key cache
			return openURL(t, e.url, pgcheckpoint.Options{Config: engine.Config{Encryption: engine.Encryption{Keys: keys}}})
		}
		snapWith(t, e.ctx, open(), engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`["secret"]`)})
		eng := open()
		g.armed.Store(true)
		read := make(chan error, 1)
		go func() {
			_, err := eng.Latest(e.ctx, thread)
			read <- err
		}()
		<-g.entered
		if had, err := eng.ShredThread(e.ctx, thread); err != nil || !had {
			t.Fatalf("held %v: shred: %v, %v", held, had, err)
		}
		close(g.release)
		if err := <-read; err != nil {
			t.Fatalf("held %v: the read begun before the shredding: %v", held, err)
		}
		if c, err := eng.Latest(e.ctx, thread); !errors.Is(err, engine.ErrEncrypted) {
			t.Errorf("held %v: a read after ShredThread returned, same Engine: %v (read back: %v); want ErrEncrypted", held, err, c != nil)
		}
		if _, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`["after"]`)}); !errors.Is(err, engine.ErrEncrypted) {
			t.Errorf("held %v: a write after ShredThread returned, same Engine: %v; want ErrEncrypted", held, err)
		}
	}
}

// A shredded branch reads nothing, also what it holds of its source's
// values (its first checkpoint's content, sealed under the source's key,
// read back while the source's key lived); its source reads on.
func testShreddedBranchReadsNothing(t *testing.T, e *cryptEnv) {
	eng := e.open(nil, engine.Config{})
	src := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "source", Messages: json.RawMessage(`["from the source"]`),
		State: json.RawMessage(`{"plan":"the source's"}`)})
	br, err := eng.Branch(e.ctx, src.ID, "side")
	if err != nil {
		t.Fatal(err)
	}
	if had, err := eng.ShredThread(e.ctx, br.ThreadID); err != nil || !had {
		t.Fatalf("shred the branch: %v, %v", had, err)
	}
	for name, read := range map[string]func() (*engine.Checkpoint, error){
		"Latest": func() (*engine.Checkpoint, error) { return eng.Latest(e.ctx, br.ThreadID) },
		"Get":    func() (*engine.Checkpoint, error) { return eng.Get(e.ctx, br.CheckpointID) },
	} {
		if c, err := read(); !errors.Is(err, engine.ErrEncrypted) || c != nil {
			t.Errorf("%s of the shredded branch: %v, %v; want ErrEncrypted and nothing", name, c != nil, err)
		}
	}
	if _, err := eng.Get(e.ctx, src.ID); err != nil {
		t.Errorf("the source after its branch was shredded: %v", err)
	}
}
