package render_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/render"
)

// TestReadyEndpoints: the discovery daemon's readiness index (daemon/state.rs): only
// ready endpoints with a named target, only slices the matcher takes, every uid of a
// name (the caller fails a name with two closed).
func TestReadyEndpoints(t *testing.T) {
	ep := func(name, uid string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
			TargetRef: &corev1.ObjectReference{Name: name, UID: typesUID("u-" + uid)}}
	}
	labelled := map[string]string{render.LabelDiscoveryEnabled: "true", render.LabelDiscoveryBackend: render.DiscoveryKubernetes}
	slices := []discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Labels: labelled}, Endpoints: []discoveryv1.Endpoint{ep("a", "1", true), ep("b", "2", false), ep("c", "3", true), {Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}},
		{ObjectMeta: metav1.ObjectMeta{Labels: labelled}, Endpoints: []discoveryv1.Endpoint{ep("c", "4", true)}},
		{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{render.LabelDiscoveryEnabled: "true"}}, Endpoints: []discoveryv1.Endpoint{ep("d", "5", true)}},
	}
	got := render.ReadyEndpoints(slices, render.DiscoveryLabelled)
	if len(got) != 2 || len(got["a"]) != 1 || len(got["c"]) != 2 || got["b"] != nil || got["d"] != nil {
		t.Errorf("index %v: want a (one uid) and c (two uids, failed closed by the caller); b not ready, d in a slice with one discovery label", got)
	}
}

func typesUID(s string) k8stypes.UID { return k8stypes.UID(s) }

// TestAcceptsNamespace: matches_with_prefix_mode (lib/llm/src/namespace.rs).
func TestAcceptsNamespace(t *testing.T) {
	for _, c := range []struct {
		ns            string
		strict, loose bool
	}{
		{"ns-g", true, true},
		{"ns-g-1a2b3c4d", true, true},
		{"ns-g-legacy", true, true},
		{"ns-g-1a2b3c4d5e", false, true}, // 10 characters: an earlier operator's hash
		{"ns-g-1A2B3C4D", false, true},
		{"ns-g2-1a2b3c4d", false, false}, // a sibling DGD
		{"ns-gx", false, false},
	} {
		if got := render.AcceptsNamespace("ns-g", c.ns, true); got != c.strict {
			t.Errorf("strict %q: %v", c.ns, got)
		}
		if got := render.AcceptsNamespace("ns-g", c.ns, false); got != c.loose {
			t.Errorf("loose %q: %v", c.ns, got)
		}
	}
}
