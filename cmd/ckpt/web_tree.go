package main

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The picture of a tree on a thread page: the rows of ckpt log --graph
// (newest first, every checkpoint before its parents), each checkpoint a
// dot in a column, and each edge of engine.Tree a line from the child down
// its own column (a merge's line from a column of its own, to the right)
// to the parent's row, where it bends into the parent's column. Columns are
// reused, but not by a line that starts right below the end of another.

// treeRow is one checkpoint of a laid-out tree.
type treeRow struct {
	Node *engine.TreeNode
	Col  int
	Left bool // a rewind left it behind (as leftBehind says)
}

// treeLine is one edge of a laid-out tree: from the child's row and column
// along Lane to the parent's row and column.
type treeLine struct {
	Edge                      engine.TreeEdge
	ChildRow, ParentRow       int
	ChildCol, Lane, ParentCol int
	Left                      bool // the child was left behind by a rewind
}

// treeLayout is a tree laid out in rows and columns.
type treeLayout struct {
	Rows    []treeRow
	Lines   []treeLine
	Columns int
	index   map[uuid.UUID]int32 // a checkpoint's index in the tree's nodes
	rowOf   []int32             // by node index
	threads map[string]int      // thread id -> its index in threadsOf, for colours
}

// row returns the row of a checkpoint, and false when it is not in the tree.
func (l *treeLayout) row(id uuid.UUID) (int, bool) {
	i, ok := l.index[id]
	if !ok {
		return 0, false
	}
	return int(l.rowOf[i]), true
}

// layoutTree lays t out (see above). It orders the rows as newestFirst
// and marks what leftBehind marks, as ckpt log --graph does, over node
// indices rather than maps of ids: a thread page lays out its whole tree
// on every request, 50,000 checkpoints and more.
func layoutTree(t *engine.Tree) *treeLayout {
	n := len(t.Nodes)
	l := &treeLayout{Rows: make([]treeRow, n), Lines: make([]treeLine, len(t.Edges)),
		index: make(map[uuid.UUID]int32, n), rowOf: make([]int32, n), threads: map[string]int{}}
	for i := range t.Nodes {
		l.index[t.Nodes[i].ID] = int32(i)
	}
	for i, th := range threadsOf(t) {
		l.threads[th] = i
	}
	// Each edge by index; out lists each child's edges (to its parents),
	// from outStart[child] to outStart[child+1].
	from, to := make([]int32, len(t.Edges)), make([]int32, len(t.Edges))
	parent := make([]int32, n)
	for i := range parent {
		parent[i] = -1
	}
	outStart := make([]int32, n+1)
	for i, e := range t.Edges {
		from[i], to[i] = l.index[e.From], l.index[e.To]
		outStart[to[i]+1]++
		if !e.Merge {
			parent[to[i]] = from[i]
		}
		l.Lines[i] = treeLine{Edge: e}
	}
	for i := 1; i <= n; i++ {
		outStart[i] += outStart[i-1]
	}
	out := make([]int32, len(t.Edges))
	next := slices.Clone(outStart[:n])
	for i := range t.Edges {
		out[next[to[i]]] = int32(i)
		next[to[i]]++
	}
	left := leftBehindIndexed(t.Nodes, parent)
	order := newestFirstIndexed(t.Nodes, from, out, outStart)

	// lanes[c] is the index of the line going down column c, or -1.
	// freed[c] is the row where column c's last line ended.
	var lanes []int
	var freed []int
	free := func(row int, not int) int {
		for c := 0; ; c++ {
			if c == len(lanes) {
				lanes = append(lanes, -1)
				freed = append(freed, -2)
			}
			if c != not && lanes[c] < 0 && freed[c] < row-1 {
				return c
			}
		}
	}
	var ending []int
	for r, ni := range order {
		l.rowOf[ni] = int32(r)
		col := -1
		ending = ending[:0]
		for c, li := range lanes {
			if li >= 0 && from[li] == ni {
				if col < 0 {
					col = c
				}
				ending = append(ending, li)
				lanes[c], freed[c] = -1, r
			}
		}
		if col < 0 {
			col = free(r, -1)
		}
		for _, li := range ending {
			l.Lines[li].ParentRow, l.Lines[li].ParentCol = r, col
		}
		l.Rows[r] = treeRow{Node: &t.Nodes[ni], Col: col, Left: left[ni]}
		// The parent's line goes down this column; a merge parent's down a
		// free one to the right.
		for _, li := range out[outStart[ni]:outStart[ni+1]] {
			lane := col
			if l.Lines[li].Edge.Merge {
				lane = free(r, col)
			}
			lanes[lane] = int(li)
			l.Lines[li].ChildRow, l.Lines[li].ChildCol, l.Lines[li].Lane = r, col, lane
			l.Lines[li].Left = left[ni]
		}
		l.Columns = max(l.Columns, len(lanes))
	}
	return l
}

// newestFirstIndexed is newestFirst over indices: every node before its
// parents, otherwise newest first (nodeHeap's order). from holds each
// edge's parent; out[outStart[i]:outStart[i+1]] are node i's edges to its
// parents.
func newestFirstIndexed(nodes []engine.TreeNode, from, out, outStart []int32) []int32 {
	children := make([]int32, len(nodes))
	for _, f := range from {
		children[f]++
	}
	ready := &indexHeap{nodes: nodes}
	for i := range nodes {
		if children[i] == 0 {
			ready.ix = append(ready.ix, int32(i))
		}
	}
	heap.Init(ready)
	order := make([]int32, 0, len(nodes))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int32)
		order = append(order, i)
		for _, e := range out[outStart[i]:outStart[i+1]] {
			p := from[e]
			if children[p]--; children[p] == 0 {
				heap.Push(ready, p)
			}
		}
	}
	return order
}

// indexHeap pops the newest node first, as nodeHeap does.
type indexHeap struct {
	ix    []int32
	nodes []engine.TreeNode
}

func (h *indexHeap) Len() int { return len(h.ix) }
func (h *indexHeap) Less(i, j int) bool {
	a, b := &h.nodes[h.ix[i]], &h.nodes[h.ix[j]]
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	if a.ThreadID != b.ThreadID {
		return a.ThreadID < b.ThreadID
	}
	return a.Seq > b.Seq
}
func (h *indexHeap) Swap(i, j int) { h.ix[i], h.ix[j] = h.ix[j], h.ix[i] }
func (h *indexHeap) Push(x any)    { h.ix = append(h.ix, x.(int32)) }
func (h *indexHeap) Pop() any {
	n := h.ix[len(h.ix)-1]
	h.ix = h.ix[:len(h.ix)-1]
	return n
}

// leftBehindIndexed is leftBehind over indices: the nodes of a thread and
// namespace off the line from its head back (parent[i] is node i's
// parent, -1 for none), written after the line's oldest checkpoint.
func leftBehindIndexed(nodes []engine.TreeNode, parent []int32) []bool {
	type line struct{ thread, namespace string }
	lineOf := func(i int32) line { return line{nodes[i].ThreadID, nodes[i].Namespace} }
	onLine := make([]bool, len(nodes))
	oldest := map[line]int64{}
	for i := range nodes {
		if !nodes[i].IsHead {
			continue
		}
		j := int32(i)
		l := lineOf(j)
		for {
			onLine[j] = true
			p := parent[j]
			if p < 0 || lineOf(p) != l {
				break
			}
			j = p
		}
		oldest[l] = nodes[j].Seq
	}
	left := make([]bool, len(nodes))
	for i := range nodes {
		if seq, ok := oldest[lineOf(int32(i))]; ok && !onLine[i] && nodes[i].Seq > seq {
			left[i] = true
		}
	}
	return left
}

// Sizes of the picture, in pixels.
const (
	treeRowH  = 24
	treeColW  = 18
	treeLeft  = 14
	treeTop   = 14
	treeLabel = 16 // from the last column to the labels
)

// svgRow is a row of a tree page as the template draws it.
type svgRow struct {
	ID, ThreadID string
	Step         int64
	X, Y, TextX  int
	Class        string
	Label        string
	Summary      string
	Branch       bool
	HeadOf       string
	Row          int // the row in the whole tree, from 1
	Current      bool
}

// svgLine is a line of a tree page as the template draws it.
type svgLine struct {
	From, To string
	Kind     string // "parent" or "merge"
	Class    string
	D        string // the SVG path
}

// treePage is one page of a laid-out tree, ready to draw.
type treePage struct {
	Rows          []svgRow
	Lines         []svgLine
	Width, Height int
	First, Last   int // the rows shown, from 1
	Total         int
	Page, Pages   int
	Cut           bool // some lines go on to other pages
}

// page returns the rows [lo, hi) as a picture: their checkpoints and every
// line with an end among them (a line to a row on another page runs off
// the edge of the picture). current is marked.
func (l *treeLayout) page(thread string, pageNo, size int, current uuid.UUID) treePage {
	total := len(l.Rows)
	pages := max(1, (total+size-1)/size)
	pageNo = min(max(pageNo, 1), pages)
	lo, hi := (pageNo-1)*size, min(pageNo*size, total)
	p := treePage{First: lo + 1, Last: hi, Total: total, Page: pageNo, Pages: pages}
	x := func(col int) int { return treeLeft + col*treeColW }
	y := func(row int) int { return treeTop + (row-lo)*treeRowH }
	textX := x(l.Columns-1) + treeLabel
	for r := lo; r < hi; r++ {
		row := l.Rows[r]
		n := row.Node
		class := fmt.Sprintf("node t%d", l.threads[n.ThreadID]%6)
		if n.IsHead {
			class += " head"
		}
		if row.Left {
			class += " left"
		}
		if n.ID == current {
			class += " current"
		}
		sr := svgRow{ID: n.ID.String(), ThreadID: n.ThreadID, Step: n.Step, X: x(row.Col), Y: y(r), TextX: textX, Class: class,
			Label: nodeWebLabel(*n, thread), Summary: safeLine(oneLine(n.Summary, 90)), Branch: n.ThreadID != thread, Row: r + 1,
			Current: n.ID == current}
		if n.IsHead {
			sr.HeadOf = n.ThreadID
		}
		if _, in := l.row(n.ParentID); n.ParentID != uuid.Nil && !in {
			// As ckpt log --graph says it: pruned, or in a thread
			// outside this tree (the source of the branch shown).
			sr.Label += " · parent not in this tree"
		}
		p.Rows = append(p.Rows, sr)
	}
	for _, ln := range l.Lines {
		if ln.ChildRow >= hi || ln.ParentRow < lo {
			continue
		}
		if ln.ChildRow < lo || ln.ParentRow >= hi {
			p.Cut = true
		}
		kind, class := "parent", "edge"
		if ln.Edge.Merge {
			kind, class = "merge", "edge merge"
		}
		if ln.Left {
			class += " left"
		}
		p.Lines = append(p.Lines, svgLine{From: ln.Edge.From.String(), To: ln.Edge.To.String(), Kind: kind, Class: class,
			D: linePath(x(ln.ChildCol), y(ln.ChildRow), x(ln.Lane), x(ln.ParentCol), y(ln.ParentRow))})
	}
	p.Width = textX + 760
	p.Height = treeTop*2 + max(0, hi-lo-1)*treeRowH
	return p
}

// linePath is the SVG path of a line from a child at (cx, cy) down lane x
// to a parent at (px, py): it leaves the child into its lane, and bends
// into the parent's column half a row above it.
func linePath(cx, cy, lane, px, py int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "M%d %d", cx, cy)
	if lane != cx {
		fmt.Fprintf(&b, " L%d %d", lane, cy+treeRowH/2)
	}
	if lane != px {
		fmt.Fprintf(&b, " L%d %d L%d %d", lane, py-treeRowH/2, px, py)
	} else {
		fmt.Fprintf(&b, " L%d %d", px, py)
	}
	return b.String()
}

// nodeWebLabel is the short text before a checkpoint's summary in the
// picture: step, trigger, its thread if another, namespace, head.
func nodeWebLabel(n engine.TreeNode, thread string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d · %s", n.Step, n.Trigger)
	if n.ThreadID != thread {
		fmt.Fprintf(&b, " · [%s]", oneLine(n.ThreadID, 60))
	}
	if n.Namespace != "" {
		fmt.Fprintf(&b, " · {%s}", oneLine(n.Namespace, 40))
	}
	if n.IsHead {
		b.WriteString(" · head")
	}
	return safeLine(b.String())
}
