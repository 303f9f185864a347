package backends

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// The operator's cache holds only the workloads and ControllerRevisions it made,
// selected by LabelManagedBy (cmd/manager/app CacheOptions): a cluster's other
// Deployments, StatefulSet revisions and so on never enter its memory. The price is
// that an object of ours whose labels someone strips (kubectl replace, an edit) leaves
// the cache as if it were deleted: its informer gets a Deleted event. Until issue 23
// the operator saw every Deployment, found its own by controller reference and put the
// labels back in Observe; with the filter it must look past the cache.
//
// RelabelStripped is that look: an event handler for a kind of such objects that
// passes every event on to next (EnqueueRequestForOwner of the DGD), but a Deleted
// one of an object a DGD controls is first checked against the API server (one GET,
// past the cache). Gone, replaced (another UID) or being deleted: next gets the
// Deleted event, as before. Still there and stripped of LabelManagedBy: the labels of
// ours it had when last cached are put back (a merge patch of those keys, nothing
// else), the object enters the cache again, and its Create event enqueues the DGD. The
// DGD is not enqueued in between, so no pass runs on a view that lacks a workload it
// still has (a pass that did would not count, drain or delete it).
//
// The check runs in its own goroutine: a Deleted event costs the informer nothing.
// An object the operator deleted itself (OwnDeletes: its UID, sent as the delete's
// precondition) is not read: it left the cache because it is gone. Any other real
// deletion of a workload (one per workload over its life) costs the operator one GET.
// kind is an empty object of the watched kind.
func RelabelStripped(live client.Reader, c client.Client, kind client.Object, next handler.EventHandler) handler.EventHandler {
	return &relabeler{live: live, c: c, kind: kind, next: next}
}

type relabeler struct {
	live client.Reader
	c    client.Client
	kind client.Object
	next handler.EventHandler
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (r *relabeler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	r.next.Create(ctx, e, q)
}

func (r *relabeler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	r.next.Update(ctx, e, q)
}

func (r *relabeler) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	r.next.Generic(ctx, e, q)
}

func (r *relabeler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	if e.Object == nil || !controlledByDGD(e.Object) || len(ourLabels(e.Object.GetLabels())) == 0 ||
		OwnDeletes.Deleted(e.Object.GetUID()) {
		r.next.Delete(ctx, e, q)
		return
	}
	// Not the handler's ctx: controller-runtime cancels it once the watches have started
	// (the source's start context, bounded by CacheSyncTimeout), and every read under it
	// failed at once, so nothing was ever relabelled.
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), relabelTimeout)
		defer cancel()
		if !r.restore(rctx, e.Object) {
			r.next.Delete(ctx, e, q)
		}
	}()
}

// restore puts the labels of ours that gone had back on the live object of its name,
// when that object is gone's very self (same UID), not being deleted, and lacks
// LabelManagedBy. It reports whether it did (the Create event that follows enqueues
// the DGD).
func (r *relabeler) restore(ctx context.Context, gone client.Object) bool {
	live := r.kind.DeepCopyObject().(client.Object)
	if err := r.live.Get(ctx, client.ObjectKeyFromObject(gone), live); err != nil {
		if !apierrors.IsNotFound(err) {
			ctrllog.FromContext(ctx).Error(err, "reading an object that left the cache", "object", client.ObjectKeyFromObject(gone))
		}
		return false
	}
	if live.GetUID() != gone.GetUID() || !live.GetDeletionTimestamp().IsZero() ||
		live.GetLabels()[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue {
		return false
	}
	want := ourLabels(gone.GetLabels())
	var err error
	for try := 0; try < relabelTries; try++ {
		// PatchLabels changes live only with the server's answer, so a retry patches the
		// same missing labels again.
		if err = PatchLabels(ctx, r.c, live, MissingLabels(live.GetLabels(), want)); err == nil || apierrors.IsNotFound(err) {
			break
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Duration(try+1) * 100 * time.Millisecond):
		}
	}
	if err != nil {
		ctrllog.FromContext(ctx).Error(err, "restoring the labels of an object stripped of them", "object", client.ObjectKeyFromObject(gone))
		return false
	}
	ctrllog.FromContext(ctx).Info("restored the labels of an object stripped of them", "object", client.ObjectKeyFromObject(gone))
	return true
}

// relabelTimeout bounds one relabelling (a read and at most relabelTries patches).
const relabelTimeout = 30 * time.Second

// relabelTries bounds the label patch's attempts (a failed write is retried after
// 100, 200... ms; the last failure leaves the DGD to see the object gone).
const relabelTries = 5

// ourLabels are the labels of l the operator writes: LabelManagedBy when it is ours,
// and the nvidia.com/ ones (graph, service, component type, worker hash...).
func ourLabels(l map[string]string) map[string]string {
	if l[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
		return nil
	}
	out := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	for k, v := range l {
		if strings.HasPrefix(k, v1alpha1.GroupVersion.Group+"/") {
			out[k] = v
		}
	}
	return out
}

// controlledByDGD reports whether o's controller is a DGD (either version).
func controlledByDGD(o metav1.Object) bool {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "DynamoGraphDeployment" {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == v1alpha1.GroupVersion.Group
}

// ExistingOnCreate judges a create of want (whose controller is to be owner) that the
// API server refused with AlreadyExists while the cache showed no such object. The
// cache holds only objects labelled as the operator's, so the object is read past it
// (live, the manager's API reader; nil: the old rule, AlreadyExists counts as success):
//   - gone meanwhile: nil (the next pass creates it);
//   - controlled by owner: the operator's own; any of want's labels it lacks are put
//     back (an object of ours stripped of them, or made by a version that did not set
//     them), so it enters the cache and the next pass observes it: never a second one;
//   - anything else: a NameConflictError naming it; nothing of it is touched.
func ExistingOnCreate(ctx context.Context, live client.Reader, c client.Client, want client.Object, owner metav1.Object, kind string) error {
	if live == nil {
		return nil
	}
	have := want.DeepCopyObject().(client.Object)
	if err := live.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("creating %s %s/%s: it exists, but reading it: %w", kind, want.GetNamespace(), want.GetName(), err)
	}
	if !metav1.IsControlledBy(have, owner) {
		return NotControlled(kind, have, owner)
	}
	return PatchLabels(ctx, c, have, MissingLabels(have.GetLabels(), want.GetLabels()))
}

// RelabelOwned is the upgrade step of the filtered cache: every object of the given
// kinds (empty objects of each; a kind the API server does not serve is skipped) whose
// controller is a DGD and which lacks LabelManagedBy gets it, and LabelGraph (the
// DGD's name) when missing, by a merge patch of those two keys. Such an object was made
// by an operator that did not label it, or stripped of its labels while no operator
// ran: without the labels it would never enter the cache, and the DGD would neither
// count, scale, nor delete it (an old revision's workload left running; a create of a
// current one answering AlreadyExists forever). The manager runs it once at start,
// before its cache (app.NewManager); the workloads' other labels are reported by the
// backends' Observe (Workload.Relabel) once the cache shows them, and the pass puts
// them back (Backend.Relabel).
//
// It also moves every owner reference to a DGD of another API version than
// v1alpha1.OwnerAPIVersion (an older operator wrote nvidia.com/v1alpha1) to it, by a
// merge patch of the owner references alone (no workload rolls): the garbage collector
// resolves an owner through its reference's version (garbagecollector.go isDangling:
// gc.apiResource(reference.APIVersion, ...), a restMappingError retried forever), so
// once v1alpha1 is no longer served an object owned through it would outlive its DGD.
//
// namespaces restricts it to those namespaces (an operator restricted to them may list
// nothing else); none: the whole cluster. It reads metadata only, 500 objects a page, so a cluster's many unrelated objects
// cost it one pass over their metadata and nothing after. It reports how many objects
// it labelled.
func RelabelOwned(ctx context.Context, live client.Reader, c client.Client, scheme *runtime.Scheme, namespaces []string, kinds ...client.Object) (int, error) {
	return RelabelOwnedExcept(ctx, live, c, scheme, namespaces, nil, kinds...)
}

// NotOurs reports of an object of kind gvk whose controller is a DGD that the operator
// did not make it: another controller of the DGD's made it (Dynamo's own operator makes
// its Grove PodCliqueSet so: the take-over, controllers/dynamo.go).
type NotOurs func(gvk schema.GroupVersionKind, o metav1.Object) bool

// RelabelOwnedExcept is RelabelOwned leaving alone every object notOurs reports (nil:
// none): such an object must never enter the cache, where the backends would take it
// for theirs.
func RelabelOwnedExcept(ctx context.Context, live client.Reader, c client.Client, scheme *runtime.Scheme, namespaces []string,
	notOurs NotOurs, kinds ...client.Object) (int, error) {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	n := 0
	for _, ns := range namespaces {
		m, err := relabelOwnedIn(ctx, live, c, scheme, ns, notOurs, kinds)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func relabelOwnedIn(ctx context.Context, live client.Reader, c client.Client, scheme *runtime.Scheme, ns string, notOurs NotOurs, kinds []client.Object) (int, error) {
	n := 0
	for _, kind := range kinds {
		gvk, err := apiutil.GVKForObject(kind, scheme)
		if err != nil {
			return n, err
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		for {
			err := live.List(ctx, list, client.InNamespace(ns), client.Limit(relabelPage), client.Continue(list.Continue))
			if apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				break // the kind is not served (its CRD not installed)
			}
			if err != nil {
				return n, fmt.Errorf("listing %s to label the operator's own: %w", gvk.Kind, err)
			}
			for i := range list.Items {
				o := &list.Items[i]
				if notOurs != nil && notOurs(gvk, o) {
					continue
				}
				o.SetGroupVersionKind(gvk)
				moved := false
				if refs, stale := upgradedRefs(o.GetOwnerReferences()); stale {
					if err := patchOwners(ctx, live, c, o, refs); err != nil {
						return n, err
					}
					moved = true
				}
				if !controlledByDGD(o) || o.GetLabels()[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue {
					if moved {
						n++
					}
					continue
				}
				want := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
				if o.GetLabels()[v1alpha1.LabelGraph] == "" {
					want[v1alpha1.LabelGraph] = metav1.GetControllerOf(o).Name
				}
				if err := PatchLabels(ctx, c, o, MissingLabels(o.GetLabels(), want)); err != nil {
					return n, err
				}
				n++
			}
			if list.Continue == "" {
				break
			}
		}
	}
	return n, nil
}

// upgradedRefs are refs with every owner reference to a DGD of another version than
// v1alpha1.OwnerAPIVersion moved to it (the same object, named by its UID), and whether
// any was.
func upgradedRefs(refs []metav1.OwnerReference) ([]metav1.OwnerReference, bool) {
	stale := false
	out := make([]metav1.OwnerReference, len(refs))
	for i, r := range refs {
		out[i] = r
		if gv, err := schema.ParseGroupVersion(r.APIVersion); err == nil && gv.Group == v1alpha1.GroupVersion.Group &&
			r.Kind == "DynamoGraphDeployment" && r.APIVersion != v1alpha1.OwnerAPIVersion {
			out[i].APIVersion = v1alpha1.OwnerAPIVersion
			stale = true
		}
	}
	return out, stale
}

// patchOwners writes refs as o's owner references (a merge patch of the whole list,
// under o's resourceVersion; a conflict reads o again and retries): nothing else of o
// changes, so no workload rolls.
func patchOwners(ctx context.Context, live client.Reader, c client.Client, o *metav1.PartialObjectMetadata, refs []metav1.OwnerReference) error {
	for attempt := 0; ; attempt++ {
		data, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs, "resourceVersion": o.GetResourceVersion()}})
		if err != nil {
			return err
		}
		err = c.Patch(ctx, o, client.RawPatch(types.MergePatchType, data))
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err) || attempt == 3:
			return fmt.Errorf("moving the owner references of %s %s/%s to %s: %w", o.Kind, o.Namespace, o.Name, v1alpha1.OwnerAPIVersion, err)
		}
		if err := live.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return client.IgnoreNotFound(err)
		}
		var stale bool
		if refs, stale = upgradedRefs(o.GetOwnerReferences()); !stale {
			return nil
		}
	}
}

// relabelPage is RelabelOwned's page size.
const relabelPage = 500
