package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// errNotConfirmed is a destructive command the person at the terminal did
// not confirm: nothing was changed.
var errNotConfirmed = errors.New("not confirmed; nothing was deleted")

// confirm asks the person at the terminal whether to go on with what
// question describes, and returns errNotConfirmed unless they answer y or
// yes. The commands that delete (delete, gc) ask it unless --yes or
// --dry-run is given, and only when ckpt's input is a terminal: without
// one nobody could answer, so scripts, cron jobs and pipelines go on
// without a question, as they did before ckpt asked.
// A signal (ctx's end) while it waits is no answer: errNotConfirmed.
func (c *cli) confirm(ctx context.Context, question string) error {
	if !c.asks() {
		return nil
	}
	fmt.Fprintf(c.stderr, "%s [y/N] ", question)
	type read struct {
		answer string
		err    error
	}
	got := make(chan read, 1)
	go func() {
		answer, err := bufio.NewReader(c.stdin).ReadString('\n')
		got <- read{answer, err}
	}()
	var answer string
	select {
	case <-ctx.Done():
		fmt.Fprintln(c.stderr)
		return fmt.Errorf("%w (%w)", errNotConfirmed, ctx.Err())
	case r := <-got:
		if r.err != nil && !errors.Is(r.err, io.EOF) {
			return fmt.Errorf("read the answer: %w", r.err)
		}
		answer = r.answer
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	if !strings.HasSuffix(answer, "\n") {
		fmt.Fprintln(c.stderr) // end the question's line
	}
	return errNotConfirmed
}

// asks reports whether confirm asks: input from a terminal, and no --yes.
func (c *cli) asks() bool { return c.tty.stdin && !c.yes }
