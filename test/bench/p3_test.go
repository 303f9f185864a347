package bench

// P3: N graphs rolled at once against the 2N plain Deployments that are their workers,
// in one run on the local control plane (KWOK pod-ready delay 1 s, 40 nodes): N DGDs of
// frontend 1 + prefill 2 + decode 1 (maxSurge 1, maxUnavailable 0, backend Deployment),
// every worker image changed at once, against N prefill (2) and N decode (1) plain
// Deployments with the same budgets, rolled by kube-controller-manager. The operator
// runs as its own process (cmd/manager) behind a proxy that records its requests, with
// the API budget the local kube-controller-manager has (QPS 500, burst 1000). A third
// arm, between the two (P3_ORDER changes the order), runs the same N graphs as plain
// objects without the operator (plainGraphs): what the graph's Services,
// ServiceAccounts and pods cost Kubernetes' own controllers, so that the DGDs' ratio to
// it is the operator's own share.
//
//	go test ./test/bench/ -run '^$' -bench P3 -benchtime=1x -timeout 80m   # P3_N=500 by default
//
// Printed: both rollout times and their ratio (target <= 1.2), the create times of the
// N graphs and of the 2N Deployments (target <= 1.5x), the operator's writes per graph
// rollout by verb and resource, its writes per rollout step (target <= 2 workload and
// status writes), its reads, the API server's requests over each arm's rollout, the CPU
// of every process, its peak RSS (target <= 150 MiB), the p50/p99 time from a
// workload's readiness change to the operator's next write for that graph, and its
// writes in a 10 s window of steady state (target 0).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/opproc"
)

// P3 fixed parameters.
const (
	p3Nodes         = 40
	p3PodReadyDelay = time.Second
	p3Workers       = 32 // concurrent client requests of the benchmark itself
)

// p3Flags are the operator's flags in P3: the API budget the local
// kube-controller-manager runs with, and its metrics on p3Metrics.
var p3Flags = []string{"--leader-elect=false", "--metrics-bind-address=" + p3Metrics, "--health-probe-bind-address=0",
	"--kube-api-qps=500", "--kube-api-burst=1000", "--webhook-bind-address=0"}

// p3Metrics is where the operator process serves its Prometheus metrics in P3, and
// p3Pprof its pprof endpoints when P3_PROFILE names a directory: CPU profiles of the
// operator over the DGD rollout, its heap at the end of the create and of the rollout,
// and its log are written there (with P3_DEBUG set, its debug log: it costs the
// operator a third more CPU).
const (
	p3Metrics = "127.0.0.1:18383"
	p3Pprof   = "127.0.0.1:18384"
)

var p3Profile = os.Getenv("P3_PROFILE")

func BenchmarkP3ScaleDGDsVsDeployments(b *testing.B) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("P3_N")); err == nil && v > 0 {
		n = v
	}
	runP3(b, n, b.N, 10*time.Second, p3Unrelated{}, func(r *p3Run) {
		rss, _ := r.op.PeakRSS()
		r.report(b, rss)
	})
}

// BenchmarkP3UnrelatedObjects is P3 with 2,000 Deployments and 200 StatefulSets that
// belong to no DGD left in the cluster (issue 23), made before the operator starts:
// the operator caches only its own workloads and ControllerRevisions (app.CacheOptions),
// so its peak RSS should stay within 10% of BenchmarkP3ScaleDGDsVsDeployments's and its
// rollout time within noise. They run no pods (replicas 0): what is measured is the
// objects, and the ControllerRevision the StatefulSet controller makes for each
// StatefulSet, in the operator's memory, not their pods' load on the cluster.
func BenchmarkP3UnrelatedObjects(b *testing.B) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("P3_N")); err == nil && v > 0 {
		n = v
	}
	runP3(b, n, b.N, 10*time.Second, p3Unrelated{Deployments: 2000, StatefulSets: 200}, func(r *p3Run) {
		rss, _ := r.op.PeakRSS()
		r.report(b, rss)
	})
}

// p3Unrelated is how many Deployments and StatefulSets of no DGD P3 leaves in the
// cluster (namespace p3-unrelated) before the operator starts.
type p3Unrelated struct{ Deployments, StatefulSets int }

// create makes them, each with a pod template the size of a real serving workload's
// (a container with 24 env vars, resources and probes), and waits until
// kube-controller-manager is done with them: a ReplicaSet for every Deployment and a
// ControllerRevision for every StatefulSet (a first run that did not wait for the
// ReplicaSets timed the plain arm's create at 171 s instead of about 25 s at N=20).
func (u p3Unrelated) create(b testing.TB, k8s client.Client) {
	if u.Deployments == 0 && u.StatefulSets == 0 {
		return
	}
	ctx := context.Background()
	const ns = "p3-unrelated"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	pod := func(name string) corev1.PodTemplateSpec {
		c := corev1.Container{Name: "main", Image: "registry.example.com/team/server:1.2.3",
			Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}, PeriodSeconds: 5}}
		for k := range 24 {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%02d", k), Value: fmt.Sprintf("value-of-setting-%02d-for-%s", k, name)})
		}
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	}
	if err := parallel(u.Deployments+u.StatefulSets, func(i int) error {
		if i < u.Deployments {
			name := fmt.Sprintf("other-%04d", i)
			return k8s.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: pod(name)}})
		}
		name := fmt.Sprintf("other-sts-%03d", i-u.Deployments)
		return k8s.Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: pod(name)}})
	}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var revs appsv1.ControllerRevisionList
		if err := k8s.List(ctx, &revs, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		var rss metav1.PartialObjectMetadataList
		rss.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSetList"))
		if err := k8s.List(ctx, &rss, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		if len(revs.Items) >= u.StatefulSets && len(rss.Items) >= u.Deployments {
			fmt.Printf("P3: %d Deployments (%d ReplicaSets), %d StatefulSets (%d ControllerRevisions) of no DGD in %s\n",
				u.Deployments, len(rss.Items), u.StatefulSets, len(revs.Items), ns)
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("P3: %d of %d ReplicaSets, %d of %d ControllerRevisions of the unrelated objects after 5 minutes",
				len(rss.Items), u.Deployments, len(revs.Items), u.StatefulSets)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// runP3 runs P3 at n graphs for rounds rounds on one local control plane and one
// operator process, and hands each finished round to done. steady is the window in
// which the operator's writes in steady state are counted (0: not counted).
// unrelated are made before the operator starts.
func runP3(b testing.TB, n, rounds int, steady time.Duration, unrelated p3Unrelated, done func(*p3Run)) {
	runP3Arms(b, n, rounds, steady, unrelated, p3Order(b), done)
}

// runP3Arms is runP3 with the arms of a round, in order: any of plain, graphs, dgds,
// apply-v1beta1 and apply-v1alpha1 (BenchmarkP3Apply).
func runP3Arms(b testing.TB, n, rounds int, steady time.Duration, unrelated p3Unrelated, order []string, done func(*p3Run)) {
	if _, err := os.Stat(filepath.Join(cluster.RepoRoot(), "bin", "kube-controller-manager")); err != nil {
		b.Skip("bin/kube-controller-manager is missing: run make cluster-bins")
	}
	ctrl.SetLogger(logr.Discard())
	ctx := context.Background()
	opts := cluster.Options{Nodes: p3Nodes, PodReadyDelay: p3PodReadyDelay, Profiling: p3Profile != ""}
	if p3Profile != "" {
		opts.WorkDir = filepath.Join(p3Profile, "cluster") // the components' logs are kept there
	} else if d := os.Getenv("P3_LOGS"); d != "" {
		opts.WorkDir = d // the components' logs are kept, nothing profiled
	}
	cl, err := cluster.Start(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cl.Stop() }()
	if err := cl.InstallCRDs(ctx, filepath.Join(cluster.RepoRoot(), "config", "crd", "bases")); err != nil {
		b.Fatal(err)
	}
	if err := cluster.InstallMissingCRDs(ctx, cl.Config, filepath.Join(cluster.RepoRoot(), "config", "crd", "dynamo")); err != nil {
		b.Fatal(err)
	}
	// This process serves /convert (the operator process serves none).
	convCtx, stopConv := context.WithCancel(ctx)
	defer stopConv()
	if err := app.LocalConversion(convCtx, cl.Config); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	bin, err := opproc.Build(cluster.RepoRoot(), dir)
	if err != nil {
		b.Fatal(err)
	}
	proxy, err := opproc.StartProxy(cl.Config, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	flags := append(append([]string(nil), p3Flags...), strings.Fields(os.Getenv("P3_FLAGS"))...) // e.g. P3_FLAGS=--max-concurrent-reconciles=32
	if p3Profile != "" {
		flags = append(flags, "--pprof-bind-address="+p3Pprof)
	}
	logDir := dir
	if p3Profile != "" {
		logDir = p3Profile // kept, with the profiles
	}
	if os.Getenv("P3_DEBUG") != "" {
		flags = append(flags, "--zap-log-level=debug")
	}
	cfg := rest.CopyConfig(cl.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	k8s, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	// The DGD arm writes its graphs as v1alpha1, as Dynamo's manifests are (every write
	// and each later status write of the operator's pays the conversion webhook, issue
	// 39); P3_WIRE=v1beta1 sends them as the storage version (api/conversion.Client),
	// which measures what the conversions cost the rollout.
	if os.Getenv("P3_WIRE") == "v1beta1" {
		k8s = conversion.NewClient(k8s)
	}
	unrelated.create(b, k8s)
	op, err := opproc.Start(bin, proxy.Kubeconfig, filepath.Join(logDir, "operator.log"), flags...)
	if err != nil {
		b.Fatal(err)
	}
	defer op.Stop()
	for i := 0; i < rounds; i++ {
		r := p3Run{n: n, k8s: k8s, cfg: cfg, proxy: proxy, round: i, cl: cl, op: op, steadyWindow: steady}
		arms := map[string]func(testing.TB){"plain": r.plain, "graphs": r.plainGraphs, "dgds": r.graphs,
			"apply-v1beta1":  func(b testing.TB) { r.applied = append(r.applied, r.applyArm(b, "v1beta1")) },
			"apply-v1alpha1": func(b testing.TB) { r.applied = append(r.applied, r.applyArm(b, "v1alpha1")) }}
		for _, arm := range order {
			arms[arm](b)
		}
		done(&r)
	}
}

// p3Order is the order of the arms in a round: P3_ORDER (a comma-separated permutation
// of plain, graphs and dgds), else plain, graphs, dgds. The arms share one control
// plane, and an arm may run slower for coming later (etcd's history and the API
// server's heap grow): another order tells whether it does.
func p3Order(b testing.TB) []string {
	v := os.Getenv("P3_ORDER")
	if v == "" {
		return []string{"plain", "graphs", "dgds"}
	}
	order := strings.Split(v, ",")
	seen := map[string]bool{}
	for _, a := range order {
		switch a {
		case "plain", "graphs", "dgds":
			seen[a] = true
		default:
			b.Fatalf("P3_ORDER=%s: %q is not an arm (plain, graphs, dgds)", v, a)
		}
	}
	if len(order) != 3 || len(seen) != 3 {
		b.Fatalf("P3_ORDER=%s: want each of plain, graphs and dgds once", v)
	}
	return order
}

// p3Run is one round of P3.
type p3Run struct {
	cl    *cluster.Cluster
	n     int
	k8s   client.Client
	cfg   *rest.Config
	proxy *opproc.Proxy
	op    *opproc.Process
	round int
	// steadyWindow is how long the operator's writes in steady state are counted.
	steadyWindow time.Duration

	plainCreate, plainRoll, dgdCreate, dgdRoll time.Duration
	graphCreate, graphRoll                     time.Duration             // the plain graphs (plainGraphs)
	rssIdle, rssCreate                         int64                     // the operator's peak RSS before the DGDs, and by the end of their create
	createWrites                               int                       // writes but Events over the N creates
	writes                                     map[string]int            // "VERB resource" over the DGD rollout
	graphWrites                                map[string]map[string]int // the same per graph (by DGD name)
	graphEvents                                map[string][]string       // the reasons of the Events the operator created per graph, in order
	readsOfDeleted                             []string                  // GETs of an object the operator had deleted, after its DELETE
	graphSteps                                 map[string]int            // rollout steps per graph
	reads                                      map[string]int            // the same, GET and LIST requests (the cache's watches aside)
	took                                       map[string]time.Duration  // their total answer time
	steps                                      int
	steady                                     int
	latencies, gainLatencies                   []time.Duration // readiness change -> next write (every change, gains)
	plainCost, graphCost, dgdCost              armCost         // what each rollout cost the machine
	applied                                    []applyResult   // BenchmarkP3Apply's arms, in their order
}

// waitFor polls cond until it holds; P3's phases take longer as N grows (2 s per
// graph at most, 3 minutes at least).
func (r *p3Run) waitFor(b testing.TB, what string, cond func() bool) {
	deadline := time.Now().Add(max(3*time.Minute, time.Duration(r.n)*2*time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("P3 N=%d: %s timed out", r.n, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// parallel runs f(i) for i in [0, n) on p3Workers goroutines and returns the first error.
func parallel(n int, f func(i int) error) error {
	var mu sync.Mutex
	var first error
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < p3Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// plain creates and rolls the 2N Deployments.
func (r *p3Run) plain(b testing.TB) {
	r.plainCreate, r.plainRoll, r.plainCost = r.plainArm(b, "plain", 2*r.n, func(ns string, i int) []client.Object {
		return []client.Object{plainDeployment(ns, i, "vllm:v1")}
	}, 2*r.n, 3*r.n)
}

// plainGraphs creates and rolls the same N graphs without the operator: the Deployments
// of each graph's frontend, prefill and decode with the pods the operator renders
// (render.Component.Pod: Dynamo's env, ports, probes, volumes, labels), each worker
// rolled in place by kube-controller-manager with maxSurge 1 / maxUnavailable 0, and a
// Service per component as the operator renders it (discovery labels, selector), and
// the discovery ServiceAccount, Role and RoleBinding the pods run as; the Services are kept
// across the rollout as Dynamo's Grove path keeps its worker Services. It is what a
// Dynamo graph costs Kubernetes' own controllers, so the DGDs' ratio to it is the
// operator's own share. The graph label is renamed so the operator's caches (which
// select it) hold none of these objects.
func (r *p3Run) plainGraphs(b testing.TB) {
	r.graphCreate, r.graphRoll, r.graphCost = r.plainArm(b, "graph", r.n, func(ns string, i int) []client.Object {
		return plainGraph(b, ns, i, "vllm:v1")
	}, 3*r.n, 4*r.n)
}

// plainArm creates objects(ns, i) for i < sets in a new namespace p3-<name>-<round>,
// waits until its deployments Deployments and pods pods are ready, then changes the
// image of the 2N worker Deployments and times kube-controller-manager's rollout
// (profiling the cluster over it when P3_PROFILE names a directory). It returns the
// create and rollout times and what the rollout cost.
func (r *p3Run) plainArm(b testing.TB, name string, sets int, objects func(ns string, i int) []client.Object,
	deployments, pods int) (create, roll time.Duration, cost armCost) {
	ctx := context.Background()
	ns := fmt.Sprintf("p3-%s-%d", name, r.round)
	if err := r.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	c := r.watch(b, ns)
	defer c.stop()
	begin := time.Now()
	if err := parallel(sets, func(i int) error {
		for _, o := range objects(ns, i) {
			if err := r.k8s.Create(ctx, o); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	r.waitFor(b, name+" create", func() bool { return c.plainDone(deployments, "vllm:v1") && c.podsOf(ns) == pods })
	create = time.Since(begin)
	stopCluster := profileCluster(b, r.cl, fmt.Sprintf("%s-%d", name, r.round))
	begin = time.Now()
	done := r.measure(b)
	if err := parallel(2*r.n, func(i int) error {
		patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"vllm:v2"}]}}}}`)
		return r.k8s.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: plainName(i)}}, client.RawPatch("application/strategic-merge-patch+json", patch))
	}); err != nil {
		b.Fatal(err)
	}
	r.waitFor(b, name+" rollout", func() bool { return c.plainDone(deployments, "vllm:v2") && c.podsOf(ns) == pods })
	roll, cost = time.Since(begin), done()
	stopCluster()
	r.deleteNamespace(b, ns, c)
	return create, roll, cost
}

// p3GraphLabel replaces the graph label on plainGraphs' objects.
const p3GraphLabel = "p3.bench/graph"

// plainGraph is graph i's discovery ServiceAccount, Role and RoleBinding, and its
// frontend, prefill and decode Deployments and Services, as the operator renders them
// for a DGD of that shape (harness.NewDGD(...).Disagg(2, 1)), without revisions: one
// Deployment and one Service per component.
func plainGraph(b testing.TB, ns string, i int, image string) []client.Object {
	dgd := harness.NewDGD(ns, fmt.Sprintf("g%04d", i)).Disagg(2, 1, image).Obj()
	cfg := render.Config{DiscoveryBackend: render.DiscoveryKubernetes}
	relabel := func(m map[string]string) {
		if v, ok := m[v1alpha1.LabelGraph]; ok {
			delete(m, v1alpha1.LabelGraph)
			m[p3GraphLabel] = v
		}
		delete(m, v1alpha1.LabelManagedBy)
	}
	rbac := render.DiscoveryRBAC(dgd) // the pods' service account: without it none is admitted
	out := []client.Object{rbac.ServiceAccount, rbac.Role, rbac.Binding}
	for _, o := range out {
		relabel(o.GetLabels())
	}
	for _, name := range []string{"Frontend", "prefill", "decode"} {
		spec := dgd.Spec.Services[name]
		if spec == nil {
			b.Fatalf("P3: the graph has no service %q", name)
		}
		comp := render.Component{DGD: dgd, Name: name, Spec: spec, Config: cfg}
		tmpl, err := comp.Pod(render.RoleMain, nil)
		if err != nil {
			b.Fatal(err)
		}
		relabel(tmpl.Labels)
		svc := comp.Service(fmt.Sprintf("%s-%s", dgd.Name, strings.ToLower(name)), false)
		relabel(svc.Labels)
		relabel(svc.Spec.Selector)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc.Name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(ptr.Deref(spec.Replicas, 1)),
				Selector: &metav1.LabelSelector{MatchLabels: svc.Spec.Selector},
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
				Template: tmpl,
			}}
		out = append(out, d, svc)
	}
	return out
}

func plainName(i int) string {
	if i%2 == 0 {
		return fmt.Sprintf("g%04d-prefill", i/2)
	}
	return fmt.Sprintf("g%04d-decode", i/2)
}

// plainDeployment is graph i/2's prefill (2 replicas) or decode (1) as a plain
// Deployment with maxSurge 1, maxUnavailable 0.
func plainDeployment(ns string, i int, image string) *appsv1.Deployment {
	labels := map[string]string{"app": plainName(i)}
	replicas := int32(2)
	if i%2 == 1 {
		replicas = 1
	}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: plainName(i)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}}},
		}}
}

// graphs creates and rolls the N DGDs and measures the operator.
func (r *p3Run) graphs(b testing.TB) {
	ctx := context.Background()
	ns := fmt.Sprintf("p3-dgd-%d", r.round)
	if err := r.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	c := r.watch(b, ns)
	defer c.stop()
	r.rssIdle, _ = r.op.PeakRSS()
	begin := time.Now()
	if err := parallel(r.n, func(i int) error {
		obj := harness.NewDGD(ns, fmt.Sprintf("g%04d", i)).Disagg(2, 1, "vllm:v1").Rollout("1", "0").Backend(v1alpha1.BackendDeployment).Obj()
		return r.k8s.Create(ctx, obj)
	}); err != nil {
		b.Fatal(err)
	}
	r.waitFor(b, "DGD create", func() bool { return c.graphsDone(r.n, 1) })
	r.dgdCreate = time.Since(begin)
	r.rssCreate, _ = r.op.PeakRSS()
	if p3Profile != "" {
		fetch(b, "/debug/pprof/heap", fmt.Sprintf("heap-create-%d.pprof", r.round))
	}
	r.createWrites = 0
	for _, q := range r.proxy.Requests(begin) {
		if q.Write() && q.Namespace == ns && q.Resource != "events" {
			r.createWrites++
		}
	}
	trace(r.proxy.Requests(begin), ns, begin, "create")
	stepsBefore := r.operatorSteps(b)
	stopProfile := profile(b, fmt.Sprintf("dgd-%d", r.round))
	stopCluster := profileCluster(b, r.cl, fmt.Sprintf("dgd-%d", r.round))
	begin = time.Now()
	done := r.measure(b)
	if err := parallel(r.n, func(i int) error {
		return retryConflict(func() error {
			var d v1alpha1.DynamoGraphDeployment
			if err := r.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("g%04d", i)}, &d); err != nil {
				return err
			}
			harness.SetImage(&d, "vllm:v2")
			return r.k8s.Update(ctx, &d)
		})
	}); err != nil {
		b.Fatal(err)
	}
	r.waitFor(b, "DGD rollout", func() bool { return c.graphsDone(r.n, 2) && c.podsOf(ns) == 4*r.n })
	r.dgdRoll = time.Since(begin)
	r.dgdCost = done()
	stopProfile()
	stopCluster()
	fetch(b, "/debug/pprof/heap", fmt.Sprintf("heap-%d.pprof", r.round))
	if p3Profile != "" {
		copyMetrics(b, fmt.Sprintf("metrics-%d.txt", r.round))
	}
	after := r.operatorSteps(b)
	r.steps, r.graphSteps = after[""]-stepsBefore[""], map[string]int{}
	for g, n := range after {
		if g != "" {
			r.graphSteps[g] = n - stepsBefore[g]
		}
	}
	reqs := r.proxy.Requests(begin)
	r.writes, r.reads = map[string]int{}, map[string]int{}
	r.graphWrites = map[string]map[string]int{}
	r.graphEvents = map[string][]string{}
	r.took = map[string]time.Duration{}
	r.readsOfDeleted = nil
	deleted := map[string]bool{} // resource/name of each object the operator deleted
	for _, q := range reqs {
		if q.Namespace == ns && q.Verb == http.MethodDelete {
			deleted[q.Resource+"/"+q.Name] = true
		}
		if q.Namespace == ns && q.Verb == http.MethodGet && deleted[q.Resource+"/"+q.Name] {
			r.readsOfDeleted = append(r.readsOfDeleted, q.Resource+"/"+q.Name)
		}
		switch {
		case q.Write() && q.Namespace == ns:
			r.writes[q.Verb+" "+q.Resource]++
			r.took[q.Verb+" "+q.Resource] += q.Took
			// Every object of graph gNNNN is named gNNNN or gNNNN-...; an Event names
			// the object it regards.
			g, _, _ := strings.Cut(q.Name, "-")
			if r.graphWrites[g] == nil {
				r.graphWrites[g] = map[string]int{}
			}
			r.graphWrites[g][q.Verb+" "+q.Resource]++
			if q.Reason != "" {
				r.graphEvents[g] = append(r.graphEvents[g], q.Reason)
			}
		case !q.Write() && q.Verb != "WATCH" && (q.Namespace == ns || q.Namespace == ""):
			r.reads[q.Verb+" "+q.Resource]++
		}
	}
	r.latencies, r.gainLatencies = c.latencies(reqs, ns)
	trace(reqs, ns, begin, "rollout")
	if r.steadyWindow > 0 {
		quiet := time.Now()
		time.Sleep(r.steadyWindow) // a measurement window, not a wait: steady state writes nothing
		for _, q := range r.proxy.Requests(quiet) {
			if q.Write() && q.Namespace == ns {
				r.steady++
			}
		}
	}
	r.deleteNamespace(b, ns, c)
}

// operatorSteps reads the operator's dgd_rollout_steps_total (passes that moved
// replicas) from its metrics endpoint: per DGD name, and summed over every DGD under "".
func (r *p3Run) operatorSteps(b testing.TB) map[string]int {
	resp, err := http.Get("http://" + p3Metrics + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "dgd_rollout_steps_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			continue
		}
		out[""] += int(v)
		if _, rest, ok := strings.Cut(line, `name="`); ok {
			name, _, _ := strings.Cut(rest, `"`)
			out[name] += int(v)
		}
	}
	return out
}

func retryConflict(f func() error) error {
	for {
		if err := f(); !apierrors.IsConflict(err) {
			return err
		}
	}
}

// deleteNamespace deletes ns and waits until the namespace itself is gone, not only its
// pods: kube-controller-manager's namespace controller deletes the rest (Services,
// EndpointSlices, ReplicaSets, RBAC, Events) after the pods, and that work must not
// overlap the next arm's measurement.
func (r *p3Run) deleteNamespace(b testing.TB, ns string, c *p3Cache) {
	ctx := context.Background()
	if err := r.k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	r.waitFor(b, "namespace deletion", func() bool {
		if c.podsOf(ns) != 0 {
			return false
		}
		return apierrors.IsNotFound(r.k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	})
}

func (r *p3Run) report(b *testing.B, rss int64) {
	ratio := r.dgdRoll.Seconds() / r.plainRoll.Seconds()
	create := r.dgdCreate.Seconds() / r.plainCreate.Seconds()
	// Writes by kind: the workloads (deployments, their scale), the DGD's status, the
	// Events, and the other objects of a graph (Services, ControllerRevisions...).
	var total, workload, status, events, objects int
	var keys []string
	for k, v := range r.writes {
		keys = append(keys, k)
		total += v
		switch res := strings.Fields(k)[1]; {
		case strings.HasPrefix(res, "deployments"):
			workload += v
		case res == "dynamographdeployments/status":
			status += v
		case res == "events":
			events += v
		default:
			objects += v
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f (%s each)", k, float64(r.writes[k])/float64(r.n),
			(r.took[k]/time.Duration(r.writes[k])).Round(time.Millisecond)))
	}
	steps := float64(max(r.steps, 1))
	perStep := float64(workload+status) / steps
	p50, p99 := percentile(r.latencies, 50), percentile(r.latencies, 99)
	g50, g99 := percentile(r.gainLatencies, 50), percentile(r.gainLatencies, 99)
	b.ReportMetric(r.plainRoll.Seconds(), "deployments-s")
	b.ReportMetric(r.dgdRoll.Seconds(), "dgds-s")
	b.ReportMetric(ratio, "ratio")
	graphRatio := r.dgdRoll.Seconds() / r.graphRoll.Seconds()
	graphCreate := r.dgdCreate.Seconds() / r.graphCreate.Seconds()
	b.ReportMetric(graphRatio, "ratio-to-plain-graphs")
	b.ReportMetric(create, "create-ratio")
	b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(perStep, "writes/step")
	fmt.Printf(`P3 (N=%d graphs of frontend 1 + prefill 2 + decode 1, maxSurge 1 / maxUnavailable 0, %d KWOK nodes, pod-ready delay %s):
    rollout: %d plain Deployments %.1fs, %d DGDs %.1fs, ratio %.2f (target <= 1.2)
    create:  %d plain Deployments %.1fs, %d DGDs %.1fs, ratio %.2f (target <= 1.5); %.1f operator writes per graph, Events aside
    the same %d graphs without the operator (%d Deployments + %d Services, the pods it renders, workers rolled in place):
             create %.1fs, rollout %.1fs; DGDs vs them: rollout ratio %.2f, create ratio %.2f
    operator writes per graph rollout: %.2f (verb resource: per graph, API server answer time)
        %s
    per rollout step (%d steps, %.2f per graph): %.2f workload+status writes (target <= 2): %.2f workload, %.2f status; also %.2f Events, %.2f other objects
    readiness gain -> next write for that graph: p50 %s, p99 %s (%d gains); any readiness change: p50 %s, p99 %s (%d changes)
    operator reads per graph rollout (its cache aside): %s
    API server requests over the rollout: plain Deployments %.0f, plain graphs %.0f, DGDs %.0f; DGDs minus plain graphs, per graph: %s
    the nodes' side (KWOK, the node lifecycle controller), plain Deployments / plain graphs / DGDs: %s
    operator peak RSS %.0f MiB (target <= 150): %.0f MiB before the DGDs, %.0f MiB by the end of their create; writes in 10 s of steady state: %d (target 0)
    CPU seconds over the rollout (plain -> DGDs): %s
    CPU seconds over the rollout (plain graphs -> DGDs): %s
`, r.n, p3Nodes, p3PodReadyDelay, 2*r.n, r.plainRoll.Seconds(), r.n, r.dgdRoll.Seconds(), ratio,
		2*r.n, r.plainCreate.Seconds(), r.n, r.dgdCreate.Seconds(), create, float64(r.createWrites)/float64(r.n),
		r.n, 3*r.n, 3*r.n, r.graphCreate.Seconds(), r.graphRoll.Seconds(), graphRatio, graphCreate,
		float64(total)/float64(r.n), strings.Join(parts, "\n        "), r.steps, steps/float64(r.n), perStep,
		float64(workload)/steps, float64(status)/steps, float64(events)/steps, float64(objects)/steps,
		g50.Round(time.Millisecond), g99.Round(time.Millisecond), len(r.gainLatencies),
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), len(r.latencies), perGraph(r.reads, r.n),
		r.plainCost.requests.total(), r.graphCost.requests.total(), r.dgdCost.requests.total(), r.dgdCost.requests.minus(r.graphCost.requests, r.n, 12),
		nodeSide(r.plainCost.requests, r.graphCost.requests, r.dgdCost.requests), float64(rss)/(1<<20), float64(r.rssIdle)/(1<<20), float64(r.rssCreate)/(1<<20), r.steady, cpuLine(r.plainCost.cpu, r.dgdCost.cpu), cpuLine(r.graphCost.cpu, r.dgdCost.cpu))
}

// armCost is what one arm's rollout cost the machine: CPU seconds per process, and the
// API server's requests by verb and resource (every client's).
type armCost struct {
	cpu      cpuTimes
	requests apiCounts
}

// measure starts measuring a rollout; the function it returns ends the measure.
func (r *p3Run) measure(b testing.TB) func() armCost {
	cpu0, req0 := processCPU(), apiRequests(b, r.cl)
	return func() armCost {
		return armCost{cpu: cpu0.since(), requests: apiRequests(b, r.cl).since(req0)}
	}
}

// apiCounts is kube-apiserver's apiserver_request_total summed by "VERB resource" (a
// subresource after a slash: "PUT deployments/status").
type apiCounts map[string]float64

// apiRequests reads kube-apiserver's request counters from its metrics endpoint.
func apiRequests(b testing.TB, cl *cluster.Cluster) apiCounts {
	var buf strings.Builder
	if err := cl.Fetch(context.Background(), "kube-apiserver", "/metrics", time.Minute, &buf); err != nil {
		b.Fatalf("kube-apiserver metrics: %v", err)
	}
	out := apiCounts{}
	for _, line := range strings.Split(buf.String(), "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(rest[:end], ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += v
	}
	return out
}

// since is c minus an earlier reading.
func (c apiCounts) since(earlier apiCounts) apiCounts {
	out := apiCounts{}
	for k, v := range c {
		if d := v - earlier[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func (c apiCounts) total() float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}

// minus lists the largest differences of c to other, per graph of n: "+6.70 LIST pods".
func (c apiCounts) minus(other apiCounts, n, top int) string {
	keys := map[string]bool{}
	for k := range c {
		keys[k] = true
	}
	for k := range other {
		keys[k] = true
	}
	type diff struct {
		key string
		d   float64
	}
	var ds []diff
	var sum float64
	for k := range keys {
		if d := (c[k] - other[k]) / float64(n); d >= 0.005 || d <= -0.005 {
			ds = append(ds, diff{k, d})
			sum += d
		}
	}
	sort.Slice(ds, func(i, j int) bool {
		if a, b := math.Abs(ds[i].d), math.Abs(ds[j].d); a != b {
			return a > b
		}
		return ds[i].key < ds[j].key
	})
	parts := []string{fmt.Sprintf("%+.2f in all", sum)}
	for i, d := range ds {
		if i == top {
			break
		}
		parts = append(parts, fmt.Sprintf("%+.2f %s", d.d, d.key))
	}
	return strings.Join(parts, ", ")
}

// nodeSide formats the requests of the kubelets' side in each arm: KWOK's pod and node
// status writes, and the node lifecycle controller's (which marks the pods of a node
// whose heartbeat is late not ready, and taints it). KWOK writes two pod statuses per
// new pod (Running, Ready); more PATCH pods/status is a starved KWOK writing Ready
// again (test/cluster/stages.go), and any PUT pods/status or PATCH nodes is the node
// lifecycle controller at work: each a storm of pod updates every pod watcher pays for.
func nodeSide(arms ...apiCounts) string {
	var parts []string
	for _, k := range []string{"PATCH pods/status", "PUT pods/status", "PATCH nodes/status", "PATCH nodes", "PUT nodes", "DELETE pods", "POST pods/eviction"} {
		var vs []string
		for _, a := range arms {
			vs = append(vs, fmt.Sprintf("%.0f", a[k]))
		}
		parts = append(parts, k+" "+strings.Join(vs, " / "))
	}
	return strings.Join(parts, ", ")
}

// perGraph formats counts per graph of n: "GET dynamographdeployments 0.47, ...".
func perGraph(counts map[string]int, n int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(counts[k])/float64(n)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// cpuTimes is the CPU time (user + system, seconds) of the processes that play a part
// in P3, by command name: the control plane, KWOK, the operator, the benchmark itself.
type cpuTimes map[string]float64

// processCPU reads /proc/<pid>/stat of every process (Linux; empty elsewhere).
func processCPU() cpuTimes {
	out := cpuTimes{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15), counted after the ")".
		st := string(raw)
		open, closing := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(st[closing+1:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		sy, _ := strconv.ParseFloat(f[12], 64)
		out[st[open+1:closing]] += (ut + sy) / 100 // USER_HZ
	}
	return out
}

// since is the CPU each process used since c was read (processes that exited aside).
func (c cpuTimes) since() cpuTimes {
	now, out := processCPU(), cpuTimes{}
	for k, v := range now {
		if d := v - c[k]; d >= 0.5 {
			out[k] = d
		}
	}
	return out
}

// busiest is the names of every process in the sets, the one that used most CPU in
// by first (ties by name, so a line reads the same run to run).
func busiest(by cpuTimes, sets ...cpuTimes) []string {
	names := map[string]bool{}
	for _, set := range append(sets, by) {
		for k := range set {
			names[k] = true
		}
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if by[keys[i]] != by[keys[j]] {
			return by[keys[i]] > by[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// cpuLine is each process's CPU in the plain arm and then in the DGD arm, the DGD
// arm's busiest first, and both totals.
func cpuLine(plain, dgd cpuTimes) string {
	var parts []string
	var tp, td float64
	for _, k := range busiest(dgd, plain) {
		parts = append(parts, fmt.Sprintf("%s %.1f -> %.1f", k, plain[k], dgd[k]))
		tp += plain[k]
		td += dgd[k]
	}
	return fmt.Sprintf("total %.1f -> %.1f; %s", tp, td, strings.Join(parts, ", "))
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

// p3Cache watches one namespace's Deployments, pods and DGDs, and records when each
// Deployment's available replicas changed (a readiness change of its graph).
type p3Cache struct {
	c      cache.Cache
	cancel context.CancelFunc

	mu      sync.Mutex
	changes []readinessChange
}

type readinessChange struct {
	graph string
	at    time.Time
	// gain: available replicas went up. The operator answers every gain with a write
	// (a step or its status); a loss is mostly its own scale-down, which asks for none,
	// so the write after a loss can be the next step, a pod's start later.
	gain bool
}

func (r *p3Run) watch(b testing.TB, ns string) *p3Cache {
	c, err := cache.New(r.cfg, cache.Options{Scheme: app.NewScheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	pc := &p3Cache{c: c}
	ctx, cancel := context.WithCancel(context.Background())
	pc.cancel = cancel
	podMeta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}} // only counted
	// The DGDs are watched in their storage version, v1beta1, as the operator reads them:
	// a v1alpha1 watch makes the API server call the operator's conversion webhook for
	// every status write, work the bench's observer would add to the operator's cost.
	for _, o := range []client.Object{&appsv1.Deployment{}, podMeta, &v1beta1.DynamoGraphDeployment{}} {
		inf, err := c.GetInformer(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := o.(*appsv1.Deployment); ok {
			_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(old, cur any) {
				o, n := old.(*appsv1.Deployment), cur.(*appsv1.Deployment)
				if o.Status.AvailableReplicas != n.Status.AvailableReplicas {
					pc.mu.Lock()
					pc.changes = append(pc.changes, readinessChange{graph: graphOf(n.Name), at: time.Now(),
						gain: n.Status.AvailableReplicas > o.Status.AvailableReplicas})
					pc.mu.Unlock()
				}
			}})
		}
	}
	go func() { _ = c.Start(ctx) }()
	c.WaitForCacheSync(ctx)
	return pc
}

func (c *p3Cache) stop() { c.cancel() }

// graphOf is the graph a workload, DGD or Event name belongs to (names start `gNNNN`,
// then "-" or, for an Event, ".").
func graphOf(name string) string {
	if i := strings.IndexAny(name, "-."); i > 0 {
		return name[:i]
	}
	return name
}

// The benchmark polls its cache every 100 ms; its lists read the cached objects
// without copying them (never written), so that polling costs the machine, which
// the measured processes share, little.
func (c *p3Cache) podsOf(ns string) int {
	pods := metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	if c.c.List(context.Background(), &pods, client.InNamespace(ns), client.UnsafeDisableDeepCopy) != nil {
		return -1
	}
	return len(pods.Items)
}

// plainDone: every Deployment runs image, every replica updated and available, no old
// pod left.
func (c *p3Cache) plainDone(want int, image string) bool {
	var ds appsv1.DeploymentList
	if c.c.List(context.Background(), &ds, client.UnsafeDisableDeepCopy) != nil || len(ds.Items) != want {
		return false
	}
	for _, d := range ds.Items {
		s, n := d.Status, ptr.Deref(d.Spec.Replicas, 1)
		worker := !strings.HasSuffix(d.Name, "-frontend") // a plain graph's frontend keeps its image
		if worker && d.Spec.Template.Spec.Containers[0].Image != image || s.ObservedGeneration < d.Generation ||
			s.UpdatedReplicas != n || s.Replicas != n || s.AvailableReplicas != n {
			return false
		}
	}
	return true
}

// graphsDone: every DGD Completed on revision rev, its old Deployments gone.
func (c *p3Cache) graphsDone(want int, rev int64) bool {
	var dgds v1beta1.DynamoGraphDeploymentList
	if c.c.List(context.Background(), &dgds, client.UnsafeDisableDeepCopy) != nil || len(dgds.Items) != want {
		return false
	}
	for _, d := range dgds.Items {
		ru := d.Status.RollingUpdate
		if d.Status.UpdateRevisionNumber != rev || ru == nil || ru.Phase != v1alpha1.RolloutCompleted {
			return false
		}
	}
	var ds appsv1.DeploymentList
	return c.c.List(context.Background(), &ds, client.UnsafeDisableDeepCopy) == nil && len(ds.Items) == 3*want
}

// latencies pairs each readiness change of a graph with the operator's first write for
// that graph after it (its workloads or its status): every change, and the gains alone.
func (c *p3Cache) latencies(reqs []opproc.Request, ns string) (all, gains []time.Duration) {
	byGraph := map[string][]time.Time{}
	for _, q := range reqs {
		if q.Write() && q.Namespace == ns && !strings.HasPrefix(q.Resource, "events") {
			byGraph[graphOf(q.Name)] = append(byGraph[graphOf(q.Name)], q.At)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.changes {
		ws := byGraph[ch.graph]
		i := sort.Search(len(ws), func(i int) bool { return !ws[i].Before(ch.at) })
		if i == len(ws) {
			continue
		}
		if d := ws[i].Sub(ch.at); d < time.Minute {
			all = append(all, d)
			if ch.gain {
				gains = append(gains, d)
			}
		}
	}
	return all, gains
}

// profileChunk is the length of each CPU profile P3_PROFILE takes over a rollout.
const profileChunk = 10 * time.Second

// profile profiles the operator over the DGD rollout when P3_PROFILE is set (see
// profileLoop), into P3_PROFILE/operator-<name>-<i>.pprof.
func profile(b testing.TB, name string) func() {
	return profileLoop(b, "operator-"+name, func(w io.Writer) error {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p3Pprof, int(profileChunk.Seconds())))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(w, resp.Body)
		return err
	})
}

// profileCluster profiles kube-apiserver and kube-controller-manager over a rollout
// when P3_PROFILE is set (see profileLoop), into P3_PROFILE/<component>-<name>-<i>.pprof.
func profileCluster(b testing.TB, cl *cluster.Cluster, name string) func() {
	var stops []func()
	for _, c := range []string{"kube-apiserver", "kube-controller-manager"} {
		stops = append(stops, profileLoop(b, c+"-"+name, func(w io.Writer) error {
			return cl.Profile(context.Background(), c, profileChunk, w)
		}))
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// profileLoop takes consecutive CPU profiles of profileChunk with get, into
// P3_PROFILE/<prefix>-<i>.pprof, until the function it returns is called; that
// function waits for the last one (which may outlast the rollout by up to a chunk).
// Nothing is profiled without P3_PROFILE. Join them with
// `go tool pprof -proto <prefix>-*.pprof > merged.pprof`.
func profileLoop(b testing.TB, prefix string, get func(w io.Writer) error) func() {
	if p3Profile == "" {
		return func() {}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			f, err := os.Create(filepath.Join(p3Profile, fmt.Sprintf("%s-%02d.pprof", prefix, i)))
			if err != nil {
				b.Logf("profile %s: %v", prefix, err)
				return
			}
			err = get(f)
			_ = f.Close()
			if err != nil {
				b.Logf("profile %s: %v", prefix, err)
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// fetch writes the operator's pprof endpoint path to P3_PROFILE/name.
func fetch(b testing.TB, path, name string) {
	if p3Profile == "" {
		return
	}
	resp, err := http.Get("http://" + p3Pprof + path)
	if err != nil {
		b.Logf("pprof %s: %v", path, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(filepath.Join(p3Profile, name))
	if err != nil {
		b.Logf("pprof %s: %v", path, err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

// copyMetrics writes the operator's Prometheus metrics to P3_PROFILE/name.
func copyMetrics(b testing.TB, name string) {
	resp, err := http.Get("http://" + p3Metrics + "/metrics")
	if err != nil {
		b.Logf("metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	_ = os.WriteFile(filepath.Join(p3Profile, name), body, 0o644)
}

// trace prints graph g0000's writes in order when P3_TRACE is set: what a create or a
// rollout step costs, and when.
func trace(reqs []opproc.Request, ns string, begin time.Time, what string) {
	if os.Getenv("P3_TRACE") == "" {
		return
	}
	for _, q := range reqs {
		if q.Write() && q.Namespace == ns && graphOf(q.Name) == "g0000" {
			fmt.Printf("    g0000 %s +%6.2fs %s %s %s (%s)\n", what, q.At.Sub(begin).Seconds(), q.Verb, q.Resource, q.Name, q.Took.Round(time.Millisecond))
		}
	}
}

func TestBusiest(t *testing.T) {
	plain := cpuTimes{"etcd": 9, "kwok": 1}
	dgd := cpuTimes{"kube-apiserver": 5, "manager": 5, "etcd": 2}
	got := strings.Join(busiest(dgd, plain), ",")
	if want := "kube-apiserver,manager,etcd,kwok"; got != want {
		t.Fatalf("busiest = %s, want %s (by the DGD arm, ties by name, plain-only last)", got, want)
	}
	if got := (cpuTimes{"a": 1, "b": 2.5}).line(); got != "total 3.5; b 2.5, a 1.0" {
		t.Fatalf("line = %q", got)
	}
}
