package controllers

import (
	"context"
	"testing"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
)

// An older Dynamo ran one LeaderWorkerSet per replica (`<dcd>-0`, `<dcd>-1`), all of one
// (component, worker hash): the key's pods (3 gangs, one terminating) are counted once
// over them, not once each, as the planner sums a revision's workloads.
func TestSharePods(t *testing.T) {
	key := backends.Key{Service: "decode", Hash: "d1a2b3c4"}
	w := func(name string, current int32) decide.Workload {
		return decide.Workload{Backend: decide.DynamoBackend, Pods: 3, Workload: backends.Workload{Key: key, Kind: lws.Kind, Name: name, Current: current}}
	}
	other := decide.Workload{Backend: decide.DynamoBackend, Pods: 2, Workload: backends.Workload{Key: backends.Key{Service: "prefill", Hash: "d1a2b3c4"}, Name: "p-0", Current: 2}}
	ws := []decide.Workload{w("g-decode-d1a2b3c4-1", 1), other, w("g-decode-d1a2b3c4-0", 1)}
	sharePods(ws)
	if ws[2].Pods != 2 || ws[0].Pods != 1 || ws[1].Pods != 2 {
		t.Errorf("pods %d (-0), %d (-1), %d (prefill): want 2 (its own and the terminating one), 1, 2 (alone, unchanged)", ws[2].Pods, ws[0].Pods, ws[1].Pods)
	}
}

// dynamoPCS is a PodCliqueSet as Dynamo's operator renders a disaggregated graph on
// Grove (ai-dynamo/dynamo internal/dynamo/graph.go GenerateGrovePodCliqueSet): the DGD's
// name, controlled by it, a standalone clique per single-node component (minAvailable
// 1), a scaling group `<component>` of `<component>-ldr` and `<component>-wkr` for a
// multinode one; every clique labelled with its component, none with a worker hash.
func dynamoPCS(name string, owner types.UID, annotations map[string]string) *grovev1.PodCliqueSet {
	clique := func(name, component string, replicas int32) *grovev1.PodCliqueTemplateSpec {
		return &grovev1.PodCliqueTemplateSpec{Name: name, Labels: map[string]string{v1alpha1.LabelService: component},
			Spec: grovev1.PodCliqueSpec{Replicas: replicas, MinAvailable: ptr.To(replicas)}}
	}
	fe, dec := clique("frontend", "Frontend", 1), clique("decode", "decode", 2)
	dec.Spec.MinAvailable = ptr.To[int32](1)
	return &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Annotations: annotations,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: "DynamoGraphDeployment", Name: "g", UID: owner, Controller: ptr.To(true)}}},
		Spec: grovev1.PodCliqueSetSpec{Replicas: 1, Template: grovev1.PodCliqueSetTemplateSpec{
			Cliques: []*grovev1.PodCliqueTemplateSpec{fe, dec, clique("prefill-ldr", "prefill", 1), clique("prefill-wkr", "prefill", 1)},
			PodCliqueScalingGroupConfigs: []grovev1.PodCliqueScalingGroupConfig{{Name: "prefill", CliqueNames: []string{"prefill-ldr", "prefill-wkr"},
				Replicas: ptr.To[int32](2), MinAvailable: ptr.To[int32](1)}}}}}
}

// Dynamo's Grove pathway: the PodCliqueSet the DGD controls that carries no mark of ours
// (grove.NotOurs) is Dynamo's; ours (AnnotationCliques) and another DGD's are not. With
// the Grove backend running, its worker components are workloads of revision 0 (the
// legacy hash: its cliques carry none), read from Grove's PodClique (ready pods) and
// PodCliqueScalingGroup (available gangs), grouped under it, with their floors
// (minAvailable); its frontend is no workload. Without the Grove backend, or of a shape
// not taken over (a GPU memory service clique beside the engine's), it is held
// (Unsupported, with why). A cluster without Grove's CRD has none.
func TestDynamoPodCliqueSets(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, grovev1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "dgd-uid"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"Frontend": {ComponentType: v1alpha1.ComponentTypeFrontend}, "decode": {ComponentType: v1alpha1.ComponentTypeDecode},
			"prefill": {ComponentType: v1alpha1.ComponentTypePrefill}}}}
	theirs := dynamoPCS("g", "dgd-uid", map[string]string{"team": "a"})
	owned := func(o interface{ SetOwnerReferences([]metav1.OwnerReference) }) {
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "grove.io/v1alpha1", Kind: grove.Kind, Name: "g", UID: theirs.UID, Controller: ptr.To(true)}})
	}
	pclq := &grovev1.PodClique{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-0-decode"},
		Spec: grovev1.PodCliqueSpec{Replicas: 2}, Status: grovev1.PodCliqueStatus{ReadyReplicas: 2, Replicas: 2}}
	pcsg := &grovev1.PodCliqueScalingGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g-0-prefill"},
		Spec: grovev1.PodCliqueScalingGroupSpec{Replicas: 2}, Status: grovev1.PodCliqueScalingGroupStatus{AvailableReplicas: 1, Replicas: 2}}
	owned(pclq)
	owned(pcsg)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(theirs, pclq, pcsg,
		dynamoPCS("g-1", "dgd-uid", map[string]string{grove.AnnotationCliques: "{}"}), // ours
		dynamoPCS("h", "other-uid", nil),                                              // another DGD's
	).Build()
	pods := []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app.kubernetes.io/part-of": "g", v1alpha1.LabelManagedBy: "grove-operator"}}}}

	r := &Reconciler{APIReader: c, Backends: backends.NewRegistry()}
	dy := &decide.Dynamo{}
	if ws, err := r.dynamoPodCliqueSets(context.Background(), dgd, dy, pods, nil); err != nil || len(ws) != 0 ||
		len(dy.Unsupported) != 1 || dy.Unsupported[0].Name != "g" || len(dy.Shapes) != 1 {
		t.Fatalf("no Grove backend: workloads %v, unsupported %v (%v), %v: want Dynamo's PodCliqueSet g held", ws, dy.Unsupported, dy.Shapes, err)
	}

	r.Backends = backends.NewRegistry().Register(v1alpha1.BackendGrove, grove.New(c, s, render.Config{}))
	dy = &decide.Dynamo{}
	ws, err := r.dynamoPodCliqueSets(context.Background(), dgd, dy, pods, map[backends.Key]int32{{Service: "decode", Hash: legacyHash}: 2})
	if err != nil || len(dy.Unsupported) != 0 || len(ws) != 2 || dy.Pods != 1 {
		t.Fatalf("workloads %+v, unsupported %v, pods %d, %v: want decode and prefill of Dynamo's g, 1 pod", ws, dy.Unsupported, dy.Pods, err)
	}
	dec, pre := ws[0], ws[1]
	if dec.Kind != "PodClique" || dec.Name != "g-0-decode" || dec.Key != (backends.Key{Service: "decode", Hash: legacyHash}) ||
		dec.Backend != decide.DynamoBackend || dec.Replicas != 2 || dec.Ready != 2 || dec.Pods != 2 || dec.Group == nil || dec.Group.Name != "g" {
		t.Errorf("decode %+v: want PodClique g-0-decode, legacy, 2 ready of 2, grouped under g", dec)
	}
	if pre.Kind != "PodCliqueScalingGroup" || pre.Name != "g-0-prefill" || pre.Replicas != 2 || pre.Ready != 1 {
		t.Errorf("prefill %+v: want PodCliqueScalingGroup g-0-prefill, 1 available gang of 2", pre)
	}
	if dy.Floors["g-0-decode"] != 1 || dy.Floors["g-0-prefill"] != 1 {
		t.Errorf("floors %v: want 1 each (minAvailable)", dy.Floors)
	}

	gms := dynamoPCS("g", "dgd-uid", nil)
	gms.Spec.Template.Cliques = append(gms.Spec.Template.Cliques, &grovev1.PodCliqueTemplateSpec{Name: "decode-gms-0",
		Labels: map[string]string{v1alpha1.LabelService: "decode"}, Spec: grovev1.PodCliqueSpec{Replicas: 1}})
	r.APIReader = fake.NewClientBuilder().WithScheme(s).WithObjects(gms).Build()
	dy = &decide.Dynamo{}
	if ws, err := r.dynamoPodCliqueSets(context.Background(), dgd, dy, nil, nil); err != nil || len(ws) != 0 || len(dy.Unsupported) != 1 {
		t.Errorf("GMS layout: workloads %v, unsupported %v, %v: want it held", ws, dy.Unsupported, err)
	}

	r.APIReader = fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()
	dy = &decide.Dynamo{}
	if ws, err := r.dynamoPodCliqueSets(context.Background(), dgd, dy, nil, nil); err != nil || len(ws) != 0 || len(dy.Unsupported) != 0 {
		t.Errorf("no Grove CRD: got %v, %v, %v, want none and no error", ws, dy.Unsupported, err)
	}
}

// Dynamo's LeaderWorkerSets of a DGD: a worker component's is a workload of revision 0
// (keyed by its labels, its replicas and ready counts in gangs); a non-worker
// component's (a multinode frontend) is not taken over (Unsupported: the pass holds),
// for ours would run beside it under another name and nothing would remove it.
func TestDynamoObjectsLeaderWorkerSets(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, clientgoscheme.AddToScheme, lwsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "dgd-uid"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"Frontend": {ComponentType: v1alpha1.ComponentTypeFrontend}, "decode": {ComponentType: v1alpha1.ComponentTypeDecode}}}}
	set := func(name, service, hash string) *lwsv1.LeaderWorkerSet {
		l := map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: service}
		if hash != "" {
			l[v1alpha1.LabelWorkerHash] = hash
		}
		return &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: l, Generation: 1,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nvidia.com/v1beta1", Kind: decide.DCDKind, Name: name[:len(name)-2], UID: "dcd", Controller: ptr.To(true)}}},
			Spec:   lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To[int32](2)},
			Status: lwsv1.LeaderWorkerSetStatus{ReadyReplicas: 1, Replicas: 2, UpdatedReplicas: 2, ObservedGeneration: 1}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(set("g-decode-d1a2b3c4-0", "decode", "d1a2b3c4"), set("g-frontend-0", "Frontend", "")).Build()
	r := &Reconciler{APIReader: c, Backends: backends.NewRegistry().Register(v1alpha1.BackendLeaderWorkerSet, lws.New(nil, nil, render.Config{}))}
	dy := &decide.Dynamo{}
	ws, byDCD, err := r.dynamoObjects(context.Background(), dgd, dy, map[backends.Key]int32{{Service: "decode", Hash: "d1a2b3c4"}: 2})
	if err != nil || !byDCD {
		t.Fatalf("err %v, byDCD %v", err, byDCD)
	}
	if len(ws) != 1 || ws[0].Kind != lws.Kind || ws[0].Backend != decide.DynamoBackend || ws[0].Replicas != 2 || ws[0].Ready != 1 || ws[0].Pods != 2 || !ws[0].Synced {
		t.Errorf("workloads %+v: want Dynamo's decode LeaderWorkerSet, 2 gangs, 1 ready, 2 with pods, synced", ws)
	}
	if len(dy.Unsupported) != 1 || dy.Unsupported[0].Name != "g-frontend-0" || len(dy.Stable) != 0 {
		t.Errorf("unsupported %v, stable %v: want the frontend's LeaderWorkerSet unsupported", dy.Unsupported, dy.Stable)
	}
}
