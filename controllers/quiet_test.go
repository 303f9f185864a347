package controllers

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/deployment"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/revisions"
)

// calls counts a fake client's calls by verb.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) add(verb string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[verb]++
}

func (c *calls) get(verb string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[verb]
}

// quietWorld is a reconciler over a fake API server holding one DGD, whose calls fail
// as funcs says, and the lines it logs.
func quietWorld(t *testing.T, funcs interceptor.Funcs) (*Reconciler, *v1alpha1.DynamoGraphDeployment, *events.FakeRecorder, *[]string, context.Context) {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, clientgoscheme.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	svc := func(ct string, image string) *v1alpha1.DynamoComponentDeploymentSharedSpec {
		return &v1alpha1.DynamoComponentDeploymentSharedSpec{ComponentType: ct, Replicas: ptr.To(int32(1)),
			ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: image}}}
	}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "uid-g", Generation: 1},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"Frontend": svc(v1alpha1.ComponentTypeFrontend, "frontend:1"), "worker": svc(v1alpha1.ComponentTypeWorker, "vllm:1")}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(dgd).WithStatusSubresource(dgd).WithInterceptorFuncs(funcs).Build()
	rec := events.NewFakeRecorder(20)
	r := &Reconciler{Client: c, APIReader: c, Scheme: s, Recorder: rec,
		Backends: backends.NewRegistry().Register(v1alpha1.BackendDeployment, deployment.New(c, c, s, render.Config{})),
		History:  revisions.NewHistory(c, s), Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }}
	var mu sync.Mutex
	var lines []string
	ctx := log.IntoContext(context.Background(), funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{}))
	return r, dgd, rec, &lines, ctx
}

func logged(lines *[]string, word string) int {
	n := 0
	for _, l := range *lines {
		if strings.Contains(l, word) {
			n++
		}
	}
	return n
}

// TestObserveFailedShowsOnTheDGD: a read observe cannot make (here the pod list RBAC
// refuses) is on the DGD, Ready False ObserveFailed naming it, with a Warning Event, and
// logged once at info, then retried with a growing backoff: not a Reconciler error with
// a stack trace every time (issue 38).
func TestObserveFailedShowsOnTheDGD(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`User "system:serviceaccount:x:op" cannot list resource "pods"`))
	r, dgd, rec, lines, ctx := quietWorld(t, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
		if _, ok := l.(*metav1.PartialObjectMetadataList); ok {
			return forbidden
		}
		return c.List(ctx, l, o...)
	}})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dgd)}
	var waits []time.Duration
	for range 3 {
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatalf("Reconcile returned %v: a refused read the DGD shows is not an error to log with a stack trace", err)
		}
		waits = append(waits, res.RequeueAfter)
	}
	if waits[0] <= 0 || waits[1] <= waits[0] || waits[2] <= waits[1] {
		t.Errorf("retries after %v, want a growing backoff", waits)
	}
	var got v1alpha1.DynamoGraphDeployment
	if err := r.Client.Get(ctx, req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonObserveFailed || !strings.Contains(c.Message, "listing pods of ns/g") {
		t.Errorf("Ready %+v, want False ObserveFailed naming the pod list", c)
	}
	if n := logged(lines, "refused"); n != 1 {
		t.Errorf("logged the refusal %d times in 3 passes, want once: %q", n, *lines)
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Warning ObserveFailed") {
			t.Errorf("Event %q, want a Warning ObserveFailed", e)
		}
	default:
		t.Error("no Event")
	}
}

// TestNamespaceTerminatingStopsTheDGD: a create the namespace lifecycle admission
// refuses (the namespace is being deleted) stops the DGD: Ready False and Stalled True
// NamespaceTerminating, no requeue, no error, and the next passes of the namespace's
// DGDs act on nothing (issue 38: 300 Reconciler errors while a namespace was deleted).
func TestNamespaceTerminatingStopsTheDGD(t *testing.T) {
	var n calls
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "controllerrevisions"}, "g-1",
		errors.New("unable to create new content in namespace ns because it is being terminated"))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"})
	r, dgd, _, lines, ctx := quietWorld(t, interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			n.add("create")
			return terminating
		},
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
			n.add("list")
			return c.List(ctx, l, o...)
		}})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dgd)}
	res, err := r.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter != 0 || res.Requeue {
		t.Fatalf("Reconcile = %+v, %v; want no requeue and no error", res, err)
	}
	var got v1alpha1.DynamoGraphDeployment
	if err := r.Client.Get(ctx, req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonNamespaceTerminating {
		t.Errorf("Stalled %+v, want True NamespaceTerminating", c)
	}
	creates, lists := n.get("create"), n.get("list")
	for range 3 {
		if res, err := r.Reconcile(ctx, req); err != nil || res != (ctrl.Result{}) {
			t.Fatalf("a later pass = %+v, %v", res, err)
		}
	}
	if n.get("create") != creates || n.get("list") != lists {
		t.Errorf("later passes listed %d and created %d more: a DGD whose namespace is being deleted is left alone", n.get("list")-lists, n.get("create")-creates)
	}
	if l := logged(lines, "Reconciler error"); l != 0 {
		t.Errorf("%d error lines", l)
	}
}

// TestSSHKeyCreateRemembers: the SSH key Secret's create that finds it there
// (AlreadyExists) is an answer, remembered, and no Secret is ever read.
func TestSSHKeyCreateRemembers(t *testing.T) {
	var n calls
	exists := apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, "g-mpi-ssh")
	r, _, _, _, ctx := quietWorld(t, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			if _, ok := o.(*corev1.Secret); ok {
				n.add("create")
				return exists
			}
			return c.Create(ctx, o, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			if _, ok := o.(*corev1.Secret); ok {
				t.Errorf("read Secret %s", key)
			}
			return c.Get(ctx, key, o, opts...)
		}})
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-mpi-ssh"}}
	if err := r.createSSHKey(ctx, decide.Write{Op: decide.CreateSSHKey, Object: s}); err != nil {
		t.Fatal(err)
	}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	if got := r.sshKeysOf(dgd); !got["g-mpi-ssh"] || n.get("create") != 1 {
		t.Errorf("after AlreadyExists: known %v, %d creates; want it known after one", got, n.get("create"))
	}
	if got := r.sshKeysOf(&v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "other"}}); len(got) != 0 {
		t.Errorf("another namespace knows %v", got)
	}
}
