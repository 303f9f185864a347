// Package e2e holds the end-to-end suite: the operator against a real local control plane
// (test/cluster: kube-apiserver, kube-controller-manager, kube-scheduler, KWOK GPU nodes)
// with an invariant watcher that fails a test at the first violation it observes.
package e2e

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/invariants"
)

// Watcher observes every Pod, Deployment and DGD event of one namespace and checks
// ROLLOUT.md's invariants on each:
//   - surge, at every workload event: replicas set per worker service <= R + maxSurge;
//   - availability, at every pod event: ready replicas per worker service (pods, or
//     gangs whose every pod is ready and not terminating) >= R - maxUnavailable, once the service first reached that floor (not under
//     strategy Recreate, which stops the old revision before starting the new one);
//   - isolation, at every pod event: no effective Dynamo namespace
//     (DYN_NAMESPACE-DYN_NAMESPACE_WORKER_SUFFIX) holds pods of two revisions, and every
//     worker pod's suffix is its revision's hash;
//   - ratio and orphan prevention, at every pass boundary: each status the operator
//     writes records the workloads it planned from, which is the complete result of its
//     previous pass (a pass writes workloads one by one, so states between two writes of
//     one pass are not pass results; ROLLOUT.md's ratio is about what a pass sets).
type Watcher struct {
	c      cache.Cache
	ns     string
	dgd    string
	cancel context.CancelFunc

	mu         sync.Mutex
	violations []string
	floor      map[string]bool
	Stats      Stats
}

// Stats are what the watcher saw over a run.
type Stats struct {
	Events     int
	PeakPods   map[string]int   // per worker service, pods existing at once
	MinReady   map[string]int32 // per worker service, after it first reached its floor
	MaxSkew    float64          // largest ratio skew inside a pool at a pass boundary
	PassStates int              // pass boundaries checked
}

// Watch starts watching namespace ns for the DGD named dgd.
func Watch(ctx context.Context, cfg *rest.Config, ns, dgd string) (*Watcher, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: app.NewScheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	w := &Watcher{c: c, ns: ns, dgd: dgd, floor: map[string]bool{},
		Stats: Stats{PeakPods: map[string]int{}, MinReady: map[string]int32{}}}
	for obj, check := range map[client.Object]func(){
		&corev1.Pod{}: w.checkPods, &appsv1.Deployment{}: w.checkWorkloads, &lwsv1.LeaderWorkerSet{}: w.checkWorkloads,
		&v1alpha1.DynamoGraphDeployment{}: w.checkPass,
	} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(handler(w, check)); err != nil {
			return nil, err
		}
	}
	ctx, w.cancel = context.WithCancel(ctx)
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("watcher cache did not sync")
	}
	return w, nil
}

func handler(w *Watcher, check func()) toolscache.ResourceEventHandlerFuncs {
	run := func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.Stats.Events++
		check()
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { run() },
		UpdateFunc: func(any, any) { run() },
		DeleteFunc: func(any) { run() },
	}
}

// Stop stops watching.
func (w *Watcher) Stop() { w.cancel() }

// Violations returns every violation seen so far, first first.
func (w *Watcher) Violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.violations...)
}

// Snapshot returns a copy of the statistics.
func (w *Watcher) Snapshot() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.Stats
	s.PeakPods, s.MinReady = map[string]int{}, map[string]int32{}
	for k, v := range w.Stats.PeakPods {
		s.PeakPods[k] = v
	}
	for k, v := range w.Stats.MinReady {
		s.MinReady[k] = v
	}
	return s
}

func (w *Watcher) fail(v ...string) {
	w.violations = append(w.violations, v...)
}

func (w *Watcher) services() ([]invariants.Service, bool) {
	d, ok := w.get()
	if !ok {
		return nil, false
	}
	return invariants.ServicesOf(d), true
}

func (w *Watcher) get() (*v1alpha1.DynamoGraphDeployment, bool) {
	var d v1alpha1.DynamoGraphDeployment
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: w.dgd}, &d); err != nil {
		return nil, false
	}
	return &d, true
}

// checkWorkloads checks surge on the replicas set on every worker Deployment and
// LeaderWorkerSet.
func (w *Watcher) checkWorkloads() {
	services, ok := w.services()
	if !ok {
		return
	}
	ctx, sel := context.Background(), client.MatchingLabels{v1alpha1.LabelGraph: w.dgd}
	var ws []invariants.Workload
	add := func(o metav1.Object, replicas *int32) {
		if h := o.GetLabels()[v1alpha1.LabelWorkerHash]; h != "" && o.GetDeletionTimestamp().IsZero() {
			ws = append(ws, invariants.Workload{Service: o.GetLabels()[v1alpha1.LabelService], Hash: h, Spec: ptr.Deref(replicas, 1)})
		}
	}
	var deps appsv1.DeploymentList
	if err := w.c.List(ctx, &deps, client.InNamespace(w.ns), sel); err == nil {
		for i := range deps.Items {
			add(&deps.Items[i], deps.Items[i].Spec.Replicas)
		}
	}
	var lwss lwsv1.LeaderWorkerSetList
	if err := w.c.List(ctx, &lwss, client.InNamespace(w.ns), sel); err == nil {
		for i := range lwss.Items {
			add(&lwss.Items[i], lwss.Items[i].Spec.Replicas)
		}
	}
	w.fail(invariants.CheckSurge(services, ws)...)
}

// checkPass checks ratio and orphan prevention on the state the operator last planned from.
func (w *Watcher) checkPass() {
	var d v1alpha1.DynamoGraphDeployment
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: w.dgd}, &d); err != nil {
		return
	}
	services := invariants.ServicesOf(&d)
	var ws []invariants.Workload
	for _, name := range d.WorkerServiceNames() {
		for _, wl := range d.Status.Services[name].Workloads {
			ws = append(ws, invariants.Workload{Service: name, Hash: fmt.Sprint(wl.Revision), Spec: wl.Replicas})
		}
	}
	w.Stats.PassStates++
	if skew := invariants.MaxSkew(services, ws); skew > w.Stats.MaxSkew {
		w.Stats.MaxSkew = skew
	}
	w.fail(invariants.CheckPools(services, ws)...)
}
