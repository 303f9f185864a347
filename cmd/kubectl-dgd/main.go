// Command kubectl-dgd is the kubectl plugin for DynamoGraphDeployment rollouts: put it on
// PATH (make install-plugin) and run "kubectl dgd rollout history|status|undo|pause|
// resume|partition|promote|abort|retry NAME", "kubectl dgd set image", "restart", "list",
// "analysis run TEMPLATE".
// See package app and docs/day2.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/dgd-rollout/operator/cmd/kubectl-dgd/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := app.NewRootCommand(streams, genericclioptions.NewConfigFlags(true))
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		app.PrintError(os.Stderr, err)
		os.Exit(1)
	}
}
