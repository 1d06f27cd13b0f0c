package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// The SQL API refuses what the engine refuses: a checkpoint id that is not
// a UUIDv7 (another version, or version 7 with another variant than RFC
// 9562's) and an unknown trigger, with PC003 from every writing function,
// so that no client of the API stores what an export of the thread could
// not import. (A bare INSERT into the table is not held to it: a check
// constraint would cost every write; see checkpoint_check.)
func TestSQLAPIRefusesWhatTheEngineRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.snap(t, engine.SnapshotInput{ThreadID: "main"})
	if _, err := b.db.Pool.Exec(b.ctx, `SELECT * FROM pgcheckpoint.thread_branch($1, 'side', 'side', $2)`, src.ID, engine.NewCheckpointID()); err != nil {
		t.Fatal(err)
	}
	otherVariant := engine.NewCheckpointID()
	otherVariant[8] = otherVariant[8]&0x1f | 0xc0
	badIDs := map[string]uuid.UUID{"version 4": uuid.New(), "version 1": uuid.Must(uuid.NewUUID()), "version 7, another variant": otherVariant}
	put := `SELECT * FROM pgcheckpoint.checkpoint_put($1, '', $2, NULL, $3, '{}', '', '{}', '[]', '{}', '{}', '', 0)`
	appendSQL := `SELECT * FROM pgcheckpoint.checkpoint_append('main', '', $1, NULL, $2, '{}', '', '{}', '[]', '{}', '{}', '{}', '{}', '', 0)`
	refused := func(what, want string, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != want {
			t.Errorf("%s: %v, want SQLSTATE %s", what, err, want)
		}
	}
	for name, id := range badIDs {
		_, err := b.db.Pool.Exec(b.ctx, put, "new", id, "manual")
		refused("checkpoint_put, "+name, "PC003", err)
		_, err = b.db.Pool.Exec(b.ctx, put, "main", id, "manual")
		refused("checkpoint_put on a written thread, "+name, "PC003", err)
		_, err = b.db.Pool.Exec(b.ctx, appendSQL, id, "manual")
		refused("checkpoint_append, "+name, "PC003", err)
		_, err = b.db.Pool.Exec(b.ctx, `SELECT * FROM pgcheckpoint.thread_branch($1, 'side-2', 'side-2', $2)`, src.ID, id)
		refused("thread_branch, "+name, "PC003", err)
		_, err = b.db.Pool.Exec(b.ctx, `SELECT * FROM pgcheckpoint.thread_merge('side', 'main', $1)`, id)
		refused("thread_merge, "+name, "PC003", err)
	}
	for _, trigger := range []string{"bogus", "", "Manual", "tool-call"} {
		_, err := b.db.Pool.Exec(b.ctx, put, "new", engine.NewCheckpointID(), trigger)
		refused("checkpoint_put, trigger "+trigger, "PC003", err)
		_, err = b.db.Pool.Exec(b.ctx, appendSQL, engine.NewCheckpointID(), trigger)
		refused("checkpoint_append, trigger "+trigger, "PC003", err)
	}
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d checkpoints after the refused writes (%v), want 2", n, err)
	}
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.threads WHERE thread_id IN ('new', 'side-2')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d thread rows made by the refused writes (%v), want 0", n, err)
	}

	// Every trigger the engine knows, and a NULL (the default, manual), is
	// one the SQL API takes, and the functions' lists name no other.
	triggers := []engine.Trigger{engine.TriggerToolCall, engine.TriggerLLMCall, engine.TriggerStateChange,
		engine.TriggerTaskBoundary, engine.TriggerManual, engine.TriggerInterval}
	for _, tr := range triggers {
		if !tr.Valid() {
			t.Fatalf("engine.Trigger %q is not valid", tr)
		}
		if _, err := b.db.Pool.Exec(b.ctx, put, "triggers", engine.NewCheckpointID(), string(tr)); err != nil {
			t.Errorf("checkpoint_put, trigger %s: %v", tr, err)
		}
	}
	if _, err := b.db.Pool.Exec(b.ctx, put, "triggers", engine.NewCheckpointID(), nil); err != nil {
		t.Errorf("checkpoint_put, no trigger: %v", err)
	}
	list := regexp.MustCompile(`NOT IN \(([^)]*)\) THEN\s+RAISE EXCEPTION 'unknown trigger`)
	// The list is written once, in checkpoint_check, which every function
	// that takes a trigger calls.
	source := func(fn string) string {
		var def string
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT prosrc FROM pg_proc WHERE proname = $1 AND pronamespace = 'pgcheckpoint'::regnamespace`, fn).Scan(&def); err != nil {
			t.Fatal(err)
		}
		return def
	}
	for _, fn := range []string{"checkpoint_put", "checkpoint_append"} {
		if !strings.Contains(source(fn), "pgcheckpoint.checkpoint_check(p_thread_id, p_namespace, p_checkpoint_id, p_trigger, p_tags, p_summary, p_next_node)") {
			t.Errorf("%s does not check its id and trigger with pgcheckpoint.checkpoint_check", fn)
		}
	}
	for _, fn := range []string{"checkpoint_check"} {
		m := list.FindStringSubmatch(source(fn))
		if m == nil {
			t.Fatalf("%s: no list of triggers found", fn)
		}
		var got []string
		for _, v := range strings.Split(m[1], ",") {
			got = append(got, strings.Trim(strings.TrimSpace(v), "'"))
		}
		var want []string
		for _, tr := range triggers {
			want = append(want, string(tr))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s takes the triggers %v, the engine %v", fn, got, want)
		}
	}
}

// A write from SQL records a size an Append's limit can start from:
// checkpoint_put and checkpoint_append measure the content (or change)
// when size_bytes is NULL, as the SQL page's examples leave it, and refuse
// a negative one (PC003, nothing written). So an engine's Append on a head
// written from psql is held to Config.MaxSnapshotBytes. A content size the
// client measured (p_content_bytes) is recorded as given and held to
// p_max_size_bytes (PC006 over it).
func TestSQLWritesRecordASize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := `["` + strings.Repeat("x", 9000) + `"]`
	var id uuid.UUID
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT checkpoint_id FROM pgcheckpoint.checkpoint_put('psql', '', $1, NULL, 'manual', '{}', '', '{}', $2::jsonb, '{}', '{}', '', NULL)`,
		engine.NewCheckpointID(), big).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var size int64
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT size_bytes FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, id).Scan(&size); err != nil || size < 9000 {
		t.Fatalf("checkpoint_put with a NULL size recorded %d (%v), want the content's, 9,000 or more", size, err)
	}
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT checkpoint_id FROM pgcheckpoint.checkpoint_append('psql', '', $1, NULL, 'manual', '{}', '', '{}', $2::jsonb, '{}', '{}', '{}', '{}', '', NULL)`,
		engine.NewCheckpointID(), big).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT size_bytes FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, id).Scan(&size); err != nil || size < 18000 {
		t.Fatalf("checkpoint_append with a NULL size recorded %d (%v), want the head's and the change's, 18,000 or more", size, err)
	}
	for name, sql := range map[string]string{
		"checkpoint_put":    `SELECT * FROM pgcheckpoint.checkpoint_put('psql', '', $1, NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '', -1000000)`,
		"checkpoint_append": `SELECT * FROM pgcheckpoint.checkpoint_append('psql', '', $1, NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '{}', '{}', '', -1000000)`,
		"checkpoint_append, content_bytes": `SELECT * FROM pgcheckpoint.checkpoint_append('psql', '', $1, NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '{}', '{}', '', 0,
			p_content_bytes => -1)`,
	} {
		_, err := b.db.Pool.Exec(b.ctx, sql, engine.NewCheckpointID())
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "PC003" {
			t.Errorf("%s with a negative size: %v, want PC003", name, err)
		}
	}
	// A size the client measured (an encrypting one's) is recorded and held
	// to the limit in place of the store's bound and measure.
	_, err := b.db.Pool.Exec(b.ctx, `SELECT * FROM pgcheckpoint.checkpoint_append('psql', '', $1, NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '{}', '{}', '', 0,
		p_max_size_bytes => 100000, p_content_bytes => 100001)`, engine.NewCheckpointID())
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "PC006" {
		t.Errorf("checkpoint_append with content_bytes over max_size_bytes: %v, want PC006", err)
	}
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints WHERE thread_id = 'psql'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d checkpoints on the thread (%v), want the 2 written", n, err)
	}
	limited := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{MaxSnapshotBytes: 20000})
	if _, err := limited.Append(b.ctx, engine.AppendInput{ThreadID: "psql", Messages: json.RawMessage(big)}); !errors.Is(err, engine.ErrSnapshotTooLarge) {
		t.Fatalf("an Append of 9,000 bytes on 18,000 written from SQL, limit 20,000: %v, want ErrSnapshotTooLarge", err)
	}
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT checkpoint_id FROM pgcheckpoint.checkpoint_append('psql', '', $1, NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '{}', '{}', '', 0,
		p_max_size_bytes => 100000, p_content_bytes => 1234)`, engine.NewCheckpointID()).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT size_bytes FROM pgcheckpoint.checkpoints WHERE checkpoint_id = $1`, id).Scan(&size); err != nil || size != 1234 {
		t.Fatalf("checkpoint_append with content_bytes 1,234 recorded %d (%v)", size, err)
	}
}

// A checkpoint's own fields keep the engine's bounds when the SQL API
// writes them: checkpoint_put and checkpoint_append refuse (PC003, which
// the store reads as ErrInvalidInput) a tag over 255 characters, more than
// MaxTags tags, a NULL tag, tags of two dimensions, a summary over
// MaxSummaryLength characters, a next node over 255; thread_branch a
// branch name that is NULL (it would make the branch's tag NULL), empty
// or over 255. The other tables'
// checks hold a bare INSERT or UPDATE too: a pending write's task id or
// channel over 255 characters, an empty channel. Nothing is written. Such
// rows could not be exported to the other store, or read by the engine
// at all (a NULL tag).
func TestSQLWritesKeepTheTextBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.snap(t, engine.SnapshotInput{ThreadID: "main"})
	long := strings.Repeat("x", 256)
	put := `SELECT * FROM pgcheckpoint.checkpoint_put('main', '', $1, NULL, 'manual', $2::text[], $3, '{}', '[]', '{}', '{}', $4, 0)`
	appendSQL := `SELECT * FROM pgcheckpoint.checkpoint_append('main', '', $1, NULL, 'manual', $2::text[], $3, '{}', '[]', '{}', '{}', '{}', '{}', $4, 0)`
	type fields struct {
		tags     any
		summary  string
		nextNode string
	}
	manyTags := make([]string, engine.MaxTags+1)
	refused := func(what, code string, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != code {
			t.Errorf("%s: %v, want SQLSTATE %s", what, err, code)
		}
	}
	for name, f := range map[string]fields{
		"a tag of 256 characters":   {tags: []string{"ok", long}},
		"257 tags":                  {tags: manyTags},
		"a NULL tag":                {tags: []*string{nil}},
		"tags of two dimensions":    {tags: "{{a,b},{c,d}}"},
		"a summary of 4097":         {tags: []string{}, summary: strings.Repeat("s", engine.MaxSummaryLength+1)},
		"a next node of 256":        {tags: []string{}, nextNode: long},
		"a summary of 4097 letters": {tags: []string{}, summary: strings.Repeat("é", engine.MaxSummaryLength+1)},
	} {
		for fn, sql := range map[string]string{"checkpoint_put": put, "checkpoint_append": appendSQL} {
			_, err := b.db.Pool.Exec(b.ctx, sql, engine.NewCheckpointID(), f.tags, f.summary, f.nextNode)
			refused(fn+" with "+name, "PC003", err)
		}
	}
	// A thread id or namespace out of bounds is PC003 from the function,
	// not the threads table's check, whose message shows the row as it is
	// (here with an escape sequence a terminal would act on).
	for name, key := range map[string][2]any{
		"a namespace of 256": {"main", "\x1b]0;t\a" + long},
		"a thread id of 256": {"\x1b[2J" + long, ""},
		"no thread id":       {"", ""},
	} {
		for fn, sql := range map[string]string{
			"checkpoint_put":    `SELECT * FROM pgcheckpoint.checkpoint_put($1, $2, pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '', 0)`,
			"checkpoint_append": `SELECT * FROM pgcheckpoint.checkpoint_append($1, $2, pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '{}', '{}', '', 0)`,
		} {
			_, err := b.db.Pool.Exec(b.ctx, sql, key[0], key[1])
			refused(fn+" with "+name, "PC003", err)
		}
	}
	// A NULL namespace is the root's, as it always was.
	for _, sql := range []string{
		`SELECT step FROM pgcheckpoint.checkpoint_put('null-ns', NULL, pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '', 0)`,
		`SELECT step FROM pgcheckpoint.checkpoint_append('null-ns', NULL, pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '{}', '{}', '', 0)`,
	} {
		if _, err := b.db.Pool.Exec(b.ctx, sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
	for name, branch := range map[string]any{"a branch name of 256": long, "no branch name": nil, "an empty branch name": ""} {
		_, err := b.db.Pool.Exec(b.ctx, `SELECT * FROM pgcheckpoint.thread_branch($1, 'side', $2, pgcheckpoint.uuid_v7())`, src.ID, branch)
		refused("thread_branch, "+name, "PC003", err)
	}
	// The bounds themselves are taken.
	if _, err := b.db.Pool.Exec(b.ctx, put, engine.NewCheckpointID(), append(manyTags[2:], long[1:]),
		strings.Repeat("é", engine.MaxSummaryLength), long[1:]); err != nil {
		t.Fatalf("checkpoint_put at every bound: %v", err)
	}
	for name, sql := range map[string]string{

		"a bare INSERT of a pending write's task id": `INSERT INTO pgcheckpoint.pending_writes (thread_id, namespace, checkpoint_seq, checkpoint_id, task_id, idx, channel, value)
			SELECT thread_id, namespace, seq, checkpoint_id, '` + long + `', 0, 'c', '1' FROM pgcheckpoint.checkpoints LIMIT 1`,
		"a bare INSERT of an empty channel": `INSERT INTO pgcheckpoint.pending_writes (thread_id, namespace, checkpoint_seq, checkpoint_id, task_id, idx, channel, value)
			SELECT thread_id, namespace, seq, checkpoint_id, 't', 0, '', '1' FROM pgcheckpoint.checkpoints LIMIT 1`,
	} {
		_, err := b.db.Pool.Exec(b.ctx, sql)
		refused(name, "23514", err)
	}
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints WHERE thread_id <> 'null-ns'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d checkpoints after the refused writes (%v), want the 2 written", n, err)
	}
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints WHERE thread_id = 'null-ns' AND namespace = ''`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d checkpoints in the root namespace of the NULL namespace's thread (%v), want 2", n, err)
	}
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.threads WHERE thread_id = 'side'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused branch made %d thread rows (%v)", n, err)
	}
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.pending_writes`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused inserts made %d pending writes (%v)", n, err)
	}
}

// The functions' messages show the text a client or an agent chose (a
// thread id, a namespace, a policy) in printable ASCII alone
// (pgcheckpoint.quoted_text), so an error or a warning written to a
// terminal or the server's log never acts on it: here a thread id and a
// namespace holding ESC, a bell, a carriage return, DEL, a C1 CSI and a
// bidi override, through every error that names them; with
// standard_conforming_strings off too, which reads backslashes in a
// literal otherwise.
func TestSQLMessagesEscapeWhatTheyName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hostile := "t-\x1b[31mred\x1b]0;title\a\rcr\x7fdel\u009b31m\u202eevil"
	src := b.snap(t, engine.SnapshotInput{ThreadID: "main"})
	if _, err := b.db.Pool.Exec(b.ctx, `SELECT pgcheckpoint.checkpoint_put($1 || 'x', '', pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '', 0)`, hostile); err != nil {
		t.Fatal(err)
	}
	conn, err := b.db.Pool.Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(b.ctx, `SET standard_conforming_strings = off`); err != nil {
		t.Fatal(err)
	}
	for name, sql := range map[string]string{
		"checkpoint_append, no head":          `SELECT * FROM pgcheckpoint.checkpoint_append($1, $1, pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '{}', '{}', '', 0)`,
		"checkpoint_put, no parent":           `SELECT * FROM pgcheckpoint.checkpoint_put($1, $1, pgcheckpoint.uuid_v7(), pgcheckpoint.uuid_v7(), 'manual', '{}', '', '{}', '[]', '{}', '{}', '', 0)`,
		"thread_copy, unknown":                `SELECT * FROM pgcheckpoint.thread_copy($1, 'other')`,
		"thread_copy, onto itself":            `SELECT * FROM pgcheckpoint.thread_copy($1, $1)`,
		"thread_copy, onto a thread":          `SELECT * FROM pgcheckpoint.thread_copy('main', $1 || 'x')`,
		"thread_merge, no branch":             `SELECT * FROM pgcheckpoint.thread_merge($1, 'main', pgcheckpoint.uuid_v7(), $1)`,
		"thread_merge, into itself":           `SELECT * FROM pgcheckpoint.thread_merge($1, $1, pgcheckpoint.uuid_v7())`,
		"thread_rewind_to_step":               `SELECT * FROM pgcheckpoint.thread_rewind_to_step($1, $1, 1)`,
		"thread_gc, unknown policy":           `SELECT * FROM pgcheckpoint.thread_gc('main', $1)`,
		"thread_branch, a thread that exists": `SELECT * FROM pgcheckpoint.thread_branch('` + src.ID.String() + `', $1 || 'x', 'b', pgcheckpoint.uuid_v7())`,
	} {
		_, err := conn.Exec(b.ctx, sql, hostile)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			t.Errorf("%s: %v, want an error", name, err)
			continue
		}
		for _, r := range pgErr.Message {
			if r < 0x20 || r >= 0x7f {
				t.Errorf("%s: the message shows %U: %q", name, r, pgErr.Message)
				break
			}
		}
		if !strings.Contains(pgErr.Message, `t-\u001b[31mred`) {
			t.Errorf("%s: the message does not name the thread, escaped: %q", name, pgErr.Message)
		}
	}
}

// Every function's body is parsed with the caller's settings, so a literal
// with a backslash reads otherwise under standard_conforming_strings off
// (a server, database or role may set it): there the summaries, the NUL
// escape and the message chain went wrong, and every write failed. Here an
// Engine whose sessions have it off writes and reads what one with it on
// does, and the SQL functions answer the same.
func TestStandardConformingStringsOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	off := b.poolWith(t, "standard_conforming_strings", "off")
	var setting string
	if err := off.QueryRow(b.ctx, `SELECT current_setting('standard_conforming_strings')`).Scan(&setting); err != nil || setting != "off" {
		t.Fatalf("the setting is %q (%v)", setting, err)
	}
	engOff := engine.New(postgres.NewStore(off, postgres.Options{}), deltas)

	// The same writes on both, each on a thread of its own: text with a
	// NUL, backslashes and U+0001 (the NUL escape's own character), an
	// extending snapshot (a delta on the message chain), an Append, a
	// default summary (message_summary, json_text).
	msgs := func(n int) json.RawMessage {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf(`{"role":"user","content":"m%d a\u0000b \\ \u0001 \" c:\\x00"}`, i))
		}
		return json.RawMessage("[" + strings.Join(parts, ",") + "]")
	}
	write := func(eng *engine.Engine, thread string) *engine.Checkpoint {
		t.Helper()
		if _, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread, Messages: msgs(2), State: json.RawMessage(`{"k":"a\u0000\\"}`)}); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		if _, err := eng.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread, Messages: msgs(3), State: json.RawMessage(`{"k":"b"}`)}); err != nil {
			t.Fatalf("second snapshot: %v", err)
		}
		if _, err := eng.Append(b.ctx, engine.AppendInput{ThreadID: thread, Messages: json.RawMessage(`[{"content":"\u0000\\\u0001"}]`), SetState: json.RawMessage(`{"j":"\\u0000"}`)}); err != nil {
			t.Fatalf("append: %v", err)
		}
		head, err := eng.Latest(b.ctx, thread)
		if err != nil {
			t.Fatalf("latest: %v", err)
		}
		return head
	}
	on, offHead := write(b.eng, "on"), write(engOff, "off")
	if string(on.Messages) != string(offHead.Messages) || string(on.State) != string(offHead.State) ||
		on.Summary != offHead.Summary || on.Format != offHead.Format || on.SizeBytes != offHead.SizeBytes {
		t.Fatalf("with the setting off the head reads\n%s %s %q %s %d\nwhere with it on\n%s %s %q %s %d",
			offHead.Messages, offHead.State, offHead.Summary, offHead.Format, offHead.SizeBytes,
			on.Messages, on.State, on.Summary, on.Format, on.SizeBytes)
	}
	// Read back by the other engine, too.
	if got, err := engOff.Get(b.ctx, on.ID); err != nil || string(got.Messages) != string(on.Messages) {
		t.Fatalf("read with the setting off: %v", err)
	}

	// The functions, called as from psql with their arguments bound.
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`SELECT pgcheckpoint.json_text($1::jsonb)`, []any{`["a\u00010b", "\\", "\u0001"]`}},
		{`SELECT pgcheckpoint.json_text($1::jsonb)`, []any{`"\u0001\u0001\u00010 x"`}},
		{`SELECT pgcheckpoint.unescaped_text($1)`, []any{"\x01\x010\x01\x01\x010\\1"}},
		{`SELECT pgcheckpoint.message_chain(NULL, $1)::text`, []any{[]byte("0123456789abcdef")}},
		{`SELECT pgcheckpoint.message_chain_at($1, 0)::text`, []any{[]byte{1}}},
		{`SELECT pgcheckpoint.checkpoint_default_summary($1::jsonb, '{}')`, []any{`[{"role":"a\\b","content":"x\\y \u00010 \u0001"}]`}},
		// A write from SQL, on a thread of each setting's own: its step.
		{`SELECT step::text FROM pgcheckpoint.checkpoint_put('sql-' || current_setting('standard_conforming_strings'), '',
		    pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', NULL, '{}', $1::jsonb, '{}', '{}', NULL, NULL)`, []any{`[{"content":"x\\y \u00010"}]`}},
	} {
		var want, got *string
		if err := b.db.Pool.QueryRow(b.ctx, q.sql, q.args...).Scan(&want); err != nil {
			t.Fatalf("%s, the setting on: %v", q.sql, err)
		}
		if err := off.QueryRow(b.ctx, q.sql, q.args...).Scan(&got); err != nil {
			t.Errorf("%s, the setting off: %v", q.sql, err)
			continue
		}
		if (want == nil) != (got == nil) || (want != nil && *want != *got) {
			t.Errorf("%s: %v with the setting off, %v with it on", q.sql, deref(got), deref(want))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *s)
}

// Arguments a psql caller may type that no engine sends: each is PC003
// (bad input, nothing written), where the server's own error surfaced (a
// negative LIMIT, a timestamp out of range) or a UUIDv7 wrapped around to
// an id that sorts after every id made now.
func TestSQLRefusesOddArguments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.snap(t, engine.SnapshotInput{ThreadID: "main"})
	conn := b.defaultTenantConn(t)
	before := b.count(t)
	for name, sql := range map[string]string{
		"thread_list_heads, a negative page":        `SELECT * FROM pgcheckpoint.thread_list_heads('', -1)`,
		"checkpoint_line_range, a negative page":    `SELECT * FROM pgcheckpoint.checkpoint_line_range('` + src.ID.String() + `', -1)`,
		"thread_gc, keep_age of a million years":    `SELECT * FROM pgcheckpoint.thread_gc('main', 'keep_age', NULL, '1000000 years')`,
		"thread_gc_batch_oldest, a negative batch":  `SELECT pgcheckpoint.thread_gc_batch_oldest('keep_last_n', 1, NULL, -1, now())`,
		"thread_prune_many, keep_latest NULL":       `SELECT pgcheckpoint.thread_prune_many(ARRAY['main'], NULL)`,
		"thread_set_expiry, keep_latest NULL":       `SELECT pgcheckpoint.thread_set_expiry('main', now() - interval '1 hour', NULL)`,
		"thread_set_expiry, -infinity":              `SELECT pgcheckpoint.thread_set_expiry('main', '-infinity', false)`,
		"thread_set_expiry, infinity":               `SELECT pgcheckpoint.thread_set_expiry('main', 'infinity', false)`,
		"thread_set_expiry, year 12000":             `SELECT pgcheckpoint.thread_set_expiry('main', '12000-01-01', false)`,
		"thread_set_expiry, year 1's first instant": `SELECT pgcheckpoint.thread_set_expiry('main', '0001-01-01 00:00:00+00', false)`,
		"uuid_v7, infinity":                         `SELECT pgcheckpoint.uuid_v7('infinity')`,
		"uuid_v7, before 1970":                      `SELECT pgcheckpoint.uuid_v7('1960-01-01')`,
		"uuid_v7, past 48 bits of milliseconds":     `SELECT pgcheckpoint.uuid_v7('10890-01-01')`,
		"checkpoint_put, an id made before 1970":    `SELECT * FROM pgcheckpoint.checkpoint_put('main', '', pgcheckpoint.uuid_v7('1969-12-31'), NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '', 0)`,
	} {
		_, err := conn.Exec(b.ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "PC003" {
			t.Errorf("%s: %v, want SQLSTATE PC003", name, err)
		}
	}
	if after := b.count(t); after != before {
		t.Errorf("the refused calls changed the tables: %v -> %v", before, after)
	}
	// The bounds themselves are taken.
	var id uuid.UUID
	for _, at := range []string{"1970-01-01 00:00:00+00", "10889-08-02 05:31:50.655+00"} {
		if err := conn.QueryRow(b.ctx, `SELECT pgcheckpoint.uuid_v7($1::timestamptz)`, at).Scan(&id); err != nil || id.Version() != 7 {
			t.Errorf("uuid_v7(%s): %v %v", at, id, err)
		}
	}
	var null *uuid.UUID
	if err := conn.QueryRow(b.ctx, `SELECT pgcheckpoint.uuid_v7(NULL)`).Scan(&null); err != nil || null != nil {
		t.Errorf("uuid_v7(NULL): %v %v", null, err)
	}
}

// Content written from SQL is plaintext: checkpoint_put and
// checkpoint_append refuse it for an encrypted thread (one with a data
// key) with PC007 and write nothing, at every isolation level, as the
// engine's writes without encryption are refused (conformance
// PlaintextWritesToEncryptedThreadsAreRefused); a thread without a key
// takes them, and p_sealed, which an encrypting client passes, lets a
// write through.
func TestSQLWritesRefusePlaintextForEncryptedThreads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enc := b.encrypting(t)
	if _, err := enc.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "sealed", Messages: json.RawMessage(`["secret"]`)}); err != nil {
		t.Fatal(err)
	}
	b.snap(t, engine.SnapshotInput{ThreadID: "open"})
	put := `SELECT * FROM pgcheckpoint.checkpoint_put($1, '', $2, NULL, 'manual', '{}', '', '{}', '["plain"]', '{}', '{}', '', NULL)`
	appendSQL := `SELECT * FROM pgcheckpoint.checkpoint_append($1, '', $2, NULL, 'manual', '{}', '', '{}', '["plain"]', '{}', '{}', '{}', '{}', '', NULL)`
	before := b.count(t)
	for _, level := range []string{"READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"} {
		for fn, sql := range map[string]string{"checkpoint_put": put, "checkpoint_append": appendSQL} {
			tx, err := b.db.Pool.Begin(b.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(b.ctx, "SET TRANSACTION ISOLATION LEVEL "+level); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(b.ctx, `SET LOCAL pgcheckpoint.tenant = 'default'`); err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(b.ctx, sql, "sealed", engine.NewCheckpointID())
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "PC007" {
				t.Errorf("%s, %s into an encrypted thread: %v, want SQLSTATE PC007", level, fn, err)
			}
			_ = tx.Rollback(b.ctx)
		}
	}
	// An engine without encryption in a caller's transaction (the store
	// writes through checkpoint_put there).
	tx, err := b.db.Pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	inTx, err := b.eng.WithTx(tx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inTx.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "sealed", Messages: json.RawMessage(`["plain"]`)}); !errors.Is(err, engine.ErrEncrypted) {
		t.Errorf("an engine without encryption, WithTx: %v, want ErrEncrypted", err)
	}
	_ = tx.Rollback(b.ctx)
	if n := b.count(t); n != before {
		t.Fatalf("refused writes left checkpoints: %d, want %d", n, before)
	}
	conn := b.defaultTenantConn(t)
	for fn, sql := range map[string]string{"checkpoint_put": put, "checkpoint_append": appendSQL} {
		if _, err := conn.Exec(b.ctx, sql, "open", engine.NewCheckpointID()); err != nil {
			t.Errorf("%s into a thread without a key: %v", fn, err)
		}
	}
	// What copies stored values from SQL: into an encrypted target, out of
	// an encrypted source (a branch of it only to an id with a key), or
	// plaintext onto an id an encrypted thread left its key on.
	head, err := enc.Latest(b.ctx, "sealed")
	if err != nil {
		t.Fatal(err)
	}
	open, err := b.eng.Latest(b.ctx, "open")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: "gone", Messages: json.RawMessage(`["x"]`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := enc.DeleteThreads(b.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	before = b.count(t)
	for _, c := range []struct{ name, code, sql string }{
		{"thread_merge into an encrypted thread", "PC007", `SELECT * FROM pgcheckpoint.thread_merge('open', 'sealed', pgcheckpoint.uuid_v7())`},
		{"thread_merge of an encrypted thread", "PC007", `SELECT * FROM pgcheckpoint.thread_merge('sealed', 'open', pgcheckpoint.uuid_v7())`},
		{"thread_copy of an encrypted thread", "PC007", `SELECT * FROM pgcheckpoint.thread_copy('sealed', 'copy')`},
		{"thread_copy onto a key left by a deleted thread", "PC003", `SELECT * FROM pgcheckpoint.thread_copy('open', 'gone')`},
		{"thread_branch of a plaintext thread onto a key left by a deleted thread", "PC003", `SELECT * FROM pgcheckpoint.thread_branch('` + open.ID.String() + `', 'gone', 'b', pgcheckpoint.uuid_v7())`},
		{"thread_branch of an encrypted thread to an id without a key", "PC007", `SELECT * FROM pgcheckpoint.thread_branch('` + head.ID.String() + `', 'fork', 'b', pgcheckpoint.uuid_v7())`},
	} {
		_, err := conn.Exec(b.ctx, c.sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != c.code {
			t.Errorf("%s: %v, want SQLSTATE %s", c.name, err, c.code)
		}
	}
	if n := b.count(t); n != before {
		t.Errorf("refused copies left rows: %v, want %v", n, before)
	}
	// A branch of an encrypted thread to an id with a key (as an encrypting
	// engine makes it first): sealed values in an encrypted thread.
	if _, err := conn.Exec(b.ctx, `SELECT * FROM pgcheckpoint.thread_branch($1, 'gone', 'b', pgcheckpoint.uuid_v7())`, head.ID); err != nil {
		t.Errorf("thread_branch of an encrypted thread to an id with a key: %v", err)
	}
	sealed := strings.Replace(put, "NULL)", "NULL, p_sealed => true)", 1)
	if _, err := conn.Exec(b.ctx, sealed, "sealed", engine.NewCheckpointID()); err != nil {
		t.Errorf("checkpoint_put with p_sealed into an encrypted thread: %v", err)
	}
}

// The refusal is made under the thread's lock: a write without encryption
// that waits for the lock while an encrypting transaction makes the
// thread's key and first sealed checkpoint sees the key once it gets the
// lock, and is refused (it was written in plaintext after the sealed
// checkpoint when the check ran in the statement that waited). Through the
// pipelined write and through checkpoint_put alone (SingleStatement), on a
// thread with plaintext from before and on a new one.
func TestPlaintextRefusedWhenTheKeyCommitsWhileTheLockIsAwaited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enc := b.encrypting(t)
	for _, single := range []bool{false, true} {
		plain := engine.New(postgres.NewStore(b.db.Pool, postgres.Options{SingleStatement: single}), engine.Config{})
		for _, before := range []bool{false, true} {
			thread := fmt.Sprintf("single-%v-before-%v", single, before)
			if before {
				if _, err := plain.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`["before encryption"]`)}); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := b.db.Pool.Begin(b.ctx)
			if err != nil {
				t.Fatal(err)
			}
			inTx, err := enc.WithTx(tx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := inTx.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`["sealed"]`)}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := plain.Snapshot(b.ctx, engine.SnapshotInput{ThreadID: thread, Messages: json.RawMessage(`["PLAIN-AFTER"]`)})
				done <- err
			}()
			waitForLockWaiter(t, b, thread)
			if err := tx.Commit(b.ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; !errors.Is(err, engine.ErrEncrypted) {
				t.Errorf("%s: a write without encryption that waited for the key's transaction: %v, want ErrEncrypted", thread, err)
			}
			var n int
			if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM pgcheckpoint.checkpoints WHERE thread_id = $1 AND messages::text LIKE '%PLAIN-AFTER%'`, thread).Scan(&n); err != nil || n != 0 {
				t.Errorf("%s: %d plaintext rows after the sealed one (%v)", thread, n, err)
			}
		}
	}
}

// An export spells a pending write's time in UTC whatever the session's
// TimeZone: in Europe/Amsterdam a time of 1900 has an offset in seconds
// (+00:19:32), which the server printed and RFC 3339 does not parse, so
// the thread no longer exported.
func TestExportSpellsPendingWriteTimesInUTC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.snap(t, engine.SnapshotInput{ThreadID: "old"})
	if _, err := b.eng.PutWrites(b.ctx, res.ID, "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE pgcheckpoint.pending_writes SET created_at = $1`, at); err != nil {
		t.Fatal(err)
	}
	pool := b.poolWith(t, "timezone", "Europe/Amsterdam")
	var out bytes.Buffer
	if _, err := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{}).Export(b.ctx, "old", &out); err != nil {
		t.Fatalf("export in Europe/Amsterdam: %v", err)
	}
	if !strings.Contains(out.String(), `"created_at":"1900-01-01T00:00:00Z"`) {
		t.Errorf("the pending write's time is not spelled in UTC:\n%s", out.String())
	}
}

// An import through a pool of one connection finishes: every check it
// makes reads in the import's own transaction. (It waited forever for a
// second connection, and as many concurrent imports as the pool has
// connections waited for each other.)
func TestImportThroughAPoolOfOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.snap(t, engine.SnapshotInput{ThreadID: "t", Messages: json.RawMessage(`["a"]`)})
	br, err := b.eng.Branch(b.ctx, src.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	one := engine.New(postgres.NewStore(poolOf(t, b.db.URL, 1), postgres.Options{}), engine.Config{})
	// A thread, and a branch whose parent and source are in the database.
	for _, thread := range []string{"t", br.ThreadID} {
		var file bytes.Buffer
		if _, err := b.eng.Export(b.ctx, thread, &file); err != nil {
			t.Fatal(err)
		}
		if _, err := b.eng.DeleteThreads(b.ctx, thread); err != nil {
			t.Fatal(err)
		}
		if _, err := one.Import(ctx, &file, engine.ImportOptions{}); err != nil {
			t.Fatalf("import of %s through a pool of one: %v", thread, err)
		}
	}
}

// A tenant name the engine refuses (engine.CheckTenant) set from psql
// writes nothing: PC003 at the thread's first lock, where a name over 255
// characters failed with the index's row size (54000, no typed error).
// (C1 control characters are not looked for in SQL: see thread_lock.)
func TestSQLRefusesTenantNamesTheEngineRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.count(t)
	for name, tenant := range map[string]string{
		"256 characters":      strings.Repeat("t", 256),
		"3,200 characters":    strings.Repeat("t", 3200),
		"a control character": "a\x01b",
		"DEL":                 "a\x7fb",
		"a C1 control":        "acme\u0085",
	} {
		if engine.CheckTenant(tenant) == nil {
			t.Fatalf("%s: the engine takes it", name)
		}
		tx, err := b.db.Pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(b.ctx, `SELECT set_config('pgcheckpoint.tenant', $1, true)`, tenant); err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(b.ctx, `SELECT * FROM pgcheckpoint.checkpoint_put('t', '', pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '', NULL)`)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "PC003" {
			t.Errorf("a tenant of %s: %v, want SQLSTATE PC003", name, err)
		}
		_ = tx.Rollback(b.ctx)
	}
	if n := b.count(t); n != before {
		t.Fatalf("refused writes left rows: %v, want %v", n, before)
	}
	// The longest name the engine takes writes.
	long := strings.Repeat("é", 255)
	tx, err := b.db.Pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.ctx) //nolint:errcheck
	if _, err := tx.Exec(b.ctx, `SELECT set_config('pgcheckpoint.tenant', $1, true)`, long); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(b.ctx, `SELECT * FROM pgcheckpoint.checkpoint_put('t', '', pgcheckpoint.uuid_v7(), NULL, 'manual', '{}', '', '{}', '[]', '{}', '{}', '', NULL)`); err != nil {
		t.Errorf("a tenant of 255 characters: %v", err)
	}
}

// encrypting is an Engine over the test's database that encrypts with a
// key of its own.
func (b *bundle) encrypting(t *testing.T) *engine.Engine {
	t.Helper()
	keys, err := engine.ParseLocalKeys(engine.NewKeyText("k"))
	if err != nil {
		t.Fatal(err)
	}
	return engine.New(postgres.NewStore(b.db.Pool, postgres.Options{}), engine.Config{Encryption: engine.Encryption{Keys: keys}})
}

// poolWith is a pool to the test's database whose sessions start with a
// setting (closed when the test ends).
func (b *bundle) poolWith(t *testing.T, setting, value string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams[setting] = value
	pool, err := pgxpool.NewWithConfig(b.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// defaultTenantConn is a connection of the test's pool whose session is in
// the default tenant, as a psql session that sets it (released when the
// test ends).
func (b *bundle) defaultTenantConn(t *testing.T) *pgxpool.Conn {
	t.Helper()
	conn, err := b.db.Pool.Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(b.ctx, `SET pgcheckpoint.tenant = 'default'`); err != nil {
		t.Fatal(err)
	}
	return conn
}

// json_compact_size is the length of a value's compact JSON text: for
// random values, nested and empty containers, strings holding ", " and
// ": ", and non-ASCII text, it equals the length of jsonb's text with its
// whitespace taken out by encoding/json.
func TestJSONCompactSize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rng := rand.New(rand.NewPCG(29, 53))
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(7); {
		case depth > 4 || k == 0:
			return []any{"x, y: z", "é ü", 1.5, -3, true, nil, ""}[rng.IntN(7)]
		case k <= 3:
			n := rng.IntN(4)
			a := make([]any, n)
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		default:
			m := map[string]any{}
			for i := range rng.IntN(4) {
				m[fmt.Sprintf("k%d: ,", i)] = value(depth + 1)
			}
			return m
		}
	}
	for i := range 300 {
		v, err := json.Marshal(value(0))
		if err != nil {
			t.Fatal(err)
		}
		var text string
		var got int64
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT $1::jsonb::text, pgcheckpoint.json_compact_size($1::jsonb)`, string(v)).Scan(&text, &got); err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(text)); err != nil {
			t.Fatal(err)
		}
		if got != int64(compact.Len()) {
			t.Fatalf("value %d, %s: json_compact_size %d, compact text %d bytes (%s)", i, text, got, compact.Len(), compact.String())
		}
	}
}

// An expiry of -infinity set by a bare UPDATE (thread_set_expiry refuses
// it) reads as expired, as a sweep takes it, not as the zero time of "does
// not expire" (a sweep expired the thread that ThreadExpiry said never
// would); +infinity reads as not expiring, and no sweep expires it.
func TestExpiryOfInfinitySetFromSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		thread, at string
		expired    bool
	}{{"past", "-infinity", true}, {"first", "0001-01-01 00:00:00+00", true}, {"never", "infinity", false}} {
		b.snap(t, engine.SnapshotInput{ThreadID: c.thread})
		if _, err := b.db.Pool.Exec(b.ctx, `UPDATE pgcheckpoint.threads SET expires_at = $2::timestamptz WHERE thread_id = $1`, c.thread, c.at); err != nil {
			t.Fatal(err)
		}
		at, _, err := b.eng.ThreadExpiry(b.ctx, c.thread)
		if err != nil || at.IsZero() == c.expired || (c.expired && at.Year() != 1) {
			t.Errorf("an expiry of %s: ThreadExpiry %v, %v", c.at, at, err)
		}
	}
	res, err := b.eng.Sweep(b.ctx, engine.KeepAll(), engine.SweepOptions{})
	if err != nil || res.Expired != 2 {
		t.Fatalf("sweep: %+v, %v; want the threads expired at -infinity and year 1 alone", res, err)
	}
}
