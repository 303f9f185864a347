package proxy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

func versionOf(t *testing.T, tr traffic.Traffic) string {
	t.Helper()
	s, _, err := proxy.SplitOf(tr)
	if err != nil {
		t.Fatal(err)
	}
	return s.Version()
}

// TestEffect judges a 70/30 split from the agents' reports.
func TestEffect(t *testing.T) {
	tr := trafficOf(70, 30)
	want := versionOf(t, tr)
	old := versionOf(t, trafficOf(90, 10))
	applied := report{version: want, weights: map[string]int32{stable: 70, candidate: 30},
		inFlight: map[string]int64{stable: 4, candidate: 2}}
	lagging := report{version: old, weights: map[string]int32{stable: 90, candidate: 10}, inFlight: map[string]int64{stable: 3}}
	pods := []metav1.PartialObjectMetadata{pod("llm-frontend-proxy-a"), pod("llm-frontend-proxy-b")}
	cases := map[string]struct {
		traffic  traffic.Traffic
		observed observed
		want     traffic.Effect
	}{
		"in effect": {tr, observed{ready: 2, pods: pods,
			reports: map[string]string{"llm-frontend-proxy-a": applied.json(), "llm-frontend-proxy-b": applied.json()}},
			traffic.Effect{InEffect: true, Serving: true, Weights: map[string]int32{stable: 70, candidate: 30},
				InFlight: map[string]int64{stable: 8, candidate: 4}, InFlightKnown: true}},
		// The header route in effect is judged from the reports, whatever t asks (a
		// step asks it with a Traffic of no cohorts): the cohort, and the split's header.
		"a header route in effect": {tr, observed{ready: 1, pods: pods[:1], reports: map[string]string{
			"llm-frontend-proxy-a": report{version: old, weights: map[string]int32{stable: 70, candidate: 30}, pinned: candidate}.json()}},
			traffic.Effect{Serving: true, Weights: map[string]int32{stable: 70, candidate: 30}, HeaderRoute: &traffic.HeaderRoute{Hash: candidate},
				InFlight: map[string]int64{}, InFlightKnown: true,
				Message: `proxy pod llm-frontend-proxy-a applied split "` + old + `", not ` + want}},
		"a lagging pod": {tr, observed{ready: 2, pods: pods,
			reports: map[string]string{"llm-frontend-proxy-a": applied.json(), "llm-frontend-proxy-b": lagging.json()}},
			traffic.Effect{Serving: true, InFlight: map[string]int64{stable: 7, candidate: 2}, InFlightKnown: true,
				Message: `proxy pod llm-frontend-proxy-b applied split "` + old + `", not ` + want}},
		"a lagging pod that cannot apply": {tr, observed{ready: 2, pods: pods[:1], reports: map[string]string{
			"llm-frontend-proxy-a": report{version: old, weights: map[string]int32{stable: 90, candidate: 10}, err: "runtime API: connection refused"}.json()}},
			traffic.Effect{Serving: true, Weights: map[string]int32{stable: 90, candidate: 10}, InFlight: map[string]int64{}, InFlightKnown: true,
				Message: `proxy pod llm-frontend-proxy-a applied split "` + old + `", not ` + want + ` (runtime API: connection refused)`}},
		"a pod that has not reported": {tr, observed{ready: 1, pods: pods,
			reports: map[string]string{"llm-frontend-proxy-a": applied.json()}},
			traffic.Effect{Serving: true, InFlight: map[string]int64{stable: 4, candidate: 2},
				Message: "proxy pod llm-frontend-proxy-b has not reported"}},
		// A terminating pod's version does not hold the split back, but the streams it
		// still finishes are in flight (3 more on the stable cohort).
		"a terminating pod ignored but its streams counted": {tr, observed{ready: 1, pods: []metav1.PartialObjectMetadata{pod("llm-frontend-proxy-a"), terminating("llm-frontend-proxy-b")},
			reports: map[string]string{"llm-frontend-proxy-a": applied.json(), "llm-frontend-proxy-b": lagging.json()}},
			traffic.Effect{InEffect: true, Serving: true, Weights: map[string]int32{stable: 70, candidate: 30},
				InFlight: map[string]int64{stable: 7, candidate: 2}, InFlightKnown: true}},
		"no pods": {tr, observed{reports: map[string]string{"llm-frontend-proxy-a": applied.json()}},
			traffic.Effect{InFlight: map[string]int64{}, InFlightKnown: true, Message: "Deployment llm-frontend-proxy has no live proxy pod"}},
		"a report of a pod that no longer exists ignored": {tr, observed{ready: 1, pods: pods[:1],
			reports: map[string]string{"llm-frontend-proxy-a": applied.json(), "llm-frontend-proxy-gone": lagging.json()}},
			traffic.Effect{InEffect: true, Serving: true, Weights: map[string]int32{stable: 70, candidate: 30},
				InFlight: map[string]int64{stable: 4, candidate: 2}, InFlightKnown: true}},
		"no status ConfigMap yet": {tr, observed{pods: pods[:1]},
			traffic.Effect{InFlight: map[string]int64{}, Message: "proxy pod llm-frontend-proxy-a has not reported"}},
		"a report that does not decode": {tr, observed{ready: 1, pods: pods[:1], reports: map[string]string{"llm-frontend-proxy-a": "{"}},
			traffic.Effect{InFlight: map[string]int64{},
				Message: "proxy pod llm-frontend-proxy-a's report does not decode: unexpected end of JSON input"}},
		"not ready: not serving": {tr, observed{ready: 0, pods: pods[:1], reports: map[string]string{"llm-frontend-proxy-a": applied.json()}},
			traffic.Effect{InEffect: true, Weights: map[string]int32{stable: 70, candidate: 30},
				InFlight: map[string]int64{stable: 4, candidate: 2}, InFlightKnown: true}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := proxy.Provider{}.Effect(c.traffic, c.observed.build(c.traffic))
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestEffectDrain: an abort's two steps. At 100/0 the candidate drains: in effect once
// both pods applied it, with the candidate's requests still in flight summed over both;
// then, removed from the split, a pod still draining it reports it removing, which
// counts in InFlight but not in the weights.
func TestEffectDrain(t *testing.T) {
	pods := []metav1.PartialObjectMetadata{pod("a"), pod("b")}
	atZero := trafficOf(100, 0)
	v := versionOf(t, atZero)
	draining := observed{ready: 2, pods: pods, reports: map[string]string{
		"a": report{version: v, weights: map[string]int32{stable: 100, candidate: 0}, inFlight: map[string]int64{stable: 5, candidate: 3}}.json(),
		"b": report{version: v, weights: map[string]int32{stable: 100, candidate: 0}, inFlight: map[string]int64{candidate: 1}}.json(),
	}}
	got := proxy.Provider{}.Effect(atZero, draining.build(atZero))
	want := traffic.Effect{InEffect: true, Serving: true, Weights: map[string]int32{stable: 100, candidate: 0},
		InFlight: map[string]int64{stable: 5, candidate: 4}, InFlightKnown: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("at 100/0 (-want +got):\n%s", diff)
	}

	removed := trafficOf(100, 0, func(t *traffic.Traffic) { t.Cohorts = t.Cohorts[:1] })
	v = versionOf(t, removed)
	lingering := observed{ready: 2, pods: pods, reports: map[string]string{
		"a": report{version: v, weights: map[string]int32{stable: 100}, inFlight: map[string]int64{stable: 2}}.json(),
		"b": report{version: v, weights: map[string]int32{stable: 100, candidate: 0}, inFlight: map[string]int64{candidate: 1},
			removing: []string{candidate}}.json(),
	}}
	got = proxy.Provider{}.Effect(removed, lingering.build(removed))
	want = traffic.Effect{InEffect: true, Serving: true, Weights: map[string]int32{stable: 100},
		InFlight: map[string]int64{stable: 2, candidate: 1}, InFlightKnown: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("removed, b still draining (-want +got):\n%s", diff)
	}
}

// TestEffectCohortWithoutAddress: a cohort not yet routable is left out of the split,
// and the Traffic is not in effect until it is in, even with every pod current.
func TestEffectCohortWithoutAddress(t *testing.T) {
	tr := trafficOf(90, 10, withoutAddress(candidate))
	o := observed{ready: 1, pods: []metav1.PartialObjectMetadata{pod("a")}, reports: map[string]string{
		"a": report{version: versionOf(t, tr), weights: map[string]int32{stable: 90}}.json()}}
	got := proxy.Provider{}.Effect(tr, o.build(tr))
	want := traffic.Effect{Serving: true, Weights: map[string]int32{stable: 90}, InFlight: map[string]int64{}, InFlightKnown: true,
		Message: "cohort " + candidate + " has no address yet (Service llm-frontend-" + candidate + " has no cluster IP), left out of the split"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
