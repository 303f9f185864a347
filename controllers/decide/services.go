package decide

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/render"
)

// services decides the Services and Ingresses of the DGD: a Service per component that
// gets one (render.WantsService), a stable service's `{dgd}-{service}` for as long as
// the service exists, a worker revision's discovery Service
// (backends.DiscoveryServiceName, never a name LWS or Grove creates a Service under)
// for as long as the revision has workloads (this pass's result), selecting only
// leaders on a LeaderWorkerSet; and an Ingress per service that enables one. Others of
// the DGD go; a revision's discovery Service under its name of before (its
// LeaderWorkerSet's) only once the new one publishes as many ready endpoints. Two
// wanted objects of one name (a service named like another's generated name) are a
// name conflict, never one silently replacing the other.
func services(v *view, h *history, res []Workload, tp trafficPlan, d *draft) {
	want := map[string]client.Object{}
	add := func(o client.Object) {
		key := kindOf(o) + "/" + o.GetName()
		if _, dup := want[key]; dup {
			d.conflict(&backends.NameConflictError{Kind: kindOf(o), Namespace: o.GetNamespace(), Name: o.GetName(),
				Owner: "another object this DynamoGraphDeployment needs under the same name", DGD: v.dgd.Name})
			return
		}
		want[key] = o
	}
	stableObjects(v, tp, add)
	cohortServices(v, h, res, add)
	legacy := discoveryServices(v, h, res, add)
	have := map[string]client.Object{}
	for i := range v.Objects.Services {
		have["Service/"+v.Objects.Services[i].Name] = &v.Objects.Services[i]
	}
	for i := range v.Objects.Ingresses {
		have["Ingress/"+v.Objects.Ingresses[i].Name] = &v.Objects.Ingresses[i]
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	wanted := map[string]bool{}
	for _, k := range keys {
		switch o := want[k].(type) {
		case *corev1.Service:
			wanted[o.Name] = true
			if have[k] == nil && adoptDynamoService(v, d, o.Name) {
				continue // updated in place by the next pass, which caches it
			}
			apply(v.dgd, d, o, have[k], true, sameService)
		case *networkingv1.Ingress:
			wanted[k] = true
			if have[k] == nil && adoptDynamoIngress(v, d, o) {
				continue // updated in place by the next pass, which caches it
			}
			apply(v.dgd, d, o, have[k], true, sameIngress)
		}
	}
	prune(v, d, want, legacy)
	releaseDynamo(v, d, wanted)
}

// stableObjects adds the Service and Ingress of every stable service. A frontend's
// Service `{dgd}-{frontend}` is the stable entry point in either form: it selects the
// traffic provider's entry once the provider serves the cohorts' split (the proxy's
// pods), and the frontend's pods otherwise (in cohort form every cohort's, each of which
// discovers only its own workers).
func stableObjects(v *view, tp trafficPlan, add func(client.Object)) {
	for _, name := range v.dgd.ServiceNames() {
		svc := v.dgd.Spec.Services[name]
		if svc.IsWorker() {
			continue
		}
		c := render.Component{DGD: v.dgd, Name: name, Spec: svc, Config: v.Platform}
		sname := render.ServiceName(v.dgd.Name, name, "", backends.WorkloadName)
		if c.WantsService() {
			s := c.Service(sname, false)
			if sel := tp.entrySelector(name); sel != nil {
				s.Spec.Selector = sel
			}
			add(s)
		}
		if ing := c.Ingress(sname, sname); ing != nil {
			add(ing)
		}
	}
}

// cohortServices adds the Service of every cohort's frontend with workloads in res
// (backends.CohortServiceName): a ClusterIP on the frontend's port, selecting that
// cohort's frontend pods, which the traffic provider sends the cohort's share to. One
// per key: a frontend replaced side by side (backends/grove) has two workloads of it
// for a while, whose pods the one Service selects alike.
func cohortServices(v *view, h *history, res []Workload, add func(client.Object)) {
	seen := map[backends.Key]bool{}
	for _, w := range res {
		if w.Hash == "" || w.Terminating || !v.form.isFrontend(w.Service) || seen[w.Key] {
			continue
		}
		seen[w.Key] = true
		spec := h.templateOf(v.dgd, w.Service, w.Hash)
		if spec == nil {
			continue
		}
		c := render.Component{DGD: v.dgd, Name: w.Service, Spec: spec, Hash: w.Hash, Config: v.Platform}
		add(c.Service(backends.CohortServiceName(v.dgd.Name, w.Service, w.Hash), false))
	}
}

// discoveryServices adds the discovery Service of every worker revision with workloads
// in res and returns the names such Services had before (old name -> now).
func discoveryServices(v *view, h *history, res []Workload, add func(client.Object)) map[string]string {
	legacy := map[string]string{}
	for _, w := range res {
		if w.Hash == "" || w.Terminating || w.Backend == DynamoBackend {
			continue // Dynamo's revision is discovered through Dynamo's Services until it is gone
		}
		spec := h.templateOf(v.dgd, w.Service, w.Hash)
		if spec == nil || !spec.IsWorker() {
			continue
		}
		c := render.Component{DGD: v.dgd, Name: w.Service, Spec: spec, Hash: w.Hash, Config: v.Platform}
		if !c.WantsService() {
			continue
		}
		sname := backends.DiscoveryServiceName(v.dgd.Name, w.Service, w.Hash)
		add(c.Service(sname, w.Kind == "LeaderWorkerSet" && spec.IsMultinode()))
		legacy[render.ServiceName(v.dgd.Name, w.Service, w.Hash, backends.WorkloadName)] = sname
	}
	return legacy
}

// prune deletes the DGD's Services and Ingresses that are not wanted, but a revision's
// discovery Service named as before (legacy: old name -> new) while its replacement
// publishes fewer ready endpoints; and tells a workload whose name a deleted Service
// had that it is gone (Description.ReleasesSubdomain).
func prune(v *view, d *draft, want map[string]client.Object, legacy map[string]string) {
	byName := map[string]*corev1.Service{}
	for i := range v.Objects.Services {
		byName[v.Objects.Services[i].Name] = &v.Objects.Services[i]
	}
	var doomed []client.Object
	for i := range v.Objects.Services {
		s := &v.Objects.Services[i]
		if _, ok := want["Service/"+s.Name]; ok || !metav1.IsControlledBy(s, v.dgd) {
			continue
		}
		if now, ok := legacy[s.Name]; ok && v.Platform.KubernetesDiscovery(v.dgd) && !routableAsBefore(v, byName[now], s) {
			continue
		}
		doomed = append(doomed, s)
	}
	for i := range v.Objects.Ingresses {
		if _, ok := want["Ingress/"+v.Objects.Ingresses[i].Name]; !ok && metav1.IsControlledBy(&v.Objects.Ingresses[i], v.dgd) {
			doomed = append(doomed, &v.Objects.Ingresses[i])
		}
	}
	for _, o := range doomed {
		d.write(Write{Op: DeleteObject, Object: o, Kind: kindOf(o), Say: []string{fmt.Sprintf("deleted %s %s", kindOf(o), o.GetName())}})
		releaseSubdomain(v, d, o.GetName())
	}
}

// releaseSubdomain tells the controller of the DGD's workload named name, if any, that
// the Service of that name (ours, deleted) is gone, so it creates its own.
func releaseSubdomain(v *view, d *draft, name string) {
	for _, w := range v.Workloads {
		if w.Name == name && !w.Terminating && v.backend(w.Backend).ReleasesSubdomain {
			d.write(Write{Op: ReleaseSubdomain, Backend: w.Backend, Name: name})
			return
		}
	}
}

// routableAsBefore reports whether discovery Service now publishes at least as many
// ready endpoints as before, which may then go: a DGD upgraded from an operator that
// named its discovery Services otherwise keeps every worker routable while the Service
// changes name. now nil (not in the cache yet) publishes nothing.
func routableAsBefore(v *view, now, before *corev1.Service) bool {
	return now != nil && v.Discovery.Published[now.UID] && v.Discovery.Ready[now.UID] >= v.Discovery.Ready[before.UID]
}
