package e2e

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// TestCheckIsolation: the watcher's isolation check fires on a pod whose namespace
// suffix is not its revision's and on two revisions sharing a Dynamo namespace, and not
// on revisions in their own namespaces.
func TestCheckIsolation(t *testing.T) {
	pod := func(name, ns, suffix string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Env: []corev1.EnvVar{{Name: v1alpha1.EnvDynNamespace, Value: ns}, {Name: v1alpha1.EnvDynNamespaceWorkerSuffix, Value: suffix}}}}}}
	}
	for name, tc := range map[string]struct {
		pods   []*corev1.Pod
		hashes []string
		want   []string // a substring of each violation, in order
	}{
		"each revision in its own namespace": {[]*corev1.Pod{pod("a", "ns-g", "h1"), pod("b", "ns-g", "h2")}, []string{"h1", "h2"}, nil},
		"a pod with another revision's suffix": {[]*corev1.Pod{pod("a", "ns-g", "h1"), pod("b", "ns-g", "h1")}, []string{"h1", "h2"},
			[]string{`pod b of revision h2 has DYN_NAMESPACE_WORKER_SUFFIX="h1"`, "revisions h1 and h2 share Dynamo namespace ns-g-h1"}},
		"two revisions whose namespaces collide by value": {[]*corev1.Pod{pod("a", "ns-g-x", "h1"), pod("b", "ns-g", "x-h1")}, []string{"h1", "x-h1"},
			[]string{"revisions h1 and x-h1 share Dynamo namespace ns-g-x-h1"}},
	} {
		t.Run(name, func(t *testing.T) {
			w := &Watcher{}
			seen := map[string]string{}
			for i, p := range tc.pods {
				w.checkIsolation(p, tc.hashes[i], seen)
			}
			v := w.Violations()
			if len(v) != len(tc.want) {
				t.Fatalf("got %q, want %d violations containing %q", v, len(tc.want), tc.want)
			}
			for i := range v {
				if !strings.Contains(v[i], tc.want[i]) {
					t.Errorf("violation %d: %q, want it to contain %q", i, v[i], tc.want[i])
				}
			}
		})
	}
}
