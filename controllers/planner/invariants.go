package planner

import "fmt"

// Invariant names used in Violation.
const (
	InvariantSurge        = "surge"
	InvariantAvailability = "availability"
	InvariantRatio        = "ratio"
	InvariantOrphan       = "orphan"
	InvariantTargets      = "targets"
)

// Violation is one broken invariant.
type Violation struct {
	Invariant string
	Service   string // "" when about a whole pool
	Revision  int64  // the pool, for ratio, orphan and targets
	Detail    string
}

// String returns "invariant: detail".
func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// CheckState returns every surge, ratio and orphan violation of the replica counts
// set on in.Workloads (their Spec), for an invariant watcher. Surge: Σ_rev spec_s <=
// R_s + surge_s. Ratio and orphan: within each revision, over the services with R > 0
// it holds (the update revision holds every spec service, missing workloads count 0).
func CheckState(in Input) []Violation {
	m := newModel(in)
	spec := func(p *pool) []int64 { return p.spec }
	return append(m.surgeViolations(spec), m.poolViolations(spec)...)
}

// CheckAvailability returns a violation for every service whose ready replicas in
// after are below both its floor R_s - maxUnavailable_s and its ready replicas in
// before (a service already below its floor must not lose ready replicas). Ready
// counts are min(Ready, Spec) per workload, summed over revisions.
func CheckAvailability(spec Spec, before, after []Workload) []Violation {
	rb, ra := readyByService(merge(before)), readyByService(merge(after))
	var out []Violation
	for _, s := range uniqueServices(spec.Services) {
		_, unav := ResolveBudgets(s)
		floor := int64(s.Replicas) - int64(unav)
		if s.Replicas > 0 && ra[s.Name] < floor && ra[s.Name] < rb[s.Name] {
			out = append(out, Violation{Invariant: InvariantAvailability, Service: s.Name, Detail: fmt.Sprintf(
				"%s ready %d→%d, floor %d", s.Name, rb[s.Name], ra[s.Name], floor)})
		}
	}
	return out
}

func readyByService(ws []Workload) map[string]int64 {
	out := map[string]int64{}
	for _, w := range ws {
		out[w.Service] += int64(max(0, min(w.Ready, w.Spec)))
	}
	return out
}

// CheckStep returns every invariant p breaks as the step from in, the planner's
// contract: targets cover every workload of in and every spec service on the update
// revision; applied with Apply's worst-case readiness, availability holds
// (CheckAvailability; not for Recreate); surge holds, or, for a service whose input
// already exceeded R_s + surge_s, none of its workloads grows; every pool that kept
// the ratio and orphan rules in in keeps them.
func CheckStep(in Input, p Plan) []Violation {
	out := checkTargets(in, p)
	after := Apply(in, p)
	m0 := newModel(in)
	m1 := newModel(Input{Spec: in.Spec, UpdateRevision: in.UpdateRevision, Workloads: after})
	spec := func(p *pool) []int64 { return p.spec }
	grew := growingServices(in, p)
	for _, v := range m1.surgeViolations(spec) {
		if len(m0.surgeViolations(spec, v.Service)) == 0 || grew[v.Service] {
			out = append(out, v)
		}
	}
	bad := map[int64]bool{}
	for _, v := range m0.poolViolations(spec) {
		bad[v.Revision] = true
	}
	for _, v := range m1.poolViolations(spec) {
		if !bad[v.Revision] {
			out = append(out, v)
		}
	}
	if in.Spec.Strategy != Recreate {
		out = append(out, CheckAvailability(in.Spec, in.Workloads, after)...)
	}
	return out
}

// growingServices names the services with a target above the workload's spec.
func growingServices(in Input, p Plan) map[string]bool {
	out, ws := map[string]bool{}, merge(in.Workloads)
	for _, t := range p.Targets {
		i := find(ws, t.Service, t.Revision)
		if (i < 0 && t.Replicas > 0) || (i >= 0 && t.Replicas > ws[i].Spec) {
			out[t.Service] = true
		}
	}
	return out
}

// checkTargets verifies that p has exactly the targets Plan.Targets documents.
func checkTargets(in Input, p Plan) []Violation {
	want := map[Target]bool{}
	for _, w := range in.Workloads {
		want[Target{Service: w.Service, Revision: w.Revision}] = true
	}
	for _, s := range in.Spec.Services {
		want[Target{Service: s.Name, Revision: in.UpdateRevision}] = true
	}
	var out []Violation
	bad := func(t Target, why string) {
		out = append(out, Violation{Invariant: InvariantTargets, Service: t.Service, Revision: t.Revision,
			Detail: fmt.Sprintf("%s of revision %d: %s", t.Service, t.Revision, why)})
	}
	for _, t := range p.Targets {
		k := Target{Service: t.Service, Revision: t.Revision}
		if !want[k] {
			bad(t, "unexpected or repeated target")
		}
		if t.Replicas < 0 {
			bad(t, "negative target")
		}
		delete(want, k)
	}
	for k := range want {
		bad(k, "missing target")
	}
	return out
}
