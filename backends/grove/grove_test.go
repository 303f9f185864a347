package grove

import (
	"context"
	"testing"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	renderpkg "github.com/dgd-rollout/operator/render"
)

// staleReader serves PodCliqueSets from a copy taken before any write, as an
// informer cache does until the watch event of a write arrives.
type staleReader struct {
	client.Client
	pcs *grovev1.PodCliqueSet
}

func (s staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if p, ok := obj.(*grovev1.PodCliqueSet); ok && key.Name == s.pcs.Name {
		s.pcs.DeepCopyInto(p)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// TestScaleTemplateKeepsOtherServices: two services of one revision scaled in one pass
// from a stale PodCliqueSet copy both keep their template counts (a merge patch of the
// whole cliques list from the stale copy undid the first write).
func TestScaleTemplateKeepsOtherServices(t *testing.T) {
	scheme := testScheme(t)
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "dgd-uid"}}
	pcs := &grovev1.PodCliqueSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Labels: map[string]string{v1alpha1.LabelWorkerHash: "abc"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "DynamoGraphDeployment", Name: "g", UID: "dgd-uid", Controller: ptr.To(true)}},
			Annotations:     map[string]string{AnnotationCliques: `{"prefill":{"clique":"prefill"},"decode":{"clique":"decode"},"mn":{"group":"mn"}}`}},
		Spec: grovev1.PodCliqueSetSpec{Replicas: 1, Template: grovev1.PodCliqueSetTemplateSpec{
			Cliques: []*grovev1.PodCliqueTemplateSpec{
				{Name: "decode", Spec: grovev1.PodCliqueSpec{Replicas: 1}},
				{Name: "mn-l", Spec: grovev1.PodCliqueSpec{Replicas: 1}},
				{Name: "mn-w", Spec: grovev1.PodCliqueSpec{Replicas: 3}},
				{Name: "prefill", Spec: grovev1.PodCliqueSpec{Replicas: 1}},
			},
			PodCliqueScalingGroupConfigs: []grovev1.PodCliqueScalingGroupConfig{
				{Name: "mn", CliqueNames: []string{"mn-l", "mn-w"}, Replicas: ptr.To[int32](1)},
			},
		}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pcs.DeepCopy()).Build()
	b := New(staleReader{Client: c, pcs: pcs.DeepCopy()}, scheme, renderpkg.Config{})
	ctx := context.Background()
	if err := b.Scale(ctx, dgd, backends.Workload{Key: backends.Key{Service: "decode", Hash: "abc"}}, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.Scale(ctx, dgd, backends.Workload{Key: backends.Key{Service: "prefill", Hash: "abc"}}, 3); err != nil {
		t.Fatal(err)
	}
	if err := b.Scale(ctx, dgd, backends.Workload{Key: backends.Key{Service: "mn", Hash: "abc"}}, 4); err != nil {
		t.Fatal(err)
	}
	var got grovev1.PodCliqueSet
	if err := c.Get(ctx, client.ObjectKeyFromObject(pcs), &got); err != nil {
		t.Fatal(err)
	}
	for pl, want := range map[placement]int32{{Clique: "decode"}: 2, {Clique: "prefill"}: 3, {Group: "mn"}: 4} {
		if n := templateReplicas(&got, pl); n != want {
			t.Errorf("%+v template: %d, want %d", pl, n, want)
		}
	}
	if n := got.Spec.Template.Cliques[2].Spec.Replicas; n != 3 {
		t.Errorf("mn worker clique: %d pods per gang, want 3 (untouched)", n)
	}
}

// Dynamo's own operator's PodCliqueSet of a DGD (controlled by the DGD, named after it,
// only the DGD spec's annotations) is not ours; ours carry AnnotationCliques; other kinds
// are not judged.
func TestNotOurs(t *testing.T) {
	pcs := grovev1.SchemeGroupVersion.WithKind("PodCliqueSet")
	for _, c := range []struct {
		name        string
		gvk         string
		annotations map[string]string
		want        bool
	}{
		{"Dynamo's", "PodCliqueSet", map[string]string{"team": "a"}, true},
		{"Dynamo's, no annotations", "PodCliqueSet", nil, true},
		{"ours", "PodCliqueSet", map[string]string{AnnotationCliques: `{}`}, false},
		{"a Deployment", "Deployment", nil, false},
	} {
		gvk := pcs
		if c.gvk != "PodCliqueSet" {
			gvk = metav1.SchemeGroupVersion.WithKind(c.gvk)
			gvk.Group = "apps"
		}
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "g", Annotations: c.annotations}}
		if got := NotOurs(gvk, o); got != c.want {
			t.Errorf("%s: NotOurs = %v, want %v", c.name, got, c.want)
		}
	}
}
