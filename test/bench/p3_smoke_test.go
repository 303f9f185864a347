package bench

import (
	"testing"
	"time"
)

// TestP3Smoke runs benchmark P3 end to end at N = 5 in `make test`, so that the
// benchmark cannot rot between `make bench` runs: every arm creates, rolls and deletes
// its graphs on the local control plane, and the DGDs' rollout costs exactly the writes
// this rollout needs. Nothing is timed.
func TestP3Smoke(t *testing.T) {
	const n = 5
	runP3(t, n, 1, 0, func(r *p3Run) {
		// Per graph (frontend 1, prefill 2, decode 1, maxSurge 1 / maxUnavailable 0):
		// a ControllerRevision; each worker service's new Deployment and its Service
		// created, the old ones deleted once drained; prefill's scaled once each way;
		// three steps; RolloutStarted, a RolloutStep per step, RolloutCompleted.
		want := map[string]int{
			"POST controllerrevisions": n,
			"POST deployments":         2 * n, "DELETE deployments": 2 * n, "PUT deployments/scale": 2 * n,
			"POST services": 2 * n, "DELETE services": 2 * n,
			"POST events": 5 * n,
		}
		for k, v := range want {
			if r.writes[k] != v {
				t.Errorf("%s: %d writes over the DGDs' rollout, want %d (all: %v)", k, r.writes[k], v, r.writes)
			}
		}
		if r.steps != 3*n {
			t.Errorf("%d rollout steps, want %d", r.steps, 3*n)
		}
		// A status write reports each step; readiness that changes between steps may
		// add one.
		if st := r.writes["PUT dynamographdeployments/status"]; st < 3*n || st > 5*n {
			t.Errorf("%d status writes over the rollout, want %d to %d", st, 3*n, 5*n)
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
