package observe

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestUnproven: a state with no ready generation is discovery lag only while every pod
// the frontend routed to runs and every Service and EndpointSlice it routed through is
// the same object and still lists it; each other case names what went.
func TestUnproven(t *testing.T) {
	now := metav1.Now()
	pod := func(uid string, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-" + uid, UID: types.UID(uid)}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	slice := func(name, uid, svc string, ready bool, pods ...string) discoveryv1.EndpointSlice {
		s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid),
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}}}
		for _, p := range pods {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "pod-" + p, UID: types.UID(p)}})
		}
		return s
	}
	service := func(name string) corev1.Service { return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	// The frontend last routed to pods a and b through slice s-1 of Service old.
	before := []discoveryv1.EndpointSlice{slice("s-1", "u1", "old", true, "a", "b")}
	routed := map[types.UID]route{"a": {pod: "pod-a"}, "b": {pod: "pod-b"}}
	addSlices(routed, before)
	pods := []corev1.Pod{pod("a", false), pod("b", false), pod("c", false)}
	for name, tc := range map[string]struct {
		pods   []corev1.Pod
		slices []discoveryv1.EndpointSlice
		svcs   []corev1.Service
		want   string // a substring of the reason; "" when proven lag
	}{
		"everything still there, endpoints not ready (lag)": {pods, []discoveryv1.EndpointSlice{slice("s-1", "u1", "old", false, "a", "b")}, []corev1.Service{service("old")}, ""},
		"a routed pod terminates":                           {[]corev1.Pod{pod("a", false), pod("b", true)}, before, []corev1.Service{service("old")}, "pod pod-b the frontend routed to is gone or terminating"},
		"a routed pod is gone":                              {[]corev1.Pod{pod("a", false)}, before, []corev1.Service{service("old")}, "pod pod-b the frontend routed to is gone"},
		"the Service is deleted":                            {pods, before, nil, "Service old that routed to pod pod-a is gone"},
		"the slice is gone":                                 {pods, nil, []corev1.Service{service("old")}, "EndpointSlice s-1 that routed to pod pod-a is gone"},
		"the slice was replaced":                            {pods, []discoveryv1.EndpointSlice{slice("s-1", "u2", "old", true, "a", "b")}, []corev1.Service{service("old")}, "EndpointSlice s-1 that routed to pod pod-a is gone"},
		"the slice dropped a pod":                           {pods, []discoveryv1.EndpointSlice{slice("s-1", "u1", "old", true, "a")}, []corev1.Service{service("old")}, "EndpointSlice s-1 no longer lists pod pod-b"},
	} {
		got := unproven(routed, tc.pods, tc.slices, tc.svcs)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: unproven = %q, want %q", name, got, tc.want)
		}
	}
}

// TestCloseGap: a gap proven at every state is counted with its states and length; a
// failed one is not.
func TestCloseGap(t *testing.T) {
	o := &Observer{}
	o.gap = &gap{start: time.Now().Add(-time.Second), states: 3}
	o.closeGap()
	o.gap = &gap{start: time.Now(), states: 2, failed: true}
	o.closeGap()
	o.closeGap()
	if s := o.stats; s.LagGaps != 1 || s.LagGapStates != 3 || s.LongestLagGap < time.Second || s.LagGapTime != s.LongestLagGap || o.gap != nil {
		t.Fatalf("stats %+v, gap %v", s, o.gap)
	}
}
