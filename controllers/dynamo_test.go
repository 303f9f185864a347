package controllers

import (
	"context"
	"testing"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// An older Dynamo ran one LeaderWorkerSet per replica (`<dcd>-0`, `<dcd>-1`), all of one
// (component, worker hash): the key's pods (3 gangs, one terminating) are counted once
// over them, not once each, as the planner sums a revision's workloads.
func TestSharePods(t *testing.T) {
	key := backends.Key{Service: "decode", Hash: "d1a2b3c4"}
	w := func(name string, current int32) decide.Workload {
		return decide.Workload{Backend: decide.DynamoBackend, Pods: 3, Workload: backends.Workload{Key: key, Kind: lws.Kind, Name: name, Current: current}}
	}
	other := decide.Workload{Backend: decide.DynamoBackend, Pods: 2, Workload: backends.Workload{Key: backends.Key{Service: "prefill", Hash: "d1a2b3c4"}, Name: "p-0", Current: 2}}
	ws := []decide.Workload{w("g-decode-d1a2b3c4-1", 1), other, w("g-decode-d1a2b3c4-0", 1)}
	sharePods(ws)
	if ws[2].Pods != 2 || ws[0].Pods != 1 || ws[1].Pods != 2 {
		t.Errorf("pods %d (-0), %d (-1), %d (prefill): want 2 (its own and the terminating one), 1, 2 (alone, unchanged)", ws[2].Pods, ws[0].Pods, ws[1].Pods)
	}
}

// Dynamo's Grove pathway: the PodCliqueSet the DGD controls that carries no mark of ours
// (grove.NotOurs) is Dynamo's, and is reported (the pass then stops:
// ReasonDynamoTakeOverUnsupported); ours (AnnotationCliques) and another DGD's are not.
// A cluster without Grove's CRD has none.
func TestDynamoPodCliqueSets(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, grovev1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "dgd-uid"}}
	pcs := func(name string, owner types.UID, annotations map[string]string) *grovev1.PodCliqueSet {
		return &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment", Name: "g", UID: owner, Controller: ptr.To(true)}}}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		pcs("g", "dgd-uid", map[string]string{"team": "a"}),                     // Dynamo's
		pcs("g-1", "dgd-uid", map[string]string{grove.AnnotationCliques: "{}"}), // ours
		pcs("h", "other-uid", nil),                                              // another DGD's
	).Build()
	r := &Reconciler{APIReader: c}
	got, err := r.dynamoPodCliqueSets(context.Background(), dgd)
	if err != nil || len(got) != 1 || got[0].Name != "g" || got[0].Kind != grove.Kind {
		t.Fatalf("got %v, %v: want Dynamo's PodCliqueSet g alone", got, err)
	}
	r.APIReader = fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()
	if got, err := r.dynamoPodCliqueSets(context.Background(), dgd); err != nil || len(got) != 0 {
		t.Errorf("no Grove CRD: got %v, %v, want none and no error", got, err)
	}
}
