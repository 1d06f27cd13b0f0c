package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

const timeLayout = "2006-01-02 15:04:05"

// parseID reads a checkpoint id argument.
func parseID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, usagef("%q is not a checkpoint id (a UUID, as ckpt log prints them)", s)
	}
	return id, nil
}

func optID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// checkpointJSON is a checkpoint as ckpt prints it for scripts.
type checkpointJSON struct {
	ID            uuid.UUID             `json:"id"`
	ThreadID      string                `json:"thread_id"`
	Namespace     string                `json:"namespace"`
	Seq           int64                 `json:"seq"`
	Step          int64                 `json:"step"`
	ParentID      *uuid.UUID            `json:"parent_id"`
	MergeParentID *uuid.UUID            `json:"merge_parent_id,omitempty"`
	CreatedAt     time.Time             `json:"created_at"`
	Trigger       engine.Trigger        `json:"trigger"`
	Tags          []string              `json:"tags"`
	Summary       string                `json:"summary"`
	Metadata      json.RawMessage       `json:"metadata"`
	NextNode      string                `json:"next_node"`
	SizeBytes     int64                 `json:"size_bytes"`
	IsHead        bool                  `json:"is_head"`
	Messages      json.RawMessage       `json:"messages,omitempty"`
	State         json.RawMessage       `json:"state,omitempty"`
	ToolResults   json.RawMessage       `json:"tool_results,omitempty"`
	PendingWrites []engine.PendingWrite `json:"pending_writes,omitempty"`
}

func infoJSON(c engine.CheckpointInfo, head uuid.UUID) checkpointJSON {
	return checkpointJSON{
		ID: c.ID, ThreadID: c.ThreadID, Namespace: c.Namespace, Seq: c.Seq, Step: c.Step,
		ParentID: optID(c.ParentID), MergeParentID: optID(c.MergeParentID), CreatedAt: c.CreatedAt.UTC(),
		Trigger: c.Trigger, Tags: c.Tags, Summary: c.Summary, Metadata: c.Metadata, NextNode: c.NextNode,
		SizeBytes: c.SizeBytes, IsHead: c.ID == head,
	}
}

func runThreads(ctx context.Context, c *cli, _ []string) error {
	var all []engine.ThreadInfo
	after := ""
	for {
		page, err := c.eng.ListThreads(ctx, engine.ThreadListOptions{Limit: 1000, After: after})
		if err != nil {
			return err
		}
		all = append(all, page...)
		if len(page) < 1000 || (c.limit > 0 && len(all) >= c.limit) {
			break
		}
		after = page[len(page)-1].ThreadID
	}
	if c.limit > 0 && len(all) > c.limit {
		all = all[:c.limit]
	}
	if c.json {
		type threadJSON struct {
			ThreadID      string          `json:"thread_id"`
			Namespace     string          `json:"namespace"`
			HeadID        uuid.UUID       `json:"head_id"`
			HeadStep      int64           `json:"head_step"`
			HeadSummary   string          `json:"head_summary"`
			HeadCreatedAt time.Time       `json:"head_created_at"`
			CreatedAt     time.Time       `json:"created_at"`
			Metadata      json.RawMessage `json:"metadata"`
		}
		out := make([]threadJSON, len(all))
		for i, t := range all {
			out[i] = threadJSON{t.ThreadID, t.Namespace, t.HeadID, t.HeadStep, t.HeadSummary, t.HeadCreatedAt.UTC(), t.CreatedAt.UTC(), t.Metadata}
		}
		return c.printJSON(out)
	}
	if len(all) == 0 {
		fmt.Fprintln(c.stdout, "no threads")
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tSTEP\tHEAD\tUPDATED\tSUMMARY")
	for _, t := range all {
		name := termsafe.Line(t.ThreadID)
		if t.Namespace != "" {
			name += " [" + termsafe.Line(t.Namespace) + "]"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", name, t.HeadStep, t.HeadID, t.HeadCreatedAt.Local().Format(timeLayout), oneLine(t.HeadSummary, 60))
	}
	return tw.Flush()
}

func runLog(ctx context.Context, c *cli, args []string) error {
	thread := args[0]
	if c.graph && c.namespace != "" {
		return usagef("log: --graph draws every namespace; --namespace lists one")
	}
	if c.graph {
		tree, err := c.eng.Tree(ctx, thread)
		if err != nil {
			return err
		}
		if c.json {
			if c.limit > 0 {
				// The JSON is the whole tree, its edges among every node:
				// a cut of it would name nodes it leaves out.
				return usagef("log: --graph --json gives the whole tree; --limit cuts the drawing alone")
			}
			return c.printJSON(treeJSON(tree))
		}
		lines := drawGraph(tree, c.limit, func(n engine.TreeNode, parentMissing, inCycle bool) string {
			return nodeLabel(n, parentMissing, inCycle, thread)
		})
		for _, l := range lines {
			fmt.Fprintln(c.stdout, l)
		}
		return nil
	}
	head, err := c.eng.LatestIn(ctx, thread, c.namespace)
	if err != nil {
		return err
	}
	var all []engine.CheckpointInfo
	var before uuid.UUID
	for {
		page, err := c.eng.ListCheckpoints(ctx, thread, engine.ListOptions{Namespace: c.namespace, Limit: 1000, Before: before})
		if err != nil {
			return err
		}
		all = append(all, page...)
		if len(page) < 1000 || (c.limit > 0 && len(all) >= c.limit) {
			break
		}
		before = page[len(page)-1].ID
	}
	if c.limit > 0 && len(all) > c.limit {
		all = all[:c.limit]
	}
	if c.json {
		out := make([]checkpointJSON, len(all))
		for i, cp := range all {
			out[i] = infoJSON(cp, head.ID)
		}
		return c.printJSON(out)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tCHECKPOINT\tTRIGGER\tCREATED\tSUMMARY")
	for _, cp := range all {
		summary := oneLine(cp.Summary, 60)
		if cp.ID == head.ID {
			summary = "(head) " + summary
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", cp.Step, cp.ID, termsafe.Line(string(cp.Trigger)), cp.CreatedAt.Local().Format(timeLayout), summary)
	}
	return tw.Flush()
}

// nodeLabel is the text after a checkpoint in a graph.
func nodeLabel(n engine.TreeNode, parentMissing, inCycle bool, thread string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s step %d %s", n.ID, n.Step, n.Trigger)
	if n.ThreadID != thread {
		fmt.Fprintf(&b, " [%s]", n.ThreadID)
	}
	if n.Namespace != "" {
		fmt.Fprintf(&b, " {%s}", n.Namespace)
	}
	if n.IsHead {
		b.WriteString(" (head)")
	}
	if parentMissing {
		b.WriteString(" (parent not in this tree)")
	}
	if inCycle {
		b.WriteString(" (in a parent cycle)")
	}
	if n.Summary != "" {
		b.WriteString("  " + oneLine(n.Summary, 60))
	}
	return b.String()
}

// oneLine flattens s to one line of at most n characters, for tables.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func runShow(ctx context.Context, c *cli, args []string) error {
	id, err := parseID(args[0])
	if err != nil {
		return err
	}
	cp, err := c.eng.Get(ctx, id)
	if err != nil {
		return err
	}
	head, err := c.eng.LatestIn(ctx, cp.ThreadID, cp.Namespace)
	if err != nil {
		return err
	}
	out := infoJSON(cp.CheckpointInfo, head.ID)
	out.Messages, out.State, out.ToolResults, out.PendingWrites = cp.Messages, cp.State, cp.ToolResults, cp.PendingWrites
	if out.PendingWrites == nil {
		out.PendingWrites = []engine.PendingWrite{}
	}
	return c.printJSON(out)
}

func runDiff(ctx context.Context, c *cli, args []string) error {
	a, err := parseID(args[0])
	if err != nil {
		return err
	}
	b, err := parseID(args[1])
	if err != nil {
		return err
	}
	d, err := c.eng.Diff(ctx, a, b)
	if err != nil {
		return err
	}
	if c.json {
		type keys struct {
			Added   []string `json:"added"`
			Removed []string `json:"removed"`
			Changed []string `json:"changed"`
		}
		k := func(kd engine.KeyDiff) keys {
			return keys{nonNil(kd.Added), nonNil(kd.Removed), nonNil(kd.Changed)}
		}
		return c.printJSON(struct {
			From            uuid.UUID         `json:"from"`
			To              uuid.UUID         `json:"to"`
			MessagesAdded   []json.RawMessage `json:"messages_added"`
			MessagesRemoved []json.RawMessage `json:"messages_removed"`
			State           keys              `json:"state"`
			ToolResults     keys              `json:"tool_results"`
		}{d.From, d.To, nonNil(d.MessagesAdded), nonNil(d.MessagesRemoved), k(d.State), k(d.ToolResults)})
	}
	w := c.stdout
	fmt.Fprintf(w, "from %s\nto   %s\n\n", d.From, d.To)
	fmt.Fprintf(w, "messages: %d added, %d removed\n", len(d.MessagesAdded), len(d.MessagesRemoved))
	for _, m := range d.MessagesRemoved {
		fmt.Fprintf(w, "  - %s\n", compact(m))
	}
	for _, m := range d.MessagesAdded {
		fmt.Fprintf(w, "  + %s\n", compact(m))
	}
	for _, part := range []struct {
		name string
		kd   engine.KeyDiff
	}{{"state", d.State}, {"tool results", d.ToolResults}} {
		if len(part.kd.Added)+len(part.kd.Removed)+len(part.kd.Changed) == 0 {
			fmt.Fprintf(w, "%s: unchanged\n", part.name)
			continue
		}
		fmt.Fprintf(w, "%s:\n", part.name)
		for _, k := range part.kd.Added {
			fmt.Fprintf(w, "  + %s\n", termsafe.Line(k))
		}
		for _, k := range part.kd.Removed {
			fmt.Fprintf(w, "  - %s\n", termsafe.Line(k))
		}
		for _, k := range part.kd.Changed {
			fmt.Fprintf(w, "  ~ %s\n", termsafe.Line(k))
		}
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func compact(m json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, m); err != nil {
		return string(m)
	}
	return b.String()
}

func runRewind(ctx context.Context, c *cli, args []string) error {
	id, err := parseID(args[0])
	if err != nil {
		return err
	}
	r, err := c.eng.Rewind(ctx, id)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(struct {
			ThreadID     string    `json:"thread_id"`
			Namespace    string    `json:"namespace"`
			CheckpointID uuid.UUID `json:"checkpoint_id"`
			Step         int64     `json:"step"`
			StepsBack    int64     `json:"steps_back"`
			Checkpoints  int64     `json:"checkpoints"`
		}{r.ThreadID, r.Namespace, r.Checkpoint.ID, r.Checkpoint.Step, r.StepsBack, r.Checkpoints})
	}
	fmt.Fprintf(c.stdout, "thread %s rewound %d step(s) to step %d (%s)\nnothing was deleted: the next checkpoint builds on this one; %d checkpoint(s) stay readable\n",
		termsafe.Line(r.ThreadID), r.StepsBack, r.Checkpoint.Step, r.Checkpoint.ID, r.Checkpoints)
	return nil
}

func runBranch(ctx context.Context, c *cli, args []string) error {
	id, err := parseID(args[0])
	if err != nil {
		return err
	}
	if args[1] == "" {
		return usagef("branch: NAME is empty")
	}
	r, err := c.eng.Branch(ctx, id, args[1])
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(struct {
			ThreadID     string    `json:"thread_id"`
			CheckpointID uuid.UUID `json:"checkpoint_id"`
			Step         int64     `json:"step"`
			From         uuid.UUID `json:"from"`
		}{r.ThreadID, r.CheckpointID, r.Step, id})
	}
	fmt.Fprintf(c.stdout, "branch %s created from %s\nits first checkpoint is %s (step %d)\n", termsafe.Line(r.ThreadID), id, r.CheckpointID, r.Step)
	return nil
}

// runExport writes the export exactly as the engine does, for a file or a
// pipe. To a terminal it goes through termsafe.JSON: the same values, and
// nothing the terminal would act on (an import of the escaped text reads
// the same content, though its message digests, taken over the bytes,
// then differ from the agent's, so its next write is stored whole).
func runExport(ctx context.Context, c *cli, args []string) error {
	var shown bytes.Buffer
	w := c.raw
	if c.tty.stdout {
		w = &shown
	}
	st, err := c.eng.Export(ctx, args[0], w, engine.ExportOptions{Branches: c.branches})
	if c.tty.stdout {
		c.raw.Write(termsafe.JSON(shown.Bytes()))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "exported thread %s: %d thread row(s), %d checkpoint(s) (%d delta(s)), %d pending write(s)\n",
		termsafe.Line(args[0]), st.Threads, st.Checkpoints, st.Deltas, st.PendingWrites)
	return nil
}

func runImport(ctx context.Context, c *cli, args []string) error {
	if (len(args) == 0 || args[0] == "-") && c.tty.stdin {
		// Nothing would come but what someone types, and a signal does
		// not end a read of a terminal.
		return usagef("import: give FILE, or pipe an export in (stdin is a terminal)")
	}
	var in io.Reader = os.Stdin
	var size int64
	counter := &countingReader{}
	if len(args) == 1 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		in = f
	}
	counter.r = bufio.NewReaderSize(in, 64<<10)
	opts := engine.ImportOptions{}
	progress := c.tty.stderr && !c.json
	if progress {
		opts.Progress = func(st engine.ExportStats) {
			line := fmt.Sprintf("\rimporting: %d checkpoint(s)", st.Checkpoints)
			if size > 0 {
				line += fmt.Sprintf(", %d%%", counter.n*100/size)
			}
			fmt.Fprint(c.rawErr, line)
		}
	}
	st, err := c.eng.Import(ctx, counter, opts)
	if progress {
		fmt.Fprint(c.rawErr, "\r\033[K")
	}
	if err != nil {
		return fmt.Errorf("%w (nothing was imported)", err)
	}
	if c.json {
		return c.printJSON(struct {
			Threads       int64 `json:"threads"`
			Checkpoints   int64 `json:"checkpoints"`
			PendingWrites int64 `json:"pending_writes"`
		}{st.Threads, st.Checkpoints, st.PendingWrites})
	}
	fmt.Fprintf(c.stdout, "imported %d thread row(s), %d checkpoint(s), %d pending write(s)\n", st.Threads, st.Checkpoints, st.PendingWrites)
	return nil
}

// countingReader counts the bytes read, for the progress line.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func runTree(ctx context.Context, c *cli, args []string) error {
	if c.format != "dot" && c.format != "mermaid" {
		return usagef("tree: --format %q; use dot or mermaid", c.format)
	}
	tree, err := c.eng.Tree(ctx, args[0])
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(treeJSON(tree))
	}
	if c.format == "mermaid" {
		_, err = io.WriteString(c.stdout, mermaid(tree))
	} else {
		_, err = io.WriteString(c.stdout, dot(tree))
	}
	return err
}

// deleteThread deletes a thread whole, or, with preview, says what that
// would delete (the store's delete, rolled back). A thread that does not
// exist is ErrNotFound, where the engine deletes nothing and says nothing
// (a retry is harmless): whoever asked has the wrong name, or someone else
// deleted it first. ckpt delete and ckpt web's delete both ask here.
func deleteThread(ctx context.Context, eng *engine.Engine, thread string, preview bool) (engine.DeleteResult, error) {
	var r engine.DeleteResult
	var err error
	if preview {
		r, err = eng.PreviewPrune(ctx, engine.KeepNone(), thread)
	} else {
		r, err = eng.DeleteThreads(ctx, thread)
	}
	if err == nil && r.Deleted == 0 {
		err = fmt.Errorf("thread %q: %w", thread, engine.ErrNotFound)
	}
	return r, err
}

// threadExists returns ErrNotFound, naming the thread, for a thread that
// does not exist, which a policy would prune nothing of without a word.
// (Its expiry, not its head: a thread may have checkpoints in sub-graph
// namespaces alone, which a policy prunes too.) ckpt gc --thread and ckpt
// web's prune both ask here.
func threadExists(ctx context.Context, eng *engine.Engine, thread string) error {
	_, _, err := eng.ThreadExpiry(ctx, thread)
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("thread %q: %w", thread, engine.ErrNotFound)
	}
	return err
}

func runDelete(ctx context.Context, c *cli, args []string) error {
	thread := args[0]
	var r engine.DeleteResult
	var err error
	if c.dryRun || c.asks() {
		if r, err = deleteThread(ctx, c.eng, thread, true); err != nil {
			return err
		}
	}
	if !c.dryRun {
		if err := c.confirm(ctx, fmt.Sprintf("delete thread %s: %d checkpoint(s), with their pending writes?", termsafe.Line(thread), r.Deleted)); err != nil {
			return err
		}
		if r, err = deleteThread(ctx, c.eng, thread, false); err != nil {
			return err
		}
	}
	if c.json {
		return c.printJSON(struct {
			ThreadID string `json:"thread_id"`
			Deleted  int64  `json:"deleted"`
			DryRun   bool   `json:"dry_run,omitempty"`
		}{thread, r.Deleted, c.dryRun})
	}
	if c.dryRun {
		fmt.Fprintf(c.stdout, "thread %s would be deleted: %d checkpoint(s), with their pending writes (dry run: nothing was deleted)\n", termsafe.Line(thread), r.Deleted)
		return nil
	}
	fmt.Fprintf(c.stdout, "thread %s deleted: %d checkpoint(s), with their pending writes\n", termsafe.Line(thread), r.Deleted)
	return nil
}

const rewrapHelp = `Rotation of a key-encryption key: put the new key first in the key file,
keep the old one after it, run ckpt rewrap for every tenant (--tenant NAME;
without it, the default tenant), then remove the old key: a tenant not
rewrapped cannot read its threads without the old key. Content is neither
read nor rewritten; a key changed meanwhile by another run is left as that
run made it. With --held-keys DIR the new wrappings are written there and
the files they replace deleted; an export or backup taken before then
names the wrappings deleted, and no longer reads.`

func runRewrap(ctx context.Context, c *cli, _ []string) error {
	if !c.eng.Encrypted() {
		return usageError{"rewrap needs the keys: --keys FILE or $" + keysEnv}
	}
	r, err := c.eng.RewrapKeys(ctx)
	if err != nil && r.Failed == 0 {
		return err
	}
	// Keys that did not unwrap leave the others rewrapped: say both.
	if c.json {
		if perr := c.printJSON(map[string]int{"rewrapped": r.Rewrapped, "shredded": r.Shredded, "failed": r.Failed}); perr != nil {
			return perr
		}
		return err
	}
	if _, perr := fmt.Fprintf(c.stdout, "rewrapped %d data keys (%d shredded, left as they are; %d failed, left as they are)\n", r.Rewrapped, r.Shredded, r.Failed); perr != nil {
		return perr
	}
	return err
}
