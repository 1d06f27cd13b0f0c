package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/dburl"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// The demo's agent plans a trip. Its "LLM" and tools are scripted, so every
// run tells the same story; only ids and times differ.

const demoThread = "demo-trip"

type demoMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type demoOffer struct {
	Name string `json:"name"`
	EUR  int    `json:"eur"`
}

type demoState struct {
	Goal   string     `json:"goal"`
	Plan   []string   `json:"plan"`
	Flight *demoOffer `json:"flight,omitempty"`
	Hotel  *demoOffer `json:"hotel,omitempty"`
	Booked string     `json:"booked,omitempty"`
}

// demoTools are the scripted tools: each returns the cheapest offer.
var demoTools = map[string]demoOffer{
	"search_flights": {Name: "TP1234 BER-LIS", EUR: 320},
	"search_hotels":  {Name: "Hotel Alfama, 3 nights", EUR: 450},
}

// demoAgent is the agent's memory: what a real agent keeps between steps.
type demoAgent struct {
	eng      *engine.Engine
	w        io.Writer
	thread   string
	messages []demoMessage
	state    demoState
	tools    map[string]demoOffer
}

var errSimulatedCrash = errors.New("simulated crash")

// snapshot writes the agent's memory as the next checkpoint and prints it.
func (a *demoAgent) snapshot(ctx context.Context, trigger engine.Trigger, next string) (engine.SnapshotResult, error) {
	msgs, _ := json.Marshal(a.messages)
	state, _ := json.Marshal(a.state)
	tools, _ := json.Marshal(a.tools)
	res, err := a.eng.Snapshot(ctx, engine.SnapshotInput{
		ThreadID: a.thread, Trigger: trigger, Messages: msgs, State: state, ToolResults: tools, NextNode: next,
	})
	if err != nil {
		return res, err
	}
	last := ""
	if len(a.messages) > 0 {
		m := a.messages[len(a.messages)-1]
		last = "[" + m.Role + "] " + m.Content
	}
	fmt.Fprintf(a.w, "  step %-3d %-12s %s\n", res.Step, trigger, oneLine(last, 60))
	return res, nil
}

// load replaces the agent's memory with a checkpoint's content.
func (a *demoAgent) load(cp *engine.Checkpoint) error {
	a.messages, a.state, a.tools = nil, demoState{}, map[string]demoOffer{}
	if err := json.Unmarshal(cp.Messages, &a.messages); err != nil {
		return err
	}
	if err := json.Unmarshal(cp.State, &a.state); err != nil {
		return err
	}
	// Tool results also hold the booking tool's output: keep the offers.
	var tools map[string]json.RawMessage
	if err := json.Unmarshal(cp.ToolResults, &tools); err != nil {
		return err
	}
	for k, v := range tools {
		var o demoOffer
		if json.Unmarshal(v, &o) == nil && o.Name != "" {
			a.tools[k] = o
		}
	}
	return nil
}

// searchStep runs the two search tasks after the head. crashAfterFirst
// makes the process "die" once the first task's result is saved.
func (a *demoAgent) searchStep(ctx context.Context, done map[string][]engine.PendingWrite, crashAfterFirst bool) error {
	head, err := a.eng.Latest(ctx, a.thread)
	if err != nil {
		return err
	}
	for _, task := range []string{"search_flights", "search_hotels"} {
		if w, ok := done[task]; ok {
			var o demoOffer
			if err := json.Unmarshal(w[0].Value, &o); err != nil {
				return err
			}
			a.tools[task] = o
			fmt.Fprintf(a.w, "  task     %-14s skipped: its result is a pending write of step %d\n", task, head.Step)
			continue
		}
		o := demoTools[task]
		val, _ := json.Marshal(o)
		if _, err := a.eng.PutWrites(ctx, head.ID, task, []engine.Write{{Channel: "offers", Value: val}}); err != nil {
			return err
		}
		a.tools[task] = o
		fmt.Fprintf(a.w, "  task     %-14s done: %s, %d EUR (saved as a pending write)\n", task, o.Name, o.EUR)
		if crashAfterFirst {
			fmt.Fprintf(a.w, "  CRASH    the process dies before the step's checkpoint is written\n")
			return errSimulatedCrash
		}
	}
	f, h := a.tools["search_flights"], a.tools["search_hotels"]
	a.state.Flight, a.state.Hotel = &f, &h
	a.messages = append(a.messages, demoMessage{"tool", fmt.Sprintf("flight %s %d EUR; hotel %s %d EUR", f.Name, f.EUR, h.Name, h.EUR)})
	_, err = a.snapshot(ctx, engine.TriggerToolCall, "decide")
	return err
}

type demoBooking struct {
	Flight string `json:"flight"`
	Hotel  string `json:"hotel"`
	EUR    int    `json:"eur"`
}

// book calls the booking tool through WrapTool: a checkpoint before the
// call and one after it, with the whole result.
func (a *demoAgent) book(ctx context.Context) error {
	tool := engine.WrapTool(a.eng, a.thread, "book", func(_ context.Context, b demoBooking) (string, error) {
		return fmt.Sprintf("confirmed: %s + %s, %d EUR", b.Flight, b.Hotel, b.EUR), nil
	})
	before := a.eng.SnapshotFailures()
	conf, err := tool(ctx, demoBooking{a.state.Flight.Name, a.state.Hotel.Name, a.state.Flight.EUR + a.state.Hotel.EUR})
	if err != nil {
		return err
	}
	if a.eng.SnapshotFailures() != before {
		return errors.New("the booking's checkpoints failed (see the log above)")
	}
	head, err := a.eng.Latest(ctx, a.thread)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.w, "  step %-3s %-12s tool book: a checkpoint before and after the call (WrapTool)\n", fmt.Sprintf("%d-%d", head.Step-1, head.Step), engine.TriggerToolCall)
	fmt.Fprintf(a.w, "           %-12s %s\n", "", conf)
	return a.load(head)
}

func runDemo(ctx context.Context, c *cli, _ []string) error {
	w := c.stdout
	fmt.Fprintln(w, "pgcheckpoint demo: a scripted travel agent (no network, no LLM) that checkpoints every step")
	fmt.Fprintln(w)
	dbURL := c.dbURL
	if dbURL == "" {
		u, cleanup, err := demoDatabase(ctx, w, c.container)
		if err != nil {
			return err
		}
		defer cleanup()
		dbURL = u
	} else if c.container {
		return usageError{"demo: --container and --database exclude each other"}
	}
	fmt.Fprintf(w, "database  %s\n", dburl.Redact(dbURL))
	kind, _, err := pgcheckpoint.ParseURL(dbURL)
	if err != nil {
		return usageError{err.Error()}
	}
	eng, err := pgcheckpoint.Open(ctx, dbURL, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		return err
	}
	defer eng.Close()
	if c.tenant != "" {
		if eng, err = eng.ForTenant(c.tenant); err != nil {
			return err
		}
	}
	latest := schema.Latest()
	if kind == pgcheckpoint.KindSQLite {
		latest = sqlite.LatestVersion()
	}
	fmt.Fprintf(w, "schema    migrated: version %d of %d\n", latest, latest)

	// Start clean: remove what an earlier demo left.
	branches, err := eng.Branches(ctx, demoThread)
	if err != nil {
		return err
	}
	var removed int64
	for _, b := range branches {
		del, err := eng.DeleteThreads(ctx, b.ThreadID)
		if err != nil {
			return err
		}
		removed += del.Deleted
	}
	del, err := eng.DeleteThreads(ctx, demoThread)
	if err != nil {
		return err
	}
	removed += del.Deleted
	fmt.Fprintf(w, "thread    %s", demoThread)
	if removed > 0 {
		fmt.Fprintf(w, " (deleted %d checkpoints of an earlier demo first)", removed)
	}
	fmt.Fprintln(w)

	// Run 1: plan, then crash in the middle of the search step.
	fmt.Fprintln(w, "\nrun 1")
	a := &demoAgent{eng: eng, w: w, thread: demoThread, tools: map[string]demoOffer{}}
	a.state = demoState{Goal: "3 days in Lisbon under 900 EUR"}
	a.messages = []demoMessage{{"user", "Plan 3 days in Lisbon for me, under 900 EUR."}}
	if _, err := a.snapshot(ctx, engine.TriggerStateChange, "plan"); err != nil {
		return err
	}
	a.state.Plan = []string{"search_flights", "search_hotels", "book"}
	a.messages = append(a.messages, demoMessage{"assistant", "I will search flights and hotels, then book the cheapest."})
	if _, err := a.snapshot(ctx, engine.TriggerLLMCall, "search"); err != nil {
		return err
	}
	if err := a.searchStep(ctx, nil, true); !errors.Is(err, errSimulatedCrash) {
		return fmt.Errorf("run 1 should have crashed: %v", err)
	}

	// Run 2: a new agent with an empty memory resumes from the database.
	fmt.Fprintln(w, "\nrun 2: a fresh process resumes from the database")
	a = &demoAgent{eng: eng, w: w, thread: demoThread}
	r, err := eng.Resume(ctx, demoThread)
	if err != nil {
		return err
	}
	if err := a.load(r.Checkpoint); err != nil {
		return err
	}
	fmt.Fprintf(w, "  resume   head is step %d (next: %s); finished tasks: %s\n", r.Step, r.NextNode, strings.Join(sortedTasks(r.Done), ", "))
	if err := a.searchStep(ctx, r.Done, false); err != nil {
		return err
	}
	total := a.state.Flight.EUR + a.state.Hotel.EUR
	a.messages = append(a.messages, demoMessage{"assistant", fmt.Sprintf("Flight %d + hotel %d = %d EUR, under budget. Booking.", a.state.Flight.EUR, a.state.Hotel.EUR, total)})
	decision, err := a.snapshot(ctx, engine.TriggerLLMCall, "book")
	if err != nil {
		return err
	}
	if err := a.book(ctx); err != nil {
		return err
	}

	// Time travel: back to the decision, try a cheaper hotel on a branch,
	// merge it, prune the branch.
	fmt.Fprintln(w, "\ntime travel: the user asks for a cheaper hotel")
	rw, err := eng.Rewind(ctx, decision.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  rewind   to step %d: %d steps back; nothing deleted\n", rw.Checkpoint.Step, rw.StepsBack)
	br, err := eng.Branch(ctx, decision.ID, "hostel")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  branch   %s starts at step %d\n", br.ThreadID, br.Step)
	b := &demoAgent{eng: eng, w: w, thread: br.ThreadID}
	if err := b.load(rw.Checkpoint); err != nil {
		return err
	}
	b.state.Hotel = &demoOffer{Name: "Hostel Baixa, 3 nights", EUR: 150}
	b.messages = append(b.messages, demoMessage{"assistant", fmt.Sprintf("Switching to %s: total %d EUR.", b.state.Hotel.Name, b.state.Flight.EUR+b.state.Hotel.EUR)})
	if _, err := b.snapshot(ctx, engine.TriggerLLMCall, "book"); err != nil {
		return err
	}
	if err := b.book(ctx); err != nil {
		return err
	}
	m, err := eng.MergeBranch(ctx, br.ThreadID, demoThread)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  merge    the branch into %s: step %d, with both parents\n", demoThread, m.Step)
	pruned, err := eng.PruneThreads(ctx, engine.KeepLatest(), br.ThreadID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  prune    the merged branch keeps only its head: %d checkpoints deleted\n", pruned.Deleted)

	tree, err := eng.Tree(ctx, demoThread)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nthe tree (ckpt log %s --graph): %d checkpoints\n", demoThread, len(tree.Nodes))
	for _, l := range drawGraph(tree, 0, demoLabel) {
		fmt.Fprintln(w, "  "+l)
	}
	if c.dbURL != "" {
		fmt.Fprintf(w, "\nlook around (same database): ckpt log %s --graph, ckpt show ID, ckpt diff A B, ckpt export %s\n", demoThread, demoThread)
	}
	return nil
}

// demoLabel is a short graph label: step, trigger, thread if a branch,
// head, summary (the demo writes no cycle of parents).
func demoLabel(n engine.TreeNode, parentMissing, _ bool) string {
	s := fmt.Sprintf("step %d %s", n.Step, n.Trigger)
	if n.ThreadID != demoThread {
		s += " [branch]"
	}
	if n.IsHead {
		s += " (head)"
	}
	if parentMissing {
		s += " (earlier steps pruned)"
	}
	return s + "  " + oneLine(n.Summary, 50)
}

func sortedTasks(done map[string][]engine.PendingWrite) []string {
	var out []string
	for _, t := range []string{"search_flights", "search_hotels"} {
		if _, ok := done[t]; ok {
			out = append(out, t)
		}
	}
	return out
}
