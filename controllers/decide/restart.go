package decide

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// restart sets status.restart, Dynamo's record of the restart spec.restart.id asked for
// (ai-dynamo/dynamo deploy/operator/internal/controller/dgd_restart_reconciler.go,
// computeRestartStatusWithProgressResolver). The restart itself is no separate
// mechanism here: the id is on every service's pod template (revisions.WithRestart), so
// a new id is a new revision whose workers roll under spec.rollout and whose other
// components update in place. restart follows that revision:
//
//   - a new id (not status.restart.observedID) on a running DGD starts a restart:
//     Restarting, every service in progress, the revision it rolls to, a RestartStarted
//     Event (and RestartSuperseded for a restart still running under another id); on a
//     DGD being created (no update revision yet) nothing runs to be restarted: the id is
//     recorded Completed, with no Event;
//   - while Restarting: Superseded once the update revision is another (a spec change
//     came first), Failed when its rollout is aborted or failed, Completed (with a
//     RestartCompleted Event) once no service is in progress;
//   - Completed, Failed and Superseded are kept; so is the status once spec.restart is
//     removed (its id stays on the pods, v1alpha1's RestartID).
func restart(v *view, l leaves, st *v1alpha1.DynamoGraphDeploymentStatus, d *draft) {
	id, old := v.dgd.RestartID(), v.dgd.Status.Restart
	switch {
	case id == "":
		return
	case old == nil || old.ObservedID != id:
		st.Restart = startRestart(v, id, st, d)
		return
	}
	r := old.DeepCopy()
	st.Restart = r
	if r.Phase == v1alpha1.RestartPhaseRestarting {
		followRestart(v, l, r, st, d)
	}
}

// startRestart is the status of a restart under a new id, and its Events.
func startRestart(v *view, id string, st *v1alpha1.DynamoGraphDeploymentStatus, d *draft) *v1alpha1.RestartStatus {
	if v.dgd.Status.UpdateRevision == "" {
		return &v1alpha1.RestartStatus{ObservedID: id, Phase: v1alpha1.RestartPhaseCompleted, Revision: st.UpdateRevision,
			Message: "set when the DGD was created: nothing ran to be restarted"}
	}
	if old := v.dgd.Status.Restart; old != nil && old.Phase == v1alpha1.RestartPhaseRestarting {
		d.event("Normal", v1alpha1.EventRestartSuperseded, fmt.Sprintf("restart %s superseded by restart %s before it completed", old.ObservedID, id))
	}
	msg := restartStrategy(v)
	d.event("Normal", v1alpha1.EventRestartStarted, fmt.Sprintf("restart %s: every component to revision %d; %s", id, st.UpdateRevisionNumber, msg))
	return &v1alpha1.RestartStatus{ObservedID: id, Phase: v1alpha1.RestartPhaseRestarting,
		InProgress: v.dgd.ServiceNames(), Revision: st.UpdateRevision, Message: msg}
}

// followRestart moves a running restart on: superseded, failed, still in progress or
// completed.
func followRestart(v *view, l leaves, r *v1alpha1.RestartStatus, st *v1alpha1.DynamoGraphDeploymentStatus, d *draft) {
	ru := st.RollingUpdate
	switch {
	case st.UpdateRevision != r.Revision:
		r.Phase, r.InProgress = v1alpha1.RestartPhaseSuperseded, nil
		r.Message = fmt.Sprintf("superseded by revision %d (a spec change) before it completed", st.UpdateRevisionNumber)
		d.event("Normal", v1alpha1.EventRestartSuperseded, fmt.Sprintf("restart %s %s", r.ObservedID, r.Message))
	case ru != nil && (ru.Phase == v1alpha1.RolloutAborted || ru.Phase == v1alpha1.RolloutFailed):
		r.Phase, r.InProgress = v1alpha1.RestartPhaseFailed, nil
		r.Message = fmt.Sprintf("its rollout %s: %s", strings.ToLower(string(ru.Phase)), ru.Message)
		d.event("Warning", v1alpha1.EventRestartFailed, fmt.Sprintf("restart %s failed: %s", r.ObservedID, r.Message))
	default:
		r.InProgress = restartInProgress(v, l, st)
		if len(r.InProgress) == 0 {
			r.Phase, r.InProgress = v1alpha1.RestartPhaseCompleted, nil
			d.event("Normal", v1alpha1.EventRestartCompleted, fmt.Sprintf("restart %s completed: every component runs revision %d", r.ObservedID, st.UpdateRevisionNumber))
		}
	}
}

// restartInProgress lists the services not yet wholly on the restarted template: a
// worker service not among the rollout's updated services, a stable one whose
// workloads have not finished their own rolling update.
func restartInProgress(v *view, l leaves, st *v1alpha1.DynamoGraphDeploymentStatus) []string {
	var out []string
	for _, name := range v.dgd.ServiceNames() {
		svc := v.dgd.Spec.Services[name]
		done := st.RollingUpdate != nil && slices.Contains(st.RollingUpdate.UpdatedServices, name)
		if !svc.IsWorker() {
			done = stableRolled(l.res, name, svc.DesiredReplicas())
		}
		if !done {
			out = append(out, name)
		}
	}
	return out
}

// stableRolled reports whether a stable service's workloads run the template the spec
// renders on every desired replica, as kubectl rollout status judges a Deployment:
// every replica is updated and available, and no replica of an older template is left.
// That the workload's status describes the template the operator wrote is the pass's
// precondition (the controller's freshness wait, observe.go staleWorkload).
func stableRolled(res []Workload, service string, desired int32) bool {
	var replicas int32
	for _, w := range res {
		if w.Service != service || w.Hash != "" || w.Terminating {
			continue
		}
		if w.Outdated || w.Updated < w.Replicas || w.Current > w.Replicas || w.Ready < w.Replicas {
			return false
		}
		replicas += w.Replicas
	}
	return replicas >= desired
}

// restartStrategy says how spec.restart.strategy maps onto this operator's rollout:
// never silently ignored. Worker services roll together in lockstep (a disaggregated
// graph keeps its prefill:decode ratio), so no order among them is honoured; the other
// components update in place at the same time as the workers.
func restartStrategy(v *view) string {
	s := v.dgd.RestartRequest().Strategy
	const how = "workers roll in lockstep under spec.rollout, other components update in place alongside"
	if s.Type == v1alpha1.RestartParallel {
		return "strategy Parallel: " + how
	}
	order := ""
	if len(s.Order) > 0 {
		order = " (order " + strings.Join(s.Order, ", ") + ")"
	}
	return fmt.Sprintf("strategy %s%s not honoured one component at a time: %s", s.Type, order, how)
}
