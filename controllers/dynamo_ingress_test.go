package controllers

import (
	"context"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// TestDynamoIngresses: the Ingresses read as Dynamo's are those one of the DGD's DCDs
// controls (Dynamo's Ingress carries no label: GenerateComponentIngress), and one left
// without a controller by a DCD deleted with --cascade=orphan (Dynamo's last-applied
// annotation, a DCD name of the DGD's); not ours, not another DCD's, not someone else's.
func TestDynamoIngresses(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, clientgoscheme.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "dgd-uid"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"Frontend": {ComponentType: v1alpha1.ComponentTypeFrontend}, "Other": {ComponentType: v1alpha1.ComponentTypeFrontend}}}}
	ing := func(name, controller string, annotated bool, labels map[string]string) client.Object {
		o := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}}
		if controller != "" {
			o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: decide.DCDKind, Name: name, UID: types.UID(controller), Controller: ptr.To(true)}}
		}
		if annotated {
			o.Annotations = map[string]string{dynamoLastApplied: "h"}
		}
		return o
	}
	ours := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		ing("g-frontend", "dcd-frontend", true, nil), // Dynamo's, controlled by the DGD's DCD
		ing("g-other", "", true, nil),                // Dynamo's, its DCD deleted with --cascade=orphan
		ing("h-frontend", "dcd-of-h", true, nil),     // another graph's DCD's
		ing("g-mine", "", true, nil),                 // no DCD name of g's
		ing("g-plain", "", false, nil),               // someone's, without Dynamo's annotation
		ing("g-ours", "dcd-frontend", true, ours),    // ours
	).Build()
	r := &Reconciler{APIReader: c}
	dcds := []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: "g-frontend", UID: "dcd-frontend"}}}
	got, err := r.dynamoIngresses(context.Background(), dgd, dcds)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range got {
		names = append(names, i.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"g-frontend", "g-other"}) {
		t.Errorf("Dynamo's Ingresses %v, want [g-frontend g-other]", names)
	}
}

// TestDynamoVirtualServices: the Istio VirtualServices read as Dynamo's are those one of
// the DGD's DCDs controls; none, and no error, when Istio's CRD is not served.
func TestDynamoVirtualServices(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "dgd-uid"}}
	dcds := []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: "g-frontend", UID: "dcd-frontend"}}}
	r := &Reconciler{APIReader: fake.NewClientBuilder().WithScheme(s).Build()}
	if got, err := r.dynamoVirtualServices(context.Background(), dgd, dcds); err != nil || got != nil {
		t.Fatalf("without Istio: %v, %v; want none, no error", got, err)
	}
	vs := func(name, controller string) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: decide.DCDKind, Name: name, UID: types.UID(controller), Controller: ptr.To(true)}}}}
	}
	// Istio served: the API server's list (metadata only) of the namespace's VirtualServices.
	r.APIReader = fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		List: func(_ context.Context, _ client.WithWatch, list client.ObjectList, _ ...client.ListOption) error {
			l, ok := list.(*metav1.PartialObjectMetadataList)
			if !ok || l.GroupVersionKind().Group != "networking.istio.io" || l.GroupVersionKind().Kind != "VirtualServiceList" {
				t.Fatalf("listed %T %v", list, list.GetObjectKind().GroupVersionKind())
			}
			l.Items = []metav1.PartialObjectMetadata{vs("g-frontend", "dcd-frontend"), vs("h-frontend", "dcd-of-h")}
			return nil
		}}).Build()
	got, err := r.dynamoVirtualServices(context.Background(), dgd, dcds)
	if err != nil || len(got) != 1 || got[0].Name != "g-frontend" || got[0].Kind != "VirtualService" {
		t.Errorf("Dynamo's VirtualServices %v (error %v), want [VirtualService g-frontend]", got, err)
	}
}
