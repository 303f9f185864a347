// Package harness starts a real API server (envtest: etcd + kube-apiserver built from
// pinned modules into bin/), installs the CRDs and runs the operator exactly as
// cmd/manager wires it, behind a proxy that records its requests (opproc). Suites then
// play the workload controllers by patching status.
package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/controllers"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/opproc"
)

// Env is a running API server with the operator attached.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
	cancel context.CancelFunc
	done   chan error
	grove  groveState
	lws    lwsState
	// proxy records every request the operator makes (it talks to the API server
	// through it); passes records its reconcile passes per DGD.
	proxy    *opproc.Proxy
	proxyDir string
	passes   passLog
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
	// Webhook is the conversion webhook the API server calls: the operator's own /convert
	// when it runs, else one this process serves (api/conversion either way).
	Webhook  app.WebhookOptions
	certDir  string
	stopConv context.CancelFunc
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

// CRDPaths are the CRD directories Start always installs: ours and Dynamo's.
func CRDPaths() []string {
	root := RepoRoot()
	return []string{filepath.Join(root, "config", "crd", "bases"), filepath.Join(root, "config", "crd", "dynamo")}
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
		CRDDirectoryPaths:     append(CRDPaths(), extraCRDs...),
		ErrorIfCRDPathMissing: true,
		// The DGD CRD serves two versions, each with a full PodTemplateSpec or PodSpec
		// schema: on a loaded machine the API server may take more than envtest's
		// default 10 s to serve it.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: time.Minute},
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
	if e.certDir, err = os.MkdirTemp("", "dgd-convert-"); err != nil {
		return nil, e.stopWith(err)
	}
	if e.Webhook, err = app.LocalWebhook(e.certDir); err != nil {
		return nil, e.stopWith(err)
	}
	if withOperator {
		if err := e.startOperator(Broken{}); err != nil {
			return nil, e.stopWith(err)
		}
		return e, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stopConv = cancel
	if err := app.ServeConversion(ctx, cfg, e.Webhook); err != nil {
		return nil, e.stopWith(err)
	}
	return e, nil
}

// Broken makes a broken operator for a mutation test, from the operator's own wiring:
// its client made by NewClient (a decorator around the manager's), its reconciler
// changed by Reconciler before it is set up (a backend decorated). The zero value is
// the operator as it ships.
type Broken struct {
	NewClient  client.NewClientFunc
	Reconciler func(ctrl.Manager, *controllers.Reconciler)
}

// startOperator runs the operator as cmd/manager wires it (app.NewManager), or broken
// as b says, talking to the API server through a recording proxy (opproc).
func (e *Env) startOperator(b Broken) error {
	if e.proxy == nil {
		dir, err := os.MkdirTemp("", "dgd-envtest-proxy-")
		if err != nil {
			return err
		}
		e.proxyDir = dir
		if e.proxy, err = opproc.StartProxy(e.Config, dir); err != nil {
			return err
		}
	}
	if e.Metrics == nil {
		e.Metrics = &Metrics{}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.proxy.Kubeconfig)
	if err != nil {
		return err
	}
	opts := ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// RestartOperator runs another operator in this process.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		NewClient:  b.NewClient,
	}
	migrated := make(chan struct{})
	o := app.Options{Manager: opts, Querier: e.Metrics, Middleware: e.passes.wrap, Webhook: e.Webhook,
		Platform: render.Config{DiscoveryBackend: OperatorDiscovery}, StorageMigrated: func() { close(migrated) }}
	var mgr ctrl.Manager
	if b.Reconciler == nil {
		if mgr, err = app.NewManager(cfg, o); err != nil {
			return err
		}
	} else {
		opts.Scheme = app.NewScheme()
		if opts.Cache, err = app.CacheOptionsFor(cfg); err != nil {
			return err
		}
		if opts.WebhookServer, err = e.Webhook.Server(); err != nil {
			return err
		}
		if mgr, err = ctrl.NewManager(cfg, opts); err != nil {
			return err
		}
		if err := app.SetupConversion(cfg, mgr, e.Webhook); err != nil {
			return err
		}
		r, err := app.NewReconciler(mgr, o)
		if err != nil {
			return err
		}
		b.Reconciler(mgr, r)
		if err := r.SetupWithManager(mgr, app.DefaultTuning.Workers); err != nil {
			return err
		}
		close(migrated) // no migrator in a broken operator
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	exited := make(chan error, 1)
	go func() { err := mgr.Start(ctx); exited <- err; e.done <- err }()
	// The operator's own /convert serves the API server (the CRD points at it).
	if err := app.WaitConversion(ctx, e.Config, exited); err != nil {
		return err
	}
	// The start's storage migration (once, as the leader, after the caches synced) has
	// ended before a test goes on: it narrows the CRD's storedVersions, which the
	// conversion suite's storage specs set up (a spec that ran first had them narrowed
	// under it in a CI run).
	select {
	case <-migrated:
		return nil
	case err := <-exited:
		return fmt.Errorf("the operator exited before its storage migration ended: %w", err)
	case <-time.After(time.Minute):
		return fmt.Errorf("the operator's storage migration did not end within a minute")
	}
}

// RestartOperator stops the operator and starts another, broken as b says (the zero
// value: the operator as it ships).
func (e *Env) RestartOperator(b Broken) error {
	if err := e.stopOperator(); err != nil {
		return err
	}
	return e.startOperator(b)
}

func (e *Env) stopOperator() error {
	if e.cancel == nil {
		return nil
	}
	e.cancel()
	e.cancel = nil
	if err := <-e.done; err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			// A runnable that outlived the manager's grace period is still running: say
			// where (go test prints a failed package's stderr).
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		}
		return err
	}
	return noteStopped()
}

// OperatorWrites lists the writes (creates, updates, patches, deletes) the operator
// sent since since to namespace ns or to cluster-scoped objects, as "VERB resource
// namespace/name", oldest first.
func (e *Env) OperatorWrites(since time.Time, ns string) []string {
	var out []string
	for _, r := range e.proxy.Requests(since) {
		if r.Write() && (r.Namespace == ns || r.Namespace == "") {
			out = append(out, fmt.Sprintf("%s %s %s/%s", r.Verb, r.Resource, r.Namespace, r.Name))
		}
	}
	return out
}

// PassesSince counts the reconcile passes of DGD ns/name that started after t and
// have returned.
func (e *Env) PassesSince(ns, name string, t time.Time) int {
	return len(e.passes.since(ns+"/"+name, t))
}

// LongestPassSince is the longest of the reconcile passes of DGD ns/name that started
// after t and have returned, and how many there were.
func (e *Env) LongestPassSince(ns, name string, t time.Time) (time.Duration, int) {
	var longest time.Duration
	passes := e.passes.since(ns+"/"+name, t)
	for _, p := range passes {
		longest = max(longest, p.took)
	}
	return longest, len(passes)
}

// passLog records the operator's reconcile passes per DGD (app.Options.Middleware).
type passLog struct {
	mu     sync.Mutex
	passes map[string][]pass // DGD -> every pass that returned
}

// pass is one reconcile pass: when it started and how long it took.
type pass struct {
	start time.Time
	took  time.Duration
}

func (l *passLog) wrap(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
		start := time.Now()
		res, err := r.Reconcile(ctx, req)
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.passes == nil {
			l.passes = map[string][]pass{}
		}
		l.passes[req.String()] = append(l.passes[req.String()], pass{start: start, took: time.Since(start)})
		return res, err
	})
}

func (l *passLog) since(key string, t time.Time) []pass {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []pass
	for _, p := range l.passes[key] {
		if p.start.After(t) {
			out = append(out, p)
		}
	}
	return out
}

func (e *Env) stopWith(err error) error {
	_ = e.Stop()
	return err
}

// Stop stops the operator and the API server (every process it started).
func (e *Env) Stop() error {
	_ = e.stopOperator()
	if e.proxy != nil {
		_ = e.proxy.Close()
		_ = os.RemoveAll(e.proxyDir)
	}
	if e.stopConv != nil {
		e.stopConv()
	}
	if e.certDir != "" {
		_ = os.RemoveAll(e.certDir)
	}
	return e.env.Stop()
}

func zapLevel() zapLevelT {
	if os.Getenv("TEST_VERBOSE") != "" {
		return -2
	}
	return 2 // errors only
}
