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
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/traffic"
)

// Controlled reports whether route is controlled by dgd (its controller reference
// names the DGD's UID): the controller never updates a route it does not control, so
// a route someone else created under the name cannot carry the DGD's split.
func Controlled(route *gatewayv1.HTTPRoute, dgd *v1alpha1.DynamoGraphDeployment) bool {
	return route != nil && dgd != nil && metav1.IsControlledBy(route, dgd)
}

// Effect judges what of t is in effect from the observed route and Gateways (the
// package doc gives the rule and its sources). Weights and HeaderRoute are what the
// route routes once every parent it names has judged its current generation, whatever
// t asks: the controller asks with a Traffic of no cohort (decide.TrafficBase) whether
// a step's weight is in effect. Its message names the route, each parent that lags and
// the condition that lags or is False.
func (Provider) Effect(t traffic.Traffic, o traffic.Observed) traffic.Effect {
	e := effect(t, o)
	e.Unservable = missingParents(t, o)
	return e
}

// missingParents names the parent Gateways spec.rollout.trafficRouting.gatewayAPI
// names that do not exist ("" when every one does): no route through them can be
// accepted, whatever the controller writes, until someone makes them.
func missingParents(t traffic.Traffic, o traffic.Observed) string {
	if t.Spec.GatewayAPI == nil {
		return ""
	}
	var missing []string
	for i, ref := range t.Spec.GatewayAPI.ParentRefs {
		if ns, name, ok := gatewayOf(ref, t.DGD.Namespace); ok && findGateway(o, ns, name) == nil {
			missing = append(missing, fmt.Sprintf("Gateway %s/%s (spec.rollout.trafficRouting.gatewayAPI.parentRefs[%d]) not found", ns, name, i))
		}
	}
	return strings.Join(missing, "; ")
}

func effect(t traffic.Traffic, o traffic.Observed) traffic.Effect {
	name := fmt.Sprintf("HTTPRoute %s/%s", t.DGD.Namespace, t.Entry)
	have, _ := o.Objects[traffic.Key("HTTPRoute", t.Entry)].(*gatewayv1.HTTPRoute)
	switch {
	case have == nil:
		return traffic.Effect{Message: name + " not found"}
	case !Controlled(have, t.DGD):
		return traffic.Effect{Message: fmt.Sprintf("%s is not controlled by DGD %s: another object's route holds the name", name, t.DGD.Name)}
	}
	e, lags := routes(have, t, o)
	want, err := Route(t)
	switch {
	case err != nil:
		lags = append([]string{err.Error()}, lags...)
	case !Same(have, want):
		lags = append([]string{fmt.Sprintf("%s does not route the split asked for yet (its weights %s, asked %s)",
			name, formatWeights(splitWeights(have, t)), formatWeights(t.Weights()))}, lags...)
	}
	if len(lags) > 0 {
		e.Message = strings.Join(lags, "; ")
		return e
	}
	e.InEffect = true
	return e
}

// routes judges route as it is: Serving when a parent it names accepted it at some
// generation; Weights and HeaderRoute when every parent it names has accepted and
// resolved its current generation; the lags of the parents that have not.
func routes(route *gatewayv1.HTTPRoute, t traffic.Traffic, o traffic.Observed) (traffic.Effect, []string) {
	name := fmt.Sprintf("HTTPRoute %s/%s", route.Namespace, route.Name)
	var e traffic.Effect
	var lags []string
	for _, ref := range route.Spec.ParentRefs {
		p := judgeParent(route, ref, o)
		e.Serving = e.Serving || p.serving
		if p.lag != "" {
			lags = append(lags, name+": "+p.lag)
		}
	}
	if len(route.Spec.ParentRefs) == 0 {
		lags = append(lags, name+" names no parent")
	}
	if len(lags) == 0 {
		e.Weights, e.HeaderRoute = splitWeights(route, t), headerRoute(route, t)
	}
	return e, lags
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

// splitWeights are the weights of route's split rule (its last rule without header
// matches) by cohort hash; a backendRef to no cohort (cohortOf) is left out.
func splitWeights(route *gatewayv1.HTTPRoute, t traffic.Traffic) map[string]int32 {
	out := map[string]int32{}
	for _, r := range route.Spec.Rules {
		if hasHeaderMatch(r) {
			continue
		}
		clear(out)
		for _, b := range r.BackendRefs {
			if hash, ok := cohortOf(b, route.Namespace, t); ok {
				out[hash] = ptr.Deref(b.Weight, 1)
			}
		}
	}
	return out
}

// headerRoute is the route's header rule (its first rule with a header match, to one
// cohort's Service) as a HeaderRoute, nil when it has none.
func headerRoute(route *gatewayv1.HTTPRoute, t traffic.Traffic) *traffic.HeaderRoute {
	for _, r := range route.Spec.Rules {
		if !hasHeaderMatch(r) || len(r.BackendRefs) != 1 {
			continue
		}
		hash, ok := cohortOf(r.BackendRefs[0], route.Namespace, t)
		if !ok {
			continue
		}
		for _, m := range r.Matches {
			for _, h := range m.Headers {
				if ptr.Deref(h.Type, gatewayv1.HeaderMatchExact) == gatewayv1.HeaderMatchExact {
					return &traffic.HeaderRoute{Name: string(h.Name), Value: h.Value, Hash: hash}
				}
			}
		}
	}
	return nil
}

// cohortOf is the hash of the cohort whose Service b names: a cohort of t, else a
// Service of the DGD's frontend named as backends.CohortServiceName names them,
// `{dgd}-{frontend}-{hash}-cohort` (a cohort t does not list: one going, or any when t
// is the controller's Traffic of no cohort).
func cohortOf(b gatewayv1.HTTPBackendRef, routeNS string, t traffic.Traffic) (string, bool) {
	if ptr.Deref(b.Group, "") != "" || ptr.Deref(b.Kind, ServiceKind) != ServiceKind || namespaceOrLocal(b.Namespace, routeNS) != routeNS {
		return "", false
	}
	name := string(b.Name)
	for _, c := range t.Cohorts {
		if c.Service == name {
			return c.Hash, true
		}
	}
	rest, ok := strings.CutSuffix(name, "-"+backends.CohortSuffix)
	if !ok {
		return "", false
	}
	hash := rest[strings.LastIndex(rest, "-")+1:]
	return hash, hash != "" && backends.CohortServiceName(t.DGD.Name, t.Frontend, hash) == name
}

func namespaceOrLocal(ns *gatewayv1.Namespace, local string) string {
	if ns == nil || *ns == "" {
		return local
	}
	return string(*ns)
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
