package pgtest

import (
	"context"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// StartContainer starts a throwaway Postgres container from image with
// testcontainers-go and returns a URL to its "postgres" database and a
// function that removes the container. ctx bounds the start: a container
// that never becomes ready is an error, not a hang.
// Extra options are applied after the harness's own (tests of the harness
// use them to make a container fail).
func StartContainer(ctx context.Context, image string, extra ...testcontainers.ContainerCustomizer) (url string, stop func(context.Context) error, err error) {
	deadline, ok := ctx.Deadline()
	startup := containerTimeout
	if ok {
		startup = time.Until(deadline)
	}
	opts := []testcontainers.ContainerCustomizer{
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		// Throwaway data: durability settings off for speed.
		testcontainers.WithCmdArgs("-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections=300"),
		tcpostgres.BasicWaitStrategies(),
		testcontainers.WithAdditionalWaitStrategyAndDeadline(startup),
	}
	ctr, err := tcpostgres.Run(ctx, image, append(opts, extra...)...)
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(context.WithoutCancel(ctx))
		}
		return "", nil, fmt.Errorf("start container from image %q: %w", image, err)
	}
	url, err = ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = ctr.Terminate(context.WithoutCancel(ctx))
		return "", nil, fmt.Errorf("container connection string: %w", err)
	}
	stop = func(ctx context.Context) error { return ctr.Terminate(ctx) }
	return url, stop, nil
}
