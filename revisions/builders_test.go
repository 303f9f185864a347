package revisions

import (
	"context"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

const sampleImage = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0"

// sampleDGD returns the disaggregated vLLM sample whose hash TestHashGolden pins.
func sampleDGD() *v1alpha1.DynamoGraphDeployment {
	return &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vllm-disagg", UID: "dgd-uid-1"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{
			Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
				"Frontend": {
					ComponentType: v1alpha1.ComponentTypeFrontend,
					Replicas:      ptr(int32(1)),
					ExtraPodSpec:  &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: sampleImage}},
				},
				"VllmDecodeWorker":  sampleWorker("decode", 2, "--model", "Qwen/Qwen3-0.6B"),
				"VllmPrefillWorker": sampleWorker("prefill", 4, "--model", "Qwen/Qwen3-0.6B", "--is-prefill-worker"),
			},
		},
	}
}

// sampleWorker returns a vLLM worker service of the sample.
func sampleWorker(sub string, replicas int32, args ...string) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	return &v1alpha1.DynamoComponentDeploymentSharedSpec{
		ComponentType:    v1alpha1.ComponentTypeWorker,
		SubComponentType: sub,
		Replicas:         ptr(replicas),
		Resources:        &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: "1"}},
		ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{
			Image:   sampleImage,
			Command: []string{"python3", "-m", "dynamo.vllm"},
			Args:    args,
		}},
	}
}

// withImage returns a copy of dgd whose worker services run image.
func withImage(dgd *v1alpha1.DynamoGraphDeployment, image string) *v1alpha1.DynamoGraphDeployment {
	out := dgd.DeepCopy()
	for _, name := range out.WorkerServiceNames() {
		out.Spec.Services[name].ExtraPodSpec.MainContainer.Image = image
	}
	return out
}

// mutate returns a copy of dgd changed by f.
func mutate(dgd *v1alpha1.DynamoGraphDeployment, f func(*v1alpha1.DynamoGraphDeployment)) *v1alpha1.DynamoGraphDeployment {
	out := dgd.DeepCopy()
	f(out)
	return out
}

func ptr[T any](v T) *T { return &v }

// hashOf returns the hash of dgd's worker template with collision count 0, as Sync uses.
func hashOf(dgd *v1alpha1.DynamoGraphDeployment) string {
	return Hash(NewWorkerTemplate(dgd), ptr(int32(0)))
}

// nameOf returns the name of dgd's revision with collision count cc: the DGD's name and
// the hash of its graph template.
func nameOf(dgd *v1alpha1.DynamoGraphDeployment, cc ...int32) string {
	d := NewRevisionData(dgd)
	return RevisionName(dgd.Name, GraphHash(d.Graph(), ptr(append(cc, 0)[0])))
}

// testScheme returns a scheme with apps/v1 and the DGD types.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// implementation builds an Interface holding the given revisions.
type implementation struct {
	name string
	new  func(t *testing.T, seed ...*appsv1.ControllerRevision) Interface
}

// implementations returns the real Interface over a fake client and the Fake, so that
// every contract test runs against both.
func implementations() []implementation {
	return []implementation{
		{name: "client", new: func(t *testing.T, seed ...*appsv1.ControllerRevision) Interface {
			s := testScheme(t)
			b := fake.NewClientBuilder().WithScheme(s)
			for _, rev := range seed {
				b = b.WithObjects(rev.DeepCopy())
			}
			return NewHistory(b.Build(), s)
		}},
		// As the operator's cache serves it: indexed by graph, and a list by label (the
		// whole namespace's revisions tested) fails the test.
		{name: "indexed client", new: func(t *testing.T, seed ...*appsv1.ControllerRevision) Interface {
			s := testScheme(t)
			b := fake.NewClientBuilder().WithScheme(s).WithIndex(&appsv1.ControllerRevision{}, backends.GraphIndex, backends.GraphOf).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
					if o := (&client.ListOptions{}).ApplyOptions(opts); o.LabelSelector != nil {
						t.Errorf("listed revisions by label %s, not through the graph index", o.LabelSelector)
					}
					return c.List(ctx, l, opts...)
				}})
			for _, rev := range seed {
				b = b.WithObjects(rev.DeepCopy())
			}
			return NewHistory(b.Build(), s)
		}},
		{name: "fake", new: func(_ *testing.T, seed ...*appsv1.ControllerRevision) Interface {
			return NewFake(seed...)
		}},
	}
}

// ownedRevision returns NewRevision(dgd, number, &collisionCount) controlled by owner
// (nil: no owner), for seeding a history.
func ownedRevision(t *testing.T, dgd *v1alpha1.DynamoGraphDeployment, number int64, collisionCount int32,
	owner *v1alpha1.DynamoGraphDeployment) *appsv1.ControllerRevision {
	t.Helper()
	rev, err := NewRevision(dgd, number, &collisionCount)
	if err != nil {
		t.Fatal(err)
	}
	if owner != nil {
		rev.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner,
			v1alpha1.GroupVersion.WithKind("DynamoGraphDeployment"))}
	}
	return rev
}

// names returns "name@revision" of each revision, for compact comparisons.
func names(revs []*appsv1.ControllerRevision) []string {
	out := make([]string, len(revs))
	for i, rev := range revs {
		out[i] = rev.Name + "@" + strconv.FormatInt(rev.Revision, 10)
	}
	return out
}

// mustList lists dgd's revisions or fails the test.
func mustList(t *testing.T, h Interface, dgd *v1alpha1.DynamoGraphDeployment) []*appsv1.ControllerRevision {
	t.Helper()
	revs, err := h.List(context.Background(), dgd)
	if err != nil {
		t.Fatal(err)
	}
	return revs
}
