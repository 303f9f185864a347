package decide_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/test/harness"
)

// dsHandover is the world observe reports for a DGD Dynamo's operator runs on its
// DisaggregatedSet pathway (controllers/dynamo_disaggregatedset.go): the multinode
// prefill and decode workers are roles of Dynamo's DisaggregatedSet `g` (controlled by
// the DGD; their LeaderWorkerSets controlled by it and labelled only
// disaggregatedset.x-k8s.io/*, so no worker workload of Dynamo's is seen), the frontend
// keeps its DCD and Deployment (dgd_disaggregatedset_auxiliary_dcd_reconciler.go), the
// selected components' DCDs are gone. stopped is Dynamo.Stopped.
func dsHandover(stopped string) *handover {
	h := newHandoverOn(harness.NewDGD("ns", "g").Disagg(2, 2, "img:1").Multinode("prefill", 2).Multinode("decode", 2).Rollout("1", "0").Obj(), stopped, lws.Kind)
	h.backends = map[v1alpha1.BackendType]backends.Description{v1alpha1.BackendDeployment: deployment, v1alpha1.BackendLeaderWorkerSet: lwsBackend}
	for name, w := range h.workloads {
		if w.Backend == decide.DynamoBackend {
			delete(h.workloads, name)
		}
	}
	h.dy.Components = []string{"g-frontend"}
	h.dy.Unsupported = []backends.ObjectRef{{Kind: "DisaggregatedSet", Name: "g", UID: "uid-ds-g"}}
	return h
}

// dynamoDisaggregatedSetCases: golden cases of a DGD on Dynamo's DisaggregatedSet
// pathway, Lease held and Dynamo's operator still active: held, nothing written.
func dynamoDisaggregatedSetCases(t *testing.T) []tcase {
	return []tcase{
		{name: "disaggregatedset-unsupported/lease-held", snap: dsHandover("Lease dynamo-operator-namespace-scope held").snapshot()},
		{name: "disaggregatedset-unsupported/operator-active", snap: dsHandover("").snapshot()},
	}
}

// TestDecideDynamoDisaggregatedSet: a DGD Dynamo's operator runs on its DisaggregatedSet
// pathway is not taken over, Lease held or not: no write, Ready False
// ReasonDynamoTakeOverUnsupported naming the DisaggregatedSet, a recheck within
// DynamoRecheck. Without the hold (Unsupported empty: what observe saw before) the same
// pass writes: ours would run beside Dynamo's DisaggregatedSet, which nothing removes.
func TestDecideDynamoDisaggregatedSet(t *testing.T) {
	for _, stopped := range []string{"", "Lease dynamo-operator-namespace-scope held"} {
		h := dsHandover(stopped)
		d := decide.Decide(h.snapshot())
		if len(d.Writes) != 0 {
			t.Errorf("stopped %q: writes %v, want none", stopped, d.Writes)
		}
		if got := condition(*d.Status, v1alpha1.ConditionReady); got != "False/"+v1alpha1.ReasonDynamoTakeOverUnsupported {
			t.Errorf("stopped %q: Ready %s, want False/%s", stopped, got, v1alpha1.ReasonDynamoTakeOverUnsupported)
		}
		if c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, "DisaggregatedSet g") {
			t.Errorf("stopped %q: Ready %+v does not name Dynamo's DisaggregatedSet", stopped, c)
		}
		if d.Requeue == 0 || d.Requeue > decide.DynamoRecheck {
			t.Errorf("stopped %q: requeue %s, want within %s", stopped, d.Requeue, decide.DynamoRecheck)
		}
	}
	h := dsHandover("Lease dynamo-operator-namespace-scope held")
	h.dy.Unsupported = nil
	if writes := h.pass(t); len(writes) == 0 {
		t.Errorf("without the hold the pass writes nothing: the test shows nothing")
	} else {
		t.Logf("without the hold the first pass writes %v", writes)
	}
}
