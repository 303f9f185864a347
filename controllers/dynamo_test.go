package controllers

import (
	"testing"

	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// An older Dynamo ran one LeaderWorkerSet per replica (`<dcd>-0`, `<dcd>-1`), all of one
// (component, worker hash): the key's pods (3 gangs, one terminating) are counted once
// over them, not once each, as the planner sums a revision's workloads.
func TestSharePods(t *testing.T) {
	key := backends.Key{Service: "decode", Hash: "d1a2b3c4"}
	w := func(name string, current int32) decide.Workload {
		return decide.Workload{Backend: decide.DynamoBackend, Pods: 3, Workload: backends.Workload{Key: key, Kind: lws.Kind, Name: name, Current: current}}
	}
	other := decide.Workload{Backend: decide.DynamoBackend, Pods: 2, Workload: backends.Workload{Key: backends.Key{Service: "prefill", Hash: "d1a2b3c4"}, Name: "p-0", Current: 2}}
	ws := []decide.Workload{w("g-decode-d1a2b3c4-1", 1), other, w("g-decode-d1a2b3c4-0", 1)}
	sharePods(ws)
	if ws[2].Pods != 2 || ws[0].Pods != 1 || ws[1].Pods != 2 {
		t.Errorf("pods %d (-0), %d (-1), %d (prefill): want 2 (its own and the terminating one), 1, 2 (alone, unchanged)", ws[2].Pods, ws[0].Pods, ws[1].Pods)
	}
}
