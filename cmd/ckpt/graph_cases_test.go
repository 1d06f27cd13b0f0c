package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite"
)

// drawNamed draws a model's tree with "thread step" labels, and checks
// that it parses back into the tree's edges.
func drawNamed(t *testing.T, m *historyModel) string {
	t.Helper()
	tree := m.tree()
	lines := drawGraph(tree, 0, func(n engine.TreeNode, parentMissing, _ bool) string {
		s := fmt.Sprintf("%s %d", n.ThreadID, n.Step)
		if parentMissing {
			s += " (parent pruned)"
		}
		return s
	})
	withIDs := drawGraph(tree, 0, func(n engine.TreeNode, _, _ bool) string { return n.ID.String() })
	checkDrawing(t, "fixed case", tree, m.expectedLeft(tree))
	for i := range lines {
		if strings.Fields(lines[i])[0] != strings.Fields(withIDs[i])[0] {
			t.Fatalf("the label changes the drawing:\n%s\n%s", strings.Join(lines, "\n"), strings.Join(withIDs, "\n"))
		}
	}
	return strings.Join(lines, "\n")
}

func wantDrawing(t *testing.T, got string, want ...string) {
	t.Helper()
	if w := strings.Join(want, "\n"); got != w {
		t.Fatalf("drawing:\n%s\nwant:\n%s", got, w)
	}
}

// Issue 18's first defect: a line joining a checkpoint two columns away
// was drawn as '/' into the neighbouring column, so main's step 2 looked
// like the parent of branch a's line only. The join now runs across the
// line between, to main's step 2 itself.
func TestGraphJoinAcrossALine(t *testing.T) {
	t.Parallel()
	m := newHistoryModel()
	main, a, b := threadLine{"main", ""}, threadLine{"a", ""}, threadLine{"b", ""}
	m1 := m.write(main, uuid.Nil, uuid.Nil, 1)
	m2 := m.write(main, uuid.Nil, uuid.Nil, 1)
	m.write(a, m1, uuid.Nil, 1)
	m.write(b, m2, uuid.Nil, 1)
	m.write(a, uuid.Nil, uuid.Nil, 1)
	m.write(main, uuid.Nil, uuid.Nil, 1)
	wantDrawing(t, drawNamed(t, m),
		"*     main 3",
		"| *   a 3",
		"| | * b 3",
		"| * | a 2",
		"*-+-' main 2",
		"*-'   main 1")
}

// Issue 18's second defect, as the demo makes it: a rewind, a branch,
// its merge, then a gc that prunes the branch but its head. The branch
// head's column ends at it (its parent is gone), and the line the rewind
// left behind (drawn 'o') does not take that column over, so it cannot
// read as the branch head's parent.
func TestGraphPrunedParentAfterAMerge(t *testing.T) {
	t.Parallel()
	m := newHistoryModel()
	main, b := threadLine{"main", ""}, threadLine{"b", ""}
	var ids []uuid.UUID
	for range 6 {
		ids = append(ids, m.write(main, uuid.Nil, uuid.Nil, 1))
	}
	m.heads[main] = ids[3] // rewind to step 4
	var branch []uuid.UUID
	for i := range 4 {
		parent := uuid.Nil
		if i == 0 {
			parent = ids[3]
		}
		branch = append(branch, m.write(b, parent, uuid.Nil, 1))
	}
	m.write(main, uuid.Nil, m.heads[b], 1)
	for _, id := range branch[:3] {
		m.deleted[id] = true
	}
	wantDrawing(t, drawNamed(t, m),
		"*-.   main 5",
		"| *   b 8 (parent pruned)",
		"|   o main 6",
		"|   o main 5",
		"*---' main 4",
		"*     main 3",
		"*     main 2",
		"*     main 1")
}

// A merge whose own parent was pruned: its merge line starts from it, and
// its column ends there.
func TestGraphMergeWithItsParentPruned(t *testing.T) {
	t.Parallel()
	m := newHistoryModel()
	main, b := threadLine{"main", ""}, threadLine{"b", ""}
	m1 := m.write(main, uuid.Nil, uuid.Nil, 1)
	m2 := m.write(main, uuid.Nil, uuid.Nil, 1)
	m.write(b, m1, uuid.Nil, 1)
	m.write(main, uuid.Nil, m.heads[b], 1)
	m.deleted[m2] = true
	wantDrawing(t, drawNamed(t, m),
		"*-. main 3 (parent pruned)",
		"  * b 2",
		"  * main 1")
}

// Agent text in a label cannot add rows to the drawing: a thread id with
// a newline and terminal controls is shown on its checkpoint's row, escaped.
func TestGraphLabelsStayOnTheirRow(t *testing.T) {
	t.Parallel()
	m := newHistoryModel()
	evil := threadLine{"x\n*-' \x1b[2Jforged\tcell", ""}
	m.write(threadLine{"main", ""}, uuid.Nil, uuid.Nil, 1)
	m.write(evil, m.heads[threadLine{"main", ""}], uuid.Nil, 1)
	tree := m.tree()
	lines := drawGraph(tree, 0, func(n engine.TreeNode, parentMissing, inCycle bool) string {
		return nodeLabel(n, parentMissing, inCycle, "main")
	})
	if len(lines) != 2 {
		t.Fatalf("%d rows for 2 checkpoints:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if strings.ContainsAny(l, "\n\t\x1b") {
			t.Fatalf("a row holds a raw control: %q", l)
		}
	}
	if !strings.Contains(lines[0], `[x\u000a*-' \u001b[2Jforged\u0009cell]`) {
		t.Fatalf("the thread id is not shown escaped: %q", lines[0])
	}
	if _, err := parseGraph(lines); err != nil {
		t.Fatal(err)
	}
}

// Trees the real engine writes on a SQLite file (rewinds, branches of
// branches, merges either way, a namespace, retention and prune) draw as
// their edges, with ckpt log's own labels.
func TestGraphDrawsEngineTrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var seen drawingFeatures
	for seed := range uint64(30) {
		name := fmt.Sprintf("engine seed %d", seed)
		store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "tree.db"), sqlite.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		eng := engine.New(store, engine.Config{})
		rng := rand.New(rand.NewPCG(seed, 18))
		history := map[uuid.UUID]engine.TreeNode{} // every checkpoint written, as a tree read showed it
		read := func() *engine.Tree {
			t.Helper()
			tree, err := eng.Tree(ctx, "main")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, n := range tree.Nodes {
				history[n.ID] = n
			}
			return tree
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		pick := func(thread string) uuid.UUID {
			var ids []uuid.UUID
			for _, n := range read().Nodes {
				if n.Namespace == "" && (thread == "" || n.ThreadID == thread) {
					ids = append(ids, n.ID)
				}
			}
			return ids[rng.IntN(len(ids))]
		}
		threads := []string{"main"}
		_, err = eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "main"})
		must(err)
		for range 45 {
			thread := threads[rng.IntN(len(threads))]
			switch k := rng.IntN(100); {
			case k < 45:
				_, err = eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Trigger: engine.TriggerToolCall})
			case k < 52:
				_, err = eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "main", Namespace: "sub"})
			case k < 67:
				_, err = eng.Rewind(ctx, pick(thread))
			case k < 79:
				var br engine.BranchResult
				if br, err = eng.Branch(ctx, pick(""), "b"); err == nil {
					threads = append(threads, br.ThreadID)
				}
			case k < 90:
				if into := threads[rng.IntN(len(threads))]; into != thread {
					_, err = eng.MergeBranch(ctx, thread, into)
				}
			case k < 96:
				read()
				_, err = eng.PruneThreads(ctx, engine.KeepLastN(1+rng.IntN(3)), thread)
			default:
				read()
				_, err = eng.PruneThreads(ctx, engine.KeepLatest(), thread)
			}
			must(err)
		}
		tree := read()
		present := map[uuid.UUID]bool{}
		for _, n := range tree.Nodes {
			present[n.ID] = true
		}
		left := expectedLeft(history, tree.Nodes, func(id uuid.UUID) bool { return !present[id] })
		seen.add(checkDrawing(t, name, tree, left))

		// ckpt log's labels start with the id: the same drawing.
		lines := drawGraph(tree, 0, func(n engine.TreeNode, parentMissing, inCycle bool) string {
			return nodeLabel(n, parentMissing, inCycle, "main")
		})
		got, err := parseGraph(lines)
		if err != nil || len(got.edges) != len(tree.Edges) {
			t.Fatalf("%s: with ckpt log's labels: %v\n%s", name, err, strings.Join(lines, "\n"))
		}
		must(eng.Close())
	}
	t.Logf("%+v", seen)
	seen.require(t, 5)
}
