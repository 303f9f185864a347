package gatewayapi

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/traffic"
)

// Controlled reports whether route is controlled by dgd (its controller reference
// names the DGD's UID): the controller never updates a route it does not control, so
// a route someone else created under the name cannot carry the DGD's split.
func Controlled(route *gatewayv1.HTTPRoute, dgd *v1alpha1.DynamoGraphDeployment) bool {
	return route != nil && dgd != nil && metav1.IsControlledBy(route, dgd)
}

// Effect judges what of t is in effect from the observed route and Gateways (the
// package doc gives the rule and its sources). Its message names the route, each
// parent that lags and the condition that lags or is False.
func (Provider) Effect(t traffic.Traffic, o traffic.Observed) traffic.Effect {
	want, err := Route(t)
	if err != nil {
		return traffic.Effect{Message: err.Error()}
	}
	name := fmt.Sprintf("HTTPRoute %s/%s", want.Namespace, want.Name)
	have, _ := o.Objects[traffic.Key("HTTPRoute", want.Name)].(*gatewayv1.HTTPRoute)
	switch {
	case have == nil:
		return traffic.Effect{Message: name + " not found"}
	case !Controlled(have, t.DGD):
		return traffic.Effect{Message: fmt.Sprintf("%s is not controlled by DGD %s: another object's route holds the name", name, t.DGD.Name)}
	}
	var e traffic.Effect
	var lags []string
	if !Same(have, want) {
		lags = append(lags, fmt.Sprintf("%s does not route the split asked for yet (its weights %s, asked %s)",
			name, formatWeights(weights(have, t)), formatWeights(t.Weights())))
	}
	for _, ref := range want.Spec.ParentRefs {
		p := judgeParent(have, ref, o)
		e.Serving = e.Serving || p.serving
		if p.lag != "" {
			lags = append(lags, name+": "+p.lag)
		}
	}
	if len(lags) > 0 {
		e.Message = strings.Join(lags, "; ")
		return e
	}
	e.InEffect, e.Weights = true, weights(have, t)
	return e
}

// parent is one parentRef's judgement: serving when its entry accepted the route at
// some generation, lag what keeps the split from being in effect there ("" if none).
type parent struct {
	serving bool
	lag     string
}

// judgeParent judges one parentRef of route from status.parents. Entries of any
// controller that match the ref count; the parent is in effect when one of them has
// Accepted and ResolvedRefs True for the route's generation, and PartiallyInvalid not
// True.
func judgeParent(route *gatewayv1.HTTPRoute, ref gatewayv1.ParentReference, o traffic.Observed) parent {
	label := parentName(ref, route.Namespace)
	if ns, name, ok := gatewayOf(ref, route.Namespace); ok && findGateway(o, ns, name) == nil {
		return parent{lag: fmt.Sprintf("Gateway %s/%s not found", ns, name)}
	}
	var p parent
	for _, st := range route.Status.Parents {
		if !SameParent(st.ParentRef, ref, route.Namespace) {
			continue
		}
		p.serving = p.serving || meta.IsStatusConditionTrue(st.Conditions, string(gatewayv1.RouteConditionAccepted))
		lag := conditionsLag(st, route.Generation)
		if lag == "" {
			return parent{serving: true} // Accepted is True
		}
		if p.lag == "" {
			p.lag = fmt.Sprintf("parent %s (%s): %s", label, st.ControllerName, lag)
		}
	}
	if p.lag == "" {
		p.lag = fmt.Sprintf("parent %s has not accepted it (no status entry)", label)
	}
	return p
}

// conditionsLag says which of an entry's conditions keep the route's generation gen
// from being in effect there, "" when none does.
func conditionsLag(st gatewayv1.RouteParentStatus, gen int64) string {
	var out []string
	for _, typ := range []gatewayv1.RouteConditionType{gatewayv1.RouteConditionAccepted, gatewayv1.RouteConditionResolvedRefs} {
		c := meta.FindStatusCondition(st.Conditions, string(typ))
		switch {
		case c == nil:
			out = append(out, fmt.Sprintf("no %s condition", typ))
		case c.ObservedGeneration != gen:
			out = append(out, fmt.Sprintf("%s %s is for generation %d, the route is at %d (not judged yet)", typ, c.Status, c.ObservedGeneration, gen))
		case c.Status != metav1.ConditionTrue:
			out = append(out, fmt.Sprintf("%s %s (%s: %s)", typ, c.Status, c.Reason, c.Message))
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, string(gatewayv1.RouteConditionPartiallyInvalid)); c != nil && c.Status == metav1.ConditionTrue {
		out = append(out, fmt.Sprintf("%s True (%s: %s)", gatewayv1.RouteConditionPartiallyInvalid, c.Reason, c.Message))
	}
	return strings.Join(out, ", ")
}

// findGateway finds Gateway ns/name among the observed objects: under its Key, or
// under any key (a controller may key objects of other namespaces otherwise; two
// Gateways of one name in two namespaces share Key("Gateway", name)).
func findGateway(o traffic.Observed, ns, name string) *gatewayv1.Gateway {
	if gw, ok := o.Objects[traffic.Key("Gateway", name)].(*gatewayv1.Gateway); ok && gw != nil && gw.Namespace == ns && gw.Name == name {
		return gw
	}
	for _, obj := range o.Objects {
		if gw, ok := obj.(*gatewayv1.Gateway); ok && gw != nil && gw.Namespace == ns && gw.Name == name {
			return gw
		}
	}
	return nil
}

// parentName names a parentRef for a message: "Gateway ns/name", with "/section"
// and ":port" when it names them.
func parentName(ref gatewayv1.ParentReference, routeNS string) string {
	s := fmt.Sprintf("%s %s/%s", ptr.Deref(ref.Kind, GatewayKind), namespaceOf(ref, routeNS), ref.Name)
	if sec := ptr.Deref(ref.SectionName, ""); sec != "" {
		s += "/" + string(sec)
	}
	if port := ptr.Deref(ref.Port, 0); port != 0 {
		s += fmt.Sprintf(":%d", port)
	}
	return s
}

// weights are the weights of route's split rule (its last rule without header
// matches) by cohort hash; backendRefs to no cohort of t are left out.
func weights(route *gatewayv1.HTTPRoute, t traffic.Traffic) map[string]int32 {
	byService := map[string]string{}
	for _, c := range t.Cohorts {
		byService[c.Service] = c.Hash
	}
	out := map[string]int32{}
	for _, r := range route.Spec.Rules {
		if hasHeaderMatch(r) {
			continue
		}
		clear(out)
		for _, b := range r.BackendRefs {
			if hash, ok := byService[string(b.Name)]; ok {
				out[hash] = ptr.Deref(b.Weight, 1)
			}
		}
	}
	return out
}

func hasHeaderMatch(r gatewayv1.HTTPRouteRule) bool {
	for _, m := range r.Matches {
		if len(m.Headers) > 0 {
			return true
		}
	}
	return false
}

// formatWeights prints weights by hash in the order of hash: "aaaa=90 bbbb=10".
func formatWeights(w map[string]int32) string {
	parts := make([]string, 0, len(w))
	for _, h := range slices.Sorted(maps.Keys(w)) {
		parts = append(parts, fmt.Sprintf("%s=%d", h, w[h]))
	}
	return strings.Join(parts, " ")
}
