package cluster_test

import (
	"context"
	"log"
	"os"
	"os/exec"
	"time"

	"github.com/dgd-rollout/operator/test/cluster"
)

// Start a cluster, run kubectl against it, stop it. (Compiled, not run: it needs
// the binaries in bin/.)
func ExampleCluster_Env() {
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 2, PodReadyDelay: 2 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	cmd := exec.Command("kubectl", "get", "nodes", "-o", "wide")
	cmd.Env = append(os.Environ(), c.Env()...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Print(err)
	}
}
