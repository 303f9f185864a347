package deployment

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/render"
)

func setup(t *testing.T) (*Backend, *v1alpha1.DynamoGraphDeployment, *int) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	writes := 0
	count := func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
		writes++
		return c.Patch(ctx, o, p, opts...)
	}
	countSub := func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
		writes++
		return c.SubResource(sub).Update(ctx, o, opts...)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{Patch: count, SubResourceUpdate: countSub}).Build()
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "uid-1"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"Frontend": {ComponentType: "frontend", Replicas: ptr.To[int32](1), ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: "fe:1"}}},
			"decode":   {ComponentType: "decode", Replicas: ptr.To[int32](2), ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: "w:1"}}},
		}}}
	return New(c, c, s, render.Config{}), dgd, &writes
}

func pool(dgd *v1alpha1.DynamoGraphDeployment, service, hash string, replicas int32) backends.Pool {
	return backends.Pool{Hash: hash, Services: []backends.ServiceWorkload{{
		Key: backends.Key{Service: service, Hash: hash}, Spec: dgd.Spec.Services[service], Replicas: replicas}}}
}

func TestEnsureObserveScaleDelete(t *testing.T) {
	ctx := context.Background()
	b, dgd, writes := setup(t)
	if err := b.Ensure(ctx, dgd, pool(dgd, "decode", "h1", 1)); err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := b.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "g-decode-h1"}, &d); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(&d); ref == nil || ref.UID != "uid-1" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Fatalf("owner reference %+v", d.OwnerReferences)
	}
	if d.Spec.Selector.MatchLabels[v1alpha1.LabelWorkerHash] != "h1" || *d.Spec.Replicas != 1 {
		t.Fatalf("selector/replicas %+v", d.Spec)
	}

	t.Run("a worker revision's template never changes after creation", func(t *testing.T) {
		dgd.Spec.Services["decode"].ExtraPodSpec.MainContainer.Image = "w:2"
		if err := b.Ensure(ctx, dgd, pool(dgd, "decode", "h1", 5)); err != nil {
			t.Fatal(err)
		}
		var again appsv1.Deployment
		_ = b.Client.Get(ctx, client.ObjectKeyFromObject(&d), &again)
		if again.Spec.Template.Spec.Containers[0].Image != "w:1" || *again.Spec.Replicas != 1 || *writes != 0 {
			t.Fatalf("worker Deployment changed: %+v, %d writes", again.Spec, *writes)
		}
	})

	t.Run("a stable workload is updated in place only when its render changes", func(t *testing.T) {
		if err := b.Ensure(ctx, dgd, pool(dgd, "Frontend", "", 1)); err != nil {
			t.Fatal(err)
		}
		if err := b.Ensure(ctx, dgd, pool(dgd, "Frontend", "", 1)); err != nil {
			t.Fatal(err)
		}
		if *writes != 0 {
			t.Fatalf("%d writes for an unchanged frontend", *writes)
		}
		dgd.Spec.Services["Frontend"].ExtraPodSpec.MainContainer.Image = "fe:2"
		if err := b.Ensure(ctx, dgd, pool(dgd, "Frontend", "", 1)); err != nil {
			t.Fatal(err)
		}
		var fe appsv1.Deployment
		_ = b.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "g-frontend"}, &fe)
		if fe.Spec.Template.Spec.Containers[0].Image != "fe:2" || *writes != 1 {
			t.Fatalf("frontend not updated once: image %s, %d writes", fe.Spec.Template.Spec.Containers[0].Image, *writes)
		}
	})

	t.Run("Scale writes only when the count differs", func(t *testing.T) {
		before := *writes
		key := backends.Key{Service: "decode", Hash: "h1"}
		if err := b.Scale(ctx, dgd, backends.Workload{Key: key}, 1); err != nil || *writes != before {
			t.Fatalf("err %v, %d writes for a no-op scale", err, *writes-before)
		}
		if err := b.Scale(ctx, dgd, backends.Workload{Key: key}, 3); err != nil || *writes != before+1 {
			t.Fatalf("err %v, writes %d", err, *writes-before)
		}
	})

	t.Run("Observe maps Deployment status to replicas", func(t *testing.T) {
		var w appsv1.Deployment
		_ = b.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "g-decode-h1"}, &w)
		w.Status = appsv1.DeploymentStatus{ObservedGeneration: w.Generation, Replicas: 3, AvailableReplicas: 2, UpdatedReplicas: 3}
		if err := b.Client.Status().Update(ctx, &w); err != nil {
			t.Fatal(err)
		}
		ws, err := b.Observe(ctx, dgd)
		if err != nil || len(ws) != 2 {
			t.Fatalf("observe: %v %+v", err, ws)
		}
		for _, o := range ws {
			if o.Hash == "h1" && (o.Service != "decode" || o.Replicas != 3 || o.Ready != 2 || o.Current != 3 || o.Kind != Kind) {
				t.Fatalf("observed %+v", o)
			}
		}
	})

	t.Run("Delete is idempotent", func(t *testing.T) {
		w := backends.Workload{Key: backends.Key{Service: "decode", Hash: "h1"}, Name: "g-decode-h1"}
		if err := b.Delete(ctx, dgd, w); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, dgd, w); err != nil {
			t.Fatalf("second delete: %v", err)
		}
	})
}

func TestEnsureRefusesAnObjectItDoesNotControl(t *testing.T) {
	ctx := context.Background()
	b, dgd, _ := setup(t)
	foreign := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-frontend"}}
	if err := b.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(ctx, dgd, pool(dgd, "Frontend", "", 1)); err == nil {
		t.Fatal("adopted a Deployment it does not control")
	}
}
