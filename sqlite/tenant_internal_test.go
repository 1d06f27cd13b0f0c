package sqlite

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// Every generated query is about one tenant: it takes a tenant_id, names
// it at least once for every table it reads or writes (a join, a subquery
// and a recursive step each filter by it), and runs only through queries,
// which fills tenant_id from the store's tenant.
func TestEveryQueryIsAboutOneTenant(t *testing.T) {
	gen := reflect.TypeFor[*sqlitedb.Queries]()
	ours := reflect.TypeFor[*queries]()
	n := 0
	for i := range gen.NumMethod() {
		m := gen.Method(i)
		if m.Name == "Close" || m.Name == "WithTx" {
			continue
		}
		n++
		if _, ok := ours.MethodByName(m.Name); !ok {
			t.Errorf("sqlitedb.%s has no method on queries (sqlite/tenant.go), which fills its tenant_id", m.Name)
		}
		arg := m.Type.In(2) // receiver, ctx, params
		if arg.Kind() == reflect.Struct {
			if _, ok := arg.FieldByName("TenantID"); !ok {
				t.Errorf("sqlitedb.%s takes no tenant_id", m.Name)
			}
		} else if arg.Kind() != reflect.String || m.Type.NumIn() != 3 {
			t.Errorf("sqlitedb.%s takes %v, not a tenant_id", m.Name, arg)
		}
	}
	if ours.NumMethod() != n {
		t.Errorf("queries has %d methods, sqlitedb has %d queries", ours.NumMethod(), n)
	}

	// Every table of the migrated schema but the migration tool's.
	s, err := Open(context.Background(), Memory, Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.w.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'schema_migrations' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil || len(names) < 4 {
		t.Fatalf("tables %v: %v; want checkpoints, threads, pending_writes and data_keys at least", names, err)
	}
	tables := regexp.MustCompile(`(?i)\b(FROM|JOIN|UPDATE|INTO)\s+(` + strings.Join(names, "|") + `)\b`)
	// A filter is a tenant_id = ...; an insert gives @tenant_id as its
	// first value.
	filter := regexp.MustCompile(`(?i)\btenant_id\s*=|VALUES\s*\(\s*@tenant_id`)
	files, err := filepath.Glob("queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries: %v", err)
	}
	queriesSeen := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(text), "-- name: ")[1:] {
			name := strings.Fields(block)[0]
			queriesSeen++
			var sql []string
			for _, line := range strings.Split(block, "\n")[1:] {
				if !strings.HasPrefix(strings.TrimSpace(line), "--") {
					sql = append(sql, line)
				}
			}
			body := strings.Join(sql, "\n")
			refs := len(tables.FindAllString(body, -1))
			filters := len(filter.FindAllString(body, -1))
			if refs == 0 || filters < refs {
				t.Errorf("%s: %s names a table %d times and tenant_id %d times: each table it reads or writes must be filtered by (or given) the tenant", f, name, refs, filters)
			}
		}
	}
	if queriesSeen != n {
		t.Errorf("read %d queries in queries/, sqlitedb has %d", queriesSeen, n)
	}
}

// Every query reads the tables through an index that begins with
// tenant_id (the keys: tenant_id, thread_id, ...; a checkpoint id is
// unique per tenant): no query scans a table, or a tenant's rows where it
// names a thread, a checkpoint or a branch source. Only the recursive
// queries' own rows (walk, chain, family, tree) and a list of ids bound as
// one JSON array (json_each of a parameter) are scanned.
func TestQueriesSearchByTenantFirst(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plans.db"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctes := regexp.MustCompile(`^SCAN (w|ch|f|tree|CONSTANT ROW|json_each VIRTUAL TABLE INDEX \d+:)$`)
	// A search by tenant alone (or a range after it) is a tenant's
	// listing: these queries list a tenant's threads, or its checkpoints
	// with a run id.
	byTenant := map[string]bool{"ThreadListHeads": true, "ThreadIDsAfter": true, "CheckpointListWithRunID": true}
	search := regexp.MustCompile(`^SEARCH \w+ USING (?:COVERING )?INDEX \w+ \(tenant_id=\?(?: AND (\w+)[=>])?`)
	files, _ := filepath.Glob("queries/*.sql")
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(text), "-- name: ")[1:] {
			name := strings.Fields(block)[0]
			body := block[strings.Index(block, "\n"):]
			body = regexp.MustCompile(`sqlc\.slice\(\w+\)`).ReplaceAllString(body, "NULL")
			body = regexp.MustCompile(`sqlc\.embed\((\w+)\)`).ReplaceAllString(body, "$1.*")
			body = regexp.MustCompile(`@\w+`).ReplaceAllString(body, "NULL")
			rows, err := s.w.QueryContext(ctx, "EXPLAIN QUERY PLAN "+body)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for rows.Next() {
				var id, parent, unused int
				var step string
				if err := rows.Scan(&id, &parent, &unused, &step); err != nil {
					t.Fatal(err)
				}
				switch {
				case strings.HasPrefix(step, "SCAN "):
					if !ctes.MatchString(step) {
						t.Errorf("%s scans a table: %s", name, step)
					}
				case strings.HasPrefix(step, "SEARCH ") && !strings.Contains(step, "AUTOMATIC"):
					m := search.FindStringSubmatch(step)
					if m == nil {
						t.Errorf("%s searches by a key that does not begin with tenant_id: %s", name, step)
					} else if m[1] == "" && !byTenant[name] {
						t.Errorf("%s searches a whole tenant: %s", name, step)
					}
				}
			}
			rows.Close()
		}
	}
}

// A process that runs the first migration after another applied it (both
// read "no version" at once, opening a new file) changes nothing:
// Migrate leaves the version clean and every tenant's rows as they were.
func TestFirstMigrationRacedByAnotherProcess(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "race.db"), Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(s, engine.Config{})
	defer eng.Close()
	acme, _ := eng.ForTenant("acme")
	for _, e := range []*engine.Engine{eng, acme} {
		if _, err := e.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run", State: json.RawMessage(`{"who":"` + e.Tenant() + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// The second process read no version: it runs every migration again.
	m, err := newMigrator(s.w)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Force(-1); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, s.w); err != nil {
		t.Fatalf("migrate after another process migrated: %v", err)
	}
	if err := CheckVersion(ctx, s.w); err != nil {
		t.Fatalf("version after the race: %v", err)
	}
	for _, e := range []*engine.Engine{eng, acme} {
		head, err := e.Latest(ctx, "run")
		if err != nil {
			t.Errorf("tenant %q after the race: %v", e.Tenant(), err)
		} else if string(head.State) != `{"who":"`+e.Tenant()+`"}` {
			t.Errorf("tenant %q after the race reads %s", e.Tenant(), head.State)
		}
	}
}
