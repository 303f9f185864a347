package haproxy

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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/opproc"
)

// env is what every test of the package shares: one API server and one manager binary.
type env struct {
	api    *envtest.Environment
	config *rest.Config
	k8s    client.Client
	cs     kubernetes.Interface
	// dir holds the manager binary; bin is its path.
	dir, bin string
	// namespaces counts the namespaces made, one per test.
	mu         sync.Mutex
	namespaces int
}

var (
	setupOnce sync.Once
	shared    *env
	setupErr  error
)

// TestMain stops the shared API server after every test ran. Each process a test
// starts is stopped by its cleanup, and has Pdeathsig SIGKILL besides
// (cluster.StartChild), so nothing outlives a test binary that dies.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	code := m.Run()
	if shared != nil {
		if shared.api != nil {
			_ = shared.api.Stop()
		}
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// requireHAProxy fails (never skips) when HAProxy is not on PATH.
func requireHAProxy(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("haproxy")
	if err != nil {
		tb.Fatal("haproxy not found: make test installs it")
	}
	return path
}

// getEnv starts the API server and builds the manager once.
func getEnv(tb testing.TB) *env {
	tb.Helper()
	requireHAProxy(tb)
	setupOnce.Do(func() { shared, setupErr = setup() })
	if setupErr != nil {
		tb.Fatalf("setting up: %v", setupErr)
	}
	return shared
}

func setup() (*env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		_ = os.Setenv("KUBEBUILDER_ASSETS", filepath.Join(cluster.RepoRoot(), "bin"))
	}
	dir, err := os.MkdirTemp("", "dgd-haproxy-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, api: &envtest.Environment{ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: time.Minute}}
	built := make(chan error, 1)
	go func() {
		var err error
		e.bin, err = opproc.Build(cluster.RepoRoot(), dir)
		built <- err
	}()
	if e.config, err = e.api.Start(); err != nil {
		<-built
		return e, fmt.Errorf("starting the API server (KUBEBUILDER_ASSETS=%s): %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	if e.k8s, err = client.New(e.config, client.Options{Scheme: app.NewScheme()}); err != nil {
		<-built
		return e, err
	}
	if e.cs, err = kubernetes.NewForConfig(e.config); err != nil {
		<-built
		return e, err
	}
	return e, <-built
}

// namespace makes a namespace of the test's own.
func (e *env) namespace(tb testing.TB) string {
	tb.Helper()
	e.mu.Lock()
	e.namespaces++
	name := fmt.Sprintf("proxy-%d", e.namespaces)
	e.mu.Unlock()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.k8s.Create(context.Background(), ns); err != nil {
		tb.Fatal(err)
	}
	return name
}
