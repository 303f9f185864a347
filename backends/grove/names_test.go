package grove

import (
	"context"
	"errors"
	"testing"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	renderpkg "github.com/dgd-rollout/operator/render"
)

func namesDGD(name string, services map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec) *v1alpha1.DynamoGraphDeployment {
	return &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Backend: v1alpha1.BackendGrove, Services: services}}
}

func svc(componentType string, nodes int32) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	s := &v1alpha1.DynamoComponentDeploymentSharedSpec{ComponentType: componentType, Replicas: ptr.To[int32](1),
		ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: "img:1.6.0", Command: []string{"python3", "-m", "dynamo.vllm"}, Args: []string{"--model", "m"}}}}
	if nodes > 1 {
		s.Multinode = &v1alpha1.MultinodeSpec{NodeCount: nodes}
	}
	return s
}

// testScheme holds Grove's, the core and the DGD's types.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{grovev1.AddToScheme, corev1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}

func namesBackend(t *testing.T, objs ...client.Object) *Backend {
	t.Helper()
	scheme := testScheme(t)
	return New(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(), scheme, renderpkg.Config{})
}

func ownedPCS(dgd *v1alpha1.DynamoGraphDeployment, name string, labels map[string]string) *grovev1.PodCliqueSet {
	return &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: dgd.Namespace, Name: name, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "DynamoGraphDeployment", Name: dgd.Name, UID: dgd.UID, Controller: ptr.To(true)}}}}
}

// TestPicksFreeNames: a DGD's PodCliqueSets take the first free name of `{dgd}`,
// `{dgd}-1`, ...: worker revisions from `{dgd}`, stable templates from `{dgd}-1`; a
// name is taken by any PodCliqueSet of the namespace (another DGD's too) and by a
// Service of ours or of the DGD's own stable services named like its headless Service.
func TestPicksFreeNames(t *testing.T) {
	dgd := namesDGD("g", map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
		"Frontend": svc("frontend", 1), "decode": svc("worker", 1),
	})
	b := namesBackend(t)
	if got := b.Name(dgd, backends.Key{Service: "decode", Hash: "aaaaaaaa"}); got != "g-0-decode" {
		t.Errorf("first worker revision: %q, want PodCliqueSet g", got)
	}
	if got := b.Name(dgd, backends.Key{Service: "decode", Hash: "bbbbbbbb"}); got != "g-1-0-decode" {
		t.Errorf("a second revision picked while the first is not created: %q, want g-1 (g is reserved)", got)
	}
	if got := b.Name(dgd, backends.Key{Service: "Frontend"}); got != "g-2-0-frontend" {
		t.Errorf("the frontend's template: %q, want g-2", got)
	}
	if got := b.Name(dgd, backends.Key{Service: "decode", Hash: "aaaaaaaa"}); got != "g-0-decode" {
		t.Errorf("asked again: %q, want the same pick", got)
	}

	// A digits-only stable service "0" has the Service g-0, Grove's headless Service
	// of a PodCliqueSet named g; another DGD's PodCliqueSet holds g-1; a Service of ours
	// of another DGD is g-2-0.
	dgd = namesDGD("g", map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
		"0": svc("other", 1), "decode": svc("worker", 1),
	})
	other := namesDGD("g-1", nil)
	other.UID = "other"
	b = namesBackend(t, ownedPCS(other, "g-1", nil),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-2-0"}})
	if got := b.Name(dgd, backends.Key{Service: "decode", Hash: "aaaaaaaa"}); got != "g-3-0-decode" {
		t.Errorf("with g, g-1 and g-2 taken: %q, want g-3", got)
	}

	// After a restart (no picks in memory) a revision is found by its labels, whatever
	// its name: a crash between creating it and writing the DGD's status costs nothing.
	dgd = namesDGD("g", map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"decode": svc("worker", 1)})
	b = namesBackend(t, ownedPCS(dgd, "g-7", map[string]string{v1alpha1.LabelWorkerHash: "aaaaaaaa"}))
	if got := b.Name(dgd, backends.Key{Service: "decode", Hash: "aaaaaaaa"}); got != "g-7-0-decode" {
		t.Errorf("an existing revision: %q, want g-7", got)
	}
	if got := b.Name(dgd, backends.Key{Service: "decode", Hash: "bbbbbbbb"}); got != "g-0-decode" {
		t.Errorf("a new revision beside it: %q, want g", got)
	}
}

// TestNamesFitGrove: Dynamo's example on Grove (DGD vg, multinode VllmPrefillWorker and
// VllmDecodeWorker) passes ValidateSpec, and at Dynamo's exact limit a second
// PodCliqueSet cuts the DGD's name instead of growing past Grove's 45 characters.
func TestNamesFitGrove(t *testing.T) {
	dgd := namesDGD("vg", map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
		"Frontend": svc("frontend", 1), "VllmDecodeWorker": svc("worker", 2), "VllmPrefillWorker": svc("worker", 2),
	})
	b := namesBackend(t)
	if err := b.ValidateSpec(dgd, dgd.ServiceNames()); err != nil {
		t.Fatalf("Dynamo deploys it: %v", err)
	}
	for i, want := range []string{"vg", "vg-1", "vg-2"} {
		pcs, err := b.pcsName(context.Background(), dgd, backends.Key{Service: "VllmPrefillWorker", Hash: string(rune('a'+i)) + "0000000"})
		if err != nil || pcs != want {
			t.Errorf("revision %d: %q (%v), want %q", i, pcs, err, want)
		}
		if n := len(pcs) + len("vllmprefillworker") + len("vllmprefillworker-ldr"); n > MaxNameLength {
			t.Errorf("revision %d: %d characters", i, n)
		}
	}
	// 13 + 2*14 + 4 = 45: Dynamo's limit exactly.
	dgd = namesDGD("thirteen-char", map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"fourteen-chars": svc("worker", 2)})
	if err := b.ValidateSpec(dgd, dgd.ServiceNames()); err != nil {
		t.Fatalf("at Dynamo's limit: %v", err)
	}
	b.picked.put(dgd.UID, workerID("a0000000"), "thirteen-char")
	pcs, err := b.pcsName(context.Background(), dgd, backends.Key{Service: "fourteen-chars", Hash: "b0000000"})
	if err != nil || pcs != "thirteen-ch-1" {
		t.Errorf("the second PodCliqueSet at the limit: %q (%v), want thirteen-ch-1", pcs, err)
	}
	dgd = namesDGD("fourteen-chars", map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"fourteen-chars": svc("worker", 2)})
	if err := b.ValidateSpec(dgd, dgd.ServiceNames()); err == nil {
		t.Error("46 characters: Dynamo refuses it, and so does ValidateSpec")
	}
}

// TestNoRoomIsASpecError: a DGD of two characters whose worker leaves exactly two for
// the PodCliqueSet deploys (Dynamo's limit), but a second revision beside the first has
// no name that fits: the controller reports it as InvalidSpec (backends.SpecError).
func TestNoRoomIsASpecError(t *testing.T) {
	dgd := namesDGD("ab", map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"abcdefghijklmnopqrs": svc("worker", 2)})
	b := namesBackend(t)
	if err := b.ValidateSpec(dgd, dgd.ServiceNames()); err != nil {
		t.Fatalf("2 + 19 + 23 = 44 is within Dynamo's limit: %v", err)
	}
	// room: 45 - 42 = 3, so `a-1` fits; with a service of 20 it would be 1.
	dgd = namesDGD("ab", map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"abcdefghijklmnopqrst": svc("worker", 2)})
	if err := b.ValidateSpec(dgd, dgd.ServiceNames()); err == nil {
		t.Fatal("2 + 20 + 24 = 46: over the limit")
	}
	dgd = namesDGD("a", map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{"abcdefghijklmnopqrst": svc("worker", 2)})
	if err := b.ValidateSpec(dgd, dgd.ServiceNames()); err != nil {
		t.Fatalf("1 + 20 + 24 = 45: %v", err)
	}
	b.picked.put(dgd.UID, workerID("a0000000"), "a")
	_, err := b.pcsName(context.Background(), dgd, backends.Key{Service: "abcdefghijklmnopqrst", Hash: "b0000000"})
	var spec *backends.SpecError
	if !errors.As(err, &spec) {
		t.Fatalf("a second revision of a 1-character DGD at the limit: %v, want a backends.SpecError", err)
	}
}
