package harness

import (
	"context"
	"sync"
	"time"

	"github.com/dgd-rollout/operator/controllers/analysis"
)

// Metrics stands in for Prometheus in the envtest suites: it answers each query the
// operator renders with what the test set (Answer), and records the queries.
type Metrics struct {
	mu      sync.Mutex
	answer  func(query string) analysis.Result
	queries []string
}

// Query answers one rendered query (no sample until Answer is called).
func (m *Metrics) Query(_ context.Context, query string, _ time.Time) analysis.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queries = append(m.queries, query)
	if m.answer == nil {
		return analysis.Result{}
	}
	return m.answer(query)
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
