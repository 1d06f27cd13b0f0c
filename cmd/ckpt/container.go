package main

import (
	"context"
	"fmt"
	"io"
	stdlog "log"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
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
