package planner_test

import (
	"testing"

	"github.com/dgd-rollout/operator/controllers/planner"
)

// four64 is a disaggregated graph of 4 services × 64 replicas with default budgets
// (25%/25%: surge 16, unavailable 16), all ready on revision 1.
func four64() planner.Input {
	var in planner.Input
	for _, name := range []string{"prefill", "decode", "worker", "extra"} {
		in.Spec.Services = append(in.Spec.Services, svc(name, 64, pct(25), pct(25)))
		in.Workloads = append(in.Workloads, steady(1, name, 64)...)
	}
	in.UpdateRevision = 2
	return in
}

// BenchmarkCompute plans one step in the middle of a 4×64 rollout with an
// intermediate revision still holding replicas.
func BenchmarkCompute(b *testing.B) {
	in := four64()
	in.UpdateRevision = 3
	for i := range in.Workloads {
		in.Workloads[i].Spec, in.Workloads[i].Current, in.Workloads[i].Ready = 40, 40, 40
		in.Workloads = append(in.Workloads, planner.Workload{Service: in.Workloads[i].Service, Revision: 2, Spec: 12, Current: 12, Ready: 12},
			planner.Workload{Service: in.Workloads[i].Service, Revision: 3, Spec: 16, Current: 16, Ready: 10})
	}
	b.ReportAllocs()
	for b.Loop() {
		planner.Compute(in)
	}
}

// BenchmarkSimulate replays a whole 4×64 rollout (every replica ready by the next step).
func BenchmarkSimulate(b *testing.B) {
	in := four64()
	b.ReportAllocs()
	for b.Loop() {
		if plans := planner.Simulate(in, nil, 1000); !plans[len(plans)-1].Done {
			b.Fatal("rollout did not complete")
		}
	}
}

// BenchmarkSimulateSurgeOne is the slow case: maxSurge 1, maxUnavailable 0.
func BenchmarkSimulateSurgeOne(b *testing.B) {
	in := four64()
	for i := range in.Spec.Services {
		in.Spec.Services[i].MaxSurge, in.Spec.Services[i].MaxUnavailable = num(1), num(0)
	}
	b.ReportAllocs()
	for b.Loop() {
		if plans := planner.Simulate(in, nil, 1000); !plans[len(plans)-1].Done {
			b.Fatal("rollout did not complete")
		}
	}
}
