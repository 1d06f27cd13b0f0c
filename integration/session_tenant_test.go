package integration

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/postgres"
)

// postgres.Options.SessionTenant over a pool of one connection, as the
// application role (row-level security) and as a superuser (the tenant
// views alone): tenants a and b take turns on the same thread id, each
// reads and lists its own alone; a statement that fails after the setting
// of a new tenant (its implicit transaction rolled the setting back) is
// not taken for a setting made, so the next statement in that tenant
// sets it again and does not run in the tenant before.
func TestSessionTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := setupTenants(t)
	for _, role := range []struct{ name, url string }{{"app", ts.appURL}, {"superuser", ts.db.URL}} {
		t.Run(role.name, func(t *testing.T) {
			cfg, err := pgxpool.ParseConfig(role.url)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 1
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			opts := postgres.Options{SessionTenant: true}
			eng := func(tenant string) *engine.Engine { return tenantEngine(t, pool, opts, role.name+"-"+tenant) }
			a, b, c := eng("s-a"), eng("s-b"), eng("s-c")
			for i, e := range []*engine.Engine{a, b, a, b} {
				if _, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "shared", State: json.RawMessage(`{"by": "` + e.Tenant() + `"}`)}); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
			}
			for _, e := range []*engine.Engine{a, b, a} {
				head, err := e.Latest(ctx, "shared")
				if err != nil {
					t.Fatal(err)
				}
				jsonEqual(t, "head of "+e.Tenant(), head.State, []byte(`{"by": "`+e.Tenant()+`"}`))
				if l, err := e.ListCheckpoints(ctx, "shared", engine.ListOptions{}); err != nil || len(l) != 2 {
					t.Errorf("tenant %s lists %d checkpoints (%v), want 2", e.Tenant(), len(l), err)
				}
			}
			// b's session; c's first statement fails after c's setting.
			if _, err := b.Latest(ctx, "shared"); err != nil {
				t.Fatal(err)
			}
			head, _ := a.Latest(ctx, "shared")
			// (checkpoint_rewind raises PC001: the batch fails.)
			if _, err := c.Rewind(ctx, head.ID); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("c's rewind to a's checkpoint: %v, want ErrNotFound", err)
			}
			if ths, err := c.ListThreads(ctx, engine.ThreadListOptions{}); err != nil || len(ths) != 0 {
				t.Fatalf("tenant c lists %d threads (%v) after its failed rewind, want none", len(ths), err)
			}
		})
	}
}
