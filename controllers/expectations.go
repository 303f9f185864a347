package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationTTL bounds how long a pass waits for the cache to show a write. A cache
// normally catches up within milliseconds; when someone else wrote the same field in
// between (kubectl scale racing the operator), the value written never appears, and
// after the TTL the operator acts on what the cache shows (the Deployment controller's
// expectations expire the same way, after 5 minutes).
const expectationTTL = 5 * time.Second

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
	want map[types.NamespacedName]expectation
	// unsynced remembers when a workload generation was first seen with a status that
	// had not caught up with it (see fresh).
	unsynced map[generationKey]time.Time
	now      func() time.Time
}

type generationKey struct {
	types.NamespacedName
	generation int64
}

type expectation struct {
	replicas int32
	at       time.Time
}

func (e *expectations) expect(key types.NamespacedName, replicas int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.want == nil {
		e.want = map[types.NamespacedName]expectation{}
	}
	e.want[key] = expectation{replicas: replicas, at: e.clock()}
}

func (e *expectations) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// satisfied reports whether the cache shows what was last written to key (or nothing
// is expected, or the expectation expired) and forgets a met or expired expectation.
func (e *expectations) satisfied(key types.NamespacedName, cached int32) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	want, ok := e.want[key]
	if !ok {
		return true
	}
	if want.replicas == cached || e.clock().Sub(want.at) >= expectationTTL {
		delete(e.want, key)
		return true
	}
	return false
}

// forget drops the expectation of one workload (its write failed, or it was deleted).
func (e *expectations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.want, key)
	for k := range e.unsynced {
		if k.NamespacedName == key {
			delete(e.unsynced, k)
		}
	}
}

// fresh reports whether a pass may plan from a workload's status: the status describes
// the workload's latest spec (synced), or it has lagged generation for expectationTTL
// already. A status that lags our last write can overstate readiness (a Deployment
// scaled down and up again still reporting the pod that went), so the pass waits for
// the workload controller's status event instead, as the Deployment controller's own
// expectations do. The TTL bounds the wait where a controller legitimately leaves
// observedGeneration behind for long (Grove does not write it while a gang waits on
// its scheduling gate or a replica waits out its terminationDelay): after it, the pass
// plans from the status as it is.
func (e *expectations) fresh(key types.NamespacedName, generation int64, synced bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	gk := generationKey{key, generation}
	if synced {
		delete(e.unsynced, gk)
		return true
	}
	if e.unsynced == nil {
		e.unsynced = map[generationKey]time.Time{}
	}
	since, ok := e.unsynced[gk]
	if !ok {
		// Drop what older generations of this workload left behind.
		for k := range e.unsynced {
			if k.NamespacedName == key {
				delete(e.unsynced, k)
			}
		}
		e.unsynced[gk] = e.clock()
		return false
	}
	return e.clock().Sub(since) >= expectationTTL
}
