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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/dynamoview"
	"github.com/dgd-rollout/operator/traffic/gatewayapi"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// Cohort invariants (issue 36 section 1), checked at every observed state of a DGD that
// has cohort frontends (pods of a frontend service carrying a worker hash), from the
// live objects and never from the DGD's status:
//
//   - discovery (CohortDiscoveryViolations): no frontend pod can discover a worker of
//     another revision. A cohort's frontend filters on exactly its revision's Dynamo
//     namespace (DYN_NAMESPACE `<ns>-<dgd>-<hash>` and no prefix: an Exact filter,
//     lib/llm/src/namespace.rs), every worker pod its filter admits is of its revision,
//     and what it discovers (dynamoview's FrontendFor) is its revision's generation
//     alone; a shared frontend pod (no hash, a prefix filter) never runs beside the
//     workers of a second revision.
//   - traffic (TrafficViolations): every cohort that receives traffic has a ready
//     frontend of the frontend service the traffic enters by and a routable pool (every
//     worker service of the spec a pod whose runtime is a ready endpoint of a discovery
//     EndpointSlice, in the cohort's own Dynamo namespace: both roles of a
//     disaggregated pool), and a cohort with requests in flight still has a frontend
//     pod. "Receives traffic" is read from the provider's own objects: for the proxy
//     (while the entry Service selects or lists its pods), a weight above 0 or the
//     header route in the desired split `{entry}-proxy` or in the report of a live
//     proxy pod in `{entry}-proxy-status` (traffic/proxy ParseSplit, ParseReport): the
//     desired split is what HAProxy applies before its agent reports it; for the
//     Gateway API, a backendRef of weight above 0 or the header rule in the HTTPRoute
//     `{entry}` the DGD controls, and, until every parent has accepted and resolved the
//     route's current generation, in the spec of the last generation they did (a
//     Gateway routes by the newest spec it accepted, and may route by the newest one
//     before it says so); and a cohort whose frontend pod is a ready endpoint of the
//     entry Service itself (in-cluster clients reach it without a provider: while a
//     Gateway routes, or while the entry selects the frontends).
//   - entry (EntryReady): the stable entry Service `{dgd}-{frontend}`'s EndpointSlices
//     have a ready endpoint at every state after the first one that had one.
//
// A traffic violation seen in the cache is confirmed on the API server (the traffic
// objects, then pods, slices and Services, then the traffic objects again: a cohort
// counts as receiving traffic only when both reads say so), so a cache behind another
// is not taken for the operator's.

// CohortState is what the cohort checks read of one namespace at one state.
type CohortState struct {
	DGDs       []v1alpha1.DynamoGraphDeployment
	Pods       []corev1.Pod
	Slices     []discoveryv1.EndpointSlice
	Services   []corev1.Service
	ConfigMaps []corev1.ConfigMap
	Routes     []gatewayv1.HTTPRoute
	// Accepted is, per HTTPRoute name, the spec of the newest generation every parent
	// accepted and resolved, as the observer last saw it (nil: none seen).
	Accepted map[string]*gatewayv1.HTTPRouteSpec
}

// hasCohorts reports whether the DGD named dgd has a cohort frontend pod in pods.
func hasCohorts(dgd string, pods []corev1.Pod) bool {
	for i := range pods {
		if isCohortFrontend(&pods[i], dgd) {
			return true
		}
	}
	return false
}

// isCohortFrontend: a pod of dgd whose runtime is a frontend, with a worker hash.
func isCohortFrontend(p *corev1.Pod, dgd string) bool {
	if p.Labels[v1alpha1.LabelGraph] != dgd || p.Labels[v1alpha1.LabelWorkerHash] == "" {
		return false
	}
	rt, ok := dynamoview.RuntimeOf(p)
	return ok && rt.Frontend
}

// CohortDiscoveryViolations checks the discovery invariant for every DGD of dgds with
// cohort frontends in pods (see the file's comment); view is dynamoview.Compute of the
// same state.
func CohortDiscoveryViolations(dgds []v1alpha1.DynamoGraphDeployment, pods []corev1.Pod, view dynamoview.View) []string {
	var out []string
	for i := range dgds {
		d := &dgds[i]
		if !hasCohorts(d.Name, pods) {
			continue
		}
		workers := map[string]string{} // pod name -> effective namespace, of d's worker pods
		for j := range pods {
			p := &pods[j]
			if rt, ok := dynamoview.RuntimeOf(p); ok && rt.IsWorker() && p.Labels[v1alpha1.LabelGraph] == d.Name {
				workers[p.Name] = rt.Namespace
			}
		}
		byName := map[string]*corev1.Pod{}
		for j := range pods {
			byName[pods[j].Name] = &pods[j]
		}
		for j := range pods {
			p := &pods[j]
			rt, ok := dynamoview.RuntimeOf(p)
			if !ok || !rt.Frontend || p.Labels[v1alpha1.LabelGraph] != d.Name {
				continue
			}
			filter := dynamoview.NewNamespaceFilter(rt.Namespace, rt.Prefix)
			hash := p.Labels[v1alpha1.LabelWorkerHash]
			own := render.EffectiveNamespace(d, true, hash)
			if hash != "" && (filter.Kind != dynamoview.FilterExact || filter.Value != own) {
				out = append(out, fmt.Sprintf("frontend pod %s of cohort %s discovers %s %q, not exactly its revision's Dynamo namespace %s", p.Name, hash, filter.Kind, filter.Value, own))
				continue
			}
			hashes := map[string][]string{} // worker hash -> admitted worker pods
			for _, name := range slices.Sorted(maps.Keys(workers)) {
				if filter.MatchesWithPrefixMode(workers[name], rt.Strict) {
					h := byName[name].Labels[v1alpha1.LabelWorkerHash]
					hashes[h] = append(hashes[h], name)
				}
			}
			gens := discovered(view.FrontendFor(rt))
			switch {
			case hash != "":
				for _, h := range slices.Sorted(maps.Keys(hashes)) {
					if h != hash {
						out = append(out, fmt.Sprintf("frontend pod %s of cohort %s can discover worker pods %s of revision %s", p.Name, hash, strings.Join(hashes[h], ", "), h))
					}
				}
				for _, g := range gens {
					if g != own {
						out = append(out, fmt.Sprintf("frontend pod %s of cohort %s discovers workers in Dynamo namespace %s", p.Name, hash, g))
					}
				}
			case len(hashes) > 1 || len(gens) > 1:
				var parts []string
				for _, h := range slices.Sorted(maps.Keys(hashes)) {
					parts = append(parts, fmt.Sprintf("%s: %s", h, strings.Join(hashes[h], ", ")))
				}
				out = append(out, fmt.Sprintf("shared frontend pod %s runs beside workers of %d revisions while the DGD has cohorts (%s; discovers %v)", p.Name, len(hashes), strings.Join(parts, "; "), gens))
			}
		}
	}
	sort.Strings(out)
	return out
}

// discovered are the Dynamo namespaces in which fv discovers live workers, sorted.
func discovered(fv dynamoview.FrontendView) []string {
	var out []string
	for _, g := range fv.Generations {
		n := 0
		for _, c := range g.Workers {
			n += c
		}
		if n > 0 {
			out = append(out, g.Namespace)
		}
	}
	return out
}

// receiving is the cohorts that receive traffic through one entry: why, by hash, and
// those with requests in flight.
type receiving struct {
	why      map[string]string
	inFlight map[string]int64
}

func (r *receiving) add(hash, why string) {
	if r.why[hash] == "" {
		r.why[hash] = why
	}
}

// TrafficViolations checks the traffic invariant for every DGD of st with cohort
// frontends (see the file's comment).
func TrafficViolations(st CohortState) []string {
	var out []string
	for i := range st.DGDs {
		d := &st.DGDs[i]
		if !hasCohorts(d.Name, st.Pods) {
			continue
		}
		for _, fe := range frontendServices(d) {
			entry := decide.EntryName(d, fe)
			r := receivingCohorts(st, d, fe, entry)
			for _, hash := range slices.Sorted(maps.Keys(r.why)) {
				if why := unservable(st, d, fe, hash); why != "" {
					out = append(out, fmt.Sprintf("cohort %s receives traffic through %s (%s) but %s", hash, entry, r.why[hash], why))
				}
			}
			for _, hash := range slices.Sorted(maps.Keys(r.inFlight)) {
				if !hasFrontendPod(st.Pods, d.Name, fe, hash) {
					out = append(out, fmt.Sprintf("cohort %s has %d requests in flight through %s but no frontend pod of %s left", hash, r.inFlight[hash], entry, fe))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// Receiving lists, per entry Service of every DGD of st with cohort frontends, the
// cohorts the provider's objects send traffic to (see the file's comment), sorted.
func Receiving(st CohortState) map[string][]string {
	out := map[string][]string{}
	for i := range st.DGDs {
		d := &st.DGDs[i]
		if !hasCohorts(d.Name, st.Pods) {
			continue
		}
		for _, fe := range frontendServices(d) {
			entry := decide.EntryName(d, fe)
			if r := receivingCohorts(st, d, fe, entry); len(r.why) > 0 {
				out[entry] = slices.Sorted(maps.Keys(r.why))
			}
		}
	}
	return out
}

// frontendServices are d's frontend services, sorted.
func frontendServices(d *v1alpha1.DynamoGraphDeployment) []string {
	var out []string
	for _, name := range d.ServiceNames() {
		if d.Spec.Services[name].ComponentType == v1alpha1.ComponentTypeFrontend {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// receivingCohorts reads, from the provider's objects of frontend service fe, the cohorts
// that receive traffic through its entry.
func receivingCohorts(st CohortState, d *v1alpha1.DynamoGraphDeployment, fe, entry string) receiving {
	r := receiving{why: map[string]string{}, inFlight: map[string]int64{}}
	if entrySendsToProxy(st, d, entry) {
		for i := range st.ConfigMaps {
			cm := &st.ConfigMaps[i]
			if !metav1.IsControlledBy(cm, d) {
				continue
			}
			switch cm.Name {
			case entry + "-proxy":
				if s, _, err := proxy.ParseSplit(cm.Data); err == nil {
					for _, c := range s.Cohorts {
						if c.Weight > 0 {
							r.add(c.Hash, fmt.Sprintf("weight %d in the desired split", c.Weight))
						}
					}
					if h := s.Pinned(); h != "" {
						r.add(h, "the header route of the desired split")
					}
				}
			case entry + "-proxy-status":
				addReports(&r, cm, st.Pods, d.Name)
			}
		}
	}
	addEntryEndpoints(&r, st, d, fe, entry)
	for i := range st.Routes {
		route := &st.Routes[i]
		if route.Name != entry || !metav1.IsControlledBy(route, d) {
			continue
		}
		asked := routeCohorts(&route.Spec, d, fe)
		for h, why := range asked {
			r.add(h, why+" of HTTPRoute "+route.Name)
		}
		if !routeAccepted(route) && st.Accepted[route.Name] != nil {
			for h, why := range routeCohorts(st.Accepted[route.Name], d, fe) {
				r.add(h, why+" of the last generation of HTTPRoute "+route.Name+" its parents accepted")
			}
		}
	}
	return r
}

// addEntryEndpoints adds the cohorts whose frontend pods are ready endpoints of the
// entry Service itself: its clients reach them without a provider (in-cluster clients
// while a Gateway routes, or while the entry selects the frontends).
func addEntryEndpoints(r *receiving, st CohortState, d *v1alpha1.DynamoGraphDeployment, fe, entry string) {
	hashOf := map[string]string{}
	for i := range st.Pods {
		if p := &st.Pods[i]; p.Labels[v1alpha1.LabelService] == fe && isCohortFrontend(p, d.Name) {
			hashOf[p.Name] = p.Labels[v1alpha1.LabelWorkerHash]
		}
	}
	for i := range st.Slices {
		s := &st.Slices[i]
		if s.Labels[discoveryv1.LabelServiceName] != entry {
			continue
		}
		for _, e := range s.Endpoints {
			if e.TargetRef == nil || e.Conditions.Ready == nil || !*e.Conditions.Ready {
				continue
			}
			if h := hashOf[e.TargetRef.Name]; h != "" {
				r.add(h, fmt.Sprintf("its frontend pod %s a ready endpoint of the entry Service", e.TargetRef.Name))
			}
		}
	}
}

// entrySendsToProxy reports whether clients of entry reach the proxy: its selector is
// the proxy's pods, or its EndpointSlices still list one (a client may be on its way).
func entrySendsToProxy(st CohortState, d *v1alpha1.DynamoGraphDeployment, entry string) bool {
	for i := range st.Services {
		if s := &st.Services[i]; s.Name == entry && s.Spec.Selector[v1alpha1.LabelTrafficProxy] == "true" {
			return true
		}
	}
	proxies := map[string]bool{}
	for i := range st.Pods {
		if p := &st.Pods[i]; p.Labels[v1alpha1.LabelGraph] == d.Name && p.Labels[v1alpha1.LabelTrafficProxy] == "true" {
			proxies[p.Name] = true
		}
	}
	for i := range st.Slices {
		s := &st.Slices[i]
		if s.Labels[discoveryv1.LabelServiceName] != entry {
			continue
		}
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && proxies[e.TargetRef.Name] {
				return true
			}
		}
	}
	return false
}

// addReports adds the cohorts the reports of live proxy pods route to (a weight above 0,
// the header route), and the requests in flight every report of a pod still there
// counts (a terminating HAProxy finishes its streams).
func addReports(r *receiving, cm *corev1.ConfigMap, pods []corev1.Pod, dgd string) {
	live, present := map[string]bool{}, map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Labels[v1alpha1.LabelGraph] == dgd && p.Labels[v1alpha1.LabelTrafficProxy] == "true" {
			present[p.Name] = true
			live[p.Name] = p.DeletionTimestamp.IsZero()
		}
	}
	for _, pod := range slices.Sorted(maps.Keys(cm.Data)) {
		if !present[pod] {
			continue // a report of a pod gone
		}
		rep, err := proxy.ParseReport(cm.Data[pod])
		if err != nil {
			continue
		}
		for hash, c := range rep.Cohorts {
			if c.InFlight > 0 {
				r.inFlight[hash] += c.InFlight
			}
			if live[pod] && c.Weight > 0 {
				r.add(hash, fmt.Sprintf("weight %d in proxy pod %s's report", c.Weight, pod))
			}
		}
		if live[pod] && rep.HeaderRoute != "" {
			r.add(rep.HeaderRoute, fmt.Sprintf("the header route in proxy pod %s's report", pod))
		}
	}
}

// routeCohorts are the cohorts a route's spec sends to: a backendRef of weight above 0
// (the CRD's default weight is 1) or in a rule with a header match, to a Service named as
// the DGD names its cohorts' (backends.CohortServiceName).
func routeCohorts(spec *gatewayv1.HTTPRouteSpec, d *v1alpha1.DynamoGraphDeployment, fe string) map[string]string {
	out := map[string]string{}
	for _, rule := range spec.Rules {
		header := false
		for _, m := range rule.Matches {
			header = header || len(m.Headers) > 0
		}
		for _, b := range rule.BackendRefs {
			hash, ok := cohortOfService(string(b.Name), d, fe)
			if !ok || ptr.Deref(b.Group, "") != "" || ptr.Deref(b.Kind, "Service") != "Service" {
				continue
			}
			switch w := ptr.Deref(b.Weight, 1); {
			case header:
				out[hash] = "the header rule"
			case w > 0:
				if out[hash] == "" {
					out[hash] = fmt.Sprintf("weight %d", w)
				}
			}
		}
	}
	return out
}

// cohortOfService is the hash of the cohort whose Service is named name.
func cohortOfService(name string, d *v1alpha1.DynamoGraphDeployment, fe string) (string, bool) {
	rest, ok := strings.CutSuffix(name, "-"+backends.CohortSuffix)
	if !ok {
		return "", false
	}
	hash := rest[strings.LastIndex(rest, "-")+1:]
	return hash, hash != "" && backends.CohortServiceName(d.Name, fe, hash) == name
}

// routeAccepted reports whether every parent of route has Accepted and ResolvedRefs
// True for its current generation, and PartiallyInvalid not True (GEP-1364; what
// traffic/gatewayapi counts as in effect).
func routeAccepted(route *gatewayv1.HTTPRoute) bool {
	if len(route.Spec.ParentRefs) == 0 {
		return false
	}
	for _, ref := range route.Spec.ParentRefs {
		ok := false
		for _, st := range route.Status.Parents {
			if !gatewayapi.SameParent(st.ParentRef, ref, route.Namespace) {
				continue
			}
			a := meta.FindStatusCondition(st.Conditions, string(gatewayv1.RouteConditionAccepted))
			r := meta.FindStatusCondition(st.Conditions, string(gatewayv1.RouteConditionResolvedRefs))
			pi := meta.FindStatusCondition(st.Conditions, string(gatewayv1.RouteConditionPartiallyInvalid))
			ok = ok || a != nil && r != nil && a.Status == metav1.ConditionTrue && r.Status == metav1.ConditionTrue &&
				a.ObservedGeneration == route.Generation && r.ObservedGeneration == route.Generation &&
				(pi == nil || pi.Status != metav1.ConditionTrue)
		}
		if !ok {
			return false
		}
	}
	return true
}

// unservable says why cohort hash cannot serve requests entering by frontend service fe
// ("" when it can): no ready frontend pod of fe in it, or a worker service of the spec
// with no pod whose runtime is a ready endpoint of a discovery EndpointSlice in the
// cohort's Dynamo namespace (under etcd discovery, a Ready pod).
func unservable(st CohortState, d *v1alpha1.DynamoGraphDeployment, fe, hash string) string {
	var why []string
	front := false
	for i := range st.Pods {
		p := &st.Pods[i]
		if p.Labels[v1alpha1.LabelService] == fe && isCohortFrontend(p, d.Name) && p.Labels[v1alpha1.LabelWorkerHash] == hash &&
			p.DeletionTimestamp.IsZero() && cluster.PodReady(p) {
			front = true
		}
	}
	if !front {
		why = append(why, fmt.Sprintf("has no ready frontend pod of %s", fe))
	}
	kube := (render.Config{}).Discovery(d) == render.DiscoveryKubernetes
	ready := render.ReadyEndpoints(st.Slices, render.DiscoveryLabelled)
	own := render.EffectiveNamespace(d, true, hash)
	for _, svc := range d.WorkerServiceNames() {
		if d.Spec.Services[svc].DesiredReplicas() == 0 {
			continue
		}
		routable := false
		for i := range st.Pods {
			p := &st.Pods[i]
			if p.Labels[v1alpha1.LabelGraph] != d.Name || p.Labels[v1alpha1.LabelService] != svc || p.Labels[v1alpha1.LabelWorkerHash] != hash || !p.DeletionTimestamp.IsZero() {
				continue
			}
			rt, ok := dynamoview.RuntimeOf(p)
			if !ok || !rt.IsWorker() || rt.Namespace != own {
				continue
			}
			if uids := ready[p.Name]; kube && len(uids) == 1 && uids[p.UID] || !kube && cluster.PodReady(p) {
				routable = true
			}
		}
		if !routable {
			why = append(why, fmt.Sprintf("no %s pod of it is a ready endpoint Dynamo's discovery admits", svc))
		}
	}
	return strings.Join(why, ", ")
}

// hasFrontendPod reports whether a frontend pod of fe in cohort hash exists (terminating
// or not: a terminating one finishes its requests).
func hasFrontendPod(pods []corev1.Pod, dgd, fe, hash string) bool {
	for i := range pods {
		p := &pods[i]
		if p.Labels[v1alpha1.LabelService] == fe && isCohortFrontend(p, dgd) && p.Labels[v1alpha1.LabelWorkerHash] == hash {
			return true
		}
	}
	return false
}

// entryViolations checks each entry Service at one state: one that has had a ready
// endpoint (armed, which this records) has one now.
func entryViolations(armed map[string]bool, entries []string, slices []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, entry := range entries {
		switch ready := EntryReady(entry, slices); {
		case ready:
			armed[entry] = true
		case armed[entry]:
			out = append(out, fmt.Sprintf("the entry Service %s has no ready endpoint (slices: %s)", entry, describeSlices(slices)))
		}
	}
	return out
}

// EntryReady reports whether the EndpointSlices of Service entry list a ready endpoint.
func EntryReady(entry string, slices []discoveryv1.EndpointSlice) bool {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: entry})
	for i := range slices {
		if !sel.Matches(labels.Set(slices[i].Labels)) {
			continue
		}
		for _, e := range slices[i].Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				return true
			}
		}
	}
	return false
}

// checkCohorts runs the cohort checks on the cached state st: discovery and entry on it,
// traffic on it and, when it fails, again on the API server (see above).
func (o *Observer) checkCohorts(ctx context.Context, st CohortState, view dynamoview.View) {
	for _, v := range CohortDiscoveryViolations(st.DGDs, st.Pods, view) {
		o.fail("cohort discovery: " + v)
	}
	o.mu.Lock()
	for i := range st.Routes {
		if r := &st.Routes[i]; routeAccepted(r) {
			o.accepted[r.Name] = r.Spec.DeepCopy()
		}
	}
	st.Accepted = maps.Clone(o.accepted)
	var entries []string
	for i := range st.DGDs {
		d := &st.DGDs[i]
		if !d.DeletionTimestamp.IsZero() {
			continue
		}
		if hasCohorts(d.Name, st.Pods) {
			o.cohortsSeen[d.Name] = true
		}
		if o.cohortsSeen[d.Name] {
			for _, fe := range frontendServices(d) {
				entries = append(entries, decide.EntryName(d, fe))
			}
		}
	}
	broken := entryViolations(o.entryArmed, entries, st.Slices)
	if len(entries) > 0 {
		o.stats.CohortStates++
	}
	for _, hashes := range Receiving(st) {
		o.stats.TrafficStates++
		if len(hashes) > 1 {
			o.stats.SplitStates++
		}
		o.stats.Receivers = max(o.stats.Receivers, len(hashes))
	}
	o.mu.Unlock()
	for _, v := range broken {
		o.fail("entry: " + v)
	}
	if len(TrafficViolations(st)) == 0 || o.reader == nil {
		return
	}
	for _, v := range o.confirmTraffic(ctx, st) {
		o.fail("cohort traffic: " + v)
	}
}

// confirmTraffic reads the namespace from the API server (traffic objects, pods, slices
// and Services, traffic objects again) and returns the traffic violations of both
// reads.
func (o *Observer) confirmTraffic(ctx context.Context, cached CohortState) []string {
	ns := client.InNamespace(o.opts.Namespace)
	first, err := o.readTraffic(ctx)
	if err != nil {
		return nil
	}
	var pods corev1.PodList
	var svcs corev1.ServiceList
	if o.reader.List(ctx, &pods, ns) != nil || o.reader.List(ctx, &svcs, ns) != nil {
		return nil
	}
	var eps []discoveryv1.EndpointSlice
	if o.opts.SyntheticSlices {
		eps = Slices(svcs.Items, pods.Items)
	} else {
		var ls discoveryv1.EndpointSliceList
		if o.reader.List(ctx, &ls, ns) != nil {
			return nil
		}
		eps = ls.Items
	}
	second, err := o.readTraffic(ctx)
	if err != nil {
		return nil
	}
	state := func(t CohortState) CohortState {
		t.DGDs, t.Pods, t.Slices, t.Services, t.Accepted = cached.DGDs, pods.Items, eps, svcs.Items, cached.Accepted
		return t
	}
	a, b := TrafficViolations(state(first)), TrafficViolations(state(second))
	var out []string
	for _, v := range a {
		if slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}

// readTraffic reads the providers' objects of the namespace from the API server.
func (o *Observer) readTraffic(ctx context.Context) (CohortState, error) {
	var st CohortState
	var cms corev1.ConfigMapList
	if err := o.reader.List(ctx, &cms, client.InNamespace(o.opts.Namespace)); err != nil {
		return st, err
	}
	st.ConfigMaps = cms.Items
	if o.routes {
		var rs gatewayv1.HTTPRouteList
		if err := o.reader.List(ctx, &rs, client.InNamespace(o.opts.Namespace)); err != nil {
			return st, err
		}
		st.Routes = rs.Items
	}
	return st, nil
}
