package gatewayapi

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Same reports whether the route have (as the cluster holds it) routes as want (as
// rendered): the labels want sets have the same values in have, and both specs are
// equal once every default the API server fills in is filled in both and header
// names are compared without case. It ignores the rest of the metadata and status
// (the package doc lists what and why). Worked example: a route created with
// backendRef {name: a, port: 8000} is read back as {group: "", kind: Service,
// name: a, port: 8000, weight: 1}; Same holds between the two, not with weight 2.
func Same(have, want *gatewayv1.HTTPRoute) bool {
	if have == nil || want == nil {
		return have == want
	}
	for k, v := range want.Labels {
		if got, ok := have.Labels[k]; !ok || got != v {
			return false
		}
	}
	// Semantic.DeepEqual takes a nil slice and an empty one as equal, as the API
	// server's JSON (omitempty) does.
	return equality.Semantic.DeepEqual(defaulted(have.Spec), defaulted(want.Spec))
}

// defaulted is a copy of spec with the CRD's defaults (apis/v1 at v1.6.3,
// +kubebuilder:default) filled in on every field this provider renders, and header
// names in lower case (HTTPHeaderMatch.Name: "Name matching MUST be
// case-insensitive").
func defaulted(spec gatewayv1.HTTPRouteSpec) gatewayv1.HTTPRouteSpec {
	s := *spec.DeepCopy()
	for i := range s.ParentRefs {
		s.ParentRefs[i] = defaultedParentRef(s.ParentRefs[i])
	}
	// HTTPRouteSpec.Rules: +kubebuilder:default={{matches: {{path: {type: "PathPrefix", value: "/"}}}}}
	if len(s.Rules) == 0 {
		s.Rules = []gatewayv1.HTTPRouteRule{{}}
	}
	for i := range s.Rules {
		r := &s.Rules[i]
		// HTTPRouteRule.Matches: +kubebuilder:default={{path:{ type: "PathPrefix", value: "/"}}}
		if len(r.Matches) == 0 {
			r.Matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		for j := range r.Matches {
			defaultMatch(&r.Matches[j])
		}
		for j := range r.BackendRefs {
			b := &r.BackendRefs[j].BackendRef
			// BackendObjectReference.Group default "", Kind default Service;
			// BackendRef.Weight default 1.
			b.Group = ptr.To(ptr.Deref(b.Group, ""))
			b.Kind = ptr.To(ptr.Deref(b.Kind, ServiceKind))
			b.Weight = ptr.To(ptr.Deref(b.Weight, 1))
		}
	}
	return s
}

// defaultMatch fills an HTTPRouteMatch's defaults: path {type: PathPrefix, value: /}
// (HTTPRouteMatch.Path, HTTPPathMatch.Type and .Value), header and query match type
// Exact (HTTPHeaderMatch.Type, HTTPQueryParamMatch.Type).
func defaultMatch(m *gatewayv1.HTTPRouteMatch) {
	if m.Path == nil {
		m.Path = &gatewayv1.HTTPPathMatch{}
	}
	m.Path.Type = ptr.To(ptr.Deref(m.Path.Type, gatewayv1.PathMatchPathPrefix))
	m.Path.Value = ptr.To(ptr.Deref(m.Path.Value, "/"))
	for k := range m.Headers {
		h := &m.Headers[k]
		h.Type = ptr.To(ptr.Deref(h.Type, gatewayv1.HeaderMatchExact))
		h.Name = gatewayv1.HTTPHeaderName(strings.ToLower(string(h.Name)))
	}
	for k := range m.QueryParams {
		q := &m.QueryParams[k]
		q.Type = ptr.To(ptr.Deref(q.Type, gatewayv1.QueryParamMatchExact))
	}
}

// defaultedParentRef is ref with the CRD's defaults: group gateway.networking.k8s.io
// and kind Gateway (ParentReference.Group, .Kind). Namespace has no default in the
// CRD (unset means the route's namespace) and is left as it is.
func defaultedParentRef(ref gatewayv1.ParentReference) gatewayv1.ParentReference {
	out := *ref.DeepCopy()
	out.Group = ptr.To(ptr.Deref(ref.Group, GatewayGroup))
	out.Kind = ptr.To(ptr.Deref(ref.Kind, GatewayKind))
	return out
}

// SameParent reports whether two parentRefs name the same parent (and the same part
// of it), as the Gateway API defines their identity: group, kind, namespace and name,
// with group and kind defaulted and an unset or empty namespace the route's (routeNS), plus
// sectionName and port, unset being "" and 0 (CommonRouteSpec.ParentRefs: "the
// multi-part key defined by group, kind, namespace, and name"; RouteStatus.Parents:
// status "namespaced by the combination of the parentRef and controllerName").
func SameParent(a, b gatewayv1.ParentReference, routeNS string) bool {
	da, db := defaultedParentRef(a), defaultedParentRef(b)
	return *da.Group == *db.Group && *da.Kind == *db.Kind && da.Name == db.Name &&
		namespaceOf(a, routeNS) == namespaceOf(b, routeNS) &&
		ptr.Deref(a.SectionName, "") == ptr.Deref(b.SectionName, "") &&
		ptr.Deref(a.Port, 0) == ptr.Deref(b.Port, 0)
}

// gatewayOf is the namespace and name of the Gateway ref names, false when ref names
// a parent of another kind.
func gatewayOf(ref gatewayv1.ParentReference, routeNS string) (ns, name string, ok bool) {
	d := defaultedParentRef(ref)
	if *d.Group != GatewayGroup || *d.Kind != GatewayKind {
		return "", "", false
	}
	return namespaceOf(ref, routeNS), string(ref.Name), true
}

// namespaceOf is the namespace ref names: the route's when unset or "" (the CRD's
// own rules take both as the local namespace: ParentRefs' XValidation).
func namespaceOf(ref gatewayv1.ParentReference, routeNS string) string {
	if ref.Namespace == nil || *ref.Namespace == "" {
		return routeNS
	}
	return string(*ref.Namespace)
}
