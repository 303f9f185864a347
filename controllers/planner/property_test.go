package planner_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dgd-rollout/operator/controllers/planner"
)

// scenario is one random rollout: a steady old revision 1, the update revision 2,
// and optional events at given steps (-1: never).
type scenario struct {
	seed      int64
	spec      planner.Spec
	old       []int // replicas of revision 1 per service, -1: no workload
	maxDelay  int
	thirdAt   int // a third revision: the update revision becomes intermediate
	pauseAt   int // paused from pauseAt to resumeAt
	resumeAt  int
	lowerAt   int // partition lowered to lowered
	lowered   *planner.IntOrPercent
	scaleAt   int // every R_s replaced by scaled
	scaled    []int32
	eventFree bool
}

func genScenario(seed int64) scenario {
	rng := newRand(seed)
	sc := scenario{seed: seed, maxDelay: rng.Intn(6), thirdAt: -1, pauseAt: -1, resumeAt: -1, lowerAt: -1, scaleAt: -1}
	rmax := []int{5, 9, 65}[rng.Intn(3)]
	roles := []string{planner.RolePrefill, planner.RoleDecode, planner.RoleWorker}
	for i := range 1 + rng.Intn(4) {
		role := roles[rng.Intn(3)]
		r := rng.Intn(rmax)
		sc.spec.Services = append(sc.spec.Services, planner.ServiceSpec{Name: fmt.Sprintf("%s%d", role, i),
			Role: role, Replicas: int32(r), MaxSurge: genBudget(rng), MaxUnavailable: genBudget(rng),
			UnreadyFirst: rng.Intn(2) == 0})
		switch rng.Intn(10) {
		case 0:
			if rng.Intn(2) == 0 {
				r = -1 // a service the old revision does not have
			}
		case 1:
			r = rng.Intn(rmax) // the rollout also changes R_s
		}
		sc.old = append(sc.old, r)
	}
	if rng.Intn(10) == 0 {
		sc.spec.Strategy = planner.Recreate
	}
	sc.spec.Partition = genPartition(rng, rmax)
	genEvents(rng, &sc, rmax)
	return sc
}

// genBudget draws counts, round and odd percentages, so that both-zero budgets
// (resolved to surge 1) occur often.
func genBudget(rng *rand.Rand) planner.IntOrPercent {
	switch rng.Intn(4) {
	case 0:
		return planner.IntOrPercent{Value: int32(rng.Intn(4))}
	case 1:
		return planner.IntOrPercent{Value: []int32{0, 10, 25, 50, 100}[rng.Intn(5)], Percent: true}
	case 2:
		return planner.IntOrPercent{Value: int32(rng.Intn(101)), Percent: true}
	default:
		return planner.IntOrPercent{}
	}
}

func genPartition(rng *rand.Rand, rmax int) *planner.IntOrPercent {
	switch rng.Intn(5) {
	case 0:
		return &planner.IntOrPercent{Value: int32(rng.Intn(rmax + 1))}
	case 1:
		return &planner.IntOrPercent{Value: int32(rng.Intn(101)), Percent: true}
	default:
		return nil
	}
}

func genEvents(rng *rand.Rand, sc *scenario, rmax int) {
	at := func() int { return rng.Intn(25) }
	if rng.Intn(7) == 0 {
		sc.thirdAt = at()
	}
	if rng.Intn(7) == 0 {
		sc.pauseAt = at()
		sc.resumeAt = sc.pauseAt + 1 + rng.Intn(6)
	}
	if sc.spec.Partition != nil && rng.Intn(3) == 0 {
		sc.lowerAt = at()
		if p := *sc.spec.Partition; p.Value > 0 && rng.Intn(2) == 0 {
			p.Value = int32(rng.Intn(int(p.Value)))
			sc.lowered = &p
		}
	}
	if rng.Intn(7) == 0 {
		sc.scaleAt = at()
		for range sc.spec.Services {
			sc.scaled = append(sc.scaled, int32(rng.Intn(rmax)))
		}
	}
	sc.eventFree = sc.thirdAt < 0 && sc.pauseAt < 0 && sc.lowerAt < 0 && sc.scaleAt < 0
}

// outcome summarises one simulated rollout.
type outcome struct {
	steps, active int
	phase         planner.Phase
	last          planner.Input // the input of the final plan
}

// sim runs a scenario step by step against the pod-level world.
type sim struct {
	sc     scenario
	rng    *rand.Rand
	w      *world
	spec   planner.Spec
	upd    int64
	now    int
	fired  map[string]bool
	result outcome
}

func newSim(sc scenario) *sim {
	s := &sim{sc: sc, rng: newRand(sc.seed ^ 0x5eed), w: newWorld(), upd: 2, fired: map[string]bool{}}
	s.spec = sc.spec
	s.spec.Services = append([]planner.ServiceSpec(nil), sc.spec.Services...)
	for i, svc := range sc.spec.Services {
		s.w.uf[svc.Name] = svc.UnreadyFirst
		if sc.old[i] >= 0 {
			s.w.add(svc.Name, 1, sc.old[i])
		}
	}
	return s
}

// fire applies the events due at this step; force fires the next pending one now.
func (s *sim) fire(force bool) bool {
	due := func(name string, at int) bool {
		if at < 0 || s.fired[name] || (at > s.now && !force) {
			return false
		}
		s.fired[name], force = true, false
		return true
	}
	any := false
	if due("third", s.sc.thirdAt) {
		s.upd, any = s.upd+1, true
	}
	if due("pause", s.sc.pauseAt) {
		s.spec.Paused, any = true, true
	}
	if s.fired["pause"] && due("resume", s.sc.resumeAt) {
		s.spec.Paused, any = false, true
	}
	if due("lower", s.sc.lowerAt) {
		s.spec.Partition, any = s.sc.lowered, true
	}
	if due("scale", s.sc.scaleAt) {
		for i := range s.spec.Services {
			s.spec.Services[i].Replicas = s.sc.scaled[i]
		}
		any = true
	}
	return any
}

func (s *sim) input() planner.Input {
	return planner.Input{Spec: s.spec, UpdateRevision: s.upd, Workloads: s.w.observe(s.now)}
}

// run simulates until a terminal plan with no event pending, checking every step.
func (s *sim) run() (outcome, error) {
	for ; s.now < 5000; s.now++ {
		s.fire(false)
		in := s.input()
		p := planner.Compute(in)
		if err := s.check(in, p); err != nil {
			return s.result, err
		}
		s.result.steps++
		if p.Phase == planner.PhaseInProgress {
			s.result.active++
		}
		s.w.write(p, s.now, s.sc.maxDelay, s.rng)
		if p.Phase != planner.PhaseInProgress && p.Phase != planner.PhaseWaiting && !s.fire(true) {
			s.result.phase, s.result.last = p.Phase, in
			return s.result, s.checkEnd(in, p)
		}
	}
	return s.result, fmt.Errorf("no terminal phase after %d steps", s.now)
}

// check asserts the invariants of one step with the reference checker, plus the
// world's actual readiness, pause, and determinism.
func (s *sim) check(in planner.Input, p planner.Plan) error {
	if errs := refCheck(in, p); len(errs) > 0 {
		return fmt.Errorf("step %d: %s\ninput %+v\nplan %+v", s.now, strings.Join(errs, "; "), in, p)
	}
	if in.Spec.Paused && refInProgress(in) {
		if p.Phase != planner.PhasePaused {
			return fmt.Errorf("step %d: paused rollout not reported Paused: %+v", s.now, p)
		}
		// Nothing moves: every target is the replicas its workload has (0 for one that
		// does not exist), whatever the phase says.
		have := map[refKey]int32{}
		for _, w := range in.Workloads {
			have[refKey{w.Service, w.Revision}] += w.Spec
		}
		for _, t := range p.Targets {
			if t.Replicas != have[refKey{t.Service, t.Revision}] {
				return fmt.Errorf("step %d: paused rollout moved %s of revision %d from %d to %d", s.now, t.Service, t.Revision, have[refKey{t.Service, t.Revision}], t.Replicas)
			}
		}
	}
	if s.now%7 == 0 && !reflect.DeepEqual(p, planner.Compute(in)) {
		return fmt.Errorf("step %d: Compute is not deterministic", s.now)
	}
	if p.Phase == planner.PhaseBlocked && !blockedOK(in) {
		return fmt.Errorf("step %d: blocked on a feasible spec: %s\ninput %+v", s.now, p.Reason, in)
	}
	return nil
}

// blockedOK lists the inputs where Blocked is the documented outcome.
func blockedOK(in planner.Input) bool {
	return refInfeasible(in) || refHolderMissing(in) || refTightRetarget(in)
}

// refTightRetarget: two old revisions still hold replicas, some service can only move
// by shrinking first or within its single replica (maxSurge 0 or R = 1) and another
// only by growing first (maxUnavailable 0). Escaping can need an intermediate revision
// to grow back, which the planner never does (package doc, "Progress").
func refTightRetarget(in planner.Input) bool {
	svcs := refServices(in.Spec)
	revs := map[int64]bool{}
	shrinkFirst, growFirst := false, false
	for _, w := range in.Workloads {
		if w.Revision != in.UpdateRevision && w.Spec > 0 && svcs[w.Service].r > 0 {
			revs[w.Revision] = true
		}
	}
	for _, s := range svcs {
		if s.r > 0 {
			shrinkFirst = shrinkFirst || s.surge == 0 || s.r == 1
			growFirst = growFirst || s.unav == 0
		}
	}
	return len(revs) >= 2 && shrinkFirst && growFirst
}

func refInProgress(in planner.Input) bool {
	for _, w := range in.Workloads {
		if w.Revision != in.UpdateRevision && (w.Spec > 0 || w.Current > 0) {
			return true
		}
	}
	return false
}

// refInfeasible is the proven dead end with two revisions: the update revision is
// empty; a service s with R_s = 1 and maxSurge 0 has its replica on the old revision,
// so it cannot be added first (surge) nor leave first (orphan: the old pool would
// hold others without it); and the old pool cannot empty in one step because another
// service t there has maxUnavailable_t < R_t (growing t first does not help: budget
// and the loss needed grow alike). No sequence of valid steps exists.
func refInfeasible(in planner.Input) bool {
	svcs := refServices(in.Spec)
	old, upd := map[string]int{}, 0
	for _, w := range in.Workloads {
		if w.Revision == in.UpdateRevision {
			upd += int(w.Spec)
		} else {
			old[w.Service] += int(w.Spec)
		}
	}
	stuck, blocker := false, false
	for name, s := range svcs {
		stuck = stuck || (s.r == 1 && s.surge == 0 && old[name] >= 1)
		blocker = blocker || (s.r > 0 && old[name] > 0 && s.unav < s.r)
	}
	return upd == 0 && stuck && blocker
}

// refHolderMissing: a partition holds replicas and the oldest old revision holding
// replicas lacks a workload of a service with replicas; the planner refuses the split.
func refHolderMissing(in planner.Input) bool {
	svcs, hold := refServices(in.Spec), refPartition(in.Spec)
	holder, has := int64(-1), map[refKey]bool{}
	for _, w := range in.Workloads {
		has[refKey{w.Service, w.Revision}] = true
		if w.Revision != in.UpdateRevision && svcs[w.Service].r > 0 && w.Spec > 0 && (holder < 0 || w.Revision < holder) {
			holder = w.Revision
		}
	}
	held := false
	for _, h := range hold {
		held = held || h > 0
	}
	for name, s := range svcs {
		if holder >= 0 && held && s.r > 0 && !has[refKey{name, holder}] {
			return true
		}
	}
	return false
}

// checkEnd asserts the final state: every service at R_s on the update revision and
// 0 elsewhere, or exactly the partition split when partitioned.
func (s *sim) checkEnd(in planner.Input, p planner.Plan) error {
	switch p.Phase {
	case planner.PhaseCompleted:
		return refEnd(in, nil)
	case planner.PhasePartitioned:
		return refEnd(in, refPartition(in.Spec))
	case planner.PhaseBlocked:
		return nil // checked in check
	}
	return fmt.Errorf("ended in phase %s: %s", p.Phase, p.Reason)
}

// refEnd checks the update revision holds R_s - O_s (ready) and the oldest old revision
// still holding replicas holds O_s of the services it has, every other old one 0.
func refEnd(in planner.Input, hold map[string]int) error {
	svcs := refServices(in.Spec)
	holder := int64(-1)
	for _, w := range in.Workloads {
		if hold != nil && w.Revision != in.UpdateRevision && svcs[w.Service].r > 0 && w.Spec > 0 &&
			(holder < 0 || w.Revision < holder) {
			holder = w.Revision
		}
	}
	for _, w := range in.Workloads {
		s := svcs[w.Service]
		want := 0
		switch {
		case w.Revision == in.UpdateRevision:
			want = s.r - hold[w.Service]
		case w.Revision == holder && s.r == 0:
			continue // a retired service drains with its pool; the holder does not drain
		case w.Revision == holder:
			want = hold[w.Service]
		}
		if int(w.Spec) != want || (w.Revision == in.UpdateRevision && int(w.Ready) != want) {
			return fmt.Errorf("end state: %+v, want %d (hold %v)", w, want, hold)
		}
	}
	return nil
}

// TestRandomRollouts simulates random rollouts with per-replica readiness delays and
// random events, checking every invariant at every step with the reference checker,
// the exact end state, and (event-free, feasible) the step bound of the package doc.
func TestRandomRollouts(t *testing.T) {
	const shards, perShard = 8, 1300 / raceScale
	var total, partitioned, withEvents atomic.Int64
	var blocked [3]atomic.Int64 // infeasible start, partition without a service, tight retarget
	for shard := range shards {
		t.Run(fmt.Sprintf("shard%d", shard), func(t *testing.T) {
			t.Parallel()
			for i := range perShard {
				sc := genScenario(int64(shard*perShard + i))
				out, err := newSim(sc).run()
				if err != nil {
					t.Fatalf("seed %d %+v: %v", sc.seed, sc, err)
				}
				if err := checkBound(sc, out); err != nil {
					t.Fatalf("seed %d %+v: %v", sc.seed, sc, err)
				}
				total.Add(1)
				if out.phase == planner.PhaseBlocked {
					switch {
					case refInfeasible(out.last):
						blocked[0].Add(1)
					case refHolderMissing(out.last):
						blocked[1].Add(1)
					default:
						blocked[2].Add(1)
					}
				}
				if out.phase == planner.PhasePartitioned {
					partitioned.Add(1)
				}
				if !sc.eventFree {
					withEvents.Add(1)
				}
			}
		})
	}
	t.Cleanup(func() {
		t.Logf("%d random rollouts: %d with events, %d partitioned; blocked: %d infeasible starts, "+
			"%d partitions the base cannot keep, %d tight retargets", total.Load(), withEvents.Load(),
			partitioned.Load(), blocked[0].Load(), blocked[1].Load(), blocked[2].Load())
	})
}

// TestRetargetWithDefaultBudgets: with the default 25%/25% budgets, a third revision
// arriving at any step of a 2-3 service rollout (R 1-8, delays 0-3) never blocks.
func TestRetargetWithDefaultBudgets(t *testing.T) {
	for seed := range int64(3000) {
		rng := newRand(seed)
		sc := scenario{seed: seed, maxDelay: rng.Intn(4), thirdAt: rng.Intn(12),
			pauseAt: -1, resumeAt: -1, lowerAt: -1, scaleAt: -1}
		for i := range 2 + rng.Intn(2) {
			s := svc(fuzzNames[i], int32(1+rng.Intn(8)), pct(25), pct(25))
			s.UnreadyFirst = rng.Intn(2) == 0
			sc.spec.Services = append(sc.spec.Services, s)
			sc.old = append(sc.old, int(s.Replicas))
		}
		out, err := newSim(sc).run()
		if err != nil || out.phase != planner.PhaseCompleted {
			t.Fatalf("seed %d %+v: %v %s", seed, sc, err, out.phase)
		}
	}
}
