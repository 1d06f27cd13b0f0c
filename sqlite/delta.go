package sqlite

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// Delta storage, the rules of the Postgres store (pgcheckpoint.checkpoint_delta,
// delta_run_continues and run_anchor, schema/current.sql)
// computed in Go. A delta row (format 'delta') holds, against its base, an
// earlier checkpoint of the same thread and namespace:
//
//	messages              the messages appended to the base's (a JSON array);
//	state                 the top-level keys set or changed (a JSON object);
//	state_removed         the base's keys this one lacks (a JSON array of keys);
//	tool_results, tool_results_removed: likewise.
//
// The base is the parent, except at the end of a run: after R-1 deltas in a
// row on their parents (R is PutRequest.DeltaRun), the base is the anchor
// the run started from, and after R-1 anchors in a row the checkpoint is
// stored whole; a read follows at most 2(R-1) links. A checkpoint whose
// messages are not an append of the base's (by digest), or whose delta is
// no smaller than the whole, is stored whole. Metadata, tags, summary and
// next node are always stored whole. An Append is stored by the same run
// rule (appendStored) from the change and the run's deltas, never from the
// content before the anchor.

// link is what a write needs of its parent or base: no content.
type link = sqlitedb.CheckpointLinkByIDRow

// content is a checkpoint's messages, state and tool results, whole. The
// store keeps JSON as the text the engine handed over and works on that
// text, not on decoded values, so what it returns is made of the very
// bytes written: a whole checkpoint is returned byte for byte; a rebuilt
// one is composed by package jsontext (see materialize).
type content = jsontext.Content

// stored is how a checkpoint's content goes into its row.
type stored struct {
	format                     string
	base                       uuid.NullUUID
	run, depth                 int64
	messages, state, tools     []byte
	stateRemoved, toolsRemoved []byte
}

func storeWhole(c content) stored {
	return stored{format: "full", messages: c.Messages, state: c.State, tools: c.ToolResults,
		stateRemoved: []byte("[]"), toolsRemoved: []byte("[]")}
}

// digests are a checkpoint's digests of its whole content (see
// PutRequest); nil when it is stored whole without them.
type digests struct {
	chain         []byte // jsontext.MessageChain of the messages
	state, tools  []byte
	messagesCount int64
}

// planDelta is the one place that decides how a new checkpoint's content
// is stored: whole, or as a delta against parent or the anchor of its run
// (see the comment at the top of this file). parent is nil for a thread's
// first checkpoint; deltaRun is R.
func planDelta(ctx context.Context, q *queries, parent *link, c content, d digests, deltaRun int) (stored, error) {
	whole := storeWhole(c)
	if deltaRun <= 1 || parent == nil || d.chain == nil || d.state == nil || d.tools == nil {
		return whole, nil
	}
	base := parent
	continues := deltaRunContinues(parent, deltaRun)
	if !continues {
		// The run is as long as allowed: go back to where it started.
		_, anchor, err := runOf(ctx, q, parent, deltaRun)
		if err != nil || anchor == nil {
			return whole, err
		}
		base = anchor
	}
	if !hasDigests(base) {
		return whole, nil
	}
	n := base.MessagesCount.Int64
	if n > d.messagesCount {
		return whole, nil
	}
	if !bytes.Equal(jsontext.ListDigestAt(d.chain, n), base.MessagesDigest) {
		return whole, nil // an edited or dropped message, or a base written before the chain
	}
	msgs, err := jsontext.SplitArray(c.Messages)
	if err != nil {
		return stored{}, err
	}
	if int64(len(msgs)) != d.messagesCount {
		return stored{}, fmt.Errorf("%w: message digests for %d messages, and %d messages", engine.ErrInvalidInput, d.messagesCount, len(msgs))
	}
	delta := deltaOn(base, continues)
	delta.messages = jsontext.JoinArray(msgs[n:])
	if delta.state, delta.stateRemoved, err = keyDelta(c.State, d.state, []byte(base.StateDigests.String)); err != nil {
		return stored{}, fmt.Errorf("state: %w", err)
	}
	if delta.tools, delta.toolsRemoved, err = keyDelta(c.ToolResults, d.tools, []byte(base.ToolResultsDigests.String)); err != nil {
		return stored{}, fmt.Errorf("tool results: %w", err)
	}
	if len(delta.messages)+len(delta.state)+len(delta.tools)+len(delta.stateRemoved)+len(delta.toolsRemoved) >=
		len(c.Messages)+len(c.State)+len(c.ToolResults)+4 {
		return whole, nil
	}
	return delta, nil
}

// deltaRunContinues is the run limit (pgcheckpoint.delta_run_continues on
// Postgres): whether a delta on parent may extend parent's run, when runs
// hold fewer than deltaRun deltas (deltaRun 1: no deltas).
func deltaRunContinues(parent *link, deltaRun int) bool {
	return deltaRun > 1 && parent.DeltaRun+1 < int64(deltaRun)
}

// runOf returns the deltas of the run that checkpoint l ends (those whose
// delta_run is above 0: l first, then its bases; none when l's delta_run
// is 0) with their content, and the run's anchor, the base the run started
// from: nil when the run is broken (a base missing, a cycle), or when a
// base is in another thread or namespace or a delta on the anchor would
// be deltaRun links deep or more (pgcheckpoint.run_anchor on Postgres).
// The walk is here alone; its rows are read by the key, a segment at a
// time: a delta's bases are written before it in its thread and
// namespace, so a run written without a rewind in between is its last
// delta and the delta_run rows before it (one statement); a base not among
// the rows read starts a segment of its own (its link by id, then the rows
// before it). The anchor's link is then read by id, never its content.
func runOf(ctx context.Context, q *queries, l *link, deltaRun int) ([]sqlitedb.CheckpointRunRangeRow, *link, error) {
	if deltaRun <= 1 {
		return nil, nil, nil // a delta on any anchor would be too deep
	}
	read := map[uuid.UUID]sqlitedb.CheckpointRunRangeRow{}
	segment := func(seq, run int64) error {
		// At most deltaRun rows a statement, whatever a row's delta_run says.
		rows, err := q.CheckpointRunRange(ctx, sqlitedb.CheckpointRunRangeParams{
			ThreadID: l.ThreadID, Namespace: l.Namespace, FromSeq: seq - min(max(run, 0), int64(deltaRun)), ToSeq: seq,
		})
		if err != nil {
			return dbError("read the run of a delta", err)
		}
		for _, r := range rows {
			read[r.CheckpointID] = r
		}
		return nil
	}
	if err := segment(l.Seq, l.DeltaRun); err != nil {
		return nil, nil, err
	}
	var run []sqlitedb.CheckpointRunRangeRow
	seen := map[uuid.UUID]bool{}
	id := l.CheckpointID
	for {
		if seen[id] {
			return nil, nil, nil // a cycle of forged bases
		}
		seen[id] = true
		r, ok := read[id]
		if !ok {
			b, err := q.CheckpointLinkByID(ctx, id)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, nil, nil
			} else if err != nil {
				return nil, nil, dbError("read the run of a delta", err)
			}
			if b.ThreadID != l.ThreadID || b.Namespace != l.Namespace {
				return nil, nil, nil
			}
			if err := segment(b.Seq, b.DeltaRun); err != nil {
				return nil, nil, err
			}
			if r, ok = read[id]; !ok {
				return nil, nil, nil
			}
		}
		if r.DeltaRun <= 0 {
			break
		}
		run = append(run, r)
		if !r.BaseCheckpointID.Valid {
			return nil, nil, nil
		}
		id = r.BaseCheckpointID.UUID
	}
	anchor, err := q.CheckpointLinkByID(ctx, id)
	if err != nil {
		return nil, nil, dbError("read the anchor of a run", err)
	}
	if anchor.DeltaDepth+1 >= int64(deltaRun) {
		return nil, nil, nil
	}
	return run, &anchor, nil
}

// hasDigests reports whether a checkpoint has the digests of its whole
// content that a delta on it is computed against.
func hasDigests(l *link) bool {
	return l.MessagesCount.Valid && len(l.MessagesDigest) == jsontext.ChainSize && l.StateDigests.Valid && l.ToolResultsDigests.Valid
}

// deltaOn is how a delta on base is stored, before its content: one link
// deeper than base; its run goes on from base's when it continues base's
// run (base is its parent), and starts again (0) on an anchor.
func deltaOn(base *link, continues bool) stored {
	st := stored{format: "delta", base: uuid.NullUUID{UUID: base.CheckpointID, Valid: true}, depth: base.DeltaDepth + 1}
	if continues {
		st.run = base.DeltaRun + 1
	}
	return st
}

// keyDelta returns the members of obj whose key is new or whose digest
// changed since baseDigests, as a JSON object in obj's order, and the keys
// of baseDigests that obj lacks, as a sorted JSON array.
func keyDelta(obj, objDigests, baseDigests []byte) (set, removed []byte, err error) {
	if bytes.Equal(objDigests, baseDigests) {
		return []byte("{}"), []byte("[]"), nil
	}
	nd, err := jsontext.SplitObject(objDigests)
	if err != nil {
		return nil, nil, err
	}
	bd, err := jsontext.SplitObject(baseDigests)
	if err != nil {
		return nil, nil, err
	}
	was := make(map[string][]byte, len(bd))
	for _, m := range bd {
		was[m.Key] = m.Val
	}
	now := make(map[string][]byte, len(nd))
	for _, m := range nd {
		now[m.Key] = m.Val
	}
	changed := map[string]bool{}
	for k, v := range now {
		if w, ok := was[k]; !ok || !bytes.Equal(v, w) {
			changed[k] = true
		}
	}
	var gone []string
	for k := range was {
		if _, ok := now[k]; !ok {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	members, err := jsontext.SplitObject(obj)
	if err != nil {
		return nil, nil, err
	}
	last := jsontext.LastByKey(members)
	for i := range members {
		members[i].Gone = !changed[members[i].Key] || last[members[i].Key] != i
	}
	removed = []byte("[]")
	if len(gone) > 0 {
		if removed, err = json.Marshal(gone); err != nil {
			return nil, nil, err
		}
	}
	return jsontext.JoinObject(members), removed, nil
}

// storedRow is what materialize reads of a checkpoint's row: where it is,
// its format and its content as stored.
type storedRow struct {
	id                     uuid.UUID
	threadID, namespace    string
	format                 string
	messages, state, tools string
}

// storedOf is the storedRow of a whole row.
func storedOf(r sqlitedb.Checkpoint) storedRow {
	return storedRow{id: r.CheckpointID, threadID: r.ThreadID, namespace: r.Namespace, format: r.Format,
		messages: r.Messages, state: r.State, tools: r.ToolResults}
}

// materialize is the one place that rebuilds a checkpoint's whole content
// from its row: a full row as stored, byte for byte; a delta row from its
// chain of bases (each in the same thread and namespace) back to a full
// one. Messages are the full one's followed by each delta's, oldest first;
// state and tool results start from the full one's members, in its order,
// and each delta, oldest first, drops its removed keys, replaces the
// values of keys present and appends new keys.
func materialize(ctx context.Context, q *queries, row storedRow) (content, error) {
	if row.format == "full" {
		return content{Messages: []byte(row.messages), State: []byte(row.state), ToolResults: []byte(row.tools)}, nil
	}
	chain, err := deltaChain(ctx, q, row)
	if err != nil {
		return content{}, err
	}
	full := chain[len(chain)-1]
	state, err := jsontext.ObjectMembers([]byte(full.State))
	if err != nil {
		return content{}, err
	}
	tools, err := jsontext.ObjectMembers([]byte(full.ToolResults))
	if err != nil {
		return content{}, err
	}
	deltas := chain[:len(chain)-1]
	arrays, state, tools, err := applyDeltas(state, tools, len(deltas), func(i int) deltaCols {
		d := deltas[len(deltas)-1-i]
		return deltaCols{d.Messages, d.State, d.StateRemoved, d.ToolResults, d.ToolResultsRemoved}
	})
	if err != nil {
		return content{}, err
	}
	msgs, err := jsontext.ConcatArrays(append([]string{full.Messages}, arrays...)...)
	if err != nil {
		return content{}, err
	}
	return content{Messages: msgs, State: jsontext.JoinObject(state), ToolResults: jsontext.JoinObject(tools)}, nil
}

// deltaCols are what a delta row stores: the messages it appends, the
// state and tool result keys it sets and those it removes.
type deltaCols struct {
	messages, state, stateRemoved, tools, toolsRemoved string
}

// applyDeltas applies n deltas, oldest first (delta(0) is the oldest), to
// state and tools, and returns the message arrays they append, in order:
// the one rule for rebuilding a delta and for an Append at a run's end,
// which is a delta on the run's anchor made of the run and the change.
func applyDeltas(state, tools []jsontext.Member, n int, delta func(i int) deltaCols) (messages []string, _, _ []jsontext.Member, err error) {
	messages = make([]string, 0, n)
	for i := range n {
		d := delta(i)
		messages = append(messages, d.messages)
		if state, err = jsontext.ApplyKeys(state, []byte(d.state), []byte(d.stateRemoved)); err != nil {
			return nil, nil, nil, fmt.Errorf("state: %w", err)
		}
		if tools, err = jsontext.ApplyKeys(tools, []byte(d.tools), []byte(d.toolsRemoved)); err != nil {
			return nil, nil, nil, fmt.Errorf("tool results: %w", err)
		}
	}
	return messages, state, tools, nil
}

// deltaChain returns the chain a delta row is rebuilt from, the row itself
// first and a full snapshot last; an error when it does not reach one.
func deltaChain(ctx context.Context, q *queries, row storedRow) ([]sqlitedb.CheckpointDeltaChainRow, error) {
	chain, err := q.CheckpointDeltaChain(ctx, sqlitedb.CheckpointDeltaChainParams{
		CheckpointID: row.id, ThreadID: row.threadID, Namespace: row.namespace,
	})
	if err != nil {
		return nil, dbError("read the chain of a delta", err)
	}
	slices.SortFunc(chain, func(a, b sqlitedb.CheckpointDeltaChainRow) int { return cmp.Compare(a.Depth, b.Depth) })
	if len(chain) == 0 || chain[len(chain)-1].Format != "full" {
		return nil, fmt.Errorf("%w: checkpoint %s cannot be rebuilt: its chain of deltas does not reach a full snapshot", engine.ErrDamaged, row.id)
	}
	return chain, nil
}
