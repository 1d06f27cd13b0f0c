package enginetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// checkLine checks that the root namespace of a thread written by line()
// holds exactly the checkpoints want (indexes into ids), in write order,
// and that each reads back whole; and that every checkpoint of the
// database reads back.
func (e *env) checkLine(thread string, ids []uuid.UUID, want []int) {
	e.t.Helper()
	var wantIDs []uuid.UUID
	for _, i := range want {
		wantIDs = append(wantIDs, ids[i])
	}
	if got := oldestFirst(listAll(e.t, e.ctx, e.eng, thread, "")); !slices.Equal(got, wantIDs) {
		var gotIdx []int
		for _, id := range got {
			gotIdx = append(gotIdx, slices.Index(ids, id))
		}
		e.t.Fatalf("thread %s keeps %d checkpoints %v, want %d: %v", thread, len(got), gotIdx, len(wantIDs), want)
	}
	for _, i := range want {
		cp := e.get(ids[i])
		msgs, state := lineContent(i)
		jsonEqual(e.t, fmt.Sprintf("messages of checkpoint %d of %s", i, thread), cp.Messages, msgs)
		jsonEqual(e.t, fmt.Sprintf("state of checkpoint %d of %s", i, thread), cp.State, state)
	}
	checkReadable(e.t, e.ctx, e.eng)
}

func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// KeepAge's test writes its first ten checkpoints this long before the
// rest and keeps what is younger than keepAgeLimit.
const (
	keepAgeGap   = 3 * time.Second
	keepAgeLimit = keepAgeGap
)

func testRetentionPolicies(t *testing.T, e *env) {
	milestones := []int{0, 19}
	for i := 1; i <= 3; i++ {
		milestones = append(milestones, int(math.Round(float64(i)*19/4)))
	}
	slices.Sort(milestones)
	for _, tc := range []struct {
		policy engine.Policy
		keep   []int
	}{
		{engine.KeepAll(), span(0, 20)},
		{engine.KeepLastN(5), span(15, 20)},
		{engine.KeepLastN(1), []int{19}},
		{engine.KeepLastN(50), span(0, 20)},
		{engine.KeepMilestones(3), milestones},
		{engine.KeepMilestones(0), []int{0, 19}},
		{engine.KeepMilestones(30), span(0, 20)},
		{engine.KeepAge(keepAgeLimit), span(10, 20)},
		{engine.KeepAge(time.Hour), span(0, 20)},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, e.h)
			other := e.line("other", 5)
			sub := e.snap(engine.SnapshotInput{ThreadID: "run", Namespace: "sub"})
			ids := e.line("run", 10)
			timed := tc.policy.Name() == "keep_age" && tc.policy.Age() == keepAgeLimit
			if timed {
				time.Sleep(keepAgeGap)
			}
			ids = append(ids, writeLineFrom(t, e, "run", 10, 20)...)
			deltaCount := 0
			for _, c := range listAll(t, e.ctx, e.eng, "run", "") {
				if c.Format == "delta" {
					deltaCount++
				}
			}
			if deltaCount < 10 {
				t.Fatalf("%d delta checkpoints; the test needs delta chains", deltaCount)
			}
			res, err := e.eng.PruneThreads(e.ctx, tc.policy, "run")
			if err != nil {
				t.Fatal(err)
			}
			if res.Deleted != int64(20-len(tc.keep)) || len(res.IDs) != 20-len(tc.keep) {
				t.Fatalf("%d deleted, %d listed, want %d: %+v", res.Deleted, len(res.IDs), 20-len(tc.keep), res)
			}
			for _, d := range res.IDs {
				if i := slices.Index(ids, d.ID); i < 0 || slices.Contains(tc.keep, i) || d.Step != int64(i+1) || d.ThreadID != "run" || d.Namespace != "" {
					t.Fatalf("deleted %+v, which the policy keeps", d)
				}
			}
			e.checkLine("run", ids, tc.keep)
			e.checkLine("other", other, span(0, 5))
			if got, err := e.eng.LatestIn(e.ctx, "run", "sub"); err != nil || got.ID != sub.ID {
				t.Fatalf("the sub-graph's only checkpoint: %v", err)
			}
			// The thread goes on from its head.
			if res := e.snap(engine.SnapshotInput{ThreadID: "run"}); res.ParentID != ids[19] || res.Step != 21 {
				t.Fatalf("write after retention: %+v", res)
			}
			// Applying it again deletes only what the new write makes
			// surplus (KeepAge's kept ten may have aged meanwhile).
			again, err := e.eng.PruneThreads(e.ctx, tc.policy, "run")
			if err != nil || (again.Deleted > 1 && !timed) {
				t.Fatalf("second application: %+v %v", again, err)
			}
		})
	}
}

// writeLineFrom continues a line() from checkpoint from to checkpoint to.
func writeLineFrom(t testing.TB, e *env, thread string, from, to int) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for i := from; i < to; i++ {
		msgs, state := lineContent(i)
		ids = append(ids, snapWith(t, e.ctx, e.eng, engine.SnapshotInput{ThreadID: thread, Messages: msgs, State: state}).ID)
	}
	return ids
}

// Whatever the policy, retention keeps the head (the rewound-to checkpoint)
// and a checkpoint a branch was forked from while the branch exists.
func testRetentionKeepsHeadsAndBranchSources(t *testing.T, e *env) {
	ids := e.line("run", 20)
	other := e.line("other", 3)
	if _, err := e.eng.Rewind(e.ctx, ids[3]); err != nil {
		t.Fatal(err)
	}
	br, err := e.eng.Branch(e.ctx, ids[7], "side")
	if err != nil {
		t.Fatal(err)
	}
	apply := func(p engine.Policy, keep []int) {
		t.Helper()
		if _, err := e.eng.PruneThreads(e.ctx, p, "run"); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		e.checkLine("run", ids, keep)
		if head := e.head("run"); head.ID != ids[3] {
			t.Fatalf("%s: head is %s, want the rewound-to %s", p, head.ID, ids[3])
		}
	}
	apply(engine.KeepLastN(2), []int{3, 7, 18, 19})
	if got := oldestFirst(listAll(t, e.ctx, e.eng, br.ThreadID, "")); len(got) != 1 || got[0] != br.CheckpointID {
		t.Fatalf("branch thread keeps %v", got)
	}
	apply(engine.KeepMilestones(0), []int{3, 7, 19})
	apply(engine.KeepAge(time.Hour), []int{3, 7, 19})
	apply(engine.KeepAge(time.Millisecond), []int{3, 7})
	// A branch's own retention keeps its head, and its source.
	if _, err := e.eng.PruneThreads(e.ctx, engine.KeepAge(time.Millisecond), br.ThreadID); err != nil {
		t.Fatal(err)
	}
	if e.head(br.ThreadID).ID != br.CheckpointID || e.get(br.CheckpointID).ParentID != ids[7] {
		t.Fatal("the branch lost its head")
	}
	e.checkLine("other", other, span(0, 3))
	// Once the branch is gone, its source is just another old checkpoint.
	if _, err := e.eng.DeleteThreads(e.ctx, br.ThreadID); err != nil {
		t.Fatal(err)
	}
	apply(engine.KeepLastN(1), []int{3, 7})
	apply(engine.KeepAge(time.Millisecond), []int{3})
	// The head is the only checkpoint: the thread takes writes from it.
	if res := e.snap(engine.SnapshotInput{ThreadID: "run"}); res.ParentID != ids[3] || res.Step != 5 {
		t.Fatalf("write after retention: %+v", res)
	}
	e.checkLine("other", other, span(0, 3))
}

func testRetentionAfterEachSnapshot(t *testing.T, e *env) {
	eng := e.open(engine.Config{Retention: engine.KeepLastN(3), DeltaMinBytes: -1})
	ids := writeLine(t, e, eng, "run", 10)
	e.checkLine("run", ids, span(7, 10))
	// A write after a rewind to the oldest kept checkpoint makes that one
	// surplus: the new head, a child of a deleted checkpoint, still reads
	// back whole.
	if _, err := e.eng.Rewind(e.ctx, ids[7]); err != nil {
		t.Fatal(err)
	}
	msgs, state := lineContent(8)
	res := snapWith(t, e.ctx, eng, engine.SnapshotInput{ThreadID: "run", Messages: msgs, State: state})
	if res.ParentID != ids[7] {
		t.Fatalf("write after the rewind: %+v", res)
	}
	if left := oldestFirst(listAll(t, e.ctx, e.eng, "run", "")); !slices.Equal(left, []uuid.UUID{ids[8], ids[9], res.ID}) {
		t.Fatalf("after a rewind and a write: %v", left)
	}
	head := e.head("run")
	jsonEqual(t, "new head's messages", head.Messages, msgs)
	jsonEqual(t, "new head's state", head.State, state)
	checkReadable(t, e.ctx, e.eng)
	milestones := e.open(engine.Config{Retention: engine.KeepMilestones(1)})
	writeLine(t, e, milestones, "ms", 9)
	if got := listAll(t, e.ctx, e.eng, "ms", ""); len(got) != 3 {
		t.Fatalf("KeepMilestones(1) after each snapshot keeps %d, want 3", len(got))
	}

	before := e.inventory()
	bad := e.open(engine.Config{Retention: engine.KeepLastN(0)})
	_, err := bad.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "run"})
	if !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("snapshot with a bad Config.Retention: %v, want ErrInvalidInput", err)
	}
	e.unchanged("a refused snapshot", before)
}

// KeepMilestones(n) keeps, of a thread of total checkpoints, the first,
// the newest and 1 + round(i*(total-1)/(n+1)) for i from 1 to n (its doc),
// on both stores, for every total up to 24 and every n up to total+2: the
// previews' deletions are the rest. A policy of 2,147,483,647 milestones
// keeps everything at once (the stores counted to n, for each checkpoint
// on Postgres: minutes of CPU).
func testMilestonesOfEverySize(t *testing.T, e *env) {
	for total := 1; total <= 24; total++ {
		th := fmt.Sprintf("m%d", total)
		mine := e.line(th, total)
		for n := 0; n <= total+2; n++ {
			keep := map[int]bool{0: true, total - 1: true}
			for i := 1; i <= n; i++ {
				keep[int(math.Round(float64(i)*float64(total-1)/float64(n+1)))] = true
			}
			res, err := e.eng.PreviewPrune(e.ctx, engine.KeepMilestones(n), th)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, d := range res.IDs {
				got = append(got, slices.Index(mine, d.ID))
			}
			var want []int
			for pos := range total {
				if !keep[pos] {
					want = append(want, pos)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("KeepMilestones(%d) of %d checkpoints deletes positions %v, want %v", n, total, got, want)
			}
		}
	}
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	if res, err := e.eng.PreviewPrune(ctx, engine.KeepMilestones(math.MaxInt32), "m24"); err != nil || res.Deleted != 0 {
		t.Fatalf("KeepMilestones(2,147,483,647): %+v, %v; want nothing deleted, at once", res, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("KeepMilestones(2,147,483,647) took %s, past its context's deadline", took)
	}
}

func testRetentionBadInput(t *testing.T, e *env) {
	e.line("run", 5)
	before := e.inventory()
	for _, p := range []engine.Policy{engine.KeepLastN(0), engine.KeepLastN(-2), engine.KeepAge(0), engine.KeepAge(-time.Hour), engine.KeepMilestones(-1), engine.KeepLastN(math.MaxInt32 + 1)} {
		if _, err := e.eng.PruneThreads(e.ctx, p, "run"); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("%s: %v, want ErrInvalidInput", p, err)
		}
		if _, err := e.eng.Sweep(e.ctx, p, engine.SweepOptions{}); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("sweep %s: %v, want ErrInvalidInput", p, err)
		}
	}
	if _, err := e.eng.PruneThreads(e.ctx, engine.KeepLastN(1), ""); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("empty thread id: %v", err)
	}
	// A batch past a page of threads too (Postgres swept one thread of a
	// batch of 2^32+1 and said it was done).
	for _, o := range []engine.SweepOptions{{BatchSize: -1}, {BatchSize: engine.MaxListLimit + 1}, {BatchSize: 1<<32 + 1},
		{TimeBudget: -time.Second}, {Pause: -time.Second}, {After: "a\x00"}, {After: "a\xff"}} {
		if _, err := e.eng.Sweep(e.ctx, engine.KeepLastN(1), o); !errors.Is(err, engine.ErrInvalidInput) || errors.Is(err, engine.ErrInvalidJSON) {
			t.Fatalf("sweep options %+v: %v, want ErrInvalidInput", o, err)
		}
		if _, err := e.eng.PreviewSweep(e.ctx, engine.KeepLastN(1), o); !errors.Is(err, engine.ErrInvalidInput) || errors.Is(err, engine.ErrInvalidJSON) {
			t.Fatalf("preview sweep options %+v: %v, want ErrInvalidInput", o, err)
		}
	}
	for _, p := range []engine.Policy{engine.KeepAll(), engine.KeepLastN(2), engine.KeepMilestones(1)} {
		if err := e.eng.SetThreadExpiry(e.ctx, "run", time.Now(), p); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("expiry keeping %s: %v", p, err)
		}
	}
	if err := e.eng.SetThreadExpiry(e.ctx, "", time.Now(), engine.KeepNone()); !errors.Is(err, engine.ErrInvalidInput) {
		t.Fatalf("expiry of an empty thread id: %v", err)
	}
	for _, at := range []time.Time{time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if err := e.eng.SetThreadExpiry(e.ctx, "run", at, engine.KeepNone()); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("expiry at %v: %v, want ErrInvalidInput", at, err)
		}
	}
	// Keep-all and an unknown thread delete nothing.
	if d, err := e.eng.PruneThreads(e.ctx, engine.KeepAll(), "run"); err != nil || d.Deleted != 0 || d.IDs != nil {
		t.Fatalf("keep all: %v %v", d, err)
	}
	if d, err := e.eng.PruneThreads(e.ctx, engine.KeepLastN(1), "nobody"); err != nil || d.Deleted != 0 || len(d.IDs) != 0 {
		t.Fatalf("unknown thread: %v %v", d, err)
	}
	e.unchanged("refused retention", before)
	for _, s := range []string{"keep_last_n(0)", "keep_last_n:x", "keep_forever", "keep_age(-1h)", "keep_all(3)"} {
		if _, err := engine.ParsePolicy(s); !errors.Is(err, engine.ErrInvalidInput) {
			t.Fatalf("parse %q: %v", s, err)
		}
	}
}

func testSweep(t *testing.T, e *env) {
	lines := map[string][]uuid.UUID{}
	for i := range 13 {
		thread := fmt.Sprintf("t%02d", i)
		lines[thread] = e.line(thread, 6)
	}
	e.snap(engine.SnapshotInput{ThreadID: "t03", Namespace: "sub"})
	e.snap(engine.SnapshotInput{ThreadID: "t04", Namespace: "sub"})
	e.snap(engine.SnapshotInput{ThreadID: "t04", Namespace: "sub"})
	past, future := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	for thread, at := range map[string]time.Time{"t03": past, "t04": past, "t05": future, "t06": past} {
		keep := engine.KeepNone()
		if thread == "t04" {
			keep = engine.KeepLatest()
		}
		if err := e.eng.SetThreadExpiry(e.ctx, thread, at, keep); err != nil {
			t.Fatal(err)
		}
	}
	// A zero time clears an expiry.
	if err := e.eng.SetThreadExpiry(e.ctx, "t06", time.Time{}, engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	before := e.inventory("nope")
	if err := e.eng.SetThreadExpiry(e.ctx, "nope", past, engine.KeepNone()); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("expiry of an unknown thread: %v", err)
	}
	e.unchanged("the expiry of an unknown thread", before, "nope")

	// A time budget stops after a batch and says where to go on (one
	// nanosecond: any batch spends it, however fast the machine).
	var progress []engine.SweepResult
	res, err := e.eng.Sweep(e.ctx, engine.KeepLastN(2), engine.SweepOptions{BatchSize: 4, TimeBudget: time.Nanosecond,
		Progress: func(r engine.SweepResult) { progress = append(progress, r) }})
	if err != nil || res.Done || res.Batches != 1 || res.Next != "t03" || res.Expired != 1 || res.Threads != 4 || res.Failed != 0 {
		t.Fatalf("budgeted sweep: %+v %v", res, err)
	}
	if len(progress) != 1 || progress[0].Threads != 4 {
		t.Fatalf("progress: %+v", progress)
	}
	res, err = e.eng.Sweep(e.ctx, engine.KeepLastN(2), engine.SweepOptions{BatchSize: 4, After: res.Next})
	if err != nil || !res.Done || res.Threads != 9 || res.Expired != 1 || res.Batches != 3 || res.Next != "" {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	for thread, ids := range lines {
		switch thread {
		case "t03":
			if left := listAll(t, e.ctx, e.eng, thread, ""); len(left) != 0 {
				t.Fatalf("expired thread %s keeps %d", thread, len(left))
			}
			if _, err := e.eng.Export(e.ctx, thread, new(strings.Builder)); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("expired thread %s: export %v, want ErrNotFound: it is deleted whole", thread, err)
			}
		case "t04":
			e.checkLine(thread, ids, []int{5})
			if sub := listAll(t, e.ctx, e.eng, thread, "sub"); len(sub) != 1 {
				t.Fatalf("keep-latest expiry keeps %d checkpoints of the sub-graph, want its head", len(sub))
			}
		default:
			e.checkLine(thread, ids, []int{4, 5})
		}
	}
	// A second sweep finds nothing more to do, and expiry is not applied
	// twice.
	res, err = e.eng.Sweep(e.ctx, engine.KeepLastN(2), engine.SweepOptions{})
	if err != nil || !res.Done || res.Deleted != 0 || res.Expired != 0 || res.Threads != 12 {
		t.Fatalf("second sweep: %+v %v", res, err)
	}
	// Keep-all sweeps apply expiry only.
	if err := e.eng.SetThreadExpiry(e.ctx, "t07", past, engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	res, err = e.eng.Sweep(e.ctx, engine.KeepAll(), engine.SweepOptions{BatchSize: 100})
	if err != nil || res.Expired != 1 || res.Deleted != 2 || res.Batches != 1 {
		t.Fatalf("keep-all sweep: %+v %v", res, err)
	}
	if _, err := e.eng.Latest(e.ctx, "t07"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("t07 after its expiry: %v", err)
	}
	e.checkLine("t00", lines["t00"], []int{4, 5})
}

// Branches made from the newest checkpoints of threads that writers, a
// sweep and prunes work on at once: no policy deletes a live branch's
// source, whichever commits first. A branch whose source went first fails
// with ErrNotFound; every branch that exists names a source that does.
func testSweepsKeepSourcesOfBranchesMadeMeanwhile(t *testing.T, e *env) {
	threads := []string{"ta", "tb", "tc"}
	ctx := e.ctx
	// 1.5 s, and on a busy machine until 20 branches are made (30 s at most).
	const enough = 20
	start := time.Now()
	errs := make(chan error, 8)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		written  = map[string][]uuid.UUID{}
		branched int
	)
	more := func() bool {
		mu.Lock()
		defer mu.Unlock()
		since := time.Since(start)
		return since < 1500*time.Millisecond || branched < enough && since < 30*time.Second
	}
	loop := func(seed uint64, f func(r *rand.Rand) error) {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, 7))
			for more() {
				if err := f(r); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	loop(1, func(r *rand.Rand) error {
		thread := threads[r.IntN(len(threads))]
		res, err := e.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread,
			Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"%d"}]`, r.IntN(1000)))})
		if err == nil {
			mu.Lock()
			written[thread] = append(written[thread], res.ID)
			mu.Unlock()
		}
		return err
	})
	loop(2, func(r *rand.Rand) error {
		mu.Lock()
		ids := written[threads[r.IntN(len(threads))]]
		var from uuid.UUID
		if len(ids) > 1 {
			// One of the newest but the head: what KeepLastN(1) deletes next.
			from = ids[max(0, len(ids)-2-r.IntN(2))]
		}
		mu.Unlock()
		if from == uuid.Nil {
			return nil
		}
		_, err := e.eng.Branch(ctx, from, "b")
		switch {
		case err == nil:
			mu.Lock()
			branched++
			mu.Unlock()
		case errors.Is(err, engine.ErrNotFound):
		default:
			return err
		}
		return nil
	})
	loop(3, func(*rand.Rand) error {
		_, err := e.eng.Sweep(ctx, engine.KeepLastN(1), engine.SweepOptions{BatchSize: 2})
		return err
	})
	loop(4, func(r *rand.Rand) error {
		_, err := e.eng.PruneThreads(ctx, engine.KeepLastN(1), threads[r.IntN(len(threads))])
		return err
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent call failed: %v", err)
	}
	if branched < enough {
		t.Fatalf("only %d branches made in %s", branched, time.Since(start).Round(time.Millisecond))
	}
	sources := 0
	for _, thread := range threads {
		bs, err := e.eng.Branches(ctx, thread)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			sources++
			if _, err := e.eng.Get(ctx, b.FromID); err != nil {
				t.Errorf("branch %q of %q: its source %s: %v", b.ThreadID, thread, b.FromID, err)
			}
		}
	}
	checkReadable(t, e.ctx, e.eng)
	t.Logf("%d branches made, %d found with their sources", branched, sources)
}

// Writers, sweeps of several threads, deletes by run id across threads and
// prunes of thread pairs run at once: no deadlock, no error, and afterwards
// every checkpoint reads back exactly as written.
func testDeletesAndSweepsRaceWriters(t *testing.T, e *env) {
	threads := []string{"ta", "tb", "tc", "td", "te", "tf"}
	// Each call runs to its end: a call cut off by a context deadline can
	// still commit on the server after the client has given up, and a
	// sweep that did so would delete under the checks below.
	ctx := e.ctx
	deadline := time.Now().Add(2 * time.Second)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	loop := func(seed uint64, f func(r *rand.Rand) error) {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, 9))
			for time.Now().Before(deadline) {
				if err := f(r); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	msgs := map[string][]string{}
	sent := map[uuid.UUID]json.RawMessage{}
	var mu sync.Mutex
	for w := range 2 {
		loop(uint64(w), func(r *rand.Rand) error {
			thread := threads[r.IntN(len(threads))]
			mu.Lock()
			msgs[thread] = append(msgs[thread], fmt.Sprintf(`{"role":"user","content":"%d"}`, r.IntN(1000)))
			m := json.RawMessage("[" + strings.Join(msgs[thread], ",") + "]")
			mu.Unlock()
			res, err := e.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Messages: m,
				Metadata: json.RawMessage(fmt.Sprintf(`{"run_id": "r%d"}`, r.IntN(4)))})
			if err == nil {
				mu.Lock()
				sent[res.ID] = m
				mu.Unlock()
			}
			return err
		})
	}
	loop(10, func(r *rand.Rand) error {
		_, err := e.eng.Sweep(ctx, engine.KeepLastN(1+r.IntN(4)), engine.SweepOptions{BatchSize: 3})
		return err
	})
	loop(11, func(r *rand.Rand) error {
		_, err := e.eng.DeleteCheckpoints(ctx, engine.ForRuns(fmt.Sprintf("r%d", r.IntN(4))))
		return err
	})
	loop(12, func(r *rand.Rand) error {
		_, err := e.eng.PruneThreads(ctx, engine.KeepLatest(), threads[r.IntN(6)], threads[r.IntN(6)])
		return err
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent call failed: %v", err)
	}
	inv := checkReadable(t, e.ctx, e.eng)
	if len(sent) < 20 {
		t.Fatalf("only %d snapshots written in 2 s", len(sent))
	}
	for id, c := range inv.checkpoints {
		if m, ok := sent[id]; ok {
			jsonEqual(t, "messages of "+id.String(), c.Messages, m)
		}
	}
	for _, thread := range threads {
		e.snap(engine.SnapshotInput{ThreadID: thread})
	}
	t.Logf("%d snapshots written, %d checkpoints left", len(sent), len(inv.checkpoints))
}

// In a sweep's batch, expiries apply before the policy, on both stores: a
// branch that expires (KeepNone) no longer protects its source from the
// same batch's policy, whichever of the two threads comes first in thread
// order (a branch's id sorts after its source's).
func testSweepExpiresBeforeItsPolicy(t *testing.T, e *env) {
	src := e.line("src", 4)
	br, err := e.eng.Branch(e.ctx, src[0], "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.eng.SetThreadExpiry(e.ctx, br.ThreadID, time.Now().Add(-time.Minute), engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	res, err := e.eng.Sweep(e.ctx, engine.KeepLastN(1), engine.SweepOptions{BatchSize: 10})
	if err != nil || res.Expired != 1 || res.Threads != 2 {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	left, err := e.eng.ListCheckpoints(e.ctx, "src", engine.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].ID != src[3] {
		t.Errorf("the source after its branch expired in the same batch keeps %d checkpoints, want its head alone", len(left))
	}
}
