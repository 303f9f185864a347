// Package e2e holds the end-to-end suite: the operator against a real local control plane
// (test/cluster: kube-apiserver, kube-controller-manager, kube-scheduler, KWOK GPU nodes)
// with an invariant watcher that judges every state of the live objects and fails a test
// at its end on any violation it saw, and at the first one it reports while the test waits.
package e2e

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/invariants"
)

// Watcher observes one DGD's namespace and checks ROLLOUT.md's invariants on the live
// objects, never on the operator's account of them:
//   - surge, at every workload write: replicas set on the live worker workloads per
//     service <= R + maxSurge;
//   - prefill never without decode, at every workload write: the operator grows decode
//     first and shrinks prefill first, so no state between two writes (nor a crash
//     there) leaves a pool with prefill replicas and no decode replica;
//   - ratio and orphan prevention, at every pass boundary: the live workloads as of each
//     status write of the DGD (a pass writes its status after its workload writes);
//     the status's own account of the workloads is checked against them, not instead
//     of them.
//
// Workload states are read back by resourceVersion (history) once every event up to
// them has arrived: Flush waits for that, then judges every write since the last Flush.
// With Options.Pods, pod states are judged as the pod informer delivers them:
// availability (ready replicas per worker service, pods or whole gangs, >= R -
// maxUnavailable once the service first reached that floor; not under Recreate),
// isolation (no effective Dynamo namespace holds pods of two revisions, every worker
// pod's suffix is its revision's hash) and, under Recreate, no pods of two worker
// revisions at once.
//
// Workloads are read by kind (Deployment, LeaderWorkerSet, Grove's PodClique and
// PodCliqueScalingGroup under their PodCliqueSet: see history), those the DGD controls.
// Every violation is kept; a test asserts Violations after Flush at its end, so that
// nothing the watcher sees after its last wait goes unjudged.
type Watcher struct {
	c      cache.Cache
	reader client.Client // the API server, for Flush
	ns     string
	dgd    string
	opts   Options
	cancel context.CancelFunc

	mu         sync.Mutex
	violations []string
	seen       map[string]bool
	floor      map[string]bool
	h          *history
	// judged and judgedWrites: status writes and workload writes up to these
	// resourceVersions are judged.
	judged, judgedWrites uint64
	Stats                Stats
}

// Options say what a Watcher watches besides Deployments and the DGD.
type Options struct {
	// Pods: availability, isolation and Recreate's no-overlap on every pod event.
	Pods bool
	// LeaderWorkerSets and Grove record those workload kinds (their CRDs must exist).
	LeaderWorkerSets, Grove bool
}

// Stats are what the watcher saw over a run.
type Stats struct {
	Events     int
	PeakPods   map[string]int   // per worker service, pods existing at once
	MinReady   map[string]int32 // per worker service, after it first reached its floor
	MaxSkew    float64          // largest ratio skew inside a pool of the live workloads at a pass boundary
	PassStates int              // pass boundaries (status writes) judged on the live workloads
}

// Watch starts watching namespace ns for the DGD named dgd: pods, Deployments and
// LeaderWorkerSets (the end-to-end suites).
func Watch(ctx context.Context, cfg *rest.Config, ns, dgd string) (*Watcher, error) {
	return WatchWith(ctx, cfg, ns, dgd, Options{Pods: true, LeaderWorkerSets: true})
}

// WatchWith starts watching with opts.
func WatchWith(ctx context.Context, cfg *rest.Config, ns, dgd string, opts Options) (*Watcher, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: app.NewScheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	reader, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		return nil, err
	}
	w := &Watcher{c: c, reader: reader, ns: ns, dgd: dgd, opts: opts, seen: map[string]bool{}, floor: map[string]bool{}, h: newHistory(),
		Stats: Stats{PeakPods: map[string]int{}, MinReady: map[string]int32{}}}
	kinds := append(w.workloadKinds(), &v1alpha1.DynamoGraphDeployment{})
	if opts.Pods {
		kinds = append(kinds, &corev1.Pod{})
	}
	for _, obj := range kinds {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(w.handler(obj)); err != nil {
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

// workloadKinds are the workload types recorded.
func (w *Watcher) workloadKinds() []client.Object {
	out := []client.Object{&appsv1.Deployment{}}
	if w.opts.LeaderWorkerSets {
		out = append(out, &lwsv1.LeaderWorkerSet{})
	}
	if w.opts.Grove {
		out = append(out, &grovev1.PodCliqueSet{}, &grovev1.PodClique{}, &grovev1.PodCliqueScalingGroup{})
	}
	return out
}

func (w *Watcher) handler(kind client.Object) toolscache.ResourceEventHandlerFuncs {
	_, pods := kind.(*corev1.Pod)
	run := func(obj any, gone bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := obj.(client.Object)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.Stats.Events++
		if pods {
			w.checkPods()
			return
		}
		if d, ok := o.(*v1alpha1.DynamoGraphDeployment); ok && d.Name != w.dgd {
			return
		}
		w.h.record(o, gone)
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { run(o, false) },
		UpdateFunc: func(_, o any) { run(o, false) },
		DeleteFunc: func(o any) { run(o, true) },
	}
}

// Stop stops watching.
func (w *Watcher) Stop() { w.cancel() }

// Violations returns every distinct violation seen so far, first first.
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

// failOnce records msg unless a violation of the same key was recorded (one state
// that lasts several writes is one violation).
func (w *Watcher) failOnce(key, msg string) {
	if w.seen[key] {
		return
	}
	w.fail(key)
	w.violations[len(w.violations)-1] = msg
}

func (w *Watcher) fail(v ...string) {
	if w.seen == nil {
		w.seen = map[string]bool{}
	}
	for _, x := range v {
		if !w.seen[x] {
			w.seen[x] = true
			w.violations = append(w.violations, x)
		}
	}
}

func (w *Watcher) get() (*v1alpha1.DynamoGraphDeployment, bool) {
	var d v1alpha1.DynamoGraphDeployment
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: w.dgd}, &d); err != nil {
		return nil, false
	}
	return &d, true
}

func workloadsOf(ls []liveWorkload) []invariants.Workload {
	out := make([]invariants.Workload, len(ls))
	for i, l := range ls {
		out[i] = l.Workload
	}
	return out
}

// checkWorkloads checks surge and prefill-with-decode on the live workloads as of
// every workload write up to upTo not yet judged. States are read back by
// resourceVersion, not from the informers' latest objects: those of two objects can
// arrive out of order and make a state that never was.
func (w *Watcher) checkWorkloads(upTo uint64) {
	for _, rv := range w.h.writes(w.judgedWrites) {
		if rv > upTo {
			break
		}
		w.judgedWrites = rv
		d := w.h.dgdAt(rv)
		if d == nil || !d.DeletionTimestamp.IsZero() {
			continue
		}
		services := invariants.ServicesOf(d)
		live := w.h.workers(rv, d.UID)
		ws := workloadsOf(live)
		for _, v := range append(invariants.CheckSurge(services, ws), invariants.CheckPrefillHasDecode(services, ws)...) {
			w.failOnce(v, fmt.Sprintf("%s at resourceVersion %d; live %s", v, rv, describeLive(live)))
		}
	}
}

// Flush waits until the watcher has received every event up to now of the DGD and its
// workloads (a list of each kind from the API server, compared object by object), then
// judges every pass boundary up to then. It fails when the watcher does not catch up
// within 30 s.
func (w *Watcher) Flush(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		upTo, behind, err := w.caughtUp(ctx)
		if err == nil && behind == "" {
			w.mu.Lock()
			w.checkWorkloads(upTo)
			w.judge(upTo)
			w.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the watcher of %s/%s did not catch up with the API server within 30 s: %s (%v)", w.ns, w.dgd, behind, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// caughtUp lists every recorded kind and reports whether the history holds each
// listed object's version or a later one, and no object the list no longer has
// unless created after it; upTo is the oldest list's resourceVersion.
func (w *Watcher) caughtUp(ctx context.Context) (upTo uint64, behind string, err error) {
	type listed struct {
		kind  string
		rv    uint64
		items map[string]uint64
	}
	var lists []listed
	for _, obj := range w.workloadKinds() {
		gvk, err := w.reader.GroupVersionKindFor(obj)
		if err != nil {
			return 0, "", err
		}
		ul := &metav1.PartialObjectMetadataList{}
		ul.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := w.reader.List(ctx, ul, client.InNamespace(w.ns)); err != nil {
			return 0, "", err
		}
		l := listed{kind: gvk.Kind, rv: parseRV(ul.GetResourceVersion()), items: map[string]uint64{}}
		for _, it := range ul.Items {
			l.items[it.Name] = parseRV(it.ResourceVersion)
		}
		lists = append(lists, l)
	}
	var d v1alpha1.DynamoGraphDeployment
	dgdErr := w.reader.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.dgd}, &d)
	if dgdErr != nil && !apierrors.IsNotFound(dgdErr) {
		return 0, "", dgdErr
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	upTo = math.MaxUint64
	for _, l := range lists {
		upTo = min(upTo, l.rv)
		for name, rv := range l.items {
			if w.h.newest(objKey{l.kind, name}) < rv {
				return 0, fmt.Sprintf("%s %s at resourceVersion %d not seen yet", l.kind, name, rv), nil
			}
		}
		for k, rv := range w.h.latest() {
			if _, ok := l.items[k.name]; k.kind == l.kind && !ok && rv <= l.rv {
				return 0, fmt.Sprintf("the deletion of %s %s not seen yet", k.kind, k.name), nil
			}
		}
	}
	switch latest := w.h.latestDGD(); {
	case dgdErr == nil && (latest == nil || parseRV(latest.ResourceVersion) < parseRV(d.ResourceVersion)):
		return 0, fmt.Sprintf("DGD %s at resourceVersion %s not seen yet", w.dgd, d.ResourceVersion), nil
	case dgdErr != nil && latest != nil && !w.h.dgdGone:
		return 0, fmt.Sprintf("the deletion of DGD %s not seen yet", w.dgd), nil
	}
	return upTo, "", nil
}

// judge checks ratio and orphans on the live workloads at every status write not yet
// judged up to upTo, and the status's account of its worker workloads against them.
func (w *Watcher) judge(upTo uint64) {
	for _, rv := range w.h.statusWrites(w.judged) {
		if rv > upTo {
			break
		}
		w.judged = rv
		st, spec := w.h.dgdAt(rv), w.h.specOf(rv)
		if st == nil || !st.DeletionTimestamp.IsZero() {
			continue
		}
		services := invariants.ServicesOf(spec)
		live := w.h.workers(rv, st.UID)
		ws := workloadsOf(live)
		w.Stats.PassStates++
		w.Stats.MaxSkew = max(w.Stats.MaxSkew, invariants.MaxSkew(services, ws))
		at := fmt.Sprintf("at the status write of resourceVersion %d (generation %d)", rv, st.Status.ObservedGeneration)
		for _, v := range invariants.CheckPools(services, ws) {
			w.fail(fmt.Sprintf("%s %s; live %s", v, at, describeLive(live)))
		}
		if v := statusAgrees(st, workersOnly(spec, live)); v != "" {
			w.fail(fmt.Sprintf("status %s %s", v, at))
		}
	}
}

// workersOnly are the workloads of live that are no frontend's: a cohort's frontend
// workload carries a worker hash too (test/observe judges cohorts).
func workersOnly(spec *v1alpha1.DynamoGraphDeployment, live []liveWorkload) []liveWorkload {
	var out []liveWorkload
	for _, l := range live {
		if svc := spec.Spec.Services[l.Service]; svc == nil || svc.ComponentType != v1alpha1.ComponentTypeFrontend {
			out = append(out, l)
		}
	}
	return out
}

// statusAgrees compares the worker workloads a status reports (revision > 0) with the
// live ones: the same replicas on each, and no live worker workload with replicas that
// the status leaves out. It returns the differences.
func statusAgrees(d *v1alpha1.DynamoGraphDeployment, live []liveWorkload) string {
	reported := map[string]int32{}
	for _, svc := range d.Status.Services {
		if svc.ComponentType == v1alpha1.ComponentTypeFrontend {
			continue
		}
		for _, wl := range svc.Workloads {
			if wl.Revision > 0 {
				reported[wl.Name] += wl.Replicas
			}
		}
	}
	actual := map[string]int32{}
	for _, l := range live {
		actual[l.name] = l.Spec
	}
	var diff []string
	for name, n := range reported {
		if a, ok := actual[name]; a != n && (ok || n > 0) {
			diff = append(diff, fmt.Sprintf("%s at %d, live %d", name, n, a))
		}
	}
	for name, a := range actual {
		if _, ok := reported[name]; !ok && a > 0 {
			diff = append(diff, fmt.Sprintf("%s left out, live %d", name, a))
		}
	}
	sort.Strings(diff)
	if len(diff) == 0 {
		return ""
	}
	return "reports " + strings.Join(diff, "; ")
}

func describeLive(ls []liveWorkload) string {
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%s %s (%s@%s)=%d", l.kind, l.name, l.Service, l.Hash, l.Spec))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// StatusWrite is the resourceVersion of the first status write of the DGD the watcher
// saw that satisfies cond, or 0.
func (w *Watcher) StatusWrite(cond func(*v1alpha1.DynamoGraphDeployment) bool) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, rv := range w.h.statusWrites(0) {
		if cond(w.h.dgdAt(rv)) {
			return rv
		}
	}
	return 0
}

// Changes lists, after Flush, what changed on the DGD's worker workloads between two
// resourceVersions (after from, up to to): replicas set (a workload created, deleted or
// scaled) and ready counts.
func (w *Watcher) Changes(from, to uint64) (spec, ready []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.h.latestDGD()
	if d == nil {
		return nil, nil
	}
	return w.h.changes(from, to, d.UID)
}

// Target is one recorded version of a revisioned workload (a worker's, or a cohort's
// frontend): the replicas set on it at that resourceVersion, 0 once it is being
// deleted or gone.
type Target struct {
	RV                  uint64
	Kind, Name, Service string
	Replicas            int32
}

// Targets lists, after Flush, every recorded version of the DGD's workloads of worker
// hash, oldest first (Deployments and LeaderWorkerSets).
func (w *Watcher) Targets(hash string) []Target {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Target
	for k, vs := range w.h.objs {
		if k.kind != "Deployment" && k.kind != "LeaderWorkerSet" {
			continue
		}
		for _, v := range vs {
			if v.hash != hash {
				continue
			}
			t := Target{RV: v.rv, Kind: k.kind, Name: k.name, Service: v.service, Replicas: v.replicas}
			if v.gone || v.deleting {
				t.Replicas = 0
			}
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RV < out[j].RV })
	return out
}
