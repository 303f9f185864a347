package planner

// planRolling fills the targets of one RollingUpdate step (see the package doc):
//
//  0. lockstep: while every pool is inside the open ratio window, step 1 planned
//     within that window; when it moves nothing now but would once the update
//     pool's pending replicas are ready, nothing (wait for them, as DisaggregatedSet
//     waits for every role before the next step). Only when the window cannot move
//     even then do steps 1 to 3 run with the full window;
//  1. step: every pool above its goal shrinks within the availability budget
//     (intermediate revisions newest first, the base only once they are empty, the
//     update pool last), then every pool below its goal grows within the surge room
//     (update pool first);
//  2. if that moves nothing while intermediates hold replicas, the same step with the
//     base allowed to shrink early, kept only if it lets the update pool grow or
//     lowers a service that exceeds R_s + surge_s (R_s was lowered);
//  3. if still nothing moved and every replica is ready, the base absorbs the surge
//     room beyond its goal (absorb).
//
// Retired services then follow their pools.
func (m *model) planRolling() {
	m.setGoals(true)
	if !m.lockstep() {
		m.stepOrEarly()
		if !m.changed() && m.settled() && m.intermediatesHold() {
			m.absorb(m.base, m.surgeRoom())
		}
	}
	m.drainRetired()
}

// lockstep is step 0 of planRolling: it reports whether it planned the step (a move,
// or a wait for the update pool). The open window keeps each pool's roles within
// less than one replica of the smaller service apart (prefill 4 / decode 2: 1/4
// instead of 1/2), so old and new revisions each serve a graph in the configured
// ratio all the way. Every lockstep move is also a step of the full window toward
// the goals, so the progress argument (package doc) is unchanged; a wait lasts only
// until the update pool's replicas are ready, after which the step moves.
func (m *model) lockstep() bool {
	for _, p := range m.pools {
		if !validPool(m.activeMembers(p), m.r, p.spec, 1) {
			return false
		}
	}
	m.strict = 1
	defer func() { m.strict = 0 }()
	if m.step(false); m.changed() {
		return true
	}
	ready := append([]int64(nil), m.upd.ready...)
	copy(m.upd.ready, m.upd.spec)
	m.step(false)
	wait := m.changed()
	copy(m.upd.ready, ready)
	m.reset()
	return wait
}

// stepOrEarly is steps 1 and 2 of planRolling.
func (m *model) stepOrEarly() {
	m.step(false)
	if !m.changed() && m.intermediatesHold() {
		if m.step(true); !m.updateGrew() && m.excess(m.target) >= m.excess(m.spec) {
			m.reset()
		}
	}
}

// step plans shrinks then grows from the current specs; early lets the base shrink
// while intermediates still hold replicas.
func (m *model) step(early bool) {
	m.reset()
	budget := m.availabilityBudgets()
	for _, p := range m.intermediates() {
		m.shrink(p, budget)
	}
	if m.base != nil && (early || !m.intermediatesHold()) {
		m.shrink(m.base, budget)
	}
	m.shrink(m.upd, budget)
	room := m.surgeRoom()
	m.grow(m.upd, room)
	if m.base != nil {
		m.grow(m.base, room)
	}
}

// reset makes every target the current spec.
func (m *model) reset() {
	for _, p := range m.pools {
		copy(p.target, p.spec)
	}
}

// excess is Σ_s max(0, Σ_pools count_s - (R_s + surge_s)) for the chosen counts.
func (m *model) excess(vec func(*pool) []int64) int64 {
	var e int64
	for i, s := range m.svcs {
		if !s.active() {
			continue
		}
		var total int64
		for _, p := range m.pools {
			total += vec(p)[i]
		}
		e += max(0, total-s.r-s.surge)
	}
	return e
}

// updateGrew reports whether the plan grows the update pool.
func (m *model) updateGrew() bool {
	for i := range m.svcs {
		if m.upd.target[i] > m.upd.spec[i] {
			return true
		}
	}
	return false
}

// setGoals decides where every pool ends. The update pool ends at R_s - O_s, the
// base (oldest old pool still holding replicas) at O_s for the services it has,
// every other old pool at 0. Without partition (or for Recreate) O_s = 0.
func (m *model) setGoals(partition bool) {
	m.base = m.oldestHolding()
	var holds map[string]int32
	if m.base != nil && partition && m.in.Spec.Partition != nil {
		holds = PartitionCounts(m.in.Spec)
	}
	for i := range m.svcs {
		m.svcs[i].hold = int64(holds[m.svcs[i].name])
	}
	for _, p := range m.pools {
		for i, s := range m.svcs {
			switch {
			case !s.active():
				p.goal[i] = 0
			case p.update:
				p.goal[i] = s.r - s.hold
			case p == m.base && p.member[i]:
				p.goal[i] = s.hold
			default:
				p.goal[i] = 0
			}
		}
	}
}

// oldestHolding returns the oldest old pool with replicas of an active service.
func (m *model) oldestHolding() *pool {
	for _, p := range m.pools {
		if p.update {
			continue
		}
		for _, i := range m.activeMembers(p) {
			if p.spec[i] > 0 {
				return p
			}
		}
	}
	return nil
}

// availabilityBudgets returns, per service, how many ready replicas this step may
// lose: B_s = max(0, Σ ready_s - (R_s - unav_s)). At 0 only unready replicas may go.
func (m *model) availabilityBudgets() []int64 {
	b := make([]int64, len(m.svcs))
	for i, s := range m.svcs {
		if !s.active() {
			b[i] = unlimited
			continue
		}
		var ready int64
		for _, p := range m.pools {
			ready += p.ready[i]
		}
		b[i] = max(0, ready-(s.r-s.unav))
	}
	return b
}

// intermediates returns the old pools other than the base, newest first.
func (m *model) intermediates() []*pool {
	var out []*pool
	for _, p := range m.old() {
		if p != m.base {
			out = append(out, p)
		}
	}
	return out
}

// intermediatesHold reports whether an intermediate pool keeps active replicas in the
// plan: the base must not shrink before they are gone (ROLLOUT.md: intermediate
// revisions first, old capacity last).
func (m *model) intermediatesHold() bool {
	for _, p := range m.intermediates() {
		for _, i := range m.activeMembers(p) {
			if p.target[i] > 0 {
				return true
			}
		}
	}
	return false
}

// settled reports whether every replica set is ready: nothing is pending.
func (m *model) settled() bool {
	for _, p := range m.pools {
		for i := range m.svcs {
			if p.ready[i] < p.spec[i] {
				return false
			}
		}
	}
	return true
}

// shrink lowers every service of p above its goal as far as the budget allows
// (lo), then raises lo to the least valid pool vector (raise), and charges the
// ready replicas the result may lose.
func (m *model) shrink(p *pool, budget []int64) {
	idx := m.activeMembers(p)
	lo := append([]int64(nil), p.target...)
	for _, i := range idx {
		if p.spec[i] > p.goal[i] {
			lo[i] = max(p.goal[i], minWithin(p.spec[i], p.ready[i], budget[i], m.svcs[i].uf))
		}
	}
	v := raise(idx, m.r, lo, p.target, m.strict)
	for _, i := range idx {
		budget[i] -= readyLoss(p.spec[i], p.ready[i], v[i], m.svcs[i].uf)
		p.target[i] = v[i]
	}
}

// minWithin is the lowest count a workload of spec c and ready r can be scaled to
// while losing at most b ready replicas (worst case when !uf: ready ones go first).
func minWithin(c, r, b int64, uf bool) int64 {
	switch {
	case uf:
		return max(0, r-b)
	case r <= b:
		return 0
	default:
		return c - b
	}
}

// readyLoss is how many ready replicas scaling from c to t may remove (worst case).
func readyLoss(c, r, t int64, uf bool) int64 {
	switch {
	case t >= c:
		return 0
	case uf:
		return max(0, r-t)
	default:
		return min(r, c-t)
	}
}

// surgeRoom returns, per service, how many replicas the grow phase may add:
// R_s + surge_s - Σ targets, or 0 when the input already exceeds R_s + surge_s
// (R_s was lowered): then nothing of that service grows this step.
func (m *model) surgeRoom() []int64 {
	room := make([]int64, len(m.svcs))
	for i, s := range m.svcs {
		if !s.active() {
			continue
		}
		var spec, target int64
		for _, p := range m.pools {
			spec += p.spec[i]
			target += p.target[i]
		}
		if limit := s.r + s.surge; spec <= limit {
			room[i] = max(0, limit-target)
		}
	}
	return room
}

// grow raises every service of p below its goal as far as the room allows (hi), then
// lowers hi to the greatest valid pool vector (lower), and charges the room used.
func (m *model) grow(p *pool, room []int64) {
	idx := m.activeMembers(p)
	hi := append([]int64(nil), p.target...)
	for _, i := range idx {
		if p.target[i] < p.goal[i] {
			hi[i] = min(p.goal[i], p.target[i]+room[i])
		}
	}
	v := lower(idx, m.r, p.target, hi, m.strict)
	for _, i := range idx {
		room[i] -= v[i] - p.target[i]
		p.target[i] = v[i]
	}
}

// absorb grows the base p by the surge room, beyond its goal: a service without
// availability budget (often maxUnavailable 0) may need a surplus ready replica before
// an intermediate pool can go, and the update pool may be unable to take it (orphan
// rule while a maxSurge 0 service has no room). It cannot cycle: intermediates never
// grow, the update pool only moves toward its goal, and the base shrinks back only
// once the intermediates are empty (absorb no longer applies) or in a step that grows
// the update pool; so between two absorbs something finite progressed or the room
// shrank.
func (m *model) absorb(p *pool, room []int64) {
	idx := m.activeMembers(p)
	hi := append([]int64(nil), p.target...)
	for _, i := range idx {
		hi[i] = p.target[i] + room[i]
	}
	v := lower(idx, m.r, p.target, hi, m.strict)
	for _, i := range idx {
		room[i] -= v[i] - p.target[i]
		p.target[i] = v[i]
	}
}

// drainRetired sets retired services (R_s = 0): 0 on the update revision at once; on
// an old revision 0 in the step its active services reach 0, or, for a pool holding
// only retired services, once the update pool is at its goal and ready.
func (m *model) drainRetired() {
	for _, p := range m.pools {
		if !p.update && !m.poolDone(p) {
			continue
		}
		for i, s := range m.svcs {
			if !s.active() && p.member[i] {
				p.target[i] = 0
			}
		}
	}
}

// poolDone reports whether an old pool's retired workloads can go now.
func (m *model) poolDone(p *pool) bool {
	had := false
	for _, i := range m.activeMembers(p) {
		if p.target[i] > 0 {
			return false
		}
		had = had || p.spec[i] > 0
	}
	return had || m.updateSettled()
}

// updateSettled reports whether the update pool is at its goal and ready.
func (m *model) updateSettled() bool {
	for _, i := range m.activeMembers(m.upd) {
		if m.upd.spec[i] != m.upd.goal[i] || m.upd.ready[i] != m.upd.spec[i] {
			return false
		}
	}
	return true
}
