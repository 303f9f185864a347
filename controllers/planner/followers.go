package planner

import "sort"

// Followers. In cohort form every worker revision has its own frontends (a cohort's
// frontend discovers only its revision's workers), so a frontend service moves with
// the pools the plan moves, but it cannot be one more service of the lockstep: a
// frontend of one replica would make every partition impossible (PartitionCounts holds
// all when some R_s = 1), and a pool needs a frontend from its first worker on, or its
// workers are unroutable. A follower is such a service: its replicas in each pool
// follow the pool's workers.
//
// For each pool p (a revision) the plan's worker targets t_s,p give the pool's share
//
//	x_p = max_s t_s,p / R_s           over the worker services with R_s > 0
//
// and the follower wants w_p = 0 when x_p = 0 (a drained pool), else
// min(R_f, max(1, ⌈R_f·x_p⌉)): every pool with workers keeps a follower. From its
// current counts c_p (ready r_p), under its own budgets (ResolveBudgets):
//
//	shrink  pools with x_p > 0 lose at most B = max(0, Σ_{x>0} r - (R_f - unav_f))
//	        ready replicas (the worst case of UnreadyFirst, as for workers); a drained
//	        pool (x_p = 0) loses its followers whole: it takes no traffic (the caller
//	        removes it only once its traffic has drained)
//	grow    within ρ = R_f + surge_f - Σ targets, pools the plan grows first (the
//	        update pool); a pool with workers and no follower always gets one, even past
//	        the surge budget
//
// Worked example, R_f = 1 (surge 1, unav 0), prefill 4 / decode 2: the update pool
// starts with (1,1) of the workers, x = 1/2, w = 1, ρ = 1 + 1 - 1 = 1: it gets its
// frontend with its first workers; the old pool keeps its one (x > 0) until the plan
// drains it, then loses it whole. At most 2 frontends, never 0 ready.
type Follower struct {
	// Spec is the follower service (its replicas and budgets).
	Spec ServiceSpec
	// Workloads are its observed workloads, by revision.
	Workloads []Workload
}

// Follow returns plan with the targets of every follower added, computed from the
// plan's worker targets (in is the plan's input). It is pure.
func Follow(in Input, plan Plan, followers []Follower) Plan {
	if len(followers) == 0 {
		return plan
	}
	share := poolShares(in, plan)
	out := plan
	out.Targets = append([]Target(nil), plan.Targets...)
	for _, f := range followers {
		out.Targets = append(out.Targets, followerTargets(in, f, share)...)
	}
	sort.Slice(out.Targets, func(i, j int) bool {
		a, b := out.Targets[i], out.Targets[j]
		return a.Service < b.Service || a.Service == b.Service && a.Revision < b.Revision
	})
	return out
}

// poolShares are x_p of every pool with a target, by revision.
func poolShares(in Input, plan Plan) map[int64]float64 {
	desired := map[string]int32{}
	for _, s := range in.Spec.Services {
		desired[s.Name] = max(s.Replicas, 0)
	}
	out := map[int64]float64{}
	for _, t := range plan.Targets {
		if _, ok := out[t.Revision]; !ok {
			out[t.Revision] = 0
		}
		if r := desired[t.Service]; r > 0 {
			out[t.Revision] = max(out[t.Revision], float64(t.Replicas)/float64(r))
		}
	}
	return out
}

// followerTargets are one follower's targets: wanted per pool, then budgets.
func followerTargets(in Input, f Follower, share map[int64]float64) []Target {
	rf := max(f.Spec.Replicas, 0)
	surge, unav := ResolveBudgets(f.Spec)
	cur, ready := map[int64]int32{}, map[int64]int32{}
	for _, w := range f.Workloads {
		cur[w.Revision] += w.Spec
		ready[w.Revision] += min(w.Ready, w.Spec)
	}
	revs := map[int64]bool{}
	for r := range share {
		revs[r] = true
	}
	for r := range cur {
		revs[r] = true
	}
	want := map[int64]int32{}
	for r := range revs {
		want[r] = wantFollowers(rf, share[r])
	}
	target := shrinkFollowers(f, cur, ready, want, rf-unav)
	growFollowers(in, target, want, share, rf+surge)
	out := make([]Target, 0, len(target))
	for r, n := range target {
		out = append(out, Target{Service: f.Spec.Name, Revision: r, Replicas: n})
	}
	return out
}

// wantFollowers is w_p for a pool of share x.
func wantFollowers(rf int32, x float64) int32 {
	if x <= 0 || rf == 0 {
		return 0
	}
	n := int32(float64(rf)*x + 0.999999999)
	return min(rf, max(1, n))
}

// shrinkFollowers lowers the pools above their want within the availability budget,
// drained pools whole; pools not above their want keep their count.
func shrinkFollowers(f Follower, cur, ready, want map[int64]int32, floor int32) map[int64]int32 {
	target := map[int64]int32{}
	var live int32
	for r, c := range cur {
		target[r] = c
		if want[r] > 0 {
			live += min(ready[r], c)
		}
	}
	budget := max(0, live-floor)
	for _, r := range sortedRevs(cur) {
		c, rd, w := cur[r], min(ready[r], cur[r]), want[r]
		switch {
		case w == 0:
			target[r] = 0
		case w < c:
			// Scaling c → t loses rd - min(rd, t) ready replicas when unready ones go
			// first, else (the highest index goes, ready or not) min(rd, c - t).
			t := max(w, c-budget)
			if f.Spec.UnreadyFirst {
				t = min(c, max(w, rd-budget))
			}
			lost := min(rd, c-t)
			if f.Spec.UnreadyFirst {
				lost = rd - min(rd, t)
			}
			budget -= lost
			target[r] = t
		}
	}
	return target
}

// growFollowers raises the pools below their want within limit, the update pool first,
// then newer pools before older; a pool with workers and no follower gets one
// regardless.
func growFollowers(in Input, target, want map[int64]int32, share map[int64]float64, limit int32) {
	var sum int32
	for _, n := range target {
		sum += n
	}
	revs := sortedRevs(want)
	sort.Slice(revs, func(i, j int) bool {
		if (revs[i] == in.UpdateRevision) != (revs[j] == in.UpdateRevision) {
			return revs[i] == in.UpdateRevision
		}
		return revs[i] > revs[j]
	})
	for _, r := range revs {
		if target[r] == 0 && want[r] > 0 && share[r] > 0 {
			target[r] = 1 // a pool with workers needs a follower to be routed to, first
			sum++
		}
	}
	for _, r := range revs {
		if w := want[r]; target[r] < w {
			grow := max(0, min(w-target[r], limit-sum))
			target[r] += grow
			sum += grow
		}
	}
}

func sortedRevs(m map[int64]int32) []int64 {
	out := make([]int64, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
