package harness

import (
	"context"
	"fmt"
	"sync/atomic"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/dgd-rollout/operator/cmd/manager/app"
)

// Watch calls check after every add, update and delete of any of kinds in namespace
// ns, with a reader of a cache that holds them all: an observer that sees every state
// the API server goes through, not only the ones a step-wise test stops at. It
// returns a stop function.
// An empty ns watches every namespace.
func (e *Env) Watch(ctx context.Context, ns string, check func(client.Reader), kinds ...client.Object) (func(), error) {
	opts := cache.Options{Scheme: app.NewScheme()}
	if ns != "" {
		opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	}
	c, err := cache.New(e.Config, opts)
	if err != nil {
		return nil, err
	}
	run := func() { check(c) }
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { run() }, UpdateFunc: func(any, any) { run() }, DeleteFunc: func(any) { run() },
	}
	for _, k := range kinds {
		inf, err := c.GetInformer(ctx, k)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { _ = c.Start(cctx) }()
	if !c.WaitForCacheSync(cctx) {
		cancel()
		return nil, fmt.Errorf("watch cache of %s did not sync", ns)
	}
	return cancel, nil
}

// Reconciles is how many reconciles the operator running in this process has finished
// (controller-runtime's controller_runtime_reconcile_total for the DGD controller): a
// positive signal that it has acted on an event.
func Reconciles() (float64, error) {
	return controllerMetric("controller_runtime_reconcile_total", "controller")
}

// Idle reports whether the DGD controller's work queue is empty and no reconcile is
// running (workqueue_depth and controller_runtime_active_workers).
//
// The gauges are the process's, one series per controller name, and a controller that
// stops leaves its queue's count in workqueue_depth: controller-runtime v0.24.1 shuts
// the queue down with its ready items still counted (pkg/controller/priorityqueue:
// metrics.get runs only when an item is handed to a worker). After RestartOperator, a
// stopped operator whose queue held 7 DGDs kept the depth at 7, and every later wait
// for Idle timed out (a clean-clone make test, Dec 3). What the stopped operators left
// (stoppedDepth, read once each has exited) is not the running operator's.
func Idle() (bool, error) {
	depth, err := controllerMetric("workqueue_depth", "name")
	if err != nil {
		return false, err
	}
	active, err := controllerMetric("controller_runtime_active_workers", "controller")
	return depth-stoppedDepth.Load().(float64) == 0 && active == 0, err
}

// stoppedDepth is what stopped operators left in workqueue_depth (see Idle).
var stoppedDepth atomic.Value

func init() { stoppedDepth.Store(float64(0)) }

// noteStopped records what an operator that has exited left in workqueue_depth.
func noteStopped() error {
	depth, err := controllerMetric("workqueue_depth", "name")
	if err != nil {
		return err
	}
	stoppedDepth.Store(depth)
	return nil
}

func controllerMetric(name, label string) (float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	var n float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == "dynamographdeployment" {
					n += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return n, nil
}
