// Package schema applies pgcheckpoint's SQL migrations (package
// migrations: embedded, in golang-migrate's format), each operation in one
// transaction (see Migrator).
//
// The folder schema/ also holds current.sql: the schema as a database at
// the latest version has it (every table, view and function whole, with
// its comments and privileges), generated from such a database's catalog.
// Read it to learn what a table or function looks like today; sqlc reads
// it too. The migrations are its history. After adding a migration,
// regenerate it with
//
//	go test ./integration -run '^TestCurrentSchema$' -update
//
// (go test ./... fails while it is stale).
//
// Every object lives in the Postgres schema "pgcheckpoint", including the
// version table (pgcheckpoint.schema_migrations), so pgcheckpoint's
// migrations never collide with an application's own.
//
// An application that migrates on start:
//
//	if err := schema.Migrate(ctx, os.Getenv("DATABASE_URL")); err != nil {
//		log.Fatal(err)
//	}
//
// Or over its own pool (its AfterConnect, IAM or TLS settings apply), and
// a readiness check that changes nothing:
//
//	if err := schema.MigratePool(ctx, pool); err != nil {
//		log.Fatal(err)
//	}
//	err := schema.CheckPool(ctx, pool) // errors.Is(err, schema.ErrPending): migrations to apply
//
// Migrate is safe to call from many processes at once, directly or through
// PgBouncer in transaction mode: they queue on a transaction-level advisory
// lock and those that find the database current do nothing. Teams
// on another migration tool can copy the files in FS, or print one with SQL.
//
// The folder roles/ (not embedded, not a migration) holds roles.sql, the
// psql script a DBA runs to create an owner that migrates, an application
// role and a read-only role, each with the least it needs. Every function
// that can write is VOLATILE and not executable by PUBLIC: a migration that
// adds one revokes it.
package schema
