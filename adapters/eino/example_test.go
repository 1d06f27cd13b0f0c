package eino_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cloudwego/eino/compose"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/adapters/eino"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// An Eino graph that stops for a human's approval and resumes from the
// checkpoint store; the run's history is a pgcheckpoint thread.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "eino-example")
	defer os.RemoveAll(dir)
	// Or a postgres:// URL: the same code.
	eng, err := pgcheckpoint.Open(ctx, "sqlite:"+filepath.Join(dir, "agent.db"), pgcheckpoint.Options{Migrate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()

	g := compose.NewGraph[string, string]()
	_ = g.AddLambdaNode("draft", compose.InvokableLambda(func(ctx context.Context, in string) (string, error) {
		return "draft of " + in, nil
	}))
	_ = g.AddLambdaNode("send", compose.InvokableLambda(func(ctx context.Context, in string) (string, error) {
		return in + ": sent", nil
	}))
	_ = g.AddEdge(compose.START, "draft")
	_ = g.AddEdge("draft", "send")
	_ = g.AddEdge("send", compose.END)
	agent, err := g.Compile(ctx,
		compose.WithCheckPointStore(eino.New(eng)), // pgcheckpoint as Eino's store
		compose.WithInterruptBeforeNodes([]string{"send"}))
	if err != nil {
		fmt.Println(err)
		return
	}

	_, err = agent.Invoke(ctx, "the offer", compose.WithCheckPointID("mail-7"))
	if _, stopped := compose.ExtractInterruptInfo(err); stopped {
		fmt.Println("waiting for approval")
	}
	out, err := agent.Invoke(ctx, "", compose.WithCheckPointID("mail-7")) // approved: resume
	fmt.Println(out, err)

	history, _ := eng.ListCheckpoints(ctx, "mail-7", engine.ListOptions{})
	fmt.Println(len(history) > 0, history[0].Summary)
	// Output:
	// waiting for approval
	// draft of the offer: sent <nil>
	// true eino checkpoint
}
