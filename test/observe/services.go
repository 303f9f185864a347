package observe

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/dynamoview"
	"github.com/dgd-rollout/operator/test/gangs"
)

// Checks of issue 22, at every observed state (KWOK and envtest resolve no DNS name and
// run no runtime, so what a real cluster needs is checked on the objects):
//
//   - subdomain: every gang pod's subdomain Service (the Service named like its
//     spec.subdomain, which its hostname resolves through: LWS's `<lws>`, Grove's
//     `<pcs>-0`), once it exists, is headless, publishes not-ready addresses (members
//     dial each other before any is Ready) and selects every member of the gang;
//   - discovery: every worker revision's discovery Service of the operator (labelled
//     with a worker hash) carries both discovery labels and port system 9090, and
//     selects exactly the pods that run the revision's Dynamo runtime: every pod of a
//     single-node service, the leaders of gangs;
//   - routable: while the DGD reports Ready, every worker service and revision that has
//     live pods has one whose runtime is a ready endpoint in a discovery EndpointSlice
//     (both labels) in a namespace the frontend's strict prefix filter accepts: the
//     cluster's half of Dynamo's join (a runtime still to publish its metadata is the
//     observer's own lag, not the operator's). A failure seen in the cache is confirmed
//     against the API server before it counts, so a cache behind the DGD's status write
//     is not taken for the operator's.

// checkServices runs the subdomain and discovery checks on the cached state.
func (o *Observer) checkServices(ctx context.Context, pods []corev1.Pod) {
	var svcs corev1.ServiceList
	if err := o.cache.List(ctx, &svcs, client.InNamespace(o.opts.Namespace)); err != nil {
		return
	}
	for _, v := range SubdomainViolations(svcs.Items, pods) {
		o.fail("subdomain: " + v)
	}
	for _, v := range DiscoveryServiceViolations(svcs.Items, pods) {
		o.fail("discovery Service: " + v)
	}
}

// SubdomainViolations checks every gang's subdomain Service that exists.
func SubdomainViolations(svcs []corev1.Service, pods []corev1.Pod) []string {
	byName := map[string]*corev1.Service{}
	for i := range svcs {
		byName[svcs[i].Name] = &svcs[i]
	}
	all := gangs.GroupLWS(pods)
	maps.Copy(all, gangs.GroupGrove(pods))
	var out []string
	for _, key := range slices.Sorted(maps.Keys(all)) {
		g := all[key]
		for _, m := range g.Members {
			p := m.Pod
			if p.Spec.Subdomain == "" {
				out = append(out, fmt.Sprintf("gang %s: pod %s has no subdomain", key, p.Name))
				continue
			}
			svc := byName[p.Spec.Subdomain]
			if svc == nil {
				continue // not created yet: LWS creates it after the leader StatefulSet
			}
			var why []string
			if svc.Spec.ClusterIP != corev1.ClusterIPNone {
				why = append(why, "not headless")
			}
			if !svc.Spec.PublishNotReadyAddresses {
				why = append(why, "does not publish not-ready addresses")
			}
			for _, o := range g.Members {
				if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(o.Pod.Labels)) {
					why = append(why, "does not select member "+o.Pod.Name)
				}
			}
			if len(why) > 0 {
				out = append(out, fmt.Sprintf("gang %s: pod %s's subdomain Service %s %s", key, p.Name, svc.Name, strings.Join(why, ", ")))
			}
		}
	}
	return out
}

// DiscoveryServiceViolations checks every worker revision's discovery Service.
func DiscoveryServiceViolations(svcs []corev1.Service, pods []corev1.Pod) []string {
	var out []string
	for i := range svcs {
		svc := &svcs[i]
		hash := svc.Labels[v1alpha1.LabelWorkerHash]
		if hash == "" || svc.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue || !svc.DeletionTimestamp.IsZero() ||
			svc.Labels[v1alpha1.LabelComponentType] == v1alpha1.ComponentTypeFrontend {
			continue // a stable service's, or a cohort frontend's Service (port http 8000)
		}
		var why []string
		if !render.DiscoveryLabelled(svc.Labels) {
			why = append(why, "lacks a discovery label")
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != render.PortSystem || svc.Spec.Ports[0].Name != render.PortNameSystem {
			why = append(why, fmt.Sprintf("ports %v, want system 9090", svc.Spec.Ports))
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for j := range pods {
			p := &pods[j]
			if p.Labels[v1alpha1.LabelWorkerHash] != hash || p.Labels[v1alpha1.LabelService] != svc.Labels[v1alpha1.LabelService] {
				if len(svc.Spec.Selector) > 0 && sel.Matches(labels.Set(p.Labels)) {
					why = append(why, "selects "+p.Name+" of another service or revision")
				}
				continue
			}
			runtime := runsRuntime(p)
			switch selected := len(svc.Spec.Selector) > 0 && sel.Matches(labels.Set(p.Labels)); {
			case runtime && !selected:
				why = append(why, "does not select "+p.Name+", which runs the revision's runtime")
			case !runtime && selected && isLWS(p):
				why = append(why, "selects "+p.Name+", a gang worker (Dynamo selects only leaders on LWS)")
			}
		}
		if len(why) > 0 {
			out = append(out, fmt.Sprintf("%s (service %s, revision %s): %s", svc.Name, svc.Labels[v1alpha1.LabelService], hash, strings.Join(why, "; ")))
		}
	}
	return out
}

// runsRuntime reports whether a pod runs a Dynamo runtime of its own, as its command
// line says (a gang's worker runs none: dynamoview.RuntimeOf).
func runsRuntime(p *corev1.Pod) bool {
	if _, ok := p.Labels["leaderworkerset.sigs.k8s.io/worker-index"]; ok {
		return p.Labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
	}
	if p.Labels["grove.io/podcliquescalinggroup"] != "" {
		return strings.HasSuffix(p.Labels["grove.io/podclique"], "-ldr")
	}
	return true
}

func isLWS(p *corev1.Pod) bool {
	_, ok := p.Labels["leaderworkerset.sigs.k8s.io/worker-index"]
	return ok
}

// checkRoutable runs the routable check: on the cache, and when it fails, again on a
// consistent read of the API server (pods, slices, then the DGD).
func (o *Observer) checkRoutable(ctx context.Context, pods []corev1.Pod, slices []discoveryv1.EndpointSlice) {
	d, ok := o.readyDGD(ctx, o.cache)
	if !ok || len(RoutableViolations(d, pods, slices)) == 0 || o.reader == nil {
		return
	}
	var lp corev1.PodList
	var ls discoveryv1.EndpointSliceList
	if o.reader.List(ctx, &lp, client.InNamespace(o.opts.Namespace)) != nil || o.reader.List(ctx, &ls, client.InNamespace(o.opts.Namespace)) != nil {
		return
	}
	slices = ls.Items
	if o.opts.SyntheticSlices {
		var svcs corev1.ServiceList
		if o.reader.List(ctx, &svcs, client.InNamespace(o.opts.Namespace)) != nil {
			return
		}
		slices = Slices(svcs.Items, lp.Items)
	}
	if d, ok = o.readyDGD(ctx, o.reader); !ok {
		return
	}
	for _, v := range RoutableViolations(d, lp.Items, slices) {
		o.fail("Ready while not routable: " + v)
	}
}

// readyDGD is the observed DGD when it reports Ready.
func (o *Observer) readyDGD(ctx context.Context, r client.Reader) (*v1alpha1.DynamoGraphDeployment, bool) {
	var list v1alpha1.DynamoGraphDeploymentList
	if r.List(ctx, &list, client.InNamespace(o.opts.Namespace)) != nil {
		return nil, false
	}
	for i := range list.Items {
		d := &list.Items[i]
		if (o.opts.DGD == "" || d.Name == o.opts.DGD) && d.DeletionTimestamp.IsZero() && meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha1.ConditionReady) {
			return d, true
		}
	}
	return nil, false
}

// RoutableViolations lists, for a DGD that reports Ready, each worker service and
// revision its status counts on (status.services[].runtimeNamespaces: the revisions
// with replicas, not those being deleted) of which no runtime pod is a ready endpoint of
// a discovery EndpointSlice (both labels) in a Dynamo namespace the frontend's strict
// filter accepts. Under etcd discovery there is nothing to check.
func RoutableViolations(d *v1alpha1.DynamoGraphDeployment, pods []corev1.Pod, slices []discoveryv1.EndpointSlice) []string {
	if (render.Config{}).Discovery(d) != render.DiscoveryKubernetes {
		return nil
	}
	ready := render.ReadyEndpoints(slices, render.DiscoveryLabelled)
	prefix := render.EffectiveNamespace(d, false, "")
	routable := map[string]int{} // service + Dynamo namespace
	for i := range pods {
		p := &pods[i]
		if p.Labels[v1alpha1.LabelGraph] != d.Name || !p.DeletionTimestamp.IsZero() {
			continue
		}
		rt, ok := dynamoview.RuntimeOf(p)
		if !ok || !rt.IsWorker() {
			continue
		}
		if uids := ready[p.Name]; len(uids) == 1 && uids[p.UID] && render.AcceptsNamespace(prefix, rt.Namespace, true) {
			routable[p.Labels[v1alpha1.LabelService]+" in "+rt.Namespace]++
		}
	}
	var out []string
	for _, name := range d.WorkerServiceNames() {
		st := d.Status.Services[name]
		if st.ReadyReplicas == 0 {
			continue
		}
		for _, ns := range st.RuntimeNamespaces {
			if routable[name+" in "+ns] == 0 {
				out = append(out, fmt.Sprintf("DGD %s reports Ready with %d ready replicas of %s, but no pod of it in Dynamo namespace %s is a ready endpoint Dynamo's discovery admits",
					d.Name, st.ReadyReplicas, name, ns))
			}
		}
	}
	sort.Strings(out)
	return out
}
