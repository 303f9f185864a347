package gatewayapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/test/gateway"
)

func TestSame(t *testing.T) {
	tr := newTraffic().cohort("aaaaaaaa", 99).cohort("bbbbbbbb", 1).header("X-Canary", "yes", "bbbbbbbb").get()
	want, err := Route(tr)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(r *gatewayv1.HTTPRoute)) *gatewayv1.HTTPRoute {
		r := want.DeepCopy()
		f(r)
		return r
	}
	cases := map[string]struct {
		have *gatewayv1.HTTPRoute
		same bool
	}{
		"identical": {have: want.DeepCopy(), same: true},
		"every default left unset (weight 1 included)": {have: gateway.StripDefaults(want), same: true},
		"server metadata, a controller reference, others' labels and status": {have: edit(func(r *gatewayv1.HTTPRoute) {
			r.ResourceVersion, r.Generation, r.UID = "7", 3, "u"
			r.OwnerReferences = []metav1.OwnerReference{{Name: "llm", Controller: ptr.To(true)}}
			r.Labels["team"] = "a"
			r.Annotations = map[string]string{"note": "x"}
			r.Status.Parents = []gatewayv1.RouteParentStatus{accepted(want.Spec.ParentRefs[0], 3)}
		}), same: true},
		"header name in another case": {have: edit(func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches[0].Headers[0].Name = "x-canary"
		}), same: true},
		"a weight changed": {have: edit(func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[1].BackendRefs[1].Weight = ptr.To(int32(2))
		}), same: false},
		"the header value in another case": {have: edit(func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[0].Matches[0].Headers[0].Value = "YES"
		}), same: false},
		"the header rule missing": {have: edit(func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules = r.Spec.Rules[1:]
		}), same: false},
		"a filter added": {have: edit(func(r *gatewayv1.HTTPRoute) {
			r.Spec.Rules[1].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier}}
		}), same: false},
		"a parentRef namespace set": {have: edit(func(r *gatewayv1.HTTPRoute) {
			r.Spec.ParentRefs[0].Namespace = ptr.To(gatewayv1.Namespace("infra"))
		}), same: false},
		"a label rendered missing": {have: edit(func(r *gatewayv1.HTTPRoute) {
			delete(r.Labels, "app.kubernetes.io/managed-by")
		}), same: false},
		"a label rendered changed": {have: edit(func(r *gatewayv1.HTTPRoute) {
			r.Labels["nvidia.com/dynamo-graph-deployment-name"] = "other"
		}), same: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Same(tc.have, want); got != tc.same {
				t.Errorf("Same = %v, want %v", got, tc.same)
			}
		})
	}
}

// Empty lists and unset ones are one to the API server (omitempty); an unset weight
// is 1, not 0.
func TestSameListsAndWeights(t *testing.T) {
	tr := newTraffic().cohort("aaaaaaaa", 0).cohort("bbbbbbbb", 100).get()
	tr.Spec.GatewayAPI.Hostnames = nil
	want, err := Route(tr)
	if err != nil {
		t.Fatal(err)
	}
	empty := want.DeepCopy()
	empty.Spec.Hostnames = []gatewayv1.Hostname{}
	if !Same(empty, want) {
		t.Errorf("hostnames [] is not Same as none")
	}
	unset := want.DeepCopy()
	unset.Spec.Rules[0].BackendRefs[0].Weight = nil
	if Same(unset, want) {
		t.Errorf("an unset weight (1) is Same as weight 0")
	}
}

// A route without rules is read back with the CRD's default rule: one path match
// PathPrefix "/" and no backend.
func TestSameDefaultRule(t *testing.T) {
	bare := &gatewayv1.HTTPRoute{}
	defaulted := &gatewayv1.HTTPRoute{Spec: gatewayv1.HTTPRouteSpec{Rules: []gatewayv1.HTTPRouteRule{{
		Matches: []gatewayv1.HTTPRouteMatch{{Path: rootPath}},
	}}}}
	if !Same(defaulted, bare) || !Same(bare, defaulted) {
		t.Errorf("a route without rules is not Same as the CRD's default rule")
	}
	if Same(nil, bare) || !Same(nil, nil) {
		t.Errorf("Same with nil")
	}
}

func TestSameParent(t *testing.T) {
	ns := func(s string) *gatewayv1.Namespace { return ptr.To(gatewayv1.Namespace(s)) }
	sec := func(s string) *gatewayv1.SectionName { return ptr.To(gatewayv1.SectionName(s)) }
	full := gatewayv1.ParentReference{Group: ptr.To(GatewayGroup), Kind: ptr.To(GatewayKind), Namespace: ns("ns"), Name: "public"}
	cases := map[string]struct {
		a, b gatewayv1.ParentReference
		same bool
	}{
		"defaults unset, namespace the route's":  {a: gatewayv1.ParentReference{Name: "public"}, b: full, same: true},
		"an empty namespace is the route's":      {a: gatewayv1.ParentReference{Name: "public", Namespace: ns("")}, b: full, same: true},
		"another namespace":                      {a: gatewayv1.ParentReference{Name: "public", Namespace: ns("infra")}, b: full, same: false},
		"another name":                           {a: gatewayv1.ParentReference{Name: "private"}, b: full, same: false},
		"a sectionName against none":             {a: gatewayv1.ParentReference{Name: "public", SectionName: sec("http")}, b: full, same: false},
		"the same sectionName":                   {a: gatewayv1.ParentReference{Name: "public", SectionName: sec("http")}, b: gatewayv1.ParentReference{Name: "public", SectionName: sec("http")}, same: true},
		"another port":                           {a: gatewayv1.ParentReference{Name: "public", Port: ptr.To(int32(80))}, b: full, same: false},
		"another kind (a mesh Service)":          {a: gatewayv1.ParentReference{Name: "public", Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service"))}, b: full, same: false},
		"an empty sectionName is none":           {a: gatewayv1.ParentReference{Name: "public", SectionName: sec("")}, b: full, same: true},
		"another group, kind Gateway unchanged":  {a: gatewayv1.ParentReference{Name: "public", Group: ptr.To(gatewayv1.Group("example.com"))}, b: full, same: false},
		"the route's namespace named, and unset": {a: gatewayv1.ParentReference{Name: "public", Namespace: ns("ns")}, b: gatewayv1.ParentReference{Name: "public"}, same: true},
		"explicit defaults against unset ones":   {a: full, b: gatewayv1.ParentReference{Name: "public"}, same: true},
		"the same port":                          {a: gatewayv1.ParentReference{Name: "public", Port: ptr.To(int32(80))}, b: gatewayv1.ParentReference{Name: "public", Port: ptr.To(int32(80))}, same: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SameParent(tc.a, tc.b, "ns"); got != tc.same {
				t.Errorf("SameParent = %v, want %v", got, tc.same)
			}
		})
	}
}
