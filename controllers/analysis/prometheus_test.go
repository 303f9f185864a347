package analysis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
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
