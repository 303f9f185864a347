package revisions

import (
	appsv1 "k8s.io/api/apps/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Restore returns a copy of dgd's spec with the graph template of rev re-applied: what
// "kubectl dgd rollout undo --to-revision=N" writes back to the DGD. Writing it makes the
// next Sync renumber rev as the newest revision, and a normal rollout follows: workers
// roll side by side, stable services update in place.
//
// A whole-graph revision (RevisionData.WholeGraph) restores every service exactly (full
// spec), except that a service that exists now keeps its current replicas; services of
// rev absent now come back with the replicas rev recorded, and services absent from rev
// are removed. A revision made before whole-graph revisions knows only the workers:
//
//   - Worker services of rev are restored exactly (full spec: image, args, envs,
//     resources, autoscaling...), except that a service that exists now (under the same
//     name) keeps its current replicas: a rollback changes what runs, not how much.
//   - Worker services of rev absent now are added with the replicas rev recorded.
//   - Worker services present now but absent from rev are removed.
//   - Non-worker services (frontend, planner...) are untouched, unless one has the name of
//     a worker service of rev, which then replaces it.
//   - Graph-level spec.envs and spec.backend are restored from rev; every other spec
//     field (rollout, revisionHistoryLimit...) is kept.
//
// The restart annotation a revision's services carry (RevisionData.RestartID) is not
// restored: the restart id is spec.restart's, kept as it is now. The worker template of
// the result with the same restart id equals rev's (so Hash of it with rev's collision
// count is HashOf(rev)). dgd is not modified.
func Restore(dgd *v1alpha1.DynamoGraphDeployment, rev *appsv1.ControllerRevision) (*v1alpha1.DynamoGraphDeploymentSpec, error) {
	data, err := DecodeRevisionData(rev)
	if err != nil {
		return nil, err
	}
	spec := dgd.Spec.DeepCopy()
	current := spec.Services
	spec.Services = make(map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec, len(current)+len(data.Services))
	for name, s := range current {
		if s != nil && !s.IsWorker() && !data.WholeGraph {
			spec.Services[name] = s
		}
	}
	for name, s := range data.Services {
		if s == nil {
			continue
		}
		restored := s.DeepCopy()
		withoutRestart(restored, data.RestartID)
		if now, ok := current[name]; ok && now != nil {
			restored.Replicas = now.Replicas
		}
		spec.Services[name] = restored
	}
	spec.Envs = data.Envs
	spec.Backend = data.Backend
	spec.BackendFramework = data.BackendFramework
	return spec, nil
}

// FindRevision returns the revision of revs numbered number, or nil if there is none.
func FindRevision(revs []*appsv1.ControllerRevision, number int64) *appsv1.ControllerRevision {
	for _, rev := range revs {
		if rev.Revision == number {
			return rev
		}
	}
	return nil
}
