package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
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
// In a real cluster the EndpointSlice controller writes the endpoint a few
// milliseconds after the pod turns Ready, and its event starts the pass that counts it.
// Under etcd discovery there are no discovery Services: the workloads' readiness stays
// the signal.

// discovery is what a pass read of Dynamo's discovery.
type discovery struct {
	// routable counts, per worker workload, the replicas whose runtime pod is a ready
	// endpoint Dynamo discovers (nil: not measured, etcd discovery).
	routable map[backends.Key]int32
	// byService counts, per Service (its UID: a slice's controller), the ready endpoints
	// of its discovery slices; services are the Services with any slice.
	byService map[types.UID]int
	services  map[types.UID]bool
}

// observeDiscovery reads the DGD's discovery EndpointSlices (the cache holds only
// those, indexed by graph) and counts, per worker workload, the routable replicas; then
// lowers every worker workload's ready count to them.
func (p *pass) observeDiscovery(ctx context.Context) error {
	p.disc = discovery{byService: map[types.UID]int{}, services: map[types.UID]bool{}}
	if !p.r.Platform.KubernetesDiscovery(p.dgd) {
		return nil
	}
	var slices discoveryv1.EndpointSliceList
	if err := backends.ListGraph(ctx, p.r.Client, &slices, p.dgd.Namespace, p.dgd.Name); err != nil {
		return fmt.Errorf("listing EndpointSlices of %s/%s: %w", p.dgd.Namespace, p.dgd.Name, err)
	}
	for i := range slices.Items {
		s := &slices.Items[i]
		ref := metav1.GetControllerOf(s)
		if ref == nil {
			continue
		}
		p.disc.services[ref.UID] = true
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				p.disc.byService[ref.UID]++
			}
		}
	}
	ready := render.ReadyEndpoints(slices.Items, render.DiscoveryLabelled)
	backendOf := map[backends.Key]backends.Backend{}
	for _, w := range p.workloads {
		backendOf[w.Key] = w.backend
	}
	p.disc.routable = map[backends.Key]int32{}
	for i := range p.pods {
		pod := &p.pods[i]
		key := backends.Key{Service: pod.Labels[v1alpha1.LabelService], Hash: pod.Labels[v1alpha1.LabelWorkerHash]}
		b := backendOf[key]
		if key.Hash == "" || b == nil || !pod.DeletionTimestamp.IsZero() || !backends.RunsRuntime(b, pod.Labels) {
			continue
		}
		if uids := ready[pod.Name]; len(uids) == 1 && uids[pod.UID] && p.accepted(key.Hash) {
			p.disc.routable[key]++
		}
	}
	for i := range p.workloads {
		w := &p.workloads[i]
		if n := p.disc.routable[w.Key]; w.Hash != "" && w.Ready > n {
			log.FromContext(ctx).V(1).Info("ready replicas Dynamo's discovery does not route to (yet)", "workload", w.Name, "ready", w.Ready, "routable", n)
			w.Ready = n
		}
	}
	return nil
}

// accepted reports whether the frontend admits the Dynamo namespace of revision hash
// under its strict prefix filter (the loose one admits all the strict one does).
func (p *pass) accepted(hash string) bool {
	return render.AcceptsNamespace(render.EffectiveNamespace(p.dgd, false, ""), render.EffectiveNamespace(p.dgd, true, hash), true)
}

// routableAsBefore reports whether discovery Service now publishes at least as many
// ready endpoints as before, which may then go: a DGD upgraded from an operator that
// named its discovery Services otherwise keeps every worker routable while the Service
// changes name. Slices are matched to a Service by their controller's UID, so a slice
// left by an earlier Service of the same name is not taken for the new one's; now nil
// (not in the cache yet) publishes nothing.
func (p *pass) routableAsBefore(now, before *corev1.Service) bool {
	return now != nil && p.disc.services[now.UID] && p.disc.byService[now.UID] >= p.disc.byService[before.UID]
}

// podMeta is a pod as the operator caches it (metadata only).
type podMeta = metav1.PartialObjectMetadata
