// Package invariants checks ROLLOUT.md's rollout invariants on an observed state of a
// DGD's worker workloads. It is written independently of the planner so that tests do
// not grade the planner with its own arithmetic. The envtest suites check it at every
// settled step; the end-to-end watcher at every observed event.
package invariants

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Workload is one observed worker workload.
type Workload struct {
	Service string
	Hash    string
	Spec    int32 // replicas the operator set
	Ready   int32 // ready replicas the workload reports
}

// Service is what the checks need to know of a worker service.
type Service struct {
	Name           string
	Role           string
	Replicas       int32
	Surge, Unavail int32
}

// ServicesOf resolves every worker service's desired replicas and budgets from a DGD:
// maxSurge rounds up, maxUnavailable down, per-service annotations override, and when
// both resolve to 0 surge becomes 1.
func ServicesOf(dgd *v1alpha1.DynamoGraphDeployment) []Service {
	ro := dgd.RolloutOrDefault()
	var out []Service
	for _, name := range dgd.WorkerServiceNames() {
		svc := dgd.Spec.Services[name]
		r := svc.DesiredReplicas()
		surge := resolve(pick(svc.Annotations[v1alpha1.AnnotationMaxSurge], ro.MaxSurge.String()), r, true)
		unav := resolve(pick(svc.Annotations[v1alpha1.AnnotationMaxUnavailable], ro.MaxUnavailable.String()), r, false)
		if surge == 0 && unav == 0 && r > 0 {
			surge = 1
		}
		out = append(out, Service{Name: name, Role: svc.Role(), Replicas: r, Surge: surge, Unavail: unav})
	}
	return out
}

func pick(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func resolve(v string, total int32, up bool) int32 {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		n, _ := strconv.Atoi(p)
		f := float64(n) * float64(total) / 100
		if up {
			return int32(math.Ceil(f))
		}
		return int32(math.Floor(f))
	}
	n, _ := strconv.Atoi(v)
	return int32(n)
}

// Check returns every violation of surge, ratio / orphan prevention and availability in
// one state. floorOK lists services whose availability floor held in the previous state;
// availability is only required of them (a first deploy starts with nothing ready).
func Check(services []Service, ws []Workload, floorOK map[string]bool) []string {
	v := CheckSurge(services, ws)
	held := FloorHolds(services, ws)
	for _, s := range services {
		if floorOK[s.Name] && !held[s.Name] {
			v = append(v, fmt.Sprintf("availability: %s has %d ready, fewer than %d-%d", s.Name, ready(s.Name, ws), s.Replicas, s.Unavail))
		}
	}
	return append(v, CheckPools(services, ws)...)
}

// CheckSurge returns the surge violations of one state.
func CheckSurge(services []Service, ws []Workload) []string {
	var v []string
	for _, s := range services {
		var spec int32
		for _, w := range ws {
			if w.Service == s.Name {
				spec += w.Spec
			}
		}
		if spec > s.Replicas+s.Surge {
			v = append(v, fmt.Sprintf("surge: %s has %d replicas set, more than %d+%d", s.Name, spec, s.Replicas, s.Surge))
		}
	}
	return v
}

// CheckPools returns the ratio and orphan violations inside every revision's pool;
// Workload.Hash names the pool.
func CheckPools(services []Service, ws []Workload) []string {
	byName := map[string]Service{}
	for _, s := range services {
		byName[s.Name] = s
	}
	pools := poolsOf(ws)
	var v []string
	for _, h := range slices.Sorted(maps.Keys(pools)) {
		v = append(v, checkPool(h, byName, pools[h])...)
	}
	return v
}

// CheckPrefillHasDecode returns the pools that hold prefill replicas and none of some
// decode service with desired replicas: what no state may show, not even one between
// two writes of a step (the operator grows decode first and shrinks prefill first, so a
// crash between two writes cannot leave one either; a decode worker alone can serve, a
// prefill worker needs a decode worker to hand its KV cache to). ROLLOUT.md's orphan
// rule in both directions holds at pass boundaries (CheckPools).
func CheckPrefillHasDecode(services []Service, ws []Workload) []string {
	pools := poolsOf(ws)
	var v []string
	for _, h := range slices.Sorted(maps.Keys(pools)) {
		var prefill, noDecode []string
		for _, s := range services {
			switch {
			case s.Role == v1alpha1.ComponentTypePrefill && pools[h][s.Name] > 0:
				prefill = append(prefill, fmt.Sprintf("%s=%d", s.Name, pools[h][s.Name]))
			case s.Role == v1alpha1.ComponentTypeDecode && s.Replicas > 0 && pools[h][s.Name] == 0:
				noDecode = append(noDecode, s.Name)
			}
		}
		if len(prefill) > 0 && len(noDecode) > 0 {
			v = append(v, fmt.Sprintf("orphan prefill: pool %s holds %s and no %s", h, strings.Join(prefill, ", "), strings.Join(noDecode, ", ")))
		}
	}
	return v
}

// MaxSkew is the largest |n_s/R_s - n_t/R_t| inside any pool, for reporting.
func MaxSkew(services []Service, ws []Workload) float64 {
	var skew float64
	for _, n := range poolsOf(ws) {
		for i, a := range services {
			for _, b := range services[i+1:] {
				if a.Replicas > 0 && b.Replicas > 0 {
					skew = math.Max(skew, math.Abs(float64(n[a.Name])/float64(a.Replicas)-float64(n[b.Name])/float64(b.Replicas)))
				}
			}
		}
	}
	return skew
}

// FloorHolds reports, per service, whether its ready replicas meet desired - maxUnavailable.
func FloorHolds(services []Service, ws []Workload) map[string]bool {
	ok := map[string]bool{}
	for _, s := range services {
		ok[s.Name] = ready(s.Name, ws) >= s.Replicas-s.Unavail
	}
	return ok
}

// ready counts a service's ready replicas, up to the replicas set on each workload
// (replicas above it are being removed).
func ready(service string, ws []Workload) int32 {
	var n int32
	for _, w := range ws {
		if w.Service == service {
			n += min(w.Ready, w.Spec)
		}
	}
	return n
}

// poolsOf maps revision hash -> service -> replicas set.
func poolsOf(ws []Workload) map[string]map[string]int32 {
	pools := map[string]map[string]int32{}
	for _, w := range ws {
		if pools[w.Hash] == nil {
			pools[w.Hash] = map[string]int32{}
		}
		pools[w.Hash][w.Service] += w.Spec
	}
	return pools
}

func checkPool(hash string, byName map[string]Service, n map[string]int32) []string {
	var names []string
	var total int32
	for name, s := range byName {
		if s.Replicas > 0 {
			names = append(names, name)
			total += n[name]
		}
	}
	sort.Strings(names)
	if total == 0 {
		return nil
	}
	var v []string
	for i, a := range names {
		if n[a] == 0 {
			v = append(v, fmt.Sprintf("orphan: pool %s holds %d replicas but none of %s", hash, total, a))
		}
		for _, b := range names[i+1:] {
			ra, rb := float64(byName[a].Replicas), float64(byName[b].Replicas)
			diff := math.Abs(float64(n[a])/ra - float64(n[b])/rb)
			if diff > math.Max(1/ra, 1/rb)+1e-9 {
				v = append(v, fmt.Sprintf("ratio: pool %s has %s=%d/%v and %s=%d/%v", hash, a, n[a], ra, b, n[b], rb))
			}
		}
	}
	return v
}
