package gatewayapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/test/gateway"
	"github.com/dgd-rollout/operator/traffic"
)

func TestEffect(t *testing.T) {
	public := gatewayv1.ParentReference{Name: "public"}
	infra := gatewayv1.ParentReference{Namespace: ptr.To(gatewayv1.Namespace("infra")), Name: "edge", SectionName: ptr.To(gatewayv1.SectionName("http"))}
	one := newTraffic().cohort("aaaaaaaa", 90).cohort("bbbbbbbb", 10).get()
	two := newTraffic().cohort("aaaaaaaa", 90).cohort("bbbbbbbb", 10).parents(public, infra).get()
	withHeader := newTraffic().cohort("aaaaaaaa", 100).cohort("bbbbbbbb", 0).header("X-Canary", "yes", "bbbbbbbb").get()
	base := newTraffic().get() // decide.TrafficBase: no cohort
	inEffect := traffic.Effect{InEffect: true, Serving: true, Weights: map[string]int32{"aaaaaaaa": 90, "bbbbbbbb": 10}}
	const route = "HTTPRoute ns/llm-frontend: "
	const lagsAt = "parent Gateway ns/public (example.com/test-gateway): "

	asked := func(f func(r *gatewayv1.HTTPRoute)) *gatewayv1.HTTPRoute {
		r := observedRoute(one, 3, accepted(public, 3))
		f(r)
		return r
	}
	cases := map[string]struct {
		t    traffic.Traffic
		o    traffic.Observed
		want traffic.Effect
	}{
		"in effect: Accepted and ResolvedRefs True for the route's generation": {
			t: one, o: observe(observedRoute(one, 3, accepted(public, 3)), gw("ns", "public")), want: inEffect,
		},
		"in effect with the status entry's parentRef as written, without defaults": {
			t: one, o: observe(observedRoute(one, 3, func() gatewayv1.RouteParentStatus {
				e := accepted(public, 3)
				e.ParentRef = gatewayv1.ParentReference{Name: "public", Namespace: ptr.To(gatewayv1.Namespace("ns"))}
				return e
			}()), gw("ns", "public")), want: inEffect,
		},
		"the route not found": {
			t: one, o: observe(nil, gw("ns", "public")),
			want: traffic.Effect{Message: "HTTPRoute ns/llm-frontend not found"},
		},
		"a route the DGD does not control": {
			t: one, o: observe(asked(func(r *gatewayv1.HTTPRoute) { r.OwnerReferences = nil }), gw("ns", "public")),
			want: traffic.Effect{Message: "HTTPRoute ns/llm-frontend is not controlled by DGD llm: another object's route holds the name"},
		},
		"the route's weights not yet the ones asked": {
			t: one, o: observe(asked(func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].BackendRefs[0].Weight = ptr.To(int32(100)) }), gw("ns", "public")),
			want: traffic.Effect{Serving: true, Weights: map[string]int32{"aaaaaaaa": 100, "bbbbbbbb": 10},
				Message: "HTTPRoute ns/llm-frontend does not route the split asked for yet (its weights aaaaaaaa=100 bbbbbbbb=10, asked aaaaaaaa=90 bbbbbbbb=10)"},
		},
		"in effect with a header route, which Effect reports": {
			t: withHeader, o: observe(observedRoute(withHeader, 2, accepted(public, 2)), gw("ns", "public")),
			want: traffic.Effect{InEffect: true, Serving: true, Weights: map[string]int32{"aaaaaaaa": 100, "bbbbbbbb": 0},
				HeaderRoute: &traffic.HeaderRoute{Name: "X-Canary", Value: "yes", Hash: "bbbbbbbb"}},
		},
		"the controller's Traffic of no cohort: the weights and header route the route routes": {
			t: base, o: observe(observedRoute(withHeader, 2, accepted(public, 2)), gw("ns", "public")),
			want: traffic.Effect{Serving: true, Weights: map[string]int32{"aaaaaaaa": 100, "bbbbbbbb": 0},
				HeaderRoute: &traffic.HeaderRoute{Name: "X-Canary", Value: "yes", Hash: "bbbbbbbb"},
				Message:     "HTTPRoute ns/llm-frontend of DGD llm: traffic cannot be rendered as an HTTPRoute: no cohort to route to"},
		},
		"the controller's Traffic of no cohort, the route a generation ahead of its status: no weights": {
			t: base, o: observe(observedRoute(withHeader, 3, accepted(public, 2)), gw("ns", "public")),
			want: traffic.Effect{Serving: true, Message: "HTTPRoute ns/llm-frontend of DGD llm: traffic cannot be rendered as an HTTPRoute: no cohort to route to; " +
				route + lagsAt + "Accepted True is for generation 2, the route is at 3 (not judged yet), ResolvedRefs True is for generation 2, the route is at 3 (not judged yet)"},
		},
		"a cohort no longer asked keeps its weight in Weights until the route drops it": {
			t: newTraffic().cohort("aaaaaaaa", 100).get(), o: observe(observedRoute(withHeader, 2, accepted(public, 2)), gw("ns", "public")),
			want: traffic.Effect{Serving: true, Weights: map[string]int32{"aaaaaaaa": 100, "bbbbbbbb": 0},
				HeaderRoute: &traffic.HeaderRoute{Name: "X-Canary", Value: "yes", Hash: "bbbbbbbb"},
				Message:     "HTTPRoute ns/llm-frontend does not route the split asked for yet (its weights aaaaaaaa=100 bbbbbbbb=0, asked aaaaaaaa=100)"},
		},
		"a backendRef to a Service that is no cohort's is left out of Weights": {
			t: one, o: observe(asked(func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].BackendRefs[1].Name = "llm-frontend-elsewhere" }), gw("ns", "public")),
			want: traffic.Effect{Serving: true, Weights: map[string]int32{"aaaaaaaa": 90},
				Message: "HTTPRoute ns/llm-frontend does not route the split asked for yet (its weights aaaaaaaa=90, asked aaaaaaaa=90 bbbbbbbb=10)"},
		},
		"a parent missing from status": {
			t: one, o: observe(observedRoute(one, 3), gw("ns", "public")),
			want: traffic.Effect{Message: route + "parent Gateway ns/public has not accepted it (no status entry)"},
		},
		"Accepted for an older generation": {
			t: one, o: observe(observedRoute(one, 4, accepted(public, 3)), gw("ns", "public")),
			want: traffic.Effect{Serving: true, Message: route + lagsAt +
				"Accepted True is for generation 3, the route is at 4 (not judged yet), ResolvedRefs True is for generation 3, the route is at 4 (not judged yet)"},
		},
		"ResolvedRefs False with its reason": {
			t: one, o: observe(observedRoute(one, 3, entry(defaultedParentRef(public), testController,
				cond("Accepted", "True", "Accepted", 3), cond("ResolvedRefs", "False", "BackendNotFound", 3))), gw("ns", "public")),
			want: traffic.Effect{Serving: true, Message: route + lagsAt + "ResolvedRefs False (BackendNotFound: BackendNotFound message)"},
		},
		"Accepted False: not serving": {
			t: one, o: observe(observedRoute(one, 3, entry(defaultedParentRef(public), testController,
				cond("Accepted", "False", "NotAllowedByListeners", 3), cond("ResolvedRefs", "True", "ResolvedRefs", 3))), gw("ns", "public")),
			want: traffic.Effect{Message: route + lagsAt + "Accepted False (NotAllowedByListeners: NotAllowedByListeners message)"},
		},
		"only Accepted written": {
			t: one, o: observe(observedRoute(one, 3, entry(defaultedParentRef(public), testController,
				cond("Accepted", "True", "Accepted", 3))), gw("ns", "public")),
			want: traffic.Effect{Serving: true, Message: route + lagsAt + "no ResolvedRefs condition"},
		},
		"PartiallyInvalid True (a rule dropped)": {
			t: one, o: observe(observedRoute(one, 3, func() gatewayv1.RouteParentStatus {
				e := accepted(public, 3)
				e.Conditions = append(e.Conditions, cond("PartiallyInvalid", "True", "UnsupportedValue", 3))
				return e
			}()), gw("ns", "public")),
			want: traffic.Effect{Serving: true, Message: route + lagsAt + "PartiallyInvalid True (UnsupportedValue: UnsupportedValue message)"},
		},
		"a second parentRef not yet accepted": {
			t: two, o: observe(observedRoute(two, 3, accepted(public, 3)), gw("ns", "public"), gw("infra", "edge")),
			want: traffic.Effect{Serving: true, Message: route + "parent Gateway infra/edge/http has not accepted it (no status entry)"},
		},
		"both parentRefs accepted": {
			t: two, o: observe(observedRoute(two, 3, accepted(public, 3), accepted(infra, 3)), gw("ns", "public"), gw("infra", "edge")),
			want: inEffect,
		},
		"an entry for another section of the parent does not count": {
			t: two, o: observe(observedRoute(two, 3, accepted(public, 3), func() gatewayv1.RouteParentStatus {
				e := accepted(infra, 3)
				e.ParentRef.SectionName = ptr.To(gatewayv1.SectionName("https"))
				return e
			}()), gw("ns", "public"), gw("infra", "edge")),
			want: traffic.Effect{Serving: true, Message: route + "parent Gateway infra/edge/http has not accepted it (no status entry)"},
		},
		"another controller's entry for a parent not named is ignored": {
			t: one, o: observe(observedRoute(one, 3,
				entry(gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Name: "mesh"}, "example.com/mesh",
					cond("Accepted", "False", "NoMatchingParent", 1)),
				accepted(public, 3)), gw("ns", "public")),
			want: inEffect,
		},
		"another controller's False entry for the same parent, ours True": {
			t: one, o: observe(observedRoute(one, 3,
				entry(defaultedParentRef(public), "example.com/other", cond("Accepted", "False", "NotAllowedByListeners", 2)),
				accepted(public, 3)), gw("ns", "public")),
			want: inEffect,
		},
		"the parent Gateway not found": {
			t: two, o: observe(observedRoute(two, 3, accepted(public, 3)), gw("ns", "public")),
			want: traffic.Effect{Serving: true, Message: route + "Gateway infra/edge not found",
				Unservable: "Gateway infra/edge (spec.rollout.trafficRouting.gatewayAPI.parentRefs[1]) not found"},
		},
		"a Gateway of the name in another namespace is not the parent": {
			t: two, o: observe(observedRoute(two, 3, accepted(public, 3), accepted(infra, 3)), gw("ns", "public"), gw("ns", "edge")),
			want: traffic.Effect{Serving: true, Message: route + "Gateway infra/edge not found",
				Unservable: "Gateway infra/edge (spec.rollout.trafficRouting.gatewayAPI.parentRefs[1]) not found"},
		},
		"a stale entry of a deleted Gateway does not serve": {
			t: one, o: observe(observedRoute(one, 3, accepted(public, 3))),
			want: traffic.Effect{Message: route + "Gateway ns/public not found",
				Unservable: "Gateway ns/public (spec.rollout.trafficRouting.gatewayAPI.parentRefs[0]) not found"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Provider{}.Effect(tc.t, tc.o)); diff != "" {
				t.Errorf("Effect (-want +got):\n%s", diff)
			}
		})
	}
}

// A controller may key Gateways of other namespaces otherwise than Key("Gateway",
// name): Effect finds them by namespace and name whatever their key.
func TestEffectFindsGatewaysUnderAnyKey(t *testing.T) {
	a := gatewayv1.ParentReference{Namespace: ptr.To(gatewayv1.Namespace("a")), Name: "edge"}
	b := gatewayv1.ParentReference{Namespace: ptr.To(gatewayv1.Namespace("b")), Name: "edge"}
	tr := newTraffic().cohort("aaaaaaaa", 100).parents(a, b).get()
	o := traffic.Observed{Objects: map[string]client.Object{
		traffic.Key("HTTPRoute", "llm-frontend"): observedRoute(tr, 1, accepted(a, 1), accepted(b, 1)),
		"Gateway/a/edge":                         gw("a", "edge"),
		"Gateway/b/edge":                         gw("b", "edge"),
	}}
	if e := (Provider{}).Effect(tr, o); !e.InEffect {
		t.Errorf("Effect = %+v, want in effect", e)
	}
}

// cohortOf maps only Services named as backends.CohortServiceName names the DGD's
// frontend's cohorts, however the names are capped.
func TestCohortOf(t *testing.T) {
	tr := newTraffic().get()
	tr.DGD.Name, tr.Frontend = "a-very-long-dgd-name-that-goes-on-and-on", "VeryLongFrontendName"
	svc := func(name string) gatewayv1.HTTPBackendRef {
		return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name)}}}
	}
	capped := backends.CohortServiceName(tr.DGD.Name, tr.Frontend, "aaaaaaaa")
	other := backends.CohortServiceName("another", tr.Frontend, "aaaaaaaa")
	cases := map[string]struct {
		ref  gatewayv1.HTTPBackendRef
		hash string
		ok   bool
	}{
		"a capped cohort Service":       {ref: svc(capped), hash: "aaaaaaaa", ok: true},
		"another DGD's cohort Service":  {ref: svc(other), ok: false},
		"a Service of no cohort":        {ref: svc("llm-frontend"), ok: false},
		"a name ending in -cohort only": {ref: svc("-cohort"), ok: false},
		"a cohort Service in another namespace": {ref: func() gatewayv1.HTTPBackendRef {
			b := svc(capped)
			b.Namespace = ptr.To(gatewayv1.Namespace("elsewhere"))
			return b
		}(), ok: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hash, ok := cohortOf(tc.ref, "ns", tr)
			if ok != tc.ok || (ok && hash != tc.hash) {
				t.Errorf("cohortOf = %q, %v; want %q, %v", hash, ok, tc.hash, tc.ok)
			}
		})
	}
}

func TestComparer(t *testing.T) {
	r, err := Route(newTraffic().cohort("aaaaaaaa", 100).get())
	if err != nil {
		t.Fatal(err)
	}
	if same, ok := (Provider{}).Same(gateway.StripDefaults(r), r); !same || !ok {
		t.Errorf("Same(route without defaults, route) = %v, %v; want true, true", same, ok)
	}
	if _, ok := (Provider{}).Same(&corev1.ConfigMap{}, &corev1.ConfigMap{}); ok {
		t.Errorf("Same of ConfigMaps is ok; want ok false (not an object it knows)")
	}
}
