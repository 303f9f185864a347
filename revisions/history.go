package revisions

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// maxCreateAttempts bounds the collision loop of Create. With a 32-bit hash, one
// collision is already rare; needing this many means something else (such as a
// webhook rewriting names) is wrong, and looping forever would hide it.
const maxCreateAttempts = 16

// Interface stores the ControllerRevisions of DynamoGraphDeployments: one per distinct
// worker template, controlled by the DGD (so that deleting the DGD garbage-collects its
// history). Implementations: NewHistory over a controller-runtime client, NewFake in
// memory. Objects passed in are never modified; objects returned are the caller's.
type Interface interface {
	// List returns the revisions of dgd: those in dgd's namespace labelled
	// LabelGraph=<dgd name> whose controller owner reference has dgd's UID, sorted by
	// ascending .revision (ties by name). Revisions left by an earlier DGD of the same
	// name (another UID) and orphans are not returned. An empty history is not an error.
	List(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]*appsv1.ControllerRevision, error)

	// Create stores rev, as built by NewRevision, as a revision of dgd, and returns the
	// stored object. It sets the namespace to dgd's, a controller owner reference to dgd
	// with BlockOwnerDeletion, the LabelGraph and LabelManagedBy labels, the name
	// (RevisionName of GraphHash of rev's graph template and *collisionCount) and the
	// LabelWorkerHash label (Hash of its worker template and *collisionCount),
	// overriding what rev had; .data, .revision and annotations are kept.
	//
	// If an object of that name exists: when it records the same template (Equal) and is
	// controlled by dgd, Create returns it unchanged (a retry after a stale read is not an
	// error); otherwise it is a hash collision, and Create increments *collisionCount,
	// rehashes and tries again. The caller must persist *collisionCount
	// (status.collisionCount) so the next hash starts past the collision. collisionCount
	// must not be nil.
	Create(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, rev *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error)

	// Renumber sets rev's .revision to revision and returns the updated object; nothing
	// else changes. It is how a template that comes back (a revert or a rollback) becomes
	// the newest revision without a duplicate. Renumbering a revision that no longer
	// exists returns a NotFound error.
	Renumber(ctx context.Context, rev *appsv1.ControllerRevision, revision int64) (*appsv1.ControllerRevision, error)

	// Delete deletes rev. A revision that is already gone is not an error.
	Delete(ctx context.Context, rev *appsv1.ControllerRevision) error

	// SetChangeCause sets rev's kubernetes.io/change-cause annotation to cause and
	// returns the updated object; nothing else changes.
	SetChangeCause(ctx context.Context, rev *appsv1.ControllerRevision, cause string) (*appsv1.ControllerRevision, error)
}

// store is the create and get primitives createRevision needs from an implementation.
type store interface {
	// setOwner sets a controller owner reference to dgd on rev.
	setOwner(dgd *v1alpha1.DynamoGraphDeployment, rev *appsv1.ControllerRevision) error
	// create stores rev, failing with an AlreadyExists API error if the name is taken.
	create(ctx context.Context, rev *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error)
	// get returns the stored revision of that key.
	get(ctx context.Context, key types.NamespacedName) (*appsv1.ControllerRevision, error)
}

// createRevision implements Interface.Create over s: the hash-collision loop of
// Kubernetes' CreateControllerRevision.
func createRevision(ctx context.Context, s store, dgd *v1alpha1.DynamoGraphDeployment,
	rev *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	if collisionCount == nil {
		return nil, errors.New("revisions: Create needs a non-nil collisionCount")
	}
	data, err := DecodeRevisionData(rev)
	if err != nil {
		return nil, err
	}
	template, graph := data.Template(), data.Graph()
	clone := rev.DeepCopy()
	clone.Namespace = dgd.Namespace
	if err := s.setOwner(dgd, clone); err != nil {
		return nil, fmt.Errorf("setting owner of revision of DynamoGraphDeployment %s/%s: %w",
			dgd.Namespace, dgd.Name, err)
	}
	for range maxCreateAttempts {
		hash := Hash(template, collisionCount)
		if h := inheritedWorkerHash(ctx); h != "" {
			hash = h // an existing revision's workers (Sync)
		}
		clone.Name = RevisionName(dgd.Name, GraphHash(graph, collisionCount))
		if clone.Labels == nil {
			clone.Labels = map[string]string{}
		}
		clone.Labels[v1alpha1.LabelGraph] = dgd.Name
		clone.Labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
		clone.Labels[v1alpha1.LabelWorkerHash] = hash
		created, err := s.create(ctx, clone)
		if err == nil {
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating ControllerRevision %s: %w", revKey(clone), err)
		}
		existing, err := s.get(ctx, types.NamespacedName{Namespace: clone.Namespace, Name: clone.Name})
		if err != nil {
			return nil, fmt.Errorf("getting existing ControllerRevision %s: %w", revKey(clone), err)
		}
		if isControlledBy(existing, dgd) && Equal(existing, clone) {
			return existing, nil
		}
		*collisionCount++
	}
	return nil, fmt.Errorf("creating a revision of DynamoGraphDeployment %s/%s: %d hash collisions in a row",
		dgd.Namespace, dgd.Name, maxCreateAttempts)
}

// isControlledBy reports whether obj's controller owner reference points at dgd's UID.
func isControlledBy(obj metav1.Object, dgd *v1alpha1.DynamoGraphDeployment) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == dgd.UID
}

// ownedRevisions returns the revisions among candidates that belong to dgd (label and
// controller UID), sorted by revision.
func ownedRevisions(dgd *v1alpha1.DynamoGraphDeployment, candidates []*appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	var out []*appsv1.ControllerRevision
	for _, rev := range candidates {
		if rev.Namespace == dgd.Namespace && rev.Labels[v1alpha1.LabelGraph] == dgd.Name && isControlledBy(rev, dgd) {
			out = append(out, rev)
		}
	}
	SortByRevision(out)
	return out
}

// clientHistory is Interface over a controller-runtime client.
type clientHistory struct {
	client client.Client
	scheme *runtime.Scheme
}

var _ Interface = &clientHistory{}

// NewHistory returns an Interface that stores revisions through c. scheme must know
// DynamoGraphDeployment (v1alpha1.AddToScheme) to build owner references. c may read
// from a cache: a revision created but not yet listed is found again by Create (same
// name, Equal data) rather than duplicated, and stale renumbering is harmless because
// .revision only orders revisions.
func NewHistory(c client.Client, scheme *runtime.Scheme) Interface {
	return &clientHistory{client: c, scheme: scheme}
}

// List implements Interface.
func (h *clientHistory) List(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]*appsv1.ControllerRevision, error) {
	var list appsv1.ControllerRevisionList
	// Through the cache's graph index where it has one: a label selector over the
	// namespace tests (and a cache list copies) every graph's revisions, on every pass.
	if err := backends.ListGraph(ctx, h.client, &list, dgd.Namespace, dgd.Name); err != nil {
		return nil, fmt.Errorf("listing ControllerRevisions of DynamoGraphDeployment %s/%s: %w",
			dgd.Namespace, dgd.Name, err)
	}
	candidates := make([]*appsv1.ControllerRevision, len(list.Items))
	for i := range list.Items {
		candidates[i] = &list.Items[i]
	}
	return ownedRevisions(dgd, candidates), nil
}

// Create implements Interface.
func (h *clientHistory) Create(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment,
	rev *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	return createRevision(ctx, h, dgd, rev, collisionCount)
}

// Renumber implements Interface. It sends a merge patch of .revision alone, so it does
// not conflict with concurrent label or annotation changes.
func (h *clientHistory) Renumber(ctx context.Context, rev *appsv1.ControllerRevision, revision int64) (*appsv1.ControllerRevision, error) {
	clone := rev.DeepCopy()
	if clone.Revision == revision {
		return clone, nil
	}
	patch := client.MergeFrom(rev)
	clone.Revision = revision
	if err := h.client.Patch(ctx, clone, patch); err != nil {
		return nil, fmt.Errorf("renumbering ControllerRevision %s to %d: %w", revKey(rev), revision, err)
	}
	return clone, nil
}

// SetChangeCause implements Interface with a merge patch of the one annotation.
func (h *clientHistory) SetChangeCause(ctx context.Context, rev *appsv1.ControllerRevision, cause string) (*appsv1.ControllerRevision, error) {
	clone := rev.DeepCopy()
	patch := client.MergeFrom(rev)
	metav1.SetMetaDataAnnotation(&clone.ObjectMeta, v1alpha1.AnnotationChangeCause, cause)
	if err := h.client.Patch(ctx, clone, patch); err != nil {
		return nil, fmt.Errorf("setting the change cause of ControllerRevision %s: %w", revKey(rev), err)
	}
	return clone, nil
}

// Delete implements Interface: that very revision (backends.DeleteThat: a UID
// precondition), never another one made under its name since.
func (h *clientHistory) Delete(ctx context.Context, rev *appsv1.ControllerRevision) error {
	if err := backends.DeleteThat(ctx, h.client, rev.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ControllerRevision %s: %w", revKey(rev), err)
	}
	return nil
}

// setOwner implements store with v1alpha1.SetController (the storage version's
// reference, BlockOwnerDeletion true).
func (h *clientHistory) setOwner(dgd *v1alpha1.DynamoGraphDeployment, rev *appsv1.ControllerRevision) error {
	return v1alpha1.SetController(rev, dgd)
}

// create implements store.
func (h *clientHistory) create(ctx context.Context, rev *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	clone := rev.DeepCopy()
	if err := h.client.Create(ctx, clone); err != nil {
		return nil, err
	}
	return clone, nil
}

// get implements store.
func (h *clientHistory) get(ctx context.Context, key types.NamespacedName) (*appsv1.ControllerRevision, error) {
	rev := &appsv1.ControllerRevision{}
	if err := h.client.Get(ctx, key, rev); err != nil {
		return nil, err
	}
	return rev, nil
}
