package controllers

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	disaggv1 "sigs.k8s.io/lws/api/disaggregatedset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// Dynamo's DisaggregatedSet pathway: the DisaggregatedSet the DGD controls (Dynamo's,
// named after the DGD, labelled with its graph and selector: ai-dynamo/dynamo
// dgd_disaggregatedset_workload_renderer.go Render) is reported, so the pass holds
// (ReasonDynamoTakeOverUnsupported); another DGD's, or one labelled ours, is not. A
// cluster that does not serve the DisaggregatedSet CRD has none. Through observeDynamo:
// a DGD with Dynamo's finalizer and the Lease held.
func TestDynamoDisaggregatedSets(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, clientgoscheme.AddToScheme, disaggv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "dgd-uid",
		Finalizers: []string{decide.DynamoFinalizer}}}
	ds := func(name string, owner types.UID, labels map[string]string) *disaggv1.DisaggregatedSet {
		return &disaggv1.DisaggregatedSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment", Name: "g", UID: owner, Controller: ptr.To(true)}}}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		ds("g", "dgd-uid", map[string]string{v1alpha1.LabelGraph: "g", "nvidia.com/selector": "g"}), // Dynamo's
		ds("g-ours", "dgd-uid", map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}),
		ds("h", "other-uid", map[string]string{v1alpha1.LabelGraph: "h"}), // another DGD's
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: decide.DynamoScopeLease},
			Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](3600), RenewTime: &metav1.MicroTime{Time: time.Now()}}},
	).Build()
	r := &Reconciler{APIReader: c, Backends: backends.NewRegistry()}
	dy, ws, err := r.observeDynamo(context.Background(), dgd, nil, nil)
	if err != nil || dy == nil || len(ws) != 0 {
		t.Fatalf("observeDynamo: %v, %v, %v", dy, ws, err)
	}
	if len(dy.Unsupported) != 1 || dy.Unsupported[0] != (backends.ObjectRef{Kind: "DisaggregatedSet", Name: "g", UID: "g-uid"}) || dy.Stopped == "" {
		t.Errorf("unsupported %v, stopped %q: want Dynamo's DisaggregatedSet g alone, Lease held", dy.Unsupported, dy.Stopped)
	}
	r.APIReader = fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()
	if got, err := r.dynamoDisaggregatedSets(context.Background(), dgd); err != nil || len(got) != 0 {
		t.Errorf("no DisaggregatedSet CRD: got %v, %v, want none and no error", got, err)
	}
}
