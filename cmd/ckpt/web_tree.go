package main

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// The picture of a tree on a thread page: the rows of ckpt log --graph
// (newest first, every checkpoint before its parents), each checkpoint a
// dot in a column, and each edge of engine.Tree a line from the child down
// its own column (a merge's line from a column of its own, to the right)
// to the parent's row, where it bends into the parent's column. Columns are
// reused, but not by a line that starts right below the end of another.
// In a cycle of parents (see treeIndex.newestFirst) the line up to a
// parent drawn above is not drawn: the checkpoints say they are in one.

// treeRow is one checkpoint of a laid-out tree.
type treeRow struct {
	Node  *engine.TreeNode
	Col   int
	Left  bool // a rewind left it behind (see treeIndex.leftBehind)
	Cycle bool // in a cycle of parents
}

// treeLine is one edge of a laid-out tree: from the child's row and column
// along Lane to the parent's row and column.
type treeLine struct {
	Edge                      engine.TreeEdge
	ChildRow, ParentRow       int
	ChildCol, Lane, ParentCol int
	Left                      bool // the child was left behind by a rewind
	Cycle                     bool // up to a parent above: not drawn
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

// layoutTree lays t out (see above), in the rows ckpt log --graph draws
// (treeIndex's order and marks).
func layoutTree(t *engine.Tree) *treeLayout {
	n := len(t.Nodes)
	l := &treeLayout{Rows: make([]treeRow, n), Lines: make([]treeLine, len(t.Edges)),
		rowOf: make([]int32, n), threads: map[string]int{}}
	for i, th := range threadsOf(t) {
		l.threads[th] = i
	}
	x := indexTree(t)
	l.index = x.index
	from, out, outStart := x.from, x.out, x.outStart
	for i, e := range t.Edges {
		l.Lines[i] = treeLine{Edge: e}
	}
	left := x.leftBehind(t.Nodes)
	order, cycle := x.newestFirst(t.Nodes)
	placed := make([]bool, n)

	// lanes[c] is the index of the line going down column c, or -1. A
	// line takes the lowest free column (avail, a heap); a column whose
	// line ended on row r is free again from row r+2 (cooling, in the
	// order of its rows), so a line does not start right below the end of
	// another. waiting[ni] holds the columns of the lines down to node ni.
	// Each row costs its own lines' work, not the number of columns: N
	// checkpoints forked from one are N columns side by side.
	var lanes []int
	var avail columnHeap
	type cooled struct{ col, from int }
	var cooling []cooled
	waiting := make([][]int, n)
	take := func(not int) int {
		var skipped bool
		if len(avail) > 0 && avail[0] == not {
			heap.Pop(&avail)
			skipped = true
		}
		c := len(lanes)
		if len(avail) > 0 {
			c = heap.Pop(&avail).(int)
		} else {
			lanes = append(lanes, -1)
		}
		if skipped {
			heap.Push(&avail, not)
		}
		return c
	}
	var ending []int
	for r, ni := range order {
		for len(cooling) > 0 && cooling[0].from <= r {
			heap.Push(&avail, cooling[0].col)
			cooling = cooling[1:]
		}
		l.rowOf[ni] = int32(r)
		ends := waiting[ni]
		slices.Sort(ends)
		waiting[ni] = nil
		col, taken := -1, false
		ending = ending[:0]
		for _, c := range ends {
			if col < 0 {
				col = c
			}
			ending = append(ending, lanes[c])
			lanes[c] = -1
		}
		if col < 0 {
			col, taken = take(-1), true
		}
		for _, li := range ending {
			l.Lines[li].ParentRow, l.Lines[li].ParentCol = r, col
		}
		l.Rows[r] = treeRow{Node: &t.Nodes[ni], Col: col, Left: left[ni], Cycle: cycle != nil && cycle[ni]}
		placed[ni] = true
		// The parent's line goes down this column; a merge parent's down a
		// free one to the right.
		for _, li := range out[outStart[ni]:outStart[ni+1]] {
			if p := from[li]; placed[p] {
				l.Lines[li] = treeLine{Edge: l.Lines[li].Edge, ChildRow: r, ParentRow: int(l.rowOf[p]), ChildCol: col, Lane: col,
					ParentCol: l.Rows[l.rowOf[p]].Col, Left: left[ni], Cycle: true}
				continue
			}
			lane := col
			if l.Lines[li].Edge.Merge {
				lane = take(col)
			}
			lanes[lane] = int(li)
			waiting[from[li]] = append(waiting[from[li]], lane)
			l.Lines[li].ChildRow, l.Lines[li].ChildCol, l.Lines[li].Lane = r, col, lane
			l.Lines[li].Left = left[ni]
		}
		for _, c := range ends {
			if lanes[c] < 0 {
				cooling = append(cooling, cooled{c, r + 2})
			}
		}
		if taken && lanes[col] < 0 {
			heap.Push(&avail, col) // no line ended here: free on the next row
		}
		l.Columns = max(l.Columns, len(lanes))
	}
	return l
}

// columnHeap is a min-heap of free columns (container/heap).
type columnHeap []int

func (h columnHeap) Len() int           { return len(h) }
func (h columnHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h columnHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *columnHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *columnHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
			Label: nodeWebLabel(*n, thread), Summary: termsafe.Line(oneLine(n.Summary, 90)), Branch: n.ThreadID != thread, Row: r + 1,
			Current: n.ID == current}
		if n.IsHead {
			sr.HeadOf = n.ThreadID
		}
		if _, in := l.row(n.ParentID); n.ParentID != uuid.Nil && !in {
			// As ckpt log --graph says it: pruned, or in a thread
			// outside this tree (the source of the branch shown).
			sr.Label += " · parent not in this tree"
		}
		if row.Cycle {
			sr.Label += " · in a parent cycle"
		}
		p.Rows = append(p.Rows, sr)
	}
	for _, ln := range l.Lines {
		if ln.Cycle || ln.ChildRow >= hi || ln.ParentRow < lo {
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
	return termsafe.Line(b.String())
}
