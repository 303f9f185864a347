package revisions

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Verbs passed to Fake.Reactor.
const (
	VerbList     = "list"
	VerbCreate   = "create"
	VerbRenumber = "renumber"
	VerbDelete   = "delete"
	// VerbSetChangeCause is SetChangeCause.
	VerbSetChangeCause = "setChangeCause"
)

// Fake is an in-memory Interface for unit tests of packages that use revisions. It keeps
// the contracts of Interface (the same collision handling as the real implementation,
// owner references, NotFound on Delete is success) and is safe for concurrent use.
type Fake struct {
	// Reactor, if set, is called before every operation with its verb and the revision
	// it acts on (nil for VerbList); a non-nil error is returned instead of performing
	// the operation. Use it to inject API errors. Set it before the Fake is shared
	// between goroutines.
	Reactor func(verb string, rev *appsv1.ControllerRevision) error

	mu      sync.Mutex
	revs    map[types.NamespacedName]*appsv1.ControllerRevision
	lastUID int
}

var _ Interface = &Fake{}

// NewFake returns a Fake holding copies of revs (existing history, possibly owned by
// other DGDs or by none, to test filtering and collisions).
func NewFake(revs ...*appsv1.ControllerRevision) *Fake {
	f := &Fake{revs: map[types.NamespacedName]*appsv1.ControllerRevision{}}
	for _, rev := range revs {
		clone := rev.DeepCopy()
		f.revs[types.NamespacedName{Namespace: clone.Namespace, Name: clone.Name}] = clone
	}
	return f
}

// All returns copies of every stored revision, whoever owns it, sorted by namespace,
// then revision, then name.
func (f *Fake) All() []*appsv1.ControllerRevision {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*appsv1.ControllerRevision, 0, len(f.revs))
	for _, rev := range f.revs {
		out = append(out, rev.DeepCopy())
	}
	SortByRevision(out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

// List implements Interface.
func (f *Fake) List(_ context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]*appsv1.ControllerRevision, error) {
	if err := f.react(VerbList, nil); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	candidates := make([]*appsv1.ControllerRevision, 0, len(f.revs))
	for _, rev := range f.revs {
		candidates = append(candidates, rev.DeepCopy())
	}
	return ownedRevisions(dgd, candidates), nil
}

// Create implements Interface.
func (f *Fake) Create(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment,
	rev *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	if err := f.react(VerbCreate, rev); err != nil {
		return nil, err
	}
	return createRevision(ctx, f, dgd, rev, collisionCount)
}

// Renumber implements Interface.
func (f *Fake) Renumber(_ context.Context, rev *appsv1.ControllerRevision, revision int64) (*appsv1.ControllerRevision, error) {
	return f.change(VerbRenumber, rev, func(stored *appsv1.ControllerRevision) { stored.Revision = revision })
}

// SetChangeCause implements Interface.
func (f *Fake) SetChangeCause(_ context.Context, rev *appsv1.ControllerRevision, cause string) (*appsv1.ControllerRevision, error) {
	return f.change(VerbSetChangeCause, rev, func(stored *appsv1.ControllerRevision) {
		metav1.SetMetaDataAnnotation(&stored.ObjectMeta, v1alpha1.AnnotationChangeCause, cause)
	})
}

// change applies set to the stored revision of rev's key and returns a copy, or a
// NotFound error as the API server would.
func (f *Fake) change(verb string, rev *appsv1.ControllerRevision, set func(*appsv1.ControllerRevision)) (*appsv1.ControllerRevision, error) {
	if err := f.react(verb, rev); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	stored, ok := f.revs[keyOf(rev)]
	if !ok {
		return nil, apierrors.NewNotFound(appsv1.Resource("controllerrevisions"), rev.Name)
	}
	set(stored)
	return stored.DeepCopy(), nil
}

// Delete implements Interface.
func (f *Fake) Delete(_ context.Context, rev *appsv1.ControllerRevision) error {
	if err := f.react(VerbDelete, rev); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.revs, keyOf(rev))
	return nil
}

// setOwner implements store with metav1.NewControllerRef (BlockOwnerDeletion true).
func (f *Fake) setOwner(dgd *v1alpha1.DynamoGraphDeployment, rev *appsv1.ControllerRevision) error {
	if ref := metav1.GetControllerOf(rev); ref != nil && ref.UID != dgd.UID {
		return fmt.Errorf("ControllerRevision %s is already controlled by %s %s", revKey(rev), ref.Kind, ref.Name)
	}
	ref := ptrTo(v1alpha1.ControllerRef(dgd))
	refs := make([]metav1.OwnerReference, 0, len(rev.OwnerReferences)+1)
	for _, r := range rev.OwnerReferences {
		if r.UID != dgd.UID {
			refs = append(refs, r)
		}
	}
	rev.OwnerReferences = append(refs, *ref)
	return nil
}

// create implements store.
func (f *Fake) create(_ context.Context, rev *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := keyOf(rev)
	if _, ok := f.revs[key]; ok {
		return nil, apierrors.NewAlreadyExists(appsv1.Resource("controllerrevisions"), rev.Name)
	}
	clone := rev.DeepCopy()
	f.lastUID++
	clone.UID = types.UID("fake-revision-uid-" + strconv.Itoa(f.lastUID))
	f.revs[key] = clone
	return clone.DeepCopy(), nil
}

// get implements store.
func (f *Fake) get(_ context.Context, key types.NamespacedName) (*appsv1.ControllerRevision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rev, ok := f.revs[key]
	if !ok {
		return nil, apierrors.NewNotFound(appsv1.Resource("controllerrevisions"), key.Name)
	}
	return rev.DeepCopy(), nil
}

// react calls Reactor, if set.
func (f *Fake) react(verb string, rev *appsv1.ControllerRevision) error {
	if f.Reactor == nil {
		return nil
	}
	return f.Reactor(verb, rev)
}

// keyOf returns rev's namespace and name.
func keyOf(rev *appsv1.ControllerRevision) types.NamespacedName {
	return types.NamespacedName{Namespace: rev.Namespace, Name: rev.Name}
}

func ptrTo[T any](v T) *T { return &v }
