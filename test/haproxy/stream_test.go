package haproxy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dgd-rollout/operator/traffic"
)

// TestStreamPassesThrough: a 5 s SSE stream through the proxy arrives whole, each of
// its 50 events as it was sent: HAProxy buffers no response (no compression, no
// http-buffer-request) and its timeouts outlast the stream. The lag of an event is its
// arrival less its send time (one clock: both ends are this process); a response held
// until its end would show the first event 4.9 s late.
func TestStreamPassesThrough(t *testing.T) {
	e := getEnv(t)
	g := e.newGraph(t)
	f := startFrontend(t, "5e0a1b2c")
	tr := g.traffic([]traffic.Cohort{g.cohort(f, 100)}, nil)
	g.startPods(t, tr, 1)
	g.inEffect(t, tr)

	for _, via := range []struct{ name, addr string }{{"direct", f.addr.String()}, {"proxy", g.pods[0].Entry}} {
		r := send(context.Background(), newClient(), via.addr, chatRequest{Model: "m", Stream: true, DurationMS: 5000,
			Messages: []chatMessage{{Role: "user", Content: "hi"}}}, nil)
		if r.err != nil {
			t.Fatalf("%s: %v", via.name, r.err)
		}
		if len(r.lags) != 50 || r.cohort != f.cohort {
			t.Fatalf("%s: %d events from cohort %q, want 50 from %q", via.name, len(r.lags), r.cohort, f.cohort)
		}
		took := r.end.Sub(r.start)
		slices.Sort(r.lags)
		t.Logf("%s: 50 events in %s, lag median %s, max %s", via.name, took.Round(time.Millisecond),
			r.lags[25].Round(time.Microsecond), r.lags[49].Round(time.Microsecond))
		if max := r.lags[49]; max > 200*time.Millisecond {
			t.Errorf("%s: an event arrived %s after it was sent (more than two events' interval)", via.name, max)
		}
	}
}
