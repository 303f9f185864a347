package planner_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/dgd-rollout/operator/controllers/planner"
)

// lagReady makes every replica of the update revision ready lag[service] steps after
// the step that set it (old replicas are ready): readiness for planner.Simulate.
func lagReady(upd int64, lag map[string]int) func(step int, w planner.Workload) int32 {
	born := map[string]int{}
	return func(step int, w planner.Workload) int32 {
		if w.Revision != upd {
			return w.Spec
		}
		var n int32
		for i := int32(1); i <= w.Spec; i++ {
			k := fmt.Sprintf("%s/%d", w.Service, i)
			if _, ok := born[k]; !ok {
				born[k] = step
			}
			if step-born[k] >= lag[w.Service] {
				n++
			}
		}
		return n
	}
}

// openWindow reports the first pool of plan p that leaves the lockstep window:
// |n_s/R_s - n_t/R_t| < max(1/R_s, 1/R_t) for every two services of the pool.
func openWindow(spec planner.Spec, p planner.Plan) error {
	r := map[string]int64{}
	for _, s := range spec.Services {
		r[s.Name] = int64(s.Replicas)
	}
	pools := map[int64]map[string]int64{}
	for _, t := range p.Targets {
		if pools[t.Revision] == nil {
			pools[t.Revision] = map[string]int64{}
		}
		pools[t.Revision][t.Service] = int64(t.Replicas)
	}
	for rev, n := range pools {
		for s, a := range n {
			for t, b := range n {
				d := a*r[t] - b*r[s]
				if s < t && max(d, -d) >= max(r[s], r[t]) {
					return fmt.Errorf("revision %d: %s=%d/%d %s=%d/%d", rev, s, a, r[s], t, b, r[t])
				}
			}
		}
	}
	return nil
}

// TestLockstepHolds: in a two-revision rollout where every service may surge (the
// default 25% does for every R >= 1) and its new replicas become ready after random,
// per-service delays, every plan keeps both pools inside the open ratio window (for
// prefill 4 / decode 2: within 1/4, where ROLLOUT.md allows 1/2), and the rollout
// completes within the step bound.
func TestLockstepHolds(t *testing.T) {
	const runs = 3000
	for seed := range int64(runs) {
		rng := newRand(seed)
		var spec planner.Spec
		var old []planner.Workload
		lag := map[string]int{}
		for i := range 2 + rng.Intn(3) {
			name := []string{"prefill", "decode", "worker"}[i%3] + fmt.Sprint(i)
			r := int32(1 + rng.Intn(16))
			spec.Services = append(spec.Services, planner.ServiceSpec{Name: name, Replicas: r,
				MaxSurge: surgeBudget(rng), MaxUnavailable: genBudget(rng), UnreadyFirst: rng.Intn(2) == 0})
			old = append(old, steady(1, name, int(r))...)
			lag[name] = rng.Intn(4)
		}
		in := planner.Input{Spec: spec, UpdateRevision: 2, Workloads: old}
		plans := planner.Simulate(in, lagReady(2, lag), 500)
		for k, p := range plans {
			if err := openWindow(spec, p); err != nil {
				t.Fatalf("seed %d step %d: %v\nspec %+v\nplans %q", seed, k, err, spec.Services, renderAll(plans))
			}
		}
		if last := plans[len(plans)-1]; last.Phase != planner.PhaseCompleted {
			t.Fatalf("seed %d ended %s: %s\nplans %q", seed, last.Phase, last.Reason, renderAll(plans))
		}
	}
}

// surgeBudget draws a maxSurge that resolves to at least one replica.
func surgeBudget(rng *rand.Rand) planner.IntOrPercent {
	if rng.Intn(2) == 0 {
		return num(int32(1 + rng.Intn(3)))
	}
	return pct(int32(1 + rng.Intn(100)))
}
