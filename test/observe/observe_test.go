package observe

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestTookAway: a gap is the operator's only when a pod the frontend routed to is gone
// or terminating.
func TestTookAway(t *testing.T) {
	now := metav1.Now()
	pod := func(uid string, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	routed := map[types.UID]string{"a": "a", "b": "b"}
	for name, tc := range map[string]struct {
		pods []corev1.Pod
		want bool
	}{
		"every routed pod runs (discovery lags)": {[]corev1.Pod{pod("a", false), pod("b", false), pod("c", false)}, false},
		"a routed pod terminates":                {[]corev1.Pod{pod("a", false), pod("b", true)}, true},
		"a routed pod is gone":                   {[]corev1.Pod{pod("a", false), pod("c", false)}, true},
	} {
		if got := tookAway(routed, tc.pods); got != tc.want {
			t.Errorf("%s: tookAway = %v, want %v", name, got, tc.want)
		}
	}
}
