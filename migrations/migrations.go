// Package migrations holds pgcheckpoint's Postgres migrations:
// NNNNNN_name.up.sql and NNNNNN_name.down.sql in golang-migrate's format,
// plain SQL usable by any migration tool, embedded in FS. The first is the
// baseline, NNNNNN_baseline: the whole schema at its version, generated
// from a migrated database's catalog (before 0.1.0 the migrations were
// folded into it: docs/contributing.md). From 0.1.0 on they are
// append-only: a migration, once released, is never edited; a later one
// changes what it made.
//
// To read the schema as it is now, read schema/current.sql, generated from
// a database migrated to the latest version (after adding a migration:
// go test ./integration -run '^TestCurrentSchema$' -update). To apply the
// migrations, use package schema (or golang-migrate with -path
// migrations).
package migrations

import "embed"

// FS holds the migrations, NNNNNN_name.up.sql and NNNNNN_name.down.sql.
//
//go:embed *.sql
var FS embed.FS
