// Package controllers holds the DynamoGraphDeployment reconciler. It is thin: it wires
// the revision history (revisions), the pure rollout planner (controllers/planner) and
// the workload backends (backends), and writes the DGD status once per pass.
package controllers

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
)

// Reconciler reconciles DynamoGraphDeployments.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache (Secrets, which the operator does not watch).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Backends  *backends.Registry
	History   revisions.Interface
	// Platform is the cluster's Dynamo platform pods are rendered for.
	Platform render.Config
	// Analysis runs the queries of analysis steps (nil: no Prometheus, every query
	// errs and an analysis is inconclusive).
	Analysis analysis.Querier
	// Now is the clock; tests may replace it.
	Now func() time.Time
	// Middleware, when set, wraps the reconciler the controller runs: tests trace
	// passes with it (which DGDs are reconciled at once).
	Middleware func(reconcile.Reconciler) reconcile.Reconciler

	expected expectations
	// unscheduled shares each namespace's list of pods the scheduler could not place
	// among its DGDs (findUnschedulable).
	unscheduled unscheduledPods
	// statusRV remembers, per DGD, the resourceVersion of the operator's last status
	// write (see fresh).
	statusRV sync.Map
}

// +kubebuilder:rbac:groups=nvidia.com,resources=dynamographdeployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nvidia.com,resources=dynamographdeployments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nvidia.com,resources=dynamographdeployments/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one DGD a step closer to its spec. It reads as a priority list:
// deleted, invalid, revisions, observe, stable services, worker rollout, cleanup, status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var dgd v1alpha1.DynamoGraphDeployment
	if err := r.Client.Get(ctx, req.NamespacedName, &dgd); err != nil {
		if apierrors.IsNotFound(err) {
			ForgetDGD(req.Namespace, req.Name)
			r.statusRV.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if err := r.fresh(ctx, &dgd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !dgd.DeletionTimestamp.IsZero() {
		ForgetDGD(req.Namespace, req.Name)
		r.statusRV.Delete(req.NamespacedName)
		return ctrl.Result{}, nil // owner references garbage-collect every workload and revision
	}
	p := &pass{r: r, dgd: &dgd, goalDGD: &dgd, old: dgd.Status.DeepCopy(), now: r.now()}
	err := p.sync(ctx)
	var invalid *invalidSpecError
	var taken *backends.NameConflictError
	var specErr *backends.SpecError
	switch {
	case errors.As(err, &invalid):
		p.markInvalid(invalid)
		err = nil
	case errors.As(err, &specErr):
		p.markInvalid(&invalidSpecError{msg: specErr.Error()})
		err = nil
	case errors.As(err, &taken): // a workload's name is someone else's: nothing of it is touched
		p.conflict(taken)
		p.markStopped(v1alpha1.ReasonNameConflict, &invalidSpecError{msg: strings.Join(p.conflicts, "; ")})
		err = nil
	}
	// A pass whose sync failed part-way writes no status: what it observed or planned is
	// incomplete (no workloads, or a generation whose revision it never synced), and the
	// retry that follows writes the status of a whole pass.
	// Its writes made before the failure still get their Event: the retry will not make
	// them again.
	if err == nil {
		err = p.findUnschedulable(ctx)
	}
	if err == nil {
		err = p.writeStatus(ctx)
		p.emitEvents(err == nil)
		p.logStep(ctx)
	} else if done := append(p.wrote, p.objects...); len(done) > 0 {
		p.stepEvent(v1alpha1.EventRolloutStep, strings.Join(done, ", "))
		p.emitEvents(false)
	}
	if err != nil {
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(1).Info("conflict, requeueing", "error", err.Error())
			return ctrl.Result{Requeue: true}, nil
		}
		ObserveReconcileError(req.Namespace, req.Name)
		return ctrl.Result{}, err
	}
	if p.waitingForCache {
		// The cache event that satisfies the expectation requeues us; if someone else
		// wrote the workload meanwhile, the expectation expires instead.
		return ctrl.Result{RequeueAfter: expectationTTL}, nil
	}
	return ctrl.Result{RequeueAfter: p.requeueAfter}, nil
}

// fresh replaces a cached DGD that predates the operator's own last status write with
// the API server's. Status writes start no pass, so a pass a workload event starts
// right after one can find the cache a write behind: its status write would conflict
// (a wasted pass and a rate-limited retry) and it would judge the step from a status
// it had already replaced (an Event said twice). Resource versions compare as numbers
// (k8s.io/apimachinery/pkg/util/resourceversion, KEP-5504); one that does not parse
// keeps the cached DGD, and a conflict then retries as before.
func (r *Reconciler) fresh(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) error {
	wrote, ok := r.statusRV.Load(client.ObjectKeyFromObject(dgd))
	if !ok || r.APIReader == nil {
		return nil
	}
	if cmp, err := resourceversion.CompareResourceVersion(dgd.ResourceVersion, wrote.(string)); err != nil || cmp >= 0 {
		return nil
	}
	StaleReads.Inc()
	return r.APIReader.Get(ctx, client.ObjectKeyFromObject(dgd), dgd)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the reconciler: it owns every backend's workload kind and
// the ControllerRevisions, and hears pod deletions (Recreate waits for pods to be gone).
// workers DGDs are reconciled at once; the work queue never hands one DGD to two.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	// Workloads are listed per DGD through the controller-UID index (backends.ListControlled).
	indexed := map[reflect.Type]bool{}
	// So are the Services and Ingresses it prunes; pods, owned by the workloads, by graph.
	ctx := context.Background()
	// So are its ControllerRevisions (revisions.NewHistory lists them by graph).
	pod := &metav1.PartialObjectMetadata{}
	pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	for _, obj := range []client.Object{pod, &appsv1.ControllerRevision{}, &discoveryv1.EndpointSlice{}} {
		if err := backends.IndexGraph(ctx, mgr.GetFieldIndexer(), obj); err != nil {
			return err
		}
	}
	controlled := []client.Object{&corev1.Service{}, &networkingv1.Ingress{}}
	for _, be := range r.Backends.All() {
		controlled = append(controlled, be.Objects()...)
	}
	for _, obj := range controlled {
		if t := reflect.TypeOf(obj); !indexed[t] {
			indexed[t] = true
			if err := backends.IndexControllerUID(ctx, mgr.GetFieldIndexer(), obj); err != nil {
				return err
			}
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		// A DGD's own status writes (one per step, ours) start no pass: only its spec
		// (generation), annotations, labels, creation and deletion do.
		// The v1beta1 (storage) objects are watched: r.Client converts them (api/conversion).
		For(&v1beta1.DynamoGraphDeployment{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Named("dynamographdeployment").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)})
	for _, obj := range []client.Object{&corev1.Service{}, &networkingv1.Ingress{}, &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &corev1.ConfigMap{}} {
		b = b.Owns(obj)
	}
	// Workloads and ControllerRevisions are cached only with the operator's label
	// (cmd/manager/app CacheOptions): one stripped of it leaves the cache, and
	// RelabelStripped puts the labels back before the DGD hears of it (issue 23).
	owned := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1beta1.DynamoGraphDeployment{}, handler.OnlyControllerOwner())
	b = b.Watches(&appsv1.ControllerRevision{}, backends.RelabelStripped(mgr.GetAPIReader(), mgr.GetClient(), &appsv1.ControllerRevision{}, owned))
	for _, be := range r.Backends.All() {
		for _, obj := range be.Objects() {
			b = b.Watches(obj, backends.RelabelStripped(mgr.GetAPIReader(), mgr.GetClient(), obj, owned))
		}
		if ow, ok := be.(backends.OwnerChainWatcher); ok {
			for _, obj := range ow.Watched() {
				b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(r.ownerChainToDGD))
			}
		}
	}
	// A discovery EndpointSlice's change is a readiness change (controllers/discovery.go):
	// it carries its Service's graph label.
	b = b.Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(podToDGD))
	// Pods are watched and listed as metadata only: the controller reads their labels,
	// and a full pod of a Dynamo component (env, probes, volumes) is kilobytes.
	b = b.WatchesMetadata(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToDGD),
		builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		}))
	if r.Middleware != nil {
		return b.Complete(r.Middleware(r))
	}
	return b.Complete(r)
}

// podToDGD maps a pod (or any object carrying the LabelGraph label) to its DGD.
func podToDGD(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := o.GetLabels()[v1alpha1.LabelGraph]
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// maxOwnerHops bounds the walk up controller references: a PodClique of a scaling
// group is owned by its PodCliqueScalingGroup, which is owned by a PodCliqueSet, which
// is owned by the DGD.
const maxOwnerHops = 3

// ownerChainToDGD maps an object that the DGD does not own directly to the DGD at the
// top of its chain of controller references, read from the cache. Grove labels its
// PodCliqueScalingGroups with none of the clique template's labels (FACTS.md, "The real
// Grove operator"), so a label lookup would miss exactly the availableReplicas change
// that ends a multinode rollout; the owner chain never does.
func (r *Reconciler) ownerChainToDGD(ctx context.Context, o client.Object) []reconcile.Request {
	ns := o.GetNamespace()
	ref := metav1.GetControllerOf(o)
	for hop := 0; ref != nil && hop < maxOwnerHops; hop++ {
		// Owner references name either version of a DGD.
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && ref.Kind == dgdKind && gv.Group == v1alpha1.GroupVersion.Group {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: ref.Name}}}
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil
		}
		// A typed read is served by the informer the controller already runs for that
		// kind (a metadata-only read would start a second watch of it).
		obj, err := r.Scheme.New(gv.WithKind(ref.Kind))
		if err != nil {
			return nil
		}
		parent, ok := obj.(client.Object)
		if !ok {
			return nil
		}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, parent); err != nil {
			// Gone from the cache: its own deletion event already reached the DGD.
			return nil
		}
		if parent.GetUID() != ref.UID {
			return nil
		}
		ref = metav1.GetControllerOf(parent)
	}
	return nil
}

// dgdKind is the kind of a DGD in owner references.
const dgdKind = "DynamoGraphDeployment"
