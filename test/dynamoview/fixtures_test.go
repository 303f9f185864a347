package dynamoview

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const testNs = "myns"

// podWith builds a running pod whose main container has the given command, args and env
// (pairs name, value).
func podWith(name string, command, args []string, env ...string) corev1.Pod {
	c := corev1.Container{Name: "main", Image: "dynamo:1.6.0", Command: command, Args: args}
	for i := 0; i+1 < len(env); i += 2 {
		c.Env = append(c.Env, corev1.EnvVar{Name: env[i], Value: env[i+1]})
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNs, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
}

// vllmWorker builds a vLLM worker of DGD base namespace base with worker hash hash
// (label and DYN_NAMESPACE_WORKER_SUFFIX) and extra args.
func vllmWorker(name, base, hash string, extra ...string) corev1.Pod {
	args := append([]string{"-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B"}, extra...)
	p := podWith(name, []string{"python3"}, args, "DYN_NAMESPACE", base, "DYN_NAMESPACE_WORKER_SUFFIX", hash)
	p.Labels[LabelWorkerHash] = hash
	return p
}

func prefillWorker(name, base, hash string) corev1.Pod {
	return vllmWorker(name, base, hash, "--is-prefill-worker")
}

func decodeWorker(name, base, hash string) corev1.Pod {
	return vllmWorker(name, base, hash, "--is-decode-worker")
}

func frontendPod(name, prefix string, strict bool) corev1.Pod {
	env := []string{"DYN_NAMESPACE", prefix, "DYN_NAMESPACE_PREFIX", prefix}
	if strict {
		env = append(env, "DYN_NAMESPACE_PREFIX_STRICT", "true")
	}
	return podWith(name, []string{"python3"}, []string{"-m", "dynamo.frontend"}, env...)
}

// endpoint returns an EndpointSlice endpoint pointing at a pod name and uid.
func endpoint(name, uid string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{"10.0.0.1"},
		Conditions: discoveryv1.EndpointConditions{Ready: ready},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: testNs, Name: name, UID: types.UID(uid)},
	}
}

// readyEndpoint is a ready endpoint for a pod.
func readyEndpoint(p corev1.Pod) discoveryv1.Endpoint {
	return endpoint(p.Name, string(p.UID), ptr.To(true))
}

// slice returns a discovery-enabled EndpointSlice holding eps.
func slice(name string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNs, Name: name, Labels: map[string]string{
			LabelDiscoveryEnabled: "true", LabelDiscoveryBackend: "kubernetes",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
	}
}

// dwmOf returns the DWM the pod's runtime would publish.
func dwmOf(t *testing.T, p corev1.Pod) unstructured.Unstructured {
	t.Helper()
	rt, ok := RuntimeOf(&p)
	if !ok {
		t.Fatalf("pod %s runs no registering runtime", p.Name)
	}
	return *Metadata(&p, rt)
}

// healthy returns one slice with a ready endpoint per pod and each pod's DWM.
func healthy(t *testing.T, pods ...corev1.Pod) ([]discoveryv1.EndpointSlice, []unstructured.Unstructured) {
	t.Helper()
	var eps []discoveryv1.Endpoint
	var dwms []unstructured.Unstructured
	for _, p := range pods {
		eps = append(eps, readyEndpoint(p))
		dwms = append(dwms, dwmOf(t, p))
	}
	return []discoveryv1.EndpointSlice{slice("workers", eps...)}, dwms
}

// computeHealthy computes the View of pods that are all ready and published.
func computeHealthy(t *testing.T, pods ...corev1.Pod) View {
	t.Helper()
	slices, dwms := healthy(t, pods...)
	return Compute(pods, slices, dwms)
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
