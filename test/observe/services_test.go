package observe

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

// lwsGang is an LWS group of n pods of service svc at hash, as LWS labels them, with
// subdomain lws.
func lwsGang(lws, svc, hash string, n int) []corev1.Pod {
	var out []corev1.Pod
	for i := 0; i < n; i++ {
		name := lws + "-0"
		args := []string{"-m", "dynamo.sglang", "--node-rank", "0"}
		if i > 0 {
			name += "-" + string(rune('0'+i))
			args = []string{"-m", "dynamo.sglang", "--node-rank", string(rune('0' + i))}
		}
		out = append(out, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{
				"leaderworkerset.sigs.k8s.io/name": lws, "leaderworkerset.sigs.k8s.io/group-index": "0",
				"leaderworkerset.sigs.k8s.io/worker-index": string(rune('0' + i)),
				v1alpha1.LabelGraph:                        "g", v1alpha1.LabelService: svc, v1alpha1.LabelWorkerHash: hash,
				render.LabelRole: map[bool]string{true: "leader", false: "worker"}[i == 0]}},
			Spec: corev1.PodSpec{Subdomain: lws, Hostname: name, Containers: []corev1.Container{{Name: "main", Command: []string{"python3"}, Args: args,
				Env: []corev1.EnvVar{{Name: "DYN_NAMESPACE", Value: "ns-g"}, {Name: "DYN_NAMESPACE_WORKER_SUFFIX", Value: hash}}}}},
		})
	}
	return out
}

func discoveryService(name, svc, hash string, leadersOnly bool) corev1.Service {
	sel := map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: svc, v1alpha1.LabelWorkerHash: hash}
	if leadersOnly {
		sel[render.LabelRole] = "leader"
	}
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{
		v1alpha1.LabelGraph: "g", v1alpha1.LabelService: svc, v1alpha1.LabelWorkerHash: hash, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		render.LabelDiscoveryEnabled: "true", render.LabelDiscoveryBackend: render.DiscoveryKubernetes}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: sel,
			Ports: []corev1.ServicePort{{Name: render.PortNameSystem, Port: render.PortSystem, TargetPort: intstr.FromString(render.PortNameSystem)}}}}
}

// TestSubdomainViolations: issue 22's "operator first" state, our discovery Service
// under the LeaderWorkerSet's name, is a gang whose pods cannot resolve each other;
// LWS's own headless Service is not.
func TestSubdomainViolations(t *testing.T) {
	pods := lwsGang("g-decode-1a2b3c4d", "decode", "1a2b3c4d", 2)
	taken := discoveryService("g-decode-1a2b3c4d", "decode", "1a2b3c4d", true)
	taken.Spec.ClusterIP = "10.0.0.9"
	v := SubdomainViolations([]corev1.Service{taken}, pods)
	if len(v) == 0 || !strings.Contains(v[0], "not headless, does not publish not-ready addresses, does not select member g-decode-1a2b3c4d-0-1") {
		t.Errorf("our Service as the gang's subdomain: %v", v)
	}
	lws := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-decode-1a2b3c4d"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{"leaderworkerset.sigs.k8s.io/name": "g-decode-1a2b3c4d"}}}
	if v := SubdomainViolations([]corev1.Service{lws}, pods); len(v) != 0 {
		t.Errorf("LWS's own headless Service: %v", v)
	}
	if v := SubdomainViolations(nil, pods); len(v) != 0 {
		t.Errorf("no Service yet (LWS creates it after the leader StatefulSet): %v", v)
	}
}

// TestDiscoveryServiceViolations: a discovery Service selects exactly the leaders,
// port system 9090, both labels.
func TestDiscoveryServiceViolations(t *testing.T) {
	pods := lwsGang("g-decode-1a2b3c4d", "decode", "1a2b3c4d", 2)
	good := discoveryService("g-decode-1a2b3c4d-discovery", "decode", "1a2b3c4d", true)
	if v := DiscoveryServiceViolations([]corev1.Service{good}, pods); len(v) != 0 {
		t.Errorf("leaders only: %v", v)
	}
	all := discoveryService("g-decode-1a2b3c4d-discovery", "decode", "1a2b3c4d", false)
	delete(all.Labels, render.LabelDiscoveryBackend)
	all.Spec.Ports[0].Port = 8000
	v := DiscoveryServiceViolations([]corev1.Service{all}, pods)
	if len(v) != 1 || !strings.Contains(v[0], "lacks a discovery label") || !strings.Contains(v[0], "want system 9090") || !strings.Contains(v[0], "a gang worker") {
		t.Errorf("every member, one label, port 8000: %v", v)
	}
}

// TestRoutableViolations: a Ready DGD whose decode leaders are in no discovery slice
// (issue 22's "LWS first": no discovery Service for decode) is reported; one whose
// leaders are ready endpoints of a labelled slice is not.
func TestRoutableViolations(t *testing.T) {
	d := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"},
		Spec:   v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"decode": {ComponentType: "worker"}}},
		Status: v1alpha1.DynamoGraphDeploymentStatus{Services: map[string]v1alpha1.ServiceStatus{"decode": {ReadyReplicas: 1, RuntimeNamespaces: []string{"ns-g-1a2b3c4d"}}}}}
	pods := lwsGang("g-decode-1a2b3c4d", "decode", "1a2b3c4d", 2)
	lwsSlice := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lws",
		Labels: map[string]string{discoveryv1.LabelServiceName: "g-decode-1a2b3c4d"}},
		Endpoints: []discoveryv1.Endpoint{{Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Name: pods[0].Name, UID: pods[0].UID}}}}
	v := RoutableViolations(d, pods, []discoveryv1.EndpointSlice{lwsSlice})
	if len(v) != 1 || !strings.Contains(v[0], "of decode, but no pod of it in Dynamo namespace ns-g-1a2b3c4d") {
		t.Errorf("only LWS's slice, without the discovery labels: %v", v)
	}
	disc := lwsSlice.DeepCopy()
	disc.Labels = discoveryService("x", "decode", "1a2b3c4d", true).Labels
	if v := RoutableViolations(d, pods, []discoveryv1.EndpointSlice{*disc}); len(v) != 0 {
		t.Errorf("the leader a ready endpoint of a discovery slice: %v", v)
	}
	d.Annotations = map[string]string{render.AnnotationDiscoveryBackend: render.DiscoveryEtcd}
	if v := RoutableViolations(d, pods, nil); len(v) != 0 {
		t.Errorf("etcd discovery: %v", v)
	}
}
