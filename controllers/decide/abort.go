package decide

import (
	"fmt"
	"time"

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
func resolveAbort(v *view, h *history, d *draft) attempt {
	old := &v.dgd.Status
	a := attempt{number: 1}
	if h.sameRollout(old) {
		a.number = max(old.RollingUpdate.Attempt, 1)
		a.abort = old.RollingUpdate.Abort.DeepCopy()
	}
	if a.abort != nil && v.dgd.Annotations[v1alpha1.AnnotationRetry] == v1alpha1.AttemptTag(h.update.Number, a.number) {
		a.abort, a.retried = nil, true
		a.number++
		d.event("Normal", v1alpha1.EventRolloutRetried, fmt.Sprintf("revision %d: attempt %d starts from the first step", h.update.Number, a.number))
	}
	// A retried attempt is a new one: an abort annotation of the attempt before it (the
	// plugin leaves it in place) names no longer this one.
	if a.abort == nil && v.dgd.Annotations[v1alpha1.AnnotationAbort] == v1alpha1.AttemptTag(h.update.Number, a.number) {
		a.abort = startAbort(v, h, d, v1alpha1.ReasonRolloutAborted, "aborted by a person (kubectl dgd rollout abort)")
	}
	return a
}

// startAbort aborts the rollout: every worker returns to the stable revision. A rollout
// with no stable revision to return to (its workers are all on the update revision,
// or there never was another) cannot be aborted and goes on (nil).
func startAbort(v *view, h *history, d *draft, reason, msg string) *v1alpha1.AbortStatus {
	stable := h.current
	if stable.IsZero() || stable.WorkerHash == h.update.WorkerHash {
		d.event("Warning", reason, fmt.Sprintf("revision %d: not aborted (%s): there is no stable revision of other workers to return to", h.update.Number, msg))
		return nil
	}
	d.event("Warning", reason, fmt.Sprintf("revision %d aborted: %s; every worker returns to revision %d", h.update.Number, msg, stable.Number))
	return &v1alpha1.AbortStatus{Reason: reason, Message: msg, Time: metav1.NewTime(v.Now.Truncate(time.Second)),
		StableRevision: stable.Name, StableRevisionNumber: stable.Number}
}

// goalOf picks the revision this pass rolls the workers to: the update revision, or, once
// aborted, the stable one, with the DGD its worker services are rendered from (its
// services as that revision recorded them, replicas as the spec has them).
func goalOf(v *view, h *history, a attempt) (revisions.Ref, *v1alpha1.DynamoGraphDeployment, error) {
	if a.abort == nil {
		return h.update, v.dgd, nil
	}
	stable := h.byName(a.abort.StableRevision)
	if stable == nil {
		stable = h.plan.Current
	}
	if stable == nil {
		return revisions.Ref{}, nil, fmt.Errorf("aborted rollout of %s/%s: the stable revision %s is gone from history", v.dgd.Namespace, v.dgd.Name, a.abort.StableRevision)
	}
	spec, err := revisions.Restore(v.dgd, stable)
	if err != nil {
		return revisions.Ref{}, nil, fmt.Errorf("aborted rollout of %s/%s: %w", v.dgd.Namespace, v.dgd.Name, err)
	}
	g := v.dgd.DeepCopy()
	g.Spec = *spec
	return revisions.RefOf(stable), g, nil
}
