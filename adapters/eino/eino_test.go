package eino_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cloudwego/eino/compose"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/adapters/eino"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Store is an Eino checkpoint store.
var _ compose.CheckPointStore = (*eino.Store)(nil)

// approvals counts the runs of the approval node, across graphs.
var approvals atomic.Int64

// tripGraph is an agent that plans, waits for a human's approval (an
// interrupt before "approve"), then before booking (an interrupt before
// "book"), compiled anew for every run, as a restarted program would.
func tripGraph(t *testing.T, store compose.CheckPointStore) compose.Runnable[string, string] {
	t.Helper()
	ctx := context.Background()
	g := compose.NewGraph[string, string]()
	step := func(name string) *compose.Lambda {
		return compose.InvokableLambda(func(ctx context.Context, in string) (string, error) {
			if name == "approve" {
				approvals.Add(1)
			}
			return in + " " + name, nil
		})
	}
	for _, n := range []string{"plan", "approve", "book"} {
		if err := g.AddLambdaNode(n, step(n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range [][2]string{{compose.START, "plan"}, {"plan", "approve"}, {"approve", "book"}, {"book", compose.END}} {
		if err := g.AddEdge(e[0], e[1]); err != nil {
			t.Fatal(err)
		}
	}
	r, err := g.Compile(ctx, compose.WithCheckPointStore(store), compose.WithInterruptBeforeNodes([]string{"approve", "book"}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// interruptedBefore returns the nodes a run stopped before.
func interruptedBefore(t *testing.T, err error) []string {
	t.Helper()
	info, ok := compose.ExtractInterruptInfo(err)
	if !ok {
		t.Fatalf("the run did not stop at an interrupt: %v", err)
	}
	return info.BeforeNodes
}

func open(t *testing.T, url string) *engine.Engine {
	t.Helper()
	eng, err := pgcheckpoint.Open(context.Background(), url, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func TestEinoOnPostgres(t *testing.T) { testEino(t, pgtest.NewDB(t).URL) }

func TestEinoOnSQLite(t *testing.T) {
	testEino(t, "sqlite:"+filepath.Join(t.TempDir(), "eino.db"))
}

func testEino(t *testing.T, url string) {
	ctx := context.Background()
	const id = "trip-42"

	// A run stops for approval; its checkpoint is in the database.
	_, err := tripGraph(t, eino.New(open(t, url))).Invoke(ctx, "Lisbon", compose.WithCheckPointID(id))
	if got := interruptedBefore(t, err); len(got) != 1 || got[0] != "approve" {
		t.Fatalf("first run stopped before %v, want approve", got)
	}

	// A new engine and a newly compiled graph resume it: approval given, it
	// stops before booking.
	eng := open(t, url)
	_, err = tripGraph(t, eino.New(eng)).Invoke(ctx, "", compose.WithCheckPointID(id))
	if got := interruptedBefore(t, err); len(got) != 1 || got[0] != "book" {
		t.Fatalf("second run stopped before %v, want book", got)
	}
	history, err := eng.ListCheckpoints(ctx, id, engine.ListOptions{})
	if err != nil || len(history) < 2 {
		t.Fatalf("history: %d checkpoints, %v", len(history), err)
	}
	first := history[len(history)-1]
	cp, err := eng.Get(ctx, first.ID)
	if err != nil || !strings.Contains(string(cp.State), "_eino_checkpoint") {
		t.Fatalf("the checkpoint is not Eino's JSON as state: %.200s %v", cp.State, err)
	}

	// ckpt shows the run's history.
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	if out, err := exec.Command("go", "build", "-o", ckpt, "github.com/pgcheckpoint/pgcheckpoint/cmd/ckpt").CombinedOutput(); err != nil {
		t.Fatalf("build ckpt: %v\n%s", err, out)
	}
	out, err := exec.Command(ckpt, "--database", url, "log", id).CombinedOutput()
	if err != nil || strings.Count(string(out), "eino checkpoint") != len(history) {
		t.Fatalf("ckpt log: %v\n%s", err, out)
	}

	// A rewind to the first checkpoint: Eino resumes from there, running the
	// approval again.
	before := approvals.Load()
	if _, err := eng.Rewind(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	_, err = tripGraph(t, eino.New(eng)).Invoke(ctx, "", compose.WithCheckPointID(id))
	if got := interruptedBefore(t, err); len(got) != 1 || got[0] != "book" || approvals.Load() != before+1 {
		t.Fatalf("after the rewind the run stopped before %v with %d approvals, want book and one more approval", got, approvals.Load()-before)
	}

	// Booking finishes the run.
	out2, err := tripGraph(t, eino.New(eng)).Invoke(ctx, "", compose.WithCheckPointID(id))
	if err != nil || out2 != "Lisbon plan approve book" {
		t.Fatalf("last run: %q %v", out2, err)
	}

	// The deleter removes the thread: the id starts afresh.
	if err := eino.New(eng).Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := eino.New(eng).Get(ctx, id); ok || err != nil {
		t.Fatalf("after delete: found %v, %v", ok, err)
	}
	if _, err := eng.Latest(ctx, id); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// Bytes that are not a JSON object come back exactly, on both stores; so
// do an object shaped like the adapter's own wrapping of such bytes, bytes
// around an object with white space that is not JSON's (which came back as
// the object), and objects that json.Valid takes but no store holds as
// JSON (Set failed with ErrInvalidJSON).
func TestEinoBytesRoundTrip(t *testing.T) {
	ctx := context.Background()
	for name, url := range map[string]string{"sqlite": "sqlite::memory:", "postgres": pgtest.NewDB(t).URL} {
		s := eino.New(open(t, url))
		for _, b := range [][]byte{{0, 1, 2, 255}, []byte(`[1,2]`), []byte(`{"a":`), {},
			[]byte(`{"eino_checkpoint_base64":"aGVsbG8="}`), []byte(` {"eino_checkpoint_base64": "not base64"} `),
			[]byte("\u00a0{\"a\":1}"), []byte("{\"a\":1}\u2028"), []byte("\u0085{}"),
			[]byte("{\"a\":\"\xff\"}"), []byte(`{"a":"\ud800"}`), []byte(`{"a":1e1000000}`)} {
			if err := s.Set(ctx, "raw", b); err != nil {
				t.Fatalf("%s: Set %q: %v", name, b, err)
			}
			got, ok, err := s.Get(ctx, "raw")
			if err != nil || !ok || string(got) != string(b) {
				t.Fatalf("%s: round trip of %q: %q %v %v", name, b, got, ok, err)
			}
		}
	}
}

// A graph whose state holds a map key that is not UTF-8, which Eino's
// default serializer writes as it is: the run stops at its interrupt and
// resumes to what it computes without a store (it failed at the interrupt
// on both stores).
func TestEinoStateTheStoresCannotHoldAsJSON(t *testing.T) {
	ctx := context.Background()
	in := map[string]string{"file\xff.bin": "x"}
	for name, url := range map[string]string{"sqlite": "sqlite::memory:", "postgres": pgtest.NewDB(t).URL} {
		g := compose.NewGraph[map[string]string, string]()
		pass := compose.InvokableLambda(func(_ context.Context, m map[string]string) (map[string]string, error) { return m, nil })
		show := compose.InvokableLambda(func(_ context.Context, m map[string]string) (string, error) { return fmt.Sprintf("%q", m), nil })
		if err := errors.Join(g.AddLambdaNode("a", pass), g.AddLambdaNode("b", show),
			g.AddEdge(compose.START, "a"), g.AddEdge("a", "b"), g.AddEdge("b", compose.END)); err != nil {
			t.Fatal(err)
		}
		r, err := g.Compile(ctx, compose.WithCheckPointStore(eino.New(open(t, url))), compose.WithInterruptBeforeNodes([]string{"b"}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Invoke(ctx, in, compose.WithCheckPointID("k"))
		if got := interruptedBefore(t, err); len(got) != 1 || got[0] != "b" {
			t.Fatalf("%s: stopped before %v, want b", name, got)
		}
		out, err := r.Invoke(ctx, nil, compose.WithCheckPointID("k"))
		if want := fmt.Sprintf("%q", in); err != nil || out != want {
			t.Fatalf("%s: resumed to %q, %v; want %q", name, out, err, want)
		}
	}
}

// An engine that does not write task_boundary checkpoints makes Set fail,
// not report a checkpoint it did not store.
func TestEinoDisabledTrigger(t *testing.T) {
	eng, err := pgcheckpoint.Open(context.Background(), "sqlite::memory:", pgcheckpoint.Options{Migrate: true,
		Config: engine.Config{Triggers: []engine.Trigger{engine.TriggerToolCall}}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if err := eino.New(eng).Set(context.Background(), "x", []byte(`{"a":1}`)); !errors.Is(err, eino.ErrNotStored) {
		t.Fatalf("Set with the trigger disabled: %v, want ErrNotStored", err)
	}
}

// Two tenants run the same graph with the same Eino checkpoint id on one
// SQLite file: each resumes its own run, and neither sees the other's
// checkpoints.
func TestEinoTenantsKeptApart(t *testing.T) {
	ctx := context.Background()
	const id = "trip-42"
	eng := open(t, "sqlite:"+filepath.Join(t.TempDir(), "eino.db"))
	acme, err := eino.NewForTenant(eng, "acme")
	if err != nil {
		t.Fatal(err)
	}
	globex, err := eino.NewForTenant(eng, "globex")
	if err != nil {
		t.Fatal(err)
	}
	// acme's run stops before booking, globex's before approval.
	if _, err := tripGraph(t, acme).Invoke(ctx, "Lisbon", compose.WithCheckPointID(id)); interruptedBefore(t, err)[0] != "approve" {
		t.Fatalf("acme's first run: %v", err)
	}
	if _, err := tripGraph(t, acme).Invoke(ctx, "", compose.WithCheckPointID(id)); interruptedBefore(t, err)[0] != "book" {
		t.Fatalf("acme's second run: %v", err)
	}
	if _, err := tripGraph(t, globex).Invoke(ctx, "Oslo", compose.WithCheckPointID(id)); interruptedBefore(t, err)[0] != "approve" {
		t.Fatalf("globex's first run: %v (it must start afresh, not resume acme's)", err)
	}
	// Each finishes its own trip.
	if out, err := tripGraph(t, acme).Invoke(ctx, "", compose.WithCheckPointID(id)); err != nil || out != "Lisbon plan approve book" {
		t.Fatalf("acme's last run: %q %v", out, err)
	}
	if _, err := tripGraph(t, globex).Invoke(ctx, "", compose.WithCheckPointID(id)); interruptedBefore(t, err)[0] != "book" {
		t.Fatalf("globex's second run: %v", err)
	}
	if out, err := tripGraph(t, globex).Invoke(ctx, "", compose.WithCheckPointID(id)); err != nil || out != "Oslo plan approve book" {
		t.Fatalf("globex's last run: %q %v", out, err)
	}
	// The default tenant has no such thread; globex's delete leaves acme's.
	if _, ok, err := eino.New(eng).Get(ctx, id); ok || err != nil {
		t.Fatalf("the default tenant sees the id: %v %v", ok, err)
	}
	if err := globex.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := acme.Get(ctx, id); !ok || err != nil {
		t.Fatalf("acme's checkpoint after globex's delete: %v %v", ok, err)
	}
	if _, err := eino.NewForTenant(eng, "bad\x00name"); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("a bad tenant name: %v, want ErrInvalidInput", err)
	}
}
