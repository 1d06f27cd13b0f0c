package main

import (
	"container/heap"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// drawGraph draws a tree the way git log --graph draws history: newest
// first, one column per line of history, "|/" where lines join and "|\"
// where a merge brings one in. It returns one string per output line.
//
// label gets each node and whether it is a root of the drawing (no parent
// in the tree: a thread's first checkpoint, or one whose parent was pruned
// or lies outside the tree).
func drawGraph(t *engine.Tree, label func(n engine.TreeNode, root bool) string) []string {
	parent := map[uuid.UUID]uuid.UUID{}
	merge := map[uuid.UUID]uuid.UUID{}
	for _, e := range t.Edges {
		if e.Merge {
			merge[e.To] = e.From
		} else {
			parent[e.To] = e.From
		}
	}
	var out []string
	var lanes []uuid.UUID // the checkpoint each column waits for
	for _, n := range newestFirst(t) {
		col := -1
		var joins []int
		for i, id := range lanes {
			if id == n.ID {
				if col < 0 {
					col = i
				} else {
					joins = append(joins, i)
				}
			}
		}
		if len(joins) > 0 {
			// Lines that end here join the first: they, and every column
			// right of them, move one column left.
			out = append(out, connector(len(lanes), func(i int) (byte, int) {
				if i < joins[0] {
					return '|', 2 * i
				}
				return '/', 2*i - 1
			}))
			lanes = removeAll(lanes, joins)
		}
		if col < 0 {
			lanes = append(lanes, n.ID)
			col = len(lanes) - 1
		}
		row := make([]string, len(lanes))
		for i := range lanes {
			row[i] = "|"
		}
		row[col] = "*"
		p, hasParent := parent[n.ID]
		out = append(out, strings.Join(row, " ")+" "+label(n, !hasParent))

		if hasParent {
			lanes[col] = p
		} else {
			// A root (or one whose parent is not in the tree): its line
			// ends. A gap shows it, and the columns right of it move left.
			if len(lanes) > 1 {
				out = append(out, connector(len(lanes), func(i int) (byte, int) {
					switch {
					case i < col:
						return '|', 2 * i
					case i == col:
						return ' ', 2 * i
					}
					return '/', 2*i - 1
				}))
			}
			lanes = append(lanes[:col], lanes[col+1:]...)
		}
		if m, ok := merge[n.ID]; ok {
			// The merged branch gets a column right of this one.
			lanes = append(lanes[:col+1], append([]uuid.UUID{m}, lanes[col+1:]...)...)
			out = append(out, connector(len(lanes), func(i int) (byte, int) {
				if i <= col {
					return '|', 2 * i
				}
				return '\\', 2*i - 1
			}))
		}
	}
	return out
}

// connector draws a line between rows: glyph(i) gives column i's character
// and position.
func connector(n int, glyph func(i int) (byte, int)) string {
	line := []byte(strings.Repeat(" ", 2*n+1))
	for i := range n {
		g, at := glyph(i)
		if at >= 0 && at < len(line) {
			line[at] = g
		}
	}
	return strings.TrimRight(string(line), " ")
}

func removeAll(lanes []uuid.UUID, idx []int) []uuid.UUID {
	drop := map[int]bool{}
	for _, i := range idx {
		drop[i] = true
	}
	out := lanes[:0:0]
	for i, id := range lanes {
		if !drop[i] {
			out = append(out, id)
		}
	}
	return out
}

// newestFirst orders the nodes so every checkpoint comes before its parents,
// and otherwise newest first.
func newestFirst(t *engine.Tree) []engine.TreeNode {
	children := map[uuid.UUID]int{}
	parents := map[uuid.UUID][]uuid.UUID{}
	for _, e := range t.Edges {
		children[e.From]++
		parents[e.To] = append(parents[e.To], e.From)
	}
	byID := map[uuid.UUID]engine.TreeNode{}
	for _, n := range t.Nodes {
		byID[n.ID] = n
	}
	ready := &nodeHeap{}
	for _, n := range t.Nodes {
		if children[n.ID] == 0 {
			heap.Push(ready, n)
		}
	}
	out := make([]engine.TreeNode, 0, len(t.Nodes))
	for ready.Len() > 0 {
		n := heap.Pop(ready).(engine.TreeNode)
		out = append(out, n)
		for _, p := range parents[n.ID] {
			if children[p]--; children[p] == 0 {
				heap.Push(ready, byID[p])
			}
		}
	}
	return out
}

// nodeHeap pops the newest node first.
type nodeHeap []engine.TreeNode

func (h nodeHeap) Len() int { return len(h) }
func (h nodeHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	if a.ThreadID != b.ThreadID {
		return a.ThreadID < b.ThreadID
	}
	return a.Seq > b.Seq
}
func (h nodeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *nodeHeap) Push(x any)   { *h = append(*h, x.(engine.TreeNode)) }
func (h *nodeHeap) Pop() any {
	old := *h
	n := old[len(old)-1]
	*h = old[:len(old)-1]
	return n
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

func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;")
	return r.Replace(s)
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
			label := fmt.Sprintf("step %d %s<br/>%s", n.Step, n.Trigger, mermaidText(oneLine(n.Summary, 40)))
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
