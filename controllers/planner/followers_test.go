package planner

import (
	"math/rand"
	"testing"
)

// TestFollowWorkedExample is the package doc's example: a one-replica frontend follows
// prefill 4 / decode 2 from the old pool to the new one, never 0 ready and at most 2.
func TestFollowWorkedExample(t *testing.T) {
	spec := Spec{Services: []ServiceSpec{
		{Name: "prefill", Replicas: 4, MaxSurge: IntOrPercent{25, true}, MaxUnavailable: IntOrPercent{25, true}, UnreadyFirst: true},
		{Name: "decode", Replicas: 2, MaxSurge: IntOrPercent{25, true}, MaxUnavailable: IntOrPercent{25, true}, UnreadyFirst: true},
	}}
	fe := ServiceSpec{Name: "frontend", Replicas: 1, MaxSurge: IntOrPercent{25, true}, MaxUnavailable: IntOrPercent{25, true}, UnreadyFirst: true}
	for _, tc := range []struct {
		name          string
		old, new      [2]int32 // prefill, decode targets
		feOld, feNew  int32    // the frontend's current replicas (all ready)
		wantOld, want int32
	}{
		{"the first new workers bring the new pool's frontend", [2]int32{3, 2}, [2]int32{2, 1}, 1, 0, 1, 1},
		{"the old pool keeps its frontend while it has workers", [2]int32{1, 1}, [2]int32{4, 2}, 1, 1, 1, 1},
		{"a drained pool loses its frontend whole", [2]int32{0, 0}, [2]int32{4, 2}, 1, 1, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Spec: spec, UpdateRevision: 2}
			plan := Plan{Targets: []Target{{"prefill", 1, tc.old[0]}, {"decode", 1, tc.old[1]}, {"prefill", 2, tc.new[0]}, {"decode", 2, tc.new[1]}}}
			f := Follower{Spec: fe, Workloads: []Workload{{Service: "frontend", Revision: 1, Spec: tc.feOld, Current: tc.feOld, Ready: tc.feOld}}}
			if tc.feNew > 0 {
				f.Workloads = append(f.Workloads, Workload{Service: "frontend", Revision: 2, Spec: tc.feNew, Current: tc.feNew, Ready: tc.feNew})
			}
			got := targetsOf(Follow(in, plan, []Follower{f}), "frontend")
			if got[1] != tc.wantOld || got[2] != tc.want {
				t.Errorf("frontend targets old %d new %d, want %d and %d", got[1], got[2], tc.wantOld, tc.want)
			}
		})
	}
}

func targetsOf(p Plan, service string) map[int64]int32 {
	out := map[int64]int32{}
	for _, t := range p.Targets {
		if t.Service == service {
			out[t.Revision] = t.Replicas
		}
	}
	return out
}

// TestFollowProperties checks Follow over random pools, frontends and budgets: every
// pool with workers has a follower, a drained pool none, no pool above R_f, growth
// within R_f + surge but for each pool's first follower, and the ready followers of pools with
// workers never below min(R_f - unav, what they had), in the worst case of which
// replicas a scale-down removes.
func TestFollowProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for i := range 20000 {
		rf := int32(rng.Intn(6))
		fe := ServiceSpec{Name: "fe", Replicas: rf, MaxSurge: IntOrPercent{int32(rng.Intn(3)), rng.Intn(2) == 0},
			MaxUnavailable: IntOrPercent{int32(rng.Intn(3)), rng.Intn(2) == 0}, UnreadyFirst: rng.Intn(2) == 0}
		if fe.MaxSurge.Percent {
			fe.MaxSurge.Value *= 25
		}
		if fe.MaxUnavailable.Percent {
			fe.MaxUnavailable.Value *= 25
		}
		rw := int32(1 + rng.Intn(6))
		in := Input{Spec: Spec{Services: []ServiceSpec{{Name: "w", Replicas: rw}}}, UpdateRevision: 3}
		var plan Plan
		f := Follower{Spec: fe}
		for rev := int64(1); rev <= 3; rev++ {
			plan.Targets = append(plan.Targets, Target{"w", rev, int32(rng.Intn(int(rw) + 1))})
			if c := int32(rng.Intn(int(rf) + 2)); c > 0 || rng.Intn(2) == 0 {
				f.Workloads = append(f.Workloads, Workload{Service: "fe", Revision: rev, Spec: c, Current: c, Ready: int32(rng.Intn(int(c) + 1))})
			}
		}
		got := targetsOf(Follow(in, plan, []Follower{f}), "fe")
		surge, unav := ResolveBudgets(fe)
		var total, pools, readyBefore, readyAfter int32
		cur := map[int64]Workload{}
		for _, w := range f.Workloads {
			cur[w.Revision] = w
		}
		for _, tg := range plan.Targets {
			n := got[tg.Revision]
			total += n
			w := cur[tg.Revision]
			switch {
			case tg.Replicas > 0 && rf > 0 && n < 1:
				t.Fatalf("case %d: pool %d has %d workers and no follower: %+v -> %v", i, tg.Revision, tg.Replicas, f, got)
			case tg.Replicas == 0 && n != 0:
				t.Fatalf("case %d: drained pool %d keeps %d followers", i, tg.Revision, n)
			case n > max(rf, w.Spec):
				t.Fatalf("case %d: pool %d has %d followers of %d", i, tg.Revision, n, rf)
			}
			if tg.Replicas > 0 {
				pools++
				readyBefore += w.Ready
				after := max(0, w.Ready-max(0, w.Spec-n)) // the highest index goes, ready or not
				if fe.UnreadyFirst {
					after = min(w.Ready, n)
				}
				readyAfter += min(after, w.Ready)
			}
		}
		// Growth stays within R_f + surge but for a pool's first follower.
		var kept, forced int32
		for rev, n := range got {
			c := cur[rev].Spec
			kept += min(c, n)
			if c == 0 && n == 1 {
				forced++
			}
		}
		if total > max(rf+surge, kept+forced) {
			t.Fatalf("case %d: %d followers, above R_f %d + surge %d (%d kept, %d first of their pool): %+v %+v -> %v", i, total, rf, surge, kept, forced, plan.Targets, f.Workloads, got)
		}
		if readyAfter < min(rf-unav, readyBefore) {
			t.Fatalf("case %d: ready followers %d -> %d, below min(%d, %d): %+v -> %v", i, readyBefore, readyAfter, rf-unav, readyBefore, f, got)
		}
	}
}
