package decide

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/planner"
)

// conditions sets Available, Progressing, Ready, Reconciling and Stalled from the status
// the pass leaves. A name conflict overrides Ready, Reconciling and Stalled.
// notStalledMessage is the Stalled condition's message while the operator can go on.
const notStalledMessage = "the operator can go on"

func conditions(v *view, l leaves, st *v1alpha1.DynamoGraphDeploymentStatus, d *draft) {
	set := setter(v, st)
	if short := belowFloor(v, l.c, st); short != "" {
		set(v1alpha1.ConditionAvailable, metav1.ConditionFalse, v1alpha1.ReasonMinimumReplicasUnavailable, short)
	} else {
		set(v1alpha1.ConditionAvailable, metav1.ConditionTrue, v1alpha1.ReasonMinimumReplicasAvailable, "every service has at least its minimum available replicas")
	}
	progressing(st, set)
	if d.takeOverHeld != "" {
		set(v1alpha1.ConditionTakeOverHeld, metav1.ConditionTrue, v1alpha1.ReasonDynamoIngressHeld, d.takeOverHeld)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionTakeOverHeld)
	}
	if len(d.conflicts) > 0 {
		conflicted(v, st, d.conflicts, d)
		return
	}
	ready(v, st, set)
	notServing(v, l, st, set, d)
	reconciling(v, l, st, set)
}

// notServing sets Ready False (TrafficNotServing) while the DGD has cohorts and its
// traffic provider routes nothing once the rollout has settled (a parent Gateway that
// does not exist, or has not accepted the route; no proxy replica that serves a split),
// with a Warning Event when news: the message names the object. While the cohorts'
// first split is being set up the rollout is under way and says so instead.
func notServing(v *view, l leaves, st *v1alpha1.DynamoGraphDeploymentStatus, set func(string, metav1.ConditionStatus, string, string), d *draft) {
	ru := st.RollingUpdate
	held := l.hold != nil && l.hold.reason == v1alpha1.ReasonTrafficNotServing
	if ru == nil || (ru.Phase != v1alpha1.RolloutCompleted && ru.Phase != v1alpha1.RolloutPaused && !held) {
		return
	}
	for _, f := range l.traffic.fronts {
		if f.effect.Serving {
			continue
		}
		msg := fmt.Sprintf("the cohorts' traffic through %s is not served: %s", f.t.Entry, orNone(f.effect.Message, f.t.Entry))
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTrafficNotServing, msg)
		if old := meta.FindStatusCondition(v.dgd.Status.Conditions, v1alpha1.ConditionReady); old == nil || old.Reason != v1alpha1.ReasonTrafficNotServing || old.Message != msg {
			d.event("Warning", v1alpha1.ReasonTrafficNotServing, msg)
		}
		return
	}
}

// setter sets conditions of st at the DGD's generation, now.
func setter(v *view, st *v1alpha1.DynamoGraphDeploymentStatus) func(t string, s metav1.ConditionStatus, reason, msg string) {
	return func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: v.dgd.Generation, LastTransitionTime: metav1.NewTime(v.Now)})
	}
}

func progressing(st *v1alpha1.DynamoGraphDeploymentStatus, set func(string, metav1.ConditionStatus, string, string)) {
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
}

// conflicted reports the objects in the DGD's way: Ready False, Reconciling False and
// Stalled True with reason NameConflict, and a Warning Event when it is news.
func conflicted(v *view, st *v1alpha1.DynamoGraphDeploymentStatus, conflicts []string, d *draft) {
	set := setter(v, st)
	msg := strings.Join(conflicts, "; ")
	if old := meta.FindStatusCondition(v.dgd.Status.Conditions, v1alpha1.ConditionReady); old == nil || old.Reason != v1alpha1.ReasonNameConflict || old.Message != msg {
		d.event("Warning", v1alpha1.EventNameConflict, msg)
	}
	set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNameConflict, msg)
	set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonNameConflict, msg)
	set(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonNameConflict, msg)
}

// ready: True when the rollout completed with every replica ready on the update
// revision, or is held on purpose with every replica ready; False with why otherwise.
func ready(v *view, st *v1alpha1.DynamoGraphDeploymentStatus, set func(string, metav1.ConditionStatus, string, string)) {
	ru := st.RollingUpdate
	switch {
	case ru.Phase == v1alpha1.RolloutAborted:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, ru.Reason, fmt.Sprintf("%s; rollout aborted: %s", replicasReady(v, st), ru.Message))
	case ru.Phase == v1alpha1.RolloutCompleted && allReady(v, st, true):
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllReplicasReady, "every service has all its replicas ready on the update revision")
	case ru.Phase == v1alpha1.RolloutPaused && allReady(v, st, false):
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, ru.Reason, fmt.Sprintf("%s; rollout held: %s", replicasReady(v, st), ru.Message))
	default:
		msg := fmt.Sprintf("%s, rollout %s", replicasReady(v, st), ru.Phase)
		for _, name := range v.dgd.ServiceNames() {
			if m := st.Services[name].Message; m != "" {
				msg += "; " + m
			}
		}
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonReplicasNotReady, msg)
	}
}

// replicasReady says how many replicas are ready, over every service: "7/7 replicas
// ready", against the replicas desired; while revisions run side by side with more
// replicas than desired (the surge of a rollout, a canary held beside the stable
// revision), against the replicas that exist, with the desired count beside it: "9/9
// replicas ready (7 desired, 2 more while revisions run side by side)", not "9/7".
func replicasReady(v *view, st *v1alpha1.DynamoGraphDeploymentStatus) string {
	var ready, exist, desired int32
	for _, name := range v.dgd.ServiceNames() {
		ready += st.Services[name].ReadyReplicas
		exist += st.Services[name].Replicas
		desired += v.dgd.Spec.Services[name].DesiredReplicas()
	}
	if exist <= desired {
		return fmt.Sprintf("%d/%d replicas ready", ready, desired)
	}
	return fmt.Sprintf("%d/%d replicas ready (%d desired, %d more while revisions run side by side)", ready, exist, desired, exist-desired)
}

// reconciling sets the kstatus conditions (Flux, kpt, cli-utils): Reconciling True reads
// InProgress, Stalled True Failed, both False (and observedGeneration current) Current.
func reconciling(v *view, l leaves, st *v1alpha1.DynamoGraphDeploymentStatus, set func(string, metav1.ConditionStatus, string, string)) {
	ru := st.RollingUpdate
	held := ru.Phase == v1alpha1.RolloutPaused // partitioned or paused on purpose
	running, updated := allReady(v, st, false), allReady(v, st, true)
	switch {
	case ru.Phase == v1alpha1.RolloutFailed:
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, ru.Reason, ru.Message)
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, ru.Reason, ru.Message)
		return
	case ru.Phase == v1alpha1.RolloutAborted:
		// Stalled: the spec's revision will not roll out without a spec change or a
		// retry; Reconciling while the workers still move back.
		if l.after.Done && running {
			set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, ru.Reason, ru.Message)
		} else {
			set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRollingUpdate, ru.Message)
		}
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, ru.Reason, ru.Message)
		return
	case ru.Phase == v1alpha1.RolloutInProgress || ru.Phase == v1alpha1.RolloutPending:
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRollingUpdate, ru.Message)
	case !running || ru.Phase == v1alpha1.RolloutCompleted && !updated:
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonReplicasNotReady, replicasReady(v, st))
	case held:
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, ru.Reason, ru.Message)
	default:
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonSettled, fmt.Sprintf("revision %d is rolled out and ready", st.UpdateRevisionNumber))
	}
	set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonNotStalled, notStalledMessage)
}

// belowFloor names the first service whose ready replicas are below desired minus
// maxUnavailable, or returns "".
func belowFloor(v *view, c course, st *v1alpha1.DynamoGraphDeploymentStatus) string {
	in := c.input(v, v.workers())
	for _, s := range in.Spec.Services {
		_, unav := planner.ResolveBudgets(s)
		if got := st.Services[s.Name].ReadyReplicas; got < s.Replicas-unav {
			return fmt.Sprintf("service %s has %d ready replicas, needs at least %d", s.Name, got, s.Replicas-unav)
		}
	}
	for _, name := range v.dgd.ServiceNames() {
		svc := v.dgd.Spec.Services[name]
		if !svc.IsWorker() && svc.DesiredReplicas() > 0 && st.Services[name].ReadyReplicas == 0 {
			return fmt.Sprintf("service %s has no ready replicas", name)
		}
	}
	return ""
}

// allReady reports whether every service has all its desired replicas ready: on
// whichever revisions (a held rollout keeps some on the old one), or, with onUpdate,
// also updated.
func allReady(v *view, st *v1alpha1.DynamoGraphDeploymentStatus, onUpdate bool) bool {
	for _, name := range v.dgd.ServiceNames() {
		s := st.Services[name]
		if want := v.dgd.Spec.Services[name].DesiredReplicas(); s.ReadyReplicas < want || onUpdate && s.UpdatedReplicas < want {
			return false
		}
	}
	return true
}
