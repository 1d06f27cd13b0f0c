package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/schema"
)

// CheckSchema reports whether the database the pool reaches holds the
// pgcheckpoint schema at the version this program was built for
// (schema.Latest), changing nothing: the check pgcheckpoint.Open makes, for
// applications that build a Store over a pool of their own. Errors, each
// also wrapping the schema package's: engine.ErrNotMigrated for no schema
// or an older one (schema.ErrPending: run `migrate up`, schema.Migrate, or
// open with pgcheckpoint.Options.Migrate); engine.ErrNewerSchema for a
// schema a newer pgcheckpoint migrated (schema.ErrUnknownVersion: upgrade
// the program); engine.ErrDirtySchema (schema.ErrDirty); and the
// database's own errors, mapped as the Store's are.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	err := schema.NewMigratorFromPool(pool).Check(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, schema.ErrPending):
		return fmt.Errorf("%w: %w, or open with Options.Migrate", engine.ErrNotMigrated, err)
	case errors.Is(err, schema.ErrUnknownVersion):
		return fmt.Errorf("%w: %w", engine.ErrNewerSchema, err)
	case errors.Is(err, schema.ErrDirty):
		return fmt.Errorf("%w: %w", engine.ErrDirtySchema, err)
	}
	return dbError("check the schema version", err)
}
