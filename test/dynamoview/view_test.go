package dynamoview

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestComputeJoin(t *testing.T) {
	w := decodeWorker("w-0", "myns-dgd", "deadbeef")
	type input struct {
		pods   []corev1.Pod
		slices []discoveryv1.EndpointSlice
		dwms   []unstructured.Unstructured
	}
	cases := []struct {
		name        string
		build       func(t *testing.T) input
		wantVisible bool
		wantReason  string
	}{
		{
			name: "ready endpoint joins its DWM",
			build: func(t *testing.T) input {
				s, d := healthy(t, w)
				return input{[]corev1.Pod{w}, s, d}
			},
			wantVisible: true,
		},
		{
			name: "the join needs no pods",
			build: func(t *testing.T) input {
				s, d := healthy(t, w)
				return input{nil, s, d}
			},
			wantVisible: true,
		},
		{
			name: "endpoint not ready",
			build: func(t *testing.T) input {
				return input{[]corev1.Pod{w}, []discoveryv1.EndpointSlice{slice("s", endpoint(w.Name, string(w.UID), ptr.To(false)))},
					[]unstructured.Unstructured{dwmOf(t, w)}}
			},
			wantReason: "endpoint not ready",
		},
		{
			name: "ready condition missing counts as not ready",
			build: func(t *testing.T) input {
				return input{[]corev1.Pod{w}, []discoveryv1.EndpointSlice{slice("s", endpoint(w.Name, string(w.UID), nil))},
					[]unstructured.Unstructured{dwmOf(t, w)}}
			},
			wantReason: "endpoint not ready",
		},
		{
			name: "pod recreated with the same name: DWM owner uid differs",
			build: func(t *testing.T) input {
				old := dwmOf(t, w)
				recreated := w
				recreated.UID = types.UID("uid-new")
				return input{[]corev1.Pod{recreated}, []discoveryv1.EndpointSlice{slice("s", readyEndpoint(recreated))},
					[]unstructured.Unstructured{old}}
			},
			wantReason: "owner uid",
		},
		{
			name: "two slices report different uids for one name: fail closed",
			build: func(t *testing.T) input {
				return input{[]corev1.Pod{w}, []discoveryv1.EndpointSlice{
					slice("a", readyEndpoint(w)),
					slice("b", endpoint(w.Name, "uid-other", ptr.To(true))),
				}, []unstructured.Unstructured{dwmOf(t, w)}}
			},
			wantReason: "fail closed",
		},
		{
			name: "the same uid in two slices is fine",
			build: func(t *testing.T) input {
				return input{[]corev1.Pod{w}, []discoveryv1.EndpointSlice{slice("a", readyEndpoint(w)), slice("b", readyEndpoint(w))},
					[]unstructured.Unstructured{dwmOf(t, w)}}
			},
			wantVisible: true,
		},
		{
			name: "a not-ready endpoint with another uid does not conflict",
			build: func(t *testing.T) input {
				return input{[]corev1.Pod{w}, []discoveryv1.EndpointSlice{
					slice("a", readyEndpoint(w)),
					slice("b", endpoint(w.Name, "uid-old", ptr.To(false))),
				}, []unstructured.Unstructured{dwmOf(t, w)}}
			},
			wantVisible: true,
		},
		{
			name: "slice without the discovery-enabled label is not watched",
			build: func(t *testing.T) input {
				s := slice("s", readyEndpoint(w))
				s.Labels = map[string]string{LabelDiscoveryBackend: "kubernetes"}
				return input{[]corev1.Pod{w}, []discoveryv1.EndpointSlice{s}, []unstructured.Unstructured{dwmOf(t, w)}}
			},
			wantReason: "no endpoint",
		},
		{
			name: "targetRef without uid is skipped",
			build: func(t *testing.T) input {
				return input{[]corev1.Pod{w}, []discoveryv1.EndpointSlice{slice("s", endpoint(w.Name, "", ptr.To(true)))},
					[]unstructured.Unstructured{dwmOf(t, w)}}
			},
			wantReason: "no endpoint",
		},
		{
			name: "ready endpoint without DWM",
			build: func(t *testing.T) input {
				return input{[]corev1.Pod{w}, []discoveryv1.EndpointSlice{slice("s", readyEndpoint(w))}, nil}
			},
			wantReason: "no DynamoWorkerMetadata",
		},
		{
			name: "spec.data that does not decode",
			build: func(t *testing.T) input {
				d := dwmOf(t, w)
				_ = unstructured.SetNestedField(d.Object, "not json", "spec", "data")
				return input{[]corev1.Pod{w}, []discoveryv1.EndpointSlice{slice("s", readyEndpoint(w))}, []unstructured.Unstructured{d}}
			},
			wantReason: "does not decode",
		},
		{
			name: "discovery never crosses Kubernetes namespaces",
			build: func(t *testing.T) input {
				d := dwmOf(t, w)
				d.SetNamespace("elsewhere")
				return input{[]corev1.Pod{w}, []discoveryv1.EndpointSlice{slice("s", readyEndpoint(w))}, []unstructured.Unstructured{d}}
			},
			wantReason: "no DynamoWorkerMetadata",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.build(t)
			v := Compute(in.pods, in.slices, in.dwms)
			if got := v.Visible(testNs, w.Name); got != tc.wantVisible {
				t.Fatalf("Visible = %v, want %v (excluded: %v)", got, tc.wantVisible, v.Excluded(testNs))
			}
			if tc.wantVisible {
				insts := v.Instances(testNs)
				if len(insts) != 1 || insts[0].PodUID != string(w.UID) || insts[0].InstanceID != InstanceID(w.Name) {
					t.Errorf("Instances = %+v", insts)
				}
				if (insts[0].Pod != nil) != (len(in.pods) > 0) {
					t.Errorf("Pod attached = %v with %d pods given", insts[0].Pod != nil, len(in.pods))
				}
				return
			}
			if reason := v.Excluded(testNs)[w.Name]; !strings.Contains(reason, tc.wantReason) {
				t.Errorf("Excluded reason %q does not contain %q", reason, tc.wantReason)
			}
			// An invisible worker makes its generation disappear from every frontend.
			if g := v.Frontend(testNs, "myns-dgd", true).Generations; len(g) != 0 {
				t.Errorf("invisible worker still forms generations %+v", g)
			}
		})
	}
}

func TestViewAccessors(t *testing.T) {
	w := decodeWorker("w-0", "myns-dgd", "deadbeef")
	v := computeHealthy(t, w)
	if got := v.K8sNamespaces(); len(got) != 1 || got[0] != testNs {
		t.Errorf("K8sNamespaces = %v", got)
	}
	if v.Pod(testNs, "w-0") == nil || v.Pod(testNs, "nope") != nil || v.Pod("other", "w-0") != nil {
		t.Errorf("Pod lookup wrong")
	}
	if v.Instances("other") != nil || v.Visible("other", "w-0") || len(v.Excluded("other")) != 0 {
		t.Errorf("unknown namespace should be empty")
	}
	if got := v.Instances(testNs)[0].DynamoNamespaces(); len(got) != 1 || got[0] != "myns-dgd-deadbeef" {
		t.Errorf("DynamoNamespaces = %v", got)
	}
}
