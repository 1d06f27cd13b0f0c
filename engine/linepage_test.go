package engine_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// LinePage says yes only to a range that is the page a walk of parents
// would read: each row the parent of the one before, ending at the limit
// or at a checkpoint with no parent.
func TestLinePage(t *testing.T) {
	id := func(n byte) uuid.UUID { return uuid.UUID{15: n} }
	// row n has parent n-1; row 1 is the thread's first.
	row := func(n byte) engine.CheckpointInfo {
		c := engine.CheckpointInfo{ID: id(n)}
		if n > 1 {
			c.ParentID = id(n - 1)
		}
		return c
	}
	rows := func(ns ...byte) []engine.CheckpointInfo {
		var out []engine.CheckpointInfo
		for _, n := range ns {
			out = append(out, row(n))
		}
		return out
	}
	for _, c := range []struct {
		name  string
		infos []engine.CheckpointInfo
		limit int
		want  bool
	}{
		{"nothing read", nil, 5, false},
		{"the first checkpoint alone", rows(1), 5, true},
		{"a full page", rows(5, 4, 3), 3, true},
		{"a page down to the first", rows(3, 2, 1), 5, true},
		{"one of a page of one", rows(7), 1, true},
		{"short of the page, the line goes on", rows(7, 6), 5, false},
		{"a row that is not the parent (a rewind)", rows(9, 7, 6), 3, false},
		{"a parent missing at the end", rows(4, 3, 1), 3, false},
	} {
		if got := engine.LinePage(c.infos, c.limit); got != c.want {
			t.Errorf("%s: LinePage = %v, want %v", c.name, got, c.want)
		}
	}
}
