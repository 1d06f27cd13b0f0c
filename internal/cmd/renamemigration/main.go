// Command renamemigration writes migration 000012 (naming): the SQL
// routines renamed to one rule, entity first, and the thread lock written
// once. It reads the catalog of a scratch database migrated to the version
// before it, so that it can be run again after other migrations have
// redefined or added routines: every routine whose definition or comment
// names a renamed routine, or spells the thread lock's key, is redefined.
//
//	go run ./internal/cmd/renamemigration -database "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable" -queries queries
//
// The database URL names any database of a server where the user may
// create databases: a scratch database is created there and dropped. The
// files written (migrations/000012_naming.up.sql and .down.sql) are to be
// read before they are committed; the command fails when a routine still
// spells the lock's key after the rewrite (a new lock idiom, to be taught
// here or redefined by hand). With -queries DIR it also renames the
// routines in DIR/*.sql, in place. Once 000012 is released this command has
// no further use and can be deleted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// lockKey is the thread lock's first key, written once in thread_lock.
const lockKey = "1885563760"

// A rename: alias keeps the old name one release as a deprecated alias
// (the README documented it for psql).
type rename struct {
	old, new string
	alias    bool
}

var renames = []rename{
	{"lock_thread", "thread_lock", true},
	{"head", "thread_head", true},
	{"head_seq", "thread_head_seq", true},
	{"tree", "thread_tree", true},
	{"branch", "thread_branch", true},
	{"merge", "thread_merge", true},
	{"copy_thread", "thread_copy", true},
	{"prune", "thread_prune_many", true},
	{"expire_thread", "thread_expire", true},
	{"gc_thread", "thread_gc", true},
	{"gc_threads", "thread_gc_many", true},
	{"gc_batch", "thread_gc_batch", true},
	{"gc_sweep", "thread_gc_sweep", true},
	{"lineage", "checkpoint_lineage", true},
	{"rewind", "checkpoint_rewind", true},
	{"materialize", "checkpoint_materialize", true},
	{"delete_checkpoints", "checkpoint_delete_many", true},
	{"delete_for_runs", "checkpoint_delete_for_runs", true},
	{"lock_checkpoint_id", "checkpoint_id_lock", true},
	{"unescape_text", "unescaped_text", true},
	{"gc_check_policy", "retention_policy_check", false},
	{"list_digest_at", "message_chain_at", false},
}

// commentEdits are exact replacements in rewritten definitions, after the
// renames, where a comment's wording no longer fits. One not found is
// reported, not fatal: another migration may have reworded it.
var commentEdits = []struct{ routine, from, to string }{
	{"thread_prune_many", "-- Every lock first, in lock key order (see checkpoint_delete_many).",
		"-- Every lock first (see thread_lock_many)."},
	{"checkpoint_delete_many", `    -- The lock of every thread touched, in lock key order: the order of
    -- every function that takes several, so that none deadlocks with
    -- another. A caller holding some already takes them again at no cost.`,
		`    -- The lock of every thread touched (see thread_lock_many). A caller
    -- holding some already takes them again at no cost.`},
}

const threadLockDef = `CREATE OR REPLACE FUNCTION pgcheckpoint.thread_lock(p_thread_id text)
 RETURNS void
 LANGUAGE sql
AS $function$ SELECT pg_catalog.pg_advisory_xact_lock(1885563760, pg_catalog.hashtext(p_thread_id)) $function$;`

const threadLockComment = `Takes the thread's lock until the end of the transaction: advisory lock (1885563760, hashtext(thread_id)) in pg_locks. Every routine that changes a thread takes it first (several threads: thread_lock_many), so the thread's writers queue and each sees what the one before wrote. No SET clause, so that Postgres inlines it into its caller's plan (it costs nothing over the bare lock); every name in it is schema-qualified instead.`

const threadLockManyDef = `CREATE FUNCTION pgcheckpoint.thread_lock_many(p_thread_ids text[])
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pgcheckpoint.thread_lock(t.id)
    FROM (SELECT DISTINCT x AS id FROM unnest(p_thread_ids) x) t
    ORDER BY hashtext(t.id)
$$;`

const threadLockManyComment = `Takes the lock of each thread in the array (see thread_lock) until the end of the transaction, in lock key order: every routine that takes several takes them in this one order, so that none deadlocks with another. Locks already held are taken again at no cost; NULL ids are skipped.`

const upHeader = `-- One naming rule for the SQL API, and the thread lock written once.
--
-- Routines are named <entity>_<verb>[_<qualifier>], entity first (thread_,
-- checkpoint_, pending_write_ or pending_writes_; retention_policy_ for
-- the policy check); one that takes a set of its entity's keys (an array)
-- ends in _many. A helper that computes a value is named by that value,
-- noun first: message_digests, message_chain_at, json_text, unescaped_text.
-- The README holds the rule and the table of old and new names.
--
-- A rename keeps the routine's oid, so its privileges and comment stay.
-- The routines whose definition named an old routine are redefined with
-- the new name, and so are those that spelled the thread lock's key: they
-- call thread_lock (one thread) or thread_lock_many (several, in lock key
-- order). thread_lock has no SET clause so that Postgres inlines it into
-- its caller's plan; its names are schema-qualified instead.
--
-- The old names the README documented for psql stay one release as
-- deprecated aliases calling the new ones, with the same privileges.
--
-- Generated by internal/cmd/renamemigration from the catalog of a database
-- at version %d: change the generator, not this file.
`

const downHeader = `-- Back to version %d: the aliases and thread_lock_many go, the routines
-- take their old names, definitions and comments again. Generated by
-- internal/cmd/renamemigration.
`

type routine struct {
	name, kind, identityArgs, def, args, result, comment string
	sqlBody, retSet, strict, publicExec                  bool
	volatile, parallel                                   string
	rows                                                 float64
	inNames                                              []string // "VARIADIC x" for a variadic one
}

func (r routine) sig(name string) string {
	return "pgcheckpoint." + name + "(" + r.identityArgs + ")"
}

func (r routine) keyword() string {
	if r.kind == "p" {
		return "PROCEDURE"
	}
	return "FUNCTION"
}

type described struct{ kind, identity, text string }

func main() {
	var (
		url     = flag.String("database", os.Getenv("DATABASE_URL"), "URL of a database on a server where the user may create databases")
		version = flag.Uint("version", 12, "the migration's version")
		name    = flag.String("name", "naming", "the migration's name")
		out     = flag.String("out", "migrations", "folder to write the migration to")
		queries = flag.String("queries", "", "folder whose *.sql files get the new names, in place")
	)
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "renamemigration: no -database")
		os.Exit(2)
	}
	if err := run(context.Background(), *url, *version, *name, *out, *queries); err != nil {
		fmt.Fprintln(os.Stderr, "renamemigration:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string, version uint, name, out, queries string) error {
	var prev uint
	for _, m := range schema.Migrations() {
		if m.Version < version {
			prev = m.Version
		}
	}
	if prev == 0 {
		return errors.New("no migration before the version")
	}
	routines, others, err := readCatalog(ctx, url, prev)
	if err != nil {
		return err
	}
	up, down, notes, err := generate(routines, others, prev)
	if err != nil {
		return err
	}
	base := filepath.Join(out, fmt.Sprintf("%06d_%s", version, name))
	if err := os.WriteFile(base+".up.sql", []byte(up), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".down.sql", []byte(down), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s.up.sql and .down.sql from version %d\n", base, prev)
	if queries != "" {
		files, _ := filepath.Glob(filepath.Join(queries, "*.sql"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if s := renameInText(string(b), true); s != string(b) {
				if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
					return err
				}
				fmt.Println("renamed routines in", f)
			}
			for i, line := range strings.Split(renameInText(string(b), true), "\n") {
				if strings.Contains(line, lockKey) {
					notes = append(notes, fmt.Sprintf("%s:%d spells the lock key: %s", f, i+1, strings.TrimSpace(line)))
				}
			}
		}
	}
	for _, n := range notes {
		fmt.Println("note:", n)
	}
	return nil
}

// readCatalog migrates a scratch database to version prev and reads its
// routines and the comments of its other objects.
func readCatalog(ctx context.Context, url string, prev uint) ([]routine, []described, error) {
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close(ctx)
	scratch := fmt.Sprintf("pgcheckpoint_renamemigration_%d", os.Getpid())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+scratch); err != nil {
		return nil, nil, err
	}
	defer admin.Exec(context.WithoutCancel(ctx), "DROP DATABASE "+scratch+" WITH (FORCE)")
	u, err := neturl.Parse(url)
	if err != nil {
		return nil, nil, err
	}
	u.Path = "/" + scratch
	scratchURL := u.String()
	if err := schema.NewMigrator(scratchURL).Goto(ctx, prev); err != nil {
		return nil, nil, fmt.Errorf("migrate the scratch database to %d: %w", prev, err)
	}
	conn, err := pgx.Connect(ctx, scratchURL)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close(ctx)

	rows, err := conn.Query(ctx, `
SELECT p.proname, p.prokind::text, substring(p.oid::regprocedure::text FROM '\((.*)\)$'), pg_get_functiondef(p.oid),
       pg_get_function_arguments(p.oid), coalesce(pg_get_function_result(p.oid), ''),
       coalesce(obj_description(p.oid, 'pg_proc'), ''), p.prosqlbody IS NOT NULL, p.proretset, p.proisstrict,
       EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
               WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'),
       p.provolatile::text, p.proparallel::text, p.prorows::float8,
       ARRAY(SELECT CASE WHEN m = 'v' THEN 'VARIADIC ' ELSE '' END || coalesce(nullif(n, ''), '$' || i)
             FROM unnest(coalesce(p.proargmodes, array_fill('i'::"char", ARRAY[p.pronargs])),
                         coalesce(p.proargnames, array_fill(''::text, ARRAY[p.pronargs]))) WITH ORDINALITY AS a(m, n, i)
             WHERE m IN ('i', 'b', 'v'))
FROM pg_proc p
WHERE p.pronamespace = 'pgcheckpoint'::regnamespace
  AND p.prokind <> 'a' -- pg_get_functiondef refuses aggregates; none is renamed
ORDER BY p.proname, p.oid`)
	if err != nil {
		return nil, nil, err
	}
	routines, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (routine, error) {
		var r routine
		err := row.Scan(&r.name, &r.kind, &r.identityArgs, &r.def, &r.args, &r.result, &r.comment, &r.sqlBody,
			&r.retSet, &r.strict, &r.publicExec, &r.volatile, &r.parallel, &r.rows, &r.inNames)
		return r, err
	})
	if err != nil {
		return nil, nil, err
	}
	rows, err = conn.Query(ctx, `
SELECT o.type, o.identity, d.description
FROM pg_description d, pg_identify_object(d.classoid, d.objoid, d.objsubid) o
WHERE d.classoid <> 'pg_proc'::regclass
  AND (o.schema = 'pgcheckpoint' OR (d.classoid = 'pg_namespace'::regclass AND d.objoid = 'pgcheckpoint'::regnamespace))
ORDER BY o.type, o.identity`)
	if err != nil {
		return nil, nil, err
	}
	others, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (described, error) {
		var d described
		return d, row.Scan(&d.kind, &d.identity, &d.text)
	})
	return routines, others, err
}

var (
	newName = map[string]string{}
	// qualified matches a renamed routine's schema-qualified name; bare, in
	// comments, an old name with an underscore (the others are words).
	qualified, bare *regexp.Regexp
)

func init() {
	var all, underscored []string
	for _, r := range renames {
		newName[r.old] = r.new
		all = append(all, regexp.QuoteMeta(r.old))
		if strings.Contains(r.old, "_") {
			underscored = append(underscored, regexp.QuoteMeta(r.old))
		}
	}
	qualified = regexp.MustCompile(`\bpgcheckpoint\.(` + strings.Join(all, "|") + `)\b`)
	bare = regexp.MustCompile(`\b(` + strings.Join(underscored, "|") + `)\b`)
}

// renameInText renames the routines in SQL text: every schema-qualified
// name, and in comments (all of the text when prose) the bare old names
// that have an underscore.
func renameInText(s string, sqlText bool) string {
	s = qualified.ReplaceAllStringFunc(s, func(m string) string {
		return "pgcheckpoint." + newName[strings.TrimPrefix(m, "pgcheckpoint.")]
	})
	if !sqlText {
		return renameBare(s)
	}
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		if c := commentStart(line); c >= 0 {
			lines[i] = line[:c] + renameBare(line[c:])
		}
	}
	return strings.Join(lines, "\n")
}

func renameBare(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range bare.FindAllStringIndex(s, -1) {
		if m[0] > 0 && s[m[0]-1] == '.' { // a column or a qualified name
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(newName[s[m[0]:m[1]]])
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// commentStart is the offset of a line's "--" comment outside a string
// literal, or -1.
func commentStart(line string) int {
	in := false
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\'':
			in = !in
		case !in && strings.HasPrefix(line[i:], "--"):
			return i
		}
	}
	return -1
}

var (
	// The set idiom of delete_checkpoints, prune and gc_threads.
	lockManyByKey = regexp.MustCompile(`PERFORM\s+(?:pg_catalog\.)?pg_advisory_xact_lock\(\s*` + lockKey +
		`\s*,\s*k\.h\s*\)\s+FROM\s+\(\s*SELECT\s+DISTINCT\s+(?:pg_catalog\.)?hashtext\(\s*x\s*\)\s+AS\s+h\s+FROM\s+` +
		`(?:pg_catalog\.)?unnest\((.+?)\)\s+x\s*\)\s*k\s+ORDER\s+BY\s+k\.h\s*;`)
	// The set idiom of copy_thread.
	lockManyByHash = regexp.MustCompile(`PERFORM\s+(?:pg_catalog\.)?pg_advisory_xact_lock\(\s*` + lockKey +
		`\s*,\s*(?:pg_catalog\.)?hashtext\(\s*x\s*\)\s*\)\s+FROM\s+(?:pg_catalog\.)?unnest\((.+?)\)\s+x\s+` +
		`ORDER\s+BY\s+(?:pg_catalog\.)?hashtext\(\s*x\s*\)\s*;`)
	// One thread, with the comment some callers wrote after it.
	lockOne = regexp.MustCompile(`(?:pg_catalog\.)?pg_advisory_xact_lock\(\s*` + lockKey +
		`\s*,\s*(?:pg_catalog\.)?hashtext\(([^()]*)\)\s*\)(;?)(?:[ \t]*-- pgcheckpoint\.lock_thread\b)?`)
)

// rewriteLocks replaces the spelled-out lock idioms by calls.
func rewriteLocks(def string) string {
	def = lockManyByKey.ReplaceAllString(def, "PERFORM pgcheckpoint.thread_lock_many($1);")
	def = lockManyByHash.ReplaceAllString(def, "PERFORM pgcheckpoint.thread_lock_many($1);")
	return lockOne.ReplaceAllString(def, "pgcheckpoint.thread_lock($1)$2")
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func generate(routines []routine, others []described, prev uint) (up, down string, notes []string, err error) {
	byName := map[string][]routine{}
	for _, r := range routines {
		byName[r.name] = append(byName[r.name], r)
	}
	for _, rn := range renames {
		if len(byName[rn.old]) == 0 {
			return "", "", nil, fmt.Errorf("no routine %s to rename", rn.old)
		}
		if len(byName[rn.new]) > 0 {
			return "", "", nil, fmt.Errorf("%s exists already", rn.new)
		}
	}
	if len(byName["thread_lock_many"]) > 0 {
		return "", "", nil, errors.New("thread_lock_many exists already")
	}

	var (
		u, d                          strings.Builder
		renamed, redefined, commented []string // up statements
		unRenamed, restored, unComm   []string // down statements
		aliases, dropAliases          []string
		kept                          []string
	)
	for _, r := range routines {
		to, isRenamed := newName[r.name]
		if !isRenamed {
			to = r.name
			kept = append(kept, r.name)
		} else {
			renamed = append(renamed, fmt.Sprintf("ALTER %s %s RENAME TO %s;", r.keyword(), r.sig(r.name), to))
			unRenamed = append(unRenamed, fmt.Sprintf("ALTER %s %s RENAME TO %s;", r.keyword(), r.sig(to), r.name))
		}

		// The definition.
		var def string
		switch {
		case r.name == "lock_thread":
			def = threadLockDef
		case r.sqlBody:
			// A SQL-standard body names routines by oid: the renames follow.
			def = strings.TrimRight(r.def, "\n") + ";"
			if strings.Contains(r.def, lockKey) {
				return "", "", nil, fmt.Errorf("%s has a SQL-standard body that spells the lock key: redefine it by hand", r.name)
			}
		default:
			header, body, ok := strings.Cut(r.def, "\nAS ")
			if !ok {
				return "", "", nil, fmt.Errorf("%s: no AS in its definition", r.name)
			}
			def = renameInText(header, true) + "\nAS " + renameInText(rewriteLocks(strings.TrimRight(body, "\n")), true) + ";"
			for _, e := range commentEdits {
				if e.routine != to {
					continue
				}
				if !strings.Contains(def, e.from) {
					notes = append(notes, fmt.Sprintf("%s: comment to reword not found: %q", to, e.from))
				}
				def = strings.Replace(def, e.from, e.to, 1)
			}
		}
		if strings.Contains(def, lockKey) && r.name != "lock_thread" {
			return "", "", nil, fmt.Errorf("%s still spells the lock key %s after the rewrite:\n%s", r.name, lockKey, def)
		}
		// Only a routine whose definition changed beyond its name is
		// defined again (sqlc reads schema/current.sql, not the migrations).
		// The down file restores only what changed.
		changed := def != strings.Replace(strings.TrimRight(r.def, "\n"), "pgcheckpoint."+r.name+"(", "pgcheckpoint."+to+"(", 1)+";"
		if changed {
			redefined = append(redefined, def)
		}
		if changed {
			restored = append(restored, strings.TrimRight(r.def, "\n")+";")
		}

		// The comment.
		comment := renameInText(r.comment, false)
		if r.name == "lock_thread" {
			comment = threadLockComment
		}
		if comment != r.comment {
			commented = append(commented, fmt.Sprintf("COMMENT ON %s %s IS\n    %s;", r.keyword(), r.sig(to), quote(comment)))
			unComm = append(unComm, fmt.Sprintf("COMMENT ON %s %s IS\n    %s;", r.keyword(), r.sig(r.name), quote(r.comment)))
		}

		// The alias.
		if isRenamed && aliasOf(r.name) {
			a, err := alias(r, to)
			if err != nil {
				return "", "", nil, err
			}
			aliases = append(aliases, a)
			dropAliases = append(dropAliases, fmt.Sprintf("DROP %s %s;", r.keyword(), r.sig(r.name)))
		}
	}
	for _, o := range others {
		text := renameInText(o.text, false)
		if text == o.text {
			continue
		}
		target, err := commentTarget(o)
		if err != nil {
			return "", "", nil, err
		}
		commented = append(commented, fmt.Sprintf("COMMENT ON %s IS\n    %s;", target, quote(text)))
		unComm = append(unComm, fmt.Sprintf("COMMENT ON %s IS\n    %s;", target, quote(o.text)))
	}

	fmt.Fprintf(&u, upHeader, prev)
	section(&u, "The renames.", renamed)
	section(&u, "The thread lock, for a set of threads.", []string{
		threadLockManyDef,
		"COMMENT ON FUNCTION pgcheckpoint.thread_lock_many IS\n    " + quote(threadLockManyComment) + ";",
		"REVOKE EXECUTE ON FUNCTION pgcheckpoint.thread_lock_many(text[]) FROM PUBLIC;",
	})
	section(&u, "The renamed routines under their new names (sqlc does not follow a rename),\n-- and those that named a renamed routine or spelled the lock key.", redefined)
	section(&u, "Comments that named a renamed routine.", commented)
	section(&u, "The deprecated aliases (OR REPLACE for sqlc, which still sees the old names).", aliases)

	fmt.Fprintf(&d, downHeader, prev)
	section(&d, "The aliases.", dropAliases)
	section(&d, "", []string{"DROP FUNCTION pgcheckpoint.thread_lock_many(text[]);"})
	section(&d, "The old names.", unRenamed)
	section(&d, "The old definitions.", restored)
	section(&d, "The old comments.", unComm)

	sort.Strings(kept)
	notes = append(notes, "routines kept as they were named (check them against the rule): "+strings.Join(kept, ", "))
	return u.String(), d.String(), notes, nil
}

func aliasOf(old string) bool {
	for _, r := range renames {
		if r.old == old {
			return r.alias
		}
	}
	return false
}

func section(b *strings.Builder, title string, stmts []string) {
	if len(stmts) == 0 {
		return
	}
	b.WriteString("\n")
	if title != "" {
		b.WriteString("-- " + title + "\n\n")
	}
	for _, s := range stmts {
		b.WriteString(s + "\n\n")
	}
}

// alias is the deprecated routine under the old name: one statement that
// calls the new one, with the old one's signature, attributes and
// privileges.
func alias(r routine, to string) (string, error) {
	call := "pgcheckpoint." + to + "(" + strings.Join(r.inNames, ", ") + ")"
	var b strings.Builder
	if r.kind == "p" {
		// PL/pgSQL: a SQL procedure's CALL runs in an atomic context, where
		// the called procedure could not commit.
		fmt.Fprintf(&b, "CREATE OR REPLACE PROCEDURE pgcheckpoint.%s(%s)\nLANGUAGE plpgsql\nAS $$ BEGIN CALL %s; END $$;\n", r.name, r.args, call)
	} else {
		if r.kind != "f" {
			return "", fmt.Errorf("%s: no alias for a routine of kind %s", r.name, r.kind)
		}
		attrs := map[string]string{"i": "IMMUTABLE", "s": "STABLE", "v": "VOLATILE"}[r.volatile]
		if r.strict {
			attrs += " STRICT"
		}
		attrs += " PARALLEL " + map[string]string{"s": "SAFE", "r": "RESTRICTED", "u": "UNSAFE"}[r.parallel]
		body := "SELECT " + call
		if r.retSet {
			attrs += fmt.Sprintf(" ROWS %g", r.rows)
			body = "SELECT * FROM " + call
		} else if strings.Contains(r.args, "OUT ") {
			body = "SELECT * FROM " + call
		}
		result := ""
		if r.result != "" && !strings.Contains(r.args, "OUT ") {
			result = "\nRETURNS " + r.result
		}
		fmt.Fprintf(&b, "CREATE OR REPLACE FUNCTION pgcheckpoint.%s(%s)%s\nLANGUAGE sql %s\nSET search_path = pg_catalog, pg_temp\nAS $$ %s $$;\n",
			r.name, r.args, result, attrs, body)
	}
	fmt.Fprintf(&b, "COMMENT ON %s %s IS 'Deprecated: use pgcheckpoint.%s; removed in a later release.';", r.keyword(), r.sig(r.name), to)
	if !r.publicExec {
		fmt.Fprintf(&b, "\nREVOKE EXECUTE ON %s %s FROM PUBLIC;", r.keyword(), r.sig(r.name))
	}
	return b.String(), nil
}

// commentTarget is what COMMENT ON names for an object other than a routine.
func commentTarget(o described) (string, error) {
	switch o.kind {
	case "table", "view", "index", "schema", "sequence", "materialized view", "type":
		return strings.ToUpper(o.kind) + " " + o.identity, nil
	case "table column", "view column":
		return "COLUMN " + o.identity, nil
	case "table constraint":
		return "CONSTRAINT " + o.identity, nil
	}
	return "", fmt.Errorf("a comment on %s %s names a renamed routine: teach commentTarget its kind", o.kind, o.identity)
}
