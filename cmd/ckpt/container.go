package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"path/filepath"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/pgcheckpoint/pgcheckpoint/internal/localpg"
)

// defaultDemoImage is the image demo runs when PGCHECKPOINT_TEST_IMAGE is
// not set: the same default as the test harness (integration/pgtest).
const defaultDemoImage = "postgres:15"

// startContainer starts a throwaway Postgres container and returns a URL to
// it and a function that removes it.
func startContainer(ctx context.Context, image string) (string, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// The demo says what it does; testcontainers' own log would bury it.
	tclog.SetDefault(stdlog.New(io.Discard, "", 0))
	ctr, err := tcpostgres.Run(ctx, image,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		testcontainers.WithCmdArgs("-c", "fsync=off"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(context.WithoutCancel(ctx))
		}
		return "", nil, fmt.Errorf("start a container from image %q: %w", image, err)
	}
	url, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = ctr.Terminate(context.WithoutCancel(ctx))
		return "", nil, fmt.Errorf("container connection string: %w", err)
	}
	stop := func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = ctr.Terminate(sctx)
	}
	return url, stop, nil
}

// demoDatabase finds the demo a database when none is given: a throwaway
// Postgres from the server binaries installed here (internal/localpg), or,
// when there are none, a SQLite file in a temporary directory; with
// useContainer, a Postgres container (testcontainers; the image is
// PGCHECKPOINT_TEST_IMAGE, default postgres:15). It prints which, and
// cleanup removes it and says how to keep the data next time.
func demoDatabase(ctx context.Context, w io.Writer, useContainer bool) (url string, cleanup func(), err error) {
	const keep = "run with --database sqlite:demo.db (or a postgres:// URL) to keep the data and look around"
	if useContainer {
		image := os.Getenv("PGCHECKPOINT_TEST_IMAGE")
		if image == "" {
			image = defaultDemoImage
		}
		fmt.Fprintf(w, "database  none given (--database or DATABASE_URL): starting a throwaway Postgres container from %s\n", image)
		u, stop, err := startContainer(ctx, image)
		if err != nil {
			return "", nil, fmt.Errorf("%w\n(give a database with --database URL or DATABASE_URL, or make Docker able to run %s; PGCHECKPOINT_TEST_IMAGE names another image)", err, image)
		}
		return u, func() {
			stop()
			fmt.Fprintln(w, "\ndatabase  the container was removed; "+keep)
		}, nil
	}

	cluster, err := localpg.Start(ctx, localpg.Options{})
	if err == nil {
		fmt.Fprintf(w, "database  none given (--database or DATABASE_URL): starting a throwaway Postgres from the server binaries in %s\n", cluster.BinDir())
		return cluster.URL(), func() {
			if err := cluster.Stop(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintf(w, "\ndatabase  stopping the throwaway Postgres: %v\n", err)
				return
			}
			fmt.Fprintln(w, "\ndatabase  the throwaway Postgres was stopped and removed; "+keep)
		}, nil
	}
	if ctx.Err() != nil { // interrupted while it started: no fallback
		return "", nil, err
	}
	if errors.Is(err, localpg.ErrNotFound) {
		fmt.Fprintln(w, "database  none given (--database or DATABASE_URL) and no Postgres server installed: using a temporary SQLite file")
	} else {
		fmt.Fprintf(w, "database  none given; the local Postgres would not start (%v): using a temporary SQLite file\n", oneLine(err.Error(), 120))
	}
	dir, err := os.MkdirTemp("", "pgcheckpoint-demo-")
	if err != nil {
		return "", nil, err
	}
	return "sqlite:" + filepath.Join(dir, "demo.db"), func() {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(w, "\ndatabase  the temporary SQLite file was removed; "+keep)
	}, nil
}
