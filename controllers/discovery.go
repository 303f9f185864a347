package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
)

// Ready means Dynamo can route (ROLLOUT.md, "Status"). Under Kubernetes discovery a
// worker replica is counted ready only when its workload reports it ready and the pod
// that runs its Dynamo runtime (the pod, or a gang's leader) is a ready endpoint in an
// EndpointSlice carrying both discovery labels, in a Dynamo namespace the frontend's
// strict prefix filter accepts: the half of Dynamo's discovery join the cluster makes
// (render/discovery.go; test/dynamoview replays the whole join with the same index).
// A revision whose discovery Service is missing, or whose leaders' endpoints have not
// been published, is not ready, whatever its workload says: no step counts on it and
// the DGD is not Ready (issue 22: Ready=True while the frontend saw no decode worker).
// Where a replica is one pod ready exactly when Ready (a Deployment), its ready
// endpoint is enough: the Deployment's status says the same two controller hops later
// (backends.Description.ReadyIsPodReady; benchmark P1's steps start a hop sooner).
// In a real cluster the EndpointSlice controller writes the endpoint a few
// milliseconds after the pod turns Ready, and its event starts the pass that counts it.
// Under etcd discovery there are no discovery Services: the workloads' readiness stays
// the signal. Observe applies it: the snapshot's ready counts are those Dynamo routes.

// observeDiscovery reads the DGD's discovery EndpointSlices (the cache holds only
// those, indexed by graph): the ready endpoints of each Service, and, per worker
// workload, the replicas whose runtime pod is a ready endpoint Dynamo discovers, to
// which it lowers the workload's ready count.
func (r *Reconciler) observeDiscovery(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment,
	pods []metav1.PartialObjectMetadata, workloads []decide.Workload) (decide.Discovery, error) {
	disc := decide.Discovery{Ready: map[types.UID]int{}, Published: map[types.UID]bool{}}
	if !r.Platform.KubernetesDiscovery(dgd) {
		return disc, nil
	}
	var list discoveryv1.EndpointSliceList
	if err := backends.ListGraph(ctx, r.Client, &list, dgd.Namespace, dgd.Name); err != nil {
		return disc, fmt.Errorf("listing EndpointSlices of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		ref := metav1.GetControllerOf(s)
		if ref == nil {
			continue
		}
		disc.Published[ref.UID] = true
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				disc.Ready[ref.UID]++
			}
		}
	}
	all := render.ReadyEndpoints(list.Items, render.DiscoveryLabelled)
	ours := render.ReadyEndpoints(list.Items, ourDiscovery)
	r.countRoutable(ctx, workloads, r.routable(dgd, pods, workloads, all, ours))
	return disc, nil
}

// countRoutable sets each worker workload's ready count to the replicas Dynamo routes
// to: lowered to its routable replicas, and for a backend whose replicas are ready
// exactly when their pod is (backends.Description.ReadyIsPodReady) raised to them, as
// the endpoints are a hop ahead of the workload's status, though never above the pods
// its status counts (a pod of its labels it does not own is not one of its replicas).
func (r *Reconciler) countRoutable(ctx context.Context, workloads []decide.Workload, routable map[backends.Key]int32) {
	for i := range workloads {
		w := &workloads[i]
		n := routable[w.Key]
		switch {
		case w.Hash == "":
		case w.Ready > n:
			log.FromContext(ctx).V(1).Info("ready replicas Dynamo's discovery does not route to (yet)", "workload", w.Name, "ready", w.Ready, "routable", n)
			w.Ready = n
		case w.Ready < n && r.readyIsPodReady(w):
			w.Ready = min(n, w.Current)
		}
	}
}

// readyIsPodReady reports whether a workload's replicas are single pods ready exactly
// when Ready (backends.Description.ReadyIsPodReady): the operator's own workloads of
// such a backend, not Dynamo's, whose minReadySeconds it does not set.
func (r *Reconciler) readyIsPodReady(w *decide.Workload) bool {
	if w.Backend == decide.DynamoBackend {
		return false
	}
	b := r.Backends.ByKind(w.Backend)
	return b != nil && b.Describe().ReadyIsPodReady
}

// routable counts, per worker workload, the replicas whose runtime pod is the one ready
// endpoint of its name, in a Dynamo namespace the frontend accepts. A pod of ours counts
// only as a ready endpoint of a Service of ours (ours: slices whose Service carries our
// managed-by label, which the EndpointSlice controller copies): while a DGD is taken
// over, Dynamo's discovery Services select our pods too (the labels they select by are
// Dynamo's own), and they go once nothing of Dynamo's runs (decide.releaseDynamo). A
// pod routable only through one of them then stops being routable until our Service's
// slice lists it, which the EndpointSlice controller writes in a sync of its own, as
// late as it likes (issue 37, e2e take-over: a zero-routable gap when Dynamo's prefill
// Service went first). Dynamo's own pods count through any (all).
func (r *Reconciler) routable(dgd *v1alpha1.DynamoGraphDeployment, pods []metav1.PartialObjectMetadata,
	workloads []decide.Workload, all, ours map[string]map[types.UID]bool) map[backends.Key]int32 {
	backendOf := map[backends.Key]backends.Backend{}
	dynamos := map[backends.Key]bool{}
	for _, w := range workloads {
		backendOf[w.Key] = r.runsPods(w)
		dynamos[w.Key] = w.Backend == decide.DynamoBackend
	}
	out := map[backends.Key]int32{}
	for i := range pods {
		pod := &pods[i]
		key := podKey(dgd, pod.Labels)
		b := backendOf[key]
		if key.Hash == "" || b == nil || !pod.DeletionTimestamp.IsZero() || !backends.RunsRuntime(b, pod.Labels) {
			continue
		}
		ready := ours
		if dynamos[key] {
			ready = all
		}
		if uids := ready[pod.Name]; len(uids) == 1 && uids[pod.UID] && accepted(dgd, key.Hash) {
			out[key]++
		}
	}
	return out
}

// ourDiscovery matches a discovery EndpointSlice of a Service of ours (its labels are
// the Service's, copied by the EndpointSlice controller).
func ourDiscovery(labels map[string]string) bool {
	return render.DiscoveryLabelled(labels) && labels[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue
}

// accepted reports whether the frontend admits the Dynamo namespace of revision hash
// under its strict prefix filter (the loose one admits all the strict one does).
func accepted(dgd *v1alpha1.DynamoGraphDeployment, hash string) bool {
	return render.AcceptsNamespace(render.EffectiveNamespace(dgd, false, ""), render.EffectiveNamespace(dgd, true, hash), true)
}

// readyEndpointsChanged reports whether an EndpointSlice update changes what
// observeDiscovery reads of the slice: its labels (the graph and discovery labels that
// select it), its controller (the Service it counts for) or its ready endpoints (each
// endpoint with conditions.ready true, by its target's name and UID: the ready counts
// and render.ReadyEndpoints). The EndpointSlice controller also writes a slice when a
// pod gets its address (a not-ready endpoint), when a terminating endpoint's serving
// condition changes and when hints or zones change; none of those moves a ready count,
// and a pass they started would decide what the last one did. In benchmark P1 they were
// about 15 of the operator's 80 passes over a rollout.
func readyEndpointsChanged(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*discoveryv1.EndpointSlice)
	n, ok2 := e.ObjectNew.(*discoveryv1.EndpointSlice)
	if !ok1 || !ok2 {
		return true
	}
	return !maps.Equal(o.Labels, n.Labels) || controllerUID(o) != controllerUID(n) ||
		!slices.Equal(readyTargets(o), readyTargets(n))
}

// controllerUID is the UID of an object's controller, "" without one.
func controllerUID(o metav1.Object) types.UID {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return ref.UID
	}
	return ""
}

// readyTargets lists a slice's ready endpoints by target (name and UID; "" for an
// endpoint without one), sorted.
func readyTargets(s *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, ep := range s.Endpoints {
		if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
			continue
		}
		t := ""
		if ep.TargetRef != nil {
			t = ep.TargetRef.Name + "/" + string(ep.TargetRef.UID)
		}
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
