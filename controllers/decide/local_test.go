package decide

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/traffic"
)

// TestLocalCohort: the cohort the frontend's Service sends in-cluster clients to while
// the provider does not own it (a Gateway's HTTPRoute; a proxy not serving yet) is
// never one whose pool cannot serve, follows the weight in effect, and does not flap
// on a tie.
func TestLocalCohort(t *testing.T) {
	const stable, canary = "aaaaaaaa", "bbbbbbbb"
	cohorts := func(canaryRoutable bool) []cohortState {
		return []cohortState{{hash: stable, number: 1, routable: true}, {hash: canary, number: 2, routable: canaryRoutable}}
	}
	asked := func(s, c int32) traffic.Traffic {
		return traffic.Traffic{Entry: "g-frontend", Cohorts: []traffic.Cohort{{Hash: stable, Weight: s}, {Hash: canary, Weight: c}}}
	}
	selecting := func(hash string) *view {
		v := &view{Snapshot: &Snapshot{}}
		if hash != "" {
			v.Objects.Services = []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "g-frontend"},
				Spec: corev1.ServiceSpec{Selector: map[string]string{v1alpha1.LabelWorkerHash: hash}}}}
		}
		return v
	}
	for _, tc := range []struct {
		name     string
		v        *view
		f        front
		routable bool
		want     string
	}{
		{"the canary asked 100% but not routable: the stable", selecting(""), front{t: asked(0, 100)}, false, stable},
		{"the canary routable and asked 100%, nothing in effect yet: the canary", selecting(stable), front{t: asked(0, 100)}, true, canary},
		{"in effect 75/25: the stable", selecting(canary), front{t: asked(0, 100), effect: traffic.Effect{Weights: map[string]int32{stable: 75, canary: 25}}}, true, stable},
		{"in effect 25/75: the canary", selecting(stable), front{t: asked(100, 0), effect: traffic.Effect{Weights: map[string]int32{stable: 25, canary: 75}}}, true, canary},
		{"a tie keeps what the Service selects (the canary)", selecting(canary), front{t: asked(50, 50), effect: traffic.Effect{Weights: map[string]int32{stable: 50, canary: 50}}}, true, canary},
		{"a tie keeps what the Service selects (the stable)", selecting(stable), front{t: asked(50, 50), effect: traffic.Effect{Weights: map[string]int32{stable: 50, canary: 50}}}, true, stable},
		{"a tie with nothing selected: the older revision", selecting(""), front{t: asked(50, 50)}, true, stable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := localCohort(tc.v, tc.f, cohorts(tc.routable)); got != tc.want {
				t.Errorf("localCohort = %q, want %q", got, tc.want)
			}
		})
	}
	if got := localCohort(selecting(""), front{t: asked(100, 0)}, []cohortState{{hash: stable}, {hash: canary}}); got != "" {
		t.Errorf("no cohort routable: %q, want \"\" (the frontend's pods)", got)
	}
}
