-- The roles a DBA gives pgcheckpoint, with least privilege:
--
--   owner     owns the pgcheckpoint schema and everything in it; runs the
--             migrations (cmd/migrate, schema.Migrate). Nothing else but
--             CREATE on the database (see below).
--   app       the application: SELECT, INSERT, UPDATE, DELETE on the tables
--             and EXECUTE on the functions, for the whole engine API. No
--             DDL, no TEMP needed, no writes to the migration version table.
--   readonly  inspection (ckpt threads, log, show, diff, tree, export; psql):
--             SELECT on the tables and EXECUTE on the functions that only
--             read. Every write is refused (SQLSTATE 42501).
--   operator  sees the rows of every tenant, and only reads: SELECT on the
--             tables, with BYPASSRLS (support, audits, pg_dump). It is the
--             one role here that row-level security does not hold, so keep
--             it to people. The SQL functions and the tenant_* views
--             show the session's tenant alone, whatever
--             the role, the operator's and a superuser's too: the
--             operator sees every tenant in the tables themselves (and
--             the view checkpoint_info), nothing through a function with
--             no tenant set.
--
-- Two walls keep tenants apart. Every SQL function and every statement
-- of the engine reads and writes through views of the session's tenant
-- (tenant_checkpoints, ...), which hold every role. Row-level security
-- holds whoever reads the tables themselves: the owner, the
-- application and read-only roles run without BYPASSRLS (and not as
-- superusers, whom it never holds); the script takes BYPASSRLS away
-- from them if they have it, stops if the application or read-only role
-- is a superuser, and gives the operator BYPASSRLS. Each of their
-- sessions sees only the rows of the tenant it sets (SET LOCAL
-- pgcheckpoint.tenant = 'acme'; none with no tenant).
--
-- Run it with psql as a superuser (or a role with CREATEROLE and CREATE on
-- the database), connected to the application's database, once before the
-- first migration and once after it; again at any time, it changes nothing
-- that is right already:
--
--   psql -v owner=ckpt_owner -v app=ckpt_app -v readonly=ckpt_readonly \
--        -v operator=ckpt_operator -f schema/roles/roles.sql "$DATABASE_URL"
--
-- The names default to pgcheckpoint_owner, pgcheckpoint_app,
-- pgcheckpoint_readonly and pgcheckpoint_operator; giving BYPASSRLS (the
-- operator's) or taking it away takes a superuser. Missing roles are
-- created with LOGIN and no password: set one (\password NAME), or grant
-- the role to your own login roles. An existing schema and its objects
-- are handed to the owner.
--
-- Later migrations need no new run: the default privileges below grant the
-- new tables and functions the owner creates. Which functions read-only
-- roles may call is the migrations' affair: every function that can write
-- is VOLATILE and not executable by PUBLIC (see the REVOKE statements of
-- schema/current.sql), the others are.
--
-- This file is not a migration (golang-migrate and schema.FS read only the
-- NNNNNN_name.up.sql and .down.sql files of the folder above).

\set ON_ERROR_STOP on
\if :{?owner}
\else
    \set owner pgcheckpoint_owner
\endif
\if :{?app}
\else
    \set app pgcheckpoint_app
\endif
\if :{?readonly}
\else
    \set readonly pgcheckpoint_readonly
\endif
\if :{?operator}
\else
    \set operator pgcheckpoint_operator
\endif

BEGIN;

SELECT format('CREATE ROLE %I LOGIN', r)
FROM unnest(ARRAY[:'owner', :'app', :'readonly', :'operator']) r
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r)
\gexec

-- Row-level security holds every role but the operator: the script
-- stops on an application or read-only role that is a superuser.
SELECT format('DO $$BEGIN RAISE EXCEPTION %L; END$$',
              format('role %s is a superuser, whom row-level security does not hold: use another role', r.rolname))
FROM pg_roles r
WHERE r.rolname IN (:'app', :'readonly') AND r.rolsuper
\gexec
SELECT format('ALTER ROLE %I NOBYPASSRLS', r.rolname)
FROM pg_roles r
WHERE r.rolname IN (:'owner', :'app', :'readonly') AND r.rolbypassrls AND NOT r.rolsuper
\gexec
SELECT format('ALTER ROLE %I BYPASSRLS', r.rolname)
FROM pg_roles r
WHERE r.rolname = :'operator' AND NOT r.rolbypassrls
\gexec

SELECT format('GRANT CONNECT ON DATABASE %I TO %I, %I, %I, %I', current_database(), :'owner', :'app', :'readonly', :'operator')
\gexec
-- The first migration runs CREATE SCHEMA IF NOT EXISTS, which Postgres
-- refuses without CREATE on the database even when the schema exists. Once
-- it has run, REVOKE CREATE ON DATABASE ... FROM the owner if you like.
SELECT format('GRANT CREATE ON DATABASE %I TO %I', current_database(), :'owner')
\gexec

-- The schema, created for the owner so that it needs no CREATE on the
-- database; or, when an earlier install made it, handed over with all it
-- holds (sequences and indexes follow their tables).
SELECT format('CREATE SCHEMA pgcheckpoint AUTHORIZATION %I', :'owner')
WHERE to_regnamespace('pgcheckpoint') IS NULL
\gexec
SELECT format('ALTER SCHEMA pgcheckpoint OWNER TO %I', :'owner')
\gexec
SELECT format('ALTER TABLE %s OWNER TO %I', c.oid::regclass, :'owner')
FROM pg_class c
WHERE c.relnamespace = 'pgcheckpoint'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
\gexec
SELECT format('ALTER ROUTINE %s OWNER TO %I', p.oid::regprocedure, :'owner')
FROM pg_proc p
WHERE p.pronamespace = 'pgcheckpoint'::regnamespace
\gexec

-- What exists now.
SELECT format('GRANT USAGE ON SCHEMA pgcheckpoint TO %I, %I, %I', :'app', :'readonly', :'operator')
\gexec
SELECT format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgcheckpoint TO %I', :'app')
\gexec
SELECT format('GRANT USAGE ON ALL SEQUENCES IN SCHEMA pgcheckpoint TO %I', :'app')
\gexec
SELECT format('GRANT EXECUTE ON ALL ROUTINES IN SCHEMA pgcheckpoint TO %I', :'app')
\gexec
SELECT format('GRANT SELECT ON ALL TABLES IN SCHEMA pgcheckpoint TO %I, %I', :'readonly', :'operator')
\gexec

-- What the owner's migrations create later.
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA pgcheckpoint GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', :'owner', :'app')
\gexec
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA pgcheckpoint GRANT USAGE ON SEQUENCES TO %I', :'owner', :'app')
\gexec
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA pgcheckpoint GRANT EXECUTE ON ROUTINES TO %I', :'owner', :'app')
\gexec
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA pgcheckpoint GRANT SELECT ON TABLES TO %I, %I', :'owner', :'readonly', :'operator')
\gexec

-- The migration version table is the owner's to write: the others read it
-- (schema.Check, migrate version). It exists after the first migration,
-- which is why the script runs again then.
SELECT format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON pgcheckpoint.schema_migrations FROM %I, %I, %I', :'app', :'readonly', :'operator')
WHERE to_regclass('pgcheckpoint.schema_migrations') IS NOT NULL
\gexec

COMMIT;
