package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// tenantTarget is what a probe of another tenant names: tenant A's threads
// and checkpoints, or ghosts that exist in no tenant.
type tenantTarget struct {
	thread, branch string      // a thread with a branch, and the branch
	ids            []uuid.UUID // checkpoints of thread, oldest first (3 or more)
	subID          uuid.UUID   // a checkpoint of thread in namespace "sub"
	export         []byte      // an export of thread with its branches
}

// tenantProbe is one Engine method called by tenant B on a target; it
// returns a summary of its result that names no id (compared between A's
// target and a ghost one). A nil call marks a method that names no data,
// with why in note.
type tenantProbe struct {
	call func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error)
	// named: the call names one of A's objects, so the answer must be
	// ErrNotFound.
	named bool
	// mayCreate: the call may write rows of B's own (on A's thread ids).
	mayCreate bool
	note      string
}

// tenantProbes holds every exported method of *engine.Engine:
// testTenantsKeptApart fails on a method missing here, so a new method
// cannot go untried.
var tenantProbes = map[string]tenantProbe{
	"Get": {named: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.Get(ctx, x.ids[0])
		return "", err
	}},
	"Latest": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.Latest(ctx, x.thread)
		return "", err
	}},
	"LatestIn": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.LatestIn(ctx, x.thread, "sub")
		return "", err
	}},
	"ListCheckpoints": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		all, err := b.ListCheckpoints(ctx, x.thread, engine.ListOptions{})
		if err != nil {
			return "", err
		}
		// A's checkpoint as the cursor names A's object.
		_, err = b.ListCheckpoints(ctx, x.thread, engine.ListOptions{Before: x.ids[2]})
		if !errors.Is(err, engine.ErrNotFound) {
			return "", fmt.Errorf("cursor of another tenant: %w (want ErrNotFound)", err)
		}
		return fmt.Sprintf("%d", len(all)), nil
	}},
	"ListThreads": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		ths, err := b.ListThreads(ctx, engine.ThreadListOptions{})
		return fmt.Sprintf("%d", len(ths)), err
	}},
	"PutWrites": {named: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.PutWrites(ctx, x.ids[2], "task-b", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}})
		return "", err
	}},
	"Snapshot": {named: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.Snapshot(ctx, engine.SnapshotInput{ThreadID: x.thread, ParentID: x.ids[0], State: json.RawMessage(`{"b":1}`)})
		return "", err
	}},
	"SnapshotSafe": {named: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		r := b.SnapshotSafe(ctx, engine.SnapshotInput{ThreadID: x.thread, ParentID: x.ids[0], State: json.RawMessage(`{"b":1}`)})
		return "", r.Err
	}},
	"SnapshotFailures": {note: "a count of this process's failed snapshots, no rows"},
	"Enabled":          {note: "reads the configuration, no rows"},
	"Encrypted":        {note: "reads the configuration, no rows"},
	"RewrapKeys":       {note: "needs an encrypting Engine: the encryption suite's TenantsKeepTheirKeys has tenant B rewrap and shred on A's thread ids"},
	"ShredThread":      {note: "needs an encrypting Engine: the encryption suite's TenantsKeepTheirKeys has tenant B rewrap and shred on A's thread ids"},
	"PruneKeys":        {note: "needs an Engine over HeldKeys: the encryption suite's PruneKeysKeepsEveryTenantNamed prunes as one tenant"},
	"Append": {named: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.Append(ctx, engine.AppendInput{ThreadID: x.thread, Messages: json.RawMessage(`[{"role":"user","content":"b"}]`)})
		return "", err
	}},
	"Resume": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		r, err := b.Resume(ctx, x.thread)
		return fmt.Sprintf("%v", r != nil), err
	}},
	"ResumeIn": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		r, err := b.ResumeIn(ctx, x.thread, "sub")
		return fmt.Sprintf("%v", r != nil), err
	}},
	"Scope": {mayCreate: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		err := b.Scope(ctx, x.thread, map[string]int{"b": 1}, func(context.Context) error { return nil })
		return "", err
	}},
	"ScopeIn": {mayCreate: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		err := b.ScopeIn(ctx, x.thread, "sub", map[string]int{"b": 1}, func(context.Context) error { return nil })
		return "", err
	}},
	"StartInterval": {mayCreate: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		iv, err := b.StartInterval(ctx, engine.IntervalOptions{ThreadID: x.thread, Every: time.Millisecond,
			Capture: func(context.Context) (engine.SnapshotInput, error) {
				return engine.SnapshotInput{State: json.RawMessage(`{"b":1}`)}, nil
			}})
		if err != nil {
			return "", err
		}
		for deadline := time.Now().Add(time.Minute); iv.Written() == 0 && !iv.Disabled && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		return fmt.Sprintf("%v", iv.Written() > 0), iv.Close()
	}},
	"DeleteThreads": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		r, err := b.DeleteThreads(ctx, x.thread, x.branch)
		return fmt.Sprintf("%d", r.Deleted), err
	}},
	"DeleteCheckpoints": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		r1, err := b.DeleteCheckpoints(ctx, engine.BeforeStep(x.thread, 1000))
		if err != nil {
			return "", err
		}
		r2, err := b.DeleteCheckpoints(ctx, engine.ForRuns("r1"))
		return fmt.Sprintf("%d %d", r1.Deleted, r2.Deleted), err
	}},
	"PruneThreads": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		r, err := b.PruneThreads(ctx, engine.KeepNone(), x.thread, x.branch)
		return fmt.Sprintf("%d %d", r.Deleted, len(r.IDs)), err
	}},
	"PreviewPrune": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		r, err := b.PreviewPrune(ctx, engine.KeepLastN(1), x.thread, x.branch)
		return fmt.Sprintf("%d %d", r.Deleted, len(r.IDs)), err
	}},
	"Sweep": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		r, err := b.Sweep(ctx, engine.KeepLastN(1), engine.SweepOptions{})
		return fmt.Sprintf("%d %d %d", r.Threads, r.Expired, r.Deleted), err
	}},
	"PreviewSweep": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		r, err := b.PreviewSweep(ctx, engine.KeepLastN(1), engine.SweepOptions{})
		return fmt.Sprintf("%d %d %d", r.Threads, r.Expired, r.Deleted), err
	}},
	"SetThreadExpiry": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		err := b.SetThreadExpiry(ctx, x.thread, time.Now().Add(-time.Hour), engine.KeepNone())
		if _, serr := b.Sweep(ctx, engine.KeepAll(), engine.SweepOptions{}); serr != nil {
			return "", serr
		}
		return "", err
	}},
	"ThreadExpiry": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, _, err := b.ThreadExpiry(ctx, x.thread)
		return "", err
	}},
	"Rewind": {named: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.Rewind(ctx, x.ids[0])
		return "", err
	}},
	"RewindAndTruncate": {named: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.RewindAndTruncate(ctx, x.ids[0])
		return "", err
	}},
	"RewindToStep": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.RewindToStep(ctx, x.thread, 1)
		return "", err
	}},
	"RewindToStepIn": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.RewindToStepIn(ctx, x.thread, "sub", 1)
		return "", err
	}},
	"TimeTravelPoints": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		ps, err := b.TimeTravelPoints(ctx, x.thread, engine.PointsOptions{})
		if err != nil {
			return "", err
		}
		_, err = b.TimeTravelPoints(ctx, x.thread, engine.PointsOptions{Before: x.ids[2]})
		if !errors.Is(err, engine.ErrNotFound) {
			return "", fmt.Errorf("cursor of another tenant: %w (want ErrNotFound)", err)
		}
		return fmt.Sprintf("%d", len(ps)), nil
	}},
	"Lineage": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		l, err := b.Lineage(ctx, x.ids[2])
		return fmt.Sprintf("%d", len(l)), err
	}},
	"Branch": {named: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.Branch(ctx, x.ids[1], "b-branch")
		return "", err
	}},
	"Branches": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		bs, err := b.Branches(ctx, x.thread)
		return fmt.Sprintf("%d", len(bs)), err
	}},
	"MergeBranch": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.MergeBranch(ctx, x.branch, x.thread)
		return "", err
	}},
	"MergeBranchIn": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.MergeBranchIn(ctx, x.branch, x.thread, "sub")
		return "", err
	}},
	"Tree": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		tr, err := b.Tree(ctx, x.thread)
		if tr == nil {
			return "nil", err
		}
		return fmt.Sprintf("%d %d", len(tr.Nodes), len(tr.Edges)), err
	}},
	"ClearMemory": {mayCreate: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.ClearMemory(ctx, x.thread)
		return "", err
	}},
	"ClearMemoryIn": {mayCreate: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.ClearMemoryIn(ctx, x.thread, "sub")
		return "", err
	}},
	"Diff": {named: true, call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.Diff(ctx, x.ids[0], x.ids[2])
		return "", err
	}},
	"CopyThread": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		_, err := b.CopyThread(ctx, x.thread, "b-copy")
		return "", err
	}},
	"Export": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		var buf bytes.Buffer
		_, err := b.Export(ctx, x.thread, &buf, engine.ExportOptions{Branches: true})
		return "", err
	}},
	"Import": {note: "imports A's export into B: checked apart (testTenantImport)"},
	"WithTx": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		// A caller's transaction keeps the tenant (Postgres); elsewhere
		// the call is refused.
		_, err := b.WithTx(nil)
		if err != nil && !errors.Is(err, engine.ErrInvalidInput) {
			return "", err
		}
		return "", nil
	}},
	"Store": {call: func(ctx context.Context, b *engine.Engine, x tenantTarget) (string, error) {
		if ts, ok := b.Store().(engine.TenantStore); ok && ts.Tenant() != b.Tenant() {
			return "", fmt.Errorf("the store is bound to %q, the engine to %q", ts.Tenant(), b.Tenant())
		}
		return "", nil
	}},
	"Close":     {note: "closes the store B shares with every tenant's Engine: close the Engine ForTenant was called on"},
	"ForTenant": {note: "the application chooses the tenant (checked in TenantNamesAreChecked)"},
	"Tenant":    {note: "names B's own tenant (checked in SameThreadIDsAreKeptApart)"},
}

// tenantEngine opens the database the tenant tests use: Harness.TenantURL's
// when set, else the test's own.
func (e *env) tenantEngine() *engine.Engine {
	e.t.Helper()
	if e.h.TenantURL == nil {
		return e.eng
	}
	return openURL(e.t, e.h.TenantURL(e.t), pgcheckpoint.Options{Config: deltas})
}

// otherTenantEngine opens another new database as tenantEngine does.
func (e *env) otherTenantEngine() *engine.Engine {
	e.t.Helper()
	url := e.h.NewURL
	if e.h.TenantURL != nil {
		url = e.h.TenantURL
	}
	return openURL(e.t, url(e.t), pgcheckpoint.Options{Config: deltas})
}

// forTenant is eng.ForTenant; any error is fatal.
func forTenant(t testing.TB, eng *engine.Engine, tenant string) *engine.Engine {
	t.Helper()
	out, err := eng.ForTenant(tenant)
	if err != nil {
		t.Fatalf("for tenant %q: %v", tenant, err)
	}
	if out.Tenant() != tenant {
		t.Fatalf("ForTenant(%q).Tenant() = %q", tenant, out.Tenant())
	}
	return out
}

// seedTenant writes, as eng's tenant, a thread with deltas, pending
// writes, a branch, a merge, a namespace "sub", a rewind and a run id, and
// returns what probes name.
func seedTenant(t *testing.T, ctx context.Context, eng *engine.Engine, thread string) tenantTarget {
	t.Helper()
	x := tenantTarget{thread: thread}
	msgs := `[{"role":"user","content":"secret of ` + thread + `"}]`
	for i := range 4 {
		res := snapWith(t, ctx, eng, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(msgs),
			State: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)), Metadata: json.RawMessage(`{"run_id": "r1"}`)})
		x.ids = append(x.ids, res.ID)
		msgs = msgs[:len(msgs)-1] + fmt.Sprintf(`,{"role":"assistant","content":"step %d"}]`, i)
	}
	if _, err := eng.PutWrites(ctx, x.ids[2], "task-a", []engine.Write{{Channel: "out", Value: json.RawMessage(`{"v": 1}`)}}); err != nil {
		t.Fatal(err)
	}
	br, err := eng.Branch(ctx, x.ids[1], "alt")
	if err != nil {
		t.Fatal(err)
	}
	x.branch = br.ThreadID
	snapWith(t, ctx, eng, engine.SnapshotInput{ThreadID: br.ThreadID, State: json.RawMessage(`{"alt": true}`)})
	if _, err := eng.MergeBranch(ctx, br.ThreadID, thread); err != nil {
		t.Fatal(err)
	}
	x.subID = snapWith(t, ctx, eng, engine.SnapshotInput{ThreadID: thread, Namespace: "sub", State: json.RawMessage(`{"sub": 1}`)}).ID
	snapWith(t, ctx, eng, engine.SnapshotInput{ThreadID: br.ThreadID, Namespace: "sub", State: json.RawMessage(`{"sub": 2}`)})
	if _, err := eng.Rewind(ctx, x.ids[2]); err != nil {
		t.Fatal(err)
	}
	x.export, _ = exportWith(t, ctx, eng, thread, engine.ExportOptions{Branches: true})
	return x
}

// errorKind is what a tenant may learn from an error: its sentinel; ok is
// false for an error without one.
func errorKind(err error) (kind string, ok bool) {
	if err == nil {
		return "nil", true
	}
	for _, s := range []error{engine.ErrNotFound, engine.ErrInvalidInput, engine.ErrIDConflict, engine.ErrHeadMoved} {
		if errors.Is(err, s) {
			return s.Error(), true
		}
	}
	return err.Error(), false
}

// Tenant B calls every method of the Engine with tenant A's thread ids
// and checkpoint ids, and sees, changes and learns nothing: ErrNotFound
// where A's object is named, the same answer (error sentinel, counts) as a
// tenant of an empty database asked about ids that exist nowhere, no
// checkpoint of A in what it can read afterwards, and every row of A
// unchanged.
func testTenantsKeptApart(t *testing.T, e *env) {
	base := e.tenantEngine()
	a := forTenant(t, base, "a")
	x := seedTenant(t, e.ctx, a, "run-1")
	// The default tenant holds threads too, under other names: what a
	// path that lost B's tenant reaches (a store that names no tenant is
	// the default tenant's), so B's answers show it and its rows are
	// checked as A's are.
	dx := seedTenant(t, e.ctx, base, "default-run")
	dBefore := takeInventory(t, e.ctx, base, dx.thread, dx.branch)
	aIDs := map[uuid.UUID]bool{}
	before := takeInventory(t, e.ctx, a, x.thread, x.branch)
	for id := range before.checkpoints {
		aIDs[id] = true
	}
	// The answers B must give are those of a tenant of another, empty
	// database, asked about ids that exist nowhere: what B gets for A's ids
	// must not tell them apart.
	elsewhere := e.otherTenantEngine()
	ghost := tenantTarget{thread: "ghost-run", branch: "ghost-branch", subID: uuid.New(),
		ids: []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New()}}

	var methods []string
	for i := range reflect.TypeFor[*engine.Engine]().NumMethod() {
		methods = append(methods, reflect.TypeFor[*engine.Engine]().Method(i).Name)
	}
	for _, m := range methods {
		if _, ok := tenantProbes[m]; !ok {
			t.Errorf("Engine.%s has no entry in tenantProbes: say what tenant B does with it", m)
		}
	}
	var names []string
	for name := range tenantProbes {
		names = append(names, name)
		if !slices.Contains(methods, name) {
			t.Errorf("tenantProbes names %s, which the Engine does not export", name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		p := tenantProbes[name]
		if p.call == nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			b := forTenant(t, base, "b-"+name)
			g := forTenant(t, elsewhere, "b-"+name)
			got, err := p.call(e.ctx, b, x)
			want, gerr := p.call(e.ctx, g, ghost)
			if p.named && !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("on A's checkpoint: %v, want ErrNotFound", err)
			}
			kind, ok := errorKind(err)
			gkind, gok := errorKind(gerr)
			if !ok || !gok || kind != gkind {
				t.Errorf("on A's ids: %v; on ids that exist nowhere: %v", err, gerr)
			}
			if got != want {
				t.Errorf("on A's ids: %q; on ids that exist nowhere: %q", got, want)
			}
			// What B holds now is its own: no checkpoint of A.
			inv := takeInventory(t, e.ctx, b, x.thread, x.branch, "b-copy")
			for id := range inv.checkpoints {
				if aIDs[id] {
					t.Errorf("tenant B reads A's checkpoint %s", id)
				}
			}
			if !p.mayCreate && len(inv.checkpoints) > 0 {
				t.Errorf("tenant B holds %d checkpoints after %s", len(inv.checkpoints), name)
			}
			if after := takeInventory(t, e.ctx, a, x.thread, x.branch); after.dump != before.dump {
				t.Errorf("tenant A's rows changed after B's %s", name)
			}
			if after := takeInventory(t, e.ctx, base, dx.thread, dx.branch); after.dump != dBefore.dump {
				t.Errorf("the default tenant's rows changed after B's %s", name)
			}
		})
	}
	testTenantImport(t, e.ctx, base, a, x, before)
	if after := takeInventory(t, e.ctx, a, x.thread, x.branch); after.dump != before.dump {
		t.Error("tenant A's rows changed")
	}
}

// testTenantImport: A's export imports into B as B's rows (the same thread
// and checkpoint ids, kept apart); B's changes to them leave A's alone.
func testTenantImport(t *testing.T, ctx context.Context, base, a *engine.Engine, x tenantTarget, before *inventory) {
	t.Run("Import", func(t *testing.T) {
		b := forTenant(t, base, "b-Import")
		if _, err := b.Import(ctx, bytes.NewReader(x.export), engine.ImportOptions{}); err != nil {
			t.Fatalf("import A's export into B: %v", err)
		}
		inv := takeInventory(t, ctx, b, x.thread, x.branch)
		if inv.counts() != before.counts() {
			t.Errorf("B imported %v (thread rows, checkpoints, writes), A exported %v", inv.counts(), before.counts())
		}
		for id, c := range before.checkpoints {
			got, ok := inv.checkpoints[id]
			if !ok || !jsonSame(got.Messages, c.Messages) {
				t.Errorf("B's import of checkpoint %s: missing or other content", id)
			}
		}
		// The same file again is refused in B (the thread exists there),
		// and writes nothing; in a third tenant it goes in.
		if _, err := b.Import(ctx, bytes.NewReader(x.export), engine.ImportOptions{}); err == nil {
			t.Error("a second import of the same threads into B passed")
		}
		c := forTenant(t, base, "c-Import")
		if _, err := c.Import(ctx, bytes.NewReader(x.export), engine.ImportOptions{}); err != nil {
			t.Errorf("import A's export into a third tenant: %v", err)
		}
		// B changes its copy: A's stays.
		if _, err := b.Rewind(ctx, x.ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := b.PutWrites(ctx, x.ids[1], "task-b", []engine.Write{{Channel: "c", Value: json.RawMessage(`2`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.DeleteCheckpoints(ctx, engine.BeforeStep(x.thread, 1000)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.RewindAndTruncate(ctx, x.ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := b.PruneThreads(ctx, engine.KeepNone(), x.thread, x.branch); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Get(ctx, x.ids[0]); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("B's copy after B's prune: %v, want ErrNotFound", err)
		}
		if after := takeInventory(t, ctx, a, x.thread, x.branch); after.dump != before.dump {
			t.Error("tenant A's rows changed after B imported, rewound, wrote and pruned the same ids")
		}
		if got := takeInventory(t, ctx, c, x.thread, x.branch); got.dump != before.dump {
			t.Error("a third tenant's import differs from A's rows")
		}
	})
}

// jsonSame reports whether two JSON texts hold the same value.
func jsonSame(a, b []byte) bool { return jsonDiff(a, b) == nil }

// Two tenants may use the same thread id: each has its own history, head,
// listing and deletes. An Engine that never named a tenant is
// DefaultTenant's.
func testSameThreadIDsKeptApart(t *testing.T, e *env) {
	base := e.tenantEngine()
	if base.Tenant() != engine.DefaultTenant {
		t.Fatalf("an Engine that names no tenant is %q's, want %q", base.Tenant(), engine.DefaultTenant)
	}
	a, b := forTenant(t, base, "a"), forTenant(t, base, "b")
	for i := range 3 {
		snapWith(t, e.ctx, a, engine.SnapshotInput{ThreadID: "shared", State: json.RawMessage(fmt.Sprintf(`{"a": %d}`, i))})
	}
	snapWith(t, e.ctx, b, engine.SnapshotInput{ThreadID: "shared", State: json.RawMessage(`{"b": 0}`)})
	plain := snapWith(t, e.ctx, base, engine.SnapshotInput{ThreadID: "shared", State: json.RawMessage(`{"default": 0}`)})
	for _, c := range []struct {
		eng   *engine.Engine
		n     int
		state string
	}{{a, 3, `{"a": 2}`}, {b, 1, `{"b": 0}`}, {base, 1, `{"default": 0}`}, {forTenant(t, base, engine.DefaultTenant), 1, `{"default": 0}`}} {
		head, err := c.eng.Latest(e.ctx, "shared")
		if err != nil {
			t.Fatalf("tenant %q: latest: %v", c.eng.Tenant(), err)
		}
		jsonEqual(t, "head of tenant "+c.eng.Tenant(), head.State, []byte(c.state))
		if n := len(listAll(t, e.ctx, c.eng, "shared", "")); n != c.n {
			t.Errorf("tenant %q lists %d checkpoints, want %d", c.eng.Tenant(), n, c.n)
		}
		if ths := listThreads(t, e.ctx, c.eng); len(ths) != 1 {
			t.Errorf("tenant %q lists %d threads, want 1", c.eng.Tenant(), len(ths))
		}
	}
	if got, err := forTenant(t, base, engine.DefaultTenant).Get(e.ctx, plain.ID); err != nil || got.ID != plain.ID {
		t.Errorf("DefaultTenant reads a checkpoint written with no tenant named: %v", err)
	}
	if _, err := a.Get(e.ctx, plain.ID); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("tenant a reads the default tenant's checkpoint: %v, want ErrNotFound", err)
	}
	aBefore := takeInventory(t, e.ctx, a, "shared")
	if r, err := b.DeleteThreads(e.ctx, "shared"); err != nil || r.Deleted != 1 {
		t.Fatalf("b deletes its thread: %+v, %v", r, err)
	}
	if after := takeInventory(t, e.ctx, a, "shared"); after.dump != aBefore.dump {
		t.Error("b's delete of its thread changed a's thread of the same id")
	}
	if _, err := base.Latest(e.ctx, "shared"); err != nil {
		t.Errorf("b's delete of its thread reached the default tenant's: %v", err)
	}
}

// Bad tenant names are ErrInvalidInput, and write nothing.
func testTenantNamesAreChecked(t *testing.T, e *env) {
	base := e.tenantEngine()
	before := takeInventory(t, e.ctx, base)
	ok := strings.Repeat("t", 255)
	forTenant(t, base, ok)
	forTenant(t, base, "ünïcode tenant/with:punctuation")
	for _, bad := range badTenants {
		got, err := base.ForTenant(bad)
		if !errors.Is(err, engine.ErrInvalidInput) || got != nil {
			t.Errorf("ForTenant(%q) = %v, %v; want nil, ErrInvalidInput", bad, got, err)
		}
	}
	if after := takeInventory(t, e.ctx, base); after.dump != before.dump {
		t.Error("bad tenant names wrote something")
	}
}

// badTenants are names engine.CheckTenant refuses.
var badTenants = []string{"", "a\x00b", "a\x01b", "tab\t", "nl\n", "del\x7f", "c1\u0085", strings.Repeat("t", 256), "bad utf8 \xff"}

// A store's own ForTenant, reached around the Engine (engine.New over
// it), refuses a bad name too: every call fails with ErrInvalidInput and
// writes nothing.
func testTenantStoreRefusesBadNames(t *testing.T, e *env) {
	base := e.tenantEngine()
	ts, ok := base.Store().(engine.TenantStore)
	if !ok {
		t.Fatalf("the %s store does not keep tenants apart", e.h.Name)
	}
	before := takeInventory(t, e.ctx, base)
	for _, bad := range badTenants {
		eng := engine.New(ts.ForTenant(bad), engine.Config{})
		if _, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{}`)}); !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("a store bound to %q writes: %v, want ErrInvalidInput", bad, err)
		}
		if _, err := eng.ListThreads(e.ctx, engine.ThreadListOptions{}); !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("a store bound to %q reads: %v, want ErrInvalidInput", bad, err)
		}
	}
	if after := takeInventory(t, e.ctx, base); after.dump != before.dump {
		t.Error("a store bound to a bad tenant name wrote something")
	}
}
