package controllers

import (
	"context"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/backends"
)

// SetupWithManager registers the reconciler: it owns every backend's workload kind and
// the ControllerRevisions, and hears pod deletions (Recreate waits for pods to be gone).
// workers DGDs are reconciled at once; the work queue never hands one DGD to two.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if err := r.index(context.Background(), mgr); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		// A DGD's own status writes (one per step, ours) start no pass: only its spec
		// (generation), annotations, labels, creation and deletion do.
		// The v1beta1 (storage) objects are watched: r.Client converts them (api/conversion).
		// Each update also lets fresh drop the answer of the operator's own last status
		// write once the cache shows it (settled).
		For(&v1beta1.DynamoGraphDeployment{}, builder.WithPredicates(predicate.Or(
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { r.settled(e.ObjectNew); return false },
				CreateFunc: func(event.CreateEvent) bool { return false }, DeleteFunc: func(event.DeleteEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false }},
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Named("dynamographdeployment").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)})
	b = r.watchGateways(mgr, r.watchTemplates(r.watch(mgr, b)))
	// A landed analysis result enqueues its DGD (measure.go).
	b = b.WatchesRawSource(source.Func(r.measurements().start))
	if r.Middleware != nil {
		return b.Complete(r.Middleware(r))
	}
	return b.Complete(r)
}

// index registers the field indexes the controller lists by: pods, ControllerRevisions
// and EndpointSlices by graph (revisions.NewHistory lists revisions so); workloads,
// and the Services and Ingresses it prunes, by controller UID (backends.ListControlled);
// DGDs by the analysis templates they reference (templateIndex).
func (r *Reconciler) index(ctx context.Context, mgr ctrl.Manager) error {
	pod := &metav1.PartialObjectMetadata{}
	pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	for _, obj := range []client.Object{pod, &appsv1.ControllerRevision{}, &discoveryv1.EndpointSlice{}} {
		if err := backends.IndexGraph(ctx, mgr.GetFieldIndexer(), obj); err != nil {
			return err
		}
	}
	if err := indexTemplates(ctx, mgr); err != nil {
		return err
	}
	if r.gatewaysServed() {
		if err := indexGateways(ctx, mgr); err != nil {
			return err
		}
	}
	indexed := map[reflect.Type]bool{}
	controlled := []client.Object{&corev1.Service{}, &networkingv1.Ingress{}}
	if r.gatewaysServed() {
		controlled = append(controlled, &gatewayv1.HTTPRoute{})
	}
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
	return nil
}

// watch adds what the controller owns and watches besides the DGD: the objects it
// renders, its ControllerRevisions, every backend's workloads and the objects down their
// owner chains, discovery EndpointSlices and pod deletions.
func (r *Reconciler) watch(mgr ctrl.Manager, b *builder.Builder) *builder.Builder {
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
	// it carries its Service's graph label. An update that leaves what a pass reads of it
	// unchanged (readyEndpointsChanged) starts none.
	b = b.Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(podToDGD),
		builder.WithPredicates(predicate.Funcs{UpdateFunc: readyEndpointsChanged}))
	// Pods are watched and listed as metadata only: the controller reads their labels,
	// and a full pod of a Dynamo component (env, probes, volumes) is kilobytes.
	return b.WatchesMetadata(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToDGD),
		builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		}))
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
