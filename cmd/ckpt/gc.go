package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/dburl"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// runGC applies a retention policy: to one thread (--thread), or to every
// thread in a sweep that also applies thread expiry.
func runGC(ctx context.Context, c *cli, _ []string) error {
	if c.policy == "" {
		return usagef("gc: --policy is required, e.g. --policy keep_last_n:10")
	}
	p, err := engine.ParsePolicy(c.policy)
	if err != nil {
		return usagef("gc: --policy: %v\n%s", err, policyHelp)
	}
	if c.batch < 0 || c.budget < 0 {
		return usagef("gc: --batch and --budget must not be negative")
	}
	if c.thread != "" {
		return gcThread(ctx, c, p)
	}

	opts := engine.SweepOptions{BatchSize: c.batch, TimeBudget: c.budget, After: c.after}
	progress := c.tty.stderr && !c.json
	if progress {
		opts.Progress = func(r engine.SweepResult) {
			fmt.Fprintf(c.rawErr, "\rsweeping: %d thread(s), %d checkpoint(s) deleted", r.Threads, r.Deleted)
		}
	}
	if !c.dryRun {
		if err := c.confirm(ctx, fmt.Sprintf("gc %s: sweep every thread, applying the expiries that are due (--dry-run shows what would go)?", p)); err != nil {
			return err
		}
	}
	sweep := c.eng.Sweep
	if c.dryRun {
		sweep = c.eng.PreviewSweep
	}
	res, err := sweep(ctx, p, opts)
	if progress {
		fmt.Fprint(c.rawErr, "\r\033[K")
	}
	if errors.Is(err, engine.ErrInvalidInput) {
		return usagef("gc: %v", err) // a policy a sweep does not take; nothing was done
	}
	if err != nil {
		return fmt.Errorf("%w (batches before the failing one are done; run gc again to go on)", err)
	}
	if c.json {
		return c.printJSON(struct {
			Policy         string  `json:"policy"`
			Threads        int     `json:"threads"`
			Expired        int     `json:"expired"`
			Failed         int     `json:"failed"`
			Deleted        int64   `json:"deleted"`
			Batches        int     `json:"batches"`
			LongestBatchMS float64 `json:"longest_batch_ms"`
			Done           bool    `json:"done"`
			Next           string  `json:"next,omitempty"`
			DryRun         bool    `json:"dry_run,omitempty"`
		}{p.String(), res.Threads, res.Expired, res.Failed, res.Deleted, res.Batches, float64(res.LongestBatch.Microseconds()) / 1000, res.Done, res.Next, c.dryRun})
	}
	if c.dryRun {
		fmt.Fprintf(c.stdout, "gc %s would delete %d checkpoint(s) in %d thread(s), %d expired; %d batch(es) (dry run: nothing was deleted)\n",
			p, res.Deleted, res.Threads, res.Expired, res.Batches)
	} else {
		fmt.Fprintf(c.stdout, "gc %s: %d checkpoint(s) deleted in %d thread(s), %d expired; %d batch(es), longest %s\n",
			p, res.Deleted, res.Threads, res.Expired, res.Batches, res.LongestBatch.Round(time.Microsecond))
	}
	if res.Failed > 0 {
		fmt.Fprintf(c.stdout, "%d thread(s) could not be cleaned and were left as they were; the server log says why\n", res.Failed)
	}
	if !res.Done {
		fmt.Fprintf(c.stdout, "stopped by --budget; to go on: %s\n", goOn(c, p, res.Next))
	}
	return nil
}

// goOn is the command that sweeps on from thread next as this run did:
// the same database (its password masked: the command then fails until
// it is put back, where without --database it would sweep whatever
// $DATABASE_URL names), tenant, key file, policy, batch, budget and dry
// run. Each word is quoted for bash or zsh (shellWord), so a thread id
// (agent text) pasted into one stays one word and runs nothing.
func goOn(c *cli, p engine.Policy, next string) string {
	words := []string{"ckpt"}
	if c.dbURL != "" {
		words = append(words, "--database", dburl.Redact(c.dbURL))
	}
	if c.tenant != "" {
		words = append(words, "--tenant", c.tenant)
	}
	if c.keyFile != "" {
		words = append(words, "--keys", c.keyFile)
	}
	words = append(words, "gc", "--policy", p.String(), "--after", next)
	if c.batch > 0 {
		words = append(words, "--batch", fmt.Sprint(c.batch))
	}
	if c.budget > 0 {
		words = append(words, "--budget", c.budget.String())
	}
	if c.dryRun {
		words = append(words, "--dry-run")
	}
	for i, w := range words {
		words[i] = shellWord(w)
	}
	return strings.Join(words, " ")
}

// shellWord quotes w as one word of a bash or zsh command: as it is when it
// holds nothing a shell reads specially; in single quotes when it holds
// nothing a terminal acts on either; else in $'...', its backslashes and
// quotes escaped and each byte of a control or format character (and
// each byte that is not UTF-8) as \xHH, which $'...' reads back as that
// byte whatever the locale. (A POSIX sh has no such quoting: there, a
// word with such characters can only be written raw, which this output
// must not do.)
func shellWord(w string) string {
	plain := w != ""
	for _, r := range w {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_@%+=:,./-", r)) {
			plain = false
			break
		}
	}
	switch {
	case plain:
		return w
	case termsafe.First(w) < 0 && !strings.ContainsAny(w, "\t\n"):
		return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(w); {
		r, size := utf8.DecodeRuneInString(w[i:])
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case termsafe.Unsafe(r) || r == '\t' || r == '\n':
			for _, c := range []byte(w[i : i+size]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		default:
			b.WriteString(w[i : i+size])
		}
		i += size
	}
	b.WriteString("'")
	return b.String()
}

// gcThread applies p to one thread (gc --thread).
func gcThread(ctx context.Context, c *cli, p engine.Policy) error {
	if err := threadExists(ctx, c.eng, c.thread); err != nil {
		return err
	}
	var res engine.DeleteResult
	var err error
	if c.dryRun || c.asks() {
		// What goes: the store's prune, rolled back.
		if res, err = c.eng.PreviewPrune(ctx, p, c.thread); err != nil {
			return err
		}
	}
	// Asked, with nothing to delete: no question, and nothing to do.
	if !c.dryRun && (res.Deleted > 0 || !c.asks()) {
		if err := c.confirm(ctx, fmt.Sprintf("gc %s on thread %s: delete %d checkpoint(s)?", p, termsafe.Line(c.thread), res.Deleted)); err != nil {
			return err
		}
		if res, err = c.eng.PruneThreads(ctx, p, c.thread); err != nil {
			return err
		}
	}
	if c.json {
		type row struct {
			ThreadID  string    `json:"thread_id"`
			Namespace string    `json:"namespace"`
			ID        uuid.UUID `json:"checkpoint_id"`
			Step      int64     `json:"step"`
		}
		var rows []row // null when the policy does not list them (see engine.DeleteResult)
		if res.IDs != nil {
			rows = make([]row, len(res.IDs))
		}
		for i, d := range res.IDs {
			rows[i] = row{d.ThreadID, d.Namespace, d.ID, d.Step}
		}
		return c.printJSON(struct {
			Policy      string `json:"policy"`
			ThreadID    string `json:"thread_id"`
			Deleted     int64  `json:"deleted"`
			Checkpoints []row  `json:"checkpoints"`
			DryRun      bool   `json:"dry_run,omitempty"`
		}{p.String(), c.thread, res.Deleted, rows, c.dryRun})
	}
	if !c.dryRun {
		fmt.Fprintf(c.stdout, "gc %s on thread %s: %d checkpoint(s) deleted\n", p, termsafe.Line(c.thread), res.Deleted)
		return nil
	}
	fmt.Fprintf(c.stdout, "gc %s on thread %s would delete %d checkpoint(s) (dry run: nothing was deleted)\n", p, termsafe.Line(c.thread), res.Deleted)
	for _, d := range res.IDs {
		ns := ""
		if d.Namespace != "" {
			ns = "  namespace " + termsafe.Line(d.Namespace)
		}
		fmt.Fprintf(c.stdout, "  step %-4d %s%s\n", d.Step, d.ID, ns)
	}
	return nil
}

// policyHelp is the policy syntax: engine.Policy's String, one spelling
// on every surface (the SQL functions' names).
const policyHelp = `use keep_all, keep_last_n:N (the N newest), keep_age:DURATION
(written within it, e.g. 72h), or keep_milestones:N (the first, the newest
and N evenly spaced between): whatever the policy, a thread's head and a
checkpoint a branch was forked from are kept. With --thread, also
keep_latest (the heads alone, branch sources too go) or keep_none (the
whole thread goes, as delete does).`
