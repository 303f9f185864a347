package planner_test

import (
	"math/rand"

	"github.com/dgd-rollout/operator/controllers/planner"
)

// splitmix is a tiny rand.Source64 (SplitMix64): seeding math/rand's default source
// costs more than a whole small rollout.
type splitmix uint64

func (s *splitmix) Uint64() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
func (s *splitmix) Int63() int64    { return int64(s.Uint64() >> 1) }
func (s *splitmix) Seed(seed int64) { *s = splitmix(seed) }

func newRand(seed int64) *rand.Rand {
	s := splitmix(seed)
	return rand.New(&s)
}

// world is a pod-level simulation of the workloads, independent of planner.Simulate:
// every replica has its own ready time; scale-downs remove unready replicas first
// (newest first) for UnreadyFirst services and the highest index otherwise; removed
// replicas linger as terminating (counted in Current) for 0-2 steps.
type world struct {
	keys  []refKey
	pods  map[refKey][]int // ready time of each replica, in index order
	dying map[refKey][]int // time each terminating replica is gone
	uf    map[string]bool
}

func newWorld() *world {
	return &world{pods: map[refKey][]int{}, dying: map[refKey][]int{}, uf: map[string]bool{}}
}

// add creates a workload of n replicas, ready at time 0.
func (w *world) add(svc string, rev int64, n int) {
	k := refKey{svc, rev}
	w.keys = append(w.keys, k)
	w.pods[k] = make([]int, n)
}

// observe returns the workloads as a controller sees them at time now.
func (w *world) observe(now int) []planner.Workload {
	out := make([]planner.Workload, 0, len(w.keys))
	for _, k := range w.keys {
		ready, alive := 0, 0
		for _, at := range w.pods[k] {
			if at <= now {
				ready++
			}
		}
		for _, gone := range w.dying[k] {
			if gone > now {
				alive++
			}
		}
		n := len(w.pods[k])
		out = append(out, planner.Workload{Service: k.svc, Revision: k.rev,
			Spec: int32(n), Current: int32(n + alive), Ready: int32(ready)})
	}
	return out
}

// write applies the plan's targets at time now; new replicas get a delay in
// [0, maxDelay] and are first observed ready at now+1+delay.
func (w *world) write(p planner.Plan, now, maxDelay int, rng *rand.Rand) {
	for _, t := range p.Targets {
		k := refKey{t.Service, t.Revision}
		pods, ok := w.pods[k]
		if !ok && t.Replicas == 0 {
			continue
		}
		if !ok {
			w.keys = append(w.keys, k)
		}
		for len(pods) < int(t.Replicas) {
			pods = append(pods, now+1+rng.Intn(maxDelay+1))
		}
		for len(pods) > int(t.Replicas) {
			i := w.victim(pods, now, w.uf[k.svc])
			pods = append(pods[:i], pods[i+1:]...)
			w.dying[k] = append(w.dying[k], now+1+rng.Intn(3))
		}
		w.pods[k] = pods
	}
}

// victim picks the replica a scale-down removes.
func (w *world) victim(pods []int, now int, uf bool) int {
	if uf {
		for i := len(pods) - 1; i >= 0; i-- {
			if pods[i] > now {
				return i
			}
		}
	}
	return len(pods) - 1
}

// readyBy sums ready replicas per service at time now.
func (w *world) readyBy(now int) map[string]int {
	out := map[string]int{}
	for _, wl := range w.observe(now) {
		out[wl.Service] += int(wl.Ready)
	}
	return out
}
