package planner

// planRecreate scales every old workload to 0 at once and, only when no old replica
// exists any more (Spec and Current 0), sets the update revision to R_s. Until then
// the update revision keeps what it has (never more than R_s). Partition does not
// apply to Recreate, and neither does availability: Recreate accepts the gap.
func (m *model) planRecreate() {
	m.setGoals(false)
	waiting := m.inProgress()
	for _, p := range m.pools {
		for i := range m.svcs {
			switch {
			case !p.update:
				p.target[i] = 0
			case waiting:
				p.target[i] = min(p.spec[i], p.goal[i])
			default:
				p.target[i] = p.goal[i]
			}
		}
	}
}

// terminating counts the replicas of old revisions that still exist.
func (m *model) terminating() int64 {
	var n int64
	for _, p := range m.old() {
		n += sum(p.cur)
	}
	return n
}
