package decide

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/planner"
	"github.com/dgd-rollout/operator/controllers/steps"
)

// rollingUpdate sets status.rollingUpdate: phase, times, updated services, the step and
// analyses of spec.rollout.steps, the abort, and the progress deadline. It queues an
// Event on every phase change, and marks where the Event of the pass's writes goes.
// Only transitions set times, so a pass that changes nothing writes nothing.
func rollingUpdate(v *view, l leaves, st *v1alpha1.DynamoGraphDeploymentStatus, d *draft) {
	old, h := &v.dgd.Status, l.c.h
	prev := old.RollingUpdate
	ru := &v1alpha1.RollingUpdateStatus{}
	if prev != nil && old.UpdateRevision == st.UpdateRevision {
		*ru = *prev.DeepCopy()
	} else {
		ru.StartTime, ru.LastProgressTime = ptrTime(v.Now), ptrTime(v.Now)
		if hasOldWorkers(v, h) && l.a.abort == nil { // an aborted rollout starts nothing (a frontend-only revision keeps it aborted)
			d.event("Normal", v1alpha1.EventRolloutStarted, fmt.Sprintf("rolling workers to revision %d (%s)", st.UpdateRevisionNumber, h.update.WorkerHash))
		}
	}
	ru.UpdatedServices = updatedServices(v, h, l.res)
	phase, reason, msg := phaseOf(v, l)
	if phase == v1alpha1.RolloutInProgress && len(d.progress) == 0 && !updateStarted(h, l.res) {
		// Detected, nothing moved yet (a Recreate waiting for the old pods, a create
		// not yet in the cache): Pending, kstatus still InProgress.
		phase = v1alpha1.RolloutPending
	}
	if len(d.progress) > 0 || st.UpdatedReadyReplicas > old.UpdatedReadyReplicas || (prev != nil && prev.Phase == v1alpha1.RolloutPaused && phase != v1alpha1.RolloutPaused) {
		ru.LastProgressTime = ptrTime(v.Now) // readiness is progress too, as is a resume
	}
	d.Metrics.Step = len(d.progress) > 0
	d.Events = append(d.Events, Event{Type: "Normal", Made: true, Step: true})
	phase, reason, msg = deadline(v, phase, reason, msg, ru, d)
	endTime(v, l, phase, msg, ru, d)
	if prev == nil || prev.Phase != phase || prev.Reason != reason {
		phaseEvent(d, phase, reason, msg)
	}
	stepFields(v, l, ru)
	ru.Phase, ru.Reason, ru.Message = phase, reason, msg
	st.RollingUpdate = ru
}

// deadline fails a rollout in progress that made no progress for
// progressDeadlineSeconds, and otherwise asks for a pass when it would.
func deadline(v *view, phase v1alpha1.RolloutPhase, reason, msg string, ru *v1alpha1.RollingUpdateStatus, d *draft) (v1alpha1.RolloutPhase, string, string) {
	if phase != v1alpha1.RolloutInProgress && phase != v1alpha1.RolloutPending {
		return phase, reason, msg
	}
	limit := time.Duration(*v.dgd.RolloutOrDefault().ProgressDeadlineSeconds) * time.Second
	left := ru.LastProgressTime.Add(limit).Sub(v.Now)
	if left <= 0 {
		return v1alpha1.RolloutFailed, v1alpha1.ReasonProgressDeadlineExceeded, fmt.Sprintf("no progress for %s: %s", limit, msg)
	}
	d.requeueIn(left + time.Second)
	return phase, reason, msg
}

// endTime sets when every worker reached the goal (the update revision, or the stable
// one of an aborted rollout), once, and says so for an abort.
func endTime(v *view, l leaves, phase v1alpha1.RolloutPhase, msg string, ru *v1alpha1.RollingUpdateStatus, d *draft) {
	if !l.after.Done || (phase != v1alpha1.RolloutCompleted && phase != v1alpha1.RolloutAborted) {
		ru.EndTime = nil
		return
	}
	if ru.EndTime == nil && phase == v1alpha1.RolloutAborted {
		d.event("Normal", v1alpha1.EventRolloutAbortCompleted, msg)
	}
	if ru.EndTime == nil {
		ru.EndTime = ptrTime(v.Now)
	}
}

// stepFields sets where the rollout is in spec.rollout.steps (index, start, kind, the
// end of a timed pause), its analyses and its attempt and abort. An aborted rollout
// keeps its steps and analyses where they stopped.
func stepFields(v *view, l leaves, ru *v1alpha1.RollingUpdateStatus) {
	old, hold := &v.dgd.Status, l.steps.hold
	aborted := l.a.abort != nil && l.c.h.sameRollout(old)
	ru.CurrentStepIndex, ru.CurrentStepStartTime, ru.CurrentStepKind, ru.CurrentStepEndTime = nil, nil, "", nil
	switch {
	case hold != nil:
		i := int32(hold.State.Index)
		ru.CurrentStepIndex, ru.CurrentStepStartTime = &i, ptrTime(hold.State.Start)
		ru.CurrentStepKind, ru.CurrentStepEndTime = stepKind(v, hold)
	case aborted: // the steps stay where they stopped
		p := old.RollingUpdate
		ru.CurrentStepIndex, ru.CurrentStepStartTime, ru.CurrentStepKind, ru.CurrentStepEndTime = p.CurrentStepIndex, p.CurrentStepStartTime, p.CurrentStepKind, p.CurrentStepEndTime
	}
	ru.Analyses = l.steps.analyses
	if hold == nil && aborted { // aborted before this pass: as they stopped
		ru.Analyses = old.RollingUpdate.Analyses
	}
	ru.Attempt, ru.Abort = l.a.number, l.a.abort
	if len(v.dgd.RolloutOrDefault().Steps) == 0 && l.a.number == 1 && l.a.abort == nil {
		ru.Attempt = 0 // nothing to number: a rollout without steps that was never aborted
	}
}

// stepKind is the kind of the step the hold is at, and when it ends if it is a timed
// pause ("" and nil once the steps are done).
func stepKind(v *view, hold *steps.Output) (v1alpha1.StepKind, *metav1.Time) {
	list := v.dgd.RolloutOrDefault().Steps
	if hold.State.Index >= len(list) {
		return "", nil
	}
	switch s := list[hold.State.Index]; {
	case s.Pause != nil && s.Pause.Duration != nil && !hold.RequeueAt.IsZero():
		return v1alpha1.StepPause, ptrTime(hold.RequeueAt)
	case s.Pause != nil:
		return v1alpha1.StepPause, nil
	case s.Analysis != nil:
		return v1alpha1.StepAnalysis, nil
	case s.SetWeight != nil:
		return v1alpha1.StepSetWeight, nil
	case s.SetHeaderRoute != nil:
		return v1alpha1.StepSetHeaderRoute, nil
	}
	return v1alpha1.StepPartition, nil
}

// analysisHold is the reason of a hold at an analysis step (AnalysisRunning or
// AnalysisInconclusive), or "".
func analysisHold(l leaves) string {
	h := l.steps.hold
	if h == nil || len(h.Analyses) == 0 {
		return ""
	}
	j := h.Analyses[len(h.Analyses)-1]
	switch {
	case j.Step != h.State.Index || j.Promoted:
		return ""
	case j.Phase == analysis.Inconclusive:
		return v1alpha1.ReasonAnalysisInconclusive
	case j.Phase == analysis.Running:
		return v1alpha1.ReasonAnalysisRunning
	}
	return ""
}

// phaseOf maps the planner's view of the state this pass leaves behind to a rollout
// phase, reason and message; a hold of spec.rollout.steps says which step holds, and
// why.
func phaseOf(v *view, l leaves) (v1alpha1.RolloutPhase, string, string) {
	phase, reason, msg := plannedPhase(l)
	if l.hold != nil && phase != v1alpha1.RolloutAborted {
		phase, reason, msg = v1alpha1.RolloutInProgress, l.hold.reason, l.hold.why
	}
	if w := l.traffic.waiting; w != "" && phase != v1alpha1.RolloutAborted && phase != v1alpha1.RolloutCompleted {
		reason, msg = v1alpha1.ReasonWaitingForCapacity, w+": "+msg
	}
	if h := l.steps.hold; h != nil && h.Message != "" && phase != v1alpha1.RolloutCompleted && phase != v1alpha1.RolloutAborted {
		msg = h.Message + ": " + msg
		if r := analysisHold(l); r != "" && phase == v1alpha1.RolloutPaused {
			reason = r
		}
	}
	return phase, reason, msg
}

func plannedPhase(l leaves) (v1alpha1.RolloutPhase, string, string) {
	a, h := l.after, l.c.h
	if ab := l.a.abort; ab != nil {
		if a.Done {
			return v1alpha1.RolloutAborted, ab.Reason, fmt.Sprintf("%s; every worker is back on revision %d", ab.Message, h.goal.Number)
		}
		return v1alpha1.RolloutAborted, ab.Reason, fmt.Sprintf("%s; returning every worker to revision %d: %s", ab.Message, h.goal.Number, a.Reason)
	}
	switch {
	case a.Done:
		return v1alpha1.RolloutCompleted, v1alpha1.ReasonRolloutCompleted, fmt.Sprintf("every worker is on revision %d", h.update.Number)
	case a.Phase == planner.PhasePartitioned:
		return v1alpha1.RolloutPaused, v1alpha1.ReasonPartitioned, a.Reason
	case a.Phase == planner.PhasePaused:
		return v1alpha1.RolloutPaused, v1alpha1.ReasonPaused, a.Reason
	case a.Phase == planner.PhaseBlocked:
		// No step keeps the invariants with these budgets; only a spec change helps.
		return v1alpha1.RolloutFailed, v1alpha1.ReasonRolloutBlocked, a.Reason
	default:
		return v1alpha1.RolloutInProgress, v1alpha1.ReasonRollingUpdate, a.Reason
	}
}

func phaseEvent(d *draft, phase v1alpha1.RolloutPhase, reason, msg string) {
	switch phase {
	case v1alpha1.RolloutCompleted:
		d.event("Normal", v1alpha1.EventRolloutCompleted, msg)
	case v1alpha1.RolloutPaused:
		switch reason {
		case v1alpha1.ReasonPartitioned, v1alpha1.ReasonPaused, v1alpha1.ReasonAnalysisRunning:
			d.event("Normal", "Rollout"+reason, msg) // EventRolloutPartitioned, EventRolloutPaused, EventRolloutAnalysisRunning
		}
		// An inconclusive analysis says so in its own Warning (EventAnalysisInconclusive),
		// not again in a Normal Event of the same words.
	case v1alpha1.RolloutFailed:
		d.event("Warning", reason, msg) // EventRolloutBlocked, EventProgressDeadlineExceeded
	}
}

// updatedServices lists the worker services whose every desired replica is on the
// update revision and ready.
func updatedServices(v *view, h *history, res []Workload) []string {
	var out []string
	for _, name := range v.dgd.WorkerServiceNames() {
		var ready, old int32
		for _, w := range res {
			switch {
			case w.Service != name:
			case w.Hash == h.update.WorkerHash:
				ready += w.Ready
			default:
				old += w.Replicas
			}
		}
		if old == 0 && ready >= v.dgd.Spec.Services[name].DesiredReplicas() {
			out = append(out, name)
		}
	}
	return out
}

// updateStarted reports whether the update revision has a workload with replicas.
func updateStarted(h *history, res []Workload) bool {
	for _, w := range res {
		if w.Hash != "" && w.Hash == h.update.WorkerHash && w.Replicas > 0 {
			return true
		}
	}
	return false
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
