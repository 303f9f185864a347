package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/planner"
	"github.com/dgd-rollout/operator/revisions"
)

// writeStatus computes the status of this pass and writes it only when it changed.
func (p *pass) writeStatus(ctx context.Context) error {
	if p.waitingForCache {
		return nil
	}
	st := p.dgd.Status.DeepCopy()
	st.ObservedGeneration = p.dgd.Generation
	if p.invalid == nil && p.revs.Update != nil {
		p.fillCounts(st)
		p.fillRevisions(st)
		p.fillRollout(st)
		p.fillConditions(st)
	}
	if equality.Semantic.DeepEqual(st, p.old) {
		ObserveStatus(p.dgd.Namespace, p.dgd.Name, p.old, st)
		return nil
	}
	p.dgd.Status = *st
	if err := p.updateStatus(ctx); err != nil {
		return err
	}
	ObserveStatus(p.dgd.Namespace, p.dgd.Name, p.old, st)
	return nil
}

// updateStatus writes p.dgd's status and remembers the resourceVersion it got, so that
// the cache is known to lag until it shows that write.
func (p *pass) updateStatus(ctx context.Context) error {
	if err := p.r.Client.Status().Update(ctx, p.dgd); err != nil {
		return fmt.Errorf("updating status of %s/%s: %w", p.dgd.Namespace, p.dgd.Name, err)
	}
	p.r.statusRV.Store(client.ObjectKeyFromObject(p.dgd), p.dgd.ResourceVersion)
	return nil
}

// fillCounts sets the per-service and total replica counts from the observed workloads.
func (p *pass) fillCounts(st *v1alpha1.DynamoGraphDeploymentStatus) {
	update := p.updateHash()
	services := map[string]v1alpha1.ServiceStatus{}
	var ready, desired int32
	st.Replicas, st.ReadyReplicas, st.UpdatedReplicas, st.AvailableReplicas, st.UpdatedReadyReplicas = 0, 0, 0, 0, 0
	for _, name := range p.dgd.ServiceNames() {
		svc := p.dgd.Spec.Services[name]
		ss := v1alpha1.ServiceStatus{ComponentType: svc.ComponentType, WorkloadKind: p.backendOf[name].Kind()}
		for _, w := range p.sortedWorkloadsOf(name) {
			ss.Replicas += w.Replicas
			ss.ReadyReplicas += w.Ready
			ss.AvailableReplicas += w.Ready
			if w.Hash == update || (w.Hash == "" && !svc.IsWorker()) {
				ss.UpdatedReplicas += updatedOf(w)
			}
			if w.Hash != "" && w.Hash == update {
				st.UpdatedReadyReplicas += w.Ready
			}
			if !w.Terminating {
				ss.Workloads = append(ss.Workloads, v1alpha1.WorkloadStatus{Name: w.Name, Revision: p.revisionOfWorkload(w), Replicas: w.Replicas, ReadyReplicas: w.Ready})
			}
			// A workload being deleted no longer counts, though its pods still
			// terminate: they are out of discovery (not ready in the EndpointSlices),
			// and counting them would cost a status write per service when they are
			// gone, after the rollout has completed.
			if w.Replicas > 0 || (w.pods > 0 && !w.Terminating) {
				ss.RuntimeNamespaces = appendUnique(ss.RuntimeNamespaces, backends.EffectiveNamespace(p.dgd, w.Hash != "", w.Hash))
			}
		}
		switch {
		case p.unschedulable != nil: // looked this pass
			ss.Message = p.unschedulable[name]
		case ss.ReadyReplicas < svc.DesiredReplicas() && len(p.wrote) == 0:
			ss.Message = p.old.Services[name].Message // still short, nothing moved: what was found holds
		}
		if ss.Message != "" && ss.Message != p.old.Services[name].Message {
			p.event("Warning", v1alpha1.EventPodsUnschedulable, ss.Message)
		}
		services[name] = ss
		ready += ss.ReadyReplicas
		desired += svc.DesiredReplicas()
		if svc.IsWorker() {
			st.Replicas += ss.Replicas
			st.ReadyReplicas += ss.ReadyReplicas
			st.UpdatedReplicas += ss.UpdatedReplicas
			st.AvailableReplicas += ss.AvailableReplicas
		}
	}
	st.Services = services
	st.Ready = fmt.Sprintf("%d/%d", ready, desired)
}

// updatedOf counts a workload's up-to-date replicas: all of a worker revision's (its
// template never changes), the reported updated count of a stable one.
func updatedOf(w observed) int32 {
	switch {
	case w.Hash != "":
		return w.Replicas
	case w.Outdated:
		return 0
	}
	return min(w.Updated, w.Replicas)
}

func (p *pass) revisionOfWorkload(w observed) int64 {
	if w.Hash == "" {
		return 0
	}
	return p.revisionOf(w.Hash)
}

// sortedWorkloadsOf lists a service's workloads as this pass leaves them, newest
// revision first.
func (p *pass) sortedWorkloadsOf(service string) []observed {
	var out []observed
	for _, w := range p.result {
		if w.Service == service {
			out = append(out, w)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return p.revisionOf(out[i].Hash) > p.revisionOf(out[j].Hash) })
	return out
}

func (p *pass) fillRevisions(st *v1alpha1.DynamoGraphDeploymentStatus) {
	st.UpdateRevision = p.revs.Update.Name
	st.UpdateWorkerHash = revisions.HashOf(p.revs.Update)
	st.UpdateRevisionNumber = p.revs.Update.Revision
	st.CollisionCount = &p.revs.CollisionCount
	switch {
	case p.abort != nil: // every worker is on, or returns to, the stable revision
		st.CurrentRevision = p.goal.Name
	case p.after.Done:
		st.CurrentRevision = p.revs.Update.Name
	case p.revs.Current != nil:
		st.CurrentRevision = p.revs.Current.Name
	default:
		st.CurrentRevision = p.revs.Update.Name
	}
}

func (p *pass) fillConditions(st *v1alpha1.DynamoGraphDeploymentStatus) {
	gen := p.dgd.Generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(p.now)})
	}
	if short := p.belowFloor(st); short != "" {
		set(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonMinimumReplicasUnavailable, short)
	} else {
		set(v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonMinimumReplicasAvailable, "every service has at least its minimum available replicas")
	}
	ru := st.RollingUpdate
	switch ru.Phase {
	case v1alpha1.RolloutFailed, v1alpha1.RolloutAborted:
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, ru.Reason, ru.Message)
	case v1alpha1.RolloutPaused:
		set(v1alpha1.ConditionProgressing, metav1.ConditionUnknown, ru.Reason, ru.Message)
	case v1alpha1.RolloutCompleted:
		set(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonNewRevisionAvailable, fmt.Sprintf("revision %d is rolled out", st.UpdateRevisionNumber))
	default:
		set(v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonRolloutInProgress, ru.Message)
	}
	held := ru.Phase == v1alpha1.RolloutPaused // partitioned or paused on purpose
	running, updated := p.allReady(st, false), p.allReady(st, true)
	if len(p.conflicts) > 0 {
		msg := strings.Join(p.conflicts, "; ")
		if old := meta.FindStatusCondition(p.old.Conditions, v1alpha1.ConditionReady); old == nil || old.Reason != v1alpha1.ReasonNameConflict || old.Message != msg {
			p.event("Warning", v1alpha1.EventNameConflict, msg)
		}
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNameConflict, msg)
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonNameConflict, msg)
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonNameConflict, msg)
		return
	}
	switch {
	case ru.Phase == v1alpha1.RolloutAborted:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, ru.Reason, fmt.Sprintf("%s replicas ready; rollout aborted: %s", st.Ready, ru.Message))
	case ru.Phase == v1alpha1.RolloutCompleted && updated:
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReplicasReady, "every service has all its replicas ready on the update revision")
	case held && running:
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, ru.Reason, fmt.Sprintf("%s replicas ready; rollout held: %s", st.Ready, ru.Message))
	default:
		msg := fmt.Sprintf("%s replicas ready, rollout %s", st.Ready, ru.Phase)
		for _, name := range p.dgd.ServiceNames() {
			if m := st.Services[name].Message; m != "" {
				msg += "; " + m
			}
		}
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonReplicasNotReady, msg)
	}
	// kstatus (Flux, kpt, cli-utils): Reconciling True reads InProgress, Stalled True
	// Failed, both False (and observedGeneration current) Current.
	switch {
	case ru.Phase == v1alpha1.RolloutFailed:
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, ru.Reason, ru.Message)
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, ru.Reason, ru.Message)
		return
	case ru.Phase == v1alpha1.RolloutAborted:
		// Stalled: the spec's revision will not roll out without a spec change or a
		// retry; Reconciling while the workers still move back.
		if p.after.Done && running {
			set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, ru.Reason, ru.Message)
		} else {
			set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRollingUpdate, ru.Message)
		}
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, ru.Reason, ru.Message)
		return
	case ru.Phase == v1alpha1.RolloutInProgress || ru.Phase == v1alpha1.RolloutPending:
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRollingUpdate, ru.Message)
	case !running || ru.Phase == v1alpha1.RolloutCompleted && !updated:
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonReplicasNotReady, fmt.Sprintf("%s replicas ready", st.Ready))
	case held:
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, ru.Reason, ru.Message)
	default:
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonSettled, fmt.Sprintf("revision %d is rolled out and ready", st.UpdateRevisionNumber))
	}
	set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonNotStalled, "the operator can go on")
}

// belowFloor names the first service whose ready replicas are below desired minus
// maxUnavailable, or returns "".
func (p *pass) belowFloor(st *v1alpha1.DynamoGraphDeploymentStatus) string {
	in := p.plannerInput()
	for _, s := range in.Spec.Services {
		_, unav := planner.ResolveBudgets(s)
		if got := st.Services[s.Name].ReadyReplicas; got < s.Replicas-unav {
			return fmt.Sprintf("service %s has %d ready replicas, needs at least %d", s.Name, got, s.Replicas-unav)
		}
	}
	for _, name := range p.dgd.ServiceNames() {
		svc := p.dgd.Spec.Services[name]
		if !svc.IsWorker() && svc.DesiredReplicas() > 0 && st.Services[name].ReadyReplicas == 0 {
			return fmt.Sprintf("service %s has no ready replicas", name)
		}
	}
	return ""
}

// allReady reports whether every service has all its desired replicas ready: on
// whichever revisions (a held rollout keeps some on the old one), or, with onUpdate,
// also updated.
func (p *pass) allReady(st *v1alpha1.DynamoGraphDeploymentStatus, onUpdate bool) bool {
	for _, name := range p.dgd.ServiceNames() {
		s := st.Services[name]
		if want := p.dgd.Spec.Services[name].DesiredReplicas(); s.ReadyReplicas < want || onUpdate && s.UpdatedReplicas < want {
			return false
		}
	}
	return true
}

// markInvalid reports a spec no retry can fix: Ready False, a warning Event.
func (p *pass) markInvalid(e *invalidSpecError) { p.markStopped(v1alpha1.ReasonInvalidSpec, e) }

// markStopped reports a pass that stopped before it could observe and plan the whole
// DGD (an invalid spec, a workload name someone else holds): Ready False and Stalled
// True with reason and e's message, and a Warning Event of that reason when it is new.
// The status keeps its counts from the last whole pass.
func (p *pass) markStopped(reason string, e *invalidSpecError) {
	p.invalid = e
	st := &p.dgd.Status
	for _, c := range []struct {
		t string
		s metav1.ConditionStatus
	}{{v1alpha1.ConditionReady, metav1.ConditionFalse}, {v1alpha1.ConditionStalled, metav1.ConditionTrue}, {v1alpha1.ConditionReconciling, metav1.ConditionFalse}} {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: c.t, Status: c.s,
			Reason: reason, Message: e.msg, ObservedGeneration: p.dgd.Generation, LastTransitionTime: metav1.NewTime(p.now)})
	}
	old := meta.FindStatusCondition(p.old.Conditions, v1alpha1.ConditionReady)
	if p.old.ObservedGeneration != p.dgd.Generation || old == nil || old.Status != metav1.ConditionFalse || old.Reason != reason || old.Message != e.msg {
		p.event("Warning", reason, e.msg)
	}
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
