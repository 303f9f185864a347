package haproxy

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgd-rollout/operator/traffic"
)

// BenchmarkProxy measures what HAProxy adds on loopback, against the stand-in frontend
// reached directly:
//   - latency: one client sends a plain (non-streaming) completion directly, then one
//     through the proxy, each on its own keep-alive connection, b.N times; reported:
//     the proxy's added median and p99 (targets: p99 <= 1 ms), and both medians;
//   - throughput/direct and throughput/proxy: 32 clients in parallel; reported in
//     requests per second.
//
// Run: go test ./test/haproxy -run '^$' -bench BenchmarkProxy -benchtime 20000x
func BenchmarkProxy(b *testing.B) {
	e := getEnv(b)
	g := e.newGraph(b)
	f := startFrontend(b, "aaaa0001")
	tr := g.traffic([]traffic.Cohort{g.cohort(f, 100)}, nil)
	g.startPods(b, tr, 1)
	g.inEffect(b, tr)
	direct, proxied := f.addr.String(), g.pods[0].Entry

	b.Run("latency", func(b *testing.B) {
		dc, pc := newClient(), newClient()
		var d, p []time.Duration
		for b.Loop() {
			d = append(d, timed(b, dc, direct))
			p = append(p, timed(b, pc, proxied))
		}
		slices.Sort(d)
		slices.Sort(p)
		q := func(s []time.Duration, q float64) float64 {
			return float64(s[int(q*float64(len(s)-1))].Nanoseconds()) / 1000
		}
		b.ReportMetric(q(p, 0.5)-q(d, 0.5), "added-p50-µs")
		b.ReportMetric(q(p, 0.99)-q(d, 0.99), "added-p99-µs")
		b.ReportMetric(q(d, 0.5), "direct-p50-µs")
		b.ReportMetric(q(p, 0.5), "proxy-p50-µs")
	})
	for _, via := range []struct{ name, addr string }{{"direct", direct}, {"proxy", proxied}} {
		b.Run("throughput/"+via.name, func(b *testing.B) {
			c := newClient()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r := send(context.Background(), c, via.addr, plain(), nil); r.err != nil {
						b.Error(r.err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// timed is the latency of one plain completion, whole body read.
func timed(b *testing.B, c *http.Client, addr string) time.Duration {
	b.Helper()
	r := send(context.Background(), c, addr, plain(), nil)
	if r.err != nil {
		b.Fatal(r.err)
	}
	return r.end.Sub(r.start)
}

// BenchmarkWeightChange measures how long traffic takes to follow a weight change
// (target: 1 s): from the write of the desired ConfigMap to the first answer of the
// cohort the change gives every request, while 8 clients send plain completions
// without pause. Each iteration moves all traffic to the other cohort, then waits
// until the reports say it is in effect. Reported: the mean and the longest.
//
// Run: go test ./test/haproxy -run '^$' -bench BenchmarkWeightChange -benchtime 50x
func BenchmarkWeightChange(b *testing.B) {
	e := getEnv(b)
	g := e.newGraph(b)
	a, c := startFrontend(b, "aaaa0001"), startFrontend(b, "cccc0003")
	split := func(toC bool) traffic.Traffic {
		wa, wc := int32(100), int32(0)
		if toC {
			wa, wc = 0, 100
		}
		return g.traffic([]traffic.Cohort{g.cohort(a, wa), g.cohort(c, wc)}, nil)
	}
	g.startPods(b, split(false), 1)
	g.inEffect(b, split(false))

	var target atomic.Value // the cohort a change sends every request to
	var since, first atomic.Int64
	target.Store("")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := newClient()
			for ctx.Err() == nil {
				r := send(ctx, client, g.pods[0].Entry, plain(), nil)
				if r.err == nil && r.cohort == target.Load() && r.start.UnixNano() >= since.Load() {
					first.CompareAndSwap(0, r.end.UnixNano())
				}
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()

	var took []time.Duration
	toC := false
	for b.Loop() {
		toC = !toC
		tr := split(toC)
		first.Store(0)
		target.Store(map[bool]string{true: c.cohort, false: a.cohort}[toC])
		since.Store(time.Now().UnixNano())
		written := g.write(b, tr)
		eventually(b, 10*time.Second, "the first answer of the cohort weighted", func() bool { return first.Load() != 0 })
		took = append(took, time.Unix(0, first.Load()).Sub(written))
		g.inEffect(b, tr)
	}
	slices.Sort(took)
	var sum time.Duration
	for _, d := range took {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(took))/1000, "follow-mean-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "follow-max-ms")
}
