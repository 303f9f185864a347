package analysis

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPrometheusResults checks the client against responses shaped as Prometheus'
// /api/v1/query answers them (https://prometheus.io/docs/prometheus/latest/querying/api/,
// "Expression query result formats"); the real server is queried in test/e2e.
func TestPrometheusResults(t *testing.T) {
	answers := map[string]string{
		"scalar": `{"status":"success","data":{"resultType":"scalar","result":[1764072000,"0.25"]}}`,
		"vector": `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1764072000,"0.5"]},{"metric":{"a":"2"},"value":[1764072000,"0.7"]}]}}`,
		"empty":  `{"status":"success","data":{"resultType":"vector","result":[]}}`,
		"matrix": `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1764072000,"1"]]}]}}`,
		"bad":    `{"status":"error","errorType":"bad_data","error":"parse error at char 4"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if r.Form.Get("query") == "bad" {
			w.WriteHeader(http.StatusBadRequest)
		}
		_, _ = w.Write([]byte(answers[r.Form.Get("query")]))
	}))
	defer srv.Close()
	p, err := NewPrometheus(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if r := p.Query(ctx, "scalar", time.Now()); r.Err != nil || r.Samples != 1 || r.Value != 0.25 {
		t.Errorf("scalar: %+v", r)
	}
	if r := p.Query(ctx, "vector", time.Now()); r.Err != nil || r.Samples != 2 || r.Value != 0.5 {
		t.Errorf("vector: %+v", r)
	}
	if r := p.Query(ctx, "empty", time.Now()); r.Err != nil || r.Samples != 0 {
		t.Errorf("empty: %+v", r)
	}
	if r := p.Query(ctx, "matrix", time.Now()); r.Err == nil || !strings.Contains(r.Err.Error(), "matrix") {
		t.Errorf("matrix: %+v", r)
	}
	if r := p.Query(ctx, "bad", time.Now()); r.Err == nil || !strings.Contains(r.Err.Error(), "parse error") {
		t.Errorf("bad: %+v", r)
	}
	srv.Close()
	if r := p.Query(ctx, "scalar", time.Now()); r.Err == nil || !strings.Contains(r.Err.Error(), "querying Prometheus") {
		t.Errorf("unreachable: %+v", r)
	}
}

// TestPrometheusResponseCap: an answer over MaxResponseBytes errs and is not read
// whole: the server streams far more than the cap (with and without a
// Content-Length) and the client stops once past it.
func TestPrometheusResponseCap(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		huge := 64 * MaxResponseBytes
		if r.Form.Get("query") == "sized" {
			w.Header().Set("Content-Length", strconv.Itoa(huge))
		}
		_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[`)
		chunk := []byte(strings.Repeat(`{"metric":{"pod":"p"},"value":[1764072000,"1"]},`, 1000))
		for n := 0; n < huge; n += len(chunk) {
			m, err := w.Write(chunk)
			written.Add(int64(m))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	p, err := NewPrometheus(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"streamed", "sized"} {
		written.Store(0)
		r := p.Query(context.Background(), q, time.Now())
		if r.Err == nil || !strings.Contains(r.Err.Error(), "cap") {
			t.Errorf("%s: %+v, want an error over the cap", q, r)
		}
		// The server may have written a few socket buffers ahead of what was read.
		if n := written.Load(); n > 16*MaxResponseBytes {
			t.Errorf("%s: the server wrote %d bytes before the client gave up", q, n)
		}
	}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"scalar","result":[1764072000,"0.25"]}}`)
	}))
	defer ok.Close()
	p, _ = NewPrometheus(ok.URL)
	if r := p.Query(context.Background(), "up", time.Now()); r.Err != nil || r.Value != 0.25 {
		t.Errorf("a small answer: %+v", r)
	}
}

// TestPrometheusTimeout: a Prometheus that accepts the query and never answers costs
// one query its Timeout, no more, and the query errs.
func TestPrometheusTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	p, err := NewPrometheus(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if p.Timeout != QueryTimeout {
		t.Errorf("default timeout %s, want %s", p.Timeout, QueryTimeout)
	}
	p.Timeout = 200 * time.Millisecond
	start := time.Now()
	r := p.Query(context.Background(), "up", time.Now())
	if r.Err == nil {
		t.Fatalf("a query that was never answered: %+v", r)
	}
	if !errors.Is(r.Err, context.DeadlineExceeded) && !strings.Contains(r.Err.Error(), "deadline") {
		t.Errorf("error %v, want the deadline", r.Err)
	}
	// Generous: the point is that it returns at all, and not after QueryTimeout.
	if took := time.Since(start); took > QueryTimeout/2 {
		t.Errorf("the query took %s", took)
	}
}
