package haproxy

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// The rollout's cohorts.
const (
	stableHash    = "6d5f7c1a"
	candidateHash = "9b0e44f2"
)

// phase is one split of the rollout, as the controller would ask for it.
type phase struct {
	name    string
	weights map[string]int32 // by cohort; a cohort absent is not in the split
	pinned  bool             // the header route sends to the candidate
	drain   string           // once in effect, wait until this cohort serves nothing
	gone    string           // once in effect, wait until no proxy still has this cohort
	retry   bool             // the candidate is the recreated one
	// written is when the desired ConfigMap was written, inEffect when the reports
	// said every proxy pod applied it.
	written, inEffect time.Time
}

// Each phase runs until this many requests started after it was in effect: at a
// weight of 10%, the split's 95% unpinned requests measure the share to ±1.4 points
// (two standard deviations of a binomial), within the ±3 the test allows, and HAProxy's
// round robin is closer than a binomial.
const perPhase = 1800

// TestRollout drives a whole rollout through two proxy pods while 500 clients send at
// least 20,000 chat completions, half of them 1-5 s SSE streams: three weight steps
// with a header route to the candidate, an abort (the stable at 100%, the candidate
// at 0 until it drained, then removed), a retry (the candidate's Service recreated at
// another address), and completion (the stable at 0, drained, removed). Every split is
// rendered by the provider and written as the controller writes it; each phase starts
// when the agents' reports say it is in effect. It asserts: no request failed or was
// cut; in each phase, the share of each cohort within 3 points of its weight; every
// request with the header route's header answered by the candidate while the route is
// in effect; no request begun after a cohort's weight 0 (or removal) was in effect, and
// before a later split gave it weight again, answered by that cohort.
func TestRollout(t *testing.T) {
	e := getEnv(t)
	r := &rollout{g: e.newGraph(t), phases: rolloutPhases(),
		stable: startFrontend(t, stableHash), candidate: startFrontend(t, candidateHash),
		recreated: startFrontend(t, candidateHash)}
	begin := time.Now()
	r.g.startPods(t, r.traffic(0), 2)
	r.phases[0].written = begin
	l := startLoad(r.g.entries(), 500)
	defer l.finish()
	for i := range r.phases {
		r.step(t, i, l, begin)
	}
	l.waitStarted(t, 0, 20000)
	results := l.finish()
	t.Logf("%d requests (%d streams) in %s", len(results), countStreams(results), time.Since(begin).Round(time.Second))

	checkWhole(t, results)
	checkSplit(t, r.phases, results)
	checkPinned(t, r.phases, results)
	checkNoLateAnswer(t, r.phases, results)
	reportLags(t, results)
}

// rollout is TestRollout's graph, cohorts and phases.
type rollout struct {
	g                            *graph
	stable, candidate, recreated *frontend
	phases                       []*phase
}

// rolloutPhases: three steps with a header route, an abort (the candidate drained,
// then removed), a retry, and completion (the stable drained, then removed).
func rolloutPhases() []*phase {
	return []*phase{
		{name: "stable", weights: map[string]int32{stableHash: 100}},
		{name: "10%", weights: map[string]int32{stableHash: 90, candidateHash: 10}, pinned: true},
		{name: "30%", weights: map[string]int32{stableHash: 70, candidateHash: 30}, pinned: true},
		{name: "60%", weights: map[string]int32{stableHash: 40, candidateHash: 60}, pinned: true},
		{name: "abort", weights: map[string]int32{stableHash: 100, candidateHash: 0}, drain: candidateHash},
		{name: "aborted", weights: map[string]int32{stableHash: 100}, gone: candidateHash},
		{name: "retry 10%", weights: map[string]int32{stableHash: 90, candidateHash: 10}, pinned: true, retry: true},
		{name: "retry 30%", weights: map[string]int32{stableHash: 70, candidateHash: 30}, pinned: true, retry: true},
		{name: "retry 60%", weights: map[string]int32{stableHash: 40, candidateHash: 60}, pinned: true, retry: true},
		{name: "complete", weights: map[string]int32{stableHash: 0, candidateHash: 100}, drain: stableHash, retry: true},
		{name: "completed", weights: map[string]int32{candidateHash: 100}, gone: stableHash, retry: true},
	}
}

// traffic is phase i's split as the controller asks for it.
func (r *rollout) traffic(i int) traffic.Traffic {
	var cohorts []traffic.Cohort
	for hash, w := range r.phases[i].weights {
		f := r.stable
		switch {
		case hash == candidateHash && r.phases[i].retry:
			f = r.recreated // the candidate's Service was recreated, at another address
		case hash == candidateHash:
			f = r.candidate
		}
		cohorts = append(cohorts, r.g.cohort(f, w))
	}
	var hr *traffic.HeaderRoute
	if r.phases[i].pinned {
		hr = &traffic.HeaderRoute{Name: routeName, Value: routeValue, Hash: candidateHash}
	}
	return r.g.traffic(cohorts, hr)
}

// step writes phase i (the first is written by startPods), waits until it is in
// effect (and its drain or removal done), then lets perPhase requests start.
func (r *rollout) step(t *testing.T, i int, l *load, begin time.Time) {
	ph, tr := r.phases[i], r.traffic(i)
	if i > 0 {
		ph.written = r.g.write(t, tr)
	}
	var eff traffic.Effect
	ph.inEffect, eff = r.g.inEffect(t, tr)
	if want := renderedWeights(t, tr); !maps.Equal(eff.Weights, want) {
		t.Errorf("phase %s: in effect with weights %v, want %v", ph.name, eff.Weights, want)
	}
	if ph.drain != "" {
		drained, _ := r.g.waitEffect(t, tr, "cohort "+ph.drain+" drained", 30*time.Second,
			func(e traffic.Effect) bool { return e.InEffect && e.InFlightKnown && e.InFlight[ph.drain] == 0 })
		checkReportRate(t, r.g, ph, drained)
	}
	if ph.gone != "" {
		r.g.waitEffect(t, tr, "cohort "+ph.gone+" deleted from every proxy", 30*time.Second,
			func(traffic.Effect) bool { return !r.g.reportsMention(ph.gone) })
	}
	t.Logf("phase %-9s written at %6.2fs, in effect %5.1f ms later; %d requests started so far",
		ph.name, ph.written.Sub(begin).Seconds(), float64(ph.inEffect.Sub(ph.written).Microseconds())/1000, l.started.Load())
	l.waitStarted(t, l.started.Load(), perPhase)
}

// renderedWeights are the weights of t's split.
func renderedWeights(t *testing.T, tr traffic.Traffic) map[string]int32 {
	s, _, err := proxy.SplitOf(tr)
	if err != nil {
		t.Fatal(err)
	}
	w := map[string]int32{}
	for _, c := range s.Cohorts {
		w[c.Hash] = c.Weight
	}
	return w
}

// reportsMention: some report in the status ConfigMap still lists the cohort.
func (g *graph) reportsMention(hash string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.status == nil {
		return true
	}
	for _, s := range g.status.Data {
		r, err := proxy.ParseReport(s)
		if _, listed := r.Cohorts[hash]; err != nil || listed {
			return true
		}
	}
	return false
}

func countStreams(rs []outcome) (n int) {
	for _, r := range rs {
		if r.stream {
			n++
		}
	}
	return n
}

// checkWhole: no request failed, every body whole, every stream complete.
func checkWhole(t *testing.T, rs []outcome) {
	var failed []string
	for _, r := range rs {
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("%s (stream %t, cohort %q)", r.err, r.stream, r.cohort))
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d requests failed or were cut, e.g.:\n%s", len(failed), len(rs), strings.Join(failed[:min(10, len(failed))], "\n"))
	}
}

// span is the phases a request may have been routed by: first, the last phase in
// effect when it began; last, the last phase written before the frontend received it
// (before it began, when no answer came). HAProxy routed it at one moment between
// the two, and the split it held then was one of first..last: a request begun just
// before a split is written may reach HAProxy after that split is applied.
func span(phases []*phase, r outcome) (first, last int) {
	routedBy := r.received
	if routedBy.IsZero() {
		routedBy = r.start
	}
	for i, ph := range phases {
		if !ph.inEffect.After(r.start) {
			first = i
		}
		if !ph.written.After(routedBy) {
			last = i
		}
	}
	return first, max(first, last)
}

// window is the requests routed by phase i and no other: begun once it was in effect
// and received by a frontend before phase i+1 was written.
func window(phases []*phase, i int, rs []outcome) []outcome {
	var out []outcome
	for _, r := range rs {
		if first, last := span(phases, r); first == i && last == i && !r.start.Before(phases[i].inEffect) {
			out = append(out, r)
		}
	}
	return out
}

// checkSplit: in each phase, each cohort's share of the requests the split decides
// (all but those the header route pins) is within 3 points of its weight.
func checkSplit(t *testing.T, phases []*phase, rs []outcome) {
	for i, ph := range phases {
		counts, n := map[string]int{}, 0
		for _, r := range window(phases, i, rs) {
			if ph.pinned && r.header == pinnedRequest {
				continue
			}
			counts[r.cohort]++
			n++
		}
		if n < perPhase*9/10 {
			t.Errorf("phase %s: %d requests measured, fewer than %d", ph.name, n, perPhase*9/10)
			continue
		}
		var got []string
		for hash, w := range ph.weights {
			share := 100 * float64(counts[hash]) / float64(n)
			got = append(got, fmt.Sprintf("%s %.1f%% (weight %d)", hash, share, w))
			if math.Abs(share-float64(w)) > 3 {
				t.Errorf("phase %s: cohort %s took %.1f%% of %d requests, weight %d", ph.name, hash, share, n, w)
			}
		}
		for hash := range counts {
			if _, ok := ph.weights[hash]; !ok {
				t.Errorf("phase %s: %d requests answered by %q, not in the split", ph.name, counts[hash], hash)
			}
		}
		sort.Strings(got)
		t.Logf("phase %-9s %5d requests: %s", ph.name, n, strings.Join(got, ", "))
	}
}

// checkPinned: while the header route is in effect, every request with its header
// (the name in any case) is answered by the candidate.
func checkPinned(t *testing.T, phases []*phase, rs []outcome) {
	pinned, wrong, straddled := 0, []string{}, 0
	for i, ph := range phases {
		if !ph.pinned {
			continue
		}
		for _, r := range window(phases, i, rs) {
			if r.header != pinnedRequest {
				continue
			}
			pinned++
			if r.cohort != candidateHash {
				wrong = append(wrong, fmt.Sprintf("phase %s: begun %.1f ms after it was in effect, received %.1f ms after, answered by %q",
					ph.name, ms(r.start.Sub(ph.inEffect)), ms(r.received.Sub(ph.inEffect)), r.cohort))
			}
		}
	}
	for _, r := range rs {
		if first, last := span(phases, r); r.header == pinnedRequest && first != last && (phases[first].pinned || phases[last].pinned) {
			straddled++ // routed before or after the header route changed: either answer is right
		}
	}
	t.Logf("%d requests pinned by the header route, %d answered elsewhere; %d more were sent as the route changed", pinned, len(wrong), straddled)
	if len(wrong) > 0 || pinned < 300 {
		t.Errorf("%d of %d pinned requests answered by another cohort than the candidate (want 0 of at least 300), e.g.:\n%s",
			len(wrong), pinned, strings.Join(wrong[:min(10, len(wrong))], "\n"))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// checkNoLateAnswer: a request may be answered only by a cohort that had a weight
// above 0 (or the header route, for a request with its header) in one of the phases
// it may have been routed by (span): once a cohort's weight 0 is in effect, a request
// begun after that never reaches it until a later split is written.
func checkNoLateAnswer(t *testing.T, phases []*phase, rs []outcome) {
	var late []string
	for _, r := range rs {
		effective, written := span(phases, r)
		allowed := map[string]bool{}
		for _, ph := range phases[effective : written+1] {
			for hash, w := range ph.weights {
				allowed[hash] = allowed[hash] || w > 0
			}
			if ph.pinned && r.header == pinnedRequest {
				allowed[candidateHash] = true
			}
		}
		if r.err == nil && !allowed[r.cohort] {
			late = append(late, fmt.Sprintf("begun at phase %s (in effect) / %s (written), answered by %s",
				phases[effective].name, phases[written].name, r.cohort))
		}
	}
	if len(late) > 0 {
		t.Errorf("%d requests answered by a cohort whose weight 0 was in effect when they began, e.g.:\n%s",
			len(late), strings.Join(late[:min(10, len(late))], "\n"))
	}
}

// reportLags logs the SSE events' delays through the proxy, and fails on one that
// arrived later than two events' interval.
func reportLags(t *testing.T, rs []outcome) {
	var lags []time.Duration
	for _, r := range rs {
		lags = append(lags, r.lags...)
	}
	if len(lags) == 0 {
		t.Error("no SSE event measured")
		return
	}
	slices.Sort(lags)
	at := func(q float64) time.Duration { return lags[int(q*float64(len(lags)-1))].Round(10 * time.Microsecond) }
	t.Logf("%d SSE events: lag median %s, p99 %s, max %s", len(lags), at(0.5), at(0.99), at(1))
	if at(0.99) > 2*eventEvery {
		t.Errorf("1%% of SSE events arrived more than %s after they were sent", at(0.99))
	}
}

// checkReportRate: while a cohort drains, each agent reports its requests in flight
// no more than about once a second: at most one patch a second per pod, plus each
// pod's report of the split.
func checkReportRate(t *testing.T, g *graph, ph *phase, drained time.Time) {
	secs := drained.Sub(ph.written).Seconds()
	n := g.api.patches(ph.written) - g.api.patches(drained.Add(time.Millisecond))
	t.Logf("phase %s: cohort %s drained in %.1f s, %d reports", ph.name, ph.drain, secs, n)
	if limit := len(g.pods) * (int(secs) + 2); n > limit {
		t.Errorf("phase %s: %d reports in %.1f s of drain by %d pods, more than %d", ph.name, n, secs, len(g.pods), limit)
	}
	if n < len(g.pods) {
		t.Errorf("phase %s: %d reports while draining, fewer than one per pod", ph.name, n)
	}
}
