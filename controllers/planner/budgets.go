package planner

import "math"

// Resolve returns v as a replica count of total: a count as is, a percentage as
// total*v/100 rounded up when roundUp (maxSurge) and down otherwise (maxUnavailable),
// as Deployment resolves intstr values. Negative values and totals count as 0.
func Resolve(v IntOrPercent, total int32, roundUp bool) int32 {
	if v.Value <= 0 {
		return 0
	}
	if !v.Percent {
		return v.Value
	}
	if total <= 0 {
		return 0
	}
	n := int64(total) * int64(v.Value)
	if roundUp {
		n += 99
	}
	return clamp32(n / 100)
}

// ResolveBudgets returns the surge and unavailable replica budgets of s against its
// desired replicas: surge rounds up, unavailable down, and when both resolve to 0 for a
// service with replicas, surge becomes 1 so the rollout can move (ROLLOUT.md).
func ResolveBudgets(s ServiceSpec) (surge, unavailable int32) {
	r := max(s.Replicas, 0)
	surge = Resolve(s.MaxSurge, r, true)
	unavailable = Resolve(s.MaxUnavailable, r, false)
	if surge == 0 && unavailable == 0 && r > 0 {
		surge = 1
	}
	return surge, unavailable
}

// PartitionCounts returns O_s, the replicas each service keeps on the old revision
// when the rollout reaches spec.Partition (RollingUpdate only; every spec service has
// an entry). With the fraction φ = p/100 for a percentage p and φ = N/R_max for a
// count N (R_max the largest R_s):
//
//	φ <= 0: O_s = 0            φ >= 1 or R_s = 0: O_s = R_s
//	else:   O_s = min(R_s-1, max(1, round(R_s·φ)))   (round half up)
//
// so both revisions keep at least one replica of every service. When that is
// impossible because some service has R_s = 1 and 0 < φ < 1, every service keeps all
// its replicas (O_s = R_s): the canary cannot start without orphaning a role, and
// holding everything is the safe reading of "keep part on the old revision". Both O
// and R-O satisfy the pool ratio rule (see the package doc).
func PartitionCounts(spec Spec) map[string]int32 {
	num, den := partitionFraction(spec)
	services := uniqueServices(spec.Services)
	out := make(map[string]int32, len(services))
	holdAll := false
	for _, s := range services {
		r := max(s.Replicas, 0)
		out[s.Name] = holdFor(r, num, den)
		holdAll = holdAll || (r == 1 && num > 0 && num < den)
	}
	if holdAll {
		for _, s := range services {
			out[s.Name] = max(s.Replicas, 0)
		}
	}
	return out
}

// uniqueServices drops repeated names, keeping the first (the API forbids repeats).
func uniqueServices(in []ServiceSpec) []ServiceSpec {
	seen := make(map[string]bool, len(in))
	out := make([]ServiceSpec, 0, len(in))
	for _, s := range in {
		if !seen[s.Name] {
			seen[s.Name] = true
			out = append(out, s)
		}
	}
	return out
}

// partitionFraction returns φ as num/den with den > 0 (num may exceed den).
func partitionFraction(spec Spec) (num, den int64) {
	p := spec.Partition
	if p == nil || p.Value <= 0 {
		return 0, 1
	}
	if p.Percent {
		return int64(p.Value), 100
	}
	var rmax int64
	for _, s := range uniqueServices(spec.Services) {
		rmax = max(rmax, int64(s.Replicas))
	}
	if rmax == 0 {
		return 0, 1
	}
	return int64(p.Value), rmax
}

// holdFor is O_s for one service: round(r·num/den) clamped to [1, r-1], or r when
// num >= den. r == 1 with 0 < φ < 1 is resolved by the caller.
func holdFor(r int32, num, den int64) int32 {
	if r <= 0 || num <= 0 {
		return 0
	}
	if num >= den {
		return r
	}
	o := (2*int64(r)*num + den) / (2 * den)
	return int32(max(1, min(int64(r)-1, o)))
}

func clamp32(v int64) int32 {
	return int32(max(math.MinInt32, min(math.MaxInt32, v)))
}
