// Package postgres is the Postgres store of pgcheckpoint: the engine's API
// over the SQL functions of schema pgcheckpoint (package schema), through
// the typed queries of package db. It works over any pgx pool, connection
// or transaction, and behind PgBouncer in transaction mode (see DB).
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	if err != nil {
//		return err
//	}
//	eng := engine.New(postgres.NewStore(pool, postgres.Options{}), engine.Config{})
//	res, err := eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "run-42", Messages: msgs})
//
// The database must be migrated first (package schema, or cmd/migrate);
// pgcheckpoint.Open opens a store from a URL and can migrate it.
//
// The rules of the store (steps, heads, deltas, retention, the thread
// lock) live in SQL, so a psql session or a pg_cron job gets what the
// Engine gets; this package maps the Engine's calls onto those functions
// and the driver's errors onto the engine's sentinels (see Store).
package postgres
