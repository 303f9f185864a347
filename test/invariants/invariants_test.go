package invariants_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/invariants"
)

// pd is prefill R=4 (surge 1, unavailable 1) and decode R=2 (surge 1, unavailable 0):
// the 25%/25% defaults.
var pd = []invariants.Service{
	{Name: "prefill", Role: v1alpha1.ComponentTypePrefill, Replicas: 4, Surge: 1, Unavail: 1},
	{Name: "decode", Role: v1alpha1.ComponentTypeDecode, Replicas: 2, Surge: 1, Unavail: 0},
}

// ws builds workloads from "service/hash=spec/ready" terms.
func ws(terms ...string) []invariants.Workload {
	var out []invariants.Workload
	for _, t := range terms {
		var w invariants.Workload
		key, counts, _ := strings.Cut(t, "=")
		w.Service, w.Hash, _ = strings.Cut(key, "/")
		spec, ready, _ := strings.Cut(counts, "/")
		w.Spec, w.Ready = atoi(spec), atoi(ready)
		out = append(out, w)
	}
	return out
}

func atoi(s string) int32 {
	var n int32
	for _, c := range s {
		n = n*10 + int32(c-'0')
	}
	return n
}

// TestCheck: each of ROLLOUT.md's rules is reported when, and only when, a state
// breaks it.
func TestCheck(t *testing.T) {
	allHeld := map[string]bool{"prefill": true, "decode": true}
	for name, tc := range map[string]struct {
		state   []invariants.Workload
		floorOK map[string]bool
		want    []string // prefixes of the violations, in order; none for a valid state
	}{
		"a valid mid-rollout step": {ws("prefill/a=3/3", "decode/a=2/2", "prefill/b=2/0", "decode/b=1/0"), allHeld, nil},
		"surge: prefill 4+2 > 4+1": {ws("prefill/a=4/4", "decode/a=2/2", "prefill/b=2/0", "decode/b=1/0"), allHeld,
			[]string{"surge: prefill has 6 replicas set, more than 4+1"}},
		"availability: decode 1 ready < 2-0": {ws("prefill/a=4/4", "decode/a=2/1"), allHeld,
			[]string{"availability: decode has 1 ready, fewer than 2-0"}},
		"availability counts no replica above spec (being removed)": {ws("prefill/a=2/4", "decode/a=1/1", "prefill/b=2/0", "decode/b=1/1"), allHeld,
			[]string{"availability: prefill has 2 ready, fewer than 4-1"}},
		"availability is not required before the floor held (a first deploy)": {ws("prefill/a=4/0", "decode/a=2/0"), nil, nil},
		"orphan: a pool with prefill and no decode": {ws("prefill/a=3/3", "decode/a=2/2", "prefill/b=1/0", "decode/b=0/0"), allHeld,
			[]string{"orphan: pool b holds 1 replicas but none of decode"}},
		"orphan: a pool with decode and no prefill": {ws("prefill/a=4/4", "decode/a=1/1", "prefill/b=0/0", "decode/b=1/1"), allHeld,
			[]string{"orphan: pool b holds 1 replicas but none of prefill"}},
		"ratio: |1/4 - 2/2| > 1/2": {ws("prefill/a=4/4", "decode/a=1/1", "prefill/b=1/0", "decode/b=2/1"), allHeld,
			[]string{"ratio: pool b has decode=2/2 and prefill=1/4"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := invariants.Check(pd, tc.state, tc.floorOK)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %d violations starting %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("violation %d: %q, want prefix %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestCheckPrefillHasDecode: prefill without decode is reported in any pool; decode
// without prefill (a pool on its way to zero, prefill going first) is not.
func TestCheckPrefillHasDecode(t *testing.T) {
	for name, tc := range map[string]struct {
		state []invariants.Workload
		want  []string
	}{
		"both roles":                           {ws("prefill/a=3/3", "decode/a=2/2", "prefill/b=1/0", "decode/b=1/0"), nil},
		"decode alone (prefill drained first)": {ws("prefill/a=0/0", "decode/a=1/1", "prefill/b=4/4", "decode/b=2/2"), nil},
		"prefill alone": {ws("prefill/a=4/4", "decode/a=2/2", "prefill/b=1/0", "decode/b=0/0"),
			[]string{"orphan prefill: pool b holds prefill=1 and no decode"}},
		"prefill with no decode workload yet": {ws("prefill/a=4/4", "decode/a=2/2", "prefill/b=1/0"),
			[]string{"orphan prefill: pool b holds prefill=1 and no decode"}},
	} {
		if got := invariants.CheckPrefillHasDecode(pd, tc.state); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
	}
}

func TestMaxSkewAndFloor(t *testing.T) {
	state := ws("prefill/a=4/4", "decode/a=1/1", "prefill/b=1/0", "decode/b=1/0")
	if got := invariants.MaxSkew(pd, state); got != 0.5 {
		t.Errorf("MaxSkew = %v, want 0.5 (pool a: |4/4 - 1/2|)", got)
	}
	if got := invariants.FloorHolds(pd, state); !got["prefill"] || got["decode"] {
		t.Errorf("FloorHolds = %v, want prefill true (4 ready >= 4-1), decode false (1 ready < 2-0)", got)
	}
}

// TestServicesOf: budgets resolve as the planner's ResolveBudgets documents, written
// again here so that the checks do not share the planner's arithmetic.
func TestServicesOf(t *testing.T) {
	d := harness.NewDGD("ns", "g").Disagg(4, 2, "vllm:v1").Obj()
	got := invariants.ServicesOf(d)
	want := []invariants.Service{
		{Name: "decode", Role: v1alpha1.ComponentTypeDecode, Replicas: 2, Surge: 1, Unavail: 0},
		{Name: "prefill", Role: v1alpha1.ComponentTypePrefill, Replicas: 4, Surge: 1, Unavail: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("defaults: got %+v, want %+v", got, want)
	}
	d = harness.NewDGD("ns", "g").Disagg(4, 2, "vllm:v1").Rollout("0", "0%").Obj()
	d.Spec.Services["prefill"].Annotations = map[string]string{v1alpha1.AnnotationMaxUnavailable: "50%"}
	got = invariants.ServicesOf(d)
	if got[0].Surge != 1 || got[0].Unavail != 0 || got[1].Surge != 0 || got[1].Unavail != 2 {
		t.Fatalf("both 0 -> surge 1 for decode; prefill annotation 50%% -> unavailable 2: got %+v", got)
	}
}
