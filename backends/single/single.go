// Package single is the one adapter of the backends that keep one object per (service,
// revision) whose .spec.replicas are the workload's replicas: Deployment (replicas are
// pods) and LeaderWorkerSet (replicas are gangs). What differs between them is a Kind
// (the object type, its name, how it is rendered, where its key and status are); the
// adapter does the rest one way for both, as an idempotent manager in the style of
// LWS's DisaggregatedSet lws_manager.go (AlreadyExists and NotFound as success, errors
// naming the object):
//
//   - Ensure creates a missing object once (a create answered AlreadyExists is judged
//     on the live object: backends.ExistingOnCreate); a worker revision's object never changes
//     after; a stable service's is updated in place (labels, template hash, replicas and
//     what Kind.Stable copies) when its template hash or replicas differ, patched
//     against the live object, which the cache may not hold whole (Deployments are
//     cached without their pod spec);
//   - Observe reads only: objects found by controller reference, (service, revision)
//     from fields that never change, so an object stripped of its labels is still
//     counted; the labels to put back are reported (Workload.Relabel);
//   - Scale writes the count through the scale subresource, Delete cascades in the
//     background under the observed UID as a precondition, Relabel patches labels alone.
package single

import (
	"context"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// Status is what a workload's object reports of its replicas.
type Status struct {
	Ready, Updated, Current int32
	// ObservedGeneration is the generation the status describes.
	ObservedGeneration int64
}

// Kind is what one object kind brings to the adapter.
type Kind[T client.Object] struct {
	// Description is the backend's (Names must be set: a name is a function of the
	// DGD and the key).
	Description backends.Description
	// New returns an empty object of the kind; NewList an empty list.
	New     func() T
	NewList func() client.ObjectList
	// Render builds the object of one (service, revision): named Description.Names,
	// labelled backends.Labels, annotated backends.AnnotationTemplateHash, controlled by
	// the DGD, with the service workload's replicas.
	Render func(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload) (T, error)
	// Key reads (service, revision) from fields that never change after creation (a
	// Deployment's selector, a LeaderWorkerSet's worker template); false for an object
	// that is none of the adapter's.
	Key func(T) (backends.Key, bool)
	// Replicas reads .spec.replicas (nil means 1).
	Replicas func(T) *int32
	// Status reads the object's status.
	Status func(T) Status
	// Stable copies into have (the live object) what an in-place update of a stable
	// workload takes from want besides its labels and template hash: the replicas and
	// the templates.
	Stable func(have, want T)
	// Leader reports whether a pod with these labels runs its replica's Dynamo runtime
	// (nil: every pod does). See backends.GangLeaders.
	Leader func(podLabels map[string]string) bool
}

// Adapter is a backends.Backend over one Kind.
type Adapter[T client.Object] struct {
	Kind   Kind[T]
	Client client.Client
	// Reader reads an object live where the cached copy is not enough (a stable
	// workload's template patch; a create answered AlreadyExists, judged by
	// backends.ExistingOnCreate on the live object); nil: Client for the former, and
	// AlreadyExists counts as success.
	Reader client.Reader
}

var (
	_ backends.Backend           = (*Adapter[client.Object])(nil)
	_ backends.GangLeaders       = (*Adapter[client.Object])(nil)
	_ backends.SubdomainReleaser = (*Adapter[client.Object])(nil)
)

// Describe implements backends.Backend.
func (a *Adapter[T]) Describe() backends.Description { return a.Kind.Description }

// Name implements backends.Backend.
func (a *Adapter[T]) Name(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) string {
	return a.Kind.Description.Names(dgd, key)
}

// Objects implements backends.Backend.
func (a *Adapter[T]) Objects() []client.Object { return []client.Object{a.Kind.New()} }

func (a *Adapter[T]) kind() string { return a.Kind.Description.Kind }

func (a *Adapter[T]) reader() client.Reader {
	if a.Reader != nil {
		return a.Reader
	}
	return a.Client
}

// named is an empty object of the kind with a namespace and name.
func (a *Adapter[T]) named(namespace, name string) T {
	o := a.Kind.New()
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}

// Ensure implements backends.Backend.
func (a *Adapter[T]) Ensure(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool) error {
	for _, sw := range pool.Services {
		if err := a.ensureOne(ctx, dgd, sw); err != nil {
			return err
		}
	}
	return nil
}

func (a *Adapter[T]) ensureOne(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload) error {
	want, err := a.Kind.Render(dgd, sw)
	if err != nil {
		return err
	}
	have := a.Kind.New()
	err = a.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		if err := a.Client.Create(ctx, want); apierrors.IsAlreadyExists(err) {
			// Not in the cache, which holds only the operator's labelled objects
			// (app.CacheOptions): judged on the live object (ours stripped of its labels
			// is relabelled, another owner's is a NameConflict).
			return backends.ExistingOnCreate(ctx, a.Reader, a.Client, want, dgd, a.kind())
		} else if err != nil {
			return fmt.Errorf("creating %s %s/%s: %w", a.kind(), want.GetNamespace(), want.GetName(), err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("getting %s %s/%s: %w", a.kind(), want.GetNamespace(), want.GetName(), err)
	case !metav1.IsControlledBy(have, dgd):
		return backends.NotControlled(a.kind(), have, dgd)
	case sw.Hash != "" && !sw.InPlace:
		return nil // a worker revision's template never changes; Scale moves replicas
	case sw.Hash != "":
		// A cohort's frontend: its template in place, its replicas as they are (the
		// planner moves them through Scale, in the pass's order of writes).
		setReplicas(a.Kind.Replicas(want), ptr.Deref(a.Kind.Replicas(have), 1))
	}
	return a.updateStable(ctx, have, want)
}

// setReplicas sets the replica count a Kind's Replicas points at (nil: none to set).
func setReplicas(p *int32, n int32) {
	if p != nil {
		*p = n
	}
}

// updateStable updates a stable workload in place only when something the operator
// renders differs (the template hash annotation or the replicas, both in the cached
// copy). The patch is computed against the live object, whose pod spec the cache may
// not hold, so that a field removed from the template is removed from the workload.
func (a *Adapter[T]) updateStable(ctx context.Context, have, want T) error {
	if have.GetAnnotations()[backends.AnnotationTemplateHash] == want.GetAnnotations()[backends.AnnotationTemplateHash] &&
		ptr.Deref(a.Kind.Replicas(have), 1) == ptr.Deref(a.Kind.Replicas(want), 1) {
		return nil
	}
	live := a.Kind.New()
	if err := a.reader().Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
		return fmt.Errorf("reading %s %s/%s: %w", a.kind(), want.GetNamespace(), want.GetName(), err)
	}
	patch := client.MergeFrom(live.DeepCopyObject().(client.Object))
	labels := live.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, want.GetLabels())
	live.SetLabels(labels)
	annotations := live.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[backends.AnnotationTemplateHash] = want.GetAnnotations()[backends.AnnotationTemplateHash]
	live.SetAnnotations(annotations)
	a.Kind.Stable(live, want)
	if err := a.Client.Patch(ctx, live, patch); err != nil {
		return fmt.Errorf("updating %s %s/%s: %w", a.kind(), live.GetNamespace(), live.GetName(), err)
	}
	return nil
}

// Observe implements backends.Backend: it only reads.
func (a *Adapter[T]) Observe(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]backends.Workload, error) {
	list := a.Kind.NewList()
	if err := backends.ListControlled(ctx, a.Client, list, dgd); err != nil {
		return nil, fmt.Errorf("listing %ss of %s/%s: %w", a.kind(), dgd.Namespace, dgd.Name, err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var out []backends.Workload
	for _, it := range items {
		o, ok := it.(T)
		if !ok || !metav1.IsControlledBy(o, dgd) {
			continue
		}
		key, ok := a.Kind.Key(o)
		if !ok {
			continue
		}
		w, _ := a.Read(o)
		w.Key = key
		w.Outdated = key.Hash == "" && o.GetName() != a.Name(dgd, key)
		w.Relabel = backends.MissingLabels(o.GetLabels(), backends.Labels(dgd, key.Service, key.Hash))
		out = append(out, w)
	}
	return out, nil
}

// Read reads an object of the kind as Observe reports a workload: its name, UID,
// replicas, readiness and whether its status describes its spec; not its key, Outdated
// or Relabel, which are about the adapter's own objects. false for an object of
// another type. The take-over reads Dynamo's objects of the kind with it (controllers'
// dynamoWorkload), so that they count as the backend counts its own.
func (a *Adapter[T]) Read(obj client.Object) (backends.Workload, bool) {
	o, ok := obj.(T)
	if !ok {
		return backends.Workload{}, false
	}
	st := a.Kind.Status(o)
	return backends.Workload{
		Kind:        a.kind(),
		Name:        o.GetName(),
		UID:         o.GetUID(),
		Replicas:    ptr.Deref(a.Kind.Replicas(o), 1),
		Ready:       st.Ready,
		Updated:     st.Updated,
		Current:     st.Current,
		Synced:      st.ObservedGeneration >= o.GetGeneration(),
		Generation:  o.GetGeneration(),
		Terminating: !o.GetDeletionTimestamp().IsZero(),
	}, true
}

// Scale implements backends.Backend.
func (a *Adapter[T]) Scale(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w backends.Workload, replicas int32) error {
	name := client.ObjectKey{Namespace: dgd.Namespace, Name: w.Name}
	if name.Name == "" {
		name.Name = a.Name(dgd, w.Key)
	}
	return backends.ScaleReplicas(ctx, a.Client, a.Kind.New(), name, a.kind(), a.Kind.Replicas, replicas)
}

// Delete implements backends.Backend: that very object (w.UID, a precondition), never
// another one made under its name since.
func (a *Adapter[T]) Delete(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w backends.Workload) error {
	o := a.named(dgd.Namespace, w.Name)
	o.SetUID(w.UID)
	return backends.DeleteObject(ctx, a.Client, o, a.kind())
}

// Relabel implements backends.Backend.
func (a *Adapter[T]) Relabel(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w backends.Workload) error {
	return backends.PatchLabels(ctx, a.Client, a.named(dgd.Namespace, w.Name), w.Relabel)
}

// Leader implements backends.GangLeaders.
func (a *Adapter[T]) Leader(podLabels map[string]string) bool {
	return a.Kind.Leader == nil || a.Kind.Leader(podLabels)
}

// AnnotationSubdomainReleased is set on a workload once the operator has deleted a
// Service of its own that had the workload's name (an operator before issue 22 named a
// revision's discovery Service so): the annotation's write is the event on which the
// workload's controller (LWS) creates the group's headless Service. It is metadata
// only: LWS's revision hash covers the template, so nothing rolls.
const AnnotationSubdomainReleased = "nvidia.com/dgd-subdomain-service-released"

// ReleaseSubdomain implements backends.SubdomainReleaser (Description.ReleasesSubdomain
// says whether the controller calls it).
func (a *Adapter[T]) ReleaseSubdomain(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, workload string) error {
	patch := []byte(`{"metadata":{"annotations":{"` + AnnotationSubdomainReleased + `":"true"}}}`)
	err := a.Client.Patch(ctx, a.named(dgd.Namespace, workload), client.RawPatch(types.MergePatchType, patch))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotating %s %s/%s: %w", a.kind(), dgd.Namespace, workload, err)
	}
	return nil
}
