package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// The drawing of a tree, newest first, one row per checkpoint. A column is
// one line of history: it goes down from a checkpoint to that checkpoint's
// parent and holds nothing else. A line never moves to another column, and
// a column a line ended in stays blank for a row before another line may
// start there. Lines that meet a checkpoint other than straight down come
// in on a horizontal run from the right of it, on its own row; so does the
// line of a merge parent, which goes out. graphHelp explains the glyphs to
// users.
const (
	glyphNode     = '*'  // a checkpoint on its thread's current line
	glyphLeft     = 'o'  // a checkpoint a rewind left behind
	glyphLine     = '|'  // a line down to a parent
	glyphLeftLine = ':'  // a line down from a checkpoint a rewind left behind
	glyphRun      = '-'  // a run from a checkpoint to the right
	glyphCross    = '+'  // a run crossing a line that goes on
	glyphJoin     = '\'' // a line that ends here, in the run's checkpoint: its parent
	glyphFork     = '.'  // a line that starts here, to the run's checkpoint's merge parent
)

// graphHelp is what ckpt log --help says about --graph.
const graphHelp = `--graph draws the tree: the thread, its rewinds, its branches and merges,
newest first, one row per checkpoint. Each column is one line of history,
from a checkpoint down to its parent; a line never changes column.
  *   a checkpoint on its thread's current line (from the head back)
  o   a checkpoint a rewind left behind (off its thread's current line)
  |   a line down to the parent; ':' when it comes from an 'o'
  *-' the line on the right ends in this checkpoint: the checkpoint it
      comes down from has this one as parent ('+' where the run crosses a
      line that goes on)
  *-. a merge: a line starts on the right, down to the merged branch's head
A column left blank under a checkpoint: it has no parent in the tree (a
thread's first checkpoint, or its parent was pruned or lies outside the
tree: the label says so), or its parent is drawn above it: "in a parent
cycle", parent ids changed by hand so that a checkpoint descends from
itself (ckpt show gives each one's parents).`

// drawGraph draws a tree (see the glyphs above) and returns one line per
// checkpoint, newest first, at most limit of them (0: all): the drawing,
// then the label. label gets each node, whether its parent is missing
// from the tree (pruned, or outside it) and whether it is in a cycle of
// parents (see treeIndex.newestFirst), whose lines up to a parent drawn
// above are not drawn; a label is shown on one line, its newlines escaped.
// A row is as wide as the lines it crosses, so the rows not asked for are
// not drawn at all: N checkpoints forked from one are N lines side by
// side, N*N bytes for all the rows.
func drawGraph(t *engine.Tree, limit int, label func(n engine.TreeNode, parentMissing, inCycle bool) string) []string {
	parent := map[uuid.UUID]uuid.UUID{}
	merge := map[uuid.UUID]uuid.UUID{}
	for _, e := range t.Edges {
		if e.Merge {
			merge[e.To] = e.From
		} else {
			parent[e.To] = e.From
		}
	}
	x := indexTree(t)
	leftIx := x.leftBehind(t.Nodes)
	left := func(id uuid.UUID) bool { return leftIx[x.index[id]] }

	// lane is a line being drawn: the checkpoint it goes down to, and
	// whether it comes from one a rewind left behind.
	type lane struct {
		to   uuid.UUID
		left bool
	}
	var lanes []*lane // by column; nil: a free column
	var above []byte  // the previous row
	free := func(after int) int {
		for i := after + 1; ; i++ {
			if (i >= len(lanes) || lanes[i] == nil) && (2*i >= len(above) || above[2*i] == ' ') {
				for len(lanes) <= i {
					lanes = append(lanes, nil)
				}
				return i
			}
		}
	}
	order, cycle := x.newestFirst(t.Nodes)
	inCycle := func(id uuid.UUID) bool { return cycle != nil && cycle[x.index[id]] }
	drawn := make([]bool, len(t.Nodes))
	isDrawn := func(id uuid.UUID) bool { return drawn[x.index[id]] }
	if limit > 0 && len(order) > limit {
		order = order[:limit]
	}
	nodes := make([]engine.TreeNode, len(order))
	for i, ni := range order {
		nodes[i] = t.Nodes[ni]
	}
	rows := make([][]byte, 0, len(nodes))
	width := 0
	for _, n := range nodes {
		col := -1
		var joins []int
		for i, l := range lanes {
			if l != nil && l.to == n.ID {
				if col < 0 {
					col = i
				} else {
					joins = append(joins, i)
				}
			}
		}
		if col < 0 {
			col = free(-1)
			lanes[col] = &lane{to: n.ID} // taken on this row
		}
		drawn[x.index[n.ID]] = true
		fork := -1
		m, merged := merge[n.ID]
		merged = merged && !isDrawn(m)
		if merged {
			fork = free(col)
		}

		row := []byte(strings.Repeat(" ", 2*len(lanes)-1))
		for i, l := range lanes {
			switch {
			case l == nil:
			case l.left:
				row[2*i] = glyphLeftLine
			default:
				row[2*i] = glyphLine
			}
		}
		row[2*col] = glyphNode
		if left(n.ID) {
			row[2*col] = glyphLeft
		}
		end := max(col, fork)
		if len(joins) > 0 {
			end = max(end, joins[len(joins)-1])
		}
		for p := 2*col + 1; p < 2*end; p++ {
			if row[p] == ' ' {
				row[p] = glyphRun
			} else {
				row[p] = glyphCross
			}
		}
		for _, j := range joins {
			row[2*j] = glyphJoin
			lanes[j] = nil
		}
		lanes[col] = nil
		if p, ok := parent[n.ID]; ok && !isDrawn(p) {
			lanes[col] = &lane{to: p, left: left(n.ID)}
		}
		if merged {
			row[2*fork] = glyphFork
			lanes[fork] = &lane{to: m, left: left(n.ID)}
		}
		for len(lanes) > 0 && lanes[len(lanes)-1] == nil {
			lanes = lanes[:len(lanes)-1]
		}
		rows = append(rows, row)
		above = row
		width = max(width, len(row))
	}

	out := make([]string, len(nodes))
	for i, n := range nodes {
		_, hasParent := parent[n.ID]
		text := termsafe.Line(label(n, !hasParent && n.ParentID != uuid.Nil, inCycle(n.ID)))
		out[i] = string(rows[i]) + strings.Repeat(" ", width-len(rows[i])) + " " + text
	}
	return out
}

// threadsOf lists the threads of a tree, the asked-for one first.
func threadsOf(t *engine.Tree) []string {
	seen := map[string]bool{t.ThreadID: true}
	out := []string{t.ThreadID}
	for _, n := range t.Nodes {
		if !seen[n.ThreadID] {
			seen[n.ThreadID] = true
			out = append(out, n.ThreadID)
		}
	}
	return out
}

func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// dot renders a tree for Graphviz: one cluster per thread, parent -> child
// edges, merges dashed, heads drawn bold.
func dot(t *engine.Tree) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n", dotQuote(t.ThreadID))
	for i, thread := range threadsOf(t) {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%s;\n", i, dotQuote(thread))
		for _, n := range t.Nodes {
			if n.ThreadID != thread {
				continue
			}
			style := ""
			if n.IsHead {
				style = ", style=bold"
			}
			label := fmt.Sprintf("step %d %s\n%s\n%s", n.Step, n.Trigger, n.ID, oneLine(n.Summary, 40))
			fmt.Fprintf(&b, "    %s [label=%s%s];\n", dotQuote(n.ID.String()), dotQuote(label), style)
		}
		b.WriteString("  }\n")
	}
	for _, e := range t.Edges {
		style := ""
		if e.Merge {
			style = " [style=dashed, label=\"merge\"]"
		}
		fmt.Fprintf(&b, "  %s -> %s%s;\n", dotQuote(e.From.String()), dotQuote(e.To.String()), style)
	}
	b.WriteString("}\n")
	return b.String()
}

// mermaidText is s for a quoted Mermaid label, on one line: a newline in
// agent text would end the label and start a statement of its own.
func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;")
	return r.Replace(termsafe.Line(s))
}

// mermaid renders a tree as a Mermaid flowchart.
func mermaid(t *engine.Tree) string {
	id := func(u uuid.UUID) string { return "c" + strings.ReplaceAll(u.String(), "-", "") }
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	for i, thread := range threadsOf(t) {
		fmt.Fprintf(&b, "  subgraph t%d [\"%s\"]\n", i, mermaidText(thread))
		for _, n := range t.Nodes {
			if n.ThreadID != thread {
				continue
			}
			label := fmt.Sprintf("step %d %s<br/>%s", n.Step, mermaidText(string(n.Trigger)), mermaidText(oneLine(n.Summary, 40)))
			if n.IsHead {
				label = "<b>head</b> " + label
			}
			fmt.Fprintf(&b, "    %s[\"%s\"]\n", id(n.ID), label)
		}
		b.WriteString("  end\n")
	}
	for _, e := range t.Edges {
		arrow := "-->"
		if e.Merge {
			arrow = "-. merge .->"
		}
		fmt.Fprintf(&b, "  %s %s %s\n", id(e.From), arrow, id(e.To))
	}
	return b.String()
}

// treeJSON is a tree as ckpt prints it for scripts.
func treeJSON(t *engine.Tree) any {
	type node struct {
		ID        uuid.UUID      `json:"id"`
		ThreadID  string         `json:"thread_id"`
		Namespace string         `json:"namespace"`
		Seq       int64          `json:"seq"`
		Step      int64          `json:"step"`
		CreatedAt time.Time      `json:"created_at"`
		Trigger   engine.Trigger `json:"trigger"`
		Tags      []string       `json:"tags"`
		Summary   string         `json:"summary"`
		IsHead    bool           `json:"is_head"`
	}
	type edge struct {
		From  uuid.UUID `json:"from"`
		To    uuid.UUID `json:"to"`
		Merge bool      `json:"merge"`
	}
	out := struct {
		ThreadID string `json:"thread_id"`
		Nodes    []node `json:"nodes"`
		Edges    []edge `json:"edges"`
	}{ThreadID: t.ThreadID, Nodes: []node{}, Edges: []edge{}}
	for _, n := range t.Nodes {
		out.Nodes = append(out.Nodes, node{n.ID, n.ThreadID, n.Namespace, n.Seq, n.Step, n.CreatedAt.UTC(), n.Trigger, n.Tags, n.Summary, n.IsHead})
	}
	for _, e := range t.Edges {
		out.Edges = append(out.Edges, edge{e.From, e.To, e.Merge})
	}
	return out
}
