package decide_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
)

// TestDecideReadyWhilePaused: a rollout paused while both revisions run with their
// surge (maxSurge 1 on each worker service, every pod ready) says Ready True counting
// the ready replicas against those that exist, with the desired count beside them
// ("7/7 replicas ready (5 desired, ...)"), where it said "7/5 replicas ready" (fails so
// with the old message); settled, status.ready is ready/desired.
func TestDecideReadyWhilePaused(t *testing.T) {
	w := newWorld(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Rollout("1", "0").Obj()) // 5 desired with the frontend
	w.settle(t)
	newImage(w.dgd)
	w.dgd.Generation++
	w.apply(t, w.pass(t), true) // the new revision's surge replica of each worker
	w.dgd.Spec.Rollout.Paused = true
	w.dgd.Generation++
	w.apply(t, w.pass(t), true)
	c := meta.FindStatusCondition(w.dgd.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || !strings.HasPrefix(c.Message, "7/7 replicas ready (5 desired, 2 more while revisions run side by side); rollout held: ") {
		t.Fatalf("paused with the surge: Ready %+v", c)
	}
	w.dgd.Spec.Rollout.Paused = false
	w.dgd.Generation++
	w.settle(t)
	c = meta.FindStatusCondition(w.dgd.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Message != "every service has all its replicas ready on the update revision" {
		t.Fatalf("settled: Ready %+v", c)
	}
	if w.dgd.Status.Ready != "5/5" {
		t.Fatalf("settled: status.ready %q, want 5/5", w.dgd.Status.Ready)
	}
}
