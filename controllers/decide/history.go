package decide

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/revisions"
)

// history is the DGD's revisions as the pass leaves them (revisions.PlanSync), and the
// revision every worker moves to (goal).
type history struct {
	plan revisions.SyncPlan
	// update and current are the spec's revision and the one every worker was on
	// before the rollout; goal is what the workers move to: update, or the stable
	// revision of an aborted rollout (zero until the abort is known: the update).
	update, current, goal revisions.Ref
	// newest is the number of the newest revision of each worker hash.
	newest map[string]int64
}

// syncHistory plans the history's writes: the update revision created, renumbered or
// given the spec's change cause, and the oldest revisions beyond the limit deleted
// (never one whose workers still run).
func syncHistory(v *view, d *draft) (*history, error) {
	inUse := sets.New[string]()
	for _, w := range v.Workloads {
		if w.Hash != "" {
			inUse.Insert(w.Hash)
		}
	}
	plan, err := revisions.PlanSync(v.dgd, v.Revisions, inUse)
	if err != nil {
		return nil, err
	}
	switch {
	case plan.Create != nil:
		d.write(Write{Op: CreateRevision, Revision: plan.Create, Collisions: plan.CollisionCount})
	case plan.Renumber != nil:
		d.write(Write{Op: RenumberRevision, Revision: plan.Renumber, Number: plan.Update.Revision})
	}
	if plan.ChangeCause != nil {
		d.write(Write{Op: SetChangeCause, Revision: plan.Listed, Cause: *plan.ChangeCause})
	}
	for _, rev := range plan.Delete {
		d.write(Write{Op: DeleteRevision, Revision: rev})
	}
	d.Metrics.RevisionsKept = len(plan.Revisions)
	h := &history{plan: plan, update: revisions.RefOf(plan.Update), current: revisions.RefOf(plan.Current), newest: map[string]int64{}}
	for _, rev := range plan.Revisions {
		h.newest[revisions.HashOf(rev)] = rev.Revision
	}
	return h, nil
}

// number is the revision number of the workers of hash: the update's, the goal's, else
// the newest revision's with those workers; a workload whose revision was deleted
// counts as the oldest (0), so it drains last-but-safely.
func (h *history) number(hash string) int64 {
	switch {
	case hash == h.update.WorkerHash:
		return h.update.Number
	case !h.goal.IsZero() && hash == h.goal.WorkerHash:
		return h.goal.Number
	}
	return h.newest[hash]
}

// goalHash is the worker hash of the revision the workers move to.
func (h *history) goalHash() string {
	if h.goal.IsZero() {
		return h.update.WorkerHash
	}
	return h.goal.WorkerHash
}

// before is the newest revision numbered below n, or nil.
func (h *history) before(n int64) *appsv1.ControllerRevision {
	var out *appsv1.ControllerRevision
	for _, rev := range h.plan.Revisions {
		if rev.Revision < n && (out == nil || rev.Revision > out.Revision) {
			out = rev
		}
	}
	return out
}

// byName is the revision of that name, or nil.
func (h *history) byName(name string) *appsv1.ControllerRevision {
	for _, rev := range h.plan.Revisions {
		if rev.Name == name {
			return rev
		}
	}
	return nil
}

// templateOf is a worker service's template at a revision: the spec's for the update
// revision, the revision's record for an old one (its Service is what it was made
// with), else the spec's.
func (h *history) templateOf(dgd *v1alpha1.DynamoGraphDeployment, service, hash string) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	if hash != h.update.WorkerHash {
		if s := h.plan.ServiceAt(hash, service); s != nil {
			return s
		}
	}
	return dgd.Spec.Services[service]
}

// sameRollout reports whether the status describes a rollout to the workers of the
// update revision (a revision that changes only stable services continues it).
func (h *history) sameRollout(old *v1alpha1.DynamoGraphDeploymentStatus) bool {
	return old.RollingUpdate != nil && old.UpdateWorkerHash == h.update.WorkerHash
}
