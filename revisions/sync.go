package revisions

import (
	"bytes"
	"context"

	appsv1 "k8s.io/api/apps/v1"
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
// getStatefulSetRevisions and truncateHistory do, and is called once per reconcile:
//
//  1. List the DGD's revisions.
//  2. Build the update revision from the spec (NewRevision with NextRevision). If an
//     Equal revision exists and is the newest, it is the update revision (no change); if
//     it is older, the spec went back to an earlier template (a revert, or
//     "rollout undo"), and that revision is renumbered to NextRevision, as StatefulSet
//     does, so A -> B -> A leaves two revisions, A newest. Otherwise a new revision is
//     created.
//  3. Pick the current revision (see Result.Current).
//  4. Truncate history (see truncateHistory).
//
// inUse holds the worker hashes that still have workloads or replicas; the newest
// revision of each is never deleted.
func Sync(ctx context.Context, h Interface, dgd *v1alpha1.DynamoGraphDeployment, inUse sets.Set[string]) (Result, error) {
	var res Result
	if dgd.Status.CollisionCount != nil {
		res.CollisionCount = *dgd.Status.CollisionCount
	}
	revs, err := h.List(ctx, dgd)
	if err != nil {
		return res, err
	}
	update, created, err := syncUpdateRevision(ctx, h, dgd, revs, &res.CollisionCount)
	if err != nil {
		return res, err
	}
	revs = upsertRevision(revs, update)
	current := findCurrent(revs, dgd.Status.CurrentRevision)
	if current == nil {
		current = update
	}
	revs, err = truncateHistory(ctx, h, dgd, revs, current, update, inUse)
	if err != nil {
		return res, err
	}
	res.Current, res.Update, res.Revisions, res.Created = current, update, revs, created
	return res, nil
}

// syncUpdateRevision returns the revision of dgd's spec, reusing, renumbering or creating
// it (step 2 of Sync), and whether it was created.
func syncUpdateRevision(ctx context.Context, h Interface, dgd *v1alpha1.DynamoGraphDeployment,
	revs []*appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, bool, error) {
	next := NextRevision(revs)
	want, err := NewRevision(dgd, next, collisionCount)
	if err != nil {
		return nil, false, err
	}
	equal := FindEqual(revs, want)
	if len(equal) == 0 {
		// The worker hash alone decides what rolls: a new revision whose workers are
		// those of an existing one (a stable-only change) keeps that revision's worker
		// hash, even one computed before the canonical layout (see canonical).
		if h := workerHashOf(revs, want); h != "" {
			ctx = withWorkerHash(ctx, h)
		}
		created, err := h.Create(ctx, dgd, want, collisionCount)
		return created, err == nil, err
	}
	rev := equal[len(equal)-1]
	if rev.Name != revs[len(revs)-1].Name {
		if rev, err = h.Renumber(ctx, rev, next); err != nil {
			return nil, false, err
		}
	}
	// As the Deployment controller keeps its new ReplicaSet's annotations in step with
	// the Deployment's, the update revision says the DGD's latest change cause: one
	// recorded after the change (kubectl annotate) or a revert's.
	if cause, ok := dgd.Annotations[v1alpha1.AnnotationChangeCause]; ok && rev.Annotations[v1alpha1.AnnotationChangeCause] != cause {
		if rev, err = h.SetChangeCause(ctx, rev, cause); err != nil {
			return nil, false, err
		}
	}
	return rev, false, nil
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

// truncateHistory deletes the oldest revisions of revs beyond dgd.HistoryLimit() and
// returns those left. As in StatefulSet, live revisions (current, update, and those whose
// hash is in inUse) are never deleted and do not count toward the limit: with limit 2,
// revisions 1..5, update = current = 5 and 1 in use, revision 2 is deleted and 1, 3, 4
// and 5 remain. Deployment counts in-use ReplicaSets toward the limit instead; either
// way nothing with running workers is deleted, and this way a long-draining old revision
// does not push rollback targets out of history.
func truncateHistory(ctx context.Context, h Interface, dgd *v1alpha1.DynamoGraphDeployment,
	revs []*appsv1.ControllerRevision, current, update *appsv1.ControllerRevision,
	inUse sets.Set[string]) ([]*appsv1.ControllerRevision, error) {
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
		return revs, nil
	}
	doomed := sets.New[string]()
	for _, rev := range old[:excess] {
		if err := h.Delete(ctx, rev); err != nil {
			return revs, err
		}
		doomed.Insert(rev.Name)
	}
	kept := make([]*appsv1.ControllerRevision, 0, len(revs)-excess)
	for _, rev := range revs {
		if !doomed.Has(rev.Name) {
			kept = append(kept, rev)
		}
	}
	return kept, nil
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

// withWorkerHash makes Create label the revision with hash instead of computing it.
func withWorkerHash(ctx context.Context, hash string) context.Context {
	return context.WithValue(ctx, workerHashKey{}, hash)
}

func inheritedWorkerHash(ctx context.Context) string {
	h, _ := ctx.Value(workerHashKey{}).(string)
	return h
}
