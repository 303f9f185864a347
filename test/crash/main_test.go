//go:build linux

package crash

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/lws"
)

// podReadyDelay is KWOK's Running→Ready delay: long enough that rollouts take several
// seconds (so kills land mid-rollout), short enough for the runtime budget.
const podReadyDelay = 700 * time.Millisecond

// env is the state both tests share: one control plane and one operator binary.
type env struct {
	cl  *cluster.Cluster
	lws *lws.Runner // the LeaderWorkerSet controllers and webhooks, in this process
	k8s client.Client
	// stopConv stops the conversion webhook this process serves: the operators it
	// kills serve none (--webhook-bind-address=0), so conversion never goes down.
	stopConv context.CancelFunc
	// dir holds the operator binary, its per-name symlinks and the operator logs.
	dir string
	bin string
}

var (
	setupOnce sync.Once
	shared    *env
	setupErr  error
)

// TestMain stops the shared control plane after every test ran. Every component and
// operator process also has Pdeathsig SIGKILL, so nothing outlives a test binary that
// dies (a -timeout panic included).
func TestMain(m *testing.M) {
	// The watcher's informers log through controller-runtime; the operators log to files.
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	code := m.Run()
	if shared != nil {
		if shared.stopConv != nil {
			shared.stopConv()
		}
		if shared.lws != nil {
			_ = shared.lws.Stop()
		}
		if shared.cl != nil {
			_ = shared.cl.Stop()
		}
		if os.Getenv("CRASH_KEEP_LOGS") == "" {
			_ = os.RemoveAll(shared.dir)
		} else {
			fmt.Printf("operator logs kept in %s\n", shared.dir)
		}
	}
	os.Exit(code)
}

// getEnv starts the control plane and builds the operator once, or skips the test when
// the control-plane binaries are missing.
func getEnv(t *testing.T) *env {
	t.Helper()
	if _, err := os.Stat(filepath.Join(cluster.RepoRoot(), "bin", "kube-controller-manager")); err != nil {
		t.Skip("bin/kube-controller-manager is missing: run make cluster-bins")
	}
	setupOnce.Do(func() { shared, setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("setting up: %v", setupErr)
	}
	return shared
}

// setup builds cmd/manager while the control plane starts, then installs the CRDs (ours
// and LeaderWorkerSet's) and runs the LWS controllers and webhooks in this process, so
// that the operator, killed and restarted, drives multinode gangs on real
// LeaderWorkerSets and StatefulSets.
func setup() (*env, error) {
	dir, err := os.MkdirTemp("", "dgd-crash-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, bin: filepath.Join(dir, "manager")}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	built := make(chan error, 1)
	go func() { built <- goBuild(ctx, e.bin) }()
	begin := time.Now()
	cl, err := cluster.Start(ctx, cluster.Options{Nodes: 4, GPUsPerNode: 16, PodReadyDelay: podReadyDelay})
	if err != nil {
		<-built
		return e, fmt.Errorf("starting the local control plane: %w", err)
	}
	e.cl = cl
	lwsCRDs, err := lws.CRDDir()
	if err != nil {
		<-built
		return e, err
	}
	if err := cl.InstallCRDs(ctx, filepath.Join(cluster.RepoRoot(), "config", "crd", "bases"), lwsCRDs); err != nil {
		<-built
		return e, fmt.Errorf("installing CRDs: %w", err)
	}
	convCtx, stopConv := context.WithCancel(context.Background())
	e.stopConv = stopConv
	if err := app.LocalConversion(convCtx, cl.Config); err != nil {
		<-built
		return e, fmt.Errorf("serving /convert: %w", err)
	}
	if e.lws, err = lws.Start(ctx, lws.Options{Config: cl.Config}); err != nil {
		<-built
		return e, fmt.Errorf("starting the LWS controllers: %w", err)
	}
	if e.k8s, err = client.New(cl.Config, client.Options{Scheme: app.NewScheme()}); err != nil {
		<-built
		return e, err
	}
	if err := <-built; err != nil {
		return e, err
	}
	fmt.Printf("control plane up in %s, operator built, setup took %s\n", cl.StartupDuration.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
	return e, nil
}

// goBuild builds cmd/manager into out, once per test binary.
func goBuild(ctx context.Context, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/manager")
	cmd.Dir = cluster.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/manager: %w\n%s", err, b)
	}
	return nil
}
