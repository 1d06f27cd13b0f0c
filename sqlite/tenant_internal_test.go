package sqlite

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

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

	tables := regexp.MustCompile(`(?i)\b(FROM|JOIN|UPDATE|INTO)\s+(checkpoints|threads|pending_writes)\b`)
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
