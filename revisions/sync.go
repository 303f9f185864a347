package revisions

import (
	"bytes"
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/digest"
)

// Result is the revision state of a DGD after Sync. The controller copies it into the
// status through each revision's Ref: status.currentRevision = RefOf(Current).Name,
// status.updateRevision = RefOf(Update).Name, status.updateWorkerHash =
// RefOf(Update).WorkerHash, status.updateRevisionNumber = RefOf(Update).Number,
// status.collisionCount = CollisionCount.
type Result struct {
	// Current is the revision every worker was on before the rollout: the one whose hash
	// is status.currentRevision if it still exists, else Update (a new DGD, or a current
	// revision lost from history).
	Current *appsv1.ControllerRevision
	// Update is the revision of the DGD's spec: the rollout target.
	Update *appsv1.ControllerRevision
	// CollisionCount is status.collisionCount after any collisions Create met. It is set
	// even when Sync fails, so that a collision found before the failure is persisted.
	CollisionCount int32
	// Revisions is the DGD's history after Sync (renumbering and truncation included),
	// sorted by ascending .revision.
	Revisions []*appsv1.ControllerRevision
	// Created reports that no listed revision recorded the spec's worker template, so
	// Create was called: a new template, not a revert to an old one.
	Created bool
}

// Sync brings the history of dgd in line with its spec, as the StatefulSet controller's
// getStatefulSetRevisions and truncateHistory do: it lists the DGD's revisions, plans
// the writes (PlanSync) and makes them in order. The controller plans alone (its
// decision is pure) and makes the writes itself; Sync is the two together.
//
// inUse holds the worker hashes that still have workloads or replicas; the newest
// revision of each is never deleted.
func Sync(ctx context.Context, h Interface, dgd *v1alpha1.DynamoGraphDeployment, inUse sets.Set[string]) (Result, error) {
	revs, err := h.List(ctx, dgd)
	if err != nil {
		var res Result
		if dgd.Status.CollisionCount != nil {
			res.CollisionCount = *dgd.Status.CollisionCount
		}
		return res, err
	}
	plan, err := PlanSync(dgd, revs, inUse)
	if err != nil {
		return plan.Result, err
	}
	return plan.Apply(ctx, h, dgd)
}

// SyncPlan is what Sync does to a DGD's history, decided from its listed revisions
// alone: the writes, in the order they are made, and the history they leave (Result).
type SyncPlan struct {
	Result
	// Create is the update revision to store (Interface.Create), named and labelled as
	// it will be, when no listed revision records the spec's graph template; nil
	// otherwise. Its worker hash is inherited (WithWorkerHash) when an existing
	// revision has the same workers.
	Create *appsv1.ControllerRevision
	// Renumber is the listed revision that records the spec when it is not the newest
	// (a revert, or "rollout undo"): Interface.Renumber to Result.Update.Revision.
	Renumber *appsv1.ControllerRevision
	// ChangeCause, when non-nil, is the kubernetes.io/change-cause the update revision
	// must say (Interface.SetChangeCause on the listed revision): the DGD's latest.
	ChangeCause *string
	// Delete are the revisions beyond the history limit, oldest first (Interface.Delete).
	Delete []*appsv1.ControllerRevision
	// Listed is the update revision as listed, before Renumber and ChangeCause (nil
	// when it is created): what their patches are computed from.
	Listed *appsv1.ControllerRevision
}

// PlanSync decides Sync's writes from revs, the DGD's revisions as listed:
//
//  1. Build the update revision from the spec (NewRevision with NextRevision). If an
//     Equal revision exists and is the newest, it is the update revision (no change); if
//     it is older, the spec went back to an earlier template (a revert, or
//     "rollout undo"), and that revision is renumbered to NextRevision, as StatefulSet
//     does, so A -> B -> A leaves two revisions, A newest. Otherwise a new revision is
//     created; a listed revision of its name that records another template is a hash
//     collision, and the collision count goes up until the name is free (Interface.Create
//     does the same for a name held by a revision the list does not show).
//  2. Pick the current revision (see Result.Current).
//  3. Truncate history (see truncateHistory).
func PlanSync(dgd *v1alpha1.DynamoGraphDeployment, revs []*appsv1.ControllerRevision, inUse sets.Set[string]) (SyncPlan, error) {
	var plan SyncPlan
	if dgd.Status.CollisionCount != nil {
		plan.CollisionCount = *dgd.Status.CollisionCount
	}
	update, err := plan.updateRevision(dgd, revs)
	if err != nil {
		return plan, err
	}
	revs = upsertRevision(revs, update)
	current := findCurrent(revs, dgd.Status.CurrentRevision)
	if current == nil {
		current = update
	}
	plan.Delete = truncateHistory(dgd, revs, current, update, inUse)
	plan.Current, plan.Update, plan.Revisions, plan.Created = current, update, without(revs, plan.Delete), plan.Create != nil
	return plan, nil
}

// updateRevision returns the revision of dgd's spec as step 1 of PlanSync leaves it,
// and sets the plan's writes of that step.
func (plan *SyncPlan) updateRevision(dgd *v1alpha1.DynamoGraphDeployment, revs []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	next := NextRevision(revs)
	want, err := NewRevision(dgd, next, &plan.CollisionCount)
	if err != nil {
		return nil, err
	}
	equal := FindEqual(revs, want)
	if len(equal) == 0 {
		return plan.newRevision(dgd, revs, next)
	}
	listed := equal[len(equal)-1]
	rev := listed.DeepCopy()
	plan.Listed = listed
	if listed.Name != revs[len(revs)-1].Name {
		plan.Renumber, rev.Revision = listed, next
	}
	// As the Deployment controller keeps its new ReplicaSet's annotations in step with
	// the Deployment's, the update revision says the DGD's latest change cause: one
	// recorded after the change (kubectl annotate) or a revert's.
	if cause, ok := dgd.Annotations[v1alpha1.AnnotationChangeCause]; ok && listed.Annotations[v1alpha1.AnnotationChangeCause] != cause {
		plan.ChangeCause = &cause
		metav1.SetMetaDataAnnotation(&rev.ObjectMeta, v1alpha1.AnnotationChangeCause, cause)
	}
	return rev, nil
}

// newRevision plans the creation of the update revision, numbered next: named and
// labelled as Interface.Create names and labels it, past every listed revision whose
// name it would collide with.
func (plan *SyncPlan) newRevision(dgd *v1alpha1.DynamoGraphDeployment, revs []*appsv1.ControllerRevision, next int64) (*appsv1.ControllerRevision, error) {
	for range maxCreateAttempts {
		rev, err := NewRevision(dgd, next, &plan.CollisionCount)
		if err != nil {
			return nil, err
		}
		// The worker hash alone decides what rolls: a new revision whose workers are
		// those of an existing one (a stable-only change) keeps that revision's worker
		// hash, even one computed before the canonical layout (see canonical).
		if h := workerHashOf(revs, rev); h != "" {
			rev.Labels[v1alpha1.LabelWorkerHash] = h
		}
		if !nameTaken(revs, rev.Name) {
			plan.Create = rev
			return rev, nil
		}
		plan.CollisionCount++
	}
	return nil, fmt.Errorf("creating a revision of DynamoGraphDeployment %s/%s: %d hash collisions in a row",
		dgd.Namespace, dgd.Name, maxCreateAttempts)
}

func nameTaken(revs []*appsv1.ControllerRevision, name string) bool {
	for _, r := range revs {
		if r.Name == name {
			return true
		}
	}
	return false
}

// Apply makes the plan's writes in order through h and returns the history they leave.
// A hash collision Interface.Create meets with a revision the list did not show moves
// the update revision to the next collision count (Result.CollisionCount says it).
func (plan SyncPlan) Apply(ctx context.Context, h Interface, dgd *v1alpha1.DynamoGraphDeployment) (Result, error) {
	res := plan.Result
	var err error
	switch {
	case plan.Create != nil:
		var created *appsv1.ControllerRevision
		if created, err = h.Create(WithWorkerHash(ctx, HashOf(plan.Create)), dgd, plan.Create, &res.CollisionCount); err != nil {
			return res, err
		}
		res.Revisions, res.Update = upsertRevision(without(res.Revisions, []*appsv1.ControllerRevision{plan.Create}), created), created
		if res.Current.Name == plan.Create.Name {
			res.Current = created
		}
	case plan.Renumber != nil:
		if _, err = h.Renumber(ctx, plan.Renumber, plan.Update.Revision); err != nil {
			return res, err
		}
	}
	if plan.ChangeCause != nil {
		if _, err = h.SetChangeCause(ctx, plan.Listed, *plan.ChangeCause); err != nil {
			return res, err
		}
	}
	for _, rev := range plan.Delete {
		if err := h.Delete(ctx, rev); err != nil {
			return res, err
		}
	}
	return res, nil
}

// without returns revs without those named in drop.
func without(revs, drop []*appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	if len(drop) == 0 {
		return revs
	}
	gone := sets.New[string]()
	for _, r := range drop {
		gone.Insert(r.Name)
	}
	out := make([]*appsv1.ControllerRevision, 0, len(revs))
	for _, r := range revs {
		if !gone.Has(r.Name) {
			out = append(out, r)
		}
	}
	return out
}

// upsertRevision returns revs with rev in place of the revision of the same name (or
// added), sorted by revision.
func upsertRevision(revs []*appsv1.ControllerRevision, rev *appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	out := make([]*appsv1.ControllerRevision, 0, len(revs)+1)
	for _, r := range revs {
		if r.Name != rev.Name {
			out = append(out, r)
		}
	}
	out = append(out, rev)
	SortByRevision(out)
	return out
}

// findCurrent finds status.currentRevision, which holds a ControllerRevision name
// (StatefulSet convention); a bare hash is accepted too.
func findCurrent(revs []*appsv1.ControllerRevision, current string) *appsv1.ControllerRevision {
	for i := len(revs) - 1; i >= 0; i-- {
		if current != "" && revs[i].Name == current {
			return revs[i]
		}
	}
	return findByHash(revs, current)
}

// findByHash returns the newest revision of revs whose hash is hash, or nil.
func findByHash(revs []*appsv1.ControllerRevision, hash string) *appsv1.ControllerRevision {
	if hash == "" {
		return nil
	}
	for i := len(revs) - 1; i >= 0; i-- {
		if HashOf(revs[i]) == hash {
			return revs[i]
		}
	}
	return nil
}

// truncateHistory returns the oldest revisions of revs beyond dgd.HistoryLimit(), to
// delete. As in StatefulSet, live revisions (current, update, and those whose hash is
// in inUse) are never deleted and do not count toward the limit: with limit 2,
// revisions 1..5, update = current = 5 and 1 in use, revision 2 is deleted and 1, 3, 4
// and 5 remain. Deployment counts in-use ReplicaSets toward the limit instead; either
// way nothing with running workers is deleted, and this way a long-draining old revision
// does not push rollback targets out of history.
func truncateHistory(dgd *v1alpha1.DynamoGraphDeployment, revs []*appsv1.ControllerRevision,
	current, update *appsv1.ControllerRevision, inUse sets.Set[string]) []*appsv1.ControllerRevision {
	// Of the revisions sharing an in-use worker hash (stable-only changes), the newest
	// stands for the running workers; the older ones age out as any other.
	newest := map[string]string{}
	for _, rev := range revs { // ascending
		newest[HashOf(rev)] = rev.Name
	}
	live := func(rev *appsv1.ControllerRevision) bool {
		h := HashOf(rev)
		return rev.Name == current.Name || rev.Name == update.Name || inUse.Has(h) && newest[h] == rev.Name
	}
	var old []*appsv1.ControllerRevision
	for _, rev := range revs {
		if !live(rev) {
			old = append(old, rev)
		}
	}
	excess := len(old) - int(max(dgd.HistoryLimit(), 0))
	if excess <= 0 {
		return nil
	}
	return old[:excess]
}

// ServiceAt is a worker service's spec as the newest revision of worker hash hash
// recorded it, or nil.
func (r Result) ServiceAt(hash, service string) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	for i := len(r.Revisions) - 1; i >= 0; i-- {
		rev := r.Revisions[i]
		if HashOf(rev) != hash {
			continue
		}
		if d, err := DecodeRevisionData(rev); err == nil {
			return d.Services[service]
		}
	}
	return nil
}

// workerHashOf is the worker hash of the newest revision of revs whose worker template
// equals want's, or "".
func workerHashOf(revs []*appsv1.ControllerRevision, want *appsv1.ControllerRevision) string {
	wd, err := DecodeRevisionData(want)
	if err != nil {
		return ""
	}
	wj, err := digest.Canonical(wd.Template())
	if err != nil {
		return ""
	}
	for i := len(revs) - 1; i >= 0; i-- {
		d, err := DecodeRevisionData(revs[i])
		if err != nil {
			continue
		}
		if j, err := digest.Canonical(d.Template()); err == nil && bytes.Equal(j, wj) {
			return HashOf(revs[i])
		}
	}
	return ""
}

type workerHashKey struct{}

// WithWorkerHash makes Interface.Create label the revision with hash instead of
// computing it: a revision whose workers are an existing revision's keeps their hash
// (SyncPlan.Create is labelled so).
func WithWorkerHash(ctx context.Context, hash string) context.Context {
	return context.WithValue(ctx, workerHashKey{}, hash)
}

func inheritedWorkerHash(ctx context.Context) string {
	h, _ := ctx.Value(workerHashKey{}).(string)
	return h
}
