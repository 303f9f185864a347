package planner

// Simulate replays a rollout from in: it computes a plan, writes its targets (Spec and
// Current take the target at once: pods appear and vanish instantly), sets every
// workload's Ready to ready(step, w) clamped to [0, Spec] (nil: every replica is ready
// at once), and repeats until a plan is Done, Paused, Partitioned or Blocked, or
// maxSteps plans were made. It returns every plan in order. Plan k was computed from
// the state after step k-1's readiness callback. Tests and benchmarks use it.
func Simulate(in Input, ready func(step int, w Workload) int32, maxSteps int) []Plan {
	cur := in
	cur.Workloads = append([]Workload(nil), in.Workloads...)
	var plans []Plan
	for step := range maxSteps {
		p := Compute(cur)
		plans = append(plans, p)
		if stops(p.Phase) {
			break
		}
		cur.Workloads = writeTargets(cur.Workloads, p.Targets)
		for i := range cur.Workloads {
			w := &cur.Workloads[i]
			r := w.Spec
			if ready != nil {
				r = ready(step, *w)
			}
			w.Ready = max(0, min(r, w.Spec))
		}
	}
	return plans
}

// stops reports the phases no further step can change without a spec change.
func stops(p Phase) bool {
	return p == PhaseCompleted || p == PhasePaused || p == PhasePartitioned || p == PhaseBlocked
}

// writeTargets sets Spec and Current of every targeted workload, creating missing
// ones that get replicas.
func writeTargets(ws []Workload, targets []Target) []Workload {
	for _, t := range targets {
		i := find(ws, t.Service, t.Revision)
		if i < 0 {
			if t.Replicas == 0 {
				continue
			}
			ws = append(ws, Workload{Service: t.Service, Revision: t.Revision})
			i = len(ws) - 1
		}
		ws[i].Spec, ws[i].Current = t.Replicas, t.Replicas
	}
	return ws
}

func find(ws []Workload, service string, rev int64) int {
	for i, w := range ws {
		if w.Service == service && w.Revision == rev {
			return i
		}
	}
	return -1
}
