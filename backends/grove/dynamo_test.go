package grove

import (
	"context"
	"strings"
	"testing"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	renderpkg "github.com/dgd-rollout/operator/render"
)

// dynamosPCS is a PodCliqueSet as Dynamo's operator renders a graph on Grove
// (ai-dynamo/dynamo internal/dynamo/graph.go GenerateGrovePodCliqueSet): a standalone
// clique per single-node component, a scaling group `<component>` of `-ldr` and `-wkr`
// cliques for a multinode one, each clique labelled with its component.
func dynamosPCS() *grovev1.PodCliqueSet {
	clique := func(name, component string, replicas, minAvailable int32) *grovev1.PodCliqueTemplateSpec {
		return &grovev1.PodCliqueTemplateSpec{Name: name, Labels: map[string]string{v1alpha1.LabelService: component},
			Spec: grovev1.PodCliqueSpec{Replicas: replicas, MinAvailable: ptr.To(minAvailable)}}
	}
	return &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "pcs-uid"},
		Spec: grovev1.PodCliqueSetSpec{Replicas: 1, Template: grovev1.PodCliqueSetTemplateSpec{
			Cliques: []*grovev1.PodCliqueTemplateSpec{clique("frontend", "Frontend", 1, 1), clique("decode", "decode", 3, 2),
				clique("prefill-ldr", "prefill", 1, 1), clique("prefill-wkr", "prefill", 3, 3)},
			PodCliqueScalingGroupConfigs: []grovev1.PodCliqueScalingGroupConfig{{Name: "prefill", CliqueNames: []string{"prefill-ldr", "prefill-wkr"},
				Replicas: ptr.To[int32](2), MinAvailable: ptr.To[int32](1)}}}}}
}

// DynamoShape accepts Dynamo's plain layout and names what it does not take over: a
// second replica, a GPU memory service clique beside a component's engine, a scaling
// group that is not a leader and a worker (a single-node component forced into one),
// a clique naming no component.
func TestDynamoShape(t *testing.T) {
	if why := DynamoShape(dynamosPCS()); why != "" {
		t.Fatalf("Dynamo's plain layout: %s", why)
	}
	for name, c := range map[string]struct {
		change func(*grovev1.PodCliqueSet)
		want   string
	}{
		"two replicas": {func(p *grovev1.PodCliqueSet) { p.Spec.Replicas = 2 }, "2 replicas"},
		"GMS": {func(p *grovev1.PodCliqueSet) {
			p.Spec.Template.Cliques = append(p.Spec.Template.Cliques, &grovev1.PodCliqueTemplateSpec{Name: "decode-gms-0", Labels: map[string]string{v1alpha1.LabelService: "decode"}})
		}, "component decode runs in several cliques"},
		"forced group": {func(p *grovev1.PodCliqueSet) {
			p.Spec.Template.PodCliqueScalingGroupConfigs = append(p.Spec.Template.PodCliqueScalingGroupConfigs, grovev1.PodCliqueScalingGroupConfig{Name: "decode", CliqueNames: []string{"decode"}})
		}, "scaling group decode holds cliques [decode]"},
		"unlabelled": {func(p *grovev1.PodCliqueSet) { p.Spec.Template.Cliques[0].Labels = nil }, "clique frontend names no component"},
	} {
		p := dynamosPCS()
		c.change(p)
		if why := DynamoShape(p); !strings.Contains(why, c.want) {
			t.Errorf("%s: %q, want it to say %q", name, why, c.want)
		}
	}
}

// ObserveDynamo reads each component's PodClique / PCSG with its floor (minAvailable);
// ScaleDynamo reads the PodCliqueSet past the cache (Reader): one gone is nothing to
// do, a component it does not hold an error.
func TestObserveDynamo(t *testing.T) {
	scheme := testScheme(t)
	pcs := dynamosPCS()
	ref := []metav1.OwnerReference{{APIVersion: "grove.io/v1alpha1", Kind: Kind, Name: "g", UID: pcs.UID, Controller: ptr.To(true)}}
	pclq := &grovev1.PodClique{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-0-decode", OwnerReferences: ref},
		Spec: grovev1.PodCliqueSpec{Replicas: 3}, Status: grovev1.PodCliqueStatus{ReadyReplicas: 3}}
	pcsg := &grovev1.PodCliqueScalingGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-0-prefill", OwnerReferences: ref},
		Spec: grovev1.PodCliqueScalingGroupSpec{Replicas: 2}, Status: grovev1.PodCliqueScalingGroupStatus{AvailableReplicas: 2}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pcs.DeepCopy(), pclq, pcsg).Build()
	b := New(c, scheme, renderpkg.Config{})
	b.Reader = c
	ctx := context.Background()
	got, err := b.ObserveDynamo(ctx, pcs)
	if err != nil || len(got) != 3 {
		t.Fatalf("%+v, %v: want frontend, decode, prefill", got, err)
	}
	byName := map[string]DynamoComponent{}
	for _, d := range got {
		byName[d.Name] = d
	}
	if d := byName["g-0-decode"]; d.Kind != "PodClique" || d.Replicas != 3 || d.Ready != 3 || d.Floor != 2 || d.Service != "decode" || d.Group.Name != "g" {
		t.Errorf("decode %+v: want PodClique 3/3, floor 2, in g", d)
	}
	if d := byName["g-0-prefill"]; d.Kind != "PodCliqueScalingGroup" || d.Replicas != 2 || d.Ready != 2 || d.Floor != 1 {
		t.Errorf("prefill %+v: want PCSG 2/2 gangs, floor 1", d)
	}
	// ScaleDynamo's scale subresource writes are played by the fake Grove of the envtest
	// suite (test/envtest/grove "a graph Dynamo's operator runs on Grove"); the fake
	// client here implements no scale subresource for Grove's kinds.
	if err := b.ScaleDynamo(ctx, "ns", "gone", "decode", 2); err != nil {
		t.Errorf("a PodCliqueSet that is gone: %v, want nothing done", err)
	}
	if err := b.ScaleDynamo(ctx, "ns", "g", "planner", 1); err == nil {
		t.Errorf("a component Dynamo's PodCliqueSet does not hold: no error")
	}
}
