package harness

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/dgd-rollout/operator/controllers/analysis"
)

// Metrics stands in for Prometheus in the envtest suites: it answers each query the
// operator renders with what the test set (Answer), and records the queries. A query
// that contains a marker given to Route goes to that marker's Querier instead (a real
// Prometheus client, to a server that never answers): the operator has one Prometheus
// for every DGD (--prometheus-url) and an analysis cannot name its own, so a test
// points one DGD's queries elsewhere by what they contain.
type Metrics struct {
	mu      sync.Mutex
	answer  func(query string) analysis.Result
	queries []string
	routes  map[string]analysis.Querier
}

// Query answers one rendered query (no sample until Answer is called).
func (m *Metrics) Query(ctx context.Context, query string, at time.Time) analysis.Result {
	m.mu.Lock()
	m.queries = append(m.queries, query)
	for marker, q := range m.routes {
		if strings.Contains(query, marker) {
			m.mu.Unlock()
			return q.Query(ctx, query, at)
		}
	}
	defer m.mu.Unlock()
	if m.answer == nil {
		return analysis.Result{}
	}
	return m.answer(query)
}

// Route sends the queries that contain marker to q from now on (nil: no longer).
func (m *Metrics) Route(marker string, q analysis.Querier) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.routes == nil {
		m.routes = map[string]analysis.Querier{}
	}
	if q == nil {
		delete(m.routes, marker)
		return
	}
	m.routes[marker] = q
}

// Answer sets how queries are answered from now on.
func (m *Metrics) Answer(f func(query string) analysis.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answer = f
}

// Queries returns the queries asked so far, oldest first.
func (m *Metrics) Queries() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.queries...)
}

// Value is a query result of one sample.
func Value(v float64) analysis.Result { return analysis.Result{Value: v, Samples: 1} }
