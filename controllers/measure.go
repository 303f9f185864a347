package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// MaxQueries bounds the analysis queries in flight at once, over every DGD: a slow
// Prometheus holds at most this many connections and goroutines busy; queries past
// it wait for a slot (each DGD waits for its own, no pass does).
const MaxQueries = 16

// queryBackstop is how long the runner lets one query run, past the Querier's own
// timeout (analysis.QueryTimeout): a Querier that ignores it still frees its slot.
const queryBackstop = analysis.QueryTimeout + 5*time.Second

// measurements runs the analysis queries passes list as due (decide.Decision.Measure)
// off the reconcile path, so that a slow or blackholed Prometheus delays no pass, of
// this DGD or another. Each measurement is keyed by its DGD (name and UID) and its
// decide.Measure (rollout, attempt, step and its start, metric, index, query): a result
// is only ever read back by the measurement it was asked for. When a result lands the
// DGD is enqueued (start gives the controller's queue), and its next snapshot reads
// it (results). The runner holds, per DGD, what the DGD's last pass listed as due and
// nothing more (want): a measurement no longer due is cancelled or dropped, and a DGD
// that is gone is forgotten whole (forget).
type measurements struct {
	query analysis.Querier
	slots chan struct{}

	mu    sync.Mutex
	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	dgds  map[types.NamespacedName]*dgdMeasurements
}

// dgdMeasurements are one DGD's measurements, for the DGD of that UID.
type dgdMeasurements struct {
	uid types.UID
	by  map[decide.Measure]*measurement
}

// measurement is one query, in flight or landed.
type measurement struct {
	cancel context.CancelFunc
	// done is closed when its goroutine has returned.
	done   chan struct{}
	landed bool
	result analysis.Result
}

func newMeasurements(q analysis.Querier, parallel int) *measurements {
	if q == nil {
		q = analysis.NoPrometheus{}
	}
	return &measurements{query: q, slots: make(chan struct{}, max(parallel, 1)), ctx: context.Background(),
		dgds: map[types.NamespacedName]*dgdMeasurements{}}
}

// start is the runner's source.Func: it keeps the controller's queue, to enqueue a DGD
// when a result lands, and its context, which ends every query when the manager stops.
func (m *measurements) start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctx, m.queue = ctx, queue
	return nil
}

// results are the landed results of the DGD's measurements.
func (m *measurements) results(key types.NamespacedName, uid types.UID) map[decide.Measure]analysis.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[decide.Measure]analysis.Result{}
	if set := m.dgds[key]; set != nil && set.uid == uid {
		for k, ms := range set.by {
			if ms.landed {
				out[k] = ms.result
			}
		}
	}
	return out
}

// want makes the DGD's measurements those due: each not yet asked for starts, each
// no longer due is cancelled (in flight) or dropped (landed). A DGD of another UID
// under the same name (deleted and made again) starts from none.
func (m *measurements) want(key types.NamespacedName, uid types.UID, due []decide.MeasureNeed) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.dgds[key]
	if set != nil && set.uid != uid {
		m.dropLocked(key)
		set = nil
	}
	if set == nil {
		if len(due) == 0 {
			return
		}
		set = &dgdMeasurements{uid: uid, by: map[decide.Measure]*measurement{}}
		m.dgds[key] = set
	}
	wanted := make(map[decide.Measure]bool, len(due))
	for _, n := range due {
		wanted[n.Measure] = true
		if set.by[n.Measure] == nil {
			set.by[n.Measure] = m.runLocked(key, set, n)
		}
	}
	for k, ms := range set.by {
		if !wanted[k] {
			ms.cancel()
			delete(set.by, k)
		}
	}
	if len(set.by) == 0 {
		delete(m.dgds, key)
	}
}

// forget cancels and drops every measurement of a DGD that is gone.
func (m *measurements) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropLocked(key)
}

func (m *measurements) dropLocked(key types.NamespacedName) {
	if set := m.dgds[key]; set != nil {
		for _, ms := range set.by {
			ms.cancel()
		}
		delete(m.dgds, key)
	}
}

// held counts the measurements held (in flight or landed) and the DGDs they are of.
func (m *measurements) held() (measurements, dgds int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, set := range m.dgds {
		measurements += len(set.by)
	}
	return measurements, len(m.dgds)
}

// runLocked starts the query of n in a goroutine that waits for a slot, runs it at
// n.At, and lands the result if the measurement is still wanted then.
func (m *measurements) runLocked(key types.NamespacedName, set *dgdMeasurements, n decide.MeasureNeed) *measurement {
	ctx, cancel := context.WithCancel(m.ctx)
	ms := &measurement{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ms.done)
		defer cancel()
		select {
		case m.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		r := m.run(ctx, n)
		<-m.slots
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.dgds[key] != set || set.by[n.Measure] != ms || ctx.Err() != nil {
			return // no longer wanted: dropped, forgotten, or the manager stopped
		}
		ms.landed, ms.result = true, r
		if m.queue != nil {
			m.queue.Add(reconcile.Request{NamespacedName: key})
		}
	}()
	return ms
}

// run runs one query and stamps its result with the instant it was evaluated at. A
// Querier that has not answered by queryBackstop (past its own timeout) gets an Error
// result and its slot back; its goroutine ends when it returns.
func (m *measurements) run(ctx context.Context, n decide.MeasureNeed) analysis.Result {
	ctx, cancel := context.WithTimeout(ctx, queryBackstop)
	defer cancel()
	answer := make(chan analysis.Result, 1)
	go func() { answer <- m.query.Query(ctx, n.Query, n.At) }()
	var r analysis.Result
	select {
	case r = <-answer:
	case <-ctx.Done():
		r = analysis.Result{Err: fmt.Errorf("querying Prometheus: no answer within %s", queryBackstop)}
	}
	r.At = n.At
	return r
}
