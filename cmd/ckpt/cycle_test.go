package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// finishes runs fn and fails the test when it panics or is still running
// after 10 seconds, so a drawing that loops fails its test rather than
// hanging the suite (the goroutine spins on until the test binary ends).
func finishes(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	select {
	case p := <-done:
		if p != nil {
			t.Fatalf("%s panics: %v", what, p)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still runs after 10s", what)
	}
}

// parentCycleDB is a SQLite file whose thread "t" is r <- a <- b <- c
// (c the head) with a's parent then set to c by hand: a, b and c form a
// cycle, r stands alone. Neither store's schema checks parent ids, and a
// hand UPDATE is what an operator mending data may run.
func parentCycleDB(t *testing.T) (dbURL string, root uuid.UUID, cycle []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	dbURL = "sqlite:" + filepath.Join(t.TempDir(), "cycle.db")
	eng, err := pgcheckpoint.Open(ctx, dbURL, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	for range 4 {
		r, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Summary: "written"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	eng.Close()
	conn, err := sql.Open("sqlite", strings.TrimPrefix(dbURL, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(`UPDATE checkpoints SET parent_checkpoint_id = ? WHERE checkpoint_id = ?`, ids[3].String(), ids[1].String()); err != nil {
		t.Fatal(err)
	}
	return dbURL, ids[0], ids[1:]
}

// ckpt log --graph of a thread with a parent cycle draws every checkpoint
// once and marks those in the cycle; it used to walk the cycle for ever
// (and ignore Ctrl-C), or, with the walk stopped, draw nothing.
func TestLogGraphDrawsAParentCycle(t *testing.T) {
	t.Parallel()
	dbURL, root, cycle := parentCycleDB(t)
	var out, errOut bytes.Buffer
	var err error
	finishes(t, "ckpt log t --graph", func() {
		err = run(context.Background(), []string{"--database", dbURL, "log", "t", "--graph"}, &out, &errOut, terminals{})
	})
	if err != nil {
		t.Fatalf("log --graph: %v\n%s", err, errOut.String())
	}
	drawing := out.String()
	lines := strings.Split(strings.TrimSuffix(drawing, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d rows; want the 4 checkpoints:\n%s", len(lines), drawing)
	}
	for _, id := range cycle {
		if n := strings.Count(drawing, id.String()); n != 1 {
			t.Errorf("%s, in the cycle, drawn %d times:\n%s", id, n, drawing)
		}
	}
	for _, l := range lines {
		inCycle := !strings.Contains(l, root.String())
		if strings.Contains(l, "(in a parent cycle)") != inCycle {
			t.Errorf("row %q: in the cycle %v, marked %v", l, inCycle, !inCycle)
		}
	}
}

// The thread page draws the tree of a thread with a parent cycle, every
// checkpoint with the cycle's marked, where it used to loop for ever.
func TestWebThreadPageDrawsAParentCycle(t *testing.T) {
	t.Parallel()
	dbURL, root, cycle := parentCycleDB(t)
	eng, err := pgcheckpoint.Open(context.Background(), dbURL, pgcheckpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s, err := newWebServer(eng, false, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4711})
	if err != nil {
		t.Fatal(err)
	}
	f := &webFixture{t: t, s: s, eng: eng, ctx: context.Background()}
	var code int
	var body string
	finishes(t, "GET /thread?id=t", func() {
		w := f.get("/thread?id=t")
		code, body = w.Code, w.Body.String()
	})
	if code != http.StatusOK {
		t.Fatalf("the thread page: %d\n%s", code, body)
	}
	for _, id := range append([]uuid.UUID{root}, cycle...) {
		if !strings.Contains(body, `data-id="`+id.String()+`"`) {
			t.Errorf("checkpoint %s is not drawn", id)
		}
	}
	if n := strings.Count(body, "in a parent cycle"); n != len(cycle) {
		t.Errorf("%d checkpoints marked in a parent cycle; want %d", n, len(cycle))
	}
}

// Whatever the cycles (a self-parent, a merge parent that descends from
// its child), every drawing of a tree shows each checkpoint once, marks
// those in a cycle, and draws no line up the page.
func TestTreeDrawingsTakeEveryCycle(t *testing.T) {
	t.Parallel()
	cases := map[string]func(m *historyModel) []uuid.UUID{
		"its own parent": func(m *historyModel) []uuid.UUID {
			main := threadLine{"main", ""}
			m.write(main, uuid.Nil, uuid.Nil, 1)
			self := m.write(main, uuid.Nil, uuid.Nil, 1)
			m.write(main, uuid.Nil, uuid.Nil, 1)
			n := m.byID[self]
			n.ParentID = self
			m.byID[self] = n
			m.all[1] = n
			return []uuid.UUID{self}
		},
		"a merge parent that descends from it": func(m *historyModel) []uuid.UUID {
			main, b := threadLine{"main", ""}, threadLine{"b", ""}
			m1 := m.write(main, uuid.Nil, uuid.Nil, 1)
			m2 := m.write(main, uuid.Nil, uuid.Nil, 1)
			b1 := m.write(b, m2, uuid.Nil, 1)
			m.write(main, uuid.Nil, uuid.Nil, 1)
			n := m.byID[m2]
			n.MergeParentID = b1
			m.byID[m2] = n
			m.all[1] = n
			_ = m1
			return []uuid.UUID{m2, b1}
		},
		"two cycles, one above the other": func(m *historyModel) []uuid.UUID {
			main := threadLine{"main", ""}
			var ids []uuid.UUID
			for range 6 {
				ids = append(ids, m.write(main, uuid.Nil, uuid.Nil, 1))
			}
			for _, c := range [][2]int{{1, 2}, {3, 5}} { // 1 <-> 2, 3 <- 4 <- 5 <- 3
				n := m.byID[ids[c[0]]]
				n.ParentID = ids[c[1]]
				m.byID[n.ID] = n
				m.all[c[0]] = n
			}
			return ids[1:]
		},
		"a cycle below a newer one": func(m *historyModel) []uuid.UUID {
			// x1 <-> x2 merges in x3, whose parent is in x4 <-> x5: the
			// newer cycle is the older one's ancestor.
			main := threadLine{"main", ""}
			var x []uuid.UUID
			for range 6 {
				x = append(x, m.write(main, uuid.Nil, uuid.Nil, 1))
			}
			for i, parent := range map[int]int{1: 2, 2: 1, 3: 4, 4: 5, 5: 4} {
				n := m.byID[x[i]]
				n.ParentID = x[parent]
				if i == 1 {
					n.MergeParentID = x[3]
				}
				m.byID[n.ID] = n
				m.all[i] = n
			}
			return []uuid.UUID{x[1], x[2], x[4], x[5]}
		},
	}
	for name, build := range cases {
		m := newHistoryModel()
		inCycle := map[uuid.UUID]bool{}
		for _, id := range build(m) {
			inCycle[id] = true
		}
		tree := m.tree()
		var lines []string
		var l *treeLayout
		finishes(t, name+": drawing", func() {
			lines = drawGraph(tree, 0, func(n engine.TreeNode, _, inCycle bool) string {
				return fmt.Sprintf("%s %v", n.ID, inCycle)
			})
			l = layoutTree(tree)
		})
		if len(lines) != len(tree.Nodes) || len(l.Rows) != len(tree.Nodes) {
			t.Fatalf("%s: %d rows drawn, %d laid out; want %d", name, len(lines), len(l.Rows), len(tree.Nodes))
		}
		drawn := map[uuid.UUID]int{}
		for i, line := range lines {
			f := strings.Fields(line)
			id := uuid.MustParse(f[len(f)-2])
			drawn[id]++
			if marked := f[len(f)-1] == "true"; marked != inCycle[id] || l.Rows[i].Cycle != inCycle[id] {
				t.Errorf("%s: %s in a cycle %v; marked %s in the graph, %v on the page", name, id, inCycle[id], f[len(f)-1], l.Rows[i].Cycle)
			}
			if l.Rows[i].Node.ID != id {
				t.Errorf("%s: row %d is %s in the graph, %s on the page", name, i, id, l.Rows[i].Node.ID)
			}
		}
		for _, n := range tree.Nodes {
			if drawn[n.ID] != 1 {
				t.Errorf("%s: %s drawn %d times", name, n.ID, drawn[n.ID])
			}
		}
		for _, row := range strings.Split(strings.Join(lines, "\n"), "\n") {
			if strings.TrimRight(row, " ") == "" {
				t.Errorf("%s: an empty row", name)
			}
		}
		pg := l.page("main", 1, 100, uuid.Nil)
		for _, ln := range l.Lines {
			if !ln.Cycle && ln.ChildRow >= ln.ParentRow {
				t.Errorf("%s: the line %+v goes up the page", name, ln)
			}
			if ln.Cycle && (!inCycle[ln.Edge.From] || !inCycle[ln.Edge.To]) {
				t.Errorf("%s: the line %+v, not in a cycle, is not drawn", name, ln)
			}
		}
		if len(pg.Rows) != len(tree.Nodes) {
			t.Errorf("%s: the page draws %d rows", name, len(pg.Rows))
		}
	}
}
