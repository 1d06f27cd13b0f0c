package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/localpg"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// rolesScript is the DBA's script the tests run, as shipped.
const rolesScript = "../schema/roles/roles.sql"

// roleSet is a database set up as docs/operations.md says: the three roles made by
// the shipped script, the schema migrated by the owner, the script run
// again. No role may create temporary tables there.
type roleSet struct {
	db                        *pgtest.DB
	owner, app, readonly      string // role names
	operator                  string // the operator's, who reads every tenant
	ownerURL, appURL, readURL string
	password                  string // of each role, for servers that ask for one
}

// psqlPath finds psql: on PATH, else beside the server binaries.
func psqlPath(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	if dir, err := localpg.Find(); err == nil {
		if p := filepath.Join(dir, "psql"); fileExists(p) {
			return p
		}
	}
	t.Fatal("psql not found (on PATH or beside the Postgres server binaries): install the PostgreSQL client, e.g. apt-get install postgresql-client")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// runRolesScript runs the shipped script with psql as the test database's
// superuser.
func (rs *roleSet) runRolesScript(t testing.TB) {
	t.Helper()
	cmd := exec.Command(psqlPath(t), "-X", "-q", "-v", "owner="+rs.owner, "-v", "app="+rs.app, "-v", "readonly="+rs.readonly,
		"-v", "operator="+rs.operator, "-f", rolesScript, rs.db.URL)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("psql -f %s: %v\n%s", rolesScript, err, out)
	}
}

// roleURL is the database's URL for another role.
func roleURL(t testing.TB, base, role, password string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	return u.String()
}

func setupRoles(t *testing.T) *roleSet {
	t.Helper()
	ctx := context.Background()
	var b [4]byte
	rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	rs := &roleSet{db: pgtest.EmptyDB(t), owner: "ckpt_owner_" + suffix, app: "ckpt_app_" + suffix, readonly: "ckpt_ro_" + suffix,
		operator: "ckpt_op_" + suffix}
	// Roles belong to the server: drop them and what they hold here
	// before the database goes (cleanups run last registered first).
	t.Cleanup(func() {
		for _, r := range []string{rs.owner, rs.app, rs.readonly, rs.operator} {
			rs.db.Pool.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{r}.Sanitize())
			if _, err := rs.db.Pool.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{r}.Sanitize()); err != nil {
				t.Errorf("drop role %s: %v", r, err)
			}
		}
	})
	if _, err := rs.db.Pool.Exec(ctx, "REVOKE TEMPORARY ON DATABASE "+pgx.Identifier{rs.db.Name}.Sanitize()+" FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	rs.runRolesScript(t)
	password := "pw-" + suffix
	rs.password = password
	for _, r := range []string{rs.owner, rs.app, rs.readonly} {
		if _, err := rs.db.Pool.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'", pgx.Identifier{r}.Sanitize(), password)); err != nil {
			t.Fatal(err)
		}
		var temp bool
		if err := rs.db.Pool.QueryRow(ctx, "SELECT has_database_privilege($1, current_database(), 'TEMPORARY')", r).Scan(&temp); err != nil || temp {
			t.Fatalf("role %s may create temporary tables (%v)", r, err)
		}
	}
	rs.ownerURL = roleURL(t, rs.db.URL, rs.owner, password)
	rs.appURL = roleURL(t, rs.db.URL, rs.app, password)
	rs.readURL = roleURL(t, rs.db.URL, rs.readonly, password)
	if r := runCLI(t, buildCommand(t, "migrate"), []string{"DATABASE_URL=" + rs.ownerURL}, "up"); r.code != 0 {
		t.Fatalf("migrate up as the owner: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rs.runRolesScript(t)
	return rs
}

func rolePool(t *testing.T, u string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// sqlState is the SQLSTATE of a Postgres error, or "".
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// schemaRowsDigest digests the rows of every table in the pgcheckpoint schema
// (found in the catalog, so tables added later count too), as the
// superuser reads them: equal digests mean nothing was written.
func schemaRowsDigest(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relnamespace = 'pgcheckpoint'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 4 {
		t.Fatalf("tables %v (%v)", tables, err)
	}
	var parts []string
	for _, tb := range tables {
		parts = append(parts, fmt.Sprintf("SELECT %s || to_jsonb(x)::text AS r FROM %s x", quoteLiteral(tb), tb))
	}
	var digest string
	if err := pool.QueryRow(ctx, "SELECT md5(coalesce(string_agg(r, E'\\n' ORDER BY r), '')) FROM ("+strings.Join(parts, " UNION ALL ")+") s").Scan(&digest); err != nil {
		t.Fatal(err)
	}
	return digest
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// The owner migrates (as setupRoles did, with no TEMP and no more than the
// script grants); the application and read-only roles read the version
// (migrate version and check, schema.Check) without CREATE anywhere, and
// can neither migrate down nor force a version. On a database where it may
// not create anything, migrate version reports 0 and creates nothing.
func TestRolesOwnerMigratesOthersOnlyReadTheVersion(t *testing.T) {
	t.Parallel()
	rs := setupRoles(t)
	ctx := context.Background()
	bin := buildCommand(t, "migrate")
	latest := fmt.Sprintf("version %d of %d", schema.Latest(), schema.Latest())
	for _, u := range []string{rs.appURL, rs.readURL} {
		env := []string{"DATABASE_URL=" + u}
		if r := runCLI(t, bin, env, "version"); r.code != 0 || !strings.Contains(r.stdout, latest) {
			t.Fatalf("migrate version: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := runCLI(t, bin, env, "check"); r.code != 0 {
			t.Fatalf("migrate check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if err := schema.Check(ctx, u); err != nil {
			t.Fatal(err)
		}
		// Up with nothing to do passes (an application that migrates on
		// start); down and force are refused.
		if r := runCLI(t, bin, env, "up"); r.code != 0 || !strings.Contains(r.stdout, latest) {
			t.Fatalf("migrate up on a migrated database: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, args := range [][]string{{"down", "1"}, {"force", "--", "-1"}} { // -1: no version
			if r := runCLI(t, bin, env, args...); r.code == 0 || !strings.Contains(r.stderr, "42501") && !strings.Contains(r.stderr, "permission denied") {
				t.Fatalf("migrate %v by a role that is not the owner: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
			}
		}
	}
	if v, dirty, err := schema.NewMigrator(rs.ownerURL).Version(ctx); err != nil || dirty || v != schema.Latest() {
		t.Fatalf("after the others' attempts: version %d dirty %v (%v)", v, dirty, err)
	}

	// A database where the read-only role may create nothing, not migrated.
	empty := pgtest.EmptyDB(t)
	for _, priv := range []string{"CREATE", "TEMPORARY"} {
		if _, err := empty.Pool.Exec(ctx, fmt.Sprintf("REVOKE %s ON DATABASE %s FROM PUBLIC", priv, pgx.Identifier{empty.Name}.Sanitize())); err != nil {
			t.Fatal(err)
		}
	}
	emptyURL := roleURL(t, empty.URL, rs.readonly, rs.password)
	var canCreate bool
	if err := empty.Pool.QueryRow(ctx, "SELECT has_database_privilege($1, current_database(), 'CREATE')", rs.readonly).Scan(&canCreate); err != nil || canCreate {
		t.Fatalf("the read-only role may create schemas (%v)", err)
	}
	if r := runCLI(t, bin, []string{"DATABASE_URL=" + emptyURL}, "version"); r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("version 0 of %d", schema.Latest())) {
		t.Fatalf("migrate version without CREATE: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if schemaExists(t, empty.Pool) {
		t.Fatal("migrate version created the schema")
	}
}

// The application role runs every method of the Engine, on a database
// where it has what the script grants and nothing more (no TEMP), and
// cannot change the schema or the migration version.
func TestRolesApplicationRunsTheWholeAPI(t *testing.T) {
	t.Parallel()
	rs := setupRoles(t)
	ctx := context.Background()
	pool := rolePool(t, rs.appURL)
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})
	before := schemaRowsDigest(t, rs.db.Pool)

	covered := runEveryEngineMethod(t, ctx, eng, pool)
	var missing []string
	typ := reflect.TypeOf(eng)
	for i := range typ.NumMethod() {
		if name := typ.Method(i).Name; !slices.Contains(covered, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("Engine methods the application role test does not run: %v (add them to runEveryEngineMethod)", missing)
	}
	if n := eng.SnapshotFailures(); n != 0 {
		t.Fatalf("%d snapshots failed quietly", n)
	}
	if schemaRowsDigest(t, rs.db.Pool) == before {
		t.Fatal("the API calls wrote nothing")
	}

	// No DDL, no temporary tables, no writes to the version table.
	for _, stmt := range []string{
		"CREATE TABLE pgcheckpoint.x (a int)",
		"CREATE TEMP TABLE x (a int)",
		"CREATE SCHEMA x",
		"DROP TABLE pgcheckpoint.checkpoints",
		"ALTER TABLE pgcheckpoint.threads ADD COLUMN x int",
		"CREATE INDEX ON pgcheckpoint.checkpoints (step)",
		"CREATE OR REPLACE FUNCTION pgcheckpoint.thread_head(text, text) RETURNS uuid LANGUAGE sql AS 'SELECT NULL::uuid'",
		"DROP FUNCTION pgcheckpoint.checkpoint_materialize(uuid)",
		"TRUNCATE pgcheckpoint.pending_writes",
		"INSERT INTO pgcheckpoint.schema_migrations VALUES (999, false)",
		"UPDATE pgcheckpoint.schema_migrations SET dirty = true",
		"DELETE FROM pgcheckpoint.schema_migrations",
	} {
		if _, err := pool.Exec(ctx, stmt); sqlState(err) != "42501" {
			t.Errorf("%s as the application role: %v, want SQLSTATE 42501", stmt, err)
		}
	}
	if err := schema.Check(ctx, rs.appURL); err != nil {
		t.Fatal(err)
	}
}

// runEveryEngineMethod calls each method of eng once, successfully, and
// returns their names.
func runEveryEngineMethod(t *testing.T, ctx context.Context, eng *engine.Engine, pool *pgxpool.Pool) []string {
	t.Helper()
	var (
		ids, subIDs       []uuid.UUID
		branch, subBranch engine.BranchResult
		buf               bytes.Buffer
		encrypted         *engine.Engine
	)
	snap := func(thread string, i int) uuid.UUID {
		r, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: thread,
			Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"m%d"}]`, i)),
			State:    json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)), Metadata: json.RawMessage(`{"run_id": "r1"}`)})
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		return r.ID
	}
	type call struct {
		name string
		fn   func() error
	}
	calls := []call{
		{"Tenant", func() error {
			if got := eng.Tenant(); got != engine.DefaultTenant {
				return fmt.Errorf("tenant %q, want %q", got, engine.DefaultTenant)
			}
			return nil
		}},
		{"ForTenant", func() error {
			acme, err := eng.ForTenant("acme")
			if err != nil {
				return err
			}
			r, err := acme.Snapshot(ctx, engine.SnapshotInput{ThreadID: "app", State: json.RawMessage(`{}`)})
			if err != nil {
				return err
			}
			if _, err := eng.Get(ctx, r.ID); !errors.Is(err, engine.ErrNotFound) {
				return fmt.Errorf("the default tenant reads acme's checkpoint: %v", err)
			}
			_, err = acme.DeleteThreads(ctx, "app")
			return err
		}},
		{"Enabled", func() error {
			if !eng.Enabled(engine.TriggerManual) {
				return errors.New("manual trigger disabled")
			}
			return nil
		}},
		{"Snapshot", func() error {
			for i := range 4 {
				ids = append(ids, snap("app", i))
			}
			for i := range 3 {
				r, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "app", Namespace: "sub", State: json.RawMessage(fmt.Sprintf(`{"s": %d}`, i))})
				if err != nil {
					return err
				}
				subIDs = append(subIDs, r.ID)
			}
			return nil
		}},
		{"SnapshotSafe", func() error { return eng.SnapshotSafe(ctx, engine.SnapshotInput{ThreadID: "safe"}).Err }},
		{"Append", func() error {
			head := snap("append", 0)
			_, err := eng.Append(ctx, engine.AppendInput{ThreadID: "append", OnHead: head,
				Messages: json.RawMessage(`[{"role":"assistant","content":"a"}]`), RemoveState: []string{"i"}})
			return err
		}},
		{"SnapshotFailures", func() error { return nil }}, // read at the end
		{"Store", func() error {
			if _, ok := eng.Store().(*postgres.Store); !ok {
				return fmt.Errorf("store %T, want *postgres.Store", eng.Store())
			}
			return nil
		}},
		{"Scope", func() error {
			return eng.Scope(ctx, "scope", map[string]int{"a": 1}, func(context.Context) error { return nil })
		}},
		{"StartInterval", func() error {
			iv, err := eng.StartInterval(ctx, engine.IntervalOptions{ThreadID: "interval", Every: 5 * time.Millisecond,
				Capture: func(context.Context) (engine.SnapshotInput, error) {
					return engine.SnapshotInput{State: json.RawMessage(`{"tick": 1}`)}, nil
				}})
			if err != nil {
				return err
			}
			deadline := time.Now().Add(10 * time.Second)
			for iv.Written() == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if iv.Written() == 0 {
				return errors.New("the interval wrote nothing")
			}
			return iv.Close()
		}},
		{"PutWrites", func() error {
			_, err := eng.PutWrites(ctx, ids[3], "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}})
			return err
		}},
		{"Resume", func() error { _, err := eng.Resume(ctx, "app"); return err }},
		{"ResumeIn", func() error { _, err := eng.ResumeIn(ctx, "app", "sub"); return err }},
		{"ScopeIn", func() error {
			return eng.ScopeIn(ctx, "scope", "sub", map[string]int{"a": 1}, func(context.Context) error { return nil })
		}},
		{"RewindToStepIn", func() error { _, err := eng.RewindToStepIn(ctx, "app", "sub", 2); return err }},
		{"ClearMemoryIn", func() error { _, err := eng.ClearMemoryIn(ctx, "app", "sub"); return err }},
		{"DeleteCheckpoints BeforeStepIn", func() error {
			_, err := eng.DeleteCheckpoints(ctx, engine.BeforeStepIn("app", "sub", 2))
			return err
		}},
		{"Get", func() error { _, err := eng.Get(ctx, ids[1]); return err }},
		{"Latest", func() error { _, err := eng.Latest(ctx, "app"); return err }},
		{"LatestIn", func() error { _, err := eng.LatestIn(ctx, "app", ""); return err }},
		{"ListCheckpoints", func() error { _, err := eng.ListCheckpoints(ctx, "app", engine.ListOptions{}); return err }},
		{"ListThreads", func() error { _, err := eng.ListThreads(ctx, engine.ThreadListOptions{}); return err }},
		{"Diff", func() error { _, err := eng.Diff(ctx, ids[0], ids[3]); return err }},
		{"Lineage", func() error { _, err := eng.Lineage(ctx, ids[3]); return err }},
		{"TimeTravelPoints", func() error { _, err := eng.TimeTravelPoints(ctx, "app", engine.PointsOptions{}); return err }},
		{"Rewind", func() error { _, err := eng.Rewind(ctx, ids[2]); return err }},
		{"RewindToStep", func() error { _, err := eng.RewindToStep(ctx, "app", 3); return err }},
		{"RewindAndTruncate", func() error { _, err := eng.RewindAndTruncate(ctx, ids[1]); return err }},
		{"Branch", func() (err error) { branch, err = eng.Branch(ctx, ids[1], "alt"); return err }},
		{"Branches", func() error { _, err := eng.Branches(ctx, "app"); return err }},
		{"MergeBranch", func() error { _, err := eng.MergeBranch(ctx, branch.ThreadID, "app"); return err }},
		{"MergeBranchIn", func() (err error) {
			if subBranch, err = eng.Branch(ctx, subIDs[1], "sub-alt"); err != nil {
				return err
			}
			_, err = eng.MergeBranchIn(ctx, subBranch.ThreadID, "app", "sub")
			return err
		}},
		{"Tree", func() error { _, err := eng.Tree(ctx, "app"); return err }},
		{"ClearMemory", func() error { _, err := eng.ClearMemory(ctx, "app"); return err }},
		{"CopyThread", func() error {
			r, err := eng.CopyThread(ctx, "app", "app-copy")
			if err == nil && r.Copied == 0 {
				err = errors.New("nothing copied")
			}
			return err
		}},
		{"Export", func() error { _, err := eng.Export(ctx, "app-copy", &buf); return err }},
		{"DeleteThreads one", func() error { _, err := eng.DeleteThreads(ctx, "app-copy"); return err }},
		{"Import", func() error { _, err := eng.Import(ctx, &buf, engine.ImportOptions{}); return err }},
		{"DeleteCheckpoints BeforeStep", func() error {
			_, err := eng.DeleteCheckpoints(ctx, engine.BeforeStep("app-copy", 2))
			return err
		}},
		{"DeleteCheckpoints", func() error {
			_, err := eng.DeleteCheckpoints(ctx, engine.BeforeStepIn("app-copy", "sub", 3))
			return err
		}},
		{"PruneThreads KeepLastN(2)", func() error { _, err := eng.PruneThreads(ctx, engine.KeepLastN(2), "app"); return err }},
		{"PruneThreads", func() error { _, err := eng.PruneThreads(ctx, engine.KeepLastN(1), "app", "append"); return err }},
		{"SetThreadExpiry KeepNone", func() error { return eng.SetThreadExpiry(ctx, "safe", time.Now().Add(-time.Hour), engine.KeepNone()) }},
		{"ThreadExpiry", func() error { _, _, err := eng.ThreadExpiry(ctx, "safe"); return err }},
		{"PreviewPrune", func() error { _, err := eng.PreviewPrune(ctx, engine.KeepLastN(1), "app"); return err }},
		{"SetThreadExpiry", func() error { return eng.SetThreadExpiry(ctx, "safe", time.Now().Add(-time.Hour), engine.KeepLatest()) }},
		{"PreviewSweep", func() error {
			r, err := eng.PreviewSweep(ctx, engine.KeepLastN(5), engine.SweepOptions{})
			if err == nil && r.Failed > 0 {
				err = fmt.Errorf("%d threads failed", r.Failed)
			}
			return err
		}},
		{"Sweep", func() error {
			r, err := eng.Sweep(ctx, engine.KeepLastN(5), engine.SweepOptions{})
			if err == nil && r.Failed > 0 {
				err = fmt.Errorf("%d threads failed", r.Failed)
			}
			return err
		}},
		{"DeleteCheckpoints ForRuns", func() error { _, err := eng.DeleteCheckpoints(ctx, engine.ForRuns("r1")); return err }},
		{"PruneThreads KeepLatest", func() error {
			_, err := eng.PruneThreads(ctx, engine.KeepLatest(), "scope", "interval")
			return err
		}},
		{"DeleteThreads", func() error { _, err := eng.DeleteThreads(ctx, "scope", "nobody"); return err }},
		{"Encrypted", func() error {
			keys, err := engine.ParseLocalKeys(engine.NewKeyText("roles"))
			if err != nil {
				return err
			}
			encrypted = engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{Encryption: engine.Encryption{Keys: keys}})
			if !encrypted.Encrypted() || eng.Encrypted() {
				return errors.New("Encrypted says otherwise")
			}
			r, err := encrypted.Snapshot(ctx, engine.SnapshotInput{ThreadID: "encrypted", Messages: json.RawMessage(`["secret"]`)})
			if err == nil {
				_, err = encrypted.Get(ctx, r.ID)
			}
			return err
		}},
		{"RewrapKeys", func() error {
			r, err := encrypted.RewrapKeys(ctx)
			if err == nil && r.Rewrapped != 1 {
				err = fmt.Errorf("rewrapped %d keys, want 1", r.Rewrapped)
			}
			return err
		}},
		{"ShredThread", func() error { _, err := encrypted.ShredThread(ctx, "encrypted"); return err }},
		{"PruneKeys", func() error {
			keys, err := engine.ParseLocalKeys(engine.NewKeyText("roles"))
			if err != nil {
				return err
			}
			held := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{Encryption: engine.Encryption{
				Keys: &engine.HeldKeys{Dir: t.TempDir(), KEKs: keys}}})
			_, err = held.PruneKeys(ctx, time.Hour)
			return err
		}},
		{"WithTx", func() error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			inTx, err := eng.WithTx(tx)
			if err != nil {
				return err
			}
			if _, err := inTx.Snapshot(ctx, engine.SnapshotInput{ThreadID: "in-tx"}); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}},
		{"Close", func() error { return nil }}, // by New: leaves the pool open; run last, below
	}
	var names []string
	for _, c := range calls {
		if err := c.fn(); err != nil {
			t.Fatalf("%s as the application role: %v", c.name, err)
		}
		names = append(names, c.name)
	}
	if err := eng.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return names
}

// The read-only role inspects with ckpt (threads, log, show, diff, tree,
// export); every write, through ckpt, the Engine or SQL, is refused with
// ErrPermission or SQLSTATE 42501, and nothing is written. Which functions
// it may call is read from the catalog: every volatile routine in the
// schema (every one that can write) is refused, every other is allowed.
func TestRolesReadOnlyInspectsAndCannotWrite(t *testing.T) {
	t.Parallel()
	rs := setupRoles(t)
	ctx := context.Background()
	app := engine.New(postgres.NewStore(rolePool(t, rs.appURL), postgres.Options{}), engine.Config{})
	var ids []uuid.UUID
	for i := range 3 {
		r, err := app.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run", State: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)),
			Metadata: json.RawMessage(`{"run_id": "r1"}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if _, err := app.PutWrites(ctx, ids[2], "task", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	br, err := app.Branch(ctx, ids[1], "alt")
	if err != nil {
		t.Fatal(err)
	}
	var export bytes.Buffer
	if _, err := app.Export(ctx, "run", &export); err != nil {
		t.Fatal(err)
	}
	before := schemaRowsDigest(t, rs.db.Pool)

	// ckpt's reading commands work.
	bin := buildCommand(t, "ckpt")
	env := []string{"DATABASE_URL=" + rs.readURL}
	for _, args := range [][]string{
		{"threads"}, {"--json", "threads"}, {"log", "run"}, {"log", "run", "--graph"}, {"show", ids[2].String()},
		{"diff", ids[0].String(), ids[2].String()}, {"tree", "run"}, {"tree", "run", "--format", "mermaid"}, {"export", "run"},
	} {
		r := runCLI(t, bin, env, args...)
		if r.code != 0 || r.stdout == "" {
			t.Fatalf("ckpt %v as the read-only role: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		if args[0] == "export" && r.stdout != export.String() {
			t.Fatalf("ckpt export as the read-only role differs from the application's export")
		}
	}
	// Its writing commands are refused, saying why.
	dir := t.TempDir()
	importFile := filepath.Join(dir, "run.jsonl")
	if err := os.WriteFile(importFile, bytes.ReplaceAll(export.Bytes(), []byte(`"run"`), []byte(`"run-imported"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"rewind", ids[0].String()}, {"branch", ids[0].String(), "b2"}, {"delete", "run"}, {"import", importFile},
		{"gc", "--policy", "keep_last_n:1", "--thread", "run"}, {"gc", "--policy", "keep_last_n:1"},
	} {
		r := runCLI(t, bin, env, args...)
		if r.code != 1 || !strings.Contains(r.stderr, engine.ErrPermission.Error()) || !strings.Contains(r.stderr, "read-only role runs threads, log") {
			t.Errorf("ckpt %v as the read-only role: exit %d, want 1 and the permission error\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}

	// The Engine's reads work; every write is refused with ErrPermission.
	ro := engine.New(postgres.NewStore(rolePool(t, rs.readURL), postgres.Options{}), engine.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for name, fn := range map[string]func() error{
		"Get":              func() error { _, err := ro.Get(ctx, ids[2]); return err },
		"Latest":           func() error { _, err := ro.Latest(ctx, "run"); return err },
		"Resume":           func() error { _, err := ro.Resume(ctx, "run"); return err },
		"ResumeIn":         func() error { _, err := ro.ResumeIn(ctx, "run", ""); return err },
		"ListCheckpoints":  func() error { _, err := ro.ListCheckpoints(ctx, "run", engine.ListOptions{}); return err },
		"ListThreads":      func() error { _, err := ro.ListThreads(ctx, engine.ThreadListOptions{}); return err },
		"TimeTravelPoints": func() error { _, err := ro.TimeTravelPoints(ctx, "run", engine.PointsOptions{}); return err },
		"Lineage":          func() error { _, err := ro.Lineage(ctx, ids[2]); return err },
		"Tree":             func() error { _, err := ro.Tree(ctx, "run"); return err },
		"Branches":         func() error { _, err := ro.Branches(ctx, "run"); return err },
		"Diff":             func() error { _, err := ro.Diff(ctx, ids[0], ids[2]); return err },
		"Export":           func() error { _, err := ro.Export(ctx, "run", io.Discard); return err },
	} {
		if err := fn(); err != nil {
			t.Errorf("%s as the read-only role: %v", name, err)
		}
	}
	for name, fn := range map[string]func() error{
		"Snapshot":     func() error { _, err := ro.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run"}); return err },
		"SnapshotSafe": func() error { return ro.SnapshotSafe(ctx, engine.SnapshotInput{ThreadID: "run"}).Err },
		"Append":       func() error { _, err := ro.Append(ctx, engine.AppendInput{ThreadID: "run"}); return err },
		"PutWrites": func() error {
			_, err := ro.PutWrites(ctx, ids[2], "t2", []engine.Write{{Channel: "c", Value: json.RawMessage(`1`)}})
			return err
		},
		"Rewind":         func() error { _, err := ro.Rewind(ctx, ids[0]); return err },
		"RewindToStep":   func() error { _, err := ro.RewindToStep(ctx, "run", 1); return err },
		"RewindToStepIn": func() error { _, err := ro.RewindToStepIn(ctx, "run", "", 1); return err },
		"MergeBranchIn":  func() error { _, err := ro.MergeBranchIn(ctx, br.ThreadID, "run", ""); return err },
		"ClearMemoryIn":  func() error { _, err := ro.ClearMemoryIn(ctx, "run", ""); return err },
		"DeleteCheckpoints BeforeStepIn": func() error {
			_, err := ro.DeleteCheckpoints(ctx, engine.BeforeStepIn("run", "", 3))
			return err
		},
		"RewindAndTruncate": func() error { _, err := ro.RewindAndTruncate(ctx, ids[0]); return err },
		"Branch":            func() error { _, err := ro.Branch(ctx, ids[0], "b3"); return err },
		"MergeBranch":       func() error { _, err := ro.MergeBranch(ctx, br.ThreadID, "run"); return err },
		"ClearMemory":       func() error { _, err := ro.ClearMemory(ctx, "run"); return err },
		"CopyThread":        func() error { _, err := ro.CopyThread(ctx, "run", "run-copy"); return err },
		"DeleteCheckpoints BeforeStep": func() error {
			_, err := ro.DeleteCheckpoints(ctx, engine.BeforeStep("run", 3))
			return err
		},
		"PruneThreads KeepLastN": func() error { _, err := ro.PruneThreads(ctx, engine.KeepLastN(1), "run"); return err },
		"PreviewPrune":           func() error { _, err := ro.PreviewPrune(ctx, engine.KeepLastN(1), "run"); return err },
		"DeleteThreads":          func() error { _, err := ro.DeleteThreads(ctx, "run"); return err },
		"DeleteCheckpoints":      func() error { _, err := ro.DeleteCheckpoints(ctx, engine.ForRuns("r1")); return err },
		"PruneThreads":           func() error { _, err := ro.PruneThreads(ctx, engine.KeepLatest(), "run"); return err },
		"SetThreadExpiry":        func() error { return ro.SetThreadExpiry(ctx, "run", time.Now(), engine.KeepNone()) },
		"Sweep":                  func() error { _, err := ro.Sweep(ctx, engine.KeepLastN(1), engine.SweepOptions{}); return err },
		"PreviewSweep":           func() error { _, err := ro.PreviewSweep(ctx, engine.KeepLastN(1), engine.SweepOptions{}); return err },
		"Import": func() error {
			f, err := os.Open(importFile)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = ro.Import(ctx, f, engine.ImportOptions{})
			return err
		},
	} {
		if err := fn(); !errors.Is(err, engine.ErrPermission) {
			t.Errorf("%s as the read-only role: %v, want ErrPermission", name, err)
		}
	}

	// SQL: every routine of the schema, from the catalog. Volatile ones
	// (all that can write) are refused; the others may be called.
	roPool := rolePool(t, rs.readURL)
	rows, err := rs.db.Pool.Query(ctx, `
SELECT p.oid::regprocedure::text, p.provolatile = 'v',
       format('%s %s(%s)', CASE p.prokind WHEN 'p' THEN 'CALL' ELSE 'SELECT' END, p.oid::regproc,
              (SELECT coalesce(string_agg(format('NULL::%s', a.t::regtype), ', ' ORDER BY a.i), '')
               FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY a(t, i)))
FROM pg_proc p WHERE p.pronamespace = 'pgcheckpoint'::regnamespace ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type routine struct {
		Name     string
		Volatile bool
		Call     string
	}
	routines, err := pgx.CollectRows(rows, pgx.RowToStructByPos[routine])
	if err != nil {
		t.Fatal(err)
	}
	var refused, allowed int
	for _, r := range routines {
		var canExec, appCanExec bool
		if err := rs.db.Pool.QueryRow(ctx, "SELECT has_function_privilege($1, $2::regprocedure, 'EXECUTE'), has_function_privilege($3, $2::regprocedure, 'EXECUTE')",
			rs.readonly, r.Name, rs.app).Scan(&canExec, &appCanExec); err != nil {
			t.Fatal(err)
		}
		if !appCanExec {
			t.Errorf("the application role may not execute %s", r.Name)
		}
		_, err := roPool.Exec(ctx, r.Call)
		switch {
		case r.Volatile && (canExec || sqlState(err) != "42501"):
			t.Errorf("%s is volatile (it can write) and the read-only role may run it: %s gave %v; revoke EXECUTE from PUBLIC in its migration", r.Name, r.Call, err)
		case r.Volatile:
			refused++
		case !canExec || sqlState(err) == "42501":
			t.Errorf("%s only reads and the read-only role may not run it: %v", r.Name, err)
		default:
			allowed++
		}
	}
	if refused < 15 || allowed < 5 {
		t.Fatalf("%d routines refused, %d allowed: the catalog query found too few", refused, allowed)
	}

	// SQL: no DML on any table of the schema.
	rows, err = rs.db.Pool.Query(ctx, `SELECT c.oid::regclass::text, a.attname FROM pg_class c
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = 1
		WHERE c.relnamespace = 'pgcheckpoint'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Column string }])
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		// What each role holds on it: the application may change rows
		// except the migration version's, the read-only role only read.
		var roSelect, roWrite, appSelect, appWrite bool
		if err := rs.db.Pool.QueryRow(ctx, `SELECT has_table_privilege($1, $3, 'SELECT'),
			has_table_privilege($1, $3, 'INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'),
			has_table_privilege($2, $3, 'SELECT'), has_table_privilege($2, $3, 'INSERT, UPDATE, DELETE')`,
			rs.readonly, rs.app, tb.Name).Scan(&roSelect, &roWrite, &appSelect, &appWrite); err != nil {
			t.Fatal(err)
		}
		wantAppWrite := tb.Name != "pgcheckpoint.schema_migrations"
		if !roSelect || roWrite || !appSelect || appWrite != wantAppWrite {
			t.Errorf("%s: read-only may select %v, write %v; application may select %v, write %v (want %v)",
				tb.Name, roSelect, roWrite, appSelect, appWrite, wantAppWrite)
		}
		col := pgx.Identifier{tb.Column}.Sanitize()
		for _, stmt := range []string{
			"INSERT INTO " + tb.Name + " DEFAULT VALUES",
			"UPDATE " + tb.Name + " SET " + col + " = " + col,
			"DELETE FROM " + tb.Name,
			"TRUNCATE " + tb.Name,
		} {
			if _, err := roPool.Exec(ctx, stmt); sqlState(err) != "42501" {
				t.Errorf("%s as the read-only role: %v, want SQLSTATE 42501", stmt, err)
			}
		}
	}
	if after := schemaRowsDigest(t, rs.db.Pool); after != before {
		t.Fatal("the read-only role's refused writes changed the tables")
	}
}

// A session that can only read (a hot standby, default_transaction_read_only)
// refuses writes with ErrPermission too, and writes nothing.
func TestReadOnlySessionWritesAreErrPermission(t *testing.T) {
	t.Parallel()
	d := pgtest.NewDB(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})
	before := schemaRowsDigest(t, d.Pool)
	if _, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t"}); !errors.Is(err, engine.ErrPermission) || sqlState(err) != "25006" {
		t.Fatalf("snapshot in a read-only session: %v, want ErrPermission (25006)", err)
	}
	if _, err := eng.ListThreads(ctx, engine.ThreadListOptions{}); err != nil {
		t.Fatalf("a read in a read-only session: %v", err)
	}
	if schemaRowsDigest(t, d.Pool) != before {
		t.Fatal("the refused write wrote")
	}
}
