package planner_test

import (
	"fmt"
	"math"

	"github.com/dgd-rollout/operator/controllers/planner"
)

// boundK is K = ⌈1/δ⌉ with δ = max(min(u+v, 1), 1/R_max), u = min_s unav_s/R_s and
// v = min_s surge_s/R_s over services with replicas: the fraction of every pool the
// slowest budgets let one settled step move (package doc, "Step bound").
func boundK(spec planner.Spec) int {
	u, v, rmax := math.Inf(1), math.Inf(1), 0
	for _, s := range refServices(spec) {
		if s.r > 0 {
			u = math.Min(u, float64(s.unav)/float64(s.r))
			v = math.Min(v, float64(s.surge)/float64(s.r))
			rmax = max(rmax, s.r)
		}
	}
	if rmax == 0 {
		return 1
	}
	d := math.Max(math.Min(u+v, 1), 1/float64(rmax))
	return int(math.Ceil(1/d - 1e-9))
}

// boundSteps is the documented bound on the plans an event-free rollout takes when
// every new replica is ready within D steps: (K+1)(D+1)+2 for RollingUpdate; for
// Recreate one step to scale down, up to 3 for pods to terminate (the world's
// termination delay), one to scale up, D+1 to become ready.
func boundSteps(sc scenario) int {
	if sc.spec.Strategy == planner.Recreate {
		return sc.maxDelay + 7
	}
	return (boundK(sc.spec)+1)*(sc.maxDelay+1) + 2
}

// checkBound asserts the step bound on event-free rollouts that were not blocked.
func checkBound(sc scenario, out outcome) error {
	if !sc.eventFree || out.phase == planner.PhaseBlocked {
		return nil
	}
	if b := boundSteps(sc); out.steps > b {
		return fmt.Errorf("%d steps (%d moving), bound %d", out.steps, out.active, b)
	}
	return nil
}
