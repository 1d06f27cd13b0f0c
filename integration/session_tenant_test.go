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
			pool := poolOf(t, role.url, 1)
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

// postgres.Options.SessionTenant through PgBouncer (transaction mode, but
// the store cannot tell one mode from another): every call outside a
// transaction fails with postgres.ErrPooledSession before it sets a
// tenant or writes, the write as well as the reads: the pooler's one
// server connection has no tenant set afterwards and nothing is written;
// the same pool with the default (the tenant set in each transaction)
// works.
func TestSessionTenantRefusesAPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := setupTenants(t)
	via := startPgBouncerPool(t, ts.appURL, 1)
	pool, err := pgxpool.New(ctx, via+"&default_query_exec_mode=exec")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	eng := tenantEngine(t, pool, postgres.Options{SessionTenant: true}, "pooled")
	_, err = eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"a": 1}`)})
	if !errors.Is(err, postgres.ErrPooledSession) {
		t.Fatalf("Snapshot through PgBouncer with SessionTenant: %v, want ErrPooledSession", err)
	}
	if _, err := eng.Latest(ctx, "t"); !errors.Is(err, postgres.ErrPooledSession) {
		t.Errorf("Latest: %v, want ErrPooledSession", err)
	}
	if _, err := eng.ListThreads(ctx, engine.ThreadListOptions{}); !errors.Is(err, postgres.ErrPooledSession) {
		t.Errorf("ListThreads: %v, want ErrPooledSession", err)
	}
	if _, err := eng.DeleteThreads(ctx, "t"); !errors.Is(err, postgres.ErrPooledSession) {
		t.Errorf("DeleteThreads: %v, want ErrPooledSession", err)
	}
	var session *string
	if err := pool.QueryRow(ctx, "SELECT pg_catalog.current_setting('pgcheckpoint.tenant', true)").Scan(&session); err != nil {
		t.Fatal(err)
	}
	if session != nil && *session != "" {
		t.Fatalf("after the refusals the server session's tenant is %q, want none", *session)
	}
	// The same pool, the tenant set in each transaction.
	def := tenantEngine(t, pool, postgres.Options{}, "pooled")
	if ths, err := def.ListThreads(ctx, engine.ThreadListOptions{}); err != nil || len(ths) != 0 {
		t.Fatalf("after the refusals the tenant lists %d threads (%v), want none", len(ths), err)
	}
	if _, err := def.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", State: json.RawMessage(`{"a": 1}`)}); err != nil {
		t.Fatalf("Snapshot through PgBouncer with the default: %v", err)
	}
}
