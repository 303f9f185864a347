package planner

import (
	"fmt"
	"slices"
	"strings"
)

// Apply returns in.Workloads after the caller wrote every target of p, with the
// readiness the planner assumes: scaling a workload down from n to t leaves
// min(ready, t) ready replicas when UnreadyFirst, else max(0, ready-(n-t)) (ready =
// min(Ready, Spec)); scaling up adds unready replicas only. Spec becomes the target,
// Current max(Current, target); a target for a missing workload adds it.
func Apply(in Input, p Plan) []Workload {
	ws := merge(in.Workloads)
	uf := map[string]bool{}
	for _, s := range uniqueServices(in.Spec.Services) {
		uf[s.Name] = s.UnreadyFirst
	}
	for _, t := range p.Targets {
		i := find(ws, t.Service, t.Revision)
		if i < 0 {
			ws = append(ws, Workload{Service: t.Service, Revision: t.Revision})
			i = len(ws) - 1
		}
		w := &ws[i]
		spec, tgt := int64(max(w.Spec, 0)), int64(max(t.Replicas, 0))
		r := min(int64(max(w.Ready, 0)), spec)
		w.Ready = int32(r - readyLoss(spec, r, tgt, uf[t.Service]))
		w.Spec, w.Current = t.Replicas, max(w.Current, t.Replicas)
	}
	return ws
}

// merge sums repeated (service, revision) workloads into the first, as the planner
// reads them (callers should not send repeats), clamping counts to >= 0.
func merge(in []Workload) []Workload {
	var out []Workload
	for _, w := range in {
		w.Spec, w.Current, w.Ready = max(w.Spec, 0), max(w.Current, 0), max(w.Ready, 0)
		if i := find(out, w.Service, w.Revision); i >= 0 {
			out[i].Spec += w.Spec
			out[i].Current += w.Current
			out[i].Ready += w.Ready
			continue
		}
		out = append(out, w)
	}
	return out
}

// surgeViolations reports the active services (all, or only those named) whose
// counts summed over revisions exceed R_s + surge_s.
func (m *model) surgeViolations(vec func(*pool) []int64, only ...string) []Violation {
	var out []Violation
	for i, s := range m.svcs {
		if !s.active() || (len(only) > 0 && !slices.Contains(only, s.name)) {
			continue
		}
		var total int64
		for _, p := range m.pools {
			total += vec(p)[i]
		}
		if total > s.r+s.surge {
			out = append(out, Violation{Invariant: InvariantSurge, Service: s.name, Detail: fmt.Sprintf(
				"%s has %d replicas set, more than R=%d + maxSurge=%d", s.name, total, s.r, s.surge)})
		}
	}
	return out
}

// poolViolations reports, per revision, the orphan rule and every pair out of ratio.
func (m *model) poolViolations(vec func(*pool) []int64) []Violation {
	var out []Violation
	for _, p := range m.pools {
		idx, v := m.activeMembers(p), vec(p)
		if d := m.orphanDetail(idx, v); d != "" {
			out = append(out, Violation{Invariant: InvariantOrphan, Revision: p.rev,
				Detail: fmt.Sprintf("revision %d holds %s", p.rev, d)})
		}
		for a, s := range idx {
			for _, t := range idx[a+1:] {
				if !ratioOK(v[s], m.svcs[s].r, v[t], m.svcs[t].r, 0) {
					out = append(out, Violation{Invariant: InvariantRatio, Revision: p.rev, Detail: fmt.Sprintf(
						"revision %d holds %s=%d/%d and %s=%d/%d", p.rev, m.svcs[s].name, v[s], m.svcs[s].r,
						m.svcs[t].name, v[t], m.svcs[t].r)})
				}
			}
		}
	}
	return out
}

// orphanDetail lists the pool's counts when some members are at 0 and others not.
func (m *model) orphanDetail(idx []int, v []int64) string {
	zero, some := false, false
	var parts []string
	for _, i := range idx {
		zero, some = zero || v[i] == 0, some || v[i] > 0
		parts = append(parts, fmt.Sprintf("%s=%d", m.svcs[i].name, v[i]))
	}
	if zero && some {
		return strings.Join(parts, " ")
	}
	return ""
}
