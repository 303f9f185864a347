package controllers

import (
	"context"
	"testing"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/deployment"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
)

// Dynamo's worker Deployments being taken over (backend decide.DynamoBackend, which no
// backend of ours manages) are routable as ours are: a ready pod of theirs that is a
// ready discovery endpoint counts. Before, none counted, observe lowered their ready
// count to zero and the first pass after Dynamo's operator was stopped drained them at
// once, before the new revision was ready (e2e "Moving over from Dynamo's operator").
func TestRoutableCountsDynamoWorkloads(t *testing.T) {
	r := &Reconciler{Backends: backends.NewRegistry().Register(v1alpha1.BackendDeployment, deployment.New(nil, nil, nil, render.Config{}))}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	const theirs, ours = "d1a2b3c4", "6101c065"
	pod := func(name, hash string, managed bool) metav1.PartialObjectMetadata {
		l := map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: "decode", v1alpha1.LabelWorkerHash: hash}
		if managed {
			l[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
		}
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Labels: l}}
	}
	pods := []metav1.PartialObjectMetadata{pod("dynamo-0", theirs, false), pod("dynamo-1", theirs, false), pod("ours-0", ours, true)}
	workloads := []decide.Workload{
		{Backend: decide.DynamoBackend, Workload: backends.Workload{Key: backends.Key{Service: "decode", Hash: theirs}, Kind: "Deployment", Name: "g-decode-" + theirs}},
		{Backend: "Deployment", Workload: backends.Workload{Key: backends.Key{Service: "decode", Hash: ours}, Kind: "Deployment", Name: "g-decode-" + ours}},
	}
	ready := map[string]map[types.UID]bool{"dynamo-0": {"dynamo-0-uid": true}, "ours-0": {"ours-0-uid": true}} // dynamo-1 not (yet) an endpoint
	got := r.routable(dgd, pods, workloads, ready, ready)
	if got[workloads[0].Key] != 1 || got[workloads[1].Key] != 1 {
		t.Fatalf("routable %v: want 1 of Dynamo's (its endpoint ready) and 1 of ours", got)
	}
}

// A worker Deployment of a Dynamo of before its rolling updates carries no worker hash,
// nor do its pods: its workload is keyed "legacy" (dynamoWorkload), and so are they
// (podKey), so a ready endpoint of theirs counts. Before, none did (their key had no
// hash), and the planner would have drained them at once. A hashless pod of ours (a
// stable service's) keeps its key.
func TestRoutableCountsDynamoLegacyWorkers(t *testing.T) {
	r := &Reconciler{Backends: backends.NewRegistry().Register(v1alpha1.BackendDeployment, deployment.New(nil, nil, nil, render.Config{}))}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"Frontend": {ComponentType: v1alpha1.ComponentTypeFrontend}, "decode": {ComponentType: v1alpha1.ComponentTypeDecode}}}}
	pod := func(name string) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"),
			Labels: map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: "decode"}}}
	}
	pods := []metav1.PartialObjectMetadata{pod("g-decode-abc-0"), pod("g-decode-abc-1")}
	w, ok := r.dynamoWorkload(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "g-decode",
		Labels: map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: "decode"}}}, podCounts(dgd, pods))
	if !ok {
		t.Fatal("Dynamo's Deployment not read by the Deployment backend")
	}
	if w.Hash != legacyHash || w.Pods != 2 {
		t.Fatalf("workload %+v: want key hash %q and 2 pods", w.Workload, legacyHash)
	}
	ready := map[string]map[types.UID]bool{"g-decode-abc-0": {"g-decode-abc-0-uid": true}}
	if got := r.routable(dgd, pods, []decide.Workload{w}, ready, ready); got[w.Key] != 1 {
		t.Errorf("routable %v: want 1 (its ready endpoint)", got)
	}
	ours := map[string]string{v1alpha1.LabelService: "Frontend", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	if k := podKey(dgd, ours); k.Hash != "" {
		t.Errorf("our frontend pod keyed %+v", k)
	}
}

// Dynamo's LeaderWorkerSets being taken over count a gang routable by its leader, as
// ours do: the pod LWS labels worker-index 0 (Dynamo's Service selects only leaders, so
// a gang worker is never its endpoint; one that were would still not count). Without
// the LeaderWorkerSet backend registered none would count, and Dynamo's gangs would be
// drained at once (observe reads no LeaderWorkerSet then: dynamoWorkloadObjects).
func TestRoutableCountsDynamoGangLeaders(t *testing.T) {
	r := &Reconciler{Backends: backends.NewRegistry().
		Register(v1alpha1.BackendDeployment, deployment.New(nil, nil, nil, render.Config{})).
		Register(v1alpha1.BackendLeaderWorkerSet, lws.New(nil, nil, render.Config{}))}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	const theirs = "d1a2b3c4"
	pod := func(name, index string) metav1.PartialObjectMetadata {
		l := map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: "decode", v1alpha1.LabelWorkerHash: theirs,
			lwsv1.WorkerIndexLabelKey: index, render.LabelRole: map[string]string{"0": "leader"}[index]}
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Labels: l}}
	}
	// Two gangs of 2 (`<lws>-<group>` the leader, `<lws>-<group>-<index>` a worker).
	set := "g-decode-" + theirs + "-0"
	pods := []metav1.PartialObjectMetadata{pod(set+"-0", "0"), pod(set+"-0-1", "1"), pod(set+"-1", "0"), pod(set+"-1-1", "1")}
	w := decide.Workload{Backend: decide.DynamoBackend, Workload: backends.Workload{Key: backends.Key{Service: "decode", Hash: theirs}, Kind: lws.Kind, Name: set}}
	ready := map[string]map[types.UID]bool{}
	for _, p := range pods {
		ready[p.Name] = map[types.UID]bool{p.UID: true}
	}
	if got := r.routable(dgd, pods, []decide.Workload{w}, ready, ready); got[w.Key] != 2 {
		t.Errorf("routable %v: want 2 (each gang's leader)", got)
	}
	delete(ready, set+"-1")
	if got := r.routable(dgd, pods, []decide.Workload{w}, ready, ready); got[w.Key] != 1 {
		t.Errorf("routable %v with one leader not an endpoint: want 1", got)
	}
}

// Only a pod without any managed-by label is taken for one of Dynamo's operator: our
// pods on Grove carry managed-by grove-operator (Grove's labels win over the template's)
// and must not make a DGD wait for Dynamo's operator to be stopped.
func TestDynamoPod(t *testing.T) {
	for _, c := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{v1alpha1.LabelGraph: "g"}, true},
		{map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}, false},
		{map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelManagedBy: "grove-operator"}, false},
		// A pod of Dynamo's LeaderWorkerSet: the DCD's labels and LWS's own, none managed-by
		// (lws v0.9.0 sets none; Dynamo's renderMultinodePodTemplateSpecs neither).
		{map[string]string{v1alpha1.LabelGraph: "g", render.LabelRole: "leader", lwsv1.WorkerIndexLabelKey: "0",
			lwsv1.SetNameLabelKey: "g-decode-d1a2b3c4-0", lwsv1.GroupIndexLabelKey: "0"}, true},
	} {
		if got := dynamoPod(c.labels); got != c.want {
			t.Errorf("dynamoPod(%v) = %v, want %v", c.labels, got, c.want)
		}
	}
}

// The gangs of Dynamo's Grove PodCliqueSet being taken over count routable by their
// `-ldr` pod, through the Grove backend (runsPods: a workload grouped under a
// PodCliqueSet), and its hashless worker pods (managed-by grove-operator, which Grove
// sets over the template's labels) are keyed legacy like their workload. Without the
// Grove backend none would count, and the planner would drain them at once.
func TestRoutableCountsDynamoGroveGangs(t *testing.T) {
	r := &Reconciler{Backends: backends.NewRegistry().Register(v1alpha1.BackendGrove, grove.New(nil, nil, render.Config{}))}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
			"prefill": {ComponentType: v1alpha1.ComponentTypePrefill}}}}
	pod := func(name, clique string) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{
			v1alpha1.LabelGraph: "g", v1alpha1.LabelService: "prefill", v1alpha1.LabelManagedBy: "grove-operator",
			apicommon.LabelPartOfKey: "g", apicommon.LabelPodCliqueScalingGroup: "g-0-prefill", apicommon.LabelPodClique: clique}}}
	}
	pods := []metav1.PartialObjectMetadata{pod("l0", "g-0-prefill-0-prefill-ldr"), pod("w0", "g-0-prefill-0-prefill-wkr"),
		pod("l1", "g-0-prefill-1-prefill-ldr"), pod("w1", "g-0-prefill-1-prefill-wkr")}
	key := backends.Key{Service: "prefill", Hash: legacyHash}
	if k := podKey(dgd, pods[0].Labels); k != key {
		t.Fatalf("Dynamo's Grove pod keyed %+v, want %+v", k, key)
	}
	w := decide.Workload{Backend: decide.DynamoBackend, Workload: backends.Workload{Key: key, Kind: "PodCliqueScalingGroup", Name: "g-0-prefill",
		Group: &backends.ObjectRef{Kind: grove.Kind, Name: "g", UID: "pcs-uid"}, Replicas: 2, Ready: 2}}
	ready := map[string]map[types.UID]bool{}
	for _, p := range pods {
		ready[p.Name] = map[types.UID]bool{p.UID: true}
	}
	if got := r.routable(dgd, pods, []decide.Workload{w}, ready, ready); got[key] != 2 {
		t.Errorf("routable %v: want 2 (the two leaders)", got)
	}
	r.Backends = backends.NewRegistry()
	if got := r.routable(dgd, pods, []decide.Workload{w}, ready, ready); got[key] != 0 {
		t.Errorf("without the Grove backend: routable %v, want none", got)
	}
}

// TestReadyEndpointsChanged: an EndpointSlice update starts a pass only when a ready
// endpoint comes or goes (or the slice's labels or Service change); a not-ready endpoint
// added (a pod given its address) or a terminating endpoint's serving flag does not.
func TestReadyEndpointsChanged(t *testing.T) {
	ep := func(name string, ready, serving bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: name, UID: types.UID(name + "-uid")},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving)}}
	}
	slice := func(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{v1alpha1.LabelGraph: "g"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Service", Name: "svc", UID: "svc-uid", Controller: ptr.To(true)}}}, Endpoints: eps}
	}
	a, b := ep("a", true, true), ep("b", true, true)
	relabelled := slice(a)
	relabelled.Labels = map[string]string{v1alpha1.LabelGraph: "h"}
	cases := []struct {
		name     string
		old, new *discoveryv1.EndpointSlice
		want     bool
	}{
		{"a not-ready endpoint added", slice(a), slice(a, ep("b", false, false)), false},
		{"the same ready endpoints in another order", slice(a, b), slice(b, a), false},
		{"a terminating endpoint stops serving", slice(a, ep("b", false, true)), slice(a, ep("b", false, false)), false},
		{"an endpoint turns ready", slice(a, ep("b", false, false)), slice(a, b), true},
		{"a ready endpoint goes", slice(a, b), slice(a), true},
		{"a ready endpoint turns not ready (terminating)", slice(a, b), slice(a, ep("b", false, true)), true},
		{"a pod recreated under its name (another UID)", slice(a), slice(discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Name: "a", UID: "other"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}), true},
		{"labels change", slice(a), relabelled, true},
	}
	for _, c := range cases {
		if got := readyEndpointsChanged(event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}); got != c.want {
			t.Errorf("%s: readyEndpointsChanged = %v, want %v", c.name, got, c.want)
		}
	}
}

// A Deployment's ready endpoints count its ready replicas as soon as the EndpointSlice
// controller writes them, a hop before the Deployment's status does (P1: the step's
// first write came 26-50 ms after the pod's Ready, waiting for the ReplicaSet's and
// then the Deployment's status), never above the pods the status counts; a gang's
// leader endpoint (LWS) and Dynamo's Deployments (whose minReadySeconds the operator
// does not set) still count only what their status says, and no workload counts a
// replica Dynamo does not route to.
func TestCountRoutable(t *testing.T) {
	r := &Reconciler{Backends: backends.NewRegistry().
		Register(v1alpha1.BackendDeployment, deployment.New(nil, nil, nil, render.Config{})).
		Register(v1alpha1.BackendLeaderWorkerSet, lws.New(nil, nil, render.Config{}))}
	key := func(hash string) backends.Key { return backends.Key{Service: "decode", Hash: hash} }
	w := func(backend, hash string, ready, current int32) decide.Workload {
		return decide.Workload{Backend: backend, Workload: backends.Workload{Key: key(hash), Kind: backend, Name: "g-decode-" + hash, Ready: ready, Current: current}}
	}
	for _, c := range []struct {
		name     string
		w        decide.Workload
		routable int32
		want     int32
	}{
		{"Deployment, endpoints ahead of its status", w("Deployment", "a", 1, 3), 2, 2},
		{"Deployment, capped by the pods its status counts", w("Deployment", "a", 1, 2), 3, 2},
		{"Deployment, status ahead of its endpoints", w("Deployment", "a", 3, 3), 1, 1},
		{"LeaderWorkerSet, a leader's endpoint is not its gang", w(lws.Kind, "b", 1, 3), 2, 1},
		{"Dynamo's Deployment", w(decide.DynamoBackend, "c", 1, 3), 2, 1},
		{"a stable service", w("Deployment", "", 1, 3), 2, 1},
	} {
		ws := []decide.Workload{c.w}
		r.countRoutable(context.Background(), ws, map[backends.Key]int32{c.w.Key: c.routable})
		if ws[0].Ready != c.want {
			t.Errorf("%s: ready %d, want %d", c.name, ws[0].Ready, c.want)
		}
	}
}

// While a DGD is taken over, Dynamo's discovery Service of a worker service selects our
// new pods too (it selects by Dynamo's own labels, which ours carry). A pod of ours that
// only that Service's slice lists as ready is not routable: releaseDynamo deletes that
// Service once nothing of Dynamo's runs, and our own Service's slice, written in another
// sync of the EndpointSlice controller, may not list the pod yet (the e2e take-over's
// zero-routable gap, issue 37). Dynamo's own pods count through their Service's slice.
func TestRoutableCountsOursOnlyThroughOurServices(t *testing.T) {
	r := &Reconciler{Backends: backends.NewRegistry().Register(v1alpha1.BackendDeployment, deployment.New(nil, nil, nil, render.Config{}))}
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	const theirs, ours = "d1a2b3c4", "6101c065"
	pod := func(name, hash string, managed bool) metav1.PartialObjectMetadata {
		l := map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: "prefill", v1alpha1.LabelWorkerHash: hash}
		if managed {
			l[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
		}
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Labels: l}}
	}
	pods := []metav1.PartialObjectMetadata{pod("dynamo-0", theirs, false), pod("ours-0", ours, true)}
	workloads := []decide.Workload{
		{Backend: decide.DynamoBackend, Workload: backends.Workload{Key: backends.Key{Service: "prefill", Hash: theirs}, Kind: "Deployment", Name: "g-prefill-" + theirs}},
		{Backend: "Deployment", Workload: backends.Workload{Key: backends.Key{Service: "prefill", Hash: ours}, Kind: "Deployment", Name: "g-prefill-" + ours}},
	}
	// A slice as the EndpointSlice controller writes it: its Service's labels, one
	// endpoint per pod it selects.
	slice := func(name string, labels map[string]string, podNames ...string) discoveryv1.EndpointSlice {
		l := map[string]string{v1alpha1.LabelGraph: "g", render.LabelDiscoveryEnabled: "true", render.LabelDiscoveryBackend: render.DiscoveryKubernetes}
		for k, v := range labels {
			l[k] = v
		}
		s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
		for _, p := range podNames {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: p, UID: types.UID(p + "-uid")}})
		}
		return s
	}
	dynamos := slice("g-prefill-"+theirs+"-x", nil, "dynamo-0", "ours-0")
	oursListing := slice("g-prefill-"+ours+"-discovery-x", map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}, "ours-0")
	oursEmpty := oursListing
	oursEmpty.Endpoints = nil
	for _, tc := range []struct {
		name             string
		slices           []discoveryv1.EndpointSlice
		wantDynamo, want int32
	}{
		{"only Dynamo's Service lists our pod", []discoveryv1.EndpointSlice{dynamos, oursEmpty}, 1, 0},
		{"ours lists it too", []discoveryv1.EndpointSlice{dynamos, oursListing}, 1, 1},
		{"Dynamo's Service gone", []discoveryv1.EndpointSlice{oursListing}, 0, 1},
	} {
		all := render.ReadyEndpoints(tc.slices, render.DiscoveryLabelled)
		got := r.routable(dgd, pods, workloads, all, render.ReadyEndpoints(tc.slices, ourDiscovery))
		if got[workloads[0].Key] != tc.wantDynamo || got[workloads[1].Key] != tc.want {
			t.Errorf("%s: routable %v, want %d of Dynamo's and %d of ours", tc.name, got, tc.wantDynamo, tc.want)
		}
	}
}
