package agent

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dgd-rollout/operator/traffic/proxy"
)

func rep(version string, cohorts map[string]proxy.CohortReport) proxy.Report {
	return proxy.Report{Version: version, Time: time.Now(), Cohorts: cohorts}
}

// TestReporterOffer: which reports the reporter sends, and when. A report that
// changes what is applied goes at once; one that only moves a draining cohort's
// requests in flight waits until ReportInterval after the last sent; others are
// dropped.
func TestReporterOffer(t *testing.T) {
	base := map[string]proxy.CohortReport{"s": {Weight: 100, InFlight: 5}, "c": {Weight: 0, InFlight: 3}}
	with := func(hash string, c proxy.CohortReport) map[string]proxy.CohortReport {
		m := map[string]proxy.CohortReport{}
		for k, v := range base {
			m[k] = v
		}
		m[hash] = c
		return m
	}
	sent := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		next      proxy.Report
		want      bool // pending after the offer
		wantDueAt time.Time
	}{
		"the same, later":                    {rep("v1", base), false, time.Time{}},
		"a serving cohort's requests moved":  {rep("v1", with("s", proxy.CohortReport{Weight: 100, InFlight: 9})), false, time.Time{}},
		"a draining cohort's requests moved": {rep("v1", with("c", proxy.CohortReport{Weight: 0, InFlight: 2})), true, sent.Add(time.Second)},
		"a cohort removed":                   {rep("v1", with("c", proxy.CohortReport{InFlight: 1, Removing: true})), true, time.Time{}},
		"a weight changed":                   {rep("v1", with("c", proxy.CohortReport{Weight: 10, InFlight: 3})), true, time.Time{}},
		"a new version":                      {rep("v2", base), true, time.Time{}},
		"an error":                           {proxy.Report{Version: "v1", Cohorts: base, Error: "runtime API: refused"}, true, time.Time{}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := newReporter(nil, Options{ReportInterval: time.Second})
			first := rep("v1", base)
			r.offer(first)
			r.sent(r.pending)
			r.lastSent = sent
			r.offer(c.next)
			if got := r.pending != nil; got != c.want {
				t.Fatalf("pending after the offer: %t, want %t", got, c.want)
			}
			if c.want && !r.due.Equal(c.wantDueAt) {
				t.Errorf("due at %s, want %s", r.due, c.wantDueAt)
			}
		})
	}
}

// TestReporterKeepsTheNewest: of two reports offered before one is sent, the newest
// is sent, and at the earliest due time of the two.
func TestReporterKeepsTheNewest(t *testing.T) {
	r := newReporter(nil, Options{ReportInterval: time.Second})
	r.offer(rep("v1", nil))
	r.offer(rep("v2", nil))
	got, wait := r.next()
	if got == nil || got.Version != "v2" || wait > 0 {
		t.Fatalf("next = %+v in %s, want v2 at once", got, wait)
	}
	r.sent(got)
	if got, _ := r.next(); got != nil {
		t.Errorf("after sending, next = %+v, want none", got)
	}
}

// TestHealth: the probes answer GET of their paths only, each from its own state.
func TestHealth(t *testing.T) {
	h := &health{stale: time.Minute}
	code := func(method, path string) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w.Code
	}
	type codes struct{ Start, Ready, Health, Post, Other int }
	read := func() codes {
		return codes{code("GET", "/startz"), code("GET", "/readyz"), code("GET", "/healthz"), code("POST", "/readyz"), code("GET", "/")}
	}
	if diff := cmp.Diff(codes{503, 503, 503, 405, 404}, read()); diff != "" {
		t.Errorf("before the first pass (-want +got):\n%s", diff)
	}
	h.start()
	h.setReady(true)
	h.beat()
	if diff := cmp.Diff(codes{200, 200, 200, 405, 404}, read()); diff != "" {
		t.Errorf("after a pass (-want +got):\n%s", diff)
	}
	h.last.Store(time.Now().Add(-2 * time.Minute).UnixNano())
	h.setReady(false)
	if diff := cmp.Diff(codes{200, 503, 503, 405, 404}, read()); diff != "" {
		t.Errorf("with the loop stuck (-want +got):\n%s", diff)
	}
}
