package planner_test

import (
	"slices"
	"testing"

	"github.com/dgd-rollout/operator/controllers/planner"
)

// Golden step sequences: every plan of a rollout where each replica is ready by the
// next step (planner.Simulate with nil readiness). Notation per step: revision[counts].
// B_s is the availability budget Σready - (R - unav), room the surge room R + surge - Σ.

func pd(r1, r2 int32, surge, unav planner.IntOrPercent) []planner.ServiceSpec {
	return []planner.ServiceSpec{svc("prefill", r1, surge, unav), svc("decode", r2, surge, unav)}
}

func checkGolden(t *testing.T, in planner.Input, want []string) {
	t.Helper()
	plans := planner.Simulate(in, nil, 100)
	if got := renderAll(plans); !slices.Equal(got, want) {
		t.Fatalf("steps:\n got  %q\n want %q", got, want)
	}
}

func TestGoldenAggregatedWorker(t *testing.T) {
	// R=4, maxSurge 25% → ceil(1)=1, maxUnavailable 25% → floor(1)=1: floor 3, limit 5.
	checkGolden(t, planner.Input{
		Spec:           planner.Spec{Services: []planner.ServiceSpec{svc("worker", 4, pct(25), pct(25))}},
		UpdateRevision: 2, Workloads: steady(1, "worker", 4),
	}, []string{
		"1[worker=3] 2[worker=2]", // B=4-3=1: old 4→3; room=5-3=2: new 0→2
		"1[worker=1] 2[worker=4]", // ready 3+2: B=2: old 3→1; room=5-1-2=2: new 2→4
		"1[worker=0] 2[worker=4]", // ready 1+4: B=2: old 1→0
		"1[worker=0] 2[worker=4] Completed",
	})
}

func TestGoldenDisaggregatedDefaults(t *testing.T) {
	// prefill R=4: surge 1, unav 1 (floor 3, limit 5); decode R=2: 25% → surge
	// ceil(0.5)=1, unav floor(0.5)=0 (floor 2, limit 3). Ratio window max(1/4,1/2)=1/2.
	checkGolden(t, planner.Input{
		Spec: planner.Spec{Services: pd(4, 2, pct(25), pct(25))}, UpdateRevision: 2,
		Workloads: steady(1, "prefill", 4, "decode", 2),
	}, []string{
		// B=(1,0): old (3,2), |3/4-2/2|=1/4 ok; room=(2,1): new (2,1), 2/4=1/2 ✓.
		"1[decode=2 prefill=3] 2[decode=1 prefill=2]",
		// ready (5,3): B=(2,1): old (1,1); room=(5-(1+2), 3-(1+1))=(2,1): new (4,2).
		"1[decode=1 prefill=1] 2[decode=2 prefill=4]",
		// ready (5,3): B=(2,1): old (0,0) — the pool empties in one step.
		"1[decode=0 prefill=0] 2[decode=2 prefill=4]",
		"1[decode=0 prefill=0] 2[decode=2 prefill=4] Completed",
	})
}

func TestGoldenSurgeOnly(t *testing.T) {
	// P=8/D=4, maxSurge 1, maxUnavailable 0: B_s = surplus ready only, limit R+1.
	// Full window max(1/8,1/4)=1/4: |p - 2d| <= 2. Lockstep keeps each pool in the
	// open window, |p/8 - d/4| < 1/4 ⇔ |p - 2d| <= 1, which still lets both roles move
	// one replica per step: the same 10 plans as with the full window.
	checkGolden(t, planner.Input{
		Spec: planner.Spec{Services: pd(8, 4, num(1), num(0))}, UpdateRevision: 2,
		Workloads: steady(1, "prefill", 8, "decode", 4),
	}, []string{
		"1[decode=4 prefill=8] 2[decode=1 prefill=1]", // B=(0,0); room (1,1): new (1,1)
		"1[decode=3 prefill=7] 2[decode=1 prefill=2]", // B=(1,1): old (7,3); room (1,1): new (2,2) has |2-4|=2 → (2,1)
		"1[decode=3 prefill=6] 2[decode=2 prefill=3]", // B=(1,0): old (6,3); room (1,1): new (3,2)
		"1[decode=2 prefill=5] 2[decode=2 prefill=4]", // B=(1,1): old (5,2); new (4,3) has |4-6|=2 → (4,2)
		"1[decode=2 prefill=4] 2[decode=3 prefill=5]",
		"1[decode=1 prefill=3] 2[decode=3 prefill=6]",
		"1[decode=1 prefill=2] 2[decode=4 prefill=7]",
		"1[decode=1 prefill=1] 2[decode=4 prefill=8]", // old (1,0) would orphan → (1,1)
		"1[decode=0 prefill=0] 2[decode=4 prefill=8]", // B=(1,1): the last replicas go together
		"1[decode=0 prefill=0] 2[decode=4 prefill=8] Completed",
	})
}

// TestGoldenLockstepWaitsForEveryRole is P2's shape (prefill 4 gangs, decode 2,
// maxSurge 1, maxUnavailable 0) with decode ready one step before prefill. The full
// window would shrink the old decode as soon as the new one is ready, leaving the old
// pool at (4,1), |4/4 - 1/2| = 1/2; lockstep waits for the new prefill too and then
// moves both roles: no pool ever leaves |p/4 - d/2| <= 1/4.
func TestGoldenLockstepWaitsForEveryRole(t *testing.T) {
	in := planner.Input{Spec: planner.Spec{Services: pd(4, 2, num(1), num(0))}, UpdateRevision: 2,
		Workloads: steady(1, "prefill", 4, "decode", 2)}
	// prefill gangs become ready one step after decode gangs
	got := renderAll(planner.Simulate(in, lagReady(2, map[string]int{"prefill": 1}), 100))
	want := []string{
		"1[decode=2 prefill=4] 2[decode=1 prefill=1]",
		"1[decode=2 prefill=4] 2[decode=1 prefill=1] Waiting", // decode ready, prefill not: wait
		"1[decode=1 prefill=3] 2[decode=1 prefill=2]",
		"1[decode=1 prefill=3] 2[decode=1 prefill=2] Waiting",
		"1[decode=1 prefill=2] 2[decode=2 prefill=3]",
		"1[decode=1 prefill=2] 2[decode=2 prefill=3] Waiting",
		"1[decode=1 prefill=1] 2[decode=2 prefill=4]",
		"1[decode=1 prefill=1] 2[decode=2 prefill=4] Waiting",
		"1[decode=0 prefill=0] 2[decode=2 prefill=4]",
		"1[decode=0 prefill=0] 2[decode=2 prefill=4] Completed",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("steps:\n got  %q\n want %q", got, want)
	}
}

// TestGoldenLockstepFallsBack: decode maxSurge 0 with prefill maxUnavailable 0 leaves
// no move inside the open window even with every replica ready (decode must leave
// the old pool first, which puts it at (4,1)). The full window takes over,
// so budgets never deadlock a rollout that ROLLOUT.md's rule allows.
func TestGoldenLockstepFallsBack(t *testing.T) {
	services := []planner.ServiceSpec{svc("prefill", 4, num(1), num(0)), svc("decode", 2, num(0), num(1))}
	plans := planner.Simulate(planner.Input{Spec: planner.Spec{Services: services}, UpdateRevision: 2,
		Workloads: steady(1, "prefill", 4, "decode", 2)}, nil, 100)
	if got := render(plans[0]); got != "1[decode=1 prefill=4] 2[decode=1 prefill=1]" {
		t.Fatalf("first step: %s", got)
	}
	if last := plans[len(plans)-1]; last.Phase != planner.PhaseCompleted {
		t.Fatalf("did not complete: %q", renderAll(plans))
	}
}

func TestGoldenPartitionHoldThenRelease(t *testing.T) {
	// partition 50%: O = (round(4·0.5), round(2·0.5)) = (2, 1): revision 1 keeps (2,1),
	// revision 2 ends at R-O = (2,1).
	half := pct(50)
	spec := planner.Spec{Services: pd(4, 2, pct(25), pct(25)), Partition: &half}
	plans := planner.Simulate(planner.Input{Spec: spec, UpdateRevision: 2,
		Workloads: steady(1, "prefill", 4, "decode", 2)}, nil, 100)
	want := []string{
		"1[decode=2 prefill=3] 2[decode=1 prefill=2]", // as without partition; new capped at (2,1)
		"1[decode=1 prefill=2] 2[decode=1 prefill=2]", // old stops at O=(2,1)
		"1[decode=1 prefill=2] 2[decode=1 prefill=2] Partitioned",
	}
	if got := renderAll(plans); !slices.Equal(got, want) {
		t.Fatalf("hold: got %q want %q", got, want)
	}
	if p := plans[len(plans)-1]; p.Done || p.Reason == "" {
		t.Fatalf("partitioned plan must not be Done and must say why: %+v", p)
	}
	// Partition 0 (here: nil) completes from the held split: ready (4,2), B=(1,0).
	checkGolden(t, planner.Input{Spec: planner.Spec{Services: pd(4, 2, pct(25), pct(25))}, UpdateRevision: 2,
		Workloads: append(steady(1, "prefill", 2, "decode", 1), steady(2, "prefill", 2, "decode", 1)...),
	}, []string{
		"1[decode=1 prefill=1] 2[decode=2 prefill=4]", // old (1,1); room (5-3, 3-2)=(2,1): new (4,2)
		"1[decode=0 prefill=0] 2[decode=2 prefill=4]",
		"1[decode=0 prefill=0] 2[decode=2 prefill=4] Completed",
	})
}

func TestGoldenRecreate(t *testing.T) {
	// Old to 0 at once; the update revision starts once no old pod exists (Simulate
	// removes pods at once, so that is the next step).
	checkGolden(t, planner.Input{
		Spec:           planner.Spec{Strategy: planner.Recreate, Services: pd(4, 2, pct(25), pct(25))},
		UpdateRevision: 2, Workloads: steady(1, "prefill", 4, "decode", 2),
	}, []string{
		"1[decode=0 prefill=0] 2[decode=0 prefill=0]",
		"1[decode=0 prefill=0] 2[decode=2 prefill=4]",
		"1[decode=0 prefill=0] 2[decode=2 prefill=4] Completed",
	})
	// While old pods terminate, nothing starts.
	in := planner.Input{Spec: planner.Spec{Strategy: planner.Recreate, Services: pd(4, 2, pct(25), pct(25))},
		UpdateRevision: 2, Workloads: []planner.Workload{{Service: "prefill", Revision: 1, Current: 2}}}
	if p := planner.Compute(in); p.Phase != planner.PhaseWaiting || render(p) != "1[prefill=0] 2[decode=0 prefill=0] Waiting" {
		t.Fatalf("terminating: %s (%s)", render(p), p.Reason)
	}
}

func TestGoldenRetarget(t *testing.T) {
	// A→B→C: revision 2 (B) was mid-rollout when revision 3 (C) appeared. B is drained
	// first; A (the base) only starts once B is empty.
	// P=4/D=2 defaults, A=(3,2), B=(2,1) ready: B=(5-3, 3-2)=(2,1) = B's whole pool.
	checkGolden(t, planner.Input{
		Spec: planner.Spec{Services: pd(4, 2, pct(25), pct(25))}, UpdateRevision: 3,
		Workloads: append(steady(1, "prefill", 3, "decode", 2), steady(2, "prefill", 2, "decode", 1)...),
	}, []string{
		"1[decode=2 prefill=3] 2[decode=0 prefill=0] 3[decode=1 prefill=2]", // room (5-3, 3-2)=(2,1)
		"1[decode=1 prefill=1] 2[decode=0 prefill=0] 3[decode=2 prefill=4]",
		"1[decode=0 prefill=0] 2[decode=0 prefill=0] 3[decode=2 prefill=4]",
		"1[decode=0 prefill=0] 2[decode=0 prefill=0] 3[decode=2 prefill=4] Completed",
	})
	// P=8/D=4 maxSurge 1 maxUnavailable 0: A=(6,3), B=(3,2). B needs surplus ready
	// replicas to shrink, so C grows first; A stays untouched until B is gone. From
	// there each pool stays in the open window (|p - 2d| <= 1), as in TestGoldenSurgeOnly.
	checkGolden(t, planner.Input{
		Spec: planner.Spec{Services: pd(8, 4, num(1), num(0))}, UpdateRevision: 3,
		Workloads: append(steady(1, "prefill", 6, "decode", 3), steady(2, "prefill", 3, "decode", 1)...),
	}, []string{
		"1[decode=3 prefill=6] 2[decode=1 prefill=2] 3[decode=1 prefill=1]", // B=(9-8, 4-4)=(1,0): B (3,1)→(2,1); room (1,1)
		"1[decode=3 prefill=6] 2[decode=1 prefill=1] 3[decode=1 prefill=2]",
		"1[decode=3 prefill=6] 2[decode=0 prefill=0] 3[decode=2 prefill=3]", // B empties
		"1[decode=2 prefill=5] 2[decode=0 prefill=0] 3[decode=2 prefill=4]", // now A shrinks
		"1[decode=2 prefill=4] 2[decode=0 prefill=0] 3[decode=3 prefill=5]",
		"1[decode=1 prefill=3] 2[decode=0 prefill=0] 3[decode=3 prefill=6]",
		"1[decode=1 prefill=2] 2[decode=0 prefill=0] 3[decode=4 prefill=7]",
		"1[decode=1 prefill=1] 2[decode=0 prefill=0] 3[decode=4 prefill=8]",
		"1[decode=0 prefill=0] 2[decode=0 prefill=0] 3[decode=4 prefill=8]",
		"1[decode=0 prefill=0] 2[decode=0 prefill=0] 3[decode=4 prefill=8] Completed",
	})
}

func TestGoldenPausedMidRollout(t *testing.T) {
	mid := append(steady(1, "prefill", 3, "decode", 2), steady(2, "prefill", 2)...)
	mid = append(mid, planner.Workload{Service: "decode", Revision: 2, Spec: 1, Current: 1})
	in := planner.Input{Spec: planner.Spec{Services: pd(4, 2, pct(25), pct(25)), Paused: true},
		UpdateRevision: 2, Workloads: mid}
	p := planner.Compute(in)
	if p.Phase != planner.PhasePaused || render(p) != "1[decode=2 prefill=3] 2[decode=1 prefill=2] Paused" {
		t.Fatalf("paused: %s", render(p))
	}
	in.Spec.Paused = false
	in.Workloads[3].Ready = 1 // resumed, the last new replica ready: the rollout continues
	if p := planner.Compute(in); render(p) != "1[decode=1 prefill=1] 2[decode=2 prefill=4]" {
		t.Fatalf("resumed: %s", render(p))
	}
}

func TestGoldenNoRollout(t *testing.T) {
	services := pd(4, 2, pct(25), pct(25))
	for name, tc := range map[string]struct {
		in   planner.Input
		want string
	}{
		"first deploy goes straight to R": {
			planner.Input{Spec: planner.Spec{Services: services}, UpdateRevision: 1},
			"1[decode=2 prefill=4]"},
		"a paused first deploy still creates": {
			planner.Input{Spec: planner.Spec{Services: services, Paused: true}, UpdateRevision: 1},
			"1[decode=2 prefill=4]"},
		"a partition on a first deploy holds nothing": {
			planner.Input{Spec: planner.Spec{Services: services, Partition: &planner.IntOrPercent{Value: 50, Percent: true}}, UpdateRevision: 1},
			"1[decode=2 prefill=4]"},
		"scale-only change sets R at once": {
			planner.Input{Spec: planner.Spec{Services: pd(8, 1, pct(25), pct(25))}, UpdateRevision: 1,
				Workloads: steady(1, "prefill", 4, "decode", 2)},
			"1[decode=1 prefill=8]"},
		"a retired service drains with its pool": {
			planner.Input{Spec: planner.Spec{Services: []planner.ServiceSpec{svc("worker", 2, pct(25), pct(25))}}, UpdateRevision: 2,
				Workloads: append(steady(1, "worker", 2, "prefill", 1), steady(2, "worker", 2)...)},
			"1[prefill=0 worker=0] 2[worker=2]"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := render(planner.Compute(tc.in)); got != tc.want {
				t.Fatalf("got %s want %s", got, tc.want)
			}
		})
	}
}

func TestGoldenBlocked(t *testing.T) {
	// prefill R=1 maxSurge 0: it must leave revision 1 before revision 2 can hold one
	// (surge), and revision 1 cannot lose it while holding decode (orphan), nor lose
	// decode (maxUnavailable 0). No sequence of steps exists.
	tight := []planner.ServiceSpec{svc("prefill", 1, num(0), num(1)), svc("decode", 2, num(1), num(0))}
	p := planner.Compute(planner.Input{Spec: planner.Spec{Services: tight}, UpdateRevision: 2,
		Workloads: steady(1, "prefill", 1, "decode", 2)})
	if p.Phase != planner.PhaseBlocked || render(p) != "1[decode=2 prefill=1] 2[decode=0 prefill=0] Blocked" {
		t.Fatalf("tight budgets: %s", render(p))
	}
	// A partition cannot be kept by a revision that lacks a service.
	half := pct(50)
	p = planner.Compute(planner.Input{Spec: planner.Spec{Services: pd(4, 2, pct(25), pct(25)), Partition: &half},
		UpdateRevision: 2, Workloads: steady(1, "prefill", 4)})
	if p.Phase != planner.PhaseBlocked || render(p) != "1[prefill=4] 2[decode=0 prefill=0] Blocked" {
		t.Fatalf("partition without decode: %s (%s)", render(p), p.Reason)
	}
}

func TestGoldenPartitionRaised(t *testing.T) {
	// Held at 50% = (2,1)/(2,1), the partition rises to 75%: O = (round(3), round(1.5)
	// clamped to R-1) = (3,1), so the update pool's goal is (1,1). B_prefill = 4-3 = 1:
	// update prefill 2→1; room_prefill = 5-(2+1) = 2: base prefill 2→3.
	three := pct(75)
	checkGolden(t, planner.Input{
		Spec:           planner.Spec{Services: pd(4, 2, pct(25), pct(25)), Partition: &three},
		UpdateRevision: 2,
		Workloads:      append(steady(1, "prefill", 2, "decode", 1), steady(2, "prefill", 2, "decode", 1)...),
	}, []string{
		"1[decode=1 prefill=3] 2[decode=1 prefill=1]",
		"1[decode=1 prefill=3] 2[decode=1 prefill=1] Partitioned",
	})
}
