package decide_test

import (
	"errors"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/harness"
)

// refusals are the API server's answers to a write, as apierrors builds them (the
// errors the API server sends and client-go decodes), wrapped as the writes wrap them.
func refusals() map[string]error {
	ingress := schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}
	invalid := apierrors.NewInvalid(ingress, "g-frontend", field.ErrorList{
		field.Invalid(field.NewPath("spec", "rules").Index(0).Child("host"), "My_Graph", "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters")})
	large := apierrors.NewRequestEntityTooLargeError("limit is 3145728")
	quota := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "g-decode-1",
		errors.New("exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=2, limited: count/deployments.apps=2"))
	return map[string]error{
		"422":  fmt.Errorf("creating Ingress ns/g-frontend: %w", invalid),
		"400":  fmt.Errorf("creating Deployment ns/g-decode-1: %w", apierrors.NewBadRequest("the object has a field the server cannot decode")),
		"413":  fmt.Errorf("creating LeaderWorkerSet ns/g-decode-1: %w", large),
		"403":  fmt.Errorf("creating Deployment ns/g-decode-1: %w", quota),
		"409":  fmt.Errorf("updating Deployment ns/g-decode-1: %w", apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "g-decode-1", errors.New("the object has been modified"))),
		"500":  fmt.Errorf("creating Deployment ns/g-decode-1: %w", apierrors.NewInternalError(errors.New("etcd down"))),
		"504":  fmt.Errorf("creating Deployment ns/g-decode-1: %w", apierrors.NewTimeoutError("timed out", 1)),
		"none": errors.New("dial tcp: connection refused"),
		// The namespace lifecycle admission's answer to a create in a namespace being
		// deleted (k8s.io/apiserver plugin/namespace/lifecycle/admission.go).
		"403-terminating": fmt.Errorf("creating Deployment ns/g-decode-1: %w", terminating()),
	}
}

// terminating is the namespace lifecycle admission's refusal, built as it builds it.
func terminating() error {
	err := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "g-decode-1",
		errors.New("unable to create new content in namespace ns because it is being terminated"))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"})
	return err
}

// TestRefusal: which answers are refusals, and how each is reported.
func TestRefusal(t *testing.T) {
	want := map[string]struct {
		reason  string
		stalled bool
	}{
		"422": {v1alpha1.ReasonWriteRefused, true},
		"400": {v1alpha1.ReasonWriteRefused, true},
		"413": {v1alpha1.ReasonWriteRefused, true},
		"403": {v1alpha1.ReasonWriteForbidden, false},
		// Stalled: the namespace goes, with the DGD; nothing is retried.
		"403-terminating": {v1alpha1.ReasonNamespaceTerminating, true},
	}
	for code, err := range refusals() {
		reason, stalled := decide.Refusal(err)
		if w := want[code]; reason != w.reason || stalled != w.stalled {
			t.Errorf("%s: Refusal = %q, %v; want %q, %v", code, reason, stalled, w.reason, w.stalled)
		}
		if code == "422" || code == "413" || code == "403" {
			if apierrors.ReasonForError(err) == metav1.StatusReasonUnknown {
				t.Errorf("%s: the wrapped error lost its status", code)
			}
		}
	}
	if got := apierrors.NewRequestEntityTooLargeError("x").ErrStatus.Code; got != http.StatusRequestEntityTooLarge {
		t.Fatalf("413 is %d", got)
	}
}

// TestConcludeRefused: a pass whose write the API server refused reports it: Ready
// False with the refusal's reason and the error's message (the object and the API
// server's words), Stalled True (400/413/422, rechecked) or Reconciling True (403,
// retried with backoff), a Warning Event once, and the Event of the writes made before
// it; the counts of the last whole pass are kept. The same refusal again writes the
// same status and no Event. A pass whose writes all succeed clears it.
func TestConcludeRefused(t *testing.T) {
	for _, code := range []string{"422", "400", "413", "403"} {
		t.Run(code, func(t *testing.T) {
			err := refusals()[code]
			w := newWorld(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("1", "0").Obj())
			w.settle(t)
			before := w.dgd.Status.DeepCopy()
			newImage(w.dgd)
			w.dgd.Generation++
			d := w.pass(t)
			rep := d.Conclude(decide.Outcome{Progress: []string{"created g-decode-abc"}, Refused: err})
			reason, stalled := decide.Refusal(err)
			if rep.Status == nil {
				t.Fatal("no status")
			}
			ready := meta.FindStatusCondition(rep.Status.Conditions, v1alpha1.ConditionReady)
			if ready.Status != metav1.ConditionFalse || ready.Reason != reason || ready.Message != err.Error() || ready.ObservedGeneration != w.dgd.Generation {
				t.Errorf("Ready %+v", ready)
			}
			if !strings.Contains(ready.Message, "ns/g-") {
				t.Errorf("the message %q names no object", ready.Message)
			}
			wantStalled, wantReconciling := "True/"+reason, "False/"+reason
			if !stalled {
				wantStalled, wantReconciling = "False/"+v1alpha1.ReasonNotStalled, "True/"+reason
			}
			if got := condition(*rep.Status, v1alpha1.ConditionStalled); got != wantStalled {
				t.Errorf("Stalled %s, want %s", got, wantStalled)
			}
			if got := condition(*rep.Status, v1alpha1.ConditionReconciling); got != wantReconciling {
				t.Errorf("Reconciling %s, want %s", got, wantReconciling)
			}
			if rep.Status.ObservedGeneration != w.dgd.Generation || rep.Status.UpdateRevision != before.UpdateRevision || rep.Status.ReadyReplicas != before.ReadyReplicas {
				t.Errorf("status %+v does not keep the last whole pass's counts (%+v) at generation %d", rep.Status, before, w.dgd.Generation)
			}
			var said []string
			for _, e := range rep.Events {
				said = append(said, e.Type+" "+e.Reason+": "+e.Message)
			}
			wantEvents := []string{"Normal " + v1alpha1.EventRolloutStep + ": created g-decode-abc", "Warning " + reason + ": " + err.Error()}
			if strings.Join(said, "\n") != strings.Join(wantEvents, "\n") {
				t.Errorf("events\n%s\nwant\n%s", strings.Join(said, "\n"), strings.Join(wantEvents, "\n"))
			}
			switch {
			case stalled && (rep.Retry != nil || rep.Requeue != decide.ConflictRecheck):
				t.Errorf("stalled: Retry %v, Requeue %v; want none and %v", rep.Retry, rep.Requeue, decide.ConflictRecheck)
			case !stalled && (!errors.Is(rep.Retry, err) || rep.Requeue != 0):
				t.Errorf("retried: Retry %v, Requeue %v; want the refusal and no requeue", rep.Retry, rep.Requeue)
			}

			// Refused after every workload write was made (a Service's create, say): the
			// status counts what the decision made, so it leaves no new workload out.
			after := d.Conclude(decide.Outcome{Made: len(d.Writes), Refused: err})
			if after.Status == nil || after.Status.UpdateRevision != d.Status.UpdateRevision ||
				!reflect.DeepEqual(after.Status.Services, d.Status.Services) || condition(*after.Status, v1alpha1.ConditionReady) != "False/"+reason {
				t.Errorf("refused after the workload writes: status %+v, want the decision's counts and Ready False/%s", after.Status, reason)
			}

			// The same refusal on the next pass: the same status, no Warning again.
			w.dgd.Status = *rep.Status
			w.now = w.now.Add(time.Second)
			again := w.pass(t).Conclude(decide.Outcome{Refused: err})
			if again.Status == nil || condition(*again.Status, v1alpha1.ConditionReady) != "False/"+reason {
				t.Fatalf("again: status %+v", again.Status)
			}
			if len(again.Events) != 0 {
				t.Errorf("again: events %+v, want none (not news)", again.Events)
			}

			// Every write made: the refusal is gone from the conditions.
			w.apply(t, w.pass(t), true)
			w.settle(t)
			for _, c := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionStalled, v1alpha1.ConditionReconciling} {
				if got := condition(w.dgd.Status, c); strings.HasSuffix(got, "/"+reason) {
					t.Errorf("after recovery %s is %s", c, got)
				}
			}
			if got := condition(w.dgd.Status, v1alpha1.ConditionReady); got != "True/"+v1alpha1.ReasonAllReplicasReady {
				t.Errorf("after recovery Ready %s", got)
			}
		})
	}
}
