package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// catalog is dumpSchema for a test: the schema of the database, or the test
// fails.
func catalog(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	s, err := dumpSchema(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// returnsViewRows is true of a function of pg_proc p whose result is the
// row type of a view: it is created after the views, and dropped before.
const returnsViewRows = `EXISTS (SELECT FROM pg_type t JOIN pg_class r ON r.oid = t.typrelid
    WHERE t.oid = p.prorettype AND r.relkind = 'v')`

// dumpSchema writes the pgcheckpoint schema of a database as SQL, read
// from its catalog: every table with its columns, constraints, indexes and
// triggers, every view, every function and procedure with its whole body,
// every comment, and the privileges that differ from Postgres's defaults
// (as the GRANT and REVOKE statements that make them). It is the one
// description of a schema the tests use: schema/current.sql is its output
// for a database at the latest version, and the migration tests compare
// its output before and after.
//
// The text depends on the schema alone: objects in a fixed order (tables,
// then views, then functions, each by name), owners never named (an
// owner's own privilege is CURRENT_USER), the settings that change how
// Postgres prints expressions pinned for the dump. The version table is
// left out: the Migrator makes it, not a migration. Run in order on an
// empty database, the text builds the same schema (a test checks it).
//
// An object of a kind it cannot write yet (a sequence, a type, a policy,
// ...) is an error naming it, never a silent omission.
func dumpSchema(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return "", fmt.Errorf("dump the schema: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	d := dumper{ctx: ctx, tx: tx}
	if err := d.dump(); err != nil {
		return "", fmt.Errorf("dump the schema: %w", err)
	}
	return d.out.String(), nil
}

type dumper struct {
	ctx context.Context
	tx  pgx.Tx
	ns  uint32 // the schema's oid

	out strings.Builder
	// comments and privileges, by object, until written next to it; any
	// left at the end belong to an object the dump did not write.
	comments   map[objectKey]string
	privileges map[objectKey][]string
	triggers   []trigger // of every table and view, written last
	// security holds what is written after the functions, which it
	// calls: column defaults that call a function of the schema, and
	// each table's row-level security and policies.
	security []string
}

type trigger struct {
	key  objectKey
	text string
}

// objectKey names an object as pg_description and pg_depend do: its
// catalog, its oid and (for a column) its number.
type objectKey struct {
	catalog string
	oid     uint32
	sub     int32
}

// dumpSettings pin what changes how Postgres prints names, expressions and
// constants: every pgcheckpoint name comes out schema-qualified, every
// pg_catalog one bare.
const dumpSettings = `SELECT set_config('search_path', 'pg_catalog', true),
	set_config('quote_all_identifiers', 'off', true),
	set_config('standard_conforming_strings', 'on', true),
	set_config('DateStyle', 'ISO, YMD', true),
	set_config('IntervalStyle', 'postgres', true),
	set_config('TimeZone', 'UTC', true),
	set_config('extra_float_digits', '3', true)`

func (d *dumper) dump() error {
	if _, err := d.tx.Exec(d.ctx, dumpSettings); err != nil {
		return err
	}
	var ns *uint32
	if err := d.tx.QueryRow(d.ctx, `SELECT (SELECT oid FROM pg_namespace WHERE nspname = $1)`, schema.Name).Scan(&ns); err != nil {
		return err
	}
	if ns == nil {
		return nil // no schema, nothing in it
	}
	d.ns = *ns
	if err := d.refuseUnknownKinds(); err != nil {
		return err
	}
	var err error
	if d.comments, err = d.readComments(); err != nil {
		return err
	}
	if d.privileges, err = d.readPrivileges(); err != nil {
		return err
	}

	var name string
	if err := d.tx.QueryRow(d.ctx, `SELECT quote_ident(nspname) FROM pg_namespace WHERE oid = $1`, d.ns).Scan(&name); err != nil {
		return err
	}
	// Functions are written after the tables, in name order, not in the
	// order they call each other: their bodies are checked when called,
	// not when created. Views come after the functions (and aggregates),
	// which they may call (the tenant views call current_tenant()); a
	// function that returns a view's rows comes after the views, whose row
	// type it names.
	d.out.WriteString("SET check_function_bodies = false;\n\nCREATE SCHEMA " + name + ";\n")
	d.writeExtras(objectKey{"pg_namespace", d.ns, 0})
	d.out.WriteString("\n-- Tables\n")

	if err := d.tables(); err != nil {
		return err
	}
	if err := d.functions(false); err != nil {
		return err
	}
	if err := d.aggregates(); err != nil {
		return err
	}
	if err := d.views(); err != nil {
		return err
	}
	if err := d.functions(true); err != nil {
		return err
	}
	d.writeSecurity()
	d.writeTriggers()
	var left []string
	for _, c := range d.comments {
		left = append(left, c)
	}
	for _, ps := range d.privileges {
		left = append(left, ps...)
	}
	if len(left) > 0 {
		slices.Sort(left)
		return fmt.Errorf("comments or privileges on objects the dump does not write (teach dumpSchema to write them):\n%s", strings.Join(left, "\n"))
	}
	return nil
}

// writeExtras writes an object's comment and privileges, if any.
func (d *dumper) writeExtras(k objectKey) {
	if c, ok := d.comments[k]; ok {
		d.out.WriteString(c + "\n")
		delete(d.comments, k)
	}
	for _, p := range d.privileges[k] {
		d.out.WriteString(p + "\n")
	}
	delete(d.privileges, k)
}

// refuseUnknownKinds fails on any object in the schema that the dump does
// not write, so that the dump never leaves one out unseen.
func (d *dumper) refuseUnknownKinds() error {
	rows, err := d.tx.Query(d.ctx, `
WITH rels AS (SELECT oid FROM pg_class WHERE relnamespace = $1)
SELECT what FROM (
    SELECT CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'm' THEN 'materialized view'
                          WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index'
                          WHEN 'f' THEN 'foreign table' WHEN 'c' THEN 'composite type'
                          ELSE 'relation of kind ' || c.relkind::text END || ' ' || c.oid::regclass AS what
    FROM pg_class c WHERE c.relnamespace = $1 AND c.relkind NOT IN ('r', 'v', 'i')
    UNION ALL
    SELECT 'inheriting table ' || inhrelid::regclass FROM pg_inherits WHERE inhrelid IN (TABLE rels)
    UNION ALL
    SELECT 'table access method ' || a.amname || ' of ' || c.oid::regclass
    FROM pg_class c JOIN pg_am a ON a.oid = c.relam
    WHERE c.relnamespace = $1 AND c.relkind = 'r' AND a.amname <> 'heap'
    UNION ALL
    SELECT 'identity column ' || attrelid::regclass || '.' || attname FROM pg_attribute
    WHERE attrelid IN (TABLE rels) AND attidentity <> ''
    UNION ALL
    SELECT 'default of view column ' || c.oid::regclass FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid
    WHERE c.relnamespace = $1 AND c.relkind = 'v'
    UNION ALL
    -- A table's or view's row type, and its array type, come with it.
    SELECT 'type ' || t.oid::regtype FROM pg_type t
    WHERE t.typnamespace = $1 AND t.typrelid = 0
      AND NOT EXISTS (SELECT FROM pg_type e WHERE e.oid = t.typelem AND e.typrelid <> 0 AND e.typarray = t.oid)
    UNION ALL
    SELECT 'window function ' || oid::regprocedure FROM pg_proc
    WHERE pronamespace = $1 AND prokind NOT IN ('f', 'p', 'a')
    UNION ALL
    -- aggregates() writes plain aggregates with a state function, a state
    -- type, an initial value and a final function; nothing more.
    SELECT 'aggregate with options the dump does not write ' || a.aggfnoid::regprocedure
    FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid
    WHERE p.pronamespace = $1
      AND (a.aggkind <> 'n' OR a.aggnumdirectargs <> 0 OR a.aggcombinefn <> 0 OR a.aggserialfn <> 0
           OR a.aggdeserialfn <> 0 OR a.aggmtransfn <> 0 OR a.aggfinalextra OR a.aggfinalmodify <> 'r'
           OR a.aggsortop <> 0 OR a.aggtransspace <> 0 OR p.proparallel <> 'u')
    UNION ALL SELECT 'operator ' || oid::regoperator FROM pg_operator WHERE oprnamespace = $1
    UNION ALL SELECT 'operator class ' || opcname FROM pg_opclass WHERE opcnamespace = $1
    UNION ALL SELECT 'operator family ' || opfname FROM pg_opfamily WHERE opfnamespace = $1
    UNION ALL SELECT 'collation ' || collname FROM pg_collation WHERE collnamespace = $1
    UNION ALL SELECT 'conversion ' || conname FROM pg_conversion WHERE connamespace = $1
    UNION ALL SELECT 'statistics object ' || stxname FROM pg_statistic_ext WHERE stxnamespace = $1
    UNION ALL SELECT 'text search configuration ' || cfgname FROM pg_ts_config WHERE cfgnamespace = $1
    UNION ALL SELECT 'text search dictionary ' || dictname FROM pg_ts_dict WHERE dictnamespace = $1
    UNION ALL SELECT 'text search parser ' || prsname FROM pg_ts_parser WHERE prsnamespace = $1
    UNION ALL SELECT 'text search template ' || tmplname FROM pg_ts_template WHERE tmplnamespace = $1
    UNION ALL SELECT 'extension ' || extname FROM pg_extension WHERE extnamespace = $1
    UNION ALL SELECT 'policy with roles, or not permissive, ' || polname FROM pg_policy
    WHERE polrelid IN (TABLE rels) AND (polroles <> '{0}' OR NOT polpermissive)
    UNION ALL SELECT 'rule ' || rulename FROM pg_rewrite WHERE ev_class IN (TABLE rels) AND rulename <> '_RETURN'
    UNION ALL SELECT 'default privileges' FROM pg_default_acl WHERE defaclnamespace = $1
) unknown ORDER BY what COLLATE "C"`, d.ns)
	if err != nil {
		return err
	}
	unknown, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("objects of kinds the dump does not write yet (teach dumpSchema to write them):\n%s", strings.Join(unknown, "\n"))
	}
	return nil
}

// readComments returns every comment on an object of the schema, as the
// COMMENT statement that makes it.
func (d *dumper) readComments() (map[objectKey]string, error) {
	rows, err := d.tx.Query(d.ctx, `
SELECT d.classoid::regclass::text, d.objoid, d.objsubid,
       format('COMMENT ON %s IS %L;',
              CASE o.type
                  WHEN 'table column' THEN 'COLUMN ' || d.objoid::regclass || '.' || quote_ident(a.attname)
                  WHEN 'view column' THEN 'COLUMN ' || d.objoid::regclass || '.' || quote_ident(a.attname)
                  WHEN 'table' THEN 'TABLE ' || d.objoid::regclass
                  WHEN 'view' THEN 'VIEW ' || d.objoid::regclass
                  WHEN 'index' THEN 'INDEX ' || d.objoid::regclass
                  -- The argument types as a DROP or a GRANT would name them.
                  WHEN 'function' THEN 'FUNCTION ' || d.objoid::regprocedure
                  WHEN 'procedure' THEN 'PROCEDURE ' || d.objoid::regprocedure
                  WHEN 'table constraint' THEN (SELECT 'CONSTRAINT ' || quote_ident(conname) || ' ON ' || conrelid::regclass
                                               FROM pg_constraint WHERE oid = d.objoid)
                  WHEN 'trigger' THEN (SELECT 'TRIGGER ' || quote_ident(tgname) || ' ON ' || tgrelid::regclass
                                      FROM pg_trigger WHERE oid = d.objoid)
                  WHEN 'policy' THEN (SELECT 'POLICY ' || quote_ident(polname) || ' ON ' || polrelid::regclass
                                     FROM pg_policy WHERE oid = d.objoid)
                  ELSE upper(o.type) || ' ' || o.identity
              END,
              d.description)
FROM pg_description d
CROSS JOIN LATERAL pg_identify_object(d.classoid, d.objoid, d.objsubid) o
LEFT JOIN pg_attribute a ON d.classoid = 'pg_class'::regclass AND a.attrelid = d.objoid AND a.attnum = d.objsubid
WHERE d.objoid >= 16384 -- FirstNormalObjectId: not one of Postgres's own
  AND (o.schema = $1
       OR (d.classoid = 'pg_namespace'::regclass AND d.objoid = $2)
       -- A trigger has no schema of its own: it is in its table's.
       OR (d.classoid = 'pg_trigger'::regclass
           AND EXISTS (SELECT FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                       WHERE t.oid = d.objoid AND c.relnamespace = $2))
       -- Nor has a policy.
       OR (d.classoid = 'pg_policy'::regclass
           AND EXISTS (SELECT FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
                       WHERE p.oid = d.objoid AND c.relnamespace = $2)))`, schema.Name, d.ns)
	if err != nil {
		return nil, err
	}
	out := map[objectKey]string{}
	var k objectKey
	var stmt string
	_, err = pgx.ForEachRow(rows, []any{&k.catalog, &k.oid, &k.sub, &stmt}, func() error {
		out[k] = stmt
		return nil
	})
	return out, err
}

// readPrivileges returns, for every object of the schema whose privileges
// differ from Postgres's defaults for it, the REVOKE and GRANT statements
// that make them so: REVOKE first, then by grantee. The grantor is left
// out, and so is the owner's name.
func (d *dumper) readPrivileges() (map[objectKey][]string, error) {
	rows, err := d.tx.Query(d.ctx, `
WITH objects (catalog, oid, sub, target, col, owner, acl, def) AS (
    SELECT 'pg_namespace', n.oid, 0, 'SCHEMA ' || quote_ident(n.nspname), '', n.nspowner,
           coalesce(n.nspacl, acldefault('n', n.nspowner)), acldefault('n', n.nspowner)
    FROM pg_namespace n WHERE n.oid = $1
    UNION ALL
    SELECT 'pg_class', c.oid, 0, 'TABLE ' || c.oid::regclass, '', c.relowner,
           coalesce(c.relacl, acldefault('r', c.relowner)), acldefault('r', c.relowner)
    FROM pg_class c WHERE c.relnamespace = $1 AND c.relkind IN ('r', 'v')
    UNION ALL
    SELECT 'pg_class', c.oid, a.attnum, 'TABLE ' || c.oid::regclass, ' (' || quote_ident(a.attname) || ')', c.relowner,
           a.attacl, NULL::aclitem[]
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    WHERE c.relnamespace = $1 AND a.attacl IS NOT NULL AND NOT a.attisdropped
    UNION ALL
    SELECT 'pg_proc', p.oid, 0, CASE p.prokind WHEN 'p' THEN 'PROCEDURE ' ELSE 'FUNCTION ' END || p.oid::regprocedure,
           '', p.proowner, coalesce(p.proacl, acldefault('f', p.proowner)), acldefault('f', p.proowner)
    FROM pg_proc p WHERE p.pronamespace = $1
)
SELECT o.catalog, o.oid, o.sub,
       format('%s %s%s ON %s %s %s%s;', g.action, g.privileges, o.col, o.target,
              CASE g.action WHEN 'GRANT' THEN 'TO' ELSE 'FROM' END,
              CASE g.grantee WHEN 0 THEN 'PUBLIC'
                             WHEN o.owner THEN 'CURRENT_USER'
                             ELSE quote_ident(pg_get_userbyid(g.grantee)) END,
              CASE WHEN g.grantable THEN ' WITH GRANT OPTION' ELSE '' END)
FROM objects o, LATERAL (
    SELECT x.action, x.grantee, x.grantable, string_agg(x.privilege_type, ', ' ORDER BY x.privilege_type) AS privileges
    FROM (
        SELECT 'GRANT' AS action, e.grantee, e.privilege_type, e.is_grantable AS grantable
        FROM aclexplode(o.acl) e
        WHERE NOT EXISTS (SELECT FROM aclexplode(o.def) f
                          WHERE (f.grantee, f.privilege_type, f.is_grantable) = (e.grantee, e.privilege_type, e.is_grantable))
        UNION
        SELECT 'REVOKE', f.grantee, f.privilege_type, false
        FROM aclexplode(o.def) f
        WHERE NOT EXISTS (SELECT FROM aclexplode(o.acl) e
                          WHERE (e.grantee, e.privilege_type) = (f.grantee, f.privilege_type))
    ) x
    GROUP BY x.action, x.grantee, x.grantable
) g
ORDER BY o.catalog, o.oid, o.sub, g.action DESC,
         CASE g.grantee WHEN 0 THEN '' ELSE pg_get_userbyid(g.grantee) END COLLATE "C", g.grantable`, d.ns)
	if err != nil {
		return nil, err
	}
	out := map[objectKey][]string{}
	var k objectKey
	var stmt string
	_, err = pgx.ForEachRow(rows, []any{&k.catalog, &k.oid, &k.sub, &stmt}, func() error {
		out[k] = append(out[k], stmt)
		return nil
	})
	return out, err
}

// relation is a table or a view, with its columns.
type relation struct {
	oid        uint32
	name       string // schema-qualified, quoted as needed
	persistent bool   // false: UNLOGGED
	options    string // reloptions, "a=b, c=d"
	replident  string
	viewdef    string
	columns    []column
}

type column struct {
	num         int32
	name        string
	typ         string
	collation   string
	compression string
	generated   bool
	def         string
	notNull     bool
	storage     string
	statistics  int32
	options     string
}

// relations reads the tables (kind r, the version table aside) or views
// (kind v) of the schema, in name order, with their columns.
func (d *dumper) relations(kind string) ([]relation, error) {
	rows, err := d.tx.Query(d.ctx, `
SELECT c.oid, c.oid::regclass::text, c.relpersistence = 'p', coalesce(array_to_string(c.reloptions, ', '), ''),
       c.relreplident::text, CASE c.relkind WHEN 'v' THEN pg_get_viewdef(c.oid) ELSE '' END
FROM pg_class c
WHERE c.relnamespace = $1 AND c.relkind = $2 AND NOT (c.relkind = 'r' AND c.relname = $3)
-- Views in the order they were made: a view reads only views made before
-- it (one it reads cannot be dropped and made again without it), so each
-- is written after them. Other relations by name.
ORDER BY CASE WHEN c.relkind = 'v' THEN c.oid::bigint END, c.relname COLLATE "C"`, d.ns, kind, schema.VersionTable)
	if err != nil {
		return nil, err
	}
	var rels []relation
	var r relation
	if _, err := pgx.ForEachRow(rows, []any{&r.oid, &r.name, &r.persistent, &r.options, &r.replident, &r.viewdef}, func() error {
		rels = append(rels, r)
		return nil
	}); err != nil {
		return nil, err
	}
	for i := range rels {
		rows, err := d.tx.Query(d.ctx, `
SELECT a.attnum, quote_ident(a.attname), format_type(a.atttypid, a.atttypmod),
       CASE WHEN a.attcollation <> t.typcollation
            THEN (SELECT quote_ident(n.nspname) || '.' || quote_ident(co.collname)
                  FROM pg_collation co JOIN pg_namespace n ON n.oid = co.collnamespace WHERE co.oid = a.attcollation)
            ELSE '' END,
       CASE a.attcompression WHEN 'p' THEN 'pglz' WHEN 'l' THEN 'lz4' ELSE '' END,
       a.attgenerated <> '', coalesce(pg_get_expr(ad.adbin, ad.adrelid), ''), a.attnotnull,
       CASE WHEN a.attstorage <> t.typstorage
            THEN CASE a.attstorage WHEN 'p' THEN 'PLAIN' WHEN 'e' THEN 'EXTERNAL' WHEN 'm' THEN 'MAIN' ELSE 'EXTENDED' END
            ELSE '' END,
       coalesce(a.attstattarget, -1)::int4, coalesce(array_to_string(a.attoptions, ', '), '')
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, rels[i].oid)
		if err != nil {
			return nil, err
		}
		var c column
		if _, err := pgx.ForEachRow(rows, []any{&c.num, &c.name, &c.typ, &c.collation, &c.compression, &c.generated,
			&c.def, &c.notNull, &c.storage, &c.statistics, &c.options}, func() error {
			rels[i].columns = append(rels[i].columns, c)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return rels, nil
}

// tables writes each table: CREATE TABLE with its columns and constraints
// (a foreign key to a table written later, and a constraint not yet
// validated, as ALTER TABLE after it), what CREATE TABLE cannot say, its
// indexes, then the comments and privileges of all of them.
func (d *dumper) tables() error {
	tables, err := d.relations("r")
	if err != nil {
		return err
	}
	written := map[uint32]bool{}
	var later []string // foreign keys to tables written after theirs
	for _, t := range tables {
		written[t.oid] = true
		d.out.WriteString("\n")
		if t.persistent {
			d.out.WriteString("CREATE TABLE " + t.name + " (\n")
		} else {
			d.out.WriteString("CREATE UNLOGGED TABLE " + t.name + " (\n")
		}
		var lines, after []string
		var extras []objectKey
		for _, c := range t.columns {
			line := "    " + c.name + " " + c.typ
			if c.compression != "" {
				line += " COMPRESSION " + c.compression
			}
			if c.collation != "" {
				line += " COLLATE " + c.collation
			}
			switch {
			case c.generated:
				line += " GENERATED ALWAYS AS (" + c.def + ") STORED"
			case strings.Contains(c.def, schema.Name+"."):
				// It calls a function of the schema, written later.
				d.security = append(d.security, "ALTER TABLE ONLY "+t.name+" ALTER COLUMN "+c.name+" SET DEFAULT "+c.def+";")
			case c.def != "":
				line += " DEFAULT " + c.def
			}
			if c.notNull {
				line += " NOT NULL"
			}
			lines = append(lines, line)
			alter := "ALTER TABLE ONLY " + t.name + " ALTER COLUMN " + c.name
			if c.storage != "" {
				after = append(after, alter+" SET STORAGE "+c.storage+";")
			}
			if c.statistics >= 0 {
				after = append(after, fmt.Sprintf("%s SET STATISTICS %d;", alter, c.statistics))
			}
			if c.options != "" {
				after = append(after, alter+" SET ("+c.options+");")
			}
		}

		rows, err := d.tx.Query(d.ctx, `
SELECT co.oid, quote_ident(co.conname), pg_get_constraintdef(co.oid), co.contype = 'f', co.confrelid, co.convalidated
FROM pg_constraint co
-- Not-null constraints (Postgres 18) are the columns' NOT NULL; a
-- constraint trigger is written as a trigger.
WHERE co.conrelid = $1 AND co.contype NOT IN ('n', 't')
ORDER BY array_position(ARRAY['p', 'u', 'x', 'c', 'f']::"char"[], co.contype), co.conname COLLATE "C"`, t.oid)
		if err != nil {
			return err
		}
		var oid, references uint32
		var name, def string
		var foreign, valid bool
		if _, err := pgx.ForEachRow(rows, []any{&oid, &name, &def, &foreign, &references, &valid}, func() error {
			extras = append(extras, objectKey{"pg_constraint", oid, 0})
			switch {
			case foreign && !written[references]:
				later = append(later, "ALTER TABLE ONLY "+t.name+" ADD CONSTRAINT "+name+" "+def+";")
			case !valid:
				after = append(after, "ALTER TABLE ONLY "+t.name+" ADD CONSTRAINT "+name+" "+def+";")
			case strings.HasPrefix(def, "CHECK") && strings.Contains(def, schema.Name+"."):
				// It calls a function of the schema, written later.
				d.security = append(d.security, "ALTER TABLE ONLY "+t.name+" ADD CONSTRAINT "+name+" "+def+";")
			default:
				lines = append(lines, "    CONSTRAINT "+name+" "+def)
			}
			return nil
		}); err != nil {
			return err
		}
		d.out.WriteString(strings.Join(lines, ",\n") + "\n)")
		if t.options != "" {
			d.out.WriteString(" WITH (" + t.options + ")")
		}
		d.out.WriteString(";\n")
		for _, a := range after {
			d.out.WriteString(a + "\n")
		}

		// Indexes, but not those a constraint made.
		rows, err = d.tx.Query(d.ctx, `
SELECT i.indexrelid, quote_ident(ic.relname), pg_get_indexdef(i.indexrelid),
       EXISTS (SELECT FROM pg_constraint co WHERE co.conindid = i.indexrelid AND co.conrelid = i.indrelid
                                              AND co.contype IN ('p', 'u', 'x')),
       i.indisclustered, i.indisreplident
FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
WHERE i.indrelid = $1
ORDER BY ic.relname COLLATE "C"`, t.oid)
		if err != nil {
			return err
		}
		var fromConstraint, clustered, replident bool
		var tail []string
		if _, err := pgx.ForEachRow(rows, []any{&oid, &name, &def, &fromConstraint, &clustered, &replident}, func() error {
			if !fromConstraint {
				d.out.WriteString(def + ";\n")
			}
			extras = append(extras, objectKey{"pg_class", oid, 0})
			if clustered {
				tail = append(tail, "ALTER TABLE "+t.name+" CLUSTER ON "+name+";")
			}
			if replident && t.replident == "i" {
				tail = append(tail, "ALTER TABLE ONLY "+t.name+" REPLICA IDENTITY USING INDEX "+name+";")
			}
			return nil
		}); err != nil {
			return err
		}
		switch t.replident {
		case "n":
			tail = append(tail, "ALTER TABLE ONLY "+t.name+" REPLICA IDENTITY NOTHING;")
		case "f":
			tail = append(tail, "ALTER TABLE ONLY "+t.name+" REPLICA IDENTITY FULL;")
		}
		for _, s := range tail {
			d.out.WriteString(s + "\n")
		}
		if err := d.readTriggers(t); err != nil {
			return err
		}
		if err := d.readSecurity(t); err != nil {
			return err
		}

		d.writeExtras(objectKey{"pg_class", t.oid, 0})
		for _, c := range t.columns {
			d.writeExtras(objectKey{"pg_class", t.oid, c.num})
		}
		for _, k := range extras {
			d.writeExtras(k)
		}
	}
	if len(later) > 0 {
		d.out.WriteString("\n" + strings.Join(later, "\n") + "\n")
	}
	return nil
}

// readSecurity reads a table's row-level security and its policies (with
// their comments) into d.security.
func (d *dumper) readSecurity(t relation) error {
	var enabled, forced bool
	if err := d.tx.QueryRow(d.ctx, `SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = $1`, t.oid).Scan(&enabled, &forced); err != nil {
		return err
	}
	if enabled {
		d.security = append(d.security, "ALTER TABLE "+t.name+" ENABLE ROW LEVEL SECURITY;")
	}
	if forced {
		d.security = append(d.security, "ALTER TABLE "+t.name+" FORCE ROW LEVEL SECURITY;")
	}
	rows, err := d.tx.Query(d.ctx, `
SELECT p.oid, format('CREATE POLICY %I ON %s%s%s%s;', p.polname, p.polrelid::regclass,
       CASE p.polcmd WHEN '*' THEN '' WHEN 'r' THEN ' FOR SELECT' WHEN 'a' THEN ' FOR INSERT'
                     WHEN 'w' THEN ' FOR UPDATE' ELSE ' FOR DELETE' END,
       coalesce(' USING (' || pg_get_expr(p.polqual, p.polrelid) || ')', ''),
       coalesce(' WITH CHECK (' || pg_get_expr(p.polwithcheck, p.polrelid) || ')', ''))
FROM pg_policy p WHERE p.polrelid = $1 ORDER BY p.polname COLLATE "C"`, t.oid)
	if err != nil {
		return err
	}
	var oid uint32
	var def string
	_, err = pgx.ForEachRow(rows, []any{&oid, &def}, func() error {
		d.security = append(d.security, def)
		k := objectKey{"pg_policy", oid, 0}
		if c, ok := d.comments[k]; ok {
			d.security = append(d.security, c)
			delete(d.comments, k)
		}
		return nil
	})
	return err
}

// writeSecurity writes what readSecurity and tables held for after the
// functions.
func (d *dumper) writeSecurity() {
	if len(d.security) > 0 {
		d.out.WriteString("\n-- Row-level security, and defaults that call the functions\n\n")
	}
	for _, s := range d.security {
		d.out.WriteString(s + "\n")
	}
}

// triggers reads a table's or view's triggers into d.triggers.
func (d *dumper) readTriggers(r relation) error {
	rows, err := d.tx.Query(d.ctx, `
SELECT t.oid, quote_ident(t.tgname), pg_get_triggerdef(t.oid), t.tgenabled::text
FROM pg_trigger t
WHERE t.tgrelid = $1 AND NOT t.tgisinternal
ORDER BY t.tgname COLLATE "C"`, r.oid)
	if err != nil {
		return err
	}
	var oid uint32
	var name, def, enabled string
	_, err = pgx.ForEachRow(rows, []any{&oid, &name, &def, &enabled}, func() error {
		text := def + ";"
		switch enabled {
		case "D":
			text += "\nALTER TABLE " + r.name + " DISABLE TRIGGER " + name + ";"
		case "R":
			text += "\nALTER TABLE " + r.name + " ENABLE REPLICA TRIGGER " + name + ";"
		case "A":
			text += "\nALTER TABLE " + r.name + " ENABLE ALWAYS TRIGGER " + name + ";"
		}
		d.triggers = append(d.triggers, trigger{objectKey{"pg_trigger", oid, 0}, text})
		return nil
	})
	return err
}

// writeTriggers writes the triggers, last: they call functions.
func (d *dumper) writeTriggers() {
	if len(d.triggers) > 0 {
		d.out.WriteString("\n-- Triggers\n")
	}
	for _, t := range d.triggers {
		d.out.WriteString("\n" + t.text + "\n")
		d.writeExtras(t.key)
	}
}

// views writes each view, its comments and privileges.
func (d *dumper) views() error {
	views, err := d.relations("v")
	if err != nil {
		return err
	}
	if len(views) > 0 {
		d.out.WriteString("\n-- Views\n")
	}
	for _, v := range views {
		d.out.WriteString("\nCREATE VIEW " + v.name)
		if v.options != "" {
			d.out.WriteString(" WITH (" + v.options + ")")
		}
		d.out.WriteString(" AS\n" + v.viewdef + "\n")
		if err := d.readTriggers(v); err != nil {
			return err
		}
		d.writeExtras(objectKey{"pg_class", v.oid, 0})
		for _, c := range v.columns {
			d.writeExtras(objectKey{"pg_class", v.oid, c.num})
		}
	}
	return nil
}

// functions writes each function and procedure, whole, in the order of
// their names and then their arguments, with its comment and privileges.
func (d *dumper) functions(ofViews bool) error {
	rows, err := d.tx.Query(d.ctx, `
SELECT p.oid, pg_get_functiondef(p.oid)
FROM pg_proc p
WHERE p.pronamespace = $1 AND p.prokind IN ('f', 'p') AND `+returnsViewRows+` = $2
ORDER BY p.proname COLLATE "C", pg_get_function_identity_arguments(p.oid) COLLATE "C"`, d.ns, ofViews)
	if err != nil {
		return err
	}
	if ofViews {
		d.out.WriteString("\n-- Functions that return a view's rows\n")
	} else {
		d.out.WriteString("\n-- Functions and procedures\n")
	}
	var oid uint32
	var def string
	_, err = pgx.ForEachRow(rows, []any{&oid, &def}, func() error {
		d.out.WriteString("\n" + strings.TrimRight(def, "\n") + ";\n")
		d.writeExtras(objectKey{"pg_proc", oid, 0})
		return nil
	})
	return err
}

// aggregates writes each aggregate after the functions, since its state
// and final functions must exist when it is created, with its comment and
// privileges (refuseUnknownKinds refused any with options not written here).
func (d *dumper) aggregates() error {
	rows, err := d.tx.Query(d.ctx, `
SELECT p.oid,
       format(E'CREATE AGGREGATE %s.%s(%s) (\n    SFUNC = %s,\n    STYPE = %s%s%s\n);',
              quote_ident(n.nspname), quote_ident(p.proname), pg_get_function_identity_arguments(p.oid),
              a.aggtransfn::regproc, format_type(a.aggtranstype, NULL),
              CASE WHEN a.aggfinalfn <> 0 THEN E',\n    FINALFUNC = ' || a.aggfinalfn::regproc ELSE '' END,
              CASE WHEN a.agginitval IS NOT NULL THEN E',\n    INITCOND = ' || quote_literal(a.agginitval) ELSE '' END)
FROM pg_aggregate a
JOIN pg_proc p ON p.oid = a.aggfnoid
JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.pronamespace = $1
ORDER BY p.proname COLLATE "C", pg_get_function_identity_arguments(p.oid) COLLATE "C"`, d.ns)
	if err != nil {
		return err
	}
	var oid uint32
	var def string
	first := true
	_, err = pgx.ForEachRow(rows, []any{&oid, &def}, func() error {
		if first {
			d.out.WriteString("\n-- Aggregates\n")
			first = false
		}
		d.out.WriteString("\n" + def + "\n")
		d.writeExtras(objectKey{"pg_proc", oid, 0})
		return nil
	})
	return err
}

// schemaDiff shows how two dumps differ, line by line: "-" for a line only
// in want, "+" for one only in got, with two lines of context around each
// change.
func schemaDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// The common head and tail need no table.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	// lcs[i][j]: the longest common subsequence of ma[i:] and mb[j:].
	lcs := make([][]int32, len(ma)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(mb)+1)
	}
	for i := len(ma) - 1; i >= 0; i-- {
		for j := len(mb) - 1; j >= 0; j-- {
			if ma[i] == mb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	for _, l := range a[max(0, pre-2):pre] {
		lines = append(lines, line{' ', l})
	}
	i, j := 0, 0
	for i < len(ma) || j < len(mb) {
		switch {
		case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
			lines = append(lines, line{' ', ma[i]})
			i++
			j++
		case i < len(ma) && (j == len(mb) || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', ma[i]})
			i++
		default:
			lines = append(lines, line{'+', mb[j]})
			j++
		}
	}
	for _, l := range a[len(a)-suf : min(len(a), len(a)-suf+2)] {
		lines = append(lines, line{' ', l})
	}
	// Context: two lines around each change; "..." where lines are left out.
	var out []string
	for k, l := range lines {
		near := false
		for m := max(0, k-2); m <= min(len(lines)-1, k+2); m++ {
			near = near || lines[m].op != ' '
		}
		switch {
		case near:
			out = append(out, string(l.op)+" "+l.text)
		case len(out) == 0 || out[len(out)-1] != "...":
			out = append(out, "...")
		}
	}
	return strings.Join(out, "\n")
}
