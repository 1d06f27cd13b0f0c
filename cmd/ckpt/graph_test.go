package main

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// The drawing of ckpt log --graph is tested as a function of the tree: a
// parser written from the glyphs' documented meaning (graphHelp) reads the
// drawing back into edges, which must be the tree's edges exactly, and into
// the checkpoints marked as left behind by a rewind, which must be those a
// model of the history says were.

// parsedGraph is what a drawing says.
type parsedGraph struct {
	edges map[engine.TreeEdge]bool
	left  map[uuid.UUID]bool // drawn 'o'
	rows  []uuid.UUID
}

var idInLine = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// parseGraph reads a drawing whose labels start with the checkpoint id. It
// fails on anything the glyphs do not define: a line that starts from
// nowhere or vanishes, a run that ends nowhere, a second checkpoint on a
// row, a line drawn ':' that does not come from an 'o' (or the reverse).
func parseGraph(lines []string) (parsedGraph, error) {
	g := parsedGraph{edges: map[engine.TreeEdge]bool{}, left: map[uuid.UUID]bool{}}
	// line is one column being drawn: the child it comes from, whether it
	// goes to the child's merge parent, and whether it may still turn out
	// to be no line at all (below a checkpoint with no parent, the column
	// is blank).
	type line struct {
		child    uuid.UUID
		merge    bool
		left     bool
		maybe    bool
		fromNode int // the row it starts on, for messages
	}
	lanes := map[int]*line{}
	seen := map[uuid.UUID]bool{}
	for r, text := range lines {
		at := idInLine.FindStringIndex(text)
		if at == nil {
			return g, fmt.Errorf("row %d: no checkpoint id: %q", r, text)
		}
		id := uuid.MustParse(text[at[0]:at[1]])
		if seen[id] {
			return g, fmt.Errorf("row %d: %s drawn twice", r, id)
		}
		seen[id] = true
		g.rows = append(g.rows, id)
		drawing := strings.TrimRight(text[:at[0]], " ")
		cell := func(i int) byte {
			if 2*i < len(drawing) {
				return drawing[2*i]
			}
			return ' '
		}
		col := -1
		for p := 0; p < len(drawing); p++ {
			ch := drawing[p]
			if !strings.ContainsRune("*o|:-+'. ", rune(ch)) {
				return g, fmt.Errorf("row %d: unknown glyph %q in %q", r, ch, drawing)
			}
			if p%2 == 1 && ch != ' ' && ch != '-' {
				return g, fmt.Errorf("row %d: %q between columns in %q", r, ch, drawing)
			}
			if ch == '*' || ch == 'o' {
				if col >= 0 || p%2 == 1 {
					return g, fmt.Errorf("row %d: a second checkpoint in %q", r, drawing)
				}
				col = p / 2
			}
		}
		if col < 0 {
			return g, fmt.Errorf("row %d: no checkpoint glyph in %q", r, drawing)
		}
		nodeLeft := cell(col) == 'o'
		if nodeLeft {
			g.left[id] = true
		}
		// The run: from the checkpoint to the right, to a ' or a '.'.
		end := col
		for 2*end+1 < len(drawing) && drawing[2*end+1] == '-' {
			end++
			if !strings.ContainsRune("-+'.", rune(cell(end))) {
				return g, fmt.Errorf("row %d: the run stops at %q in %q", r, cell(end), drawing)
			}
		}
		if end > col && cell(end) != '\'' && cell(end) != '.' {
			return g, fmt.Errorf("row %d: the run ends in %q, not in a line, in %q", r, cell(end), drawing)
		}
		width := max(len(drawing)/2+1, len(lanes)+1)
		for i := range lanes {
			width = max(width, i+1)
		}
		next := map[int]*line{}
		for i := 0; i < width; i++ {
			ch := cell(i)
			inRun := i > col && i <= end
			if !inRun && i != col && strings.ContainsRune("-+'.", rune(ch)) {
				return g, fmt.Errorf("row %d: %q outside a run in %q", r, ch, drawing)
			}
			l := lanes[i]
			goesOn := i == col || ch == '|' || ch == ':' || ch == '+' || ch == '\''
			if l != nil && l.maybe && !goesOn {
				l = nil // the checkpoint above had no parent here
			}
			if l == nil {
				switch ch {
				case '|', ':', '+', '\'':
					return g, fmt.Errorf("row %d: column %d starts from nowhere in %q", r, i, drawing)
				case '.':
					next[i] = &line{child: id, merge: true, left: nodeLeft, fromNode: r}
				}
				continue
			}
			switch {
			case ch == ' ' || ch == '-' || ch == '.':
				return g, fmt.Errorf("row %d: the line from row %d vanishes in column %d of %q", r, l.fromNode, i, drawing)
			case i == col || ch == '\'':
				g.edges[engine.TreeEdge{From: id, To: l.child, Merge: l.merge}] = true
			case ch == '|' || ch == ':':
				if (ch == ':') != l.left {
					return g, fmt.Errorf("row %d: column %d drawn %q for a line from row %d (left behind: %v)", r, i, ch, l.fromNode, l.left)
				}
				l.maybe = false
				next[i] = l
			case ch == '+':
				l.maybe = false
				next[i] = l
			}
		}
		next[col] = &line{child: id, left: nodeLeft, maybe: true, fromNode: r}
		lanes = next
	}
	for i, l := range lanes {
		if !l.maybe {
			return g, fmt.Errorf("column %d: the line from row %d never ends", i, l.fromNode)
		}
	}
	return g, nil
}

// historyModel is a thread's history as a model writes it: every
// checkpoint ever written, with its true parents, and what gc deleted.
type historyModel struct {
	all     []engine.TreeNode // in write order
	byID    map[uuid.UUID]engine.TreeNode
	heads   map[threadLine]uuid.UUID
	lines   []threadLine // in the order they started
	deleted map[uuid.UUID]bool
	clock   time.Time
	seq     map[threadLine]int64
}

type threadLine struct{ thread, namespace string }

func newHistoryModel() *historyModel {
	return &historyModel{
		byID:    map[uuid.UUID]engine.TreeNode{},
		heads:   map[threadLine]uuid.UUID{},
		deleted: map[uuid.UUID]bool{},
		clock:   time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		seq:     map[threadLine]int64{},
	}
}

// write appends a checkpoint to l with parent (zero: l's head) and merge
// parent, and makes it l's head.
func (m *historyModel) write(l threadLine, parent, mergeParent uuid.UUID, tick time.Duration) uuid.UUID {
	if _, ok := m.heads[l]; !ok {
		m.lines = append(m.lines, l)
	}
	if parent == uuid.Nil {
		parent = m.heads[l]
	}
	step := int64(1)
	if p, ok := m.byID[parent]; ok {
		step = p.Step + 1
	}
	m.clock = m.clock.Add(tick)
	m.seq[l]++
	n := engine.TreeNode{ID: uuid.Must(uuid.NewV7()), ThreadID: l.thread, Namespace: l.namespace, Seq: m.seq[l], Step: step,
		CreatedAt: m.clock, Trigger: engine.TriggerManual, ParentID: parent, MergeParentID: mergeParent}
	m.all = append(m.all, n)
	m.byID[n.ID] = n
	m.heads[l] = n.ID
	return n.ID
}

// tree is what engine.Tree returns for the model's first thread: the
// checkpoints gc left, with the edges between them.
func (m *historyModel) tree() *engine.Tree {
	t := &engine.Tree{ThreadID: m.lines[0].thread}
	for _, n := range m.all {
		if m.deleted[n.ID] {
			continue
		}
		n.IsHead = m.heads[threadLine{n.ThreadID, n.Namespace}] == n.ID
		t.Nodes = append(t.Nodes, n)
	}
	for _, n := range t.Nodes {
		if n.ParentID != uuid.Nil && !m.deleted[n.ParentID] {
			t.Edges = append(t.Edges, engine.TreeEdge{From: n.ParentID, To: n.ID})
		}
		if n.MergeParentID != uuid.Nil && !m.deleted[n.MergeParentID] {
			t.Edges = append(t.Edges, engine.TreeEdge{From: n.MergeParentID, To: n.ID, Merge: true})
		}
	}
	return t
}

// expectedLeft is, from the true history, the checkpoints that must be
// drawn 'o': those not on the line from their thread's head back to its
// first checkpoint. Where gc deleted part of that line, whether an older
// checkpoint was on it cannot be seen in the tree, so only the ones
// written after the oldest survivor of the line's unbroken part count.
func expectedLeft(all map[uuid.UUID]engine.TreeNode, present []engine.TreeNode, deleted func(uuid.UUID) bool) map[uuid.UUID]bool {
	onLine := map[uuid.UUID]bool{}
	unbroken := map[threadLine]int64{}
	for _, h := range present {
		if !h.IsHead {
			continue
		}
		l := threadLine{h.ThreadID, h.Namespace}
		oldest, cut := h.Seq, false
		for n, ok := h, true; ok && (threadLine{n.ThreadID, n.Namespace}) == l; n, ok = all[n.ParentID] {
			onLine[n.ID] = true
			if cut = cut || deleted(n.ID); !cut {
				oldest = n.Seq
			}
		}
		unbroken[l] = oldest
	}
	out := map[uuid.UUID]bool{}
	for _, n := range present {
		if !onLine[n.ID] && n.Seq > unbroken[threadLine{n.ThreadID, n.Namespace}] {
			out[n.ID] = true
		}
	}
	return out
}

// checkDrawing draws t with the ids as labels, parses the drawing and
// compares it with t's edges and the expected marks.
func checkDrawing(t *testing.T, name string, tree *engine.Tree, left map[uuid.UUID]bool) drawingFeatures {
	t.Helper()
	lines := drawGraph(tree, 0, func(n engine.TreeNode, _, _ bool) string { return n.ID.String() })
	// A limit draws the first rows of the whole drawing, and no more.
	for _, limit := range []int{1, (len(lines) + 1) / 2} {
		part := drawGraph(tree, limit, func(n engine.TreeNode, _, _ bool) string { return n.ID.String() })
		if len(part) != min(limit, len(lines)) {
			t.Fatalf("%s: limit %d drew %d rows of %d", name, limit, len(part), len(lines))
		}
		for i, l := range part {
			drawing := func(l string) string { return strings.TrimRight(l[:len(l)-len(uuid.Nil.String())], " ") }
			if drawing(l) != drawing(lines[i]) || l[len(l)-36:] != lines[i][len(lines[i])-36:] {
				t.Fatalf("%s: limit %d, row %d:\n%q\nwhere the whole drawing has\n%q", name, limit, i, l, lines[i])
			}
		}
	}
	got, err := parseGraph(lines)
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, showGraph(tree, lines))
	}
	want := map[engine.TreeEdge]bool{}
	for _, e := range tree.Edges {
		want[e] = true
	}
	if !maps.Equal(got.edges, want) {
		var missing, extra []string
		for e := range want {
			if !got.edges[e] {
				missing = append(missing, edgeName(tree, e))
			}
		}
		for e := range got.edges {
			if !want[e] {
				extra = append(extra, edgeName(tree, e))
			}
		}
		t.Fatalf("%s: the drawing's edges are not the tree's: missing %v, extra %v\n%s", name, missing, extra, showGraph(tree, lines))
	}
	if len(got.rows) != len(tree.Nodes) {
		t.Fatalf("%s: %d rows for %d checkpoints\n%s", name, len(got.rows), len(tree.Nodes), showGraph(tree, lines))
	}
	if !maps.Equal(got.left, left) {
		t.Fatalf("%s: drawn as left behind %v, want %v\n%s", name, names(tree, got.left), names(tree, left), showGraph(tree, lines))
	}
	return features(tree, lines)
}

// nodeName is a short name for messages: thread/namespace#seq.
func nodeName(tree *engine.Tree, id uuid.UUID) string {
	for _, n := range tree.Nodes {
		if n.ID == id {
			return fmt.Sprintf("%s%s#%d", n.ThreadID, n.Namespace, n.Seq)
		}
	}
	return id.String()
}

func edgeName(tree *engine.Tree, e engine.TreeEdge) string {
	kind := "parent"
	if e.Merge {
		kind = "merge parent"
	}
	return fmt.Sprintf("%s -%s-> %s", nodeName(tree, e.To), kind, nodeName(tree, e.From))
}

func names(tree *engine.Tree, set map[uuid.UUID]bool) []string {
	var out []string
	for id := range set {
		out = append(out, nodeName(tree, id))
	}
	slices.Sort(out)
	return out
}

// showGraph is the drawing with short names, for a failure message.
func showGraph(tree *engine.Tree, lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(idInLine.ReplaceAllStringFunc(l, func(s string) string {
			n := nodeName(tree, uuid.MustParse(s))
			for _, x := range tree.Nodes {
				if x.ID.String() == s {
					if x.ParentID != uuid.Nil {
						n += " parent " + nodeName(tree, x.ParentID)
					}
					if x.MergeParentID != uuid.Nil {
						n += " merge " + nodeName(tree, x.MergeParentID)
					}
				}
			}
			return n
		}) + "\n")
	}
	return b.String()
}

// randomHistory writes a random history: snapshots, rewinds (to any
// checkpoint of a line, so lines are left behind and taken up again),
// branches of branches, merges either way, a sub-graph namespace and gc
// rounds that delete random checkpoints but heads. Some checkpoints share
// a timestamp.
func randomHistory(rng *rand.Rand, ops int) *historyModel {
	m := newHistoryModel()
	main := threadLine{"main", ""}
	m.write(main, uuid.Nil, uuid.Nil, time.Second)
	branches := 0
	for range ops {
		l := m.lines[rng.IntN(len(m.lines))]
		tick := time.Duration(rng.IntN(2)) * time.Second
		switch k := rng.IntN(100); {
		case k < 45:
			m.write(l, uuid.Nil, uuid.Nil, tick)
		case k < 60:
			if c := m.pick(rng, l); c != uuid.Nil {
				m.heads[l] = c
			}
		case k < 72:
			from := m.all[rng.IntN(len(m.all))]
			if m.deleted[from.ID] || from.Namespace != "" {
				continue
			}
			branches++
			m.write(threadLine{fmt.Sprintf("b%d", branches), ""}, from.ID, uuid.Nil, tick)
		case k < 82:
			other := m.lines[rng.IntN(len(m.lines))]
			if other == l || other.namespace != "" || l.namespace != "" {
				continue
			}
			m.write(l, uuid.Nil, m.heads[other], tick)
		case k < 94:
			m.write(threadLine{"main", "sub"}, uuid.Nil, uuid.Nil, tick)
		default:
			heads := map[uuid.UUID]bool{}
			for _, h := range m.heads {
				heads[h] = true
			}
			for _, n := range m.all {
				if !heads[n.ID] && rng.IntN(4) == 0 {
					m.deleted[n.ID] = true
				}
			}
		}
	}
	return m
}

// pick returns a random checkpoint of l that gc left, or zero.
func (m *historyModel) pick(rng *rand.Rand, l threadLine) uuid.UUID {
	var ids []uuid.UUID
	for _, n := range m.all {
		if (threadLine{n.ThreadID, n.Namespace}) == l && !m.deleted[n.ID] {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) == 0 {
		return uuid.Nil
	}
	return ids[rng.IntN(len(ids))]
}

func (m *historyModel) expectedLeft(tree *engine.Tree) map[uuid.UUID]bool {
	return expectedLeft(m.byID, tree.Nodes, func(id uuid.UUID) bool { return m.deleted[id] })
}

// For random histories the drawing reads back as exactly the tree's edges,
// parent and merge, and marks exactly the checkpoints a rewind left behind.
func TestGraphDrawsTheTreesEdges(t *testing.T) {
	t.Parallel()
	var seen drawingFeatures
	for seed := range uint64(600) {
		rng := rand.New(rand.NewPCG(seed, 18))
		m := randomHistory(rng, 1+rng.IntN(70))
		tree := m.tree()
		seen.add(checkDrawing(t, fmt.Sprintf("seed %d", seed), tree, m.expectedLeft(tree)))
	}
	t.Logf("%+v", seen)
	seen.require(t, 100)
}

// drawingFeatures counts what drawings hold, so a test can require that
// its trees reach every case.
type drawingFeatures struct {
	farJoins, crossings, merges, farMerges, left, parentMissing, reused int
}

func (f *drawingFeatures) add(g drawingFeatures) {
	f.farJoins += g.farJoins
	f.crossings += g.crossings
	f.merges += g.merges
	f.farMerges += g.farMerges
	f.left += g.left
	f.parentMissing += g.parentMissing
	f.reused += g.reused
}

func (f drawingFeatures) require(t *testing.T, n int) {
	t.Helper()
	if f.farJoins < n || f.crossings < n || f.merges < n || f.farMerges < n/4 || f.left < n || f.parentMissing < n || f.reused < n {
		t.Fatalf("the trees miss cases (each wants %d): %+v", n, f)
	}
}

// features counts, in a drawing, joins from a column not next to the
// checkpoint, runs crossing a line, merges (and those not into the next
// column), checkpoints drawn 'o', checkpoints whose parent is missing,
// and columns taken again two rows after a line ended in them.
func features(tree *engine.Tree, lines []string) drawingFeatures {
	var f drawingFeatures
	hasParent := map[uuid.UUID]bool{}
	for _, e := range tree.Edges {
		if !e.Merge {
			hasParent[e.To] = true
		}
	}
	for _, n := range tree.Nodes {
		if n.ParentID != uuid.Nil && !hasParent[n.ID] {
			f.parentMissing++
		}
	}
	for r, l := range lines {
		d := l[:idInLine.FindStringIndex(l)[0]]
		f.farJoins += strings.Count(d, "-'") - strings.Count(d, "*-'") - strings.Count(d, "o-'")
		f.crossings += strings.Count(d, "+")
		f.merges += strings.Count(d, ".")
		f.farMerges += strings.Count(d, "-.") - strings.Count(d, "*-.") - strings.Count(d, "o-.")
		f.left += strings.Count(d, "o")
		if r >= 2 {
			above, twoUp := lines[r-1], lines[r-2]
			for p := 0; p < len(d); p += 2 {
				if (d[p] == '*' || d[p] == 'o') && above[p] == ' ' && (twoUp[p] == '*' || twoUp[p] == 'o') {
					f.reused++
				}
			}
		}
	}
	return f
}
