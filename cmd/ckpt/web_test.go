package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// webFixture is a ckpt web handler over a SQLite file, with requests made
// as a browser on this machine would make them.
type webFixture struct {
	t   *testing.T
	s   *webServer
	eng *engine.Engine
	ctx context.Context
}

const webTestHost = "127.0.0.1:4711"

func newWebFixture(t *testing.T, allowWrites bool) *webFixture {
	t.Helper()
	ctx := context.Background()
	dbURL := "sqlite:" + filepath.Join(t.TempDir(), "web.db")
	eng, err := pgcheckpoint.Open(ctx, dbURL, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s, err := newWebServer(eng, allowWrites, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4711})
	if err != nil {
		t.Fatal(err)
	}
	return &webFixture{t: t, s: s, eng: eng, ctx: ctx}
}

// get requests a page under the token's path (path begins with "/").
func (f *webFixture) get(path string) *httptest.ResponseRecorder {
	f.t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://"+webTestHost+"/"+f.s.token+path, nil)
	w := httptest.NewRecorder()
	f.s.ServeHTTP(w, req)
	return w
}

// post sends a write as the confirmation page's form does; change edits
// the request first.
func (f *webFixture) post(action string, form url.Values, change func(*http.Request)) *httptest.ResponseRecorder {
	f.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://"+webTestHost+"/"+f.s.token+"/do/"+action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+webTestHost)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if change != nil {
		change(req)
	}
	w := httptest.NewRecorder()
	f.s.ServeHTTP(w, req)
	return w
}

func (f *webFixture) snap(in engine.SnapshotInput) engine.SnapshotResult {
	f.t.Helper()
	r, err := f.eng.Snapshot(f.ctx, in)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// Every request needs the token, as the first segment of its path: no
// cookie stands in for it (a browser sends 127.0.0.1's cookies to every
// port, so another local user's server would get it). The Host must be a
// loopback name. Every response carries the CSP, 403s included.
func TestWebToken(t *testing.T) {
	t.Parallel()
	f := newWebFixture(t, false)
	f.snap(engine.SnapshotInput{ThreadID: "run"})
	do := func(path, host string, cookie *http.Cookie) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "http://"+host+path, nil)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		w := httptest.NewRecorder()
		f.s.ServeHTTP(w, req)
		if csp := w.Header().Get("Content-Security-Policy"); csp != webCSP {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		if len(w.Result().Cookies()) > 0 {
			t.Errorf("GET %s set a cookie", path)
		}
		return w
	}
	tok := "/" + f.s.token
	for _, c := range []struct {
		what   string
		path   string
		host   string
		cookie *http.Cookie
	}{
		{"no token", "/", webTestHost, nil},
		{"no token, the stylesheet", "/static/app.css", webTestHost, nil},
		{"the token as a query", "/thread?id=run&token=" + f.s.token, webTestHost, nil},
		{"the token as a cookie", "/thread?id=run", webTestHost, &http.Cookie{Name: "ckpt_web_4711", Value: f.s.token}},
		{"a wrong token", "/" + f.s.csrf + "/thread?id=run", webTestHost, nil},
		{"a token one character short", tok[:len(tok)-1] + "/", webTestHost, nil},
		{"the token after another segment", "/static" + tok + "/", webTestHost, nil},
		{"another Host (DNS rebinding)", tok + "/", "attacker.example:4711", nil},
		{"another port in Host", tok + "/", "127.0.0.1:80", nil},
	} {
		if w := do(c.path, c.host, c.cookie); w.Code != http.StatusForbidden {
			t.Errorf("%s: %d; want 403", c.what, w.Code)
		}
	}
	// Redirects stay under the token's path: the token without its slash,
	// and the paths the mux cleans.
	for path, want := range map[string]string{
		tok:                       tok + "/",
		tok + "?q=run":            tok + "/?q=run",
		tok + "//thread?id=run":   tok + "/thread?id=run",
		tok + "/./thread?id=run":  tok + "/thread?id=run",
		tok + "/static/../thread": tok + "/thread",
		tok + "/static":           tok + "/static/",
		tok + "/../":              tok + "/",
	} {
		w := do(path, webTestHost, nil)
		if loc := w.Header().Get("Location"); w.Code/100 != 3 || loc != want {
			t.Errorf("GET %s: %d, Location %q; want a redirect to %q", path, w.Code, loc, want)
		}
	}
	for _, host := range []string{webTestHost, "localhost:4711", "[::1]:4711"} {
		for _, path := range []string{"/", "/thread?id=run", "/static/app.css"} {
			if w := do(tok+path, host, nil); w.Code != http.StatusOK {
				t.Errorf("GET %s, Host %s: %d", path, host, w.Code)
			}
		}
	}
	// The pages' links are relative to their <base>, the token's path.
	body := do(tok+"/thread?id=run", webTestHost, nil).Body.String()
	links := strings.Replace(body, `<base href="`+tok+`/">`, "", 1)
	if links == body || strings.Contains(links, `href="/`) || strings.Contains(links, `action="/`) || strings.Contains(links, `src="/`) {
		t.Errorf("the page's base or links:\n%s", body)
	}
}

// Without --allow-writes nothing writes, whatever the request holds; with
// it, a write needs POST, this server's Origin, the form token and the
// confirmation.
func TestWebWrites(t *testing.T) {
	t.Parallel()
	ro := newWebFixture(t, false)
	a := ro.snap(engine.SnapshotInput{ThreadID: "run"})
	ro.snap(engine.SnapshotInput{ThreadID: "run"})
	form := url.Values{"id": {a.ID.String()}, "confirm": {"yes"}, "csrf": {ro.s.csrf}}
	if w := ro.post("rewind", form, nil); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "read-only") {
		t.Errorf("a write without --allow-writes: %d\n%s", w.Code, w.Body)
	}
	if w := ro.get("/confirm?action=rewind&id=" + a.ID.String()); w.Code != http.StatusOK || strings.Contains(w.Body.String(), "<form class=\"confirm\"") {
		t.Errorf("the read-only confirmation page: %d, has a form: %v", w.Code, strings.Contains(w.Body.String(), "<form class=\"confirm\""))
	}
	if head, _ := ro.eng.Latest(ro.ctx, "run"); head.ID == a.ID {
		t.Fatal("a refused write rewound the thread")
	}

	f := newWebFixture(t, true)
	first := f.snap(engine.SnapshotInput{ThreadID: "run", State: json.RawMessage(`{"n": 1}`)})
	f.snap(engine.SnapshotInput{ThreadID: "run", State: json.RawMessage(`{"n": 2}`)})
	ok := url.Values{"id": {first.ID.String()}, "confirm": {"yes"}, "csrf": {f.s.csrf}}
	without := func(k string) url.Values {
		v := url.Values{}
		for key, val := range ok {
			if key != k {
				v[key] = val
			}
		}
		return v
	}
	for _, c := range []struct {
		what   string
		form   url.Values
		change func(*http.Request)
		code   int
	}{
		{"no form token", without("csrf"), nil, http.StatusForbidden},
		{"a wrong form token", url.Values{"id": ok["id"], "confirm": {"yes"}, "csrf": {f.s.token}}, nil, http.StatusForbidden},
		{"another Origin", ok, func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, http.StatusForbidden},
		{"Origin null", ok, func(r *http.Request) { r.Header.Set("Origin", "null") }, http.StatusForbidden},
		{"no Origin", ok, func(r *http.Request) { r.Header.Del("Origin") }, http.StatusForbidden},
		{"a cross-site fetch", ok, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, http.StatusForbidden},
		{"no token", ok, func(r *http.Request) { r.URL.Path = "/do/rewind" }, http.StatusForbidden},
		{"not confirmed", without("confirm"), nil, http.StatusBadRequest},
		{"a GET", ok, func(r *http.Request) { r.Method = http.MethodGet }, http.StatusMethodNotAllowed},
	} {
		if w := f.post("rewind", c.form, c.change); w.Code != c.code {
			t.Errorf("rewind with %s: %d; want %d\n%s", c.what, w.Code, c.code, w.Body)
		}
	}
	if head, _ := f.eng.Latest(f.ctx, "run"); head.ID == first.ID {
		t.Fatal("a refused write rewound the thread")
	}

	// Each write, confirmed.
	if w := f.post("rewind", ok, nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "rewound 1 step(s) to step 1") {
		t.Fatalf("rewind: %d\n%s", w.Code, w.Body)
	}
	if head, _ := f.eng.Latest(f.ctx, "run"); head.ID != first.ID {
		t.Fatalf("after rewind the head is %s; want %s", head.ID, first.ID)
	}
	w := f.post("branch", url.Values{"id": {first.ID.String()}, "name": {"alt"}, "confirm": {"yes"}, "csrf": {f.s.csrf}}, nil)
	branches, _ := f.eng.Branches(f.ctx, "run")
	if w.Code != http.StatusOK || len(branches) != 1 || branches[0].Name != "alt" {
		t.Fatalf("branch: %d %+v\n%s", w.Code, branches, w.Body)
	}
	f.snap(engine.SnapshotInput{ThreadID: branches[0].ThreadID, State: json.RawMessage(`{"n": 3}`)})
	w = f.post("merge", url.Values{"branch": {branches[0].ThreadID}, "into": {"run"}, "ns": {""}, "confirm": {"yes"}, "csrf": {f.s.csrf}}, nil)
	if head, _ := f.eng.Latest(f.ctx, "run"); w.Code != http.StatusOK || head.MergeParentID == uuid.Nil {
		t.Fatalf("merge: %d, head %+v\n%s", w.Code, head.CheckpointInfo, w.Body)
	}
	for range 3 {
		f.snap(engine.SnapshotInput{ThreadID: "run"})
	}
	preview := f.get("/retention?thread=run&policy=keep_last_n:2")
	w = f.post("prune", url.Values{"thread": {"run"}, "policy": {"keep_last_n:2"}, "confirm": {"yes"}, "csrf": {f.s.csrf}}, nil)
	if w.Code != http.StatusOK || !strings.Contains(preview.Body.String(), `<strong id="would-delete">3</strong>`) || !strings.Contains(w.Body.String(), "3 checkpoint(s) deleted") {
		t.Fatalf("prune keep_last_n:2 of 6 (the branch source kept): preview\n%s\napplied: %d\n%s", preview.Body, w.Code, w.Body)
	}
	w = f.post("delete", url.Values{"thread": {"run"}, "confirm": {"yes"}, "csrf": {f.s.csrf}}, nil)
	if _, err := f.eng.Latest(f.ctx, "run"); w.Code != http.StatusOK || err == nil {
		t.Fatalf("delete: %d, the thread: %v\n%s", w.Code, err, w.Body)
	}
}

// webPayloads are agent text that would run if a page took it as markup.
var webPayloads = []string{
	`<script>pwned(1)</script>`,
	`<img src=x onerror=pwned(2)>`,
	`"><svg onload=pwned(3)>`,
	`'><iframe src=javascript:pwned(4)>`,
	`</textarea></title></style><script>pwned(5)</script>`,
}

// Agent text reaches every page as text: the raw HTML holds no markup made
// from it, on every page, in every place (thread id, branch name, summary,
// tags, metadata, messages, state keys and values, tool calls, pending
// writes, next node, diff).
func TestWebEscapesAgentText(t *testing.T) {
	t.Parallel()
	f := newWebFixture(t, true)
	all := strings.Join(webPayloads, " ")
	js := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	thread := "t " + all
	first := f.snap(engine.SnapshotInput{ThreadID: thread, Summary: all, Tags: webPayloads, NextNode: all,
		Metadata: js(map[string]string{all: all}), Messages: js([]map[string]string{{"role": all, "content": all}})})
	msgs := js([]any{
		map[string]string{"role": "user", "content": all},
		map[string]any{"role": "assistant", "content": []any{map[string]string{"type": "text", "text": all}, map[string]string{"type": all}},
			"tool_calls": []any{map[string]any{"function": map[string]string{"name": all, "arguments": string(js(map[string]string{all: all}))}}}},
		map[string]string{"role": "tool_call", "name": all, "args": all},
		all,
	})
	second := f.snap(engine.SnapshotInput{ThreadID: thread, Summary: all, Tags: webPayloads, NextNode: all,
		Metadata: js(map[string]string{all: all}), Messages: msgs, State: js(map[string]string{all: all}), ToolResults: js(map[string]any{all: []string{all}})})
	if _, err := f.eng.PutWrites(f.ctx, second.ID, all, []engine.Write{{Channel: all, Value: js(all)}}); err != nil {
		t.Fatal(err)
	}
	br, err := f.eng.Branch(f.ctx, first.ID, all)
	if err != nil {
		t.Fatal(err)
	}
	q := url.QueryEscape
	for _, path := range []string{
		"/", "/?q=" + q("t "), "/?meta=" + q(`{}`) + "&tags=" + q(webPayloads[0]),
		"/thread?id=" + q(thread), "/thread?id=" + q(thread) + "&meta=" + q(string(js(map[string]string{all: all}))) + "&tags=" + q(webPayloads[1]),
		"/thread?id=" + q(br.ThreadID),
		"/checkpoint?id=" + first.ID.String(), "/checkpoint?id=" + second.ID.String(),
		"/diff?a=" + first.ID.String() + "&b=" + second.ID.String(), "/diff?a=" + second.ID.String() + "&b=" + first.ID.String(),
		"/retention?thread=" + q(thread) + "&policy=keep_last_n:1",
		"/retention?thread=" + q(thread) + "&policy=" + q(all),
		"/confirm?action=delete&thread=" + q(thread), "/confirm?action=merge&branch=" + q(br.ThreadID) + "&into=" + q(thread) + "&ns=" + q(all),
		"/thread?id=" + q(all), // not found: the error page names it
	} {
		w := f.get(path)
		body := w.Body.String()
		// Agent text in an attribute would start its value; in text, no
		// element can begin without a '<'.
		for _, markup := range []string{"<script>pwned", "<img", "<svg onload", "<iframe", `="javascript:`, `='javascript:`, "</textarea>"} {
			if strings.Contains(body, markup) {
				i := strings.Index(body, markup)
				t.Errorf("GET %s (%d): agent text became markup %q: …%s…", path, w.Code, markup, body[max(0, i-80):min(len(body), i+80)])
			}
		}
		if w.Code == http.StatusOK && !strings.Contains(body, "&lt;script&gt;pwned(1)&lt;/script&gt;") && !strings.Contains(path, "retention") {
			t.Errorf("GET %s: the payload is not shown as text", path)
		}
	}
	// The post's result page too.
	w := f.post("rewind", url.Values{"id": {first.ID.String()}, "confirm": {"yes"}, "csrf": {f.s.csrf}}, nil)
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), "<script>pwned") || !strings.Contains(w.Body.String(), "&lt;script&gt;pwned(1)") {
		t.Errorf("the rewind's result page: %d\n%s", w.Code, w.Body)
	}
}

// The messages of a conversation in the shapes agents write them.
func TestWebMessages(t *testing.T) {
	t.Parallel()
	got := webMessages(json.RawMessage(`[
		{"role": "user", "content": "hi\u0000 \u202e"},
		{"role": "assistant", "content": [{"type": "text", "text": "let me look"}, {"type": "tool_use", "name": "search", "input": {"q": "x"}}]},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Lisbon\"}"}}]},
		{"role": "tool_call", "name": "book", "args": {"eur": 470}},
		{"role": "tool", "tool_call_id": "c1", "content": "sunny"},
		42
	]`))
	if len(got) != 6 {
		t.Fatalf("%d messages; want 6", len(got))
	}
	if got[0].RoleClass != "user" || got[0].Text != `hi\u0000 \u202e` {
		t.Errorf("text with NUL and a bidi override: %+v", got[0])
	}
	if len(got[1].Parts) != 2 || got[1].Parts[0].Text != "let me look" || len(got[1].Calls) != 1 || got[1].Calls[0].Name != "search" {
		t.Errorf("content parts with a tool_use: %+v", got[1])
	}
	if len(got[2].Calls) != 1 || got[2].Calls[0].Name != "weather" || got[2].Calls[0].Args != "{\n  \"city\": \"Lisbon\"\n}" {
		t.Errorf("OpenAI tool_calls: %+v", got[2])
	}
	if len(got[3].Calls) != 1 || got[3].Calls[0].Name != "book" || got[3].RoleClass != "tool" || len(got[3].Extra) != 0 {
		t.Errorf("a WrapTool call: %+v", got[3])
	}
	if got[4].Text != "sunny" || len(got[4].Extra) != 1 || got[4].Extra[0].Key != "tool_call_id" {
		t.Errorf("a tool result: %+v", got[4])
	}
	if got[5].Raw != "42" {
		t.Errorf("a message that is not an object: %+v", got[5])
	}
	if fs := jsonFields(json.RawMessage(`{"b": 1, "a": {"x": 12345678901234567890}}`)); len(fs) != 2 || fs[0].Key != "b" || !strings.Contains(fs[1].Value, "12345678901234567890") {
		t.Errorf("fields keep their order and their numbers: %+v", fs)
	}
}

// randomTree writes a history of snapshots, rewinds, branches and merges,
// in two namespaces, and returns its tree.
func randomTree(t *testing.T, eng *engine.Engine, seed uint64, steps int) *engine.Tree {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 7))
	threads := []string{"root"}
	var ids []uuid.UUID
	snap := func(thread, ns string) {
		res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread, Namespace: ns, State: json.RawMessage(fmt.Sprintf(`{"i": %d}`, len(ids)))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	snap("root", "")
	for range steps {
		switch k := r.IntN(10); {
		case k < 5:
			ns := ""
			if r.IntN(6) == 0 {
				ns = "sub"
			}
			snap(threads[r.IntN(len(threads))], ns)
		case k < 7:
			if _, err := eng.Rewind(ctx, ids[r.IntN(len(ids))]); err != nil {
				t.Fatal(err)
			}
		case k < 9:
			b, err := eng.Branch(ctx, ids[r.IntN(len(ids))], fmt.Sprintf("b%d", len(ids)))
			if err != nil {
				t.Fatal(err)
			}
			threads = append(threads, b.ThreadID)
			ids = append(ids, b.CheckpointID)
		default:
			if len(threads) > 1 {
				b := threads[1+r.IntN(len(threads)-1)]
				_, err := eng.MergeBranch(ctx, b, "root")
				if errors.Is(err, engine.ErrNotFound) {
					_, err = eng.MergeBranchIn(ctx, b, "root", "sub") // forked in sub
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	tree, err := eng.Tree(ctx, "root")
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// The picture's layout: the rows of ckpt log --graph, every edge once, lines never through a node nor over each
// other; a page draws its rows and every line with an end among them.
func TestWebTreeLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for seed := range uint64(6) {
		eng, err := pgcheckpoint.Open(ctx, "sqlite::memory:", pgcheckpoint.Options{Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		tree := randomTree(t, eng, seed, 60)
		eng.Close()
		l := layoutTree(tree)

		// The rows are ckpt log --graph's (treeIndex orders and marks
		// both): the same checkpoints, each before its parents.
		want, _ := indexTree(tree).newestFirst(tree.Nodes)
		if len(l.Rows) != len(want) || len(l.Lines) != len(tree.Edges) {
			t.Fatalf("seed %d: %d rows, %d lines; want %d, %d", seed, len(l.Rows), len(l.Lines), len(want), len(tree.Edges))
		}
		for r, row := range l.Rows {
			if row.Node.ID != tree.Nodes[want[r]].ID {
				t.Fatalf("seed %d, row %d: %s; ckpt log --graph has %s", seed, r, row.Node.ID, tree.Nodes[want[r]].ID)
			}
		}
		byLane := map[int][]treeLine{}
		for i, ln := range l.Lines {
			e := tree.Edges[i]
			if ln.Edge != e || l.Rows[ln.ChildRow].Node.ID != e.To || l.Rows[ln.ParentRow].Node.ID != e.From ||
				ln.ChildCol != l.Rows[ln.ChildRow].Col || ln.ParentCol != l.Rows[ln.ParentRow].Col || ln.ChildRow >= ln.ParentRow {
				t.Fatalf("seed %d: line %+v does not draw edge %+v", seed, ln, e)
			}
			if !e.Merge && ln.Lane != ln.ChildCol {
				t.Errorf("seed %d: a parent's line leaves its child's column: %+v", seed, ln)
			}
			for r := ln.ChildRow + 1; r < ln.ParentRow; r++ {
				if l.Rows[r].Col == ln.Lane {
					t.Errorf("seed %d: the line %+v runs through the node of row %d", seed, ln, r)
				}
			}
			byLane[ln.Lane] = append(byLane[ln.Lane], ln)
		}
		for lane, lines := range byLane {
			slices.SortFunc(lines, func(a, b treeLine) int { return a.ChildRow - b.ChildRow })
			for i := 1; i < len(lines); i++ {
				a, b := lines[i-1], lines[i]
				// Two lines share a column one after the other: through
				// the node where one ends and the other starts, or a row
				// apart at least.
				if b.ChildRow < a.ParentRow || b.ChildRow == a.ParentRow+1 {
					t.Errorf("seed %d: lines %+v and %+v overlap in column %d", seed, a, b, lane)
				}
			}
		}

		// Pages of 7 rows: each row once, and a line on every page where
		// one of its ends is.
		seen := map[string]int{}
		linesOn := map[string]int{}
		pages := (len(l.Rows) + 6) / 7
		for p := 1; p <= pages; p++ {
			pg := l.page("root", p, 7, uuid.Nil)
			if pg.Pages != pages || pg.Total != len(l.Rows) {
				t.Fatalf("seed %d page %d: %d pages of %d rows", seed, p, pg.Pages, pg.Total)
			}
			for _, row := range pg.Rows {
				seen[row.ID]++
			}
			for _, ln := range pg.Lines {
				linesOn[ln.From+">"+ln.To+ln.Kind]++
			}
		}
		for _, n := range tree.Nodes {
			if seen[n.ID.String()] != 1 {
				t.Errorf("seed %d: node %s on %d pages", seed, n.ID, seen[n.ID.String()])
			}
		}
		for _, ln := range l.Lines {
			kind := "parent"
			if ln.Edge.Merge {
				kind = "merge"
			}
			want := 1
			if ln.ChildRow/7 != ln.ParentRow/7 {
				want = ln.ParentRow/7 - ln.ChildRow/7 + 1 // it crosses the pages between
			}
			if got := linesOn[ln.Edge.From.String()+">"+ln.Edge.To.String()+kind]; got != want {
				t.Errorf("seed %d: line %+v on %d pages; want %d", seed, ln, got, want)
			}
		}
	}
}

// The retention preview deletes nothing from the file and names what the
// policy then deletes.
func TestWebRetentionPreview(t *testing.T) {
	t.Parallel()
	f := newWebFixture(t, false)
	var ids []uuid.UUID
	for i := range 8 {
		ids = append(ids, f.snap(engine.SnapshotInput{ThreadID: "run", State: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}).ID)
	}
	if _, err := f.eng.Branch(f.ctx, ids[1], "alt"); err != nil {
		t.Fatal(err)
	}
	v, err := f.s.retention(f.ctx, "run", "keep_last_n:3")
	if err != nil || v.Err != "" || !v.Ran || v.Count != 8 {
		t.Fatalf("preview: %+v %v", v, err)
	}
	if tree, err := f.eng.Tree(f.ctx, "run"); err != nil || len(tree.Nodes) != 9 {
		t.Fatalf("after the preview the tree has %d checkpoints (%v); want 9", len(tree.Nodes), err)
	}
	res, err := f.eng.PruneThreads(f.ctx, engine.KeepLastN(3), "run")
	if err != nil {
		t.Fatal(err)
	}
	var previewed, deleted []string
	for _, r := range v.Rows {
		previewed = append(previewed, r.ID)
	}
	for _, d := range res.IDs {
		deleted = append(deleted, d.ID.String())
	}
	if v.Deleted != res.Deleted || !slices.Equal(previewed, deleted) || len(deleted) != 4 {
		t.Errorf("the preview named %q (%d), the policy deleted %q (%d); want the same 4 (the branch source stays)", previewed, v.Deleted, deleted, res.Deleted)
	}
	if v, _ := f.s.retention(f.ctx, "run", "keep-lots"); v.Err == "" || v.Ran {
		t.Errorf("a bad policy: %+v", v)
	}
}

// cancelOnURL cancels when ckpt web has printed its URL, and keeps what
// was written.
type cancelOnURL struct {
	b      strings.Builder
	cancel context.CancelFunc
}

func (c *cancelOnURL) Write(p []byte) (int, error) {
	c.b.Write(p)
	if strings.Contains(c.b.String(), "Ctrl-C stops it.") {
		c.cancel()
	}
	return len(p), nil
}

// ckpt web binds 127.0.0.1 on a free port and prints a URL with a token;
// --listen beyond loopback warns; Ctrl-C (the context) stops it.
func TestWebCommand(t *testing.T) {
	t.Parallel()
	dbURL := "sqlite:" + filepath.Join(t.TempDir(), "web.db")
	eng, err := pgcheckpoint.Open(context.Background(), dbURL, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	for _, c := range []struct {
		args []string
		host string
		warn bool
	}{
		{nil, "127.0.0.1", false},
		{[]string{"--listen", "127.0.0.1:0", "--allow-writes"}, "127.0.0.1", false},
		{[]string{"--listen", "0.0.0.0:0"}, "127.0.0.1", true},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		out := &cancelOnURL{cancel: cancel}
		var errOut strings.Builder
		err := run(ctx, append([]string{"--database", dbURL, "web"}, c.args...), out, &errOut, terminals{})
		cancel()
		if err != nil {
			t.Fatalf("ckpt web %v: %v\n%s", c.args, err, errOut.String())
		}
		var printed *url.URL
		for _, line := range strings.Split(out.b.String(), "\n") {
			if strings.HasPrefix(line, "http://") {
				printed, _ = url.Parse(line)
			}
		}
		if printed == nil || printed.Hostname() != c.host || printed.Port() == "0" || len(printed.Path) < 42 || !strings.HasSuffix(printed.Path, "/") {
			t.Errorf("ckpt web %v printed\n%s", c.args, out.b.String())
		}
		if got := strings.Contains(errOut.String(), "warning: listening on"); got != c.warn {
			t.Errorf("ckpt web %v: warning %v; want %v\n%s", c.args, got, c.warn, errOut.String())
		}
	}
	if err := run(context.Background(), []string{"--database", dbURL, "web", "--listen", "nowhere"}, io.Discard, io.Discard, terminals{}); !errors.As(err, new(usageError)) {
		t.Errorf("--listen nowhere: %v; want a usage error", err)
	}
}

// Agent text shown on a page is escaped for reading as the terminal's is
// (termsafe.Line): no control or direction character in any text a page
// shows, here a namespace in the thread's search form and a source
// thread's id in a branch checkpoint's lineage. (Raw values stay where a
// page keeps them for a link or a form, which shows nothing.)
func TestWebShowsNoControlCharacters(t *testing.T) {
	t.Parallel()
	f := newWebFixture(t, false)
	thread := "t " + hostileText
	first := f.snap(engine.SnapshotInput{ThreadID: thread, Namespace: "ns " + hostileText})
	root := f.snap(engine.SnapshotInput{ThreadID: thread})
	br, err := f.eng.Branch(f.ctx, root.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	head := f.snap(engine.SnapshotInput{ThreadID: br.ThreadID})
	for _, path := range []string{"/thread?id=" + url.QueryEscape(thread), "/checkpoint?id=" + head.ID.String(), "/checkpoint?id=" + first.ID.String()} {
		w := f.get(path)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, w.Code)
		}
		// The text between one tag's end and the next tag: what a page shows.
		for _, part := range strings.Split(w.Body.String(), "<") {
			_, text, _ := strings.Cut(part, ">")
			if r := termsafe.First(html.UnescapeString(text)); r >= 0 && r != '\n' {
				t.Errorf("GET %s shows %U in %q", path, r, text)
			}
		}
	}
}

// BenchmarkWebTreeLayoutStar lays out 50,000 checkpoints forked from one
// (an agent that retries from one step): 50,000 columns side by side. The
// layout's cost follows the rows and lines, not rows times columns: 6.3 s
// when each row scanned every column, 55 ms since (2026-11-29).
func BenchmarkWebTreeLayoutStar(b *testing.B) {
	root := engine.TreeNode{ID: uuid.New(), ThreadID: "s", Seq: 1}
	tree := &engine.Tree{ThreadID: "s", Nodes: []engine.TreeNode{root}}
	for i := range 50000 {
		n := engine.TreeNode{ID: uuid.New(), ThreadID: "s", Seq: int64(i + 2), ParentID: root.ID}
		tree.Nodes = append(tree.Nodes, n)
		tree.Edges = append(tree.Edges, engine.TreeEdge{From: root.ID, To: n.ID})
	}
	b.ResetTimer()
	for range b.N {
		if l := layoutTree(tree); l.Columns != 50000 {
			b.Fatalf("%d columns", l.Columns)
		}
	}
}

// A page number past the last shows the last page, filtered or not: a
// number whose offset overflows int used to index the list with a
// negative number, a panic that dropped the connection.
func TestWebThreadsPageBeyondTheLast(t *testing.T) {
	t.Parallel()
	f := newWebFixture(t, false)
	f.snap(engine.SnapshotInput{ThreadID: "run", Metadata: json.RawMessage(`{"k": 1}`)})
	for _, query := range []string{"page=2", "page=9223372036854775807", "page=184467440737095517", "page=-9223372036854775808",
		"meta=" + url.QueryEscape(`{"k": 1}`) + "&page=9223372036854775807"} {
		var w *httptest.ResponseRecorder
		finishes(t, "GET /?"+query, func() { w = f.get("/?" + query) })
		if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, `href="thread?id=run"`) || !strings.Contains(body, "page 1 of 1") {
			t.Errorf("GET /?%s: %d; want the last page, page 1, with thread run\n%s", query, w.Code, body)
		}
	}
}

// An encrypted thread's content, in a ckpt web started without the keys,
// is refused with a 4xx page that says to pass them, as ckpt show says,
// where it was a 500 with advice for a Go program.
func TestWebEncryptedWithoutKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	dbURL := "sqlite:" + filepath.Join(dir, "enc.db")
	keys, err := engine.LocalKeysFromFile(writeKeys(t, dir, "k", engine.NewKeyText("k")))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := pgcheckpoint.Open(ctx, dbURL, pgcheckpoint.Options{Migrate: true, Config: engine.Config{Encryption: engine.Encryption{Keys: keys}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := enc.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["secret"]`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := enc.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["secret", "more"]`)})
	if err != nil {
		t.Fatal(err)
	}
	enc.Close()
	eng, err := pgcheckpoint.Open(ctx, dbURL, pgcheckpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s, err := newWebServer(eng, true, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4711})
	if err != nil {
		t.Fatal(err)
	}
	f := &webFixture{t: t, s: s, eng: eng, ctx: ctx}
	check := func(what string, w *httptest.ResponseRecorder) {
		t.Helper()
		body := w.Body.String()
		if w.Code < 400 || w.Code >= 500 || !strings.Contains(body, html.EscapeString(encryptedHint)) || strings.Contains(body, "Config.Encryption") {
			t.Errorf("%s without keys: %d; want a 4xx that says to pass --keys\n%s", what, w.Code, body)
		}
	}
	check("the checkpoint page", f.get("/checkpoint?id="+a.ID.String()))
	check("the diff page", f.get("/diff?a="+a.ID.String()+"&b="+b.ID.String()))
	check("the rewind's confirmation", f.get("/confirm?action=rewind&id="+a.ID.String()))
	check("the branch's confirmation", f.get("/confirm?action=branch&id="+a.ID.String()))
	check("a branch", f.post("branch", url.Values{"id": {a.ID.String()}, "name": {"alt"}, "confirm": {"yes"}, "csrf": {f.s.csrf}}, nil))
	if w := f.get("/thread?id=t"); w.Code != http.StatusOK {
		t.Errorf("the thread page, which shows no content: %d", w.Code)
	}
}

// Deleting or pruning a thread that no longer exists (another tab, or ckpt
// delete, took it meanwhile) is a 404 naming it, as ckpt delete and gc
// --thread say not found, where the page said "Done" and 0 deleted.
func TestWebDeleteOfAMissingThread(t *testing.T) {
	t.Parallel()
	f := newWebFixture(t, true)
	f.snap(engine.SnapshotInput{ThreadID: "kept"})
	for action, form := range map[string]url.Values{
		"delete": {"thread": {"gone"}, "confirm": {"yes"}, "csrf": {f.s.csrf}},
		"prune":  {"thread": {"gone"}, "policy": {"keep_last_n:1"}, "confirm": {"yes"}, "csrf": {f.s.csrf}},
	} {
		w := f.post(action, form, nil)
		if body := w.Body.String(); w.Code != http.StatusNotFound || !strings.Contains(body, "&#34;gone&#34;") || !strings.Contains(body, "not found") {
			t.Errorf("%s of a missing thread: %d; want 404 naming it\n%s", action, w.Code, body)
		}
	}
	if _, err := f.eng.Latest(f.ctx, "kept"); err != nil {
		t.Errorf("another thread: %v", err)
	}

	// The rule the pages follow is ckpt's own.
	dbURL := "sqlite:" + filepath.Join(t.TempDir(), "cli.db")
	eng, err := pgcheckpoint.Open(f.ctx, dbURL, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	for _, args := range [][]string{{"delete", "gone", "--yes"}, {"delete", "gone", "--dry-run"}, {"gc", "--policy", "keep_last_n:1", "--thread", "gone", "--yes"}} {
		var out, errOut bytes.Buffer
		if err := run(f.ctx, append([]string{"--database", dbURL}, args...), &out, &errOut, terminals{}); !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), `"gone"`) {
			t.Errorf("ckpt %s: %v; want not found, naming the thread", strings.Join(args, " "), err)
		}
	}
}

// Message text, text parts and string tool-call arguments are cut as
// JSON values are, to webMaxJSON bytes as shown (escapes counted) with a
// note of what is left out; they used to be shown whole, a 1.5 MB text of
// control characters a 9 MB page.
func TestWebCutsLongText(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("\x01", 300<<10) // 6 bytes each when shown
	bidi := strings.Repeat("\u202e", 100<<10)
	js := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	msgs := webMessages(js([]any{
		map[string]string{"role": "user", "content": big},
		map[string]any{"role": "assistant", "content": []any{map[string]string{"type": "text", "text": big}, big},
			"tool_calls": []any{map[string]any{"function": map[string]string{"name": "f", "arguments": big}}}},
		map[string]string{"role": "tool_call", "name": "g", "args": big},
	}))
	if len(msgs) != 3 || len(msgs[1].Parts) != 2 || len(msgs[1].Calls) != 1 || len(msgs[2].Calls) != 1 {
		t.Fatalf("messages: %+v", msgs)
	}
	// A JSON value whose characters grow when shown: U+202E is 3 bytes in
	// the JSON, 6 as \u202e.
	state := jsonFields(js(map[string]string{"k": bidi}))
	for what, shown := range map[string]string{
		"a message's text": msgs[0].Text, "a text part": msgs[1].Parts[0].Text, "a string part": msgs[1].Parts[1].Text,
		"a call's string arguments": msgs[1].Calls[0].Args, "a WrapTool call's arguments": msgs[2].Calls[0].Args,
		"a state value": state[0].Value,
	} {
		kept, note, ok := strings.Cut(shown, "\n… ")
		if !ok || !strings.HasSuffix(note, " more bytes (ckpt show has them all)") || len(kept) > webMaxJSON || len(kept) < webMaxJSON-10 {
			t.Errorf("%s: %d bytes shown, note %q; want at most %d, and the note", what, len(kept), note[:min(len(note), 80)], webMaxJSON)
		}
		if termsafe.First(shown) >= 0 || (what != "a state value" && len(kept)%6 != 0) {
			t.Errorf("%s: cut inside an escape, or not escaped: …%q", what, kept[max(0, len(kept)-20):])
		}
	}
	if msgs[0].Text[:6] != `\u0001` {
		t.Errorf("the text shown begins %q", msgs[0].Text[:12])
	}

	// A page: one such message is a page of about webMaxJSON.
	f := newWebFixture(t, false)
	r := f.snap(engine.SnapshotInput{ThreadID: "big", Messages: js([]map[string]string{{"role": "tool", "content": big}})})
	if w := f.get("/checkpoint?id=" + r.ID.String()); w.Code != http.StatusOK || w.Body.Len() > webMaxJSON+64<<10 {
		t.Errorf("the page of a %d-byte message: %d, %d bytes", len(big), w.Code, w.Body.Len())
	}
}
