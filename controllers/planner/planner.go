package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Compute returns the next step of the rollout described by in. It is pure and
// deterministic: the same input always gives the same plan. Priorities, in order:
// a paused rollout in progress holds; Recreate; a partition the base revision cannot
// keep blocks; otherwise a RollingUpdate step (which also covers first deploys and
// scale-only changes: with no old revision the update revision goes straight to R_s).
func Compute(in Input) Plan {
	m := newModel(in)
	switch {
	case m.frozen():
		m.setGoals(true)
	case in.Spec.Strategy == Recreate:
		m.planRecreate()
	default:
		if m.blocked = m.unkeepablePartition(); m.blocked == "" {
			m.planRolling()
		}
	}
	phase, reason := m.phase()
	return Plan{Targets: m.targets(), Phase: phase, Reason: reason, Done: phase == PhaseCompleted}
}

// unkeepablePartition explains why the partition cannot be held, or returns "". A
// base revision without a workload of some service cannot be a canary split of a
// graph with that service: its update pool would stay below the service's availability
// floor for good, or break the ratio. The rollout holds (Blocked) until the partition
// is set to 0.
func (m *model) unkeepablePartition() string {
	m.setGoals(true)
	if m.base == nil {
		return ""
	}
	held := false
	for _, s := range m.svcs {
		held = held || s.hold > 0
	}
	for _, i := range m.activeMissing(m.base) {
		if held { // with O_s = 0 everywhere nothing is held: a normal rollout
			return fmt.Sprintf("partition cannot be kept: revision %d, which holds the old replicas, has no %s workload; "+
				"set partition to 0 to finish the rollout", m.base.rev, m.svcs[i].name)
		}
	}
	return ""
}

// frozen reports whether Paused holds this input: only a rollout in progress is
// frozen; a first deploy or a scale-only change still scales (as Deployment does).
func (m *model) frozen() bool { return m.in.Spec.Paused && m.inProgress() }

// targets lists the plan, one entry per member workload, sorted.
func (m *model) targets() []Target {
	out := make([]Target, 0, len(m.pools)*len(m.svcs))
	for _, p := range m.pools {
		for i, s := range m.svcs {
			if p.member[i] {
				out = append(out, Target{Service: s.name, Revision: p.rev, Replicas: clamp32(p.target[i])})
			}
		}
	}
	slices.SortFunc(out, func(a, b Target) int {
		return cmp.Or(strings.Compare(a.Service, b.Service), cmp.Compare(a.Revision, b.Revision))
	})
	return out
}

// phase names what the plan does, first match wins.
func (m *model) phase() (Phase, string) {
	switch {
	case m.frozen():
		return PhasePaused, "paused at " + m.split()
	case m.changed():
		return PhaseInProgress, "scaling " + m.changes()
	case m.blocked != "":
		return PhaseBlocked, m.blocked
	case m.complete():
		return PhaseCompleted, fmt.Sprintf("every worker service is at its desired replicas and ready on revision %d", m.upd.rev)
	case m.partitioned():
		return PhasePartitioned, "partition reached: " + m.split()
	}
	if r := m.waitingReason(); r != "" {
		return PhaseWaiting, r
	}
	return PhaseBlocked, m.blockedReason()
}

// changed reports whether any target differs from its workload's spec.
func (m *model) changed() bool {
	for _, p := range m.pools {
		for i := range m.svcs {
			if p.member[i] && p.target[i] != p.spec[i] {
				return true
			}
		}
	}
	return false
}

// complete: old pools empty, the update pool at R_s and ready.
func (m *model) complete() bool {
	for _, p := range m.pools {
		for i, s := range m.svcs {
			want := int64(0)
			if p.update {
				want = s.r
			}
			if p.spec[i] != want || (p.update && p.ready[i] != want) {
				return false
			}
		}
	}
	return true
}

// partitioned: a partition is held and every pool is at its goal, the update pool ready.
func (m *model) partitioned() bool {
	if m.base == nil || m.in.Spec.Strategy == Recreate {
		return false
	}
	held := false
	for _, p := range m.pools {
		for i, s := range m.svcs {
			held = held || (p == m.base && p.goal[i] > 0)
			switch {
			case !s.active() && p == m.base:
			case p.spec[i] != p.goal[i]:
				return false
			case p.update && p.ready[i] != p.spec[i]:
				return false
			}
		}
	}
	return held
}
