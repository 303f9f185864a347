package planner_test

import (
	"testing"

	"github.com/dgd-rollout/operator/controllers/planner"
)

func TestReasons(t *testing.T) {
	in := planner.Input{Spec: planner.Spec{Services: pd(4, 2, pct(25), pct(25))}, UpdateRevision: 2,
		Workloads: steady(1, "prefill", 4, "decode", 2)}
	for name, tc := range map[string]struct {
		in    func() planner.Input
		phase planner.Phase
		want  string
	}{
		"moving": {func() planner.Input { return in }, planner.PhaseInProgress,
			"scaling revision 1: prefill 4→3; revision 2: prefill 0→2, decode 0→1"},
		"waiting": {func() planner.Input {
			c := in
			c.Workloads = append(steady(1, "prefill", 3, "decode", 2),
				planner.Workload{Service: "prefill", Revision: 2, Spec: 2, Current: 2},
				planner.Workload{Service: "decode", Revision: 2, Spec: 1, Current: 1})
			return c
		}, planner.PhaseWaiting, "waiting for 2 prefill replicas of revision 2 to become ready"},
		"paused": {func() planner.Input {
			c := in
			c.Spec.Paused = true
			return c
		}, planner.PhasePaused, "paused at revision 1: prefill=4 decode=2; revision 2: prefill=0 decode=0"},
		"completed": {func() planner.Input {
			c := in
			c.UpdateRevision = 1
			return c
		}, planner.PhaseCompleted, "every worker service is at its desired replicas and ready on revision 1"},
	} {
		p := planner.Compute(tc.in())
		if p.Phase != tc.phase || p.Reason != tc.want {
			t.Errorf("%s: got %s %q want %s %q", name, p.Phase, p.Reason, tc.phase, tc.want)
		}
	}
}
