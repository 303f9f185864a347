package planner

// The ratio rule within one pool, for services s, t with R_s, R_t > 0,
//
//	|n_s/R_s - n_t/R_t| <= max(1/R_s, 1/R_t)   ⇔   |n_s·R_t - n_t·R_s| <= max(R_s, R_t),
//
// plus the orphan rule (a pool holds none or at least one replica of every member),
// defines the set of valid pool vectors. That set is closed under componentwise min
// and max (a lattice), so within any box lo <= v <= hi whose corner is valid there is
// a least and a greatest valid vector. raise and lower compute them by iterating the
// rules' necessary conditions to a fixpoint (chaotic iteration of monotone bounds).
//
// Every function takes strict: 0 is that rule; 1 narrows it to the open window
// |n_s/R_s - n_t/R_t| < max(1/R_s, 1/R_t) (lockstep, rolling.go). The narrower set is
// a lattice too (the same difference constraints with a smaller bound, and orphan),
// and it still holds a chain from 0 to R in steps of at most one replica per service:
// n_s = ⌈k·R_s/R_max⌉ for k = 0..R_max.

// ratioOK reports whether counts a of R ra and b of R rb are in ratio, exactly.
func ratioOK(a, ra, b, rb, strict int64) bool {
	d := a*rb - b*ra
	return max(d, -d) <= width(ra, rb, strict)
}

// width is the ratio window in cross-multiplied form.
func width(ra, rb, strict int64) int64 { return max(ra, rb) - strict }

// validPool reports whether v satisfies the ratio and orphan rules over idx.
func validPool(idx []int, r, v []int64, strict int64) bool {
	zero, some := false, false
	for _, s := range idx {
		zero = zero || v[s] == 0
		some = some || v[s] > 0
		for _, t := range idx {
			if s < t && !ratioOK(v[s], r[s], v[t], r[t], strict) {
				return false
			}
		}
	}
	return !(zero && some)
}

// closurePasses bounds the fixpoint iteration; on valid inputs it converges in a few
// passes (TestClosures checks them against brute force), the bound only guards absurd inputs.
func closurePasses(idx []int) int { return 4*len(idx) + 8 }

// raise returns the least v with lo <= v <= hi over idx that is valid when hi is (the
// deepest safe scale-down of a pool whose budgets allow lo). Entries outside idx are
// copied from lo. Without convergence it returns hi: no move.
func raise(idx []int, r, lo, hi []int64, strict int64) []int64 {
	v := append([]int64(nil), lo...)
	for range closurePasses(idx) {
		changed := raiseOrphans(idx, v, hi)
		for _, s := range idx {
			for _, t := range idx {
				need := ceilDiv(v[t]*r[s]-width(r[s], r[t], strict), r[t])
				if s != t && need > v[s] && v[s] < hi[s] {
					v[s], changed = min(need, hi[s]), true
				}
			}
		}
		if !changed {
			return v
		}
	}
	return append([]int64(nil), hi...)
}

// raiseOrphans lifts every zero member to 1 once any member holds a replica.
func raiseOrphans(idx []int, v, hi []int64) bool {
	changed, some := false, false
	for _, s := range idx {
		some = some || v[s] > 0
	}
	for _, s := range idx {
		if some && v[s] == 0 && hi[s] > 0 {
			v[s], changed = 1, true
		}
	}
	return changed
}

// lower returns the greatest v with lo <= v <= hi over idx that is valid when lo is
// (the largest safe scale-up of a pool whose budgets allow hi). Entries outside idx
// are copied from hi. Without convergence it returns lo: no move.
func lower(idx []int, r, lo, hi []int64, strict int64) []int64 {
	v := append([]int64(nil), hi...)
	for range closurePasses(idx) {
		changed := lowerOrphans(idx, v, lo)
		for _, s := range idx {
			for _, t := range idx {
				allow := floorDiv(v[t]*r[s]+width(r[s], r[t], strict), r[t])
				if s != t && allow < v[s] && v[s] > lo[s] {
					v[s], changed = max(allow, lo[s]), true
				}
			}
		}
		if !changed {
			return v
		}
	}
	return append([]int64(nil), lo...)
}

// lowerOrphans drops every member back to lo once any member is at 0.
func lowerOrphans(idx []int, v, lo []int64) bool {
	changed, zero := false, false
	for _, s := range idx {
		zero = zero || v[s] == 0
	}
	for _, s := range idx {
		if zero && v[s] > lo[s] {
			v[s], changed = lo[s], true
		}
	}
	return changed
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }
