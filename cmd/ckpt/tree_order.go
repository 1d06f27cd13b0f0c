package main

import (
	"container/heap"
	"slices"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// treeIndex is a tree's edges by node index, and the two rules every
// drawing of a tree follows (ckpt log --graph and the pictures of ckpt
// web): the order of its rows (newestFirst) and the checkpoints a rewind
// left behind (leftBehind). Indices rather than maps of ids: a thread
// page lays out its whole tree on every request, 50,000 checkpoints and
// more.
type treeIndex struct {
	index    map[uuid.UUID]int32 // a node's index in Tree.Nodes
	from     []int32             // each edge's parent
	parent   []int32             // each node's parent (not merge parent), -1 for none in the tree
	out      []int32             // node i's edges to its parents are out[outStart[i]:outStart[i+1]]
	outStart []int32
}

// indexTree indexes t's edges.
func indexTree(t *engine.Tree) treeIndex {
	n := len(t.Nodes)
	x := treeIndex{index: make(map[uuid.UUID]int32, n), from: make([]int32, len(t.Edges)),
		parent: make([]int32, n), outStart: make([]int32, n+1), out: make([]int32, len(t.Edges))}
	for i := range t.Nodes {
		x.index[t.Nodes[i].ID] = int32(i)
		x.parent[i] = -1
	}
	to := make([]int32, len(t.Edges))
	for i, e := range t.Edges {
		x.from[i], to[i] = x.index[e.From], x.index[e.To]
		x.outStart[to[i]+1]++
		if !e.Merge {
			x.parent[to[i]] = x.from[i]
		}
	}
	for i := 1; i <= n; i++ {
		x.outStart[i] += x.outStart[i-1]
	}
	next := slices.Clone(x.outStart[:n])
	for i := range t.Edges {
		x.out[next[to[i]]] = int32(i)
		next[to[i]]++
	}
	return x
}

// newestFirst orders the nodes so every checkpoint comes before its
// parents, and otherwise newest first (indexHeap's order). A cycle of
// parents (a parent id changed by hand: neither store's schema prevents
// it) has no such order: its checkpoints come once no other can, newest
// first, and cycle reports which nodes are in one (nil when none is), so
// a drawing shows every node and marks those.
func (x treeIndex) newestFirst(nodes []engine.TreeNode) (order []int32, cycle []bool) {
	children := make([]int32, len(nodes))
	for _, f := range x.from {
		children[f]++
	}
	ready := &indexHeap{nodes: nodes}
	for i := range nodes {
		if children[i] == 0 {
			ready.ix = append(ready.ix, int32(i))
		}
	}
	heap.Init(ready)
	order = make([]int32, 0, len(nodes))
	placed := make([]bool, len(nodes))
	var stuck *indexHeap
	for {
		for ready.Len() > 0 {
			i := heap.Pop(ready).(int32)
			order = append(order, i)
			placed[i] = true
			for _, e := range x.out[x.outStart[i]:x.outStart[i+1]] {
				p := x.from[e]
				if children[p]--; children[p] == 0 && !placed[p] {
					heap.Push(ready, p)
				}
			}
		}
		if len(order) == len(nodes) {
			return order, cycle
		}
		// Every node left has a child left: some are in a cycle. Take
		// the newest of the cycle whose nodes have no children left
		// outside it (the latest component Tarjan's algorithm finds).
		if stuck == nil {
			var component []int32
			component, cycle = x.cycles()
			stuck = &indexHeap{nodes: nodes, component: component}
			for i, in := range cycle {
				if in {
					stuck.ix = append(stuck.ix, int32(i))
				}
			}
			heap.Init(stuck)
		}
		for {
			i := heap.Pop(stuck).(int32)
			if !placed[i] {
				heap.Push(ready, i)
				break
			}
		}
	}
}

// cycles finds the strongly connected components of the graph of child
// to parent edges (Tarjan's algorithm, without recursion: a line of
// history is as deep as it is long). component numbers each node's
// component in the order found, which puts a component after every
// component of its ancestors; cycle marks the nodes of components of
// more than one node, and nodes that are their own parents.
func (x treeIndex) cycles() (component []int32, cycle []bool) {
	n := len(x.parent)
	index, low := make([]int32, n), make([]int32, n)
	for i := range index {
		index[i] = -1
	}
	component, cycle = make([]int32, n), make([]bool, n)
	onStack := make([]bool, n)
	var stack []int32
	type frame struct{ v, next int32 } // next: v's next edge in out
	var calls []frame
	found, components := int32(0), int32(0)
	visit := func(v int32) {
		index[v], low[v] = found, found
		found++
		stack = append(stack, v)
		onStack[v] = true
		calls = append(calls, frame{v, x.outStart[v]})
	}
	for s := range int32(n) {
		if index[s] >= 0 {
			continue
		}
		visit(s)
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if f.next < x.outStart[v+1] {
				w := x.from[x.out[f.next]]
				f.next++
				switch {
				case w == v:
					cycle[v] = true
				case index[w] < 0:
					visit(w)
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			k := len(stack) - 1
			for stack[k] != v {
				k--
			}
			for _, w := range stack[k:] {
				onStack[w] = false
				component[w] = components
				cycle[w] = cycle[w] || len(stack)-k > 1
			}
			stack = stack[:k]
			components++
		}
	}
	return component, cycle
}

// indexHeap pops the newest node first: latest created, then by thread
// id, then highest seq. With component, the node of the latest component
// comes first (see cycles).
type indexHeap struct {
	ix        []int32
	nodes     []engine.TreeNode
	component []int32
}

func (h *indexHeap) Len() int { return len(h.ix) }
func (h *indexHeap) Less(i, j int) bool {
	if h.component != nil && h.component[h.ix[i]] != h.component[h.ix[j]] {
		return h.component[h.ix[i]] > h.component[h.ix[j]]
	}
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
func (h *indexHeap) Push(v any)    { h.ix = append(h.ix, v.(int32)) }
func (h *indexHeap) Pop() any {
	n := h.ix[len(h.ix)-1]
	h.ix = h.ix[:len(h.ix)-1]
	return n
}

// leftBehind marks the checkpoints a rewind left behind: those of a
// thread (and namespace) that are not on the line from its head back to
// its first checkpoint. Where a gc cut that line, a checkpoint written
// before the cut may have been on it, so only those written after the
// cut's oldest survivor count.
func (x treeIndex) leftBehind(nodes []engine.TreeNode) []bool {
	type line struct{ thread, namespace string }
	lineOf := func(i int32) line { return line{nodes[i].ThreadID, nodes[i].Namespace} }
	onLine := make([]bool, len(nodes))
	oldest := map[line]int64{} // the seq of the oldest checkpoint on the head's line
	for i := range nodes {
		if !nodes[i].IsHead {
			continue
		}
		j := int32(i)
		l := lineOf(j)
		for {
			onLine[j] = true
			p := x.parent[j]
			if p < 0 || lineOf(p) != l || onLine[p] { // onLine: a cycle
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
