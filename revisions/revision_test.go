package revisions

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
)

func TestNewRevision(t *testing.T) {
	dgd := mutate(sampleDGD(), func(d *v1alpha1.DynamoGraphDeployment) {
		d.Annotations = map[string]string{v1alpha1.AnnotationChangeCause: "kubectl apply", "other": "x"}
	})
	rev, err := NewRevision(dgd, 7, ptr(int32(0)))
	if err != nil {
		t.Fatal(err)
	}
	hash := hashOf(dgd)
	wantMeta := metav1.ObjectMeta{
		Namespace: "default",
		Name:      nameOf(dgd),
		Labels: map[string]string{
			v1alpha1.LabelGraph:      "vllm-disagg",
			v1alpha1.LabelWorkerHash: hash,
			v1alpha1.LabelManagedBy:  v1alpha1.ManagedByValue,
		},
		Annotations: map[string]string{v1alpha1.AnnotationChangeCause: "kubectl apply"},
	}
	if diff := cmp.Diff(wantMeta, rev.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if rev.Revision != 7 {
		t.Errorf("revision = %d, want 7", rev.Revision)
	}
	data, err := DecodeRevisionData(rev)
	if err != nil {
		t.Fatal(err)
	}
	want := RevisionData{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
		"Frontend":          dgd.Spec.Services["Frontend"],
		"VllmDecodeWorker":  dgd.Spec.Services["VllmDecodeWorker"],
		"VllmPrefillWorker": dgd.Spec.Services["VllmPrefillWorker"],
	}, RenderVersion: render.RenderVersion, WholeGraph: true}
	if diff := cmp.Diff(want, *data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	if got := HashOf(rev); got != hash {
		t.Errorf("HashOf = %q, want %q", got, hash)
	}
}

func TestNewRevisionWithoutChangeCause(t *testing.T) {
	rev, err := NewRevision(sampleDGD(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Annotations != nil {
		t.Errorf("annotations = %v, want none", rev.Annotations)
	}
}

func TestEqual(t *testing.T) {
	rev := func(d *v1alpha1.DynamoGraphDeployment, number int64) *appsv1.ControllerRevision {
		r, err := NewRevision(d, number, ptr(int32(0)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := rev(sampleDGD(), 1)
	broken := base.DeepCopy()
	broken.Data = runtime.RawExtension{Raw: []byte("{not json")}
	tests := []struct {
		name string
		a, b *appsv1.ControllerRevision
		want bool
	}{
		{name: "same template, other number", a: base, b: rev(sampleDGD(), 5), want: true},
		{name: "replicas differ", a: base, b: rev(mutate(sampleDGD(), func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["VllmDecodeWorker"].Replicas = ptr(int32(9))
		}), 2), want: true},
		{name: "frontend differs: another revision", a: base, b: rev(mutate(sampleDGD(), func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].ExtraPodSpec = &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{Image: "f:2"}}
		}), 2), want: false},
		{name: "frontend replicas differ", a: base, b: rev(mutate(sampleDGD(), func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services["Frontend"].Replicas = ptr(int32(4))
		}), 2), want: true},
		{name: "workers only (an earlier operator's) against whole graph", a: base, b: workersOnly(t, base), want: false},
		{name: "image differs", a: base, b: rev(withImage(sampleDGD(), "v2"), 2), want: false},
		{name: "undecodable data", a: base, b: broken, want: false},
		{name: "nil revision", a: base, b: nil, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Equal(tc.a, tc.b); got != tc.want {
				t.Errorf("Equal = %v, want %v", got, tc.want)
			}
			if got := Equal(tc.b, tc.a); got != tc.want {
				t.Errorf("Equal (swapped) = %v, want %v", got, tc.want)
			}
		})
	}
}

// workersOnly returns rev as an operator before whole-graph revisions wrote it: its
// data holds the worker services only, without WholeGraph.
func workersOnly(t *testing.T, rev *appsv1.ControllerRevision) *appsv1.ControllerRevision {
	t.Helper()
	d, err := DecodeRevisionData(rev)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range d.Services {
		if !s.IsWorker() {
			delete(d.Services, name)
		}
	}
	d.WholeGraph = false
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	out := rev.DeepCopy()
	out.Data = runtime.RawExtension{Raw: raw}
	return out
}

func TestFindEqual(t *testing.T) {
	a1 := ownedRevision(t, sampleDGD(), 1, 0, nil)
	b := ownedRevision(t, withImage(sampleDGD(), "v2"), 2, 0, nil)
	a3 := ownedRevision(t, sampleDGD(), 3, 1, nil)
	got := FindEqual([]*appsv1.ControllerRevision{a1, b, a3}, ownedRevision(t, sampleDGD(), 9, 0, nil))
	if diff := cmp.Diff(names([]*appsv1.ControllerRevision{a1, a3}), names(got)); diff != "" {
		t.Errorf("FindEqual (-want +got):\n%s", diff)
	}
}

func TestNextRevision(t *testing.T) {
	tests := []struct {
		name    string
		numbers []int64
		want    int64
	}{
		{name: "empty history", want: 1},
		{name: "sorted", numbers: []int64{1, 2, 3}, want: 4},
		{name: "unsorted with gaps", numbers: []int64{7, 2, 5}, want: 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var revs []*appsv1.ControllerRevision
			for _, n := range tc.numbers {
				revs = append(revs, &appsv1.ControllerRevision{Revision: n})
			}
			if got := NextRevision(revs); got != tc.want {
				t.Errorf("NextRevision = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestHashOf(t *testing.T) {
	tests := []struct {
		name string
		rev  *appsv1.ControllerRevision
		want string
	}{
		{name: "label", rev: &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "g-x",
			Labels: map[string]string{v1alpha1.LabelWorkerHash: "abc", v1alpha1.LabelGraph: "g"}}}, want: "abc"},
		{name: "name fallback", rev: &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "g-abc",
			Labels: map[string]string{v1alpha1.LabelGraph: "g"}}}, want: "abc"},
		{name: "foreign name", rev: &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "other-abc",
			Labels: map[string]string{v1alpha1.LabelGraph: "g"}}}, want: ""},
		{name: "no labels", rev: &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "g-abc"}}, want: ""},
		{name: "nil", rev: nil, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := HashOf(tc.rev); got != tc.want {
				t.Errorf("HashOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRevisionNameLength(t *testing.T) {
	long := strings.Repeat("a", 253)
	name := RevisionName(long, "8565b954bd")
	if len(name) > 253 {
		t.Errorf("len(RevisionName) = %d, want <= 253", len(name))
	}
	if !strings.HasSuffix(name, "-8565b954bd") {
		t.Errorf("RevisionName = %q, want the hash kept", name)
	}
}

func TestDecodeRevisionDataErrors(t *testing.T) {
	tests := map[string]*appsv1.ControllerRevision{
		"nil":     nil,
		"no data": {},
		"garbage": {Data: runtime.RawExtension{Raw: []byte("[1,2")}},
	}
	for name, rev := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeRevisionData(rev); err == nil {
				t.Error("DecodeRevisionData succeeded, want an error")
			}
		})
	}
}

// TestRefOf: a revision's one identity, from a whole-graph revision and from one made
// before whole-graph revisions (named by its worker hash).
func TestRefOf(t *testing.T) {
	rev, err := NewRevision(sampleDGD(), 3, ptr(int32(0)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := RefOf(rev), (Ref{Number: 3, Name: "vllm-disagg-2ee846c6", WorkerHash: "9670987e", GraphHash: "2ee846c6"}); got != want {
		t.Errorf("RefOf(whole-graph revision) = %+v, want %+v", got, want)
	}
	old := rev.DeepCopy()
	old.Name, old.Labels = "vllm-disagg-9670987e", map[string]string{v1alpha1.LabelGraph: "vllm-disagg"}
	if got, want := RefOf(old), (Ref{Number: 3, Name: "vllm-disagg-9670987e", WorkerHash: "9670987e", GraphHash: "9670987e"}); got != want {
		t.Errorf("RefOf(workers-only revision) = %+v, want %+v", got, want)
	}
	if !RefOf(nil).IsZero() {
		t.Error("RefOf(nil) names a revision")
	}
}
