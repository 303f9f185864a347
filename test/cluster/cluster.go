// Package cluster runs a real local Kubernetes control plane for end-to-end tests
// and `make run`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// KWOK (fake nodes with nvidia.com/gpu capacity whose pods become Running at once and
// Ready after a configurable delay), all from the binaries in the repo's bin/ (make
// cluster-bins), all on 127.0.0.1 with free ports and certificates made here.
//
//	c, err := cluster.Start(ctx, cluster.Options{PodReadyDelay: 2 * time.Second})
//	if err != nil { ... }
//	defer c.Stop()
//	// c.Config, c.Kubeconfig, c.Env()
//
// The components are not tied to the Start context: they run until Stop, or until
// the process that started them dies (Pdeathsig).
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options configures Start. The zero value is a usable default.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
	// kwok. Default: <repo>/bin.
	BinDir string
	// WorkDir holds certificates, kubeconfigs, etcd data, the KWOK stage file, logs
	// and the pids file. Default: a new temporary directory, removed by Stop unless
	// KeepWorkDir. A WorkDir given here is never removed.
	WorkDir string
	// KeepWorkDir keeps a temporary WorkDir after Stop (for reading the logs).
	KeepWorkDir bool
	// Nodes is the number of KWOK fake nodes (named kwok-node-<i>). 0 means 4.
	Nodes int
	// GPUsPerNode is each node's nvidia.com/gpu capacity. 0 means 8.
	GPUsPerNode int
	// PodReadyDelay is how long a pod stays Running but not Ready. Default 0. Any
	// update to the pod in that window restarts the delay (KWOK re-plans the stage).
	PodReadyDelay time.Duration
	// LogWriter receives every component's output, each line prefixed with
	// "[component] ". Default: one file per component in WorkDir/logs.
	LogWriter io.Writer
	// Profiling serves /debug/pprof on kube-apiserver and kube-controller-manager
	// (see Profile); off by default, as the components' --profiling=false.
	Profiling bool
}

// Cluster is a running control plane started by Start.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig (client certificate CN admin,
	// O system:masters), certificates embedded.
	Kubeconfig string
	// Config is the admin rest.Config (QPS 500, burst 1000).
	Config *rest.Config
	// WorkDir is the directory of this cluster's files.
	WorkDir string
	// Server is the API server URL, https://127.0.0.1:<port>.
	Server string
	// StartupDuration is how long Start took.
	StartupDuration time.Duration

	opts Options
	// urls are the HTTPS base URLs of the components that serve one, by name.
	urls    sync.Map
	pki     *pki
	etcdURL string
	client  kubernetes.Interface
	tempDir bool

	mu       sync.Mutex
	logMu    sync.Mutex
	procs    []*process
	stopped  bool
	stopErr  error
	nodeName []string
}

// Start brings up the control plane and returns once every component is healthy,
// Options.Nodes fake nodes are Ready and untainted, and the default ServiceAccount
// exists in namespace default (so pods can be created). If ctx has no deadline, 60 s
// applies. On failure Start stops whatever it started and returns the stopped
// cluster (Stop on it is a no-op) with an error carrying the failing component's
// last output.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	begin := time.Now()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
	}
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		return c, errors.Join(err, c.Stop())
	}
	c.StartupDuration = time.Since(begin)
	return c, nil
}

// newCluster applies defaults and creates WorkDir.
func newCluster(opts Options) (*Cluster, error) {
	if opts.BinDir == "" {
		opts.BinDir = filepath.Join(RepoRoot(), "bin")
	}
	if opts.Nodes == 0 {
		opts.Nodes = 4
	}
	if opts.GPUsPerNode == 0 {
		opts.GPUsPerNode = 8
	}
	c := &Cluster{opts: opts, WorkDir: opts.WorkDir}
	if c.WorkDir == "" {
		dir, err := os.MkdirTemp("", "cluster-")
		if err != nil {
			return nil, err
		}
		c.WorkDir, c.tempDir = dir, true
	} else if err := os.MkdirAll(c.WorkDir, 0o755); err != nil {
		return nil, err
	}
	return c, nil
}

// start runs the steps of Start in order.
func (c *Cluster) start(ctx context.Context) error {
	var err error
	if c.pki, err = newPKI(filepath.Join(c.WorkDir, "pki")); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if err := c.startStorageAndAPI(ctx); err != nil {
		return err
	}
	if err := c.writeKubeconfigs(); err != nil {
		return err
	}
	return parallel(ctx, c.startControllerManager, c.startScheduler, c.startNodes,
		c.waitForDefaultServiceAccount)
}

// Stop stops exactly the processes Start started, by their recorded PIDs, in
// reverse start order: SIGTERM, then SIGKILL after 3 s. It then removes a
// temporary WorkDir unless Options.KeepWorkDir. Stop is idempotent and safe on a
// nil or partially started Cluster.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return c.stopErr
	}
	c.stopped = true
	c.mu.Unlock()
	c.stopAll()
	if c.tempDir && !c.opts.KeepWorkDir {
		c.stopErr = os.RemoveAll(c.WorkDir)
	}
	return c.stopErr
}

// Env returns the environment entries that point a subprocess (kubectl, the
// operator binary) at this cluster: cmd.Env = append(os.Environ(), c.Env()...).
func (c *Cluster) Env() []string {
	return []string{"KUBECONFIG=" + c.Kubeconfig}
}

// Process is one component process started by Start.
type Process struct {
	Name string
	PID  int
}

// Processes lists every process Start started (including failed start attempts),
// in start order. WorkDir/pids holds the same list, one "name pid" per line.
func (c *Cluster) Processes() []Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Process, 0, len(c.procs))
	for _, p := range c.procs {
		out = append(out, Process{Name: p.name, PID: p.PID()})
	}
	return out
}

// RSS returns the resident memory of the running components in bytes, in total and
// per component name (sum of VmRSS in /proc/<pid>/status).
func (c *Cluster) RSS() (total int64, byComponent map[string]int64, err error) {
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	byComponent = map[string]int64{}
	for _, p := range procs {
		if p.exited() {
			continue
		}
		rss, err := readRSS(p.PID())
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", p.name, err)
		}
		byComponent[p.name] += rss
		total += rss
	}
	return total, byComponent, nil
}

// RepoRoot is the repository root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// parallel runs fns concurrently and returns the first error; the first failure
// cancels the context the others run with.
func parallel(ctx context.Context, fns ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	return first
}
