package bench

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// TestP3Smoke runs benchmark P3 end to end at N = 5 in `make test`, so that the
// benchmark cannot rot between `make bench` runs: every arm creates, rolls and deletes
// its graphs on the local control plane, and the DGDs' rollout costs exactly the writes
// this rollout needs. Nothing is timed.
func TestP3Smoke(t *testing.T) {
	const n = 5
	runP3(t, n, 1, 0, p3Unrelated{}, func(r *p3Run) {
		// Per graph (frontend 1, prefill 2, decode 1, maxSurge 1 / maxUnavailable 0):
		// a ControllerRevision; each worker service's new Deployment and its Service
		// created, the old ones deleted once drained; prefill's scaled once each way;
		// three steps; RolloutStarted, a RolloutStep per step, RolloutCompleted. Each
		// graph on its own, not totals over the graphs (one graph's extra write would
		// hide another's missing one).
		want := map[string]int{
			"POST controllerrevisions": 1,
			"POST deployments":         2, "DELETE deployments": 2, "PUT deployments/scale": 2,
			"POST services": 2, "DELETE services": 2,
		}
		wantEvents := slices.Sorted(slices.Values([]string{v1alpha1.EventRolloutStarted, v1alpha1.EventRolloutStep,
			v1alpha1.EventRolloutStep, v1alpha1.EventRolloutStep, v1alpha1.EventRolloutCompleted}))
		// What the operator deleted it knows is gone: its Deleted event is not checked
		// against the API server (backends.OwnDeletes; before, one GET of each retired
		// Deployment, 2.00 a graph in P3 at N = 500).
		if len(r.readsOfDeleted) > 0 {
			t.Errorf("the operator read %d objects past its cache after deleting them itself: %v", len(r.readsOfDeleted), r.readsOfDeleted)
		}
		for i := range n {
			g := fmt.Sprintf("g%04d", i)
			got := r.graphWrites[g]
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %s: %d writes over its rollout, want %d (all: %v)", g, k, got[k], v, got)
				}
			}
			// The five Events above, by reason, compared with their counts and in no order
			// (two Events of one pass may reach the API server either way). The bound
			// loosened to 6 after one run at load 11 is restored: an Event this rollout
			// does not explain fails here, named by its reason.
			if ev := slices.Sorted(slices.Values(r.graphEvents[g])); !slices.Equal(ev, wantEvents) || got["POST events"] != len(wantEvents) {
				t.Errorf("%s: Events over its rollout %v (%d created), want %v", g, ev, got["POST events"], wantEvents)
			}
			if r.graphSteps[g] != 3 {
				t.Errorf("%s: %d rollout steps, want 3", g, r.graphSteps[g])
			}
			// A status write reports each step; readiness that changes between steps may
			// add one.
			if st := got["PUT dynamographdeployments/status"]; st < 3 || st > 5 {
				t.Errorf("%s: %d status writes over its rollout, want 3 to 5", g, st)
			}
		}
		if len(r.graphWrites) != n {
			t.Errorf("writes of %d graphs, want %d: %v", len(r.graphWrites), n, r.graphWrites)
		}
		if r.steps != 3*n {
			t.Errorf("%d rollout steps, want %d", r.steps, 3*n)
		}
		if len(r.gainLatencies) == 0 || len(r.latencies) < len(r.gainLatencies) {
			t.Errorf("readiness changes paired with an operator write: %d, of which gains %d", len(r.latencies), len(r.gainLatencies))
		}
		for arm, c := range map[string]armCost{"plain": r.plainCost, "plain graphs": r.graphCost, "DGDs": r.dgdCost} {
			if c.requests["POST pods"] < float64(n) {
				t.Errorf("%s: the API server's requests over the rollout were not counted (%v)", arm, c.requests)
			}
		}
		if rss, err := r.op.PeakRSS(); err != nil || rss == 0 {
			t.Errorf("the operator's peak RSS: %d, %v", rss, err)
		}
		for name, d := range map[string]time.Duration{"plain create": r.plainCreate, "plain rollout": r.plainRoll,
			"plain graphs create": r.graphCreate, "plain graphs rollout": r.graphRoll, "DGD create": r.dgdCreate, "DGD rollout": r.dgdRoll} {
			if d <= 0 {
				t.Errorf("%s was not measured", name)
			}
		}
	})
}
