package gateway

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// resolvedRefs is the ResolvedRefs condition of route: False for the first backendRef
// (in rule order) that is not a core Service (InvalidKind), is in another namespace
// with no ReferenceGrant there admitting it (RefNotPermitted), or names a Service that
// does not exist (BackendNotFound), the cases HTTPBackendRef.BackendRef lists with
// these reasons (httproute_types.go); True (ResolvedRefs) otherwise.
func resolvedRefs(route *gatewayv1.HTTPRoute, w World) metav1.Condition {
	for i, rule := range route.Spec.Rules {
		for j, b := range rule.BackendRefs {
			group, kind := ptr.Deref(b.Group, ""), ptr.Deref(b.Kind, "Service")
			ns := namespaceOf(b.Namespace, route.Namespace)
			at := fmt.Sprintf("rules[%d].backendRefs[%d]", i, j)
			switch {
			case group != "" || kind != "Service":
				return condition(gatewayv1.RouteConditionResolvedRefs, false, gatewayv1.RouteReasonInvalidKind,
					fmt.Sprintf("%s: kind %s of group %q is not supported (only Services)", at, kind, group))
			case ns != route.Namespace && !w.granted(route.Namespace, ns, string(b.Name)):
				return condition(gatewayv1.RouteConditionResolvedRefs, false, gatewayv1.RouteReasonRefNotPermitted,
					fmt.Sprintf("%s: no ReferenceGrant in namespace %s admits HTTPRoutes of %s to Service %s", at, ns, route.Namespace, b.Name))
			case !w.Services[types.NamespacedName{Namespace: ns, Name: string(b.Name)}]:
				return condition(gatewayv1.RouteConditionResolvedRefs, false, gatewayv1.RouteReasonBackendNotFound,
					fmt.Sprintf("%s: Service %s/%s not found", at, ns, b.Name))
			}
		}
	}
	return condition(gatewayv1.RouteConditionResolvedRefs, true, gatewayv1.RouteReasonResolvedRefs, "all references resolved")
}

// granted reports whether a ReferenceGrant in namespace to admits HTTPRoutes of
// namespace from to Service name: one entry of From (group gateway.networking.k8s.io,
// kind HTTPRoute, that namespace) and one of To (group "", kind Service, no name or
// that name); entries combine with OR (ReferenceGrantSpec.From, .To; GEP-709).
func (w World) granted(from, to, name string) bool {
	for _, g := range w.Grants {
		if g.Namespace != to {
			continue
		}
		fromOK, toOK := false, false
		for _, f := range g.Spec.From {
			fromOK = fromOK || (f.Group == gatewayv1.GroupName && f.Kind == "HTTPRoute" && string(f.Namespace) == from)
		}
		for _, t := range g.Spec.To {
			toOK = toOK || (t.Group == "" && t.Kind == "Service" && (t.Name == nil || *t.Name == "" || string(*t.Name) == name))
		}
		if fromOK && toOK {
			return true
		}
	}
	return false
}

// sameParent reports whether two parentRefs name one parent: group and kind
// defaulted (gateway.networking.k8s.io, Gateway), the namespace the route's when
// unset or "", name, sectionName and port ("" and 0 when unset)
// (CommonRouteSpec.ParentRefs; RouteStatus.Parents). Written apart from
// traffic/gatewayapi.SameParent, which this controller checks.
func sameParent(a, b gatewayv1.ParentReference, routeNS string) bool {
	return ptr.Deref(a.Group, gatewayv1.GroupName) == ptr.Deref(b.Group, gatewayv1.GroupName) &&
		ptr.Deref(a.Kind, "Gateway") == ptr.Deref(b.Kind, "Gateway") &&
		namespaceOf(a.Namespace, routeNS) == namespaceOf(b.Namespace, routeNS) &&
		a.Name == b.Name &&
		ptr.Deref(a.SectionName, "") == ptr.Deref(b.SectionName, "") &&
		ptr.Deref(a.Port, 0) == ptr.Deref(b.Port, 0)
}

// namespaceOf is ns, or local when ns is unset or "".
func namespaceOf(ns *gatewayv1.Namespace, local string) string {
	if ns == nil || *ns == "" {
		return local
	}
	return string(*ns)
}

func condition(typ gatewayv1.RouteConditionType, ok bool, reason gatewayv1.RouteConditionReason, msg string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(typ), Status: status, Reason: string(reason), Message: msg}
}
