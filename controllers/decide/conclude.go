package decide

import (
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// stop is the Decision of a pass that stopped before it could decide the whole DGD
// (an invalid spec, a workload name someone else holds): Ready False and Stalled True
// with reason and msg, and a Warning Event of that reason when it is news. The status
// keeps its counts from the last whole pass. Writes decided before the stop stay.
func stop(s *Snapshot, d *draft, reason, msg string) Decision {
	st, ev := stoppedStatus(s.DGD, s.Now, reason, msg)
	dec := Decision{Writes: d.Writes, Status: st, Metrics: d.Metrics, Requeue: d.Requeue,
		report: report{dgd: s.DGD, now: s.Now, conflicts: d.conflicts, stopped: true}}
	if ev != nil {
		dec.Events = []Event{*ev}
	}
	return dec
}

// HaltedStatus is the status of a pass that could not decide (a read it needs failed,
// reason): the last whole pass's status with Ready False, Reconciling True (the pass is
// retried) and msg, and its Warning Event, nil when not news.
func HaltedStatus(dgd *v1alpha1.DynamoGraphDeployment, now time.Time, reason, msg string) (*v1alpha1.DynamoGraphDeploymentStatus, *Event) {
	return haltedStatus(dgd, &dgd.Status, now, reason, msg, false)
}

// stoppedStatus is the status of a stopped pass and its Event, nil when not news.
func stoppedStatus(dgd *v1alpha1.DynamoGraphDeployment, now time.Time, reason, msg string) (*v1alpha1.DynamoGraphDeploymentStatus, *Event) {
	return haltedStatus(dgd, &dgd.Status, now, reason, msg, true)
}

// haltedStatus is the status of a pass that could not go on, and its Warning Event
// (nil when not news): Ready False with reason and msg, and Stalled True (retrying
// cannot help) or Reconciling True (the pass is retried), over base: the last whole
// pass's status (dgd's), or one that counts what this pass made.
func haltedStatus(dgd *v1alpha1.DynamoGraphDeployment, base *v1alpha1.DynamoGraphDeploymentStatus, now time.Time, reason, msg string, stalled bool) (*v1alpha1.DynamoGraphDeploymentStatus, *Event) {
	st := base.DeepCopy()
	reconciling := metav1.ConditionTrue
	stalledStatus := metav1.ConditionFalse
	if stalled {
		reconciling, stalledStatus = metav1.ConditionFalse, metav1.ConditionTrue
	}
	for _, c := range []struct {
		t string
		s metav1.ConditionStatus
	}{{v1alpha1.ConditionReady, metav1.ConditionFalse}, {v1alpha1.ConditionStalled, stalledStatus}, {v1alpha1.ConditionReconciling, reconciling}} {
		r, m := reason, msg
		if c.t == v1alpha1.ConditionStalled && !stalled {
			r, m = v1alpha1.ReasonNotStalled, notStalledMessage
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: c.t, Status: c.s,
			Reason: r, Message: m, ObservedGeneration: dgd.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	st.ObservedGeneration = dgd.Generation
	old := meta.FindStatusCondition(dgd.Status.Conditions, v1alpha1.ConditionReady)
	if dgd.Status.ObservedGeneration != dgd.Generation || old == nil || old.Status != metav1.ConditionFalse || old.Reason != reason || old.Message != msg {
		return st, &Event{Type: "Warning", Reason: reason, Message: msg}
	}
	return st, nil
}

// workloadWriteFrom reports whether a write of a workload is among writes[from:]: one
// not made, so the decision's status does not describe the cluster.
func workloadWriteFrom(writes []Write, from int) bool {
	for _, w := range writes[min(from, len(writes)):] {
		switch w.Op {
		case Relabel, Ensure, Scale, DeleteWorkload, ReleaseDynamo:
			return true
		}
	}
	return false
}

// Refusal says whether err is the API server refusing a write for what the write is,
// not for the moment it came at, and how the status reports it:
// ReasonWriteRefused and stalled for 400 (Bad Request), 413 (Request Entity Too
// Large) and 422 (Invalid), since the same write is refused again until the spec or
// the admission rules change; ReasonWriteForbidden and retried for 403 (Forbidden:
// RBAC, a ResourceQuota, a namespace being deleted), which can pass later. Anything
// else (409 Conflict, 5xx, a timeout) is not a refusal: the pass is retried and the
// status is left alone. The error's own message names the object (the writes wrap
// the API server's error as "<verb> <Kind> <namespace>/<name>: ...").
func Refusal(err error) (reason string, stalled bool) {
	switch {
	case err == nil:
		return "", false
	case NamespaceTerminating(err):
		return v1alpha1.ReasonNamespaceTerminating, true
	case apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err), apierrors.IsInvalid(err):
		return v1alpha1.ReasonWriteRefused, true
	case apierrors.IsForbidden(err):
		return v1alpha1.ReasonWriteForbidden, false
	}
	return "", false
}

// NamespaceTerminating reports whether err is the API server refusing a new object in
// a namespace being deleted (k8s.io/apiserver plugin/namespace/lifecycle: Forbidden
// with the cause NamespaceTerminating): no retry can make it, and the DGD goes with
// its namespace.
func NamespaceTerminating(err error) bool {
	_, ok := apierrors.StatusCause(err, corev1.NamespaceTerminatingCause)
	return ok && apierrors.IsForbidden(err)
}

// Conclude folds what the writes made (out) into what the pass reports:
//
//   - every write made: the Decision's status and Events, with the Event of the writes
//     made (RolloutStep, or ObjectsUpdated when only objects were written) where the
//     Decision marked it, and the name conflicts the writes found added to the
//     conditions (Ready False, Stalled True, reason NameConflict);
//   - a write that found the DGD cannot go on (out.Stopped: a workload name someone
//     else holds, or a spec the backend cannot run): the stopped status (NameConflict
//     or InvalidSpec), the writes before it made;
//   - a revision's create that met a hash collision (out.Collided): the count kept in
//     the status, and a pass at once;
//   - a write the API server refused (out.Refused, Refusal): Ready False with the
//     refusal's reason and its message (the object and the API server's words), and
//     Stalled True (rechecked now and then) or Reconciling True (retried with backoff,
//     Report.Retry), with a Warning Event when news and the Event of the writes made
//     before it;
//   - a write that failed (out.Err), or a decision that failed after its writes
//     (Decision.Err): no status (a status of half a pass would say what
//     was not done), and the Event of the writes made before it, which the retry does
//     not make again. This is where a failed pass's status goes once it reports one.
func (d Decision) Conclude(out Outcome) Report {
	r := d.report
	var taken *backends.NameConflictError
	var spec *backends.SpecError
	switch {
	case out.Collided != nil:
		st := r.dgd.Status.DeepCopy()
		st.CollisionCount = out.Collided
		return Report{Status: st, Requeue: time.Millisecond}
	case errors.As(out.Stopped, &taken):
		conflicts := append(append(append([]string(nil), r.conflicts...), messages(out.Conflicts)...), taken.Error())
		st, ev := stoppedStatus(r.dgd, r.now, v1alpha1.ReasonNameConflict, strings.Join(conflicts, "; "))
		return Report{Status: st, Events: events(ev), Requeue: soonest(d.Requeue, ConflictRecheck)}
	case errors.As(out.Stopped, &spec):
		st, ev := stoppedStatus(r.dgd, r.now, v1alpha1.ReasonInvalidSpec, spec.Error())
		return Report{Status: st, Events: events(ev), Requeue: d.Requeue}
	case out.Refused != nil:
		reason, stalled := Refusal(out.Refused)
		base := &r.dgd.Status
		if d.Status != nil && !workloadWriteFrom(d.Writes, out.Made) {
			// Every workload write was made (the refused one is an object's: a Service,
			// an Ingress): the decision's counts are the cluster's, and a status that
			// kept the last pass's would leave out the workloads this pass created.
			base = d.Status
		}
		st, ev := haltedStatus(r.dgd, base, r.now, reason, out.Refused.Error(), stalled)
		rep := Report{Status: st, Events: append(madeEvents(out), events(ev)...), Requeue: soonest(d.Requeue, ConflictRecheck)}
		if reason == v1alpha1.ReasonNamespaceTerminating {
			rep.Requeue = 0 // nothing to come back for: the namespace takes the DGD with it
		}
		if !stalled {
			rep.Requeue, rep.Retry = 0, out.Refused
		}
		return rep
	case out.Stopped != nil || out.Err != nil || d.Err != nil:
		return Report{Events: madeEvents(out)}
	}
	rep := Report{Status: d.Status, Events: stepEvent(d.Events, out), Requeue: d.Requeue}
	if len(out.Conflicts) > 0 && d.Status != nil && !r.stopped {
		st := d.Status.DeepCopy()
		cd := &draft{}
		v := &view{Snapshot: &Snapshot{DGD: r.dgd, Now: r.now}, dgd: r.dgd}
		conflicted(v, st, append(append([]string(nil), r.conflicts...), messages(out.Conflicts)...), cd)
		rep.Status, rep.Events = st, append(rep.Events, cd.Events...)
		rep.Requeue = soonest(rep.Requeue, ConflictRecheck)
	}
	return rep
}

// madeEvents is the Event of the writes a pass made before one failed (none when it
// made none), marked Made: the retry does not make them again, so it is emitted even
// when no status is written.
func madeEvents(out Outcome) []Event {
	if done := append(append([]string(nil), out.Progress...), out.Objects...); len(done) > 0 {
		return []Event{{Type: "Normal", Reason: v1alpha1.EventRolloutStep, Message: strings.Join(done, ", "), Made: true}}
	}
	return nil
}

// stepEvent fills in the Event of the writes made where the Decision marked it, or
// drops the mark when nothing was written.
func stepEvent(events []Event, out Outcome) []Event {
	var res []Event
	for _, e := range events {
		if !e.Step {
			res = append(res, e)
			continue
		}
		switch {
		case len(out.Progress) > 0:
			e.Reason, e.Message = v1alpha1.EventRolloutStep, strings.Join(append(append([]string(nil), out.Progress...), out.Objects...), ", ")
		case len(out.Objects) > 0:
			e.Reason, e.Message = v1alpha1.EventObjectsUpdated, strings.Join(out.Objects, ", ")
		default:
			continue
		}
		e.Step = false
		res = append(res, e)
	}
	return res
}

func messages(cs []*backends.NameConflictError) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Error())
	}
	return out
}

func events(e *Event) []Event {
	if e == nil {
		return nil
	}
	return []Event{*e}
}
