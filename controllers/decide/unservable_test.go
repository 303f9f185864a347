package decide_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// TestUnservableHoldsEverything: a Dynamo upgrade while the traffic provider says no
// split can be served (a parent Gateway that does not exist) starts nothing: no
// prelude, no worker moved, the shared frontend kept; Ready False TrafficNotServing
// names the object in the first pass, with a Warning Event. Once it can be served the
// upgrade goes on to completion.
func TestUnservableHoldsEverything(t *testing.T) {
	w := settledWorld(t, disagg(2, 1).Obj())
	w.agent = true
	const why = "Gateway ns/absent (spec.rollout.trafficRouting.gatewayAPI.parentRefs[0]) not found"
	w.dgd.Annotations = map[string]string{annotationUnservable: why}
	w.edit(upgrade("3"))
	for pass := range 3 {
		said := w.apply(t, w.pass(t), true)
		for _, l := range said {
			if strings.HasPrefix(l, "Ensure") || strings.HasPrefix(l, "Scale") || strings.HasPrefix(l, "DeleteWorkload") {
				t.Errorf("pass %d wrote %q while the cohorts cannot be served", pass, l)
			}
		}
		c := meta.FindStatusCondition(w.dgd.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Reason != v1alpha1.ReasonTrafficNotServing || !strings.Contains(c.Message, why) {
			t.Fatalf("pass %d: Ready %+v, want False TrafficNotServing naming %q", pass, c, why)
		}
		if pass == 0 && !containsPrefix(said, "Event "+v1alpha1.ReasonTrafficNotServing+": ") {
			t.Errorf("pass 0 said %q, want a Warning Event TrafficNotServing", said)
		}
	}
	delete(w.dgd.Annotations, annotationUnservable)
	for pass := 0; pass < 60; pass++ {
		w.step(t, true)
		if ru := w.dgd.Status.RollingUpdate; ru != nil && ru.Phase == v1alpha1.RolloutCompleted && w.dgd.Status.ObservedGeneration == w.dgd.Generation {
			return
		}
	}
	t.Fatalf("not completed once servable: %+v", w.dgd.Status.RollingUpdate)
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
