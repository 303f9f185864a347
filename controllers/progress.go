package controllers

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/planner"
)

// fillRollout sets status.rollingUpdate from the plan: phase, times, updated services,
// and the progress deadline. It emits an Event on every phase change and on every
// pass that moved replicas. Only transitions set times, so a pass that changes nothing
// writes nothing.
func (p *pass) fillRollout(st *v1alpha1.DynamoGraphDeploymentStatus) {
	prev := p.old.RollingUpdate
	ru := &v1alpha1.RollingUpdateStatus{}
	if prev != nil && p.old.UpdateRevision == st.UpdateRevision {
		*ru = *prev.DeepCopy()
	} else {
		ru.StartTime = ptrTime(p.now)
		ru.LastProgressTime = ptrTime(p.now)
		if p.hasOldWorkers() && p.abort == nil { // an aborted rollout starts nothing (a frontend-only revision keeps it aborted)
			p.event("Normal", v1alpha1.EventRolloutStarted, fmt.Sprintf("rolling workers to revision %d (%s)", st.UpdateRevisionNumber, p.updateHash()))
		}
	}
	ru.UpdatedServices = p.updatedServices()
	phase, reason, msg := p.phaseOf()
	if h := p.hold; h != nil && h.Message != "" && phase != v1alpha1.RolloutCompleted && phase != v1alpha1.RolloutAborted {
		msg = h.Message + ": " + msg // which step holds, and why
		if r := p.analysisHold(); r != "" && phase == v1alpha1.RolloutPaused {
			reason = r
		}
	}
	if phase == v1alpha1.RolloutInProgress && len(p.wrote) == 0 && !p.updateStarted() {
		// Detected, nothing moved yet (a Recreate waiting for the old pods, a create
		// not yet in the cache): Pending, kstatus still InProgress.
		phase = v1alpha1.RolloutPending
	}
	if len(p.wrote) > 0 || p.updatedReadyGrew(st) || (prev != nil && prev.Phase == v1alpha1.RolloutPaused && phase != v1alpha1.RolloutPaused) {
		ru.LastProgressTime = ptrTime(p.now)
	}
	switch {
	case len(p.wrote) > 0:
		RolloutSteps.WithLabelValues(p.dgd.Namespace, p.dgd.Name).Inc()
		p.stepEvent(v1alpha1.EventRolloutStep, strings.Join(append(p.wrote, p.objects...), ", "))
	case len(p.objects) > 0:
		p.stepEvent(v1alpha1.EventObjectsUpdated, strings.Join(p.objects, ", "))
	}
	if phase == v1alpha1.RolloutInProgress || phase == v1alpha1.RolloutPending {
		deadline := time.Duration(*p.dgd.RolloutOrDefault().ProgressDeadlineSeconds) * time.Second
		left := ru.LastProgressTime.Add(deadline).Sub(p.now)
		if left <= 0 {
			phase, reason = v1alpha1.RolloutFailed, v1alpha1.ReasonProgressDeadlineExceeded
			msg = fmt.Sprintf("no progress for %s: %s", deadline, msg)
		} else {
			p.requeueIn(left + time.Second)
		}
	}
	// EndTime: when every worker reached the goal (the update revision, or the stable
	// one of an aborted rollout).
	if p.after.Done && (phase == v1alpha1.RolloutCompleted || phase == v1alpha1.RolloutAborted) {
		if ru.EndTime == nil && phase == v1alpha1.RolloutAborted {
			p.event("Normal", v1alpha1.EventRolloutAbortCompleted, msg)
		}
		if ru.EndTime == nil {
			ru.EndTime = ptrTime(p.now)
		}
	} else {
		ru.EndTime = nil
	}
	if prev == nil || prev.Phase != phase || prev.Reason != reason {
		p.eventForPhase(phase, reason, msg)
	}
	ru.CurrentStepIndex, ru.CurrentStepStartTime = nil, nil
	switch h := p.hold; {
	case h != nil:
		i := int32(h.State.Index)
		ru.CurrentStepIndex, ru.CurrentStepStartTime = &i, ptrTime(h.State.Start)
	case p.abort != nil && p.sameRollout(): // aborted: the steps stay where they stopped
		ru.CurrentStepIndex, ru.CurrentStepStartTime = p.old.RollingUpdate.CurrentStepIndex, p.old.RollingUpdate.CurrentStepStartTime
	}
	ru.Analyses = p.analyses
	if p.hold == nil && p.abort != nil && p.sameRollout() { // aborted before this pass: as they stopped
		ru.Analyses = p.old.RollingUpdate.Analyses
	}
	ru.Attempt, ru.Abort = p.attempt, p.abort
	if len(p.dgd.RolloutOrDefault().Steps) == 0 && p.attempt == 1 && p.abort == nil {
		ru.Attempt = 0 // nothing to number: a rollout without steps that was never aborted
	}
	ru.Phase, ru.Reason, ru.Message = phase, reason, msg
	st.RollingUpdate = ru
}

// analysisHold is the reason of a hold at an analysis step (AnalysisRunning or
// AnalysisInconclusive), or "".
func (p *pass) analysisHold() string {
	h := p.hold
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
// phase, reason and message.
func (p *pass) phaseOf() (v1alpha1.RolloutPhase, string, string) {
	a := p.after
	if p.abort != nil {
		if a.Done {
			return v1alpha1.RolloutAborted, p.abort.Reason, fmt.Sprintf("%s; every worker is back on revision %d", p.abort.Message, p.goal.Revision)
		}
		return v1alpha1.RolloutAborted, p.abort.Reason, fmt.Sprintf("%s; returning every worker to revision %d: %s", p.abort.Message, p.goal.Revision, a.Reason)
	}
	switch {
	case a.Done:
		return v1alpha1.RolloutCompleted, v1alpha1.ReasonRolloutCompleted, fmt.Sprintf("every worker is on revision %d", p.revs.Update.Revision)
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

func (p *pass) eventForPhase(phase v1alpha1.RolloutPhase, reason, msg string) {
	switch phase {
	case v1alpha1.RolloutCompleted:
		p.event("Normal", v1alpha1.EventRolloutCompleted, msg)
	case v1alpha1.RolloutPaused:
		p.event("Normal", "Rollout"+reason, msg) // EventRolloutPartitioned, EventRolloutPaused
	case v1alpha1.RolloutFailed:
		p.event("Warning", reason, msg) // EventRolloutBlocked, EventProgressDeadlineExceeded
	}
}

// updatedReadyGrew reports whether more update-revision replicas are ready than the last
// status said: readiness is progress even when nothing was scaled.
func (p *pass) updatedReadyGrew(st *v1alpha1.DynamoGraphDeploymentStatus) bool {
	return st.UpdatedReadyReplicas > p.old.UpdatedReadyReplicas
}

// updatedServices lists the worker services whose every desired replica is on the update
// revision and ready.
func (p *pass) updatedServices() []string {
	var out []string
	update := p.updateHash()
	for _, name := range p.dgd.WorkerServiceNames() {
		var ready, old int32
		for _, w := range p.result {
			switch {
			case w.Service != name:
			case w.Hash == update:
				ready += w.Ready
			default:
				old += w.Replicas
			}
		}
		if old == 0 && ready >= p.dgd.Spec.Services[name].DesiredReplicas() {
			out = append(out, name)
		}
	}
	return out
}

// updateStarted reports whether the update revision has a workload with replicas.
func (p *pass) updateStarted() bool {
	update := p.updateHash()
	for _, w := range p.result {
		if w.Hash != "" && w.Hash == update && w.Replicas > 0 {
			return true
		}
	}
	return false
}

func (p *pass) hasOldWorkers() bool {
	for _, w := range p.workers() {
		if w.Hash != p.updateHash() && w.Replicas > 0 {
			return true
		}
	}
	return false
}

// event queues one Event about the DGD, emitted once the pass's status is written
// (emitEvents): a pass whose status write fails is done again, and would say it twice.
func (p *pass) event(kind, reason, msg string) {
	p.events = append(p.events, pendingEvent{kind: kind, reason: reason, msg: msg})
}

// stepEvent queues the Event of writes this pass made: emitted whether or not its
// status write succeeds, since the pass that follows does not make them again.
func (p *pass) stepEvent(reason, msg string) {
	p.events = append(p.events, pendingEvent{kind: "Normal", reason: reason, msg: msg, made: true})
}

// pendingEvent is an Event a pass emits at its end.
type pendingEvent struct {
	kind, reason, msg string
	made              bool // it reports writes made (see stepEvent)
}

// emitEvents emits the pass's Events; statusWritten false keeps only those of writes
// made. Each Event's action carries a digest of its message: the events/v1 recorder
// merges Events of the same regarding object, reason and action into one series and
// keeps only the first message, so with a fixed action every step after the first in
// six minutes would be a count on the first step's line, its own message lost. With
// the digest each distinct message is its own Event, and only exact repeats (the same
// failure again) become a series.
func (p *pass) emitEvents(statusWritten bool) {
	if p.r.Recorder == nil {
		return
	}
	for _, e := range p.events {
		if statusWritten || e.made {
			p.r.Recorder.Eventf(p.dgd, nil, e.kind, e.reason, eventAction(e.msg), "%s", e.msg)
		}
	}
}

// logStep logs one line at info for a pass that moved workers: the DGD (in the
// logger's values), the update revision, the phase the pass left and its writes.
func (p *pass) logStep(ctx context.Context) {
	if len(p.wrote) == 0 {
		return
	}
	ru := p.dgd.Status.RollingUpdate
	phase := v1alpha1.RolloutPhase("")
	if ru != nil {
		phase = ru.Phase
	}
	log.FromContext(ctx).Info("rollout step", "revision", p.dgd.Status.UpdateRevisionNumber, "phase", phase, "writes", p.wrote)
}

// eventAction is "Rollout-" and 8 hex digits of the message's FNV-1a hash.
func eventAction(msg string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(msg))
	return fmt.Sprintf("Rollout-%08x", h.Sum32())
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
