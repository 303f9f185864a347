// Package app wires the operator: the scheme, the manager options and the registered
// backends. cmd/manager, `make run` (hack/localrun) and the test suites share it, so
// they run exactly the operator that ships.
package app

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/conversion"
	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/deployment"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/gatewayapi"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// NewScheme returns a scheme with every type the operator reads or writes.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // static registration; cannot fail
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := lwsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := grovev1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := gatewayv1.Install(s); err != nil {
		panic(err)
	}
	return s
}

// CacheOptions caches only what the operator made or reads of its DGDs, never a
// cluster's other objects of those kinds (issue 23: their number must not grow its
// memory):
//   - its workloads (Deployments, LeaderWorkerSets, PodCliqueSets) and
//     ControllerRevisions, by its managed-by label; a StatefulSet's or DaemonSet's
//     ControllerRevisions carry the pod template's labels (a LeaderWorkerSet's
//     StatefulSets copy ours) and are told apart by the hash label Kubernetes'
//     history package gives them (controller.kubernetes.io/hash), which ours lack; an
//     object of ours stripped of its labels is relabelled (backends.RelabelStripped),
//     and one a DGD controls without them is labelled at start (backends.RelabelOwned,
//     NewManager) and when a create answers AlreadyExists (backends.ExistingOnCreate);
//   - the pods of DGDs (as metadata: the controller watches and lists them so), by the
//     graph label;
//   - the EndpointSlices of DGDs' discovery Services (both discovery labels and the
//     graph label, which the EndpointSlice controller copies from the Service: how a
//     DGD's readiness is read, controllers/discovery.go);
//   - the Services, Ingresses, ServiceAccounts, Roles, RoleBindings, ConfigMaps and
//     HTTPRoutes it made, by its managed-by label; Gateways (none of them ours: the
//     parents its HTTPRoutes name) unfiltered.
//
// PodCliques and PodCliqueScalingGroups are Grove's: they carry only Grove's labels
// (app.kubernetes.io/managed-by: grove-operator, part-of: <PodCliqueSet>; FACTS.md),
// so no selector tells a DGD's from another PodCliqueSet's. They stay unfiltered; a
// PodClique's pod spec (all but its size) is dropped as it enters the cache (nothing
// reads it: replicas and status are), and a PodCliqueScalingGroup holds no pod spec.
// Secrets are never cached (read with the API reader), nor are StatefulSets,
// ReplicaSets or Nodes (never read). Fields nothing reads are dropped: managedFields
// of everything, the pod specs of Deployments, LeaderWorkerSets, PodCliqueSets and
// PodCliques.
func CacheOptions() cache.Options {
	ofDGD, err := labels.NewRequirement(v1alpha1.LabelGraph, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	notHistory, err := labels.NewRequirement(HistoryHashLabel, selection.DoesNotExist, nil)
	if err != nil {
		panic(err)
	}
	ours := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})
	discovery := labels.SelectorFromSet(labels.Set{render.LabelDiscoveryEnabled: "true", render.LabelDiscoveryBackend: render.DiscoveryKubernetes}).Add(*ofDGD)
	return cache.Options{
		// Nothing reads managedFields: the cache need not hold them.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:         {Label: ours, Transform: StripDeploymentPodSpec},
			&appsv1.ControllerRevision{}: {Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}).Add(*notHistory)},
			&lwsv1.LeaderWorkerSet{}:     {Label: ours, Transform: StripLeaderWorkerSetPodSpecs},
			&grovev1.PodCliqueSet{}:      {Label: ours, Transform: StripPodCliqueSetPodSpecs},
			&grovev1.PodClique{}:         {Transform: StripPodCliquePodSpec},
			&corev1.Pod{}:                {Label: labels.NewSelector().Add(*ofDGD)},
			&corev1.Service{}:            {Label: ours},
			&networkingv1.Ingress{}:      {Label: ours},
			&corev1.ServiceAccount{}:     {Label: ours},
			&rbacv1.Role{}:               {Label: ours},
			&rbacv1.RoleBinding{}:        {Label: ours},
			&corev1.ConfigMap{}:          {Label: ours},
			&discoveryv1.EndpointSlice{}: {Label: discovery},
			&gatewayv1.HTTPRoute{}:       {Label: ours},
			&gatewayv1.Gateway{}:         {},
		}}
}

// CacheOptionsFor is CacheOptions for the cluster of cfg: the kinds whose CRDs it does
// not serve (LeaderWorkerSet, Grove's) are left out, as a cache of a kind the API
// server does not know stops the manager from being made (Backends leaves their
// backends out too).
func CacheOptionsFor(cfg *rest.Config) (cache.Options, error) {
	opts := CacheOptions()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return opts, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return opts, err
	}
	s := NewScheme()
	for obj := range opts.ByObject {
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			return opts, err
		}
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
			delete(opts.ByObject, obj)
		} else if err != nil {
			return opts, fmt.Errorf("looking up %s: %w", gvk.Kind, err)
		}
	}
	return opts, nil
}

// HistoryHashLabel is the label Kubernetes' controller history gives every
// ControllerRevision it makes for a StatefulSet or DaemonSet (k8s.io/kubernetes
// pkg/controller/history, ControllerRevisionHashLabel): the operator's own revisions
// never carry it. (LeaderWorkerSet's own revisions carry neither it nor ours.)
const HistoryHashLabel = "controller.kubernetes.io/hash"

// StripDeploymentPodSpec is the cache transform of Deployments: managedFields and the
// pod spec dropped, the largest part of a Deployment the operator renders (Dynamo's
// env, probes, volumes). In benchmark P3, once 500 graphs were created, cached
// Deployments were 38% of the operator's heap and their pod specs 20%. Nothing reads a cached Deployment's pod spec: the operator compares its own
// template hash annotation, scales through /scale, and patches a stable workload's
// template against the live object (deployment.Backend.Reader). Every other field,
// the pod template's labels and annotations included, is kept.
func StripDeploymentPodSpec(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if d, ok := obj.(*appsv1.Deployment); ok {
		d.Spec.Template.Spec = corev1.PodSpec{}
	}
	return obj, err
}

// StripLeaderWorkerSetPodSpecs is the cache transform of LeaderWorkerSets: managedFields
// and the leader's and workers' pod specs dropped (their labels and annotations kept,
// which Observe reads: the worker template's revision label). A stable LeaderWorkerSet
// is updated against the live object (backends/single's updateStable through the API
// reader), so nothing reads a cached pod spec.
func StripLeaderWorkerSetPodSpecs(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if l, ok := obj.(*lwsv1.LeaderWorkerSet); ok {
		if t := l.Spec.LeaderWorkerTemplate.LeaderTemplate; t != nil {
			t.Spec = corev1.PodSpec{}
		}
		l.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec = corev1.PodSpec{}
	}
	return obj, err
}

// StripPodCliqueSetPodSpecs is the cache transform of PodCliqueSets: managedFields and
// each clique template's pod spec dropped. The Grove backend reads a PodCliqueSet's
// cliques by name, labels and replicas and its scaling groups (backends/grove
// placements, workerHash, scaleTemplate's JSON patch, which tests names and replaces
// replicas only), never a pod spec.
func StripPodCliqueSetPodSpecs(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if p, ok := obj.(*grovev1.PodCliqueSet); ok {
		for _, c := range p.Spec.Template.Cliques {
			if c != nil {
				c.Spec.PodSpec = corev1.PodSpec{}
			}
		}
	}
	return obj, err
}

// StripPodCliquePodSpec is the cache transform of PodCliques: managedFields and the
// pod spec dropped. The Grove backend reads a PodClique's replicas and status only
// (backends/grove Observe and Scale), and the controller its owner references.
func StripPodCliquePodSpec(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if c, ok := obj.(*grovev1.PodClique); ok {
		c.Spec.PodSpec = corev1.PodSpec{}
	}
	return obj, err
}

// Options configure the operator beyond controller-runtime's manager options.
type Options struct {
	// Manager are controller-runtime's options; Scheme and Cache are set by NewManager.
	Manager ctrl.Options
	// Platform is the cluster's Dynamo platform pods are rendered for.
	Platform render.Config
	// Tuning is how hard the operator works.
	Tuning Tuning
	// PrometheusURL is the Prometheus the analysis steps of spec.rollout.steps query
	// (http://host:9090). Empty: Platform.PrometheusEndpoint when set; with neither,
	// every query errs and an analysis is inconclusive (the rollout holds for a person).
	PrometheusURL string
	// Prometheus is how PrometheusURL is reached (TLS, bearer token).
	Prometheus analysis.PrometheusClient
	// Querier, when set, answers the analysis queries instead (tests).
	Querier analysis.Querier
	// WatchNamespaces, when set, restricts the operator to these namespaces: its cache
	// lists and watches them alone, so Roles in them (and the one ClusterRole rule for
	// its own CRD) are all the RBAC it needs; DGDs elsewhere are not reconciled. The
	// storage migration (MigrateStorage, which lists DGDs cluster-wide) does not run.
	WatchNamespaces []string
	// Webhook configures the conversion webhook (/convert); the zero value serves none.
	Webhook WebhookOptions
	// Middleware, when set, wraps the DGD reconciler (controllers.Reconciler.Middleware):
	// tests trace passes with it.
	Middleware func(reconcile.Reconciler) reconcile.Reconciler
	// Traffic configures the traffic providers between cohorts (the proxy's images).
	Traffic traffic.Config
	// StorageMigrated, when set, is called when the storage migration of this start has
	// ended (MigrateStorage succeeded, or found nothing to do); never when it does not
	// run (WatchNamespaces). Tests wait for it before they change the CRD's storage.
	StorageMigrated func()
}

// AnalysisFlags binds the flags of the analysis steps.
func AnalysisFlags(fs *flag.FlagSet, url *string) {
	fs.StringVar(url, "prometheus-url", "", "Prometheus the analysis steps of spec.rollout.steps query, e.g. http://prometheus.monitoring:9090 (default: --prometheus-endpoint; with neither, analyses are inconclusive)")
}

// WatchNamespacesFlag binds --watch-namespaces (comma-separated) to ns.
func WatchNamespacesFlag(fs *flag.FlagSet, ns *[]string) {
	fs.Func("watch-namespaces", "comma-separated namespaces the operator watches and acts in (default: every namespace); with it, Roles in those namespaces are enough RBAC, apart from its CRD's conversion config", func(v string) error {
		*ns = nil
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				*ns = append(*ns, n)
			}
		}
		return nil
	})
}

// Tuning sizes the operator's work: how many DGDs it reconciles at once and its API
// request budget.
type Tuning struct {
	// Workers is the number of DGDs reconciled concurrently (never one DGD twice at
	// once: the work queue hands a key to one worker at a time).
	Workers int
	// QPS and Burst are the client's API request budget.
	QPS   float64
	Burst int
	// Pprof is the address of the pprof endpoints ("" or "0": off).
	Pprof string
	// GCPercent is the Go garbage collector's target (GOGC) the manager binary sets
	// (ApplyGC) unless the GOGC environment variable is set.
	GCPercent int
}

// ApplyGC sets the garbage collector's target to t.GCPercent unless GOGC is set in the
// environment (which wins), and returns the target in effect. The operator's live heap
// is mostly its informer caches; at GOGC 100 the heap grows to twice that before a
// collection, so the process's peak RSS is mostly headroom (benchmark P3 at 500
// graphs: 45 MB live, 160 MiB RSS). 50 trades a little of the operator's CPU (its own
// share of a rollout's CPU is under 5%) for a third less headroom.
func (t Tuning) ApplyGC() int {
	if _, ok := os.LookupEnv("GOGC"); ok {
		old := debug.SetGCPercent(-1) // read back what GOGC set, and restore it
		debug.SetGCPercent(old)
		return old
	}
	debug.SetGCPercent(t.GCPercent)
	return t.GCPercent
}

// DefaultTuning is the operator's default: 8 workers and 100 requests per second
// (burst 200), sized from benchmark P3 (500 graphs on 2 cores, docs/benchmarks.md).
var DefaultTuning = Tuning{Workers: 8, QPS: 100, Burst: 200, GCPercent: 50}

// TuningFlags binds the flags that size the operator's work.
func TuningFlags(fs *flag.FlagSet, t *Tuning) {
	*t = DefaultTuning
	fs.IntVar(&t.Workers, "max-concurrent-reconciles", t.Workers, "how many DGDs are reconciled at once (never one DGD twice at once)")
	fs.Float64Var(&t.QPS, "kube-api-qps", t.QPS, "requests per second the operator may make to the API server")
	fs.IntVar(&t.Burst, "kube-api-burst", t.Burst, "requests the operator may make at once above --kube-api-qps")
	fs.StringVar(&t.Pprof, "pprof-bind-address", "", "address of the pprof endpoints, e.g. 127.0.0.1:6060 (off when empty)")
	fs.IntVar(&t.GCPercent, "gc-percent", t.GCPercent, "the Go garbage collector's target percentage (GOGC); the GOGC environment variable, when set, wins")
}

// PlatformFlags binds the flags that configure the cluster's Dynamo platform.
func PlatformFlags(fs *flag.FlagSet, c *render.Config) {
	fs.StringVar(&c.NATSServer, "nats-server", "", "NATS_SERVER given to every Dynamo pod, e.g. nats://nats.dynamo-system:4222 (none when empty)")
	fs.StringVar(&c.ETCDEndpoints, "etcd-endpoints", "", "ETCD_ENDPOINTS given to every Dynamo pod, e.g. http://etcd.dynamo-system:2379 (none when empty)")
	fs.StringVar(&c.PrometheusEndpoint, "prometheus-endpoint", "", "PROMETHEUS_ENDPOINT given to every Dynamo pod (the planner reads metrics there)")
	fs.StringVar(&c.ModelExpressURL, "model-express-url", "", "MODEL_EXPRESS_URL given to every Dynamo pod")
	fs.StringVar(&c.DiscoveryBackend, "discovery-backend", render.DiscoveryKubernetes, "default discovery backend of Dynamo pods: kubernetes or etcd (a DGD's nvidia.com/dynamo-discovery-backend annotation overrides it)")
	fs.StringVar(&c.IngressHostSuffix, "ingress-host-suffix", "local", "domain of Ingress hosts whose spec sets no hostSuffix")
}

// Backends registers every backend this build runs, explicitly. A backend whose CRD is
// not installed in the cluster is left out (watching it would stop the manager from
// starting); DGDs that need it report InvalidSpec: backend not available.
func Backends(mgr ctrl.Manager, platform render.Config) *backends.Registry {
	r := backends.NewRegistry().
		Register(v1alpha1.BackendDeployment, deployment.New(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetScheme(), platform))
	if installed(mgr, lwsv1.SchemeGroupVersion.WithKind("LeaderWorkerSet")) {
		l := lws.New(mgr.GetClient(), mgr.GetScheme(), platform)
		l.Reader = mgr.GetAPIReader()
		r.Register(v1alpha1.BackendLeaderWorkerSet, l)
	} else {
		ctrl.Log.Info("LeaderWorkerSet CRD not installed: the LeaderWorkerSet backend is off")
	}
	if installed(mgr, grovev1.SchemeGroupVersion.WithKind("PodCliqueSet")) {
		g := grove.New(mgr.GetClient(), mgr.GetScheme(), platform)
		g.Reader = mgr.GetAPIReader()
		r.Register(v1alpha1.BackendGrove, g)
	} else {
		ctrl.Log.Info("Grove CRDs not installed: the Grove backend is off")
	}
	return r
}

// Providers are the traffic providers between cohorts: the proxy always, the Gateway
// API's where its HTTPRoute CRD is served (traffic.Provider; the operator's flags
// configure them).
func Providers(mgr ctrl.Manager) map[string]traffic.Provider {
	out := map[string]traffic.Provider{v1alpha1.TrafficProxy: proxy.Provider{}}
	if installed(mgr, gatewayv1.SchemeGroupVersion.WithKind("HTTPRoute")) {
		out[v1alpha1.TrafficGatewayAPI] = gatewayapi.Provider{}
	} else {
		ctrl.Log.Info("Gateway API CRDs not installed: spec.rollout.trafficRouting.gatewayAPI is off")
	}
	return out
}

func installed(mgr ctrl.Manager, gvk schema.GroupVersionKind) bool {
	_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}

// NewManager makes the operator's manager as cmd/manager runs it: opts with this
// scheme and cache, and the controller set up. Tests, benchmarks and make run use it
// too, so they run what the binary runs.
func NewManager(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if err := o.Platform.Validate(); err != nil {
		return nil, err
	}
	if o.Tuning == (Tuning{}) {
		o.Tuning = DefaultTuning
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.Tuning.QPS), o.Tuning.Burst
	opts, err := managerOptions(cfg, o)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if o.Webhook.enabled() {
		if err := SetupConversion(cfg, mgr, o.Webhook); err != nil {
			return nil, err
		}
	}
	if err := Setup(mgr, o); err != nil {
		return nil, err
	}
	if err := relabelOwned(mgr, o.WatchNamespaces); err != nil {
		return nil, err
	}
	// Objects stored before v1beta1 became the storage version are rewritten in it
	// (leader only, once per start; a no-op once status.storedVersions is [v1beta1]).
	// Not when restricted to namespaces: narrowing storedVersions needs every DGD of the
	// cluster rewritten, which such an operator can neither list nor write (as Dynamo's
	// namespace-restricted operator runs no migrator).
	if len(o.WatchNamespaces) > 0 {
		ctrl.Log.Info("watching namespaces; storage migration left to a cluster-wide operator", "namespaces", o.WatchNamespaces)
	} else if err := mgr.Add(migrator{cfg: cfg, done: o.StorageMigrated}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// managerOptions are o.Manager with the scheme, the cache (the operator's own objects,
// in the watched namespaces when restricted), pprof and the webhook server.
func managerOptions(cfg *rest.Config, o Options) (ctrl.Options, error) {
	opts := o.Manager
	opts.Scheme = NewScheme()
	var err error
	if opts.Cache, err = CacheOptionsFor(cfg); err != nil {
		return opts, err
	}
	if len(o.WatchNamespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.WatchNamespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	if o.Tuning.Pprof != "" {
		opts.PprofBindAddress = o.Tuning.Pprof
	}
	if o.Webhook.enabled() {
		srv, err := o.Webhook.Server()
		if err != nil {
			return opts, err
		}
		opts.WebhookServer = srv
	}
	return opts, nil
}

// relabelOwned labels the workloads and ControllerRevisions DGDs control that lack the
// operator's label (backends.RelabelOwned: made by an operator before issue 23, or
// stripped while none ran), before the manager's cache starts, so its first list finds
// them and no pass ever runs without them; and moves every owner reference to a DGD of
// an older version (an operator before issue 38 wrote nvidia.com/v1alpha1, which
// Dynamo deprecates: once it is no longer served the garbage collector cannot resolve
// the reference and deletes nothing) to v1alpha1.OwnerAPIVersion, on every kind a DGD
// owns, a metadata patch that rolls nothing. The SSH key Secret of TRT-LLM gangs is the
// one object it cannot see (the operator reads no Secret): one made by an older operator
// keeps its v1alpha1 reference (docs/reference.md). Every replica runs it, leader or not: it
// only adds the label to objects a DGD controls, which any leader would add too. A
// PodCliqueSet Dynamo's own operator made for a DGD (controlled by the DGD too) is left
// alone (grove.NotOurs): the operator never takes another controller's object for its
// own.
func relabelOwned(mgr ctrl.Manager, namespaces []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), relabelTimeout)
	defer cancel()
	n, err := backends.RelabelOwnedExcept(ctx, mgr.GetAPIReader(), mgr.GetClient(), mgr.GetScheme(), namespaces, grove.NotOurs,
		&appsv1.Deployment{}, &appsv1.ControllerRevision{}, &lwsv1.LeaderWorkerSet{}, &grovev1.PodCliqueSet{},
		// What else a DGD owns, for its owner references (v1alpha1.OwnerAPIVersion).
		&corev1.Service{}, &networkingv1.Ingress{}, &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{},
		&corev1.ConfigMap{}, &gatewayv1.HTTPRoute{})
	if err != nil {
		return fmt.Errorf("labelling the objects DGDs control: %w", err)
	}
	if n > 0 {
		ctrl.Log.Info("labelled the objects DGDs control that lacked the operator's label", "objects", n)
	}
	return nil
}

// relabelTimeout bounds relabelOwned (a metadata list of each kind, a patch per
// unlabelled object).
const relabelTimeout = 2 * time.Minute

// Setup adds the DynamoGraphDeployment controller to mgr.
func Setup(mgr ctrl.Manager, o Options) error {
	r, err := NewReconciler(mgr, o)
	if err != nil {
		return err
	}
	if o.Tuning.Workers == 0 {
		o.Tuning.Workers = DefaultTuning.Workers
	}
	if err := r.SetupWithManager(mgr, o.Tuning.Workers); err != nil {
		return fmt.Errorf("setting up the DynamoGraphDeployment controller: %w", err)
	}
	return nil
}

// NewReconciler builds the DynamoGraphDeployment reconciler Setup registers: the
// manager's client and cache, every backend whose CRDs are installed, the revision
// history, the analysis querier.
func NewReconciler(mgr ctrl.Manager, o Options) (*controllers.Reconciler, error) {
	// The one seam between the storage version and the operator's: DGDs are read from
	// the v1beta1 cache (and API) and converted in-process to v1alpha1, which every
	// part of the operator works on; their status is written back as v1beta1.
	r := &controllers.Reconciler{
		Client:     conversion.NewClient(mgr.GetClient()),
		Scheme:     mgr.GetScheme(),
		Recorder:   mgr.GetEventRecorder("dgd-rollout"),
		Backends:   Backends(mgr, o.Platform),
		Providers:  Providers(mgr),
		Traffic:    trafficConfig(mgr, o.Traffic),
		History:    revisions.NewHistory(mgr.GetClient(), mgr.GetScheme()),
		Platform:   o.Platform,
		APIReader:  conversion.Reader{Reader: mgr.GetAPIReader()},
		Middleware: o.Middleware,
	}
	if o.Querier != nil {
		r.Analysis = o.Querier
	} else if url := cmp.Or(o.PrometheusURL, o.Platform.PrometheusEndpoint); url != "" {
		rt, err := o.Prometheus.Transport()
		if err != nil {
			return nil, err
		}
		q, err := analysis.NewPrometheusWith(url, rt)
		if err != nil {
			return nil, err
		}
		r.Analysis = q
	}
	return r, nil
}
