package prom

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/dgd-rollout/operator/controllers/analysis"
)

// Answer is what a Fake answers to one instant query: one sample per value of Values
// (none: an empty vector, as Prometheus answers a selector that matches no series), or,
// when Error is set, Prometheus's answer to a query that does not parse.
type Answer struct {
	Values []float64
	Error  string
}

// Fake is Prometheus's HTTP API for instant queries, answering from a function of the
// query instead of a TSDB: for the tests of what queries Prometheus (the kubectl
// plugin's analysis run), where a real server (Start) would need a prometheus binary
// and scraped series. It answers as web/api/v1/api.go of Prometheus 2.42 and 3.16
// (prometheus/prometheus v0.316.0) both do: /api/v1/query by GET or POST (routes "/query"), a success is
// {"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":
// [<time>,"<value>"]}]}} evaluated at the request's time parameter (now without one),
// and an error is respondError's body with errorType bad_data and HTTP 400
// (getDefaultErrorCode). It records every query it is asked, in order.
type Fake struct {
	// URL is http://127.0.0.1:<port>, what a client's address is.
	URL string

	srv    *httptest.Server
	answer func(query string) Answer

	mu      sync.Mutex
	queries []string
}

// StartFake serves on a free port of 127.0.0.1 until Close.
func StartFake(answer func(query string) Answer) *Fake {
	f := &Fake{answer: answer}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/query", f.query)
	f.srv = httptest.NewServer(mux)
	f.URL = f.srv.URL
	return f
}

// Close stops the server.
func (f *Fake) Close() { f.srv.Close() }

// Queries are the queries asked so far, in order.
func (f *Fake) Queries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

func (f *Fake) query(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		respond(w, http.StatusBadRequest, map[string]any{"status": "error", "errorType": "bad_data", "error": err.Error()})
		return
	}
	q := r.Form.Get("query")
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.mu.Unlock()
	at := float64(time.Now().UnixMilli()) / 1000
	if t, err := strconv.ParseFloat(r.Form.Get("time"), 64); err == nil {
		at = t
	}
	a := f.answer(q)
	if a.Error != "" {
		respond(w, http.StatusBadRequest, map[string]any{"status": "error", "errorType": "bad_data", "error": a.Error})
		return
	}
	result := make([]map[string]any, len(a.Values))
	for i, v := range a.Values {
		result[i] = map[string]any{"metric": map[string]string{"series": strconv.Itoa(i)}, "value": []any{at, analysis.FormatValue(v)}}
	}
	respond(w, http.StatusOK, map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
}

func respond(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
