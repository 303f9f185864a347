package app

import (
	"context"
	"encoding/pem"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgd-rollout/operator/controllers/analysis"
)

// TestPrometheusClient queries a Prometheus served over TLS that wants a bearer token,
// through the client the flags make: the CA file verifies it (without it, or with the
// system's roots, the query fails; insecure-skip-verify passes), the token file is sent
// and re-read at every query (a rotated token is the one sent next), and wrong files
// fail at start.
func TestPrometheusClient(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") == "" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"0.25"]}]}}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	write(tokenFile, "first\n")

	query := func(p analysis.PrometheusClient) analysis.Result {
		t.Helper()
		rt, err := p.Transport()
		if err != nil {
			t.Fatal(err)
		}
		q, err := analysis.NewPrometheusWith(srv.URL, rt)
		if err != nil {
			t.Fatal(err)
		}
		return q.Query(context.Background(), "up", time.Now())
	}

	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var p analysis.PrometheusClient
	PrometheusClientFlags(fs, &p)
	if err := fs.Parse([]string{"--prometheus-ca-file=" + caFile, "--prometheus-bearer-token-file=" + tokenFile}); err != nil {
		t.Fatal(err)
	}
	if r := query(p); r.Err != nil || r.Value != 0.25 {
		t.Fatalf("CA file and token: %+v", r)
	}
	write(tokenFile, "second")
	if r := query(p); r.Err != nil {
		t.Fatalf("after the token rotated: %+v", r)
	}
	mu.Lock()
	if len(seen) != 2 || seen[0] != "Bearer first" || seen[1] != "Bearer second" {
		t.Errorf("Authorization headers sent: %q, want the file's token at each query", seen)
	}
	mu.Unlock()

	if r := query(analysis.PrometheusClient{BearerTokenFile: tokenFile}); r.Err == nil || !strings.Contains(r.Err.Error(), "certificate") {
		t.Errorf("without the CA file: %+v, want a certificate error", r)
	}
	if r := query(analysis.PrometheusClient{BearerTokenFile: tokenFile, InsecureSkipVerify: true}); r.Err != nil {
		t.Errorf("insecure-skip-verify: %+v", r)
	}
	if r := query(analysis.PrometheusClient{CAFile: caFile}); r.Err == nil {
		t.Errorf("without a token the server answers 401: %+v", r)
	}

	write(filepath.Join(dir, "empty"), "\n")
	write(filepath.Join(dir, "garbage"), "not a certificate")
	for name, bad := range map[string]analysis.PrometheusClient{
		"missing token file":  {BearerTokenFile: filepath.Join(dir, "nope")},
		"empty token file":    {BearerTokenFile: filepath.Join(dir, "empty")},
		"missing CA file":     {CAFile: filepath.Join(dir, "nope")},
		"CA file without PEM": {CAFile: filepath.Join(dir, "garbage")},
	} {
		if _, err := bad.Transport(); err == nil {
			t.Errorf("%s: no error at start", name)
		}
	}
	if rt, err := (analysis.PrometheusClient{}).Transport(); rt != nil || err != nil {
		t.Errorf("zero value: %v, %v; want Go's default transport", rt, err)
	}
}

// TestWatchNamespacesFlag parses --watch-namespaces.
func TestWatchNamespacesFlag(t *testing.T) {
	for in, want := range map[string][]string{"a": {"a"}, "a, b,,c ": {"a", "b", "c"}, "": nil} {
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		var got []string
		WatchNamespacesFlag(fs, &got)
		if err := fs.Parse([]string{"--watch-namespaces=" + in}); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
