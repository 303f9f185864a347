package controllers

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// heldQuerier answers a query only when the test releases it (or its context ends),
// and counts the queries running at once.
type heldQuerier struct {
	mu        sync.Mutex
	release   map[string]chan analysis.Result
	running   int
	most      int
	cancelled chan string
	started   chan string
}

func newHeldQuerier() *heldQuerier {
	return &heldQuerier{release: map[string]chan analysis.Result{}, started: make(chan string, 100), cancelled: make(chan string, 100)}
}

func (q *heldQuerier) ch(query string) chan analysis.Result {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.release[query] == nil {
		q.release[query] = make(chan analysis.Result, 1)
	}
	return q.release[query]
}

func (q *heldQuerier) Query(ctx context.Context, query string, _ time.Time) analysis.Result {
	ch := q.ch(query)
	q.mu.Lock()
	q.running++
	q.most = max(q.most, q.running)
	q.mu.Unlock()
	q.started <- query
	defer func() {
		q.mu.Lock()
		q.running--
		q.mu.Unlock()
	}()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		q.cancelled <- query
		return analysis.Result{Err: ctx.Err()}
	}
}

func (q *heldQuerier) answer(query string, v float64) {
	q.ch(query) <- analysis.Result{Value: v, Samples: 1}
}

func (q *heldQuerier) wait(t *testing.T, query string) {
	t.Helper()
	waitFor(t, q.started, query, "started")
}

func waitFor(t *testing.T, ch chan string, query, what string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != query {
			t.Fatalf("query %q %s, want %q", got, what, query)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("query %q never %s", query, what)
	}
}

func need(index int32, query string, at time.Time) decide.MeasureNeed {
	return decide.MeasureNeed{Measure: decide.Measure{Revision: 2, Attempt: 1, Step: 1, Start: at.Unix(), Metric: "errors", Index: index, Query: query}, At: at}
}

func startRunner(t *testing.T, q analysis.Querier, parallel int) (*measurements, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	t.Helper()
	m := newMeasurements(q, parallel)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); queue.ShutDown() })
	if err := m.start(ctx, queue); err != nil {
		t.Fatal(err)
	}
	return m, queue
}

// next is the next DGD the runner enqueued.
func next(t *testing.T, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) types.NamespacedName {
	t.Helper()
	got := make(chan reconcile.Request, 1)
	go func() {
		r, _ := queue.Get()
		queue.Done(r)
		got <- r
	}()
	select {
	case r := <-got:
		return r.NamespacedName
	case <-time.After(10 * time.Second):
		t.Fatal("nothing enqueued")
	}
	return types.NamespacedName{}
}

// TestMeasurementsLand: a due measurement is queried at the instant it was asked for,
// once however many passes list it; its result lands for that measurement only, with
// that instant, and enqueues its DGD; a measurement no longer due is dropped.
func TestMeasurementsLand(t *testing.T) {
	q := newHeldQuerier()
	m, queue := startRunner(t, q, 4)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	at := time.Unix(1000, 0)
	first := need(0, "q0", at)
	m.want(a, "uid-a", []decide.MeasureNeed{first})
	q.wait(t, "q0")
	m.want(a, "uid-a", []decide.MeasureNeed{first}) // a second pass: no second query
	if got := m.results(a, "uid-a"); len(got) != 0 {
		t.Fatalf("results %v before the answer", got)
	}
	q.answer("q0", 0.01)
	if got := next(t, queue); got != a {
		t.Fatalf("enqueued %v, want %v", got, a)
	}
	got := m.results(a, "uid-a")
	if r, ok := got[first.Measure]; len(got) != 1 || !ok || r.Value != 0.01 || !r.At.Equal(at) {
		t.Fatalf("results %+v: want q0's answer at %s", got, at)
	}
	if got := m.results(a, "uid-other"); len(got) != 0 {
		t.Fatalf("a DGD of another UID reads %v", got)
	}
	select {
	case again := <-q.started:
		t.Fatalf("query %q run again", again)
	default:
	}
	m.want(a, "uid-a", nil) // the pass took it: nothing due
	if n, dgds := m.held(); n != 0 || dgds != 0 {
		t.Fatalf("%d measurements of %d DGDs held after nothing is due", n, dgds)
	}
}

// TestMeasurementsStale: a result that lands after its measurement stopped being due
// (the step moved on, the rollout restarted) is dropped, enqueues nothing, and is
// never read for the measurement due now.
func TestMeasurementsStale(t *testing.T) {
	q := newHeldQuerier()
	m, queue := startRunner(t, q, 4)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	old, now := need(0, "old", time.Unix(1000, 0)), need(0, "new", time.Unix(2000, 0))
	m.want(a, "uid-a", []decide.MeasureNeed{old})
	q.wait(t, "old")
	m.mu.Lock()
	oldDone := m.dgds[a].by[old.Measure].done
	m.mu.Unlock()
	m.want(a, "uid-a", []decide.MeasureNeed{now})
	q.wait(t, "new")
	select {
	case <-oldDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the old query's goroutine never returned")
	}
	if queue.Len() != 0 {
		t.Fatalf("the dropped measurement enqueued its DGD")
	}
	q.answer("new", 2)
	if got := next(t, queue); got != a {
		t.Fatalf("enqueued %v", got)
	}
	if got := m.results(a, "uid-a"); len(got) != 1 || got[now.Measure].Value != 2 {
		t.Fatalf("results %+v, want only the new measurement's", got)
	}
	waitFor(t, q.cancelled, "old", "cancelled")
}

// TestMeasurementsForget: a DGD that is gone has its queries cancelled and nothing
// held; one made again under the same name (another UID) starts from none.
func TestMeasurementsForget(t *testing.T) {
	q := newHeldQuerier()
	m, _ := startRunner(t, q, 4)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	m.want(a, "uid-a", []decide.MeasureNeed{need(0, "q", time.Unix(1000, 0))})
	q.wait(t, "q")
	m.mu.Lock()
	done := m.dgds[a].by[need(0, "q", time.Unix(1000, 0)).Measure].done
	m.mu.Unlock()
	m.forget(a)
	if n, dgds := m.held(); n != 0 || dgds != 0 {
		t.Fatalf("%d measurements of %d DGDs held after forget", n, dgds)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the forgotten DGD's measurement still runs")
	}
	waitFor(t, q.cancelled, "q", "cancelled")

	m.want(a, "uid-a", []decide.MeasureNeed{need(0, "x", time.Unix(1000, 0))})
	q.wait(t, "x")
	m.want(a, "uid-b", []decide.MeasureNeed{need(0, "y", time.Unix(1000, 0))})
	q.wait(t, "y")
	if n, dgds := m.held(); n != 1 || dgds != 1 {
		t.Fatalf("%d measurements of %d DGDs held, want the new DGD's one", n, dgds)
	}
}

// TestMeasurementsBounded: no more than the runner's slots run at once, however many
// DGDs wait; the others run as slots free.
func TestMeasurementsBounded(t *testing.T) {
	q := newHeldQuerier()
	m, _ := startRunner(t, q, 2)
	queries := []string{"a", "b", "c", "d", "e"}
	for _, name := range queries {
		m.want(types.NamespacedName{Namespace: "ns", Name: name}, types.UID(name), []decide.MeasureNeed{need(0, name, time.Unix(1000, 0))})
	}
	started := map[string]bool{}
	for len(started) < len(queries) {
		select {
		case s := <-q.started:
			started[s] = true
			q.answer(s, 1)
		case <-time.After(10 * time.Second):
			t.Fatalf("started %v only", started)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.most > 2 {
		t.Fatalf("%d queries ran at once, over the 2 slots", q.most)
	}
}
