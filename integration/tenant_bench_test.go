package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// BenchmarkTenantCost takes what a tenant costs apart, each part a ratio
// of two ways of doing the same thing alternated iteration by iteration on
// one server (benchratio.Alternate), after BenchmarkSpeed's warmup:
//
//	get/setting    the Get statement after the store's setting of the
//	               tenant, set_config, in one batch (what the store sends),
//	               against the statement alone on a session whose tenant
//	               was set when it connected; as a superuser
//	get/policy     the statement alone as the application role of the
//	               roles script (row-level security adds its policy to
//	               each scan) against the same as a superuser
//	get/view       the statement's read of the tenant view (its filter
//	               tenant_id = current_tenant()) against
//	               the same read of the table; as a superuser
//	get/engine     Engine.Get as the application role against Engine.Get
//	               as a superuser, both bound to the tenant
//	snapshot/policy
//	               Engine.Snapshot of a 3.8 KB state, as the application
//	               role against as a superuser
//	get/session    Engine.Get as the application role, the store's
//	               default (the setting ahead of each statement) against
//	               postgres.Options.SessionTenant (set once per connection)
//	snapshot/session
//	               the same for Engine.Snapshot
//	snapshot/setting
//	               the thread lock's statement (the first of a Snapshot's
//	               batch) after set_config in one batch, against the
//	               statement alone on a session whose tenant was set when
//	               it connected; as a superuser
//	get/rls, snapshot/rls
//	               Engine.Get and Engine.Snapshot as the application role,
//	               against the same on a second database whose tables have
//	               row-level security disabled: the policy's own cost
//	get/role, snapshot/role
//	               the same on that second database, as the application
//	               role against as a superuser: what a role that is not a
//	               superuser pays without row-level security (privilege
//	               checks), which an installation without tenants pays too
//
// Each reports x (the first's median over the second's). Run it on a
// durable server, as BenchmarkSpeed.
func BenchmarkTenantCost(b *testing.B) {
	ctx := context.Background()
	ts := setupTenants(b)
	const tenant = "acme"
	pool := func(u string) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			b.Fatal(err)
		}
		// The session's tenant, for the statements sent without the
		// setting.
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SELECT set_config('pgcheckpoint.tenant', $1, false)", tenant)
			return err
		}
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		return p
	}
	app, super := pool(ts.appURL), pool(ts.db.URL)
	engineOver := func(p *pgxpool.Pool) *engine.Engine {
		e, err := engine.New(postgres.NewStore(p, postgres.Options{}), engine.Config{}).ForTenant(tenant)
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	appEng, superEng := engineOver(app), engineOver(super)
	sessionEng, err := engine.New(postgres.NewStore(pool(ts.appURL), postgres.Options{SessionTenant: true}), engine.Config{}).ForTenant(tenant)
	if err != nil {
		b.Fatal(err)
	}
	state := benchratio.State()
	res, err := appEng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "bench", State: state})
	if err != nil {
		b.Fatal(err)
	}
	const (
		getView  = `SELECT c.state FROM pgcheckpoint.tenant_checkpoints c WHERE c.checkpoint_id = $1`
		getTable = `SELECT c.state FROM pgcheckpoint.checkpoints c WHERE c.checkpoint_id = $1`
		lock     = `UPDATE pgcheckpoint.tenant_thread_locks l SET taken = l.taken + 1 WHERE l.thread_id = $1`
		set      = `SELECT pg_catalog.set_config('pgcheckpoint.tenant', $1, true)`
	)
	read := func(p *pgxpool.Pool, sql string) func() error {
		return func() error {
			var raw []byte
			return p.QueryRow(ctx, sql, res.ID).Scan(&raw)
		}
	}
	readAfterSet := func(p *pgxpool.Pool, sql string) func() error {
		return func() error {
			var raw []byte
			batch := &pgx.Batch{}
			batch.Queue(set, tenant)
			batch.Queue(sql, res.ID).QueryRow(func(r pgx.Row) error { return r.Scan(&raw) })
			return p.SendBatch(ctx, batch).Close()
		}
	}
	getOf := func(e *engine.Engine, id uuid.UUID) func() error {
		return func() error {
			c, err := e.Get(ctx, id)
			if err != nil {
				return err
			}
			var m map[string]any
			return json.Unmarshal(c.State, &m)
		}
	}
	get := func(e *engine.Engine) func() error { return getOf(e, res.ID) }
	b.Run("get/setting", func(b *testing.B) {
		b.ReportMetric(alternate(b, read(super, getView), readAfterSet(super, getView)), "x")
	})
	b.Run("get/policy", func(b *testing.B) {
		b.ReportMetric(alternate(b, read(super, getView), read(app, getView)), "x")
	})
	b.Run("get/view", func(b *testing.B) {
		b.ReportMetric(alternate(b, read(super, getTable), read(super, getView)), "x")
	})
	b.Run("get/engine", func(b *testing.B) {
		b.ReportMetric(alternate(b, get(superEng), get(appEng)), "x")
	})
	b.Run("get/session", func(b *testing.B) {
		b.ReportMetric(alternate(b, get(sessionEng), get(appEng)), "x")
	})
	snapshot := func(e *engine.Engine) func() error {
		return func() error {
			_, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "bench", State: state})
			return err
		}
	}
	b.Run("snapshot/policy", func(b *testing.B) {
		b.ReportMetric(alternate(b, snapshot(superEng), snapshot(appEng)), "x")
	})
	b.Run("snapshot/session", func(b *testing.B) {
		b.ReportMetric(alternate(b, snapshot(sessionEng), snapshot(appEng)), "x")
	})
	// Two more installations, alike but for row-level security (the
	// views' tenant filter stays in both), each filled and analyzed before
	// the sessions measured plan a statement: the policy's cost and the
	// role's, with the same data and statistics on both sides.
	installation := func(rls bool) (app, super *engine.Engine, id uuid.UUID) {
		set := setupTenants(b)
		if !rls {
			set.db.AsOwner(b, `ALTER TABLE pgcheckpoint.checkpoints NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
				ALTER TABLE pgcheckpoint.data_keys NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
				ALTER TABLE pgcheckpoint.pending_writes NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
				ALTER TABLE pgcheckpoint.thread_locks NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
				ALTER TABLE pgcheckpoint.threads NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY`)
		}
		fill := engineOver(pool(set.db.URL))
		for i := range 1000 {
			if _, err := fill.Snapshot(ctx, engine.SnapshotInput{ThreadID: fmt.Sprintf("fill-%02d", i%50), State: state}); err != nil {
				b.Fatal(err)
			}
		}
		r, err := fill.Snapshot(ctx, engine.SnapshotInput{ThreadID: "bench", State: state})
		if err != nil {
			b.Fatal(err)
		}
		set.db.AsOwner(b, "VACUUM ANALYZE")
		// The application role, no tenant set, reading the table itself:
		// nothing where the policy holds, every row where it does not.
		conn, err := pgx.Connect(ctx, set.appURL)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		var seen int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pgcheckpoint.checkpoints").Scan(&seen); err != nil {
			b.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1001}[rls]; seen != want {
			b.Fatalf("row-level security %v: the application role sees %d rows of the table, want %d", rls, seen, want)
		}
		return engineOver(pool(set.appURL)), engineOver(pool(set.db.URL)), r.ID
	}
	heldApp, _, heldID := installation(true)
	openApp, openSuper, openID := installation(false)
	b.Run("get/rls", func(b *testing.B) {
		b.ReportMetric(alternate(b, getOf(openApp, openID), getOf(heldApp, heldID)), "x")
	})
	b.Run("snapshot/rls", func(b *testing.B) {
		b.ReportMetric(alternate(b, snapshot(openApp), snapshot(heldApp)), "x")
	})
	b.Run("get/role", func(b *testing.B) {
		b.ReportMetric(alternate(b, getOf(openSuper, openID), getOf(openApp, openID)), "x")
	})
	b.Run("snapshot/role", func(b *testing.B) {
		b.ReportMetric(alternate(b, snapshot(openSuper), snapshot(openApp)), "x")
	})
	b.Run("snapshot/setting", func(b *testing.B) {
		alone := func() error {
			_, err := super.Exec(ctx, lock, "bench")
			return err
		}
		afterSet := func() error {
			batch := &pgx.Batch{}
			batch.Queue(set, tenant)
			batch.Queue(lock, "bench")
			return super.SendBatch(ctx, batch).Close()
		}
		b.ReportMetric(alternate(b, alone, afterSet), "x")
	})
}
