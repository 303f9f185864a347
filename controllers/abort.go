package controllers

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/revisions"
)

// An aborted rollout is a rollout in reverse: the planner moves every worker service
// from wherever it is back to the stable revision (status.currentRevision, the one every
// worker was on before the rollout), under the same budgets and invariants as any
// rollout (availability, surge, ratio, isolation), and the drained canary goes as any
// drained revision does. The spec is not changed: status.rollingUpdate.abort records
// the abort for the update revision's workers, and it holds until a new worker revision
// (a spec change of the workers) or a retry (AnnotationRetry) starts the rollout again
// from its first step, as attempt N+1. Stable services (frontend, planner) stay as the
// spec says: the abort concerns the workers the rollout was moving.

// resolveAbort reads the abort state of this rollout: the recorded abort and attempt of
// the same worker rollout, then a retry or a manual abort the annotations ask for.
func (p *pass) resolveAbort() {
	p.attempt = 1
	if p.sameRollout() {
		ru := p.old.RollingUpdate
		p.attempt = max(ru.Attempt, 1)
		p.abort = ru.Abort.DeepCopy()
	}
	if p.abort != nil && p.dgd.Annotations[v1alpha1.AnnotationRetry] == v1alpha1.AttemptTag(p.revs.Update.Revision, p.attempt) {
		p.abort, p.retried = nil, true
		p.attempt++
		p.event("Normal", v1alpha1.EventRolloutRetried, fmt.Sprintf("revision %d: attempt %d starts from the first step", p.revs.Update.Revision, p.attempt))
	}
	// A retried attempt is a new one: an abort annotation of the attempt before it (the
	// plugin leaves it in place) names no longer this one.
	if p.abort == nil && p.dgd.Annotations[v1alpha1.AnnotationAbort] == v1alpha1.AttemptTag(p.revs.Update.Revision, p.attempt) {
		p.startAbort(v1alpha1.ReasonRolloutAborted, "aborted by a person (kubectl dgd rollout abort)")
	}
}

// startAbort aborts the rollout: every worker returns to the stable revision. A rollout
// with no stable revision to return to (its workers are all on the update revision,
// or there never was another) cannot be aborted and goes on.
func (p *pass) startAbort(reason, msg string) {
	stable := p.revs.Current
	if stable == nil || revisions.HashOf(stable) == p.updateHash() {
		p.event("Warning", reason, fmt.Sprintf("revision %d: not aborted (%s): there is no stable revision of other workers to return to", p.revs.Update.Revision, msg))
		return
	}
	p.abort = &v1alpha1.AbortStatus{Reason: reason, Message: msg, Time: metav1.NewTime(p.now.Truncate(time.Second)), StableRevision: stable.Name}
	p.event("Warning", reason, fmt.Sprintf("revision %d aborted: %s; every worker returns to revision %d", p.revs.Update.Revision, msg, stable.Revision))
}

// setGoal picks the revision this pass rolls the workers to: the update revision, or,
// once aborted, the stable one, with the DGD its worker services are rendered from
// (its services as that revision recorded them, replicas as the spec has them).
func (p *pass) setGoal() error {
	p.goal, p.goalDGD = p.revs.Update, p.dgd
	if p.abort == nil {
		return nil
	}
	stable := p.stableRevision()
	if stable == nil {
		return fmt.Errorf("aborted rollout of %s/%s: the stable revision %s is gone from history", p.dgd.Namespace, p.dgd.Name, p.abort.StableRevision)
	}
	spec, err := revisions.Restore(p.dgd, stable)
	if err != nil {
		return fmt.Errorf("aborted rollout of %s/%s: %w", p.dgd.Namespace, p.dgd.Name, err)
	}
	g := p.dgd.DeepCopy()
	g.Spec = *spec
	p.goal, p.goalDGD = stable, g
	return nil
}

// stableRevision is the revision an aborted rollout returns to.
func (p *pass) stableRevision() *appsv1.ControllerRevision {
	for _, rev := range p.revs.Revisions {
		if rev.Name == p.abort.StableRevision {
			return rev
		}
	}
	return p.revs.Current
}

// goalHash is the worker hash of the goal revision: the update revision's until
// setGoal (runSteps plans toward it, as it runs only when nothing is aborted).
func (p *pass) goalHash() string {
	if p.goal == nil {
		return p.updateHash()
	}
	return revisions.HashOf(p.goal)
}
