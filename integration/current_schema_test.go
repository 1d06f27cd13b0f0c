package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

var update = flag.Bool("update", false, "rewrite schema/current.sql from a database at the latest version (TestCurrentSchema)")

// currentSchemaPath is schema/current.sql, from this package's folder.
var currentSchemaPath = filepath.Join("..", "schema", "current.sql")

// regenerate is the command that rewrites schema/current.sql.
const regenerate = "go test ./integration -run '^TestCurrentSchema$' -update"

// currentSchemaFile is schema/current.sql for a dump of a database at the
// latest version: a header, then the dump.
func currentSchemaFile(dump string) string {
	return fmt.Sprintf(`-- The pgcheckpoint schema as a database migrated to version %d has it:
-- tables, views and functions, whole, with their comments and the
-- privileges the migrations set. Generated from such a database's catalog:
-- do not edit. The migrations (migrations/: the baseline, and any after
-- it) make the schema; after adding one, regenerate this file with
--
--   %s
--
-- and commit it (TestCurrentSchema fails while it is stale). sqlc reads
-- this file, not the migrations (sqlc.yaml).
--
-- To create or upgrade a database, apply the migrations (package schema,
-- cmd/migrate): this file leaves out their version table.

%s`, schema.Latest(), regenerate, dump)
}

// schema/current.sql is the schema the migrations make: the schema of a
// database at the latest version, as dumpSchema writes it.
func TestCurrentSchema(t *testing.T) {
	t.Parallel()
	got := currentSchemaFile(catalog(t, pgtest.NewDB(t).Pool))
	if *update {
		if err := os.WriteFile(currentSchemaPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", currentSchemaPath)
		return
	}
	want, err := os.ReadFile(currentSchemaPath)
	if err != nil {
		t.Fatalf("%v: regenerate it with\n\n\t%s", err, regenerate)
	}
	if string(want) != got {
		t.Fatalf("schema/current.sql is stale: it is not the schema the migrations make (version %d). Regenerate it with\n\n\t%s\n\nand commit it. Where they differ (- the file, + a migrated database):\n%s",
			schema.Latest(), regenerate, schemaDiff(string(want), got))
	}
}

// schema/current.sql, run on an empty database, builds the schema it
// describes: it is valid SQL, whole, in an order Postgres accepts (what
// sqlc reads is what a database holds).
func TestCurrentSchemaFileBuildsItsSchema(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile(currentSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	d := pgtest.EmptyDB(t)
	if _, err := d.Pool.Exec(context.Background(), string(text), pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("schema/current.sql on an empty database: %v", err)
	}
	// The dump's part of the file: what follows the header's comment lines.
	want := string(text)
	for strings.HasPrefix(want, "--") {
		_, want, _ = strings.Cut(want, "\n")
	}
	want = strings.TrimPrefix(want, "\n")
	if got := catalog(t, d.Pool); got != want {
		t.Fatalf("the schema schema/current.sql builds is not the one it describes (- the file, + the database it built):\n%s",
			schemaDiff(want, got))
	}
}

// The dump writes what it reads: each kind of object it knows, made on an
// empty database, comes out as a statement that makes it again, and an
// object of a kind it does not know fails the dump.
func TestDumpSchemaWritesEveryKindItKnows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := pgtest.EmptyDB(t)
	const ddl = `
CREATE SCHEMA pgcheckpoint;
COMMENT ON SCHEMA pgcheckpoint IS 'it''s the schema';
CREATE TABLE pgcheckpoint.b (
    id bigint NOT NULL,
    c_id bigint,
    word text COLLATE "C" DEFAULT 'x' NOT NULL,
    blob jsonb COMPRESSION lz4,
    twice bigint GENERATED ALWAYS AS (id * 2) STORED,
    CONSTRAINT b_pkey PRIMARY KEY (id),
    CONSTRAINT b_word_short CHECK (length(word) < 10)
) WITH (fillfactor = 90);
CREATE UNLOGGED TABLE pgcheckpoint.a (id bigint PRIMARY KEY, b_id bigint REFERENCES pgcheckpoint.b (id) ON DELETE CASCADE);
CREATE TABLE pgcheckpoint.c (id bigint PRIMARY KEY);
ALTER TABLE pgcheckpoint.b ADD CONSTRAINT b_c_id_fkey FOREIGN KEY (c_id) REFERENCES pgcheckpoint.c (id);
ALTER TABLE pgcheckpoint.b ADD CONSTRAINT b_id_positive CHECK (id > 0) NOT VALID;
ALTER TABLE pgcheckpoint.b ALTER COLUMN word SET STORAGE MAIN, ALTER COLUMN word SET STATISTICS 500;
CREATE INDEX b_word_idx ON pgcheckpoint.b (lower(word)) WHERE id > 10;
ALTER TABLE pgcheckpoint.b CLUSTER ON b_pkey;
ALTER TABLE pgcheckpoint.a REPLICA IDENTITY FULL;
COMMENT ON TABLE pgcheckpoint.b IS 'table b';
COMMENT ON COLUMN pgcheckpoint.b.word IS 'a word';
COMMENT ON CONSTRAINT b_word_short ON pgcheckpoint.b IS 'short words';
COMMENT ON INDEX pgcheckpoint.b_pkey IS 'the key';
CREATE FUNCTION pgcheckpoint.touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
REVOKE EXECUTE ON FUNCTION pgcheckpoint.touch() FROM PUBLIC;
CREATE TRIGGER b_touch BEFORE UPDATE ON pgcheckpoint.b FOR EACH ROW EXECUTE FUNCTION pgcheckpoint.touch();
ALTER TABLE pgcheckpoint.b DISABLE TRIGGER b_touch;
COMMENT ON TRIGGER b_touch ON pgcheckpoint.b IS 'touches';
CREATE VIEW pgcheckpoint.v WITH (security_barrier) AS SELECT id, word FROM pgcheckpoint.b;
COMMENT ON COLUMN pgcheckpoint.v.word IS 'the word, seen';
GRANT SELECT (word) ON pgcheckpoint.b TO pg_monitor;
GRANT SELECT ON pgcheckpoint.v TO pg_monitor WITH GRANT OPTION;
REVOKE ALL ON SCHEMA pgcheckpoint FROM CURRENT_USER;
GRANT USAGE ON SCHEMA pgcheckpoint TO CURRENT_USER, PUBLIC;
CREATE PROCEDURE pgcheckpoint.p(n int DEFAULT 1) LANGUAGE sql AS $$SELECT n$$;
ALTER TABLE pgcheckpoint.b ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgcheckpoint.b FORCE ROW LEVEL SECURITY;
CREATE POLICY b_some ON pgcheckpoint.b USING (id > 0) WITH CHECK (id > 1);
COMMENT ON POLICY b_some ON pgcheckpoint.b IS 'some rows';
CREATE POLICY b_reads ON pgcheckpoint.b FOR SELECT USING (word <> '');
COMMENT ON PROCEDURE pgcheckpoint.p(int) IS 'p';
`
	if _, err := d.Pool.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	first := catalog(t, d.Pool)
	for _, want := range []string{
		"word text COLLATE pg_catalog.\"C\" DEFAULT 'x'::text NOT NULL",
		"blob jsonb COMPRESSION lz4",
		"twice bigint GENERATED ALWAYS AS ((id * 2)) STORED",
		") WITH (fillfactor=90);",
		"CREATE UNLOGGED TABLE pgcheckpoint.a",
		"CONSTRAINT a_b_id_fkey FOREIGN KEY (b_id) REFERENCES pgcheckpoint.b(id) ON DELETE CASCADE",
		"\nALTER TABLE ONLY pgcheckpoint.b ADD CONSTRAINT b_c_id_fkey FOREIGN KEY (c_id) REFERENCES pgcheckpoint.c(id);",
		"ALTER TABLE ONLY pgcheckpoint.b ADD CONSTRAINT b_id_positive CHECK ((id > 0)) NOT VALID;",
		"ALTER TABLE ONLY pgcheckpoint.b ALTER COLUMN word SET STORAGE MAIN;",
		"ALTER TABLE ONLY pgcheckpoint.b ALTER COLUMN word SET STATISTICS 500;",
		"CREATE INDEX b_word_idx ON pgcheckpoint.b USING btree (lower(word)) WHERE (id > 10);",
		"ALTER TABLE pgcheckpoint.b CLUSTER ON b_pkey;",
		"ALTER TABLE ONLY pgcheckpoint.a REPLICA IDENTITY FULL;",
		"COMMENT ON SCHEMA pgcheckpoint IS 'it''s the schema';",
		"COMMENT ON CONSTRAINT b_word_short ON pgcheckpoint.b IS 'short words';",
		"COMMENT ON INDEX pgcheckpoint.b_pkey IS 'the key';",
		"CREATE TRIGGER b_touch BEFORE UPDATE ON pgcheckpoint.b FOR EACH ROW EXECUTE FUNCTION pgcheckpoint.touch();\nALTER TABLE pgcheckpoint.b DISABLE TRIGGER b_touch;",
		"COMMENT ON TRIGGER b_touch ON pgcheckpoint.b IS 'touches';",
		"CREATE VIEW pgcheckpoint.v WITH (security_barrier=true) AS",
		"COMMENT ON COLUMN pgcheckpoint.v.word IS 'the word, seen';",
		"GRANT SELECT (word) ON TABLE pgcheckpoint.b TO pg_monitor;",
		"GRANT SELECT ON TABLE pgcheckpoint.v TO pg_monitor WITH GRANT OPTION;",
		"REVOKE CREATE ON SCHEMA pgcheckpoint FROM CURRENT_USER;\nGRANT USAGE ON SCHEMA pgcheckpoint TO PUBLIC;",
		"REVOKE EXECUTE ON FUNCTION pgcheckpoint.touch() FROM PUBLIC;",
		"COMMENT ON PROCEDURE pgcheckpoint.p(integer) IS 'p';",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("the dump lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("the dump:\n%s", first)
	}

	// What it wrote builds the same schema.
	again := pgtest.EmptyDB(t)
	if _, err := again.Pool.Exec(ctx, first, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("the dump does not run: %v\n%s", err, first)
	}
	if second := catalog(t, again.Pool); second != first {
		t.Fatalf("the dump builds another schema:\n%s", schemaDiff(first, second))
	}

	for _, unknown := range []string{
		"CREATE SEQUENCE pgcheckpoint.s",
		"CREATE TYPE pgcheckpoint.mood AS ENUM ('ok')",
		"CREATE POLICY only_monitor ON pgcheckpoint.c TO pg_monitor USING (true)",
		"CREATE STATISTICS pgcheckpoint.st ON id, word FROM pgcheckpoint.b",
		"CREATE MATERIALIZED VIEW pgcheckpoint.m AS SELECT 1",
	} {
		tx, err := again.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, unknown); err != nil {
			t.Fatalf("%s: %v", unknown, err)
		}
		err = (&dumper{ctx: ctx, tx: tx}).dump()
		_ = tx.Rollback(ctx)
		if err == nil || !strings.Contains(err.Error(), "does not write") {
			t.Errorf("after %s the dump returned %v, want an error naming the object", unknown, err)
		}
	}
}
