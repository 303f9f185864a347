package cluster

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestServeRetriesOnPortClash gives etcd a port that is taken on the first attempt
// and checks that serve starts it again on fresh ports.
func TestServeRetriesOnPortClash(t *testing.T) {
	if _, err := os.Stat(filepath.Join(RepoRoot(), "bin", "etcd")); err != nil {
		t.Skip("bin/etcd missing: run make cluster-bins")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	calls := 0
	pickPorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 && err == nil {
			ports[0] = taken.Addr().(*net.TCPAddr).Port
		}
		return ports, err
	}
	defer func() { pickPorts = freePorts }()

	c, err := newCluster(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dataDir := filepath.Join(c.WorkDir, "etcd")
	args := func(p []int) []string {
		client, peer := url("http", p[0]), url("http", p[1])
		return []string{"--data-dir=" + dataDir, "--listen-client-urls=" + client,
			"--advertise-client-urls=" + client, "--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer, "--initial-cluster=default=" + peer,
			"--unsafe-no-fsync", "--log-level=warn"}
	}
	_, err = c.serve(ctx, "etcd", 2, args, func(ctx context.Context, p []int) error {
		return httpOK(ctx, http.DefaultClient, url("http", p[0])+"/health")
	})
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	if procs := c.Processes(); calls != 2 || len(procs) != 2 {
		t.Fatalf("want 2 attempts, got %d port picks and processes %v", calls, procs)
	}
}

// TestLastOutput: a start that times out waiting on a component's work (the default
// ServiceAccount) reports the last lines of the newest process of that name.
func TestLastOutput(t *testing.T) {
	c := &Cluster{}
	for _, out := range []string{"old run\n", "one\ntwo\nthree\n"} {
		p := &process{name: "kube-controller-manager", tail: &tailBuffer{max: 1 << 10}}
		_, _ = p.tail.Write([]byte(out))
		c.procs = append(c.procs, p)
	}
	if got := c.lastOutput("kube-controller-manager", 2); got != "two\nthree" {
		t.Errorf("lastOutput = %q, want the newest process's last two lines", got)
	}
	if got := c.lastOutput("kube-scheduler", 2); got != "(kube-scheduler was not started)" {
		t.Errorf("lastOutput of a process never started = %q", got)
	}
}
