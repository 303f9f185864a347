package observe

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/test/dynamoview"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// The built states of these tests: DGD g in namespace ns, a frontend, prefill and
// decode; the stable revision's cohort is aaaa1111, the candidate's bbbb2222.
const (
	stableHash    = "aaaa1111"
	candidateHash = "bbbb2222"
	entry         = "g-frontend"
)

func cohortDGD() v1alpha1.DynamoGraphDeployment {
	d := harness.NewDGD("ns", "g").Disagg(1, 1, "vllm-runtime:1.6.0").Obj()
	d.UID = "uid-g"
	return *d
}

func owned(d *v1alpha1.DynamoGraphDeployment) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}
}

// cpod is a pod of g: ready, running main with env (pairs), labelled with service and
// hash ("" for none).
func cpod(name, service, hash string, ready bool, args []string, env ...string) corev1.Pod {
	c := corev1.Container{Name: "main", Image: "vllm-runtime:1.6.0", Command: []string{"python3"}, Args: args}
	for i := 0; i+1 < len(env); i += 2 {
		c.Env = append(c.Env, corev1.EnvVar{Name: env[i], Value: env[i+1]})
	}
	l := map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: service}
	if hash != "" {
		l[v1alpha1.LabelWorkerHash] = hash
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: l},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
}

// cohortFrontend is a cohort's frontend as rendered: DYN_NAMESPACE its revision's, no
// prefix.
func cohortFrontend(name, hash string, ready bool) corev1.Pod {
	return cpod(name, "Frontend", hash, ready, []string{"-m", "dynamo.frontend"}, "DYN_NAMESPACE", "ns-g-"+hash)
}

func sharedFrontend(name string) corev1.Pod {
	return cpod(name, "Frontend", "", true, []string{"-m", "dynamo.frontend"},
		"DYN_NAMESPACE", "ns-g", "DYN_NAMESPACE_PREFIX", "ns-g", "DYN_NAMESPACE_PREFIX_STRICT", "true")
}

func worker(name, role, hash string, ready bool) corev1.Pod {
	return cpod(name, role, hash, ready, []string{"-m", "dynamo.vllm", "--model", harness.Model, "--disaggregation-mode", role},
		"DYN_NAMESPACE", "ns-g", "DYN_NAMESPACE_WORKER_SUFFIX", hash)
}

func proxyPod(name string, deleting bool) corev1.Pod {
	p := cpod(name, "Frontend", "", true, nil)
	p.Spec.Containers = []corev1.Container{{Name: "haproxy", Command: []string{"haproxy", "-db"}}}
	p.Labels[v1alpha1.LabelTrafficProxy] = "true"
	if deleting {
		p.DeletionTimestamp = ptr.To(metav1.Now())
	}
	return p
}

// cohort is the ready frontend, prefill and decode of a revision.
func cohort(hash string) []corev1.Pod {
	return []corev1.Pod{cohortFrontend("fe-"+hash, hash, true), worker("p-"+hash, "prefill", hash, true), worker("d-"+hash, "decode", hash, true)}
}

// discoverySlice lists every ready worker pod as a ready endpoint, with both discovery
// labels.
func discoverySlice(pods []corev1.Pod) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers", Labels: map[string]string{
		render.LabelDiscoveryEnabled: "true", render.LabelDiscoveryBackend: render.DiscoveryKubernetes}}}
	for i := range pods {
		p := &pods[i]
		if rt, ok := dynamoview.RuntimeOf(p); ok && rt.IsWorker() {
			ready := p.Status.Conditions[0].Status == corev1.ConditionTrue
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: p.Name, UID: p.UID}})
		}
	}
	return s
}

// entrySlice is the entry Service's slice, listing pods as ready or not.
func entrySlice(ready bool, pods ...string) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: entry + "-x1", Labels: map[string]string{discoveryv1.LabelServiceName: entry}}}
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: p, UID: types.UID("uid-" + p)}})
	}
	return s
}

func entryService(toProxy bool) corev1.Service {
	sel := map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: "Frontend", v1alpha1.LabelComponentType: "frontend"}
	if toProxy {
		sel = map[string]string{v1alpha1.LabelGraph: "g", v1alpha1.LabelService: "Frontend", v1alpha1.LabelTrafficProxy: "true"}
	}
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: entry}, Spec: corev1.ServiceSpec{Selector: sel}}
}

// desired is the desired split ConfigMap `{entry}-proxy` with weights by hash and an
// optional header route to pin.
func desired(d *v1alpha1.DynamoGraphDeployment, pin string, weights map[string]int32) corev1.ConfigMap {
	var s proxy.Split
	s.Cohorts = []proxy.SplitCohort{}
	for _, h := range []string{stableHash, candidateHash} {
		if w, ok := weights[h]; ok {
			s.Cohorts = append(s.Cohorts, proxy.SplitCohort{Hash: h, Address: "10.96.0.1", Port: 8000, Weight: w})
		}
	}
	if pin != "" {
		s.HeaderRoute = &proxy.SplitHeaderRoute{Name: "x-canary", Value: "1", Hash: pin}
	}
	b, _ := json.Marshal(s)
	return corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: entry + "-proxy", OwnerReferences: owned(d)},
		Data: map[string]string{proxy.SplitKey: string(b), proxy.VersionKey: s.Version()}}
}

// reports is the status ConfigMap with one report per pod.
func reports(d *v1alpha1.DynamoGraphDeployment, byPod map[string]proxy.Report) corev1.ConfigMap {
	cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: entry + "-proxy-status", OwnerReferences: owned(d)}, Data: map[string]string{}}
	for pod, r := range byPod {
		b, _ := json.Marshal(r)
		cm.Data[pod] = string(b)
	}
	return cm
}

func report(weights map[string]int32, inFlight map[string]int64, pin string) proxy.Report {
	r := proxy.Report{Version: "v", Cohorts: map[string]proxy.CohortReport{}, HeaderRoute: pin}
	for h, w := range weights {
		r.Cohorts[h] = proxy.CohortReport{Weight: w, InFlight: inFlight[h]}
	}
	for h, n := range inFlight {
		if _, ok := weights[h]; !ok {
			r.Cohorts[h] = proxy.CohortReport{InFlight: n, Removing: true}
		}
	}
	return r
}

// httpRoute is the HTTPRoute `{entry}` at generation gen with weights by hash, accepted
// (both conditions True) for generation accepted.
func httpRoute(d *v1alpha1.DynamoGraphDeployment, gen, accepted int64, weights map[string]int32) gatewayv1.HTTPRoute {
	rule := gatewayv1.HTTPRouteRule{}
	for _, h := range []string{stableHash, candidateHash} {
		if w, ok := weights[h]; ok {
			rule.BackendRefs = append(rule.BackendRefs, gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(backends.CohortServiceName("g", "Frontend", h)), Port: ptr.To(gatewayv1.PortNumber(8000))},
				Weight:                 ptr.To(w)}})
		}
	}
	ref := gatewayv1.ParentReference{Name: "public"}
	r := gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: entry, Generation: gen, OwnerReferences: owned(d)},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{ref}}, Rules: []gatewayv1.HTTPRouteRule{rule}}}
	cond := func(t gatewayv1.RouteConditionType) metav1.Condition {
		return metav1.Condition{Type: string(t), Status: metav1.ConditionTrue, ObservedGeneration: accepted, Reason: string(t)}
	}
	r.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: ref, ControllerName: "example.com/gw",
		Conditions: []metav1.Condition{cond(gatewayv1.RouteConditionAccepted), cond(gatewayv1.RouteConditionResolvedRefs)}}}
	return r
}

// TestTrafficViolations: a cohort the provider's objects send traffic to has a ready
// frontend and a routable pool, each broken state named; traffic the proxy cannot
// receive (the entry selecting the frontends) and reports of pods gone are not read.
func TestTrafficViolations(t *testing.T) {
	d := cohortDGD()
	both := append(cohort(stableHash), cohort(candidateHash)...)
	noDecode := append(cohort(stableHash), cohortFrontend("fe-"+candidateHash, candidateHash, true), worker("p-"+candidateHash, "prefill", candidateHash, true),
		worker("d-"+candidateHash, "decode", candidateHash, false))
	noFront := append(cohort(stableHash), cohortFrontend("fe-"+candidateHash, candidateHash, false), worker("p-"+candidateHash, "prefill", candidateHash, true),
		worker("d-"+candidateHash, "decode", candidateHash, true))
	stableOnly := append(cohort(stableHash), worker("p-"+candidateHash, "prefill", candidateHash, true), worker("d-"+candidateHash, "decode", candidateHash, true))
	proxies := []corev1.Pod{proxyPod("px-a", false), proxyPod("px-b", false)}
	state := func(pods []corev1.Pod, toProxy bool, cms ...corev1.ConfigMap) CohortState {
		all := append(append([]corev1.Pod(nil), pods...), proxies...)
		return CohortState{DGDs: []v1alpha1.DynamoGraphDeployment{d}, Pods: all, Services: []corev1.Service{entryService(toProxy)},
			Slices: []discoveryv1.EndpointSlice{discoverySlice(all)}, ConfigMaps: cms}
	}
	gateway := func(pods []corev1.Pod, r gatewayv1.HTTPRoute, accepted *gatewayv1.HTTPRouteSpec) CohortState {
		st := state(pods, false)
		st.Routes = []gatewayv1.HTTPRoute{r}
		st.Accepted = map[string]*gatewayv1.HTTPRouteSpec{entry: accepted}
		return st
	}
	lastAccepted := httpRoute(&d, 3, 3, map[string]int32{stableHash: 100, candidateHash: 0}).Spec
	halfAccepted := httpRoute(&d, 3, 3, map[string]int32{stableHash: 50, candidateHash: 50}).Spec
	for name, tc := range map[string]struct {
		st   CohortState
		want string // a substring of the one violation; "" for none
	}{
		"stable at 100, the candidate ready at 0": {state(both, true, desired(&d, "", map[string]int32{stableHash: 100, candidateHash: 0}),
			reports(&d, map[string]proxy.Report{"px-a": report(map[string]int32{stableHash: 100, candidateHash: 0}, nil, "")})), ""},
		"both routable at 75/25": {state(both, true, desired(&d, "", map[string]int32{stableHash: 75, candidateHash: 25})), ""},
		"the candidate weighted in the desired split, its decode not ready": {state(noDecode, true, desired(&d, "", map[string]int32{stableHash: 75, candidateHash: 25})),
			"cohort bbbb2222 receives traffic through g-frontend (weight 25 in the desired split) but no decode pod of it is a ready endpoint"},
		"the candidate weighted in a proxy pod's report, no ready frontend": {state(noFront, true, desired(&d, "", map[string]int32{stableHash: 100, candidateHash: 0}),
			reports(&d, map[string]proxy.Report{"px-a": report(map[string]int32{stableHash: 50, candidateHash: 50}, nil, "")})),
			"(weight 50 in proxy pod px-a's report) but has no ready frontend pod of Frontend"},
		"the header route to a candidate without a frontend": {state(stableOnly, true, desired(&d, candidateHash, map[string]int32{stableHash: 100, candidateHash: 0})),
			"cohort bbbb2222 receives traffic through g-frontend (the header route of the desired split) but has no ready frontend pod"},
		"a report of a proxy pod gone is not read": {state(stableOnly, true, desired(&d, "", map[string]int32{stableHash: 100}),
			reports(&d, map[string]proxy.Report{"px-gone": report(map[string]int32{candidateHash: 100}, nil, "")})), ""},
		"the entry selecting the frontends: no split reaches anyone": {state(stableOnly, false, desired(&d, "", map[string]int32{candidateHash: 100})), ""},
		"the entry sending to a candidate frontend whose decode is not ready": {func() CohortState {
			st := state(noDecode, false)
			st.Slices = append(st.Slices, entrySlice(true, "fe-"+stableHash, "fe-"+candidateHash))
			return st
		}(), "cohort bbbb2222 receives traffic through g-frontend (its frontend pod fe-bbbb2222 a ready endpoint of the entry Service) but no decode pod"},
		"the entry listing a candidate frontend not ready": {func() CohortState {
			st := state(noDecode, false)
			st.Slices = append(st.Slices, entrySlice(true, "fe-"+stableHash), entrySlice(false, "fe-"+candidateHash))
			return st
		}(), ""},
		"requests in flight to a cohort whose frontends are gone": {state(stableOnly, true, desired(&d, "", map[string]int32{stableHash: 100}),
			reports(&d, map[string]proxy.Report{"px-b": report(map[string]int32{stableHash: 100}, map[string]int64{candidateHash: 3}, "")})),
			"cohort bbbb2222 has 3 requests in flight through g-frontend but no frontend pod of Frontend left"},
		"a split of another DGD's ConfigMap is not read": {func() CohortState {
			cm := desired(&d, "", map[string]int32{candidateHash: 100})
			cm.OwnerReferences[0].UID = "someone-else"
			return state(stableOnly, true, cm)
		}(), ""},
		"Gateway: an accepted route weighting a candidate without a decode": {gateway(noDecode, httpRoute(&d, 4, 4, map[string]int32{stableHash: 50, candidateHash: 50}), nil),
			"cohort bbbb2222 receives traffic through g-frontend (weight 50 of HTTPRoute g-frontend) but no decode pod"},
		"Gateway: the candidate's frontend gone while its weight 0 is not accepted yet": {gateway(stableOnly,
			httpRoute(&d, 4, 3, map[string]int32{stableHash: 100, candidateHash: 0}), &halfAccepted),
			"(weight 50 of the last generation of HTTPRoute g-frontend its parents accepted) but has no ready frontend pod"},
		"Gateway: the candidate's frontend gone once its weight 0 is accepted": {gateway(stableOnly,
			httpRoute(&d, 4, 4, map[string]int32{stableHash: 100, candidateHash: 0}), &lastAccepted), ""},
	} {
		got := TrafficViolations(tc.st)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%s: %v, want none", name, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%s: %v, want one with %q", name, got, tc.want)
		}
	}
}

// TestCohortDiscoveryViolations: every cohort frontend discovers its own revision's
// workers only, exactly; a shared frontend never runs beside a second revision while the
// DGD has cohorts; a DGD without cohorts is not judged.
func TestCohortDiscoveryViolations(t *testing.T) {
	d := cohortDGD()
	wrongNamespace := cohortFrontend("fe-"+candidateHash, candidateHash, true)
	wrongNamespace.Spec.Containers[0].Env[0].Value = "ns-g-" + stableHash
	prefixed := cohortFrontend("fe-"+candidateHash, candidateHash, true)
	prefixed.Spec.Containers[0].Env = append(prefixed.Spec.Containers[0].Env, corev1.EnvVar{Name: "DYN_NAMESPACE_PREFIX", Value: "ns-g"})
	for name, tc := range map[string]struct {
		pods []corev1.Pod
		want string // a substring of the first violation; "" for none
	}{
		"two cohorts, each on its own":                                  {append(cohort(stableHash), cohort(candidateHash)...), ""},
		"the prelude: the shared frontend beside its revision's cohort": {append(cohort(stableHash), sharedFrontend("fe-shared")), ""},
		"a cohort frontend in another revision's namespace": {append(append(cohort(stableHash), worker("p-"+candidateHash, "prefill", candidateHash, true)), wrongNamespace),
			"frontend pod fe-bbbb2222 of cohort bbbb2222 discovers Exact \"ns-g-aaaa1111\", not exactly its revision's Dynamo namespace ns-g-bbbb2222"},
		"a cohort frontend with a prefix filter": {append(cohort(stableHash), prefixed),
			"frontend pod fe-bbbb2222 of cohort bbbb2222 discovers Prefix \"ns-g\""},
		"a shared frontend beside two revisions while cohorts run": {append(append(cohort(stableHash), sharedFrontend("fe-shared")), worker("p-"+candidateHash, "prefill", candidateHash, false)),
			"shared frontend pod fe-shared runs beside workers of 2 revisions while the DGD has cohorts (aaaa1111: d-aaaa1111, p-aaaa1111; bbbb2222: p-bbbb2222"},
		"no cohorts: a shared frontend over two revisions is Shared's rollout": {[]corev1.Pod{sharedFrontend("fe-shared"), worker("p-"+stableHash, "prefill", stableHash, true),
			worker("p-"+candidateHash, "prefill", candidateHash, true)}, ""},
	} {
		view := dynamoview.Compute(tc.pods, []discoveryv1.EndpointSlice{discoverySlice(tc.pods)}, dwms(t, tc.pods))
		got := CohortDiscoveryViolations([]v1alpha1.DynamoGraphDeployment{d}, tc.pods, view)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%s: %v, want none", name, got)
		case tc.want != "" && (len(got) == 0 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%s: %v, want one with %q", name, got, tc.want)
		}
	}
}

// dwms are the DWMs every worker pod's runtime would publish.
func dwms(t *testing.T, pods []corev1.Pod) []unstructured.Unstructured {
	t.Helper()
	var out []unstructured.Unstructured
	for i := range pods {
		if rt, ok := dynamoview.RuntimeOf(&pods[i]); ok && rt.IsWorker() {
			out = append(out, *dynamoview.Metadata(&pods[i], rt))
		}
	}
	return out
}

// TestEntryViolations: the entry Service may start without a ready endpoint, but once it
// had one, every state has one; another Service's slices do not count.
func TestEntryViolations(t *testing.T) {
	armed := map[string]bool{}
	other := entrySlice(true, "x")
	other.Labels[discoveryv1.LabelServiceName] = "g-frontend-aaaa1111-cohort"
	for i, step := range []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		broken bool
	}{
		{"no endpoint yet", nil, false},
		{"the frontend not ready yet", []discoveryv1.EndpointSlice{entrySlice(false, "fe-shared")}, false},
		{"the frontend ready", []discoveryv1.EndpointSlice{entrySlice(true, "fe-shared")}, false},
		{"the proxy pods ready", []discoveryv1.EndpointSlice{entrySlice(true, "px-a", "px-b")}, false},
		{"the proxy pods unready, a cohort Service's ready", []discoveryv1.EndpointSlice{entrySlice(false, "px-a"), other}, true},
		{"the slice gone", nil, true},
	} {
		got := entryViolations(armed, []string{entry}, step.slices)
		if step.broken != (len(got) == 1) || len(got) > 1 || step.broken && !strings.Contains(got[0], "the entry Service g-frontend has no ready endpoint") {
			t.Errorf("state %d (%s): %v, want broken %v", i, step.name, got, step.broken)
		}
	}
}
