// Package harness starts a real API server (envtest: etcd + kube-apiserver built from
// pinned modules into bin/), installs the CRDs and runs the operator exactly as
// cmd/manager wires it. Suites then play the workload controllers by patching status.
package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/render"
)

// Env is a running API server with the operator attached.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
	cancel context.CancelFunc
	done   chan error
	grove  groveState
	// slices is the fake EndpointSlice controller (StartEndpointSlices), slicesPaused
	// the namespaces it leaves alone.
	slices       *fakeEndpointSlices
	slicesPaused sync.Map
	// RuntimeRegisters makes the fake kubelet (Grove's pods) mark a worker pod Ready only
	// once its Dynamo runtime has published the pod's DynamoWorkerMetadata, as a real
	// worker does: it registers, then its readiness probe (/health on the system port)
	// passes. Set it where test/observe plays the runtimes (it publishes the DWMs).
	RuntimeRegisters bool
	// Metrics answers the operator's analysis queries in place of Prometheus (the
	// real one is queried in test/e2e).
	Metrics *Metrics
}

// OperatorDiscovery is the default discovery backend (--discovery-backend) of the
// operator Start runs. Suites that play workload statuses and no pods run it under etcd
// discovery, where a workload's readiness is what Dynamo routes by: under Kubernetes
// discovery a worker counts as ready only once its runtime pod is a ready endpoint of a
// discovery EndpointSlice (controllers/discovery.go), which a suite without pods never
// has. A suite with pods sets it to kubernetes before Start and runs
// StartEndpointSlices (the Grove suite, whose fake kubelet runs Grove's pods).
var OperatorDiscovery = render.DiscoveryEtcd

// RepoRoot is the repository root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Start starts the API server with extra CRD directories and, when withOperator, the
// operator. KUBEBUILDER_ASSETS defaults to the repo's bin/.
func Start(withOperator bool, extraCRDs ...string) (*Env, error) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel())))
	root := RepoRoot()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		_ = os.Setenv("KUBEBUILDER_ASSETS", filepath.Join(root, "bin"))
	}
	e := &Env{env: &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(root, "config", "crd", "bases"), filepath.Join(root, "config", "crd", "dynamo")}, extraCRDs...),
		ErrorIfCRDPathMissing: true,
		// A loaded 2-core CI machine runs two suites at once: kube-apiserver, draining
		// its watches, may need more than envtest's default 20 s to stop.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}}
	cfg, err := e.env.Start()
	if err != nil {
		_ = e.env.Stop() // envtest leaves etcd and kube-apiserver running when CRD install fails
		return nil, fmt.Errorf("starting envtest (is bin/kube-apiserver built? run make envtest-bins): %w", err)
	}
	e.Config = cfg
	if e.Client, err = client.New(cfg, client.Options{Scheme: app.NewScheme()}); err != nil {
		return nil, e.stopWith(err)
	}
	if withOperator {
		if err := e.startOperator(); err != nil {
			return nil, e.stopWith(err)
		}
	}
	return e, nil
}

func (e *Env) startOperator() error {
	e.Metrics = &Metrics{}
	mgr, err := app.NewManager(e.Config, app.Options{Manager: ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}, Querier: e.Metrics, Platform: render.Config{DiscoveryBackend: OperatorDiscovery}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- mgr.Start(ctx) }()
	return nil
}

func (e *Env) stopWith(err error) error {
	_ = e.Stop()
	return err
}

// Stop stops the operator and the API server (every process it started).
func (e *Env) Stop() error {
	if e.cancel != nil {
		e.cancel()
		<-e.done
	}
	return e.env.Stop()
}

func zapLevel() zapLevelT {
	if os.Getenv("TEST_VERBOSE") != "" {
		return -2
	}
	return 2 // errors only
}
