// Package bench holds the benchmarks that need the local control plane (make bench).
//
// P1: in one run on the local control plane with one KWOK pod-ready delay, the time to
// roll a plain Deployment of 8 replicas (maxSurge 1, maxUnavailable 0) against the time
// to roll a Deployment-backed DGD worker service of 8 replicas with the same settings,
// and the API writes the operator made (targets: ratio <= 1.05, <= 3 writes per step,
// 0 in steady state). The DGD is created and changed in v1beta1, Dynamo's current API;
// a second DGD arm does it in v1alpha1, as a user applying manifests of the old API
// would, and counts the conversion webhook's requests that costs. Three arms roll no
// DGD but tell what its pods cost apart from the operator (p1_arms_test.go): Dynamo's
// own objects (a Deployment of the DGD's rendered pods and the component's Service)
// rolled by the Deployment controller, and the least any controller can do with a
// Deployment per revision, on bare pods and on the DGD's pods with a Service per
// revision. Each rollout is timed by a watch, as kubectl rollout status does.
// P1_TRACE=<prefix> writes each round's timeline (p1_trace_test.go).
package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/harness"
)

// Replicas and PodReadyDelay are P1's fixed parameters.
const (
	Replicas      = 8
	PodReadyDelay = time.Second
)

// writeCounter counts the operator's mutating API requests by kind of target.
type writeCounter struct {
	workloads, status, events, other atomic.Int64
	// dgd counts the writes above that are of a DGD (its status, mostly).
	dgd  atomic.Int64
	next http.RoundTripper
}

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	activeTrace.Load().request(r)
	if r.Method != http.MethodGet {
		if contains(r.URL.Path, "/dynamographdeployments") {
			w.dgd.Add(1)
		}
		switch p := r.URL.Path; {
		case contains(p, "/events"):
			w.events.Add(1)
		case contains(p, "/status"):
			w.status.Add(1)
		case contains(p, "/deployments"):
			w.workloads.Add(1)
		default:
			w.other.Add(1)
		}
	}
	return w.next.RoundTrip(r)
}

func (w *writeCounter) total() int64 {
	return w.workloads.Load() + w.status.Load() + w.events.Load() + w.other.Load()
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func BenchmarkP1DeploymentVsDGD(b *testing.B) {
	if _, err := os.Stat(filepath.Join(cluster.RepoRoot(), "bin", "kube-controller-manager")); err != nil {
		b.Skip("bin/kube-controller-manager is missing: run make cluster-bins")
	}
	ctrl.SetLogger(logr.Discard())
	ctx := context.Background()
	cl, err := cluster.Start(ctx, cluster.Options{Nodes: 4, PodReadyDelay: PodReadyDelay, Profiling: tracePrefix != ""})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cl.Stop() }()
	if err := cl.InstallCRDs(ctx, filepath.Join(cluster.RepoRoot(), "config", "crd", "bases")); err != nil {
		b.Fatal(err)
	}
	k8s, err := client.NewWithWatch(cl.Config, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	counter := startOperator(b, cl.Config)
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("p1-%d", i)
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
		trace := startTrace(b, cl, ns)
		dep := rollDeployment(b, k8s, trace, ns)
		dgd := rollDGD(b, k8s, counter, trace, ns, true)
		// One conversion a write of the DGD, the v1alpha1 watch cache's (rollDGD); more
		// means something reads the DGD in v1alpha1, as this benchmark's polling once did
		// (324 requests a rollout). The cache converts after the write, so the count
		// may take in a write before the rollout or miss one of its last.
		if dgd.converted > float64(dgd.dgdWrites)+2 {
			b.Fatalf("the conversion webhook answered %.0f requests over the rollout of a DGD made in v1beta1, which was written %d times: something reads it in v1alpha1", dgd.converted, dgd.dgdWrites)
		}
		alpha := rollDGDInOwnNamespace(b, k8s, counter, trace, ns+"-v1alpha1")
		dyn := rollDynamo(b, k8s, trace, ns)
		cs := kubernetes.NewForConfigOrDie(cl.Config)
		floor := rollFloor(b, k8s, cs, trace, ns, "floor", nil)
		floorSvc := rollFloor(b, k8s, cs, trace, ns, "floorsvc", dgdTemplate(b, k8s, ns))
		trace.stop()
		ratio := dgd.took.Seconds() / dep.Seconds()
		perStep := float64(dgd.writes) / float64(max(dgd.steps, 1))
		b.ReportMetric(dep.Seconds(), "deployment-s")
		b.ReportMetric(dgd.took.Seconds(), "dgd-s")
		b.ReportMetric(ratio, "ratio")
		b.ReportMetric(alpha.took.Seconds(), "dgd-v1alpha1-s")
		b.ReportMetric(alpha.took.Seconds()/dep.Seconds(), "ratio-v1alpha1")
		b.ReportMetric(alpha.converted, "conversions-v1alpha1")
		b.ReportMetric(dyn.Seconds(), "dynamo-s")
		b.ReportMetric(dgd.took.Seconds()/dyn.Seconds(), "ratio-dynamo")
		b.ReportMetric(floor.Seconds(), "floor-s")
		b.ReportMetric(floor.Seconds()/dep.Seconds(), "ratio-floor")
		b.ReportMetric(floorSvc.Seconds(), "floorsvc-s")
		b.ReportMetric(dgd.took.Seconds()/floorSvc.Seconds(), "ratio-floorsvc")
		b.ReportMetric(perStep, "writes/step")
		b.ReportMetric(float64(dgd.steady), "steady-writes")
		b.ReportMetric(dgd.converted, "conversions")
		fmt.Printf("P1 (%d replicas, maxSurge 1, maxUnavailable 0, pod-ready delay %s): Deployment %.2fs, DGD %.2fs, ratio %.3f (target <= 1.05)\n"+
			"    the DGD created and changed in v1alpha1: %.2fs, ratio %.3f, %.0f conversion webhook requests (in v1beta1: %.0f, for %d writes of the DGD)\n"+
			"    Dynamo's objects (the DGD's pods and their Service) rolled by a Deployment: %.2fs, the DGD's ratio to it %.3f\n"+
			"    the least a controller does with a Deployment per revision: bare pods %.2fs (ratio to the Deployment %.3f); the DGD's pods and a Service per revision %.2fs, the DGD's ratio to it %.3f\n"+
			"    operator API writes: %d workload+status writes over %d steps = %.2f/step (target <= 3), plus %d Event writes; %d in steady state (target 0)\n"+
			"    the operator's passes: %d taking %.0f ms (%.1f ms each)\n",
			Replicas, PodReadyDelay, dep.Seconds(), dgd.took.Seconds(), ratio,
			alpha.took.Seconds(), alpha.took.Seconds()/dep.Seconds(), alpha.converted, dgd.converted, dgd.dgdWrites,
			dyn.Seconds(), dgd.took.Seconds()/dyn.Seconds(),
			floor.Seconds(), floor.Seconds()/dep.Seconds(), floorSvc.Seconds(), dgd.took.Seconds()/floorSvc.Seconds(),
			dgd.writes, dgd.steps, perStep, dgd.events, dgd.steady, dgd.passCount, dgd.passTime*1000, dgd.passTime*1000/float64(max(dgd.passCount, 1)))
	}
}

func startOperator(b *testing.B, cfg *rest.Config) *writeCounter {
	counter := &writeCounter{}
	// /convert is served by this process, outside the operator's counted requests.
	convCtx, stopConv := context.WithCancel(context.Background())
	b.Cleanup(stopConv)
	if err := app.LocalConversion(convCtx, cfg); err != nil {
		b.Fatal(err)
	}
	opCfg := rest.CopyConfig(cfg)
	opCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	mgr, err := app.NewManager(opCfg, app.Options{Manager: ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// -count > 1 starts a manager per round in one process: the controller's name
		// is registered once per process otherwise.
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go func() { _ = mgr.Start(ctx) }()
	return counter
}

// rollDeployment creates a ready Deployment, changes its image and times the rollout
// until kubectl rollout status would call it complete.
func rollDeployment(b *testing.B, k8s client.WithWatch, trace *p1Trace, ns string) time.Duration {
	labels := map[string]string{"app": "plain"}
	return rollPlain(b, k8s, trace, p1Deployment(ns, "plain", labels, withPods(nil, labels, "vllm:v1")))
}

// rollPlain creates d, waits for it to be ready, changes its first container's image
// and times the rollout until kubectl rollout status would call it complete, then
// deletes it (freeing the fake GPUs).
func rollPlain(b *testing.B, k8s client.WithWatch, trace *p1Trace, d *appsv1.Deployment) time.Duration {
	ctx := context.Background()
	if err := k8s.Create(ctx, d); err != nil {
		b.Fatal(err)
	}
	done := func(o runtime.Object) bool { return deploymentDone(o.(*appsv1.Deployment)) }
	watchUntil(b, k8s, &appsv1.DeploymentList{}, d.Namespace, d.Name, done)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		b.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "vllm:v2"
	begin := time.Now()
	trace.begin(d.Name)
	if err := k8s.Update(ctx, d); err != nil {
		b.Fatal(err)
	}
	watchUntil(b, k8s, &appsv1.DeploymentList{}, d.Namespace, d.Name, done)
	took := time.Since(begin)
	trace.end(d.Name)
	_ = k8s.Delete(ctx, d)
	return took
}

func p1Deployment(ns, name string, labels map[string]string, tmpl corev1.PodTemplateSpec) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: tmpl,
		}}
}

// deploymentDone is kubectl rollout status's complete.
func deploymentDone(d *appsv1.Deployment) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == Replicas && s.Replicas == Replicas && s.AvailableReplicas == Replicas
}

// dgdRollout is what rollDGD measured.
type dgdRollout struct {
	took                          time.Duration
	steps, writes, events, steady int64
	// converted counts the conversion webhook's requests over the rollout, dgdWrites
	// the writes of the DGD over it (the test's update and the operator's).
	converted float64
	dgdWrites int64
	passCount uint64
	passTime  float64
}

// rollDGD does the same with a DGD worker service and counts the operator's writes:
// over the rollout (until the drained revision is deleted), per step (a pass that moved
// replicas), and in steady state (a reconcile triggered after it, which must write
// nothing). beta creates and changes the DGD in v1beta1, Dynamo's current API; else in
// v1alpha1, whose entry in the DGD's managedFields has the API server convert the DGD
// through the webhook at every status write of the operator's (the field manager
// compares the old and new objects in each manager's version: about six requests a
// write, where a DGD made in v1beta1 costs one: the API server keeps a watch cache per
// served version, and the v1alpha1 one converts every write of a DGD it reads from etcd,
// whoever wrote it and in whatever version; apiextensions-apiserver v0.36.2,
// pkg/apiserver/customresource_handler.go, gives each served version its own storage
// whose codec decodes into that version, decoderVersion).
func rollDGD(b *testing.B, k8s client.WithWatch, counter *writeCounter, trace *p1Trace, ns string, beta bool) dgdRollout {
	ctx := context.Background()
	arm := "dgd-v1alpha1"
	if beta {
		k8s, arm = conversion.NewWithWatch(k8s), "dgd"
	}
	obj := harness.NewDGD(ns, "p1").Service("worker", "worker", "", Replicas, "vllm:v1").Rollout("1", "0").Obj()
	obj.Spec.Services["worker"].Resources = &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1"}}
	if err := k8s.Create(ctx, obj); err != nil {
		b.Fatal(err)
	}
	waitFor(b, func() bool { return dgdComplete(k8s, ns, 1) && oldGone(k8s, ns) })
	stepsBefore, eventsBefore, before := metric("dgd_rollout_steps_total", ns), counter.events.Load(), counter.total()
	var live v1alpha1.DynamoGraphDeployment
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), &live); err != nil {
		b.Fatal(err)
	}
	harness.SetImage(&live, "vllm:v2")
	convBefore, dgdWritesBefore := conversions(), counter.dgd.Load()
	passesBefore, passTimeBefore := passes()
	begin := time.Now()
	trace.begin(arm)
	if err := k8s.Update(ctx, &live); err != nil {
		b.Fatal(err)
	}
	watchUntil(b, k8s, &v1beta1.DynamoGraphDeploymentList{}, ns, "p1", func(o runtime.Object) bool { return dgdDone(o.(*v1beta1.DynamoGraphDeployment), 2) })
	r := dgdRollout{took: time.Since(begin)}
	trace.end(arm)
	r.converted = conversions() - convBefore
	r.dgdWrites = counter.dgd.Load() - dgdWritesBefore + 1 // and the test's update
	n, t := passes()
	r.passCount, r.passTime = n-passesBefore, t-passTimeBefore
	waitFor(b, func() bool { return oldGone(k8s, ns) && statusShowsOneRevision(k8s, ns) })
	r.steps = int64(metric("dgd_rollout_steps_total", ns) - stepsBefore)
	r.events = counter.events.Load() - eventsBefore
	r.writes = counter.total() - before - r.events
	r.steady = steadyWrites(b, k8s, counter, ns)
	return r
}

// rollDGDInOwnNamespace rolls a DGD created and changed in v1alpha1 in a namespace of
// its own, then deletes it and waits for its pods to go, so that the arms after it run
// beside no more pods than before it.
func rollDGDInOwnNamespace(b *testing.B, k8s client.WithWatch, counter *writeCounter, trace *p1Trace, ns string) dgdRollout {
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	r := rollDGD(b, k8s, counter, trace, ns, false)
	if err := k8s.Delete(ctx, &v1beta1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p1"}}); err != nil {
		b.Fatal(err)
	}
	waitNoPods(b, k8s, client.InNamespace(ns))
	return r
}

// waitNoPods waits until no pod that opts select is left, so that the arms after one
// run beside no more pods than before it.
func waitNoPods(b *testing.B, k8s client.Client, opts ...client.ListOption) {
	waitFor(b, func() bool {
		var pods corev1.PodList
		return k8s.List(context.Background(), &pods, opts...) == nil && len(pods.Items) == 0
	})
}

// passes reads the operator's DGD reconciles so far and the seconds they took
// (controller-runtime's controller_runtime_reconcile_time_seconds histogram).
func passes() (uint64, float64) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, 0
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "dynamographdeployment" {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

// conversions counts the requests the conversion webhook (served in this process) has
// answered: during the timed rollout only the test's own update of the DGD should need
// one, as neither the operator nor the polling reads another version than the stored.
func conversions() float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == "controller_runtime_webhook_requests_total" {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// steadyWrites touches the frontend Deployment (the Owns watch triggers a reconcile),
// waits until that reconcile has returned, and counts what the operator wrote.
func steadyWrites(b *testing.B, k8s client.Client, counter *writeCounter, ns string) int64 {
	ctx := context.Background()
	var fe appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p1-frontend"}, &fe); err != nil {
		b.Fatal(err)
	}
	reconciles, before := metric("controller_runtime_reconcile_total", ""), counter.total()
	patch := client.MergeFrom(fe.DeepCopy())
	fe.Labels["touched"] = "yes"
	if err := k8s.Patch(ctx, &fe, patch); err != nil {
		b.Fatal(err)
	}
	waitFor(b, func() bool { return metric("controller_runtime_reconcile_total", "") > reconciles })
	return counter.total() - before
}

// metric sums a counter from the operator's (in-process) metrics registry, filtered by
// a namespace label when ns is set, or by the DGD controller otherwise.
func metric(name, ns string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if (ns != "" && l.GetName() == "namespace" && l.GetValue() == ns) ||
					(ns == "" && l.GetName() == "controller" && l.GetValue() == "dynamographdeployment") {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// dgdComplete polls the DGD in its storage version, v1beta1, as the operator reads it:
// polled as v1alpha1 every 20 ms, each read made the API server call the conversion
// webhook (served in this process) and both ate into the two cores the DGD's rollout
// was timed on, which the Deployment's polling does not.
func dgdComplete(k8s client.Client, ns string, rev int64) bool {
	var d v1beta1.DynamoGraphDeployment
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "p1"}, &d); err != nil {
		return false
	}
	return dgdDone(&d, rev)
}

// dgdDone: revision rev rolled out with every worker replica ready.
func dgdDone(d *v1beta1.DynamoGraphDeployment, rev int64) bool {
	ru := d.Status.RollingUpdate
	return d.Status.UpdateRevisionNumber == rev && ru != nil && ru.Phase == v1alpha1.RolloutCompleted &&
		d.Status.Components["worker"].ReadyReplicas == Replicas
}

func oldGone(k8s client.Client, ns string) bool {
	var list appsv1.DeploymentList
	_ = k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelGraph: "p1"})
	return len(list.Items) == 2 // frontend + the new worker revision
}

func statusShowsOneRevision(k8s client.Client, ns string) bool {
	var d v1beta1.DynamoGraphDeployment
	_ = k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "p1"}, &d)
	return len(d.Status.Components["worker"].Workloads) == 1
}

// watchUntil watches one object until cond holds for it, as kubectl rollout status
// does, and times both rollouts so: polling every 20 ms, as P1 did until Nov 27, cost
// the API server far more for the DGD (a custom resource, read from etcd and decoded
// against its schema at each GET) than for the Deployment, on the two cores the
// rollouts are timed on.
func watchUntil(b *testing.B, k8s client.WithWatch, list client.ObjectList, ns, name string, cond func(runtime.Object) bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := k8s.Watch(ctx, list, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			b.Fatalf("watching %s/%s: %v", ns, name, ev.Object)
		}
		if cond(ev.Object) {
			return
		}
	}
	b.Fatalf("timed out watching %s/%s", ns, name)
}

func waitFor(b *testing.B, cond func() bool) {
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func resourceOne() resource.Quantity { return resource.MustParse("1") }
