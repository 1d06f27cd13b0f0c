// Command ckpt inspects and repairs pgcheckpoint threads: list threads, show
// a thread's history as a table or a graph, show and diff checkpoints,
// rewind, branch, export and import. `ckpt demo` runs a scripted agent that
// shows all of it.
//
//	ckpt demo
//	ckpt --database postgres://... threads
//	ckpt log run-42 --graph
//	ckpt export run-42 > run-42.jsonl
//
// The database comes from --database or DATABASE_URL, the tenant from
// --tenant or PGCHECKPOINT_TENANT (default: the default tenant). Run with
// no arguments for the list of commands.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/cliflags"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
	"github.com/pgcheckpoint/pgcheckpoint/internal/version"
	"golang.org/x/term"
)

// command is one subcommand. Adding one is adding an entry to commands.
type command struct {
	args  string // the arguments and flags, for the usage text
	help  string
	nargs [2]int // least and most positional arguments
	flags func(fs *flag.FlagSet, c *cli)
	noDB  bool   // runs without a database (demo finds its own)
	more  string // more help, for ckpt COMMAND --help
	run   func(ctx context.Context, c *cli, args []string) error
}

var commands = map[string]*command{
	"threads": {args: "[--limit N]", help: "list threads with their heads", run: runThreads,
		flags: func(fs *flag.FlagSet, c *cli) { fs.IntVar(&c.limit, "limit", 0, "show at most N (0: all)") }},
	"log": {args: "THREAD [--graph] [--limit N] [--namespace NS]", nargs: [2]int{1, 1}, help: "a thread's checkpoints, newest first; --graph: as a tree", run: runLog,
		more: graphHelp,
		flags: func(fs *flag.FlagSet, c *cli) {
			fs.BoolVar(&c.graph, "graph", false, "draw the tree (every namespace)")
			fs.IntVar(&c.limit, "limit", 0, "show at most N (0: all)")
			fs.StringVar(&c.namespace, "namespace", "", "list this sub-graph namespace (default: the root)")
		}},
	"show":   {args: "ID", nargs: [2]int{1, 1}, help: "a checkpoint, content and pending writes, as JSON", run: runShow},
	"diff":   {args: "A B", nargs: [2]int{2, 2}, help: "what changed from checkpoint A to B", run: runDiff},
	"rewind": {args: "ID", nargs: [2]int{1, 1}, help: "make a checkpoint its thread's head (deletes nothing)", run: runRewind},
	"branch": {args: "ID NAME", nargs: [2]int{2, 2}, help: "fork a new thread from a checkpoint", run: runBranch},
	"export": {args: "THREAD [--branches]", nargs: [2]int{1, 1}, help: "write a thread to stdout as JSON lines; --branches: its branches too", run: runExport,
		flags: func(fs *flag.FlagSet, c *cli) {
			fs.BoolVar(&c.branches, "branches", false, "include the threads forked from THREAD, recursively (merge edges survive an import)")
		}},
	"delete": {args: "THREAD [--dry-run] [--yes]", nargs: [2]int{1, 1}, help: "delete a thread: every checkpoint, namespace and pending write", run: runDelete,
		more: confirmHelp, flags: destructiveFlags},
	"import": {args: "[FILE]", nargs: [2]int{0, 1}, help: "read an export (FILE or stdin); all or nothing", run: runImport},
	"tree": {args: "THREAD [--format dot|mermaid]", nargs: [2]int{1, 1}, help: "a thread and its branches for Graphviz or Mermaid", run: runTree,
		flags: func(fs *flag.FlagSet, c *cli) { fs.StringVar(&c.format, "format", "dot", "dot or mermaid") }},
	"demo": {args: "[--container]", help: "a scripted agent: crash, resume, rewind, branch, merge", noDB: true, run: runDemo,
		flags: func(fs *flag.FlagSet, c *cli) {
			fs.BoolVar(&c.container, "container", false, "with no database given, start a Postgres container (Docker)")
		}},
	"web": {args: "[--listen ADDR] [--allow-writes]", help: "browse threads, trees, checkpoints and diffs in a browser (local)", run: runWeb,
		more: webHelp,
		flags: func(fs *flag.FlagSet, c *cli) {
			fs.StringVar(&c.listen, "listen", "", "address to serve on (default 127.0.0.1 on a free port); beyond loopback it warns")
			fs.BoolVar(&c.allowWrites, "allow-writes", false, "allow rewind, branch, merge, delete and prune, each after a confirmation page")
		}},
	"rewrap": {args: "--keys FILE", help: "wrap one tenant's data keys again under the key file's first (current) key", run: runRewrap,
		more: rewrapHelp},
	"gc": {args: "--policy P [--thread T] [--batch N] [--budget D] [--after T] [--dry-run] [--yes]", help: "apply a retention policy to one thread, or sweep all (with expiry)", run: runGC,
		more: policyHelp + "\n\n" + confirmHelp,
		flags: func(fs *flag.FlagSet, c *cli) {
			destructiveFlags(fs, c)
			fs.StringVar(&c.policy, "policy", "", "keep_last_n:N, keep_age:DURATION, keep_milestones:N or keep_all; with --thread also keep_latest or keep_none")
			fs.StringVar(&c.thread, "thread", "", "only this thread (default: sweep every thread)")
			fs.IntVar(&c.batch, "batch", 0, "threads per transaction in a sweep (default 5)")
			fs.DurationVar(&c.budget, "budget", 0, "stop a sweep after this long (default: no limit)")
			fs.StringVar(&c.after, "after", "", "start a sweep after this thread id (to go on after --budget)")
		}},
}

// usageOrder is the order of the commands in the usage text.
var usageOrder = []string{"demo", "threads", "log", "show", "diff", "rewind", "branch", "gc", "delete", "export", "import", "tree", "web", "rewrap"}

func usage() string {
	var b strings.Builder
	b.WriteString("usage: ckpt [--database URL] [--tenant NAME] [--json] COMMAND [ARGS]\n       ckpt --version\n\nCommands:\n")
	for _, name := range usageOrder {
		cmd := commands[name]
		left := name
		if cmd.args != "" {
			left += " " + cmd.args
		}
		if len(left) > 28 {
			fmt.Fprintf(&b, "  %s\n  %-28s %s\n", left, "", cmd.help)
		} else {
			fmt.Fprintf(&b, "  %-28s %s\n", left, cmd.help)
		}
	}
	b.WriteString(`
Flags, before or after the command:
  --database URL   postgres://..., postgresql://..., host=... dbname=...
                   (keyword/value), sqlite:FILE or sqlite::memory: (default:
                   $DATABASE_URL). demo without one uses a throwaway Postgres
                   from local server binaries, else a temporary SQLite file.
  --tenant NAME    read and write this tenant's threads alone, every command
                   and ckpt web included (default: $PGCHECKPOINT_TENANT, else
                   the default tenant, which holds whatever was written
                   without one)
  --json           output JSON for scripts instead of tables
  --version        print ckpt's version, revision and schema versions
                   (before the command)
  --keys FILE      the key-encryption keys of encrypted threads, one
                   id=base64 per line, the current one first (default: the
                   keys themselves in $PGCHECKPOINT_KEYS); without them an
                   encrypted thread's content is not shown
  --held-keys DIR  where the data keys are held when the database keeps
                   only references to them (engine.HeldKeys; default:
                   $PGCHECKPOINT_HELD_KEYS); --keys gives the keys that
                   wrap them

IDs are checkpoint ids as ckpt log prints them. Exit status: 0 success,
1 failure (not found, database error), 2 bad usage.
`)
	return b.String()
}

// cli is what a command needs: where to write, the flags, the engine.
type cli struct {
	// stdout and stderr are for people: agent text on them is escaped
	// (see termsafe.Writer). raw is stdout as it is, for JSON (escaped by
	// termsafe.JSON) and export; rawErr stderr as it is, for ckpt's own
	// progress line.
	stdout, stderr io.Writer
	raw            io.Writer
	rawErr         io.Writer
	tty            terminals
	stdin          io.Reader // where confirm reads an answer (when tty.stdin)
	dbURL          string
	tenant         string // --tenant; "" the default tenant
	json           bool
	graph          bool
	limit          int
	format         string
	policy         string
	thread         string
	namespace      string
	batch          int
	budget         time.Duration
	after          string
	container      bool
	branches       bool
	listen         string // web: the address to serve on
	allowWrites    bool   // web: writes allowed
	dryRun         bool   // delete, gc: say what would go, delete nothing
	yes            bool   // delete, gc: no question asked
	keyFile        string // --keys
	heldKeys       string // --held-keys

	eng *engine.Engine
	// base is the Engine opened (eng is it bound to the tenant): the one
	// to close.
	base *engine.Engine
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop) // a second signal gets the default action
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, terminals{stdin: isTerminal(os.Stdin), stdout: isTerminal(os.Stdout), stderr: isTerminal(os.Stderr)})
	var ue usageError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "ckpt: %s\n\n%s", termsafe.Text(err.Error()), usage())
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "ckpt: %s%s\n", termsafe.Text(err.Error()), hint(err))
		os.Exit(1)
	}
}

// terminals says which of stdin, stdout and stderr are terminals: a
// destructive command asks for a confirmation when stdin is one (see
// confirm), progress lines go to stderr when it is one, and an export to
// stdout is escaped when it is one.
type terminals struct{ stdin, stdout, stderr bool }

// isTerminal reports whether f is a terminal (not merely a character
// device: /dev/null is none).
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// encryptedHint is what to do about engine.ErrEncrypted, in ckpt's
// words and ckpt web's (the engine's own text speaks to a Go program).
const encryptedHint = "the content is encrypted: pass the key-encryption keys with --keys FILE or $" + keysEnv +
	", and --held-keys DIR where the data keys are held; with them, it was erased or altered"

// hint adds advice to errors whose fix is not in their text.
func hint(err error) string {
	if errors.Is(err, engine.ErrNotMigrated) {
		return "\n(is the database migrated? run: go run ./cmd/migrate -database URL up)"
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "3F000", "42P01", "42883": // no schema, table or function
			return "\n(is the database migrated? run: go run ./cmd/migrate -database URL up)"
		}
	}
	if errors.Is(err, engine.ErrEncrypted) {
		return "\n(" + encryptedHint + ")"
	}
	if errors.Is(err, engine.ErrPermission) {
		return "\n(a read-only role runs threads, log, show, diff, tree and export; connect as a role that may write for the rest)"
	}
	return ""
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, tty terminals) error {
	c := &cli{stdout: termsafe.Writer{W: stdout}, stderr: termsafe.Writer{W: stderr}, raw: stdout, rawErr: stderr, tty: tty, stdin: os.Stdin}
	global := flag.NewFlagSet("ckpt", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	commonFlags(global, c)
	showVersion := global.Bool("version", false, "print the version and exit")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage())
			return nil
		}
		return usageError{err.Error()}
	}
	if *showVersion {
		fmt.Fprint(stdout, version.String("ckpt"))
		return nil
	}
	if global.NArg() == 0 {
		return usageError{"no command given"}
	}
	name := global.Arg(0)
	if name == "help" {
		fmt.Fprint(stdout, usage())
		return nil
	}
	cmd, ok := commands[name]
	if !ok {
		return usagef("unknown command %q", name)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	commonFlags(fs, c)
	if cmd.flags != nil {
		cmd.flags(fs, c)
	}
	pos, err := cliflags.Parse(fs, global.Args()[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, commandUsage(name, cmd, fs))
			return nil
		}
		return usagef("%s: %v", name, err)
	}
	if len(pos) < cmd.nargs[0] || len(pos) > cmd.nargs[1] {
		want := "no arguments"
		if cmd.nargs[1] > 0 {
			want = strings.Fields(cmd.args)[0]
			if cmd.nargs[0] == 2 {
				want = strings.Join(strings.Fields(cmd.args)[:2], " ")
			}
		}
		return usagef("%s takes %s; got %d argument(s)", name, want, len(pos))
	}
	if c.limit < 0 {
		return usagef("%s: --limit %d; use 0 (all) or more", name, c.limit)
	}
	if c.dbURL == "" {
		c.dbURL = os.Getenv("DATABASE_URL")
	}
	if c.tenant == "" {
		c.tenant = os.Getenv("PGCHECKPOINT_TENANT")
	}
	if c.tenant != "" {
		// Checked before anything is opened: a bad name touches no database.
		if err := engine.CheckTenant(c.tenant); err != nil {
			return fmt.Errorf("--tenant %q: %w", c.tenant, err)
		}
	}
	if !cmd.noDB {
		if c.dbURL == "" {
			return usageError{"no database: pass --database URL or set DATABASE_URL"}
		}
		if err := c.connect(ctx); err != nil {
			return err
		}
		defer c.base.Close()
	}
	return cmd.run(ctx, c, pos)
}

// destructiveFlags are the flags of the commands that delete.
func destructiveFlags(fs *flag.FlagSet, c *cli) {
	fs.BoolVar(&c.dryRun, "dry-run", false, "print what would be deleted, and delete nothing")
	fs.BoolVar(&c.yes, "yes", false, "ask no confirmation (one is asked only when the input is a terminal)")
}

// confirmHelp says when a command that deletes asks first.
const confirmHelp = `--dry-run prints what would be deleted (the store's own rule, run in a
transaction that is rolled back) and deletes nothing. Run with a terminal
as input, the command asks before it deletes; --yes skips the question.
Without a terminal (a script, a pipe, cron) it never asks and goes on.`

// commandUsage is the help of one command: what it does, its arguments
// and every flag it takes.
func commandUsage(name string, cmd *command, fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: ckpt [--database URL] [--tenant NAME] [--json] %s %s\n\n%s.\n", name, cmd.args, cmd.help)
	if cmd.more != "" {
		b.WriteString("\n" + cmd.more + "\n")
	}
	b.WriteString("\nFlags, before or after the arguments:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return b.String()
}

func commonFlags(fs *flag.FlagSet, c *cli) {
	fs.StringVar(&c.dbURL, "database", c.dbURL, "postgres://..., host=... dbname=... or sqlite:FILE (default $DATABASE_URL)")
	fs.StringVar(&c.tenant, "tenant", c.tenant, "read and write this tenant alone (default $PGCHECKPOINT_TENANT, else the default tenant)")
	fs.BoolVar(&c.json, "json", c.json, "JSON output")
	fs.StringVar(&c.keyFile, "keys", c.keyFile, "key file of encrypted threads (id=base64 lines, current first; default $PGCHECKPOINT_KEYS holds the keys)")
	fs.StringVar(&c.heldKeys, "held-keys", c.heldKeys, "directory of held data keys (engine.HeldKeys), wrapped there by --keys (default $"+heldKeysEnv+")")
}

// keysEnv holds the key-encryption keys themselves when --keys is not
// given (engine.ParseLocalKeys's format).
const keysEnv = "PGCHECKPOINT_KEYS"

// heldKeysEnv names the directory of held data keys when --held-keys is
// not given.
const heldKeysEnv = "PGCHECKPOINT_HELD_KEYS"

// keys returns the key provider --keys or $PGCHECKPOINT_KEYS give, or nil;
// with --held-keys or $PGCHECKPOINT_HELD_KEYS, a HeldKeys over that
// directory whose files those keys wrap.
func (c *cli) keys() (engine.KeyProvider, error) {
	var keks *engine.LocalKeys
	var err error
	switch {
	case c.keyFile != "":
		keks, err = engine.LocalKeysFromFile(c.keyFile)
	case os.Getenv(keysEnv) != "":
		keks, err = engine.LocalKeysFromEnv(keysEnv)
	}
	if err != nil {
		return nil, err
	}
	dir := c.heldKeys
	if dir == "" {
		dir = os.Getenv(heldKeysEnv)
	}
	switch {
	case dir != "" && keks == nil:
		return nil, fmt.Errorf("--held-keys %s: the key-encryption keys that wrap the held keys are needed too: --keys FILE or $%s", dir, keysEnv)
	case dir != "":
		return &engine.HeldKeys{Dir: dir, KEKs: keks}, nil
	case keks == nil:
		return nil, nil // a nil *LocalKeys is not a nil KeyProvider
	}
	return keks, nil
}

// connect opens the store the URL names and checks that it answers, so a
// wrong URL fails here with one clear message.
func (c *cli) connect(ctx context.Context) error {
	keys, err := c.keys()
	if err != nil {
		return usageError{err.Error()}
	}
	eng, err := pgcheckpoint.Open(ctx, c.dbURL, pgcheckpoint.Options{Config: engine.Config{Encryption: engine.Encryption{Keys: keys}}})
	if errors.Is(err, pgcheckpoint.ErrBadURL) {
		return usageError{err.Error()}
	}
	if err != nil {
		return err
	}
	c.base, c.eng = eng, eng
	if c.tenant != "" {
		if c.eng, err = eng.ForTenant(c.tenant); err != nil {
			eng.Close()
			return err
		}
	}
	return nil
}

// printJSON writes v as indented JSON, for programs (--json) and people
// alike: termsafe.JSON escapes what a terminal would act on, so the text holds
// the same values and is safe to show.
func (c *cli) printJSON(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := c.raw.Write(termsafe.JSON(b.Bytes()))
	return err
}
