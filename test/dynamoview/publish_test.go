package dynamoview

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func newFakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	scheme.AddKnownTypeWithName(DWMGVK, &unstructured.Unstructured{})
	list := DWMGVK
	list.Kind += "List"
	scheme.AddKnownTypeWithName(list, &unstructured.UnstructuredList{})
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func getDWM(t *testing.T, c client.Client, name string) (*unstructured.Unstructured, bool) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(DWMGVK)
	err := c.Get(context.Background(), types.NamespacedName{Namespace: testNs, Name: name}, u)
	if err != nil {
		return nil, false
	}
	return u, true
}

func TestPublish(t *testing.T) {
	running := decodeWorker("dc-0", "myns-dgd", "deadbeef")
	pending := decodeWorker("dc-pending", "myns-dgd", "deadbeef")
	pending.Status.Phase = corev1.PodPending
	deleting := decodeWorker("dc-deleting", "myns-dgd", "deadbeef")
	deleting.DeletionTimestamp = &metav1.Time{}
	fe := frontendPod("fe-0", "myns-dgd", true)
	headless := podWith("wkr-1", []string{"sh", "-c"}, []string{"exec python3 -m dynamo.vllm --model M --node-rank 1 --headless"})

	// A stale DWM left by an earlier pod of the same name, and one already current.
	recreated := decodeWorker("dc-1", "myns-dgd", "deadbeef")
	old := recreated
	old.UID = "uid-old"
	stale := Metadata(&old, mustRuntime(t, old))
	current := decodeWorker("dc-2", "myns-dgd", "deadbeef")
	cur := Metadata(&current, mustRuntime(t, current))
	cur.SetLabels(map[string]string{"keep": "me"})

	c := newFakeClient(t, stale, cur)
	pods := []corev1.Pod{running, pending, deleting, fe, headless, recreated, current}
	if err := Publish(context.Background(), c, pods); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	// Idempotent.
	if err := Publish(context.Background(), c, pods); err != nil {
		t.Fatalf("second Publish: %v", err)
	}

	for name, want := range map[string]bool{"dc-0": true, "dc-pending": false, "dc-deleting": false, "fe-0": false, "wkr-1": false} {
		if _, ok := getDWM(t, c, name); ok != want {
			t.Errorf("DWM %s exists = %v, want %v", name, ok, want)
		}
	}
	u, ok := getDWM(t, c, "dc-1")
	if !ok || PodOwnerUID(u) != string(recreated.UID) {
		t.Errorf("stale DWM not taken over: %v", u)
	}
	u, ok = getDWM(t, c, "dc-2")
	if !ok || u.GetLabels()["keep"] != "me" {
		t.Errorf("current DWM was rewritten: %v", u)
	}

	// What Publish wrote joins with ready endpoints.
	var dwms []unstructured.Unstructured
	for _, n := range []string{"dc-0", "dc-1"} {
		u, _ := getDWM(t, c, n)
		dwms = append(dwms, *u)
	}
	v := Compute(pods, []discoveryv1.EndpointSlice{slice("s", readyEndpoint(running), readyEndpoint(recreated))}, dwms)
	if !v.Visible(testNs, "dc-0") || !v.Visible(testNs, "dc-1") {
		t.Errorf("published DWMs not visible: %v", v.Excluded(testNs))
	}
}

func mustRuntime(t *testing.T, p corev1.Pod) Runtime {
	t.Helper()
	rt, ok := RuntimeOf(&p)
	if !ok {
		t.Fatalf("pod %s has no runtime", p.Name)
	}
	return rt
}
