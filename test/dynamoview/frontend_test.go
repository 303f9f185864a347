package dynamoview

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestNewNamespaceFilter(t *testing.T) {
	cases := []struct {
		namespace, prefix string
		want              NamespaceFilter
	}{
		{"", "", NamespaceFilter{Kind: FilterGlobal}},
		{"dynamo", "", NamespaceFilter{Kind: FilterGlobal}},
		{"myns-dgd", "", NamespaceFilter{Kind: FilterExact, Value: "myns-dgd"}},
		{"myns-dgd", "dynamo", NamespaceFilter{Kind: FilterGlobal}},
		{"other", "myns-dgd", NamespaceFilter{Kind: FilterPrefix, Value: "myns-dgd"}},
	}
	for _, tc := range cases {
		if got := NewNamespaceFilter(tc.namespace, tc.prefix); got != tc.want {
			t.Errorf("NewNamespaceFilter(%q, %q) = %+v, want %+v", tc.namespace, tc.prefix, got, tc.want)
		}
	}
}

func TestMatchesWithPrefixMode(t *testing.T) {
	p := NamespaceFilter{Kind: FilterPrefix, Value: "p"}
	cases := []struct {
		filter NamespaceFilter
		ns     string
		strict bool
		want   bool
	}{
		// Strict (WorkerGeneration) mode: p, p-legacy, p-<8 lowercase hex>.
		{p, "p", true, true},
		{p, "p-deadbeef", true, true},
		{p, "p-legacy", true, true},
		{p, "p-DEADBEEF", true, false},
		{p, "p-1234567", true, false},
		{p, "p-bar", true, false},
		{p, "p-7c9f8d2b4x", true, false},
		{p, "p-7c9f8d2b40", true, false},
		{p, "p-1a2b3c4g", true, false},
		{p, "p-bar-1a2b3c4d", true, false},
		{p, "pdeadbeef", true, false},
		{p, "q-deadbeef", true, false},
		// Literal mode: p or p-… with a "-" boundary.
		{p, "p", false, true},
		{p, "p-bar", false, true},
		{p, "p-DEADBEEF", false, true},
		{p, "pbar", false, false},
		{NamespaceFilter{Kind: FilterPrefix, Value: "myns-dgd"}, "myns-dgd2", false, false},
		{NamespaceFilter{Kind: FilterPrefix, Value: "myns-dgd"}, "myns-dgd2", true, false},
		{NamespaceFilter{Kind: FilterPrefix, Value: "myns-dgd"}, "myns-dgd-abc123", false, true},
		{NamespaceFilter{Kind: FilterPrefix, Value: "myns-"}, "myns-dgd2", false, true},
		// Exact and Global ignore the mode.
		{NamespaceFilter{Kind: FilterExact, Value: "p"}, "p", true, true},
		{NamespaceFilter{Kind: FilterExact, Value: "p"}, "p-deadbeef", true, false},
		{NamespaceFilter{Kind: FilterGlobal}, "anything", true, true},
	}
	for _, tc := range cases {
		if got := tc.filter.MatchesWithPrefixMode(tc.ns, tc.strict); got != tc.want {
			t.Errorf("%+v.MatchesWithPrefixMode(%q, strict=%v) = %v, want %v", tc.filter, tc.ns, tc.strict, got, tc.want)
		}
	}
}

func TestEvaluateReadiness(t *testing.T) {
	pre := ReadinessUnit{WorkerType: WorkerPrefill, LiveCount: 1, Needs: [][]WorkerType{{WorkerDecode}}}
	dec := ReadinessUnit{WorkerType: WorkerDecode, LiveCount: 1, Needs: [][]WorkerType{{WorkerPrefill}}}
	dead := func(u ReadinessUnit) ReadinessUnit { u.LiveCount = 0; return u }
	cases := []struct {
		name        string
		units       []ReadinessUnit
		wantReady   bool
		wantMissing []WorkerType
	}{
		{"empty namespace", nil, false, nil},
		{"aggregated alone", []ReadinessUnit{{WorkerType: WorkerAggregated, LiveCount: 1}}, true, nil},
		{"prefill and decode", []ReadinessUnit{pre, dec}, true, nil},
		{"prefill alone", []ReadinessUnit{pre}, false, []WorkerType{WorkerDecode}},
		{"prefill live, decode dead", []ReadinessUnit{pre, dead(dec)}, false, []WorkerType{WorkerDecode}},
		{"aggregated live plus dead encode", []ReadinessUnit{{WorkerType: WorkerAggregated, LiveCount: 1}, {WorkerType: WorkerEncode}}, false, []WorkerType{WorkerEncode}},
		{"needs satisfied by a second alternative", []ReadinessUnit{
			{WorkerType: WorkerDecode, LiveCount: 1, Needs: [][]WorkerType{{WorkerPrefill}, {WorkerEncode}}},
			{WorkerType: WorkerEncode, LiveCount: 1}}, true, nil},
		{"legacy card: any live unit", []ReadinessUnit{{LiveCount: 1}, dead(dec)}, true, nil},
		{"legacy card: nothing live", []ReadinessUnit{{}}, false, nil},
		{"duplicate live decode sets do not block", []ReadinessUnit{pre, dec, dec}, true, nil},
	}
	for _, tc := range cases {
		ready, missing := EvaluateReadiness(tc.units)
		if ready != tc.wantReady || !reflect.DeepEqual(missing, tc.wantMissing) {
			t.Errorf("%s: ready=%v missing=%v, want %v %v", tc.name, ready, missing, tc.wantReady, tc.wantMissing)
		}
	}
}

func TestFrontendGenerations(t *testing.T) {
	const base = "myns-dgd"
	cases := []struct {
		name        string
		pods        []corev1.Pod
		prefix      string
		strict      bool
		want        map[string]bool // Dynamo namespace -> Ready
		wantWorkers map[string]map[WorkerType]int
		wantRejects []string
	}{
		{
			name:   "prefill and decode in one namespace: ready",
			pods:   []corev1.Pod{prefillWorker("pf-0", base, "deadbeef"), decodeWorker("dc-0", base, "deadbeef"), decodeWorker("dc-1", base, "deadbeef")},
			prefix: base, strict: true,
			want:        map[string]bool{"myns-dgd-deadbeef": true},
			wantWorkers: map[string]map[WorkerType]int{"myns-dgd-deadbeef": {WorkerPrefill: 1, WorkerDecode: 2}},
		},
		{
			name:   "prefill alone: not ready",
			pods:   []corev1.Pod{prefillWorker("pf-0", base, "deadbeef")},
			prefix: base, strict: true,
			want:        map[string]bool{"myns-dgd-deadbeef": false},
			wantWorkers: map[string]map[WorkerType]int{"myns-dgd-deadbeef": {WorkerPrefill: 1}},
		},
		{
			name:   "aggregated alone: ready",
			pods:   []corev1.Pod{vllmWorker("agg-0", base, "deadbeef")},
			prefix: base, strict: true,
			want:        map[string]bool{"myns-dgd-deadbeef": true},
			wantWorkers: map[string]map[WorkerType]int{"myns-dgd-deadbeef": {WorkerAggregated: 1}},
		},
		{
			name:   "prefill and decode of different generations pair with nobody",
			pods:   []corev1.Pod{prefillWorker("pf-0", base, "aaaaaaaa"), decodeWorker("dc-0", base, "bbbbbbbb")},
			prefix: base, strict: true,
			want: map[string]bool{"myns-dgd-aaaaaaaa": false, "myns-dgd-bbbbbbbb": false},
		},
		{
			name:   "strict frontend ignores a 10-character suffix and a sibling DGD",
			pods:   []corev1.Pod{vllmWorker("a-0", base, "7c9f8d2b4x"), vllmWorker("b-0", base+"2", "deadbeef"), vllmWorker("c-0", base, "deadbeef")},
			prefix: base, strict: true,
			want:        map[string]bool{"myns-dgd-deadbeef": true},
			wantRejects: []string{"myns-dgd-7c9f8d2b4x", "myns-dgd2-deadbeef"},
		},
		{
			name:   "literal frontend takes any p-… suffix but not a sibling without boundary",
			pods:   []corev1.Pod{vllmWorker("a-0", base, "7c9f8d2b4x"), vllmWorker("b-0", base+"2", "deadbeef")},
			prefix: base, strict: false,
			want:        map[string]bool{"myns-dgd-7c9f8d2b4x": true},
			wantRejects: []string{"myns-dgd2-deadbeef"},
		},
		{
			name:   "no prefix: Global",
			pods:   []corev1.Pod{vllmWorker("a-0", base, "deadbeef"), vllmWorker("b-0", "other", "")},
			prefix: "", strict: true,
			want: map[string]bool{"myns-dgd-deadbeef": true, "other": true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fv := computeHealthy(t, tc.pods...).Frontend(testNs, tc.prefix, tc.strict)
			got := map[string]bool{}
			for _, g := range fv.Generations {
				got[g.Namespace] = g.Ready
				if !reflect.DeepEqual(g.Models, []string{"Qwen/Qwen3-0.6B"}) {
					t.Errorf("%s: Models = %v", g.Namespace, g.Models)
				}
				if w, ok := tc.wantWorkers[g.Namespace]; ok && !reflect.DeepEqual(g.Workers, w) {
					t.Errorf("%s: Workers = %v, want %v", g.Namespace, g.Workers, w)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("generations = %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(fv.Rejected, tc.wantRejects) {
				t.Errorf("Rejected = %v, want %v", fv.Rejected, tc.wantRejects)
			}
			ready := 0
			for _, r := range tc.want {
				if r {
					ready++
				}
			}
			if n := len(fv.ReadyGenerations()); n != ready {
				t.Errorf("ReadyGenerations: %d, want %d", n, ready)
			}
		})
	}
}

func TestFrontendDetails(t *testing.T) {
	pf := prefillWorker("pf-0", "myns-dgd", "deadbeef")
	dc := decodeWorker("dc-0", "myns-dgd", "deadbeef")
	fe := frontendPod("fe-0", "myns-dgd", true)
	slices, dwms := healthy(t, pf, dc, fe)

	// A decode pod whose DWM lost its Endpoint record has a card but is not live.
	md := dwms[1].Object["spec"].(map[string]interface{})["data"].(map[string]interface{})
	md["endpoints"] = map[string]interface{}{}
	v := Compute([]corev1.Pod{pf, dc, fe}, slices, dwms)

	fv := v.FrontendFor(Frontends([]corev1.Pod{pf, dc, fe})[0])
	if fv.Filter != (NamespaceFilter{Kind: FilterPrefix, Value: "myns-dgd"}) || !fv.Strict || fv.K8sNamespace != testNs {
		t.Fatalf("FrontendFor settings: %+v", fv)
	}
	g, ok := fv.Generation("myns-dgd-deadbeef")
	if !ok || g.Ready || !reflect.DeepEqual(g.Missing, []WorkerType{WorkerDecode}) || g.Workers[WorkerDecode] != 0 {
		t.Errorf("generation = %+v, want not ready, missing Decode", g)
	}
	if _, ok := fv.Generation("nope"); ok {
		t.Errorf("unknown generation found")
	}
}

func TestFrontendLegacyAndBadCards(t *testing.T) {
	pf := prefillWorker("pf-0", "myns-dgd", "legacy")
	slices, dwms := healthy(t, pf)
	// Strip worker_type/needs and mark model_type Prefill: a legacy prefill card.
	cards, _, _ := unstructured.NestedMap(dwms[0].Object, "spec", "data", "model_cards")
	for k := range cards {
		_ = unstructured.SetNestedField(dwms[0].Object, map[string]interface{}{
			"display_name": "M", "model_type": []interface{}{"Prefill"}}, "spec", "data", "model_cards", k, "card_json")
	}
	bad := decodeWorker("dc-0", "myns-dgd", "legacy")
	s2, d2 := healthy(t, bad)
	for k := range d2[0].Object["spec"].(map[string]interface{})["data"].(map[string]interface{})["model_cards"].(map[string]interface{}) {
		_ = unstructured.SetNestedField(d2[0].Object, "{not json", "spec", "data", "model_cards", k, "card_json")
	}
	v := Compute(nil, append(slices, s2...), append(dwms, d2...))
	fv := v.Frontend(testNs, "myns-dgd", true)
	g, ok := fv.Generation("myns-dgd-legacy")
	if !ok || g.Ready || g.Workers[WorkerPrefill] != 1 || !reflect.DeepEqual(g.Missing, []WorkerType{WorkerDecode}) {
		t.Errorf("legacy prefill generation = %+v, want Prefill needing Decode", g)
	}
	if len(fv.Dropped) != 1 {
		t.Errorf("Dropped = %v, want the undecodable card", fv.Dropped)
	}
}
