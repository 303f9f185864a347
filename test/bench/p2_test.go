// P2: in one run on the local control plane (6 KWOK nodes x 8 GPUs, pod-ready delay 2 s)
// with the real LeaderWorkerSet controllers, LWS's own DisaggregatedSet controller
// against our DGD (LeaderWorkerSet backend) on the same two-role multinode spec
// (prefill 4 gangs x 2 pods, decode 2 gangs x 4 pods, 1 GPU per pod) and the same
// change (image v1 -> v2 on both roles): rollout time, peak pods and replicas set per
// role, minimum ready gangs per role, maximum ratio skew, all measured by one
// GangWatcher from the pods and LeaderWorkerSets alone. The DGD runs twice: with
// spec.rollout defaults (25%/25%) and with maxSurge 1 / maxUnavailable 0, which is
// DisaggregatedSet's default (its planner's DefaultRollingUpdateConfig) and so the
// like-for-like comparison. Target: our time <= theirs, peak pods and skew no worse.
// A fourth arm runs the DisaggregatedSet on the pods the DGD runs (our LeaderWorkerSet
// backend's leader and worker templates, Dynamo's multinode contract), which the first
// arm's bare containers are not: against it the DGD's time is what the operator adds.
//
// Skew is reported twice: over every observed LeaderWorkerSet state (states between
// two writes of one reconcile included) and at pass results, which PassRecorder finds
// exactly by tagging each controller's LeaderWorkerSet writes with its completed
// reconcile count. Before measuring, the benchmark waits until kube-controller-manager's
// garbage collector follows LeaderWorkerSet owners (it discovers the freshly installed
// CRD only at its next 30 s resync; DisaggregatedSet deletes drained LeaderWorkerSets
// and relies on that cascade). P2_TIMELINE=1 also prints every observed state and a
// timeline of replicas set, pods, ready gangs and LWS status.readyReplicas.
//
//	go test ./test/bench/ -run '^$' -bench P2 -benchtime=1x -count=3 -timeout 30m
package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
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
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	disaggv1 "sigs.k8s.io/lws/api/disaggregatedset/v1"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/cmd/manager/app"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/lws"
)

// P2's fixed parameters (FACTS.md, DisaggregatedSet measured behaviour).
const (
	P2PodReadyDelay = 2 * time.Second
	p2Name          = "p2"
	p2Timeout       = 3 * time.Minute
)

var p2Roles = []GangRole{{Name: "prefill", Replicas: 4, Size: 2}, {Name: "decode", Replicas: 2, Size: 4}}

// p2Runs rotates the order of the four systems from one -count run to the next.
var p2Runs int

// tally counts one controller's mutating API requests by target.
type tally struct {
	lws, status, revisions, events, other atomic.Int64
}

func (t *tally) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet {
			switch p := r.URL.Path; {
			case strings.Contains(p, "/events"):
				t.events.Add(1)
			case strings.HasSuffix(p, "/status"):
				if strings.Contains(p, "/dynamographdeployments/") || strings.Contains(p, "/disaggregatedsets/") {
					t.status.Add(1) // the controller's own object
				} else {
					t.other.Add(1) // e.g. the LWS controller's LeaderWorkerSet status
				}
			case strings.Contains(p, "/leaderworkersets"):
				t.lws.Add(1)
			case strings.Contains(p, "/controllerrevisions"):
				t.revisions.Add(1)
			default:
				t.other.Add(1)
			}
		}
		return next.RoundTrip(r)
	})
}

// tallySnap also samples the controller's completed reconciles and this process's
// CPU time (every in-process controller, the watchers and the benchmark).
type tallySnap struct {
	lws, status, revisions, events, other int64
	reconciles                            float64
	cpu                                   time.Duration
}

func (t *tally) snap(controller string) tallySnap {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return tallySnap{t.lws.Load(), t.status.Load(), t.revisions.Load(), t.events.Load(), t.other.Load(),
		reconciles(controller), cpu}
}

func (a tallySnap) minus(b tallySnap) tallySnap {
	return tallySnap{a.lws - b.lws, a.status - b.status, a.revisions - b.revisions, a.events - b.events,
		a.other - b.other, a.reconciles - b.reconciles, a.cpu - b.cpu}
}

// p2Result is one system's rollout.
type p2Result struct {
	GangStats
	// Signal: the system's own "done": for the DGD, status.rollingUpdate Completed on
	// the new revision with every service ready; DisaggregatedSet writes no status.
	Signal time.Duration
	// Writes: the controller's mutating requests between the change and Done
	// (DisaggregatedSet: the in-process LWS manager's LeaderWorkerSet spec writes,
	// which only its DisaggregatedSet controller makes).
	Writes tallySnap
	// Load: the 1-minute load average when the change was written (others' work on
	// the machine inflates every latency; read it next to the times).
	Load string
	// PlannerSteps: dgd_rollout_steps_total over the rollout (DGD only).
	PlannerSteps float64
	// Passes: the LeaderWorkerSet states the controller's passes left behind, and
	// the largest skew among them.
	Passes   []PassResult
	PassSkew float64
}

type p2System struct {
	name, short string
	run         func(b *testing.B, env *p2Env, ns string) p2Result
}

type p2Env struct {
	cfg             *rest.Config
	k8s             client.Client
	op, lwsTally    *tally
	opPass, lwsPass *PassRecorder
	// dgdTemplates are the leader and worker pod templates our LeaderWorkerSet
	// backend rendered for each role (the first DGD arm's), which the DisaggregatedSet
	// arm of the same pods runs.
	dgdTemplates map[string]lwsv1.LeaderWorkerTemplate
	// dgdObjects are what those pods refer to (the discovery ServiceAccount, without
	// which the API server refuses the pods, and the ConfigMaps they mount).
	dgdObjects []client.Object
}

func BenchmarkP2DisaggregatedSetVsDGD(b *testing.B) {
	if _, err := os.Stat(filepath.Join(cluster.RepoRoot(), "bin", "kube-controller-manager")); err != nil {
		b.Skip("bin/kube-controller-manager is missing: run make cluster-bins")
	}
	ctrl.SetLogger(logr.Discard())
	ctx := context.Background()
	cl, err := cluster.Start(ctx, cluster.Options{Nodes: 6, GPUsPerNode: 8, PodReadyDelay: P2PodReadyDelay})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := cl.Stop(); err != nil {
			b.Error(err)
		}
	}()
	if err := cl.InstallCRDs(ctx, append([]string{filepath.Join(cluster.RepoRoot(), "config", "crd", "bases")}, lws.CRDPaths()...)...); err != nil {
		b.Fatal(err)
	}
	env := &p2Env{cfg: cl.Config, op: &tally{}, lwsTally: &tally{},
		opPass:  &PassRecorder{Controller: "dynamographdeployment"},
		lwsPass: &PassRecorder{Controller: "disaggregatedset"}}
	lwsCfg := rest.CopyConfig(cl.Config)
	lwsCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return env.lwsTally.wrap(env.lwsPass.Wrap(rt)) }
	runner, err := lws.Start(ctx, lws.Options{Config: lwsCfg, DisaggregatedSet: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := runner.Stop(); err != nil {
			b.Error(err)
		}
	}()
	stopOperator := startP2Operator(b, cl.Config, env.op, env.opPass)
	defer stopOperator()
	scheme := app.NewScheme()
	if err := disaggv1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	if env.k8s, err = client.New(cl.Config, client.Options{Scheme: scheme}); err != nil {
		b.Fatal(err)
	}
	warmGarbageCollector(b, env.k8s)

	systems := []p2System{
		{name: "DisaggregatedSet", short: "ds", run: runDisaggregatedSet},
		{name: "DGD 1/0", short: "dgd-1-0", run: func(b *testing.B, env *p2Env, ns string) p2Result {
			return runDGD(b, env, ns, "1", "0")
		}},
		{name: "DGD 25%/25%", short: "dgd-default", run: func(b *testing.B, env *p2Env, ns string) p2Result {
			return runDGD(b, env, ns, "", "")
		}},
	}
	// A DisaggregatedSet of the pods the DGD runs (the rendered templates of Dynamo's
	// multinode contract, not the bare container above) leaves out what those pods
	// cost LWS, the StatefulSet controller, the scheduler and KWOK. It takes the
	// templates the first DGD arm rendered: the first run's order puts it last.
	systems = append(systems, p2System{name: "DS, DGD's pods", short: "ds-same", run: runDisaggregatedSetSamePods})
	for i := 0; i < b.N; i++ {
		shift := p2Runs % len(systems)
		p2Runs++
		order := append(append([]p2System(nil), systems[shift:]...), systems[:shift]...)
		results := map[string]p2Result{}
		var ran []string
		for _, s := range order {
			ns := fmt.Sprintf("p2-%s-%d", s.short, i)
			if err := env.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				b.Fatal(err)
			}
			results[s.short] = s.run(b, env, ns)
			ran = append(ran, s.name)
		}
		fmt.Printf("\nP2 run %d (order: %s)\n", p2Runs, strings.Join(ran, ", "))
		printP2(systems, results)
		for _, s := range systems {
			reportP2(b, s.short, results[s.short])
		}
	}
}

// startP2Operator runs the operator in-process as cmd/manager does, its requests
// counted by t; the returned func stops it and waits.
func startP2Operator(b *testing.B, cfg *rest.Config, t *tally, p *PassRecorder) func() {
	// /convert is served by this process, outside the operator's counted requests.
	convCtx, stopConv := context.WithCancel(context.Background())
	if err := app.LocalConversion(convCtx, cfg); err != nil {
		stopConv()
		b.Fatal(err)
	}
	opCfg := rest.CopyConfig(cfg)
	opCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return t.wrap(p.Wrap(rt)) }
	mgr, err := app.NewManager(opCfg, app.Options{Manager: ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// -count=N runs this benchmark N times in one process.
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			b.Error("operator did not stop within 30s")
		}
		stopConv()
	}
}

// dsClassify: DisaggregatedSet's LWS objects and pods carry its name, role and
// revision labels.
func dsClassify(l map[string]string) (string, string, bool) {
	if l[disaggv1.SetNameLabelKey] != p2Name {
		return "", "", false
	}
	return l[disaggv1.RoleLabelKey], l[disaggv1.RevisionLabelKey], l[disaggv1.RevisionLabelKey] != ""
}

// dgdClassify: our worker LWS objects and pods carry the service and worker hash.
func dgdClassify(l map[string]string) (string, string, bool) {
	if l[v1alpha1.LabelGraph] != p2Name || l[v1alpha1.LabelWorkerHash] == "" {
		return "", "", false
	}
	return l[v1alpha1.LabelService], l[v1alpha1.LabelWorkerHash], true
}

func runDisaggregatedSet(b *testing.B, env *p2Env, ns string) p2Result {
	return rollDisaggregatedSet(b, env, ns, p2DisaggregatedSet(ns, "vllm:v1"))
}

// runDisaggregatedSetSamePods rolls a DisaggregatedSet whose roles run the DGD's
// rendered leader and worker templates.
func runDisaggregatedSetSamePods(b *testing.B, env *p2Env, ns string) p2Result {
	if env.dgdTemplates == nil {
		b.Fatal("no DGD arm has rendered its templates yet")
	}
	obj := p2DisaggregatedSet(ns, "vllm:v1")
	for i := range obj.Spec.Roles {
		t, ok := env.dgdTemplates[obj.Spec.Roles[i].Name]
		if !ok {
			b.Fatalf("no rendered templates of role %s", obj.Spec.Roles[i].Name)
		}
		lwt := &obj.Spec.Roles[i].Spec.LeaderWorkerTemplate
		lwt.LeaderTemplate, lwt.WorkerTemplate = t.LeaderTemplate.DeepCopy(), *t.WorkerTemplate.DeepCopy()
	}
	for _, o := range env.dgdObjects {
		c := o.DeepCopyObject().(client.Object)
		c.SetNamespace(ns)
		if err := env.k8s.Create(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
	return rollDisaggregatedSet(b, env, ns, obj)
}

// renderedTemplates reads the leader and worker templates of the DGD's LeaderWorkerSets
// by role, without the operator's labels (so neither it nor the DGD's Services take
// the DisaggregatedSet's pods for theirs) and with the first container's image v1.
func renderedTemplates(b *testing.B, env *p2Env, ns string) map[string]lwsv1.LeaderWorkerTemplate {
	var list lwsv1.LeaderWorkerSetList
	if err := env.k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelGraph: p2Name}); err != nil {
		b.Fatal(err)
	}
	clean := func(t *corev1.PodTemplateSpec) {
		t.Labels, t.Annotations = nil, nil
		t.Spec.Containers[0].Image = "vllm:v1"
	}
	out := map[string]lwsv1.LeaderWorkerTemplate{}
	for _, l := range list.Items {
		role := l.Labels[v1alpha1.LabelService]
		t := *l.Spec.LeaderWorkerTemplate.DeepCopy()
		if t.LeaderTemplate != nil {
			clean(t.LeaderTemplate)
		}
		clean(&t.WorkerTemplate)
		out[role] = t
	}
	if len(out) != len(p2Roles) {
		b.Fatalf("rendered templates of %d roles, want %d", len(out), len(p2Roles))
	}
	// What the templates name, read by name (not every one carries the graph label).
	refs := map[client.ObjectKey]client.Object{}
	for _, t := range out {
		for _, pt := range []*corev1.PodTemplateSpec{t.LeaderTemplate, &t.WorkerTemplate} {
			if pt == nil {
				continue
			}
			if sa := pt.Spec.ServiceAccountName; sa != "" {
				refs[client.ObjectKey{Namespace: ns, Name: "sa/" + sa}] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}
			}
			for _, v := range pt.Spec.Volumes {
				if v.ConfigMap != nil {
					refs[client.ObjectKey{Namespace: ns, Name: "cm/" + v.ConfigMap.Name}] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v.ConfigMap.Name}}
				}
			}
		}
	}
	for _, o := range refs {
		if err := env.k8s.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			b.Fatalf("reading %s the DGD's pods refer to: %v", o.GetName(), err)
		}
		o.SetResourceVersion("")
		o.SetUID("")
		o.SetOwnerReferences(nil)
		o.SetLabels(nil)
		o.SetManagedFields(nil)
		o.SetCreationTimestamp(metav1.Time{})
		env.dgdObjects = append(env.dgdObjects, o)
	}
	return out
}

func rollDisaggregatedSet(b *testing.B, env *p2Env, ns string, obj *disaggv1.DisaggregatedSet) p2Result {
	ctx := context.Background()
	w, err := WatchGangs(ctx, env.cfg, ns, p2Roles, dsClassify)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	if err := env.k8s.Create(ctx, obj); err != nil {
		b.Fatal(err)
	}
	defer removeAndDrain(b, env, obj, ns)
	waitP2(b, "DisaggregatedSet ready", w.Steady)
	var live disaggv1.DisaggregatedSet
	if err := env.k8s.Get(ctx, client.ObjectKeyFromObject(obj), &live); err != nil {
		b.Fatal(err)
	}
	for i := range live.Spec.Roles {
		lwt := &live.Spec.Roles[i].Spec.LeaderWorkerTemplate
		lwt.WorkerTemplate.Spec.Containers[0].Image = "vllm:v2"
		if lwt.LeaderTemplate != nil {
			lwt.LeaderTemplate.Spec.Containers[0].Image = "vllm:v2"
		}
	}
	before, load := env.lwsTally.snap(env.lwsPass.Controller), loadAverage()
	env.lwsPass.Start()
	w.Begin()
	if err := env.k8s.Update(ctx, &live); err != nil {
		b.Fatal(err)
	}
	waitChan(b, "DisaggregatedSet rollout", w.Done())
	writes := env.lwsTally.snap(env.lwsPass.Controller).minus(before)
	waitChan(b, "DisaggregatedSet old LWS deleted", w.Cleaned())
	env.lwsPass.Stop()
	return withPasses(p2Result{GangStats: w.Stats(), Writes: writes, Load: load}, env.lwsPass.Passes(w))
}

func runDGD(b *testing.B, env *p2Env, ns, surge, unavailable string) p2Result {
	ctx := context.Background()
	w, err := WatchGangs(ctx, env.cfg, ns, p2Roles, dgdClassify)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	builder := harness.NewDGD(ns, p2Name).Disagg(4, 2, "vllm:v1").Multinode("prefill", 2).Multinode("decode", 4)
	if surge != "" {
		builder = builder.Rollout(surge, unavailable)
	}
	obj := builder.Obj()
	for _, name := range obj.WorkerServiceNames() {
		obj.Spec.Services[name].Resources = &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1"}}
	}
	if err := env.k8s.Create(ctx, obj); err != nil {
		b.Fatal(err)
	}
	defer removeAndDrain(b, env, obj, ns)
	waitP2(b, "DGD ready", func() bool { return w.Steady() && p2DGDComplete(env.k8s, ns, 1) })
	var live v1alpha1.DynamoGraphDeployment
	if err := env.k8s.Get(ctx, client.ObjectKeyFromObject(obj), &live); err != nil {
		b.Fatal(err)
	}
	if env.dgdTemplates == nil {
		env.dgdTemplates = renderedTemplates(b, env, ns)
	}
	harness.SetImage(&live, "vllm:v2")
	signal, stopSignal := watchDGDCompleted(b, env.cfg, ns)
	defer stopSignal()
	steps, before, load := metric("dgd_rollout_steps_total", ns), env.op.snap(env.opPass.Controller), loadAverage()
	env.opPass.Start()
	w.Begin()
	begin := time.Now()
	if err := env.k8s.Update(ctx, &live); err != nil {
		b.Fatal(err)
	}
	waitChan(b, "DGD rollout", w.Done())
	writes := env.op.snap(env.opPass.Controller).minus(before)
	waitChan(b, "DGD old LWS deleted", w.Cleaned())
	env.opPass.Stop()
	var at time.Time
	select {
	case at = <-signal:
	case <-time.After(p2Timeout):
		b.Fatal("DGD status never showed the rollout Completed")
	}
	r := withPasses(p2Result{GangStats: w.Stats(), Writes: writes, Signal: at.Sub(begin), Load: load}, env.opPass.Passes(w))
	r.PlannerSteps = metric("dgd_rollout_steps_total", ns) - steps
	return r
}

// loadAverage is the 1-minute load average ("?" where /proc/loadavg is missing).
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func withPasses(r p2Result, passes []PassResult) p2Result {
	r.Passes = passes
	for _, p := range passes {
		r.PassSkew = max(r.PassSkew, p.Skew)
	}
	return r
}

// watchDGDCompleted watches the DGD (an informer, not polling: no load of its own on
// the API server during the rollout) and sends the time of the first event showing
// revision 2 Completed with every worker service ready. It watches the storage version,
// v1beta1, as the operator reads it: a v1alpha1 watch made the API server call the
// conversion webhook, served in this process, for every status write, and its CPU
// (0.7 s of a run) counted as the operator's.
func watchDGDCompleted(b *testing.B, cfg *rest.Config, ns string) (<-chan time.Time, func()) {
	c, err := cache.New(cfg, cache.Options{Scheme: app.NewScheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inf, err := c.GetInformer(ctx, &v1beta1.DynamoGraphDeployment{})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	out := make(chan time.Time, 1)
	var once sync.Once
	check := func(o any) {
		if d, ok := o.(*v1beta1.DynamoGraphDeployment); ok && d.Name == p2Name && d.Status.RollingUpdate != nil &&
			dgdCompleted(d.Status.UpdateRevisionNumber, d.Status.RollingUpdate.Phase, d.Status.Components, 2) {
			now := time.Now()
			once.Do(func() { out <- now })
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: check, UpdateFunc: func(_, o any) { check(o) }}); err != nil {
		cancel()
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		b.Fatal("DGD watch did not sync")
	}
	return out, cancel
}

func p2DGDComplete(k8s client.Client, ns string, rev int64) bool {
	var d v1alpha1.DynamoGraphDeployment
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: p2Name}, &d); err != nil {
		return false
	}
	return d.Status.RollingUpdate != nil && dgdCompleted(d.Status.UpdateRevisionNumber, d.Status.RollingUpdate.Phase, d.Status.Services, rev)
}

// dgdCompleted: the DGD's status (in either version) says revision rev Completed with
// every worker service ready.
func dgdCompleted(number int64, phase v1alpha1.RolloutPhase, services map[string]v1alpha1.ServiceStatus, rev int64) bool {
	if number != rev || phase != v1alpha1.RolloutCompleted {
		return false
	}
	for _, r := range p2Roles {
		if services[r.Name].ReadyReplicas != r.Replicas {
			return false
		}
	}
	return true
}

// p2DisaggregatedSet is the two-role spec as a DisaggregatedSet: every field the CRD
// rejects as "" set; rolloutStrategy without rollingUpdateConfiguration, so the
// controller uses its default maxSurge 1 / maxUnavailable 0 per role.
func p2DisaggregatedSet(ns, image string) *disaggv1.DisaggregatedSet {
	role := func(r GangRole, args ...string) disaggv1.DisaggregatedRoleSpec {
		return disaggv1.DisaggregatedRoleSpec{Name: r.Name, LeaderWorkerSetTemplateSpec: lwsv1.LeaderWorkerSetTemplateSpec{
			Spec: lwsv1.LeaderWorkerSetSpec{
				Replicas:        ptr.To(r.Replicas),
				StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
				RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
				LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
					Size:          ptr.To(r.Size),
					RestartPolicy: lwsv1.RecreateGroupOnPodRestart,
					WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "main", Image: image, Command: []string{"python3", "-m", "dynamo.vllm"}, Args: args,
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
					}}}},
				},
			},
		}}
	}
	return &disaggv1.DisaggregatedSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p2Name},
		Spec: disaggv1.DisaggregatedSetSpec{Roles: []disaggv1.DisaggregatedRoleSpec{
			role(p2Roles[0], "--is-prefill-worker"), role(p2Roles[1])}},
	}
}

// warmGarbageCollector waits until kube-controller-manager's garbage collector acts
// on LeaderWorkerSet owners. It discovers resources every 30 s, so right after the CRD
// is installed, dependents of a deleted LeaderWorkerSet (its StatefulSets and pods)
// can linger for up to 30 s; DisaggregatedSet deletes a drained LeaderWorkerSet at
// once and relies on that cascade. A real cluster has long discovered the CRD.
func warmGarbageCollector(b *testing.B, k8s client.Client) {
	ctx, begin := context.Background(), time.Now()
	owner := &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p2-gc-warmup"},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:      ptr.To[int32](0),
			StartupPolicy: lwsv1.LeaderCreatedStartupPolicy,
			RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType,
				RollingUpdateConfiguration: &lwsv1.RollingUpdateConfiguration{
					Partition: ptr.To[int32](0), MaxUnavailable: intstr.FromInt32(1), MaxSurge: intstr.FromInt32(0)}},
			NetworkConfig: &lwsv1.NetworkConfig{SubdomainPolicy: ptr.To(lwsv1.SubdomainShared)},
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To[int32](1), RestartPolicy: lwsv1.RecreateGroupOnPodRestart,
				WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "warmup"}}}}},
		},
	}
	if err := k8s.Create(ctx, owner); err != nil {
		b.Fatal(err)
	}
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p2-gc-warmup",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: lwsv1.GroupVersion.String(), Kind: "LeaderWorkerSet",
			Name: owner.Name, UID: owner.UID}}}}
	if err := k8s.Create(ctx, dep); err != nil {
		b.Fatal(err)
	}
	if err := k8s.Delete(ctx, owner); err != nil {
		b.Fatal(err)
	}
	waitP2(b, "garbage collector to follow LeaderWorkerSet owners", func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(dep), &corev1.ConfigMap{}))
	})
	fmt.Printf("garbage collector follows LeaderWorkerSet owners after %.1fs\n", time.Since(begin).Seconds())
}

// removeAndDrain deletes the object and waits until the garbage collector has removed
// every pod of the namespace, freeing the fake GPUs for the next system.
func removeAndDrain(b *testing.B, env *p2Env, obj client.Object, ns string) {
	ctx := context.Background()
	if err := client.IgnoreNotFound(env.k8s.Delete(ctx, obj)); err != nil {
		b.Error(err)
		return
	}
	waitP2(b, "pods of "+ns+" gone", func() bool {
		var pods corev1.PodList
		return env.k8s.List(ctx, &pods, client.InNamespace(ns)) == nil && len(pods.Items) == 0
	})
}

func waitP2(b *testing.B, what string, cond func() bool) {
	deadline := time.Now().Add(p2Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitChan(b *testing.B, what string, ch <-chan struct{}) {
	select {
	case <-ch:
	case <-time.After(p2Timeout):
		b.Fatalf("timed out waiting for %s", what)
	}
}

func printP2(systems []p2System, res map[string]p2Result) {
	row := func(label string, f func(p2Result) string) {
		fmt.Printf("  %-44s", label)
		for _, s := range systems {
			fmt.Printf(" %18s", f(res[s.short]))
		}
		fmt.Println()
	}
	pair := func(m map[string]int32) string { return fmt.Sprintf("%d / %d", m["prefill"], m["decode"]) }
	fmt.Printf("  %-44s", "")
	for _, s := range systems {
		fmt.Printf(" %18s", s.name)
	}
	fmt.Println()
	row("rollout time (new gangs ready, old gone) s", func(r p2Result) string { return fmt.Sprintf("%.2f", r.Took.Seconds()) })
	row("old LeaderWorkerSets deleted s", func(r p2Result) string { return fmt.Sprintf("%.2f", r.Cleaned.Seconds()) })
	row("status says Completed s", func(r p2Result) string {
		if r.Signal == 0 {
			return "(no status)"
		}
		return fmt.Sprintf("%.2f", r.Signal.Seconds())
	})
	row("peak pods prefill / decode (target 8 / 8)", func(r p2Result) string {
		return fmt.Sprintf("%d / %d", r.PeakPods["prefill"], r.PeakPods["decode"])
	})
	row("peak replicas set prefill / decode (4 / 2)", func(r p2Result) string { return pair(r.PeakSpec) })
	row("min ready gangs prefill / decode (4 / 2)", func(r p2Result) string { return pair(r.MinReady) })
	row("max ratio skew at pass results", func(r p2Result) string { return fmt.Sprintf("%.3f", r.PassSkew) })
	row("max ratio skew, every observed state", func(r p2Result) string { return fmt.Sprintf("%.3f", r.MaxSkew) })
	row("passes that changed replicas", func(r p2Result) string { return fmt.Sprint(len(r.Passes)) })
	row("controller LWS writes / status writes", func(r p2Result) string {
		return fmt.Sprintf("%d / %d", r.Writes.lws, r.Writes.status)
	})
	row("controller reconciles", func(r p2Result) string { return fmt.Sprint(r.Writes.reconciles) })
	row("dgd_rollout_steps_total", func(r p2Result) string {
		if r.Signal == 0 {
			return "-"
		}
		return fmt.Sprint(r.PlannerSteps)
	})
	row("1-min load average at the change (2 cores)", func(r p2Result) string { return r.Load })
	row("in-process CPU during rollout s", func(r p2Result) string { return fmt.Sprintf("%.2f", r.Writes.cpu.Seconds()) })
	for _, s := range systems {
		r := res[s.short]
		fmt.Printf("  %s passes (replicas set per revision [prefill decode] after each):\n", s.name)
		for _, p := range r.Passes {
			fmt.Println("    " + p.String())
		}
		if os.Getenv("P2_TIMELINE") != "" {
			fmt.Printf("  %s observed LeaderWorkerSet states:\n", s.name)
			for _, t := range r.SpecTransitions {
				held := "final"
				if t.Held > 0 {
					held = fmt.Sprintf("held %.3fs", t.Held.Seconds())
				}
				fmt.Printf("    %7.3fs  %-40s skew %.2f  %s\n", t.At.Seconds(), t.Pools, t.Skew, held)
			}
			fmt.Printf("  %s timeline:\n", s.name)
			for _, l := range r.Timeline {
				fmt.Println("    " + l)
			}
		}
	}
}

func reportP2(b *testing.B, short string, r p2Result) {
	b.ReportMetric(r.Took.Seconds(), short+"-s")
	b.ReportMetric(r.Cleaned.Seconds(), short+"-cleaned-s")
	if r.Signal > 0 {
		b.ReportMetric(r.Signal.Seconds(), short+"-status-s")
	}
	var roles []string
	for _, role := range p2Roles {
		roles = append(roles, role.Name)
	}
	sort.Strings(roles)
	for _, role := range roles {
		b.ReportMetric(float64(r.PeakPods[role]), short+"-peak-pods-"+role)
		b.ReportMetric(float64(r.PeakSpec[role]), short+"-peak-set-"+role)
		b.ReportMetric(float64(r.MinReady[role]), short+"-min-ready-"+role)
	}
	b.ReportMetric(r.PassSkew, short+"-skew-pass")
	b.ReportMetric(r.MaxSkew, short+"-skew-any")
	b.ReportMetric(float64(len(r.Passes)), short+"-passes")
	b.ReportMetric(float64(r.Writes.lws), short+"-lws-writes")
	b.ReportMetric(float64(r.Writes.status), short+"-status-writes")
	b.ReportMetric(r.Writes.reconciles, short+"-reconciles")
	b.ReportMetric(r.Writes.cpu.Seconds(), short+"-cpu-s")
}
