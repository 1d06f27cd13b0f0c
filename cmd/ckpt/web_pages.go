package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// The pages of ckpt web. Each handler reads its query, asks the Engine, and
// returns its template's name, the page title and a view of the data in
// which agent text is already made safe to show (termsafe.Text, termsafe.Line);
// html/template escapes it for HTML when the page is written. Ids and
// thread ids that go into links stay as they are: the templates put them
// in URL query values, which html/template percent-encodes.

// webThreadsPage is how many threads a page lists.
const webThreadsPage = 50

// webRetentionShown is how many of the checkpoints a policy would delete
// a preview lists.
const webRetentionShown = 1000

// webLineageShown is how many ancestors a checkpoint page lists.
const webLineageShown = 60

// webFuncs are the templates' helpers.
var webFuncs = template.FuncMap{
	"num": groupDigits,
	// shown is agent text as a page shows it: one line, control and
	// direction characters escaped (termsafe.Line); a value kept raw for a
	// link or a form is shown through it.
	"shown": termsafe.Line,
	// short is the end of a checkpoint id: the random part of a UUIDv7,
	// where ids written close together differ (they begin with the time).
	"short": func(id string) string {
		if len(id) > 8 {
			return "…" + id[len(id)-8:]
		}
		return id
	},
	// dict makes a map of its arguments, name then value, to pass more
	// than one value to a template.
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, fmt.Errorf("dict: %d arguments; want name, value pairs", len(kv))
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			name, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: argument %d is not a name", i)
			}
			m[name] = kv[i+1]
		}
		return m, nil
	},
}

// groupDigits writes n with a comma between groups of three digits.
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// webTime shows a time in the server's zone, to the second.
func webTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(timeLayout)
}

// optionalID is id as text, or "" for the zero id.
func optionalID(id uuid.UUID) string {
	if id == uuid.Nil {
		return ""
	}
	return id.String()
}

// threadRow is a thread in the list.
type threadRow struct {
	ThreadID, Shown, Namespace string
	HeadID                     string
	HeadStep                   int64
	Updated, Created           string
	Summary, Metadata          string
}

type threadsView struct {
	Q, Meta, Tags      string
	Rows               []threadRow
	Page               int
	Prev, Next         string // links to the pages around, "" when none
	Total              int    // threads in the list; -1 when a filter ran out early
	Filtered           bool
	Err                string
	First, Last, Pages int
}

// threadsPage lists the threads, newest head first, by pages; q keeps ids
// with that prefix, meta and tags threads with a checkpoint (in the
// namespace listed) whose metadata contains meta and that carries every tag.
func (s *webServer) threadsPage(r *http.Request) (string, string, any, error) {
	ctx := r.Context()
	q := r.URL.Query()
	v := threadsView{Q: q.Get("q"), Meta: strings.TrimSpace(q.Get("meta")), Tags: q.Get("tags"), Page: max(1, atoiOr(q.Get("page"), 1))}
	all, err := s.allThreads(ctx)
	if err != nil {
		return "", "", nil, err
	}
	slices.SortStableFunc(all, func(a, b engine.ThreadInfo) int {
		if c := b.HeadCreatedAt.Compare(a.HeadCreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ThreadID, b.ThreadID)
	})
	var kept []engine.ThreadInfo
	for _, t := range all {
		if strings.HasPrefix(t.ThreadID, v.Q) {
			kept = append(kept, t)
		}
	}
	tags := splitTags(v.Tags)
	// Past the last page: the last, before the page number is multiplied
	// (a filter keeps fewer, so its last page is no later).
	v.Page = min(v.Page, max(1, (len(kept)+webThreadsPage-1)/webThreadsPage))
	lo, hi := (v.Page-1)*webThreadsPage, v.Page*webThreadsPage
	v.Total = len(kept)
	if v.Meta != "" || len(tags) > 0 {
		// Ask the store of each thread in turn, until the page is full and
		// one more tells there is a next page.
		v.Filtered = true
		var match []engine.ThreadInfo
		for _, t := range kept {
			opts := engine.ListOptions{Namespace: t.Namespace, Limit: 1, Tags: tags}
			if v.Meta != "" {
				opts.Metadata = json.RawMessage(v.Meta)
			}
			page, err := s.eng.ListCheckpoints(ctx, t.ThreadID, opts)
			if err != nil {
				v.Err = termsafe.Text(err.Error())
				match = nil
				break
			}
			if len(page) > 0 {
				match = append(match, t)
			}
			if len(match) > hi {
				break
			}
		}
		kept, v.Total = match, -1
		if len(match) <= hi && v.Err == "" {
			v.Total = len(match)
		}
	}
	for i := lo; i < min(hi, len(kept)); i++ {
		t := kept[i]
		v.Rows = append(v.Rows, threadRow{
			ThreadID: t.ThreadID, Shown: termsafe.Line(t.ThreadID), Namespace: termsafe.Line(t.Namespace),
			HeadID: optionalID(t.HeadID), HeadStep: t.HeadStep, Updated: webTime(t.HeadCreatedAt), Created: webTime(t.CreatedAt),
			Summary: termsafe.Line(oneLine(t.HeadSummary, 100)), Metadata: compactLine(t.Metadata, 80),
		})
	}
	v.First, v.Last = lo+1, lo+len(v.Rows)
	link := func(page int) string {
		u := url.Values{}
		for k, val := range map[string]string{"q": v.Q, "meta": v.Meta, "tags": v.Tags} {
			if val != "" {
				u.Set(k, val)
			}
		}
		u.Set("page", strconv.Itoa(page))
		return "./?" + u.Encode()
	}
	if v.Page > 1 {
		v.Prev = link(v.Page - 1)
	}
	if len(kept) > hi {
		v.Next = link(v.Page + 1)
	}
	if v.Total >= 0 {
		v.Pages = max(1, (v.Total+webThreadsPage-1)/webThreadsPage)
	}
	return "threads", "Threads", v, nil
}

// allThreads reads every thread with its head.
func (s *webServer) allThreads(ctx context.Context) ([]engine.ThreadInfo, error) {
	var all []engine.ThreadInfo
	after := ""
	for {
		page, err := s.eng.ListThreads(ctx, engine.ThreadListOptions{Limit: engine.MaxListLimit, After: after})
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < engine.MaxListLimit {
			return all, nil
		}
		after = page[len(page)-1].ThreadID
	}
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

// headRow is the head of one namespace of a thread.
type headRow struct {
	Namespace, ID string
	Step          int64
}

// branchRow is a branch forked from a thread.
type branchRow struct {
	ThreadID, Shown, Name, FromID, Namespace string
	Created                                  string
}

// checkpointRow is a checkpoint in a list.
type checkpointRow struct {
	ID, ThreadID, Namespace string
	Step                    int64
	Trigger, Created        string
	Summary, Tags           string
	Head                    bool
}

type threadView struct {
	ThreadID, Shown string
	Heads           []headRow
	Namespaces      []string
	Count           int // checkpoints of the thread
	TreeCount       int // with its branches'
	Branches        []branchRow
	ForkedFrom      string // the checkpoint the thread was forked from, if a branch
	Expiry          string
	StatsHref       string // where the script reads the size
	Tree            treePage
	PageLinks       []pageLink
	Meta, Tags, NS  string
	Searched        bool
	Results         []checkpointRow
	SearchErr       string
	Policy          string
}

// pageLink is a link to a page of the tree.
type pageLink struct {
	Label, Href string
	Current     bool
}

// threadPage shows a thread: what it holds, its branches, the picture of
// its tree (a page of webTreePage rows; at=ID opens the page holding that
// checkpoint), and a search of its checkpoints by metadata and tags.
func (s *webServer) threadPage(r *http.Request) (string, string, any, error) {
	ctx := r.Context()
	q := r.URL.Query()
	thread := q.Get("id")
	if thread == "" {
		return "", "", nil, badRequest("no thread: /thread?id=THREAD")
	}
	tree, err := s.eng.Tree(ctx, thread)
	if err != nil {
		return "", "", nil, err
	}
	layout := layoutTree(tree)
	v := threadView{ThreadID: thread, Shown: termsafe.Line(thread), TreeCount: len(tree.Nodes),
		Meta: q.Get("meta"), Tags: q.Get("tags"), NS: q.Get("ns"), Policy: "keep_last_n:10"}
	var at uuid.UUID
	page := atoiOr(q.Get("page"), 1)
	if id, err := uuid.Parse(q.Get("at")); err == nil {
		if row, ok := layout.row(id); ok {
			at, page = id, row/webTreePage+1
		}
	}
	v.Tree = layout.page(thread, page, webTreePage, at)
	seenNS := map[string]bool{}
	for _, row := range layout.Rows {
		n := row.Node
		if n.ThreadID != thread {
			continue
		}
		v.Count++
		if !seenNS[n.Namespace] {
			seenNS[n.Namespace] = true
			v.Namespaces = append(v.Namespaces, n.Namespace)
		}
		if n.IsHead {
			v.Heads = append(v.Heads, headRow{Namespace: termsafe.Line(n.Namespace), ID: n.ID.String(), Step: n.Step})
		}
		if _, in := layout.row(n.ParentID); n.ParentID != uuid.Nil && !in && n.Seq == 1 {
			v.ForkedFrom = n.ParentID.String()
		}
	}
	slices.Sort(v.Namespaces)
	v.StatsHref = "thread/stats?" + url.Values{"id": {thread}, "ns": v.Namespaces}.Encode()
	slices.SortFunc(v.Heads, func(a, b headRow) int { return strings.Compare(a.Namespace, b.Namespace) })
	for i := 1; i <= v.Tree.Pages; i++ {
		if i == 1 || i == v.Tree.Pages || abs(i-v.Tree.Page) <= 3 {
			v.PageLinks = append(v.PageLinks, pageLink{Label: strconv.Itoa(i), Href: "thread?" + url.Values{"id": {thread}, "page": {strconv.Itoa(i)}}.Encode(), Current: i == v.Tree.Page})
		} else if n := len(v.PageLinks); n > 0 && v.PageLinks[n-1].Href != "" {
			v.PageLinks = append(v.PageLinks, pageLink{Label: "…"})
		}
	}
	branches, err := s.eng.Branches(ctx, thread)
	if err != nil {
		return "", "", nil, err
	}
	for _, b := range branches {
		v.Branches = append(v.Branches, branchRow{ThreadID: b.ThreadID, Shown: termsafe.Line(b.ThreadID), Name: termsafe.Line(b.Name),
			FromID: b.FromID.String(), Namespace: b.Namespace, Created: webTime(b.CreatedAt)})
	}
	at2, keep, err := s.eng.ThreadExpiry(ctx, thread)
	switch {
	case err != nil:
		v.Expiry = "unknown: " + termsafe.Text(err.Error())
	case at2.IsZero():
		v.Expiry = "never"
	case keep.Name() == engine.KeepLatest().Name():
		v.Expiry = webTime(at2) + " (then only its heads are kept)"
	default:
		v.Expiry = webTime(at2) + " (then it is deleted)"
	}
	if v.Meta != "" || v.Tags != "" || q.Has("ns") {
		v.Searched = true
		opts := engine.ListOptions{Namespace: v.NS, Limit: 200, Tags: splitTags(v.Tags)}
		if strings.TrimSpace(v.Meta) != "" {
			opts.Metadata = json.RawMessage(v.Meta)
		}
		heads := map[uuid.UUID]bool{}
		for _, h := range v.Heads {
			heads[uuid.MustParse(h.ID)] = true
		}
		found, err := s.eng.ListCheckpoints(ctx, thread, opts)
		if err != nil {
			v.SearchErr = termsafe.Text(err.Error())
		}
		for _, c := range found {
			v.Results = append(v.Results, infoRow(c, heads[c.ID]))
		}
	}
	return "thread", "Thread " + v.Shown, v, nil
}

// threadStats is what the thread page's script fills in once the page is
// shown: reading the size of every checkpoint takes as long as the rest of
// the page for a long thread.
type threadStats struct {
	Size   string `json:"size"`
	Deltas int    `json:"deltas"`
}

// statsJSON serves GET /thread/stats?id=THREAD&ns=NS...: the content size
// of the thread's checkpoints in those namespaces, as written, and how
// many are stored as deltas.
func (s *webServer) statsJSON(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	thread := r.URL.Query().Get("id")
	var st threadStats
	var size int64
	var err error
	for _, ns := range r.URL.Query()["ns"] {
		err = s.eachCheckpoint(ctx, thread, engine.ListOptions{Namespace: ns}, func(c engine.CheckpointInfo) bool {
			size += c.SizeBytes
			if c.Format == engine.StorageDelta {
				st.Deltas++
			}
			return true
		})
		if err != nil {
			break
		}
	}
	if err != nil {
		s.renderError(w, err)
		return
	}
	st.Size = humanBytes(size)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// eachCheckpoint calls fn with every checkpoint of a thread's namespace
// that opts selects, newest first, until fn returns false.
func (s *webServer) eachCheckpoint(ctx context.Context, thread string, opts engine.ListOptions, fn func(engine.CheckpointInfo) bool) error {
	opts.Limit = engine.MaxListLimit
	for {
		page, err := s.eng.ListCheckpoints(ctx, thread, opts)
		if err != nil {
			return err
		}
		for _, c := range page {
			if !fn(c) {
				return nil
			}
		}
		if len(page) < opts.Limit {
			return nil
		}
		opts.Before = page[len(page)-1].ID
	}
}

func infoRow(c engine.CheckpointInfo, head bool) checkpointRow {
	return checkpointRow{ID: c.ID.String(), ThreadID: c.ThreadID, Namespace: termsafe.Line(c.Namespace), Step: c.Step,
		Trigger: termsafe.Line(string(c.Trigger)), Created: webTime(c.CreatedAt), Summary: termsafe.Line(oneLine(c.Summary, 100)),
		Tags: termsafe.Line(strings.Join(c.Tags, ", ")), Head: head}
}

// pendingRow is a pending write.
type pendingRow struct {
	TaskID, Channel, Value string
	Index                  int
}

type checkpointView struct {
	ID, ThreadID, ThreadShown, Namespace string
	Seq, Step                            int64
	Trigger, Created, NextNode, Format   string
	Size                                 string
	Tags                                 []string
	Summary                              string
	ParentID, MergeParentID              string
	IsHead                               bool
	HeadID                               string
	Messages                             []webMessage
	State, ToolResults                   []jsonField
	Metadata                             string
	Pending                              []pendingRow
	Lineage                              []checkpointRow
	LineageTotal, LineageHidden          int
	LineageRoot                          *checkpointRow
}

// checkpointPage shows a checkpoint whole: what it is, its messages as a
// conversation, state and tool results by key, pending writes, metadata
// and its lineage back to the root.
func (s *webServer) checkpointPage(r *http.Request) (string, string, any, error) {
	ctx := r.Context()
	id, err := uuid.Parse(r.URL.Query().Get("id"))
	if err != nil {
		return "", "", nil, badRequest("not a checkpoint id: /checkpoint?id=UUID")
	}
	cp, err := s.eng.Get(ctx, id)
	if err != nil {
		return "", "", nil, err
	}
	head, err := s.eng.LatestIn(ctx, cp.ThreadID, cp.Namespace)
	if err != nil {
		return "", "", nil, err
	}
	v := checkpointView{ID: cp.ID.String(), ThreadID: cp.ThreadID, ThreadShown: termsafe.Line(cp.ThreadID), Namespace: termsafe.Line(cp.Namespace),
		Seq: cp.Seq, Step: cp.Step, Trigger: termsafe.Line(string(cp.Trigger)), Created: webTime(cp.CreatedAt), NextNode: termsafe.Line(cp.NextNode),
		Format: cp.Format, Size: humanBytes(cp.SizeBytes), Summary: termsafe.Text(cp.Summary),
		ParentID: optionalID(cp.ParentID), MergeParentID: optionalID(cp.MergeParentID),
		IsHead: head.ID == cp.ID, HeadID: head.ID.String(),
		Messages: webMessages(cp.Messages), State: jsonFields(cp.State), ToolResults: jsonFields(cp.ToolResults),
		Metadata: prettyJSON(cp.Metadata)}
	for _, t := range cp.Tags {
		v.Tags = append(v.Tags, termsafe.Line(t))
	}
	for _, w := range cp.PendingWrites {
		v.Pending = append(v.Pending, pendingRow{TaskID: termsafe.Line(w.TaskID), Channel: termsafe.Line(w.Channel), Value: prettyJSON(w.Value), Index: w.Index})
	}
	line, err := s.eng.Lineage(ctx, id)
	if err != nil {
		return "", "", nil, err
	}
	v.LineageTotal = len(line)
	for i, c := range line {
		if i < webLineageShown {
			v.Lineage = append(v.Lineage, infoRow(c, false))
		}
	}
	if len(line) > webLineageShown {
		root := infoRow(line[len(line)-1], false)
		v.LineageRoot = &root
		v.LineageHidden = len(line) - webLineageShown - 1
	}
	return "checkpoint", fmt.Sprintf("Step %d of %s", cp.Step, termsafe.Line(cp.ThreadID)), v, nil
}

// cpHeader names a checkpoint at the top of a diff.
type cpHeader struct {
	ID, ThreadID, ThreadShown, Created, Summary string
	Step                                        int64
	Head                                        bool
}

// keyChange is a key whose value changed.
type keyChange struct {
	Key, Old, New string
}

// keyChanges is what changed in one JSON object.
type keyChanges struct {
	Added, Removed []jsonField
	Changed        []keyChange
}

func (k keyChanges) None() bool { return len(k.Added)+len(k.Removed)+len(k.Changed) == 0 }

type diffView struct {
	From, To                         cpHeader
	MessagesAdded, MessagesRemoved   []webMessage
	State, ToolResults               keyChanges
	Same                             bool
	DefaultTo                        bool // b was not given: the head
	SwapHref, ParentHref, ParentHead string
}

// diffPage shows what changed from checkpoint a to checkpoint b (by
// default the head of a's thread and namespace): messages appended and
// removed, and the keys of state and tool results added, removed and
// changed, with their values.
func (s *webServer) diffPage(r *http.Request) (string, string, any, error) {
	ctx := r.Context()
	q := r.URL.Query()
	a, err := uuid.Parse(q.Get("a"))
	if err != nil {
		return "", "", nil, badRequest("not a checkpoint id: /diff?a=UUID[&b=UUID] (b: the head by default)")
	}
	from, err := s.eng.Get(ctx, a)
	if err != nil {
		return "", "", nil, err
	}
	head, err := s.eng.LatestIn(ctx, from.ThreadID, from.Namespace)
	if err != nil {
		return "", "", nil, err
	}
	v := diffView{}
	b := head.ID
	if q.Get("b") == "" {
		v.DefaultTo = true
	} else if b, err = uuid.Parse(q.Get("b")); err != nil {
		return "", "", nil, badRequest("b is not a checkpoint id")
	}
	to := head
	if b != head.ID {
		if to, err = s.eng.Get(ctx, b); err != nil {
			return "", "", nil, err
		}
	}
	d, err := s.eng.Diff(ctx, a, b)
	if err != nil {
		return "", "", nil, err
	}
	hdr := func(c *engine.Checkpoint) cpHeader {
		return cpHeader{ID: c.ID.String(), ThreadID: c.ThreadID, ThreadShown: termsafe.Line(c.ThreadID), Created: webTime(c.CreatedAt),
			Summary: termsafe.Line(oneLine(c.Summary, 100)), Step: c.Step, Head: c.ID == head.ID}
	}
	v.From, v.To = hdr(from), hdr(to)
	v.SwapHref = "diff?" + url.Values{"a": {b.String()}, "b": {a.String()}}.Encode()
	for _, m := range d.MessagesAdded {
		v.MessagesAdded = append(v.MessagesAdded, webMessageOf(m))
	}
	for _, m := range d.MessagesRemoved {
		v.MessagesRemoved = append(v.MessagesRemoved, webMessageOf(m))
	}
	v.State = changesOf(d.State, from.State, to.State)
	v.ToolResults = changesOf(d.ToolResults, from.ToolResults, to.ToolResults)
	v.Same = len(d.MessagesAdded)+len(d.MessagesRemoved) == 0 && v.State.None() && v.ToolResults.None()
	return "diff", "Diff", v, nil
}

// changesOf adds the values to a KeyDiff of objects a and b.
func changesOf(kd engine.KeyDiff, a, b json.RawMessage) keyChanges {
	values := func(raw json.RawMessage) map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		if ms, ok := objectMembers(raw); ok {
			for _, m := range ms {
				out[m.Key] = m.Value
			}
		}
		return out
	}
	av, bv := values(a), values(b)
	var k keyChanges
	for _, key := range kd.Added {
		k.Added = append(k.Added, jsonField{Key: termsafe.Line(key), Preview: compactLine(bv[key], 100), Value: prettyJSON(bv[key])})
	}
	for _, key := range kd.Removed {
		k.Removed = append(k.Removed, jsonField{Key: termsafe.Line(key), Preview: compactLine(av[key], 100), Value: prettyJSON(av[key])})
	}
	for _, key := range kd.Changed {
		k.Changed = append(k.Changed, keyChange{Key: termsafe.Line(key), Old: prettyJSON(av[key]), New: prettyJSON(bv[key])})
	}
	return k
}

// deletedRow is a checkpoint a policy deletes.
type deletedRow struct {
	ID, Namespace string
	Step          int64
}

type retentionView struct {
	ThreadID, Shown, Policy string
	Ran                     bool
	Deleted                 int64
	Rows                    []deletedRow
	Listed                  bool // the policy names what it deletes
	More                    int  // rows not listed
	Count                   int  // checkpoints of the thread
	Err                     string
}

// retentionPage shows what a policy would delete from a thread: the
// store's own rule runs where its deletes do not last (storeExtras).
func (s *webServer) retentionPage(r *http.Request) (string, string, any, error) {
	v, err := s.retention(r.Context(), r.URL.Query().Get("thread"), r.URL.Query().Get("policy"))
	if err != nil {
		return "", "", nil, err
	}
	return "retention", "Retention preview", v, nil
}

func (s *webServer) retention(ctx context.Context, thread, policy string) (retentionView, error) {
	if thread == "" {
		return retentionView{}, badRequest("no thread: /retention?thread=THREAD&policy=keep_last_n:10")
	}
	v := retentionView{ThreadID: thread, Shown: termsafe.Line(thread), Policy: policy}
	tree, err := s.eng.Tree(ctx, thread)
	if err != nil {
		return v, err
	}
	for _, n := range tree.Nodes {
		if n.ThreadID == thread {
			v.Count++
		}
	}
	if strings.TrimSpace(policy) == "" {
		return v, nil
	}
	p, err := engine.ParsePolicy(policy)
	if err != nil {
		v.Err = termsafe.Text(err.Error()) + "; " + policyHelp
		return v, nil
	}
	v.Policy = p.String()
	res, err := s.eng.PreviewPrune(ctx, p, thread)
	if err != nil {
		v.Err = "the preview failed: " + termsafe.Text(err.Error())
		return v, nil
	}
	v.Ran, v.Deleted, v.Listed = true, res.Deleted, res.IDs != nil
	for i, d := range res.IDs {
		if i == webRetentionShown {
			v.More = len(res.IDs) - i
			break
		}
		v.Rows = append(v.Rows, deletedRow{ID: d.ID.String(), Namespace: termsafe.Line(d.Namespace), Step: d.Step})
	}
	return v, nil
}
