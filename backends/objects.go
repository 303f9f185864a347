package backends

import (
	"context"
	"fmt"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ScaleReplicas reads the object key into obj and sets its replicas (the field that
// replicas points to, nil meaning 1) to n through its scale subresource, as kubectl
// scale and the HorizontalPodAutoscaler do: the write carries nothing but the count, so
// it can never undo another writer's change to the rest of the object. No write when
// the count is n already, nor when the object is gone (Backend: NotFound counts as
// success; the next Observe no longer reports it). kind names the object in errors.
func ScaleReplicas[T client.Object](ctx context.Context, c client.Client, obj T, key client.ObjectKey, kind string,
	replicas func(T) *int32, n int32) error {
	if err := c.Get(ctx, key, obj); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("getting %s %s: %w", kind, key, err)
	}
	if ptr.Deref(replicas(obj), 1) == n {
		return nil
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	if err := c.SubResource("scale").Update(ctx, obj, client.WithSubResourceBody(scale)); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("scaling %s %s to %d: %w", kind, key, n, err)
	}
	return nil
}

// DeleteObject deletes obj (namespace and name set) and, in the background, what it
// owns; an object already gone is not an error. kind names the object in errors.
//
// The delete carries obj's UID as a precondition whenever obj has one (every object
// the operator observed): the API server deletes only that very object, and refuses
// (409 Conflict, ErrPreconditionFailed) once another object holds the name: one
// recreated by hand, by the next leader of a leader election, or by another DGD. A
// stale leader (its lease lost, its pass still running on what it read before) can
// so never delete its successor's object: a name is not an identity. An object
// without a UID (made up from a name alone) is deleted by name, as before.
func DeleteObject(ctx context.Context, c client.Client, obj client.Object, kind string) error {
	return DeleteObjectWith(ctx, c, obj, kind, metav1.DeletePropagationBackground)
}

// DeleteObjectWith is DeleteObject with the propagation policy given: Orphan leaves what
// obj owns in place, its owner reference removed by the garbage collector.
func DeleteObjectWith(ctx context.Context, c client.Client, obj client.Object, kind string, policy metav1.DeletionPropagation) error {
	err := DeleteThat(ctx, c, obj, client.PropagationPolicy(policy))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case obj.GetUID() != "" && apierrors.IsConflict(err):
		return &ReplacedError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), Err: err}
	}
	return fmt.Errorf("deleting %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
}

// DeleteThat deletes obj, that very object when it has a UID (a precondition: never
// another one made under its name since), and notes it in OwnDeletes. The API server's
// answer is returned as it is.
func DeleteThat(ctx context.Context, c client.Client, obj client.Object, opts ...client.DeleteOption) error {
	if uid := obj.GetUID(); uid != "" {
		opts = append(opts[:len(opts):len(opts)], client.Preconditions{UID: &uid})
	}
	done := OwnDeletes.Deleting(obj.GetUID())
	err := c.Delete(ctx, obj, opts...)
	done(err)
	return err
}

// ReplacedError is a delete the API server refused because the object of that name is
// no longer the one the operator meant (its UID precondition failed): nothing was
// deleted. The next pass reads the object that holds the name now.
type ReplacedError struct {
	Kind, Namespace, Name string
	UID                   types.UID
	Err                   error
}

func (e *ReplacedError) Error() string {
	return fmt.Sprintf("not deleting %s %s/%s: it is no longer the object %s the operator observed (%v)", e.Kind, e.Namespace, e.Name, e.UID, e.Err)
}

func (e *ReplacedError) Unwrap() error { return e.Err }

// NameConflictError is an object the DGD needs that exists under the name it needs but
// is not the DGD's: another controller or a person made it (or another DGD whose
// names collide with this one's). The operator never adopts, changes or deletes it and
// never counts it as created; it reports it (the controller's NameConflict condition
// and Warning Event) and checks again later.
type NameConflictError struct {
	Kind, Namespace, Name string
	// Owner describes the object's controller ("" when it has none).
	Owner string
	// DGD is the graph that needs the name.
	DGD string
}

func (e *NameConflictError) Error() string {
	owner := "has no controller"
	if e.Owner != "" {
		owner = "is controlled by " + e.Owner
	}
	return fmt.Sprintf("%s %s/%s exists and %s, not by DynamoGraphDeployment %s: the operator needs that name and leaves the object alone; delete or rename it",
		e.Kind, e.Namespace, e.Name, owner, e.DGD)
}

// NotControlled is the NameConflictError of have (of kind), which owner needs.
func NotControlled(kind string, have, owner metav1.Object) *NameConflictError {
	e := &NameConflictError{Kind: kind, Namespace: have.GetNamespace(), Name: have.GetName(), DGD: owner.GetName()}
	if ref := metav1.GetControllerOf(have); ref != nil {
		e.Owner = ref.Kind + " " + ref.Name
	}
	return e
}

// SpecError is a problem with the DGD's spec that a backend finds only when it acts
// (Grove: no PodCliqueSet name left that fits its limit): no retry fixes it, and the
// controller reports it as InvalidSpec.
type SpecError struct{ Err error }

func (e *SpecError) Error() string { return e.Err.Error() }

func (e *SpecError) Unwrap() error { return e.Err }

// OwnDeletes is the set of objects (by UID) this process has asked the API server to
// delete (DeleteThat), until their Deleted events arrive: RelabelStripped does not read
// past the cache what the operator knows it deleted (one GET of each Deployment a
// rollout retires, 2.00 a graph in benchmark P3, and of each ControllerRevision the
// history prunes). A UID names one object for ever, so a Deleted event of a UID in the
// set is that deletion, never a stripping of labels. An entry nothing claims (the object
// was already gone, or of a kind RelabelStripped does not watch, such as a Service)
// expires.
var OwnDeletes = &ownDeletes{ttl: 10 * time.Minute}

type ownDeletes struct {
	mu  sync.Mutex
	ttl time.Duration
	at  map[types.UID]time.Time
	now func() time.Time // time.Now when nil (tests set it)
}

func (o *ownDeletes) clock() time.Time {
	if o.now != nil {
		return o.now()
	}
	return time.Now()
}

// Deleting notes, before the request is sent (its Deleted event may reach the informer
// before its answer reaches us), that uid is being deleted, and returns what to call
// with the request's error: an error other than NotFound drops the note (nothing was
// deleted, or the object is no longer at that name: its event is not ours to claim).
// An empty uid (a delete without a UID precondition) is not noted.
func (o *ownDeletes) Deleting(uid types.UID) func(error) {
	if uid == "" {
		return func(error) {}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock()
	if o.at == nil {
		o.at = map[types.UID]time.Time{}
	}
	for u, t := range o.at {
		if now.Sub(t) >= o.ttl {
			delete(o.at, u)
		}
	}
	o.at[uid] = now
	return func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			o.mu.Lock()
			defer o.mu.Unlock()
			delete(o.at, uid)
		}
	}
}

// Deleted reports whether uid is one this process deleted, and forgets it.
func (o *ownDeletes) Deleted(uid types.UID) bool {
	if uid == "" {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.at[uid]
	delete(o.at, uid)
	return ok
}
