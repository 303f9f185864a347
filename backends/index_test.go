package backends

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestListControlled: with the index, one graph's objects come from it (the namespace is
// never listed); without it (a client that reads the API server), from a namespace list;
// either way only objects the owner controls, not those it merely owns nor another
// graph's.
func TestListControlled(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	owner := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "uid-g"}}
	ref := func(uid types.UID, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeployment",
			Name: "x", UID: uid, Controller: ptr.To(controller)}}
	}
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine-1", OwnerReferences: ref("uid-g", true)}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine-2", OwnerReferences: ref("uid-g", true)}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owned-not-controlled", OwnerReferences: ref("uid-g", false)}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other-graph", OwnerReferences: ref("uid-h", true)}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nobody's"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "mine-elsewhere", OwnerReferences: ref("uid-g", true)}},
	}
	for _, indexed := range []bool{true, false} {
		var namespaceLists int
		b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
			WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
				o := (&client.ListOptions{}).ApplyOptions(opts)
				if o.FieldSelector == nil {
					namespaceLists++
				}
				return c.List(ctx, l, opts...)
			}})
		if indexed {
			b = b.WithIndex(&appsv1.Deployment{}, ControllerUIDIndex, controllerUID)
		}
		var list appsv1.DeploymentList
		if err := ListControlled(context.Background(), b.Build(), &list, owner); err != nil {
			t.Fatalf("indexed %v: %v", indexed, err)
		}
		var names []string
		for _, d := range list.Items {
			names = append(names, d.Name)
		}
		if len(names) != 2 || names[0] != "mine-1" || names[1] != "mine-2" {
			t.Errorf("indexed %v: listed %v, want [mine-1 mine-2]", indexed, names)
		}
		if want := map[bool]int{true: 0, false: 1}[indexed]; namespaceLists != want {
			t.Errorf("indexed %v: %d namespace lists, want %d", indexed, namespaceLists, want)
		}
	}
}
