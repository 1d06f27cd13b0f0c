// Package localpg runs a throwaway PostgreSQL server from the server
// binaries installed on this machine (initdb, pg_ctl, postgres), with no
// Docker and no network. The demo (cmd/ckpt) and the test harness
// (integration/pgtest) use it when no database is given.
//
// Start makes a new cluster in a temporary directory, trusts every local
// connection, listens on a free port of 127.0.0.1 (and on a unix socket in
// that directory), and turns durability off: it is for data nobody keeps.
// Stop stops the server and removes the directory, also after a start that
// failed halfway.
//
//	c, err := localpg.Start(ctx, localpg.Options{})
//	if errors.Is(err, localpg.ErrNotFound) {
//		// no PostgreSQL server installed: use something else
//	}
//	if err != nil {
//		return err
//	}
//	defer c.Stop(context.Background())
//	pool, err := pgxpool.New(ctx, c.URL())
//
// Find says where the binaries are: in the first directory on PATH that
// holds all three, else in `pg_config --bindir`, else in the usual places of
// Debian and Ubuntu (/usr/lib/postgresql/VERSION/bin, newest first), Red Hat
// (/usr/pgsql-VERSION/bin) and Homebrew. PGCHECKPOINT_LOCALPG_DIRS (EnvDirs)
// replaces that search with a list of directories of its own; set it empty
// to find nothing.
//
// initdb and postgres refuse to run as root. As root, Start runs them as the
// OS user "postgres" (Options.User), which must exist.
package localpg
