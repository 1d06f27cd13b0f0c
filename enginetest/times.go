package enginetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// testTimesAreUTC: every time a call returns is in UTC, on every store, so
// that a time prints, marshals and compares with == the same whichever
// store wrote it (a time in the process's local zone is the same instant,
// but another value).
func testTimesAreUTC(t *testing.T, e *env) {
	eng := e.eng
	var bad []string
	check := func(what string, at time.Time) {
		t.Helper()
		if at.IsZero() {
			t.Fatalf("%s: no time", what)
		}
		if at.Location() != time.UTC {
			bad = append(bad, fmt.Sprintf("%s in %s", what, at.Location()))
		}
	}
	first, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "utc", Messages: json.RawMessage(`[{"role":"user","content":"hi"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	check("Snapshot", first.CreatedAt)
	second, err := eng.Snapshot(e.ctx, engine.SnapshotInput{ThreadID: "utc", State: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Append(e.ctx, engine.AppendInput{ThreadID: "utc", SetState: json.RawMessage(`{"b":2}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Branch(e.ctx, first.ID, "b"); err != nil {
		t.Fatal(err)
	}
	if err := eng.SetThreadExpiry(e.ctx, "utc", time.Now().In(time.FixedZone("east", 5*3600)).Add(time.Hour), engine.KeepNone()); err != nil {
		t.Fatal(err)
	}
	cp, err := eng.Get(e.ctx, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("Get", cp.CreatedAt)
	head, err := eng.Latest(e.ctx, "utc")
	if err != nil {
		t.Fatal(err)
	}
	check("Latest", head.CreatedAt)
	infos, err := eng.ListCheckpoints(e.ctx, "utc", engine.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range infos {
		check("ListCheckpoints", c.CreatedAt)
	}
	threads, err := eng.ListThreads(e.ctx, engine.ThreadListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range threads {
		check("ListThreads HeadCreatedAt", th.HeadCreatedAt)
		check("ListThreads CreatedAt", th.CreatedAt)
	}
	points, err := eng.TimeTravelPoints(e.ctx, "utc", engine.PointsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range points {
		check("TimeTravelPoints", c.CreatedAt)
	}
	lineage, err := eng.Lineage(e.ctx, head.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range lineage {
		check("Lineage", c.CreatedAt)
	}
	branches, err := eng.Branches(e.ctx, "utc")
	if err != nil || len(branches) != 1 {
		t.Fatalf("branches %v, %v", branches, err)
	}
	check("Branches", branches[0].CreatedAt)
	tree, err := eng.Tree(e.ctx, "utc")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range tree.Nodes {
		check("Tree", n.CreatedAt)
	}
	at, _, err := eng.ThreadExpiry(e.ctx, "utc")
	if err != nil {
		t.Fatal(err)
	}
	check("ThreadExpiry", at)
	if len(bad) > 0 {
		t.Errorf("times not in UTC: %v", bad)
	}
	// An export spells each time in UTC ("Z"), whichever store wrote it.
	var out bytes.Buffer
	if _, err := eng.Export(e.ctx, "utc", &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var rec struct {
			Kind      string     `json:"kind"`
			CreatedAt *time.Time `json:"created_at"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.CreatedAt != nil && !bytes.Contains(line, []byte(rec.CreatedAt.UTC().Format(time.RFC3339Nano))) {
			t.Errorf("the export's %s line spells its time otherwise than in UTC: %s", rec.Kind, line)
		}
	}
}
