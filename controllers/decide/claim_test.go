package decide_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/harness"
)

// TestDecideClaim: a name the DGD would create an object under that another object
// holds (another DGD's frontend Deployment and Service, as "llm" with a service
// "prefill-fe" and "llm-prefill" with "fe") stops the pass before any write, with
// NameConflict naming each object and its controller; a name the DGD's own object
// holds (a create the cache does not show yet) does not; once the name is free the
// DGD deploys.
func TestDecideClaim(t *testing.T) {
	other := &metav1.OwnerReference{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeployment", Name: "llm", UID: "other", Controller: ptrTrue()}
	w := newWorld(harness.NewDGD("ns", "g").Disagg(1, 1, "img:1").Obj())
	w.dgd.UID = "mine"
	w.foreign = map[decide.ObjectName]decide.Holder{
		{Kind: "Deployment", Name: "g-frontend"}: {Exists: true, Controller: other},
		{Kind: "Service", Name: "g-frontend"}:    {Exists: true, Controller: other},
		{Kind: "Role", Name: "g-k8s-service-discovery-role"}: {Exists: true,
			Controller: &metav1.OwnerReference{Kind: "DynamoGraphDeployment", Name: "g", UID: types.UID("mine"), Controller: ptrTrue()}},
	}
	d := w.pass(t)
	if len(d.Writes) != 0 {
		t.Fatalf("writes %v, want none before the names are free", d.Writes)
	}
	rep := d.Conclude(decide.Outcome{})
	if got := condition(*rep.Status, v1alpha1.ConditionReady); got != "False/"+v1alpha1.ReasonNameConflict {
		t.Fatalf("Ready %s", got)
	}
	if got := condition(*rep.Status, v1alpha1.ConditionStalled); got != "True/"+v1alpha1.ReasonNameConflict {
		t.Errorf("Stalled %s", got)
	}
	msg := rep.Events[0].Message
	for _, want := range []string{
		"Deployment ns/g-frontend exists and is controlled by DynamoGraphDeployment llm, not by DynamoGraphDeployment g",
		"Service ns/g-frontend exists and is controlled by DynamoGraphDeployment llm",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "Role") {
		t.Errorf("the DGD's own Role is reported: %q", msg)
	}
	if rep.Events[0].Type != "Warning" || rep.Requeue != decide.ConflictRecheck {
		t.Errorf("event %+v requeue %v", rep.Events[0], rep.Requeue)
	}
	w.apply(t, d, true)

	// The other DGD's objects gone: the DGD deploys and settles Ready.
	w.foreign = nil
	w.settle(t)
	if got := condition(w.dgd.Status, v1alpha1.ConditionReady); got != "True/"+v1alpha1.ReasonAllReplicasReady {
		t.Fatalf("after the names are free Ready %s", got)
	}
	if _, ok := w.workloads["g-frontend"]; !ok {
		t.Fatalf("g-frontend not created: %v", sortedStrings(w.workloads))
	}
}

func ptrTrue() *bool { b := true; return &b }
