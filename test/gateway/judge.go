package gateway

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// World is what the controller reads to judge a route: the Gateways, GatewayClasses,
// Services, ReferenceGrants and namespace labels of the namespaces it watches.
type World struct {
	Gateways        map[types.NamespacedName]*gatewayv1.Gateway
	Classes         map[string]*gatewayv1.GatewayClass
	Services        map[types.NamespacedName]bool
	Grants          []gatewayv1.ReferenceGrant
	NamespaceLabels map[string]map[string]string
}

// Judge returns route's status.parents as a Gateway controller named controller
// writes them: every other controller's entry as it is and where it is (RouteStatus
// .Parents: "Implementations MUST NOT update entries with non-matching
// controllerName"), its own entry for each parentRef naming a Gateway of one of its
// GatewayClasses (judged for route's generation, conditions merged into the entry's
// earlier ones so that lastTransitionTime moves only when a status does: now), and
// no entry for any other parentRef, a Gateway that does not exist among them
// ("parent references that cannot be resolved by an implementation of this API will
// not be added to this list"). Its entries for parents no longer named are dropped
// (ControllerName: "entries ... cleaned up when they are no longer necessary").
func Judge(route *gatewayv1.HTTPRoute, w World, controller gatewayv1.GatewayController, now time.Time) []gatewayv1.RouteParentStatus {
	mine := map[int]gatewayv1.RouteParentStatus{} // by index of parentRef
	for i, ref := range route.Spec.ParentRefs {
		gw := w.ownGateway(ref, route.Namespace, controller)
		if gw == nil {
			continue
		}
		var conds []metav1.Condition
		for _, st := range route.Status.Parents {
			if st.ControllerName == controller && sameParent(st.ParentRef, ref, route.Namespace) {
				conds = append(conds, st.Conditions...)
			}
		}
		for _, c := range []metav1.Condition{accepted(route, ref, gw, w), resolvedRefs(route, w)} {
			c.ObservedGeneration, c.LastTransitionTime = route.Generation, metav1.NewTime(now)
			meta.SetStatusCondition(&conds, c) // keeps lastTransitionTime if the status is unchanged
		}
		mine[i] = gatewayv1.RouteParentStatus{ParentRef: *ref.DeepCopy(), ControllerName: controller, Conditions: conds}
	}
	var out []gatewayv1.RouteParentStatus
	written := map[int]bool{}
	for _, st := range route.Status.Parents {
		if st.ControllerName != controller {
			out = append(out, st)
			continue
		}
		for i, m := range mine {
			if !written[i] && sameParent(st.ParentRef, route.Spec.ParentRefs[i], route.Namespace) {
				out, written[i] = append(out, m), true
			}
		}
	}
	for i := range route.Spec.ParentRefs {
		if m, ok := mine[i]; ok && !written[i] {
			out = append(out, m)
		}
	}
	return out
}

// ownGateway is the Gateway ref names when it exists and its GatewayClass's
// controllerName is controller (GatewayClassSpec.ControllerName), else nil.
func (w World) ownGateway(ref gatewayv1.ParentReference, routeNS string, controller gatewayv1.GatewayController) *gatewayv1.Gateway {
	if ptr.Deref(ref.Group, gatewayv1.GroupName) != gatewayv1.GroupName || ptr.Deref(ref.Kind, "Gateway") != "Gateway" {
		return nil
	}
	gw := w.Gateways[types.NamespacedName{Namespace: namespaceOf(ref.Namespace, routeNS), Name: string(ref.Name)}]
	if gw == nil {
		return nil
	}
	if class := w.Classes[string(gw.Spec.GatewayClassName)]; class == nil || class.Spec.ControllerName != controller {
		return nil
	}
	return gw
}

// accepted is the Accepted condition of route at gw for ref: the listeners ref
// selects (sectionName and port, both when both are set: ParentReference
// .SectionName, .Port), of those the ones whose allowedRoutes admit an HTTPRoute of
// the route's namespace (Listener.AllowedRoutes; HTTP and HTTPS listeners carry
// HTTPRoutes: Gateway.Spec.Listeners' core combinations), of those the ones whose
// hostname intersects the route's (HTTPRouteSpec.Hostnames). The reasons are
// shared_types.go's RouteReason*.
func accepted(route *gatewayv1.HTTPRoute, ref gatewayv1.ParentReference, gw *gatewayv1.Gateway, w World) metav1.Condition {
	gwName := gw.Namespace + "/" + gw.Name
	var selected, allowed, hosted []string
	for _, l := range gw.Spec.Listeners {
		if (ref.SectionName != nil && *ref.SectionName != "" && *ref.SectionName != l.Name) || (ref.Port != nil && *ref.Port != 0 && *ref.Port != l.Port) {
			continue
		}
		selected = append(selected, string(l.Name))
		if !w.allows(l, gw.Namespace, route.Namespace) {
			continue
		}
		allowed = append(allowed, string(l.Name))
		if hostnamesIntersect(l.Hostname, route.Spec.Hostnames) {
			hosted = append(hosted, string(l.Name))
		}
	}
	switch {
	case len(selected) == 0:
		return condition(gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNoMatchingParent,
			fmt.Sprintf("Gateway %s has no listener %s", gwName, listenerSelector(ref)))
	case len(allowed) == 0:
		return condition(gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNotAllowedByListeners,
			fmt.Sprintf("no listener of Gateway %s (%s) admits HTTPRoutes of namespace %s", gwName, strings.Join(selected, ", "), route.Namespace))
	case len(hosted) == 0:
		return condition(gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNoMatchingListenerHostname,
			fmt.Sprintf("no listener of Gateway %s (%s) serves the route's hostnames", gwName, strings.Join(allowed, ", ")))
	}
	return condition(gatewayv1.RouteConditionAccepted, true, gatewayv1.RouteReasonAccepted,
		fmt.Sprintf("accepted by Gateway %s (listeners %s)", gwName, strings.Join(hosted, ", ")))
}

func listenerSelector(ref gatewayv1.ParentReference) string {
	var s []string
	if ref.SectionName != nil {
		s = append(s, "named "+string(*ref.SectionName))
	}
	if ref.Port != nil {
		s = append(s, fmt.Sprintf("on port %d", *ref.Port))
	}
	return strings.Join(s, " ")
}

// allows reports whether listener l of a Gateway in gwNS admits HTTPRoutes of
// routeNS: protocol HTTP or HTTPS, allowedRoutes.kinds empty or naming HTTPRoute
// (AllowedRoutes.Kinds), and allowedRoutes.namespaces.from Same (the default), All,
// or Selector matching the namespace's labels (RouteNamespaces.From).
func (w World) allows(l gatewayv1.Listener, gwNS, routeNS string) bool {
	if l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType {
		return false
	}
	if ar := l.AllowedRoutes; ar != nil && len(ar.Kinds) > 0 {
		ok := false
		for _, k := range ar.Kinds {
			ok = ok || (ptr.Deref(k.Group, gatewayv1.GroupName) == gatewayv1.GroupName && k.Kind == "HTTPRoute")
		}
		if !ok {
			return false
		}
	}
	from, selector := gatewayv1.NamespacesFromSame, (*metav1.LabelSelector)(nil)
	if l.AllowedRoutes != nil && l.AllowedRoutes.Namespaces != nil {
		from = ptr.Deref(l.AllowedRoutes.Namespaces.From, gatewayv1.NamespacesFromSame)
		selector = l.AllowedRoutes.Namespaces.Selector
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSame:
		return gwNS == routeNS
	case gatewayv1.NamespacesFromSelector:
		sel, err := metav1.LabelSelectorAsSelector(selector)
		return err == nil && selector != nil && sel.Matches(labels.Set(w.NamespaceLabels[routeNS]))
	}
	return false // None
}

// hostnamesIntersect reports whether some hostname matches both a listener's hostname
// (nil: every one) and one of the route's (none: every one). A wildcard `*.x` matches
// any name ending in `.x` with at least one more label (HTTPRouteSpec.Hostnames:
// listener `*.example.com` matches `test.example.com` and `foo.test.example.com`,
// not `example.com`).
func hostnamesIntersect(listener *gatewayv1.Hostname, route []gatewayv1.Hostname) bool {
	if listener == nil || *listener == "" || len(route) == 0 {
		return true
	}
	for _, h := range route {
		if patternsIntersect(string(*listener), string(h)) {
			return true
		}
	}
	return false
}

func patternsIntersect(a, b string) bool {
	wa, wb := strings.HasPrefix(a, "*."), strings.HasPrefix(b, "*.")
	switch {
	case !wa && !wb:
		return a == b
	case wa && !wb:
		return strings.HasSuffix(b, a[1:])
	case !wa && wb:
		return strings.HasSuffix(a, b[1:])
	}
	return strings.HasSuffix(a[1:], b[1:]) || strings.HasSuffix(b[1:], a[1:])
}
