package gateway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const me = gatewayv1.GatewayController("example.com/test-gateway")

var (
	t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

// world has class "test" (ours) and "theirs", Gateway gw/public of ours with an HTTP
// listener "http" on 80 admitting every namespace, Gateway gw/foreign of theirs,
// Services app/a and other/b, namespaces app (team=a) and other.
func world() World {
	w := World{
		Gateways: map[types.NamespacedName]*gatewayv1.Gateway{}, Classes: map[string]*gatewayv1.GatewayClass{},
		Services:        map[types.NamespacedName]bool{{Namespace: "app", Name: "a"}: true, {Namespace: "other", Name: "b"}: true},
		NamespaceLabels: map[string]map[string]string{"app": {"team": "a"}, "other": nil},
	}
	w.Classes["test"], w.Classes["theirs"] = GatewayClass("test", me), GatewayClass("theirs", "example.com/other")
	w.add(Gateway("gw", "public", "test", HTTPListener("http", 80, gatewayv1.NamespacesFromAll)))
	w.add(Gateway("gw", "foreign", "theirs", HTTPListener("http", 80, gatewayv1.NamespacesFromAll)))
	return w
}

func (w World) add(g *gatewayv1.Gateway) {
	w.Gateways[types.NamespacedName{Namespace: g.Namespace, Name: g.Name}] = g
}

func parentRef(name string) gatewayv1.ParentReference {
	return gatewayv1.ParentReference{Namespace: ptr.To(gatewayv1.Namespace("gw")), Name: gatewayv1.ObjectName(name)}
}

// httpRoute is route app/r at generation gen to Service a:8000, parented to refs.
func httpRoute(gen int64, refs ...gatewayv1.ParentReference) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "r", Generation: gen},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: refs},
			Rules:           []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "a")}}},
		},
	}
}

func backend(ns, name string) gatewayv1.HTTPBackendRef {
	b := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(name), Port: ptr.To(int32(8000)),
	}}}
	if ns != "" {
		b.Namespace = ptr.To(gatewayv1.Namespace(ns))
	}
	return b
}

// reasons is a status as "Accepted=True/Accepted ResolvedRefs=..." per entry, for
// cases that check reasons only.
func reasons(parents []gatewayv1.RouteParentStatus) map[string]string {
	out := map[string]string{}
	for _, p := range parents {
		s := string(p.ControllerName) + " "
		for _, c := range p.Conditions {
			s += c.Type + "=" + string(c.Status) + "/" + c.Reason + " "
		}
		out[string(p.ParentRef.Name)+"/"+string(ptr.Deref(p.ParentRef.SectionName, ""))] = s
	}
	return out
}

func TestJudgeReasons(t *testing.T) {
	ok := string(me) + " Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs "
	cases := map[string]struct {
		route *gatewayv1.HTTPRoute
		world func(w *World)
		want  map[string]string
	}{
		"accepted, refs resolved": {route: httpRoute(1, parentRef("public")), want: map[string]string{"public/": ok}},
		"a sectionName no listener has": {
			route: httpRoute(1, func() gatewayv1.ParentReference {
				r := parentRef("public")
				r.SectionName = ptr.To(gatewayv1.SectionName("https"))
				return r
			}()),
			want: map[string]string{"public/https": string(me) + " Accepted=False/NoMatchingParent ResolvedRefs=True/ResolvedRefs "},
		},
		"a port no listener has": {
			route: httpRoute(1, func() gatewayv1.ParentReference { r := parentRef("public"); r.Port = ptr.To(int32(443)); return r }()),
			want:  map[string]string{"public/": string(me) + " Accepted=False/NoMatchingParent ResolvedRefs=True/ResolvedRefs "},
		},
		"allowedRoutes Same refuses another namespace": {
			route: httpRoute(1, parentRef("public")),
			world: func(w *World) { w.add(Gateway("gw", "public", "test", HTTPListener("http", 80, ""))) },
			want:  map[string]string{"public/": string(me) + " Accepted=False/NotAllowedByListeners ResolvedRefs=True/ResolvedRefs "},
		},
		"allowedRoutes Selector admits a namespace by its labels": {
			route: httpRoute(1, parentRef("public")),
			world: func(w *World) {
				l := HTTPListener("http", 80, gatewayv1.NamespacesFromSelector)
				l.AllowedRoutes.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
				w.add(Gateway("gw", "public", "test", l))
			},
			want: map[string]string{"public/": ok},
		},
		"allowedRoutes kinds without HTTPRoute": {
			route: httpRoute(1, parentRef("public")),
			world: func(w *World) {
				l := HTTPListener("http", 80, gatewayv1.NamespacesFromAll)
				l.AllowedRoutes.Kinds = []gatewayv1.RouteGroupKind{{Kind: "GRPCRoute"}}
				w.add(Gateway("gw", "public", "test", l))
			},
			want: map[string]string{"public/": string(me) + " Accepted=False/NotAllowedByListeners ResolvedRefs=True/ResolvedRefs "},
		},
		"a listener hostname the route's do not intersect": {
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(1, parentRef("public"))
				r.Spec.Hostnames = []gatewayv1.Hostname{"example.com"}
				return r
			}(),
			world: func(w *World) {
				l := HTTPListener("http", 80, gatewayv1.NamespacesFromAll)
				l.Hostname = ptr.To(gatewayv1.Hostname("*.example.com"))
				w.add(Gateway("gw", "public", "test", l))
			},
			want: map[string]string{"public/": string(me) + " Accepted=False/NoMatchingListenerHostname ResolvedRefs=True/ResolvedRefs "},
		},
		"a Service that does not exist": {
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(1, parentRef("public"))
				r.Spec.Rules[0].BackendRefs = append(r.Spec.Rules[0].BackendRefs, backend("", "gone"))
				return r
			}(),
			want: map[string]string{"public/": string(me) + " Accepted=True/Accepted ResolvedRefs=False/BackendNotFound "},
		},
		"a Service of another namespace without a ReferenceGrant": {
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(1, parentRef("public"))
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{backend("other", "b")}
				return r
			}(),
			want: map[string]string{"public/": string(me) + " Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted "},
		},
		"a Service of another namespace with a ReferenceGrant for another Service": {
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(1, parentRef("public"))
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{backend("other", "b")}
				return r
			}(),
			world: func(w *World) { w.grant("c") },
			want:  map[string]string{"public/": string(me) + " Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted "},
		},
		"a Service of another namespace with a ReferenceGrant": {
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(1, parentRef("public"))
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{backend("other", "b")}
				return r
			}(),
			world: func(w *World) { w.grant("b") },
			want:  map[string]string{"public/": ok},
		},
		"a backendRef of another kind": {
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(1, parentRef("public"))
				r.Spec.Rules[0].BackendRefs[0].Kind = ptr.To(gatewayv1.Kind("ConfigMap"))
				return r
			}(),
			want: map[string]string{"public/": string(me) + " Accepted=True/Accepted ResolvedRefs=False/InvalidKind "},
		},
		"a Gateway that does not exist gets no entry": {route: httpRoute(1, parentRef("public"), parentRef("nowhere")), want: map[string]string{"public/": ok}},
		"a Gateway of another controller's class gets no entry": {
			route: httpRoute(1, parentRef("public"), parentRef("foreign")), want: map[string]string{"public/": ok},
		},
		"a mesh Service parent gets no entry": {
			route: httpRoute(1, gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Name: "a"}),
			want:  map[string]string{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := world()
			if tc.world != nil {
				tc.world(&w)
			}
			if diff := cmp.Diff(tc.want, reasons(Judge(tc.route, w, me, t0))); diff != "" {
				t.Errorf("status.parents (-want +got):\n%s", diff)
			}
		})
	}
}

// grant admits HTTPRoutes of app to Service other/name.
func (w *World) grant(name string) {
	w.Grants = append(w.Grants, gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "g-" + name},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "app"}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service", Name: ptr.To(gatewayv1.ObjectName(name))}},
		},
	})
}

func TestJudgeKeepsOthersAndTransitions(t *testing.T) {
	theirs := gatewayv1.RouteParentStatus{ParentRef: parentRef("foreign"), ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: "False", Reason: "Pending", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0)}}}
	w := world()
	first := httpRoute(1, parentRef("public"))
	first.Status.Parents = []gatewayv1.RouteParentStatus{theirs}
	got := Judge(first, w, me, t0)
	want := []gatewayv1.RouteParentStatus{theirs, {ParentRef: parentRef("public"), ControllerName: me, Conditions: []metav1.Condition{
		{Type: "Accepted", Status: "True", Reason: "Accepted", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0)},
		{Type: "ResolvedRefs", Status: "True", Reason: "ResolvedRefs", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0)},
	}}}
	ignoreMessages := cmpopts.IgnoreFields(metav1.Condition{}, "Message")
	if diff := cmp.Diff(want, got, ignoreMessages); diff != "" {
		t.Fatalf("first judgement (-want +got):\n%s", diff)
	}

	// Generation 2 drops a Service: ResolvedRefs turns False at t1, Accepted stays
	// True since t0; the other controller's entry stays first, as it was.
	second := httpRoute(2, parentRef("public"))
	second.Spec.Rules[0].BackendRefs[0].Name = "gone"
	second.Status.Parents = got
	got = Judge(second, w, me, t1)
	want[1].Conditions = []metav1.Condition{
		{Type: "Accepted", Status: "True", Reason: "Accepted", ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(t0)},
		{Type: "ResolvedRefs", Status: "False", Reason: "BackendNotFound", ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(t1)},
	}
	if diff := cmp.Diff(want, got, ignoreMessages); diff != "" {
		t.Errorf("second judgement (-want +got):\n%s", diff)
	}

	// The parentRef removed: its entry of ours goes, theirs stays.
	third := httpRoute(3)
	third.Status.Parents = got
	if diff := cmp.Diff([]gatewayv1.RouteParentStatus{theirs}, Judge(third, w, me, t1)); diff != "" {
		t.Errorf("after the parentRef's removal (-want +got):\n%s", diff)
	}
}

func TestHostnamesIntersect(t *testing.T) {
	cases := map[string]struct {
		listener string
		route    []gatewayv1.Hostname
		want     bool
	}{
		"no listener hostname":                     {listener: "", route: []gatewayv1.Hostname{"a.example.com"}, want: true},
		"no route hostname":                        {listener: "a.example.com", want: true},
		"equal":                                    {listener: "a.example.com", route: []gatewayv1.Hostname{"a.example.com"}, want: true},
		"exact listener, wildcard route":           {listener: "test.example.com", route: []gatewayv1.Hostname{"*.example.com"}, want: true},
		"wildcard listener, deeper name":           {listener: "*.example.com", route: []gatewayv1.Hostname{"foo.test.example.com"}, want: true},
		"wildcard listener, the bare domain":       {listener: "*.example.com", route: []gatewayv1.Hostname{"example.com"}, want: false},
		"wildcard listener, another domain":        {listener: "*.example.com", route: []gatewayv1.Hostname{"test.example.net"}, want: false},
		"two wildcards, one deeper":                {listener: "*.example.com", route: []gatewayv1.Hostname{"*.a.example.com"}, want: true},
		"one of several route hostnames":           {listener: "*.example.com", route: []gatewayv1.Hostname{"x.example.net", "x.example.com"}, want: true},
		"exact names that differ":                  {listener: "a.example.com", route: []gatewayv1.Hostname{"b.example.com"}, want: false},
		"a suffix that is not a label boundary":    {listener: "*.example.com", route: []gatewayv1.Hostname{"badexample.com"}, want: false},
		"exact listener, wildcard of another name": {listener: "a.example.com", route: []gatewayv1.Hostname{"*.example.net"}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var l *gatewayv1.Hostname
			if tc.listener != "" {
				l = ptr.To(gatewayv1.Hostname(tc.listener))
			}
			if got := hostnamesIntersect(l, tc.route); got != tc.want {
				t.Errorf("hostnamesIntersect = %v, want %v", got, tc.want)
			}
		})
	}
}
