package planner_test

import (
	"strings"
	"testing"

	"github.com/dgd-rollout/operator/controllers/planner"
)

func invariantsOf(vs []planner.Violation) string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return strings.Join(out, ",")
}

func TestCheckState(t *testing.T) {
	spec := planner.Spec{Services: pd(4, 2, pct(25), pct(25))}
	for name, tc := range map[string]struct {
		ws   []planner.Workload
		want string
	}{
		"steady":                {steady(1, "prefill", 4, "decode", 2), ""},
		"mid rollout":           {append(steady(1, "prefill", 3, "decode", 2), steady(2, "prefill", 2, "decode", 1)...), ""},
		"surge":                 {append(steady(1, "prefill", 4, "decode", 2), steady(2, "prefill", 2, "decode", 1)...), "surge"},
		"orphan":                {append(steady(1, "prefill", 4, "decode", 2), steady(2, "prefill", 1, "decode", 0)...), "orphan"},
		"ratio":                 {steady(1, "prefill", 1, "decode", 2), "ratio"}, // |1/4 - 2/2| > 1/2
		"missing update decode": {append(steady(1, "prefill", 3, "decode", 2), steady(2, "prefill", 1)...), "orphan"},
	} {
		got := invariantsOf(planner.CheckState(planner.Input{Spec: spec, UpdateRevision: 2, Workloads: tc.ws}))
		if got != tc.want {
			t.Errorf("%s: got %q want %q", name, got, tc.want)
		}
	}
}

func TestCheckAvailability(t *testing.T) {
	spec := planner.Spec{Services: pd(4, 2, pct(25), pct(25))} // floors 3 and 2
	before := steady(1, "prefill", 4, "decode", 2)
	if v := planner.CheckAvailability(spec, before, steady(1, "prefill", 3, "decode", 2)); len(v) != 0 {
		t.Errorf("down to the floor: %v", v)
	}
	if v := planner.CheckAvailability(spec, before, steady(1, "prefill", 2, "decode", 2)); invariantsOf(v) != "availability" {
		t.Errorf("below the floor: %v", v)
	}
	low := steady(1, "prefill", 1, "decode", 2)
	if v := planner.CheckAvailability(spec, low, low); len(v) != 0 {
		t.Errorf("already below the floor and not lower: %v", v)
	}
}

func TestCheckStepAndApply(t *testing.T) {
	in := planner.Input{Spec: planner.Spec{Services: pd(4, 2, pct(25), pct(25))}, UpdateRevision: 2,
		Workloads: steady(1, "prefill", 4, "decode", 2)}
	in.Spec.Services[0].UnreadyFirst = false
	bad := planner.Plan{Targets: []planner.Target{
		{Service: "decode", Revision: 1, Replicas: 0}, {Service: "decode", Revision: 2, Replicas: 1},
		{Service: "prefill", Revision: 1, Replicas: 2}, {Service: "prefill", Revision: 2, Replicas: 4},
	}}
	if got := invariantsOf(planner.CheckStep(in, bad)); got != "surge,orphan,availability,availability" {
		t.Errorf("bad plan: %q", got)
	}
	good := planner.Compute(in)
	if v := planner.CheckStep(in, good); len(v) != 0 {
		t.Errorf("planner's own step: %v", v)
	}
	after := planner.Apply(in, good) // prefill 4→3 without UnreadyFirst: worst case 3 ready
	if after[0].Spec != 3 || after[0].Ready != 3 || after[len(after)-1].Ready != 0 {
		t.Errorf("apply: %+v", after)
	}
	if v := planner.CheckStep(in, planner.Plan{}); invariantsOf(v) != "targets,targets,targets,targets" {
		t.Errorf("missing targets: %v", v)
	}
}
