package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// expectations remembers the replica count the operator last wrote to each workload
// until the informer cache shows it. A pass that sees a workload whose cached replicas
// differ from what was written acts on nothing: it would plan from a stale count (a
// second scale-down computed from replicas that are already gone). The watch event that
// brings the write into the cache triggers the next pass, so no timer is needed.
//
// Expectations are memory only, on purpose: a restarted operator starts with a fresh
// cache that already holds its last writes.
type expectations struct {
	mu   sync.Mutex
	want map[types.NamespacedName]int32
}

func (e *expectations) expect(key types.NamespacedName, replicas int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.want == nil {
		e.want = map[types.NamespacedName]int32{}
	}
	e.want[key] = replicas
}

// satisfied reports whether the cache shows what was last written to key (or nothing
// is expected) and forgets a met expectation.
func (e *expectations) satisfied(key types.NamespacedName, cached int32) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	want, ok := e.want[key]
	if !ok {
		return true
	}
	if want == cached {
		delete(e.want, key)
		return true
	}
	return false
}

// forget drops every expectation of one namespace/name prefix's workloads when its DGD
// is gone or a workload was deleted.
func (e *expectations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.want, key)
}
