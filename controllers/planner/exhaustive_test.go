package planner_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dgd-rollout/operator/controllers/planner"
)

// exState is a two-service, two-revision state: spec and ready of the workloads
// (a,1) (b,1) (a,2) (b,2), revision 2 being the update revision.
type exState [4]struct{ spec, ready int8 }

var exNames = [4]string{"a", "b", "a", "b"}

func (s exState) input(spec planner.Spec) planner.Input {
	in := planner.Input{Spec: spec, UpdateRevision: 2}
	for i, w := range s {
		n := int32(w.spec)
		in.Workloads = append(in.Workloads, planner.Workload{Service: exNames[i], Revision: int64(1 + i/2),
			Spec: n, Current: n, Ready: int32(w.ready)})
	}
	return in
}

func (s exState) settled() bool {
	for _, w := range s {
		if w.ready != w.spec {
			return false
		}
	}
	return true
}

// successors applies p and branches on what readiness can do next: for each
// workload, the replicas a scale-down keeps ready (UnreadyFirst: min(ready, t);
// otherwise anything from the worst case to that), then any number of its unready
// replicas becoming ready.
func (s exState) successors(p planner.Plan, uf bool) []exState {
	next := []exState{s}
	for i := range s {
		t := int8(targetOf(p, exNames[i], int64(1+i/2)))
		var grown []exState
		for _, n := range next {
			w := n[i]
			r := min(w.ready, w.spec)
			best, worst := min(r, t), max(0, r-(w.spec-t))
			if t >= w.spec {
				best, worst = r, r
			} else if uf {
				worst = best
			}
			for kept := worst; kept <= best; kept++ {
				for ready := kept; ready <= t; ready++ {
					c := n
					c[i].spec, c[i].ready = t, ready
					grown = append(grown, c)
				}
			}
		}
		next = grown
	}
	return next
}

func targetOf(p planner.Plan, service string, rev int64) int32 {
	for _, t := range p.Targets {
		if t.Service == service && t.Revision == rev {
			return t.Replicas
		}
	}
	return -1
}

// exDistance is Σ |count - end count| with the end state of refEnd.
func exDistance(s exState, spec planner.Spec, count func(i int) int) int {
	svcs, hold := refServices(spec), refPartition(spec)
	if (s[0].spec == 0 || svcs["a"].r == 0) && (s[1].spec == 0 || svcs["b"].r == 0) {
		hold = map[string]int{} // no old replica of a service with R > 0: nothing to hold
	}
	d := 0
	for i, name := range exNames {
		want := hold[name]
		if i >= 2 {
			want = svcs[name].r - hold[name]
		}
		d += max(count(i)-want, want-count(i))
	}
	return d
}

func TestExhaustiveTwoServices(t *testing.T) {
	type budget struct{ surge, unav int32 }
	configs := [][2]budget{
		{{1, 0}, {1, 0}}, {{0, 1}, {0, 1}}, {{1, 1}, {1, 1}}, {{2, 1}, {2, 1}},
		{{2, 1}, {1, 2}}, {{1, 0}, {0, 1}}, {{0, 0}, {0, 0}}, // both 0 resolve to surge 1
	}
	var states atomic.Int64
	for ci, c := range configs {
		for _, uf := range []bool{true, false} {
			t.Run(fmt.Sprintf("config%d/uf=%v", ci, uf), func(t *testing.T) {
				t.Parallel()
				for ra := range int32(6) {
					for rb := range int32(6) {
						a := planner.ServiceSpec{Name: "a", Replicas: ra, MaxSurge: num(c[0].surge), MaxUnavailable: num(c[0].unav), UnreadyFirst: uf}
						b := planner.ServiceSpec{Name: "b", Replicas: rb, MaxSurge: num(c[1].surge), MaxUnavailable: num(c[1].unav), UnreadyFirst: uf}
						spec := planner.Spec{Services: []planner.ServiceSpec{a, b}}
						if ci == 3 {
							spec.Partition = &planner.IntOrPercent{Value: 50, Percent: true}
						}
						for oa := range int8(6) {
							for ob := range int8(6) {
								if raceScale > 1 && oa != int8(ra) && ob != int8(rb) {
									continue // under -race: only starts where a service keeps R
								}
								start := exState{{oa, oa}, {ob, ob}}
								states.Add(int64(exploreAll(t, spec, uf, start)))
							}
						}
					}
				}
			})
		}
	}
	t.Cleanup(func() { t.Logf("checked %d reachable states", states.Load()) })
}

// exploreAll walks every state reachable from start, checking each plan with the
// reference checker, and progress at settled states: a strict move toward the end
// state, or Completed / Partitioned, or Blocked only for an infeasible spec.
func exploreAll(t *testing.T, spec planner.Spec, uf bool, start exState) int {
	seen := map[exState]bool{start: true}
	queue := []exState{start}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		in := s.input(spec)
		p := planner.Compute(in)
		if errs := refCheck(in, p); len(errs) > 0 {
			t.Fatalf("%+v from %+v: %v\nplan %s", spec.Services, s, errs, render(p))
		}
		if err := exProgress(s, spec, p); err != nil {
			t.Fatalf("%+v from %+v: %v", spec.Services, s, err)
		}
		for _, n := range s.successors(p, uf) {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return len(seen)
}

func exProgress(s exState, spec planner.Spec, p planner.Plan) error {
	switch p.Phase {
	case planner.PhaseCompleted, planner.PhasePartitioned, planner.PhaseWaiting:
		if s.settled() && p.Phase == planner.PhaseWaiting {
			return fmt.Errorf("waiting with every replica ready: %s", p.Reason)
		}
		return nil
	case planner.PhaseBlocked:
		if !s.settled() || !refInfeasible(s.input(spec)) {
			return fmt.Errorf("blocked on a feasible spec: %s", p.Reason)
		}
		return nil
	}
	before := exDistance(s, spec, func(i int) int { return int(s[i].spec) })
	after := exDistance(s, spec, func(i int) int { return int(targetOf(p, exNames[i], int64(1+i/2))) })
	if after >= before {
		return fmt.Errorf("plan %s does not get closer to the end (%d→%d)", render(p), before, after)
	}
	return nil
}
