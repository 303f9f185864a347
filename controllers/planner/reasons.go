package planner

import (
	"fmt"
	"strconv"
	"strings"
)

// split describes the replicas set on every pool, e.g.
// "revision 1: decode=1 prefill=2; revision 2: decode=1 prefill=2".
func (m *model) split() string {
	var parts []string
	for _, p := range m.pools {
		var svcs []string
		for i, s := range m.svcs {
			if p.member[i] && (p.spec[i] > 0 || p.update) {
				svcs = append(svcs, fmt.Sprintf("%s=%d", s.name, p.spec[i]))
			}
		}
		if len(svcs) > 0 {
			parts = append(parts, fmt.Sprintf("revision %d: %s", p.rev, strings.Join(svcs, " ")))
		}
	}
	return strings.Join(parts, "; ")
}

// changes describes the plan's writes, e.g. "revision 1: prefill 4→3; revision 2:
// prefill 0→2, decode 0→1". It runs on every plan, so it avoids fmt.
func (m *model) changes() string {
	var b strings.Builder
	for _, p := range m.pools {
		first := true
		for i, s := range m.svcs {
			if !p.member[i] || p.target[i] == p.spec[i] {
				continue
			}
			switch {
			case !first:
				b.WriteString(", ")
			case b.Len() > 0:
				b.WriteString("; ")
				fallthrough
			default:
				b.WriteString("revision ")
				b.WriteString(strconv.FormatInt(p.rev, 10))
				b.WriteString(": ")
			}
			first = false
			b.WriteString(s.name + " " + strconv.FormatInt(p.spec[i], 10) + "→" + strconv.FormatInt(p.target[i], 10))
		}
	}
	return b.String()
}

// waitingReason names what the rollout waits for: old pods to terminate (Recreate),
// else the first unready workload, update revision first; "" when nothing is pending.
func (m *model) waitingReason() string {
	if m.in.Spec.Strategy == Recreate {
		if n := m.terminating(); n > 0 {
			return fmt.Sprintf("waiting for %d replicas of old revisions to terminate", n)
		}
	}
	order := append([]*pool{m.upd}, m.old()...)
	for _, p := range order {
		for i, s := range m.svcs {
			if n := p.spec[i] - p.ready[i]; n > 0 {
				return fmt.Sprintf("waiting for %d %s replicas of revision %d to become ready", n, s.name, p.rev)
			}
		}
	}
	return ""
}

// blockedReason explains a rollout no step can advance although every replica is
// ready: the budgets cannot be met together with the ratio and orphan rules.
func (m *model) blockedReason() string {
	var budgets []string
	for _, s := range m.svcs {
		if s.active() {
			budgets = append(budgets, fmt.Sprintf("%s R=%d maxSurge=%d maxUnavailable=%d", s.name, s.r, s.surge, s.unav))
		}
	}
	return "no step keeps every service within maxSurge and maxUnavailable while keeping " +
		"each revision's services in ratio; raise maxSurge or maxUnavailable (" +
		strings.Join(budgets, "; ") + "); at " + m.split()
}
