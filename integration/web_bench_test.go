package integration

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
)

// BenchmarkWebThreadPage measures ckpt web's page of a long thread
// (PGCHECKPOINT_BENCH_WEB_STEPS checkpoints, default 50,000): a GET of
// its HTML, read whole, as the server makes it (the tree of the whole
// thread, laid out; the browser then draws one page of rows, whatever the
// thread's length), against a bare query reading the same rows' tree
// columns (id, thread, namespace, seq, step, time, trigger, tags,
// summary, parent, merge parent) through the store's own driver, on both
// stores, alternated; x-bare is the ratio of their medians.
func BenchmarkWebThreadPage(b *testing.B) {
	steps := webBigThread
	if v, err := strconv.Atoi(os.Getenv("PGCHECKPOINT_BENCH_WEB_STEPS")); err == nil && v > 0 {
		steps = v
	}
	bin := buildCommand(b, "ckpt")
	for _, store := range []string{"sqlite", "postgres"} {
		b.Run(store, func(b *testing.B) {
			ctx := context.Background()
			var dbURL string
			var db *sql.DB
			if store == "sqlite" {
				path := filepath.Join(b.TempDir(), "web.db")
				dbURL = "sqlite:" + path
				var err error
				if db, err = sql.Open("sqlite", path+"?_pragma=query_only(1)"); err != nil {
					b.Fatal(err)
				}
			} else {
				d := pgtest.NewDB(b)
				dbURL = d.URL
				u, err := url.Parse(d.URL)
				if err != nil {
					b.Fatal(err)
				}
				q := u.Query()
				q.Set("options", "-c pgcheckpoint.tenant=default -c search_path=pgcheckpoint")
				u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
				if db, err = sql.Open("pgx", u.String()); err != nil {
					b.Fatal(err)
				}
			}
			eng, err := pgcheckpoint.Open(ctx, dbURL, pgcheckpoint.Options{Migrate: true})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			defer db.Close()
			importLinear(b, eng, "long", steps)
			w := startWeb(b, bin, dbURL)
			c := client(b, w)
			page := w.root + "/thread?id=long"
			// One statement for both stores: their tables have these
			// columns under these names, tags as JSON text on SQLite.
			const tree = `SELECT checkpoint_id, thread_id, namespace, seq, step, created_at, trigger, tags, summary,
				parent_checkpoint_id, merge_parent_id FROM checkpoints WHERE thread_id = 'long' ORDER BY seq`
			bare := func() error {
				rows, err := db.QueryContext(ctx, tree)
				if err != nil {
					return err
				}
				defer rows.Close()
				var n int
				for rows.Next() {
					var id, thread, ns, trigger, summary string
					var tags any
					var seq, step int64
					var at any
					var parent, merge sql.NullString
					if err := rows.Scan(&id, &thread, &ns, &seq, &step, &at, &trigger, &tags, &summary, &parent, &merge); err != nil {
						return err
					}
					if _, err := uuid.Parse(id); err != nil {
						return err
					}
					n++
				}
				if n != steps {
					b.Fatalf("the bare read found %d rows, want %d", n, steps)
				}
				return rows.Err()
			}
			get := func() error {
				resp, err := c.Get(page)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET the page: %s", resp.Status)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				return err
			}
			// A few warm-up rounds (each reads the whole thread): the
			// page's and the query's statements prepared, pages cached.
			b.ReportMetric(benchratio.Alternate(b, 3, bare, get), "x-bare")
		})
	}
}
