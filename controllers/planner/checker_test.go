package planner_test

import (
	"fmt"
	"math"
	"slices"

	"github.com/dgd-rollout/operator/controllers/planner"
)

// This file is the tests' own statement of the invariants, written independently of
// the planner's code (floats instead of exact integer cross-products, maps instead of
// vectors), so a bug shared by planner and checker is unlikely.

type refService struct {
	r, surge, unav int
	uf             bool
}

// refServices resolves budgets with float math: percentages round up for surge and
// down for unavailable; both 0 with replicas means surge 1.
func refServices(spec planner.Spec) map[string]refService {
	out := map[string]refService{}
	for _, s := range spec.Services {
		if _, dup := out[s.Name]; dup {
			continue
		}
		r := max(0, int(s.Replicas))
		res := func(v planner.IntOrPercent, up bool) int {
			switch {
			case v.Value <= 0:
				return 0
			case !v.Percent:
				return int(v.Value)
			case up:
				return int(math.Ceil(float64(r)*float64(v.Value)/100 - 1e-9))
			default:
				return int(math.Floor(float64(r)*float64(v.Value)/100 + 1e-9))
			}
		}
		rs := refService{r: r, surge: res(s.MaxSurge, true), unav: res(s.MaxUnavailable, false), uf: s.UnreadyFirst}
		if rs.surge == 0 && rs.unav == 0 && r > 0 {
			rs.surge = 1
		}
		out[s.Name] = rs
	}
	return out
}

type refKey struct {
	svc string
	rev int64
}

// refRow is one (service, revision): the input workload and the plan's target.
type refRow struct {
	refKey
	r, spec, ready, target int // r: R_s of the service
	targeted               bool
}

// refPoolOK checks ratio and orphan over the rows of one revision (active services).
func refPoolOK(rows []refRow, rev int64, count func(refRow) int) bool {
	zero, some := false, false
	for _, a := range rows {
		ra := float64(a.r)
		if a.rev != rev || ra == 0 {
			continue
		}
		zero, some = zero || count(a) == 0, some || count(a) > 0
		for _, b := range rows {
			rb := float64(b.r)
			if b.rev == rev && rb > 0 &&
				math.Abs(float64(count(a))/ra-float64(count(b))/rb) > math.Max(1/ra, 1/rb)+1e-9 {
				return false
			}
		}
	}
	return !(zero && some)
}

// refCheck returns every invariant plan p breaks as the step from in.
func refCheck(in planner.Input, p planner.Plan) []string {
	svcs := refServices(in.Spec)
	var rows []refRow
	find := func(k refKey) int {
		for i := range rows {
			if rows[i].refKey == k {
				return i
			}
		}
		rows = append(rows, refRow{refKey: k})
		return len(rows) - 1
	}
	for _, w := range in.Workloads {
		i := find(refKey{w.Service, w.Revision})
		rows[i].spec += max(0, int(w.Spec))
		rows[i].ready += max(0, int(w.Ready))
	}
	for _, s := range in.Spec.Services {
		find(refKey{s.Name, in.UpdateRevision})
	}
	for i := range rows {
		rows[i].r = svcs[rows[i].svc].r
	}
	errs := refTargets(p, rows)
	for name, s := range svcs {
		if s.r > 0 {
			errs = append(errs, refSurge(name, s, rows)...)
			if in.Spec.Strategy != planner.Recreate {
				errs = append(errs, refAvailability(name, s, rows)...)
			}
		}
	}
	return append(errs, refPools(rows)...)
}

// refTargets fills rows' targets: exactly one per row, none elsewhere, none negative.
func refTargets(p planner.Plan, rows []refRow) []string {
	var errs []string
	for _, t := range p.Targets {
		i := slices.IndexFunc(rows, func(r refRow) bool { return r.refKey == refKey{t.Service, t.Revision} })
		if i < 0 || rows[i].targeted || t.Replicas < 0 {
			errs = append(errs, fmt.Sprintf("bad target %+v", t))
			continue
		}
		rows[i].target, rows[i].targeted = int(t.Replicas), true
	}
	for _, r := range rows {
		if !r.targeted {
			errs = append(errs, fmt.Sprintf("missing target %v", r.refKey))
		}
	}
	return errs
}

func refSurge(name string, s refService, rows []refRow) []string {
	before, after, grew := 0, 0, false
	for _, r := range rows {
		if r.svc == name {
			before += r.spec
			after += r.target
			grew = grew || r.target > r.spec
		}
	}
	limit := s.r + s.surge
	if (before <= limit && after > limit) || (before > limit && grew) {
		return []string{fmt.Sprintf("surge %s: %d→%d replicas, limit %d", name, before, after, limit)}
	}
	return nil
}

// refAvailability: ready after (worst case) >= min(floor, ready before).
func refAvailability(name string, s refService, rows []refRow) []string {
	before, after := 0, 0
	for _, row := range rows {
		if row.svc != name {
			continue
		}
		r, n, t := min(row.ready, row.spec), row.spec, row.target
		before += r
		switch {
		case t >= n:
			after += r
		case s.uf:
			after += min(r, t)
		default:
			after += max(0, r-(n-t))
		}
	}
	floor := s.r - s.unav
	if after < floor && after < before {
		return []string{fmt.Sprintf("availability %s: ready %d→%d, floor %d", name, before, after, floor)}
	}
	return nil
}

// refPools: every revision that satisfied ratio and orphan before must after.
func refPools(rows []refRow) []string {
	var errs []string
	spec := func(r refRow) int { return r.spec }
	target := func(r refRow) int { return r.target }
	for i, r := range rows {
		if slices.IndexFunc(rows, func(o refRow) bool { return o.rev == r.rev }) != i {
			continue // each revision once
		}
		if refPoolOK(rows, r.rev, spec) && !refPoolOK(rows, r.rev, target) {
			errs = append(errs, fmt.Sprintf("ratio/orphan revision %d: %+v", r.rev, rows))
		}
	}
	return errs
}

// refPartition is O_s from ROLLOUT.md with float rounding (half up), plus the
// planner's documented rule: a service of 1 replica with 0 < φ < 1 holds everything.
func refPartition(spec planner.Spec) map[string]int {
	svcs := refServices(spec)
	rmax := 0
	for _, s := range svcs {
		rmax = max(rmax, s.r)
	}
	phi := 0.0
	if p := spec.Partition; p != nil && p.Value > 0 {
		if p.Percent {
			phi = float64(p.Value) / 100
		} else if rmax > 0 {
			phi = float64(p.Value) / float64(rmax)
		}
	}
	out, all := map[string]int{}, false
	for n, s := range svcs {
		switch {
		case s.r == 0 || phi <= 0:
			out[n] = 0
		case phi >= 1:
			out[n] = s.r
		default:
			out[n] = min(s.r-1, max(1, int(math.Floor(float64(s.r)*phi+0.5+1e-9))))
			all = all || s.r == 1
		}
	}
	if all {
		for n, s := range svcs {
			out[n] = s.r
		}
	}
	return out
}
