package backends

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// deletes records the Deleted events a handler passes on.
type deletes struct {
	handler.Funcs
	mu    sync.Mutex
	names []string
}

func newDeletes() *deletes {
	d := &deletes{}
	d.DeleteFunc = func(_ context.Context, e event.DeleteEvent, _ queue) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.names = append(d.names, e.Object.GetName())
	}
	return d
}

func (d *deletes) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.names...)
}

// TestRelabelStripped: a Deleted event of an object a DGD controls that is still there
// without the operator's label puts the labels back (and is not passed on); one gone,
// replaced under its name, or no DGD's is passed on untouched.
func TestRelabelStripped(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	ref := []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment", Name: "g", UID: "uid-g", Controller: ptr.To(true)}}
	ours := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelGraph: "g", v1alpha1.LabelService: "decode"}
	// What the cache last held (labelled), and what the API server holds now.
	cached := func(name, uid string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), OwnerReferences: ref, Labels: ours}}
	}
	live := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stripped", UID: "u1", OwnerReferences: ref, Labels: map[string]string{"kept": "yes"}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "replaced", UID: "u3-new", OwnerReferences: ref}},
	}
	// As a real client: a request under a cancelled context fails.
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(live...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	next := newDeletes()
	h := RelabelStripped(c, c, &appsv1.Deployment{}, next)
	ctx := context.Background()
	// controller-runtime hands event handlers a context it cancels once the watches
	// have started: the relabelling must not depend on it.
	handlerCtx, cancel := context.WithCancel(ctx)
	cancel()
	for _, o := range []client.Object{
		cached("stripped", "u1"), cached("gone", "u2"), cached("replaced", "u3"),
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "not-a-dgds", Labels: ours}},
	} {
		h.Delete(handlerCtx, event.DeleteEvent{Object: o}, nil)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(next.got()) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := next.got(); len(got) != 3 || slices.Contains(got, "stripped") {
		t.Fatalf("Deleted events passed on: %v, want gone, replaced and not-a-dgds", got)
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "stripped"}, &d); err != nil {
		t.Fatal(err)
	}
	for k, v := range ours {
		if d.Labels[k] != v {
			t.Errorf("stripped: label %s = %q, want %q (labels %v)", k, d.Labels[k], v, d.Labels)
		}
	}
	if d.Labels["kept"] != "yes" {
		t.Errorf("stripped: its own label was lost: %v", d.Labels)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "replaced"}, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Labels) != 0 {
		t.Errorf("replaced: the new object under the name was labelled: %v", d.Labels)
	}
}

// TestRelabelStrippedOwnDeletes: the Deleted event of an object the operator deleted
// itself (DeleteObject, its UID the precondition) is passed on without a read past the
// cache; a delete the API server refused leaves the check in place, as does a note
// that expired.
func TestRelabelStrippedOwnDeletes(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	ref := []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment", Name: "g", UID: "uid-g", Controller: ptr.To(true)}}
	ours := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelGraph: "g"}
	dep := func(name, uid string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), OwnerReferences: ref, Labels: ours}}
	}
	var mu sync.Mutex
	var reads []string
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(dep("retired", "u1"), dep("kept", "u2-new")).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			mu.Lock()
			reads = append(reads, key.Name)
			mu.Unlock()
			return c.Get(ctx, key, obj, opts...)
		},
		// As the API server: a UID precondition the object fails is a Conflict (the
		// fake client ignores preconditions).
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			var do client.DeleteOptions
			do.ApplyOptions(opts)
			var have appsv1.Deployment
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &have); err == nil && do.Preconditions != nil &&
				do.Preconditions.UID != nil && *do.Preconditions.UID != have.UID {
				return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, obj.GetName(), errors.New("the UID in the precondition does not match"))
			}
			return c.Delete(ctx, obj, opts...)
		}}).Build()
	now := time.Unix(1000, 0)
	saved := OwnDeletes
	OwnDeletes = &ownDeletes{ttl: time.Minute, now: func() time.Time { return now }}
	defer func() { OwnDeletes = saved }()
	ctx := context.Background()
	if err := DeleteObject(ctx, c, dep("retired", "u1"), "Deployment"); err != nil {
		t.Fatal(err)
	}
	// u2 is no longer the object named "kept": the precondition fails, nothing is deleted.
	var replaced *ReplacedError
	if err := DeleteObject(ctx, c, dep("kept", "u2"), "Deployment"); !errors.As(err, &replaced) {
		t.Fatalf("deleting a replaced object: %v, want a ReplacedError", err)
	}
	next := newDeletes()
	h := RelabelStripped(c, c, &appsv1.Deployment{}, next)
	h.Delete(ctx, event.DeleteEvent{Object: dep("retired", "u1")}, nil)
	if got := next.got(); !slices.Equal(got, []string{"retired"}) {
		t.Fatalf("Deleted events passed on at once: %v, want retired", got)
	}
	// A note read once is forgotten: a second event of the UID is checked.
	if OwnDeletes.Deleted("u1") {
		t.Error("the note of u1 outlived its Deleted event")
	}
	// An expired note: the check runs again.
	done := OwnDeletes.Deleting("u3")
	done(nil)
	now = now.Add(time.Minute)
	_ = OwnDeletes.Deleting("u4")
	if OwnDeletes.Deleted("u3") {
		t.Error("a note older than its TTL was kept")
	}
	h.Delete(ctx, event.DeleteEvent{Object: dep("kept", "u2")}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for len(next.got()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(reads, []string{"kept"}) {
		t.Errorf("reads past the cache %v, want only kept's (its delete was refused)", reads)
	}
}
