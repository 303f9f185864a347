package controllers

import (
	"context"
	"testing"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
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

// Dynamo's LeaderWorkerSets of a DGD: a worker component's is a workload of revision 0
// (keyed by its labels, its replicas and ready counts in gangs); a non-worker
// component's (a multinode frontend) is not taken over (Unsupported: the pass holds),
// for ours would run beside it under another name and nothing would remove it.
func TestDynamoObjectsLeaderWorkerSets(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, clientgoscheme.AddToScheme, lwsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "dgd-uid"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"Frontend": {ComponentType: v1alpha1.ComponentTypeFrontend}, "decode": {ComponentType: v1alpha1.ComponentTypeDecode}}}}
	set := func(name, service, hash string) *lwsv1.LeaderWorkerSet {
		l := map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: service}
		if hash != "" {
			l[v1alpha1.LabelWorkerHash] = hash
		}
		return &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: l, Generation: 1,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: decide.DCDKind, Name: name[:len(name)-2], UID: "dcd", Controller: ptr.To(true)}}},
			Spec:   lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To[int32](2)},
			Status: lwsv1.LeaderWorkerSetStatus{ReadyReplicas: 1, Replicas: 2, UpdatedReplicas: 2, ObservedGeneration: 1}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(set("g-decode-d1a2b3c4-0", "decode", "d1a2b3c4"), set("g-frontend-0", "Frontend", "")).Build()
	r := &Reconciler{APIReader: c, Backends: backends.NewRegistry().Register(v1alpha1.BackendLeaderWorkerSet, lws.New(nil, nil, render.Config{}))}
	dy := &decide.Dynamo{}
	ws, byDCD, err := r.dynamoObjects(context.Background(), dgd, dy, map[backends.Key]int32{{Service: "decode", Hash: "d1a2b3c4"}: 2})
	if err != nil || !byDCD {
		t.Fatalf("err %v, byDCD %v", err, byDCD)
	}
	if len(ws) != 1 || ws[0].Kind != lws.Kind || ws[0].Backend != decide.DynamoBackend || ws[0].Replicas != 2 || ws[0].Ready != 1 || ws[0].Pods != 2 || !ws[0].Synced {
		t.Errorf("workloads %+v: want Dynamo's decode LeaderWorkerSet, 2 gangs, 1 ready, 2 with pods, synced", ws)
	}
	if len(dy.Unsupported) != 1 || dy.Unsupported[0].Name != "g-frontend-0" || len(dy.Stable) != 0 {
		t.Errorf("unsupported %v, stable %v: want the frontend's LeaderWorkerSet unsupported", dy.Unsupported, dy.Stable)
	}
}
