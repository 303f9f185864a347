package gateway_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/traffic"
	"github.com/dgd-rollout/operator/traffic/gatewayapi"
)

// state is one observed state of the route (nil once deleted) and the provider's
// Effect there for every Traffic asked so far, in the order asked, and for the
// controller's Traffic of no cohort (decide.TrafficBase: how it judges a step).
type state struct {
	route   *gatewayv1.HTTPRoute
	effects []traffic.Effect
	base    traffic.Effect
}

// recorder watches one route and judges every state it goes through: Effect for
// every Traffic asked so far, checked against inEffect, the suite's own rule.
type recorder struct {
	mu         sync.Mutex
	asked      []traffic.Traffic
	states     []state
	violations []string
	stop       context.CancelFunc
	done       chan struct{}
}

// watchRoute starts a recorder of route ns/name (watched from before it exists).
func watchRoute(ns, name string) *recorder {
	cctx, cancel := context.WithCancel(ctx)
	w, err := k8s.Watch(cctx, &gatewayv1.HTTPRouteList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	Expect(err).NotTo(HaveOccurred())
	r := &recorder{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer w.Stop()
		for {
			select {
			case <-cctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					r.violate("the watch of HTTPRoute %s/%s ended early", ns, name)
					return
				}
				r.observe(ev)
			}
		}
	}()
	return r
}

// Stop ends the watch and waits for its goroutine.
func (r *recorder) Stop() {
	r.stop()
	<-r.done
}

// ask registers t: every state from now on is judged for it too.
func (r *recorder) ask(t traffic.Traffic) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, t)
	return len(r.asked) - 1
}

func (r *recorder) observe(ev watch.Event) {
	var route *gatewayv1.HTTPRoute
	switch ev.Type {
	case watch.Added, watch.Modified:
		route = ev.Object.(*gatewayv1.HTTPRoute)
	case watch.Deleted:
	default:
		r.violate("watch event %s: %v", ev.Type, ev.Object)
		return
	}
	r.mu.Lock()
	asked := append([]traffic.Traffic(nil), r.asked...)
	r.mu.Unlock()
	s := state{route: route}
	if len(asked) > 0 {
		s.base = r.judgeBase(asked[len(asked)-1], route)
	}
	for _, t := range asked {
		o := observed(t, route)
		e := gatewayapi.Provider{}.Effect(t, o)
		s.effects = append(s.effects, e)
		if want := inEffect(t, route, o); e.InEffect != want {
			r.violate("generation %d, resourceVersion %s: Effect.InEffect %v, the suite's rule says %v (%s)",
				generation(route), resourceVersion(route), e.InEffect, want, e.Message)
		}
		if e.InEffect && !maps.Equal(e.Weights, t.Weights()) {
			r.violate("in effect with weights %v, asked %v", e.Weights, t.Weights())
		}
	}
	r.mu.Lock()
	r.states = append(r.states, s)
	r.mu.Unlock()
}

// judgeBase is the Effect of t's Traffic of no cohort (the controller's base), checked
// against the suite's rule: weights reported exactly when every parent the route names
// has judged its current generation True, and then the route's own.
func (r *recorder) judgeBase(t traffic.Traffic, route *gatewayv1.HTTPRoute) traffic.Effect {
	t.Cohorts, t.HeaderRoute = nil, nil
	o := observed(t, route)
	e := gatewayapi.Provider{}.Effect(t, o)
	routed := routedAll(t, route, o)
	if e.InEffect || (e.Weights != nil) != routed {
		r.violate("generation %d: the base Traffic's Effect %+v, every parent judged the route: %v", generation(route), e, routed)
	}
	if routed && !maps.Equal(e.Weights, routeWeights(route)) {
		r.violate("generation %d: the base Traffic's weights %v, the route's %v", generation(route), e.Weights, routeWeights(route))
	}
	return e
}

func (r *recorder) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// Violations are the states where Effect disagreed with the suite's rule.
func (r *recorder) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.violations...)
}

// latest is the newest observed state (zero before the first).
func (r *recorder) latest() state {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return state{}
	}
	return r.states[len(r.states)-1]
}

// effect is the newest Effect for the Traffic asked i-th.
func (r *recorder) effect(i int) traffic.Effect {
	s := r.latest()
	if i >= len(s.effects) {
		return traffic.Effect{}
	}
	return s.effects[i]
}

// seen is every observed state for which pred holds.
func (r *recorder) seen(pred func(state) bool) []state {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []state
	for _, s := range r.states {
		if pred(s) {
			out = append(out, s)
		}
	}
	return out
}

// observed is what the operator's controller would read for t at this state: the
// route and the Gateways the lookups name (read now).
func observed(t traffic.Traffic, route *gatewayv1.HTTPRoute) traffic.Observed {
	o := traffic.Observed{Objects: map[string]client.Object{}}
	if route != nil {
		o.Objects[traffic.Key("HTTPRoute", route.Name)] = route
	}
	for _, l := range (gatewayapi.Provider{}).Lookups(t)[1:] {
		gw := &gatewayv1.Gateway{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(l), gw); err == nil {
			o.Objects[traffic.Key("Gateway", gw.Name)] = gw
		}
	}
	return o
}

// inEffect is the suite's own rule (TRAFFIC.md), written apart from the provider's:
// the route is the DGD's, its last rule's weights by Service and its header rule are
// t's, and for every parentRef the Gateway exists and the test controller's entry for
// it has Accepted and ResolvedRefs True for the route's generation. Only the test
// controller writes status in this suite, and every parentRef here names a Gateway in
// the route's namespace without a sectionName or port.
func inEffect(t traffic.Traffic, route *gatewayv1.HTTPRoute, o traffic.Observed) bool {
	if route == nil || !metav1.IsControlledBy(route, t.DGD) || len(route.Spec.Rules) == 0 {
		return false
	}
	split := route.Spec.Rules[len(route.Spec.Rules)-1]
	got := map[string]int32{}
	for _, b := range split.BackendRefs {
		got[string(b.Name)] = ptr.Deref(b.Weight, 1)
	}
	want := map[string]int32{}
	for _, c := range t.Cohorts {
		want[c.Service] = c.Weight
	}
	if !maps.Equal(got, want) || !headerRuleIs(route, t) {
		return false
	}
	for _, ref := range t.Spec.GatewayAPI.ParentRefs {
		if o.Objects[traffic.Key("Gateway", string(ref.Name))] == nil || !judgedTrue(route, string(ref.Name)) {
			return false
		}
	}
	return true
}

// routedAll: the route is the DGD's and every parent it names exists and has judged
// its current generation True (the test controller's entry).
func routedAll(t traffic.Traffic, route *gatewayv1.HTTPRoute, o traffic.Observed) bool {
	if route == nil || !metav1.IsControlledBy(route, t.DGD) || len(route.Spec.ParentRefs) == 0 {
		return false
	}
	for _, ref := range route.Spec.ParentRefs {
		if o.Objects[traffic.Key("Gateway", string(ref.Name))] == nil || !judgedTrue(route, string(ref.Name)) {
			return false
		}
	}
	return true
}

// routeWeights are the route's split-rule weights by cohort hash, read from the
// Services' names (llm-frontend-<hash>-cohort).
func routeWeights(route *gatewayv1.HTTPRoute) map[string]int32 {
	out := map[string]int32{}
	split := route.Spec.Rules[len(route.Spec.Rules)-1]
	for _, b := range split.BackendRefs {
		hash := strings.TrimSuffix(strings.TrimPrefix(string(b.Name), "llm-frontend-"), "-cohort")
		out[hash] = ptr.Deref(b.Weight, 1)
	}
	return out
}

func headerRuleIs(route *gatewayv1.HTTPRoute, t traffic.Traffic) bool {
	if t.HeaderRoute == nil {
		return len(route.Spec.Rules) == 1
	}
	if len(route.Spec.Rules) != 2 || len(route.Spec.Rules[0].Matches) != 1 || len(route.Spec.Rules[0].BackendRefs) != 1 {
		return false
	}
	h := route.Spec.Rules[0].Matches[0].Headers
	return len(h) == 1 && string(h[0].Name) == t.HeaderRoute.Name && h[0].Value == t.HeaderRoute.Value &&
		string(route.Spec.Rules[0].BackendRefs[0].Name) == cohortService(t.HeaderRoute.Hash)
}

// judgedTrue: the test controller's entry for Gateway name has Accepted and
// ResolvedRefs True for the route's current generation.
func judgedTrue(route *gatewayv1.HTTPRoute, name string) bool {
	if route == nil {
		return false
	}
	for _, p := range route.Status.Parents {
		if p.ControllerName != controllerName || string(p.ParentRef.Name) != name {
			continue
		}
		ok := true
		for _, typ := range []string{"Accepted", "ResolvedRefs"} {
			c := meta.FindStatusCondition(p.Conditions, typ)
			ok = ok && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == route.Generation
		}
		return ok
	}
	return false
}

func generation(r *gatewayv1.HTTPRoute) int64 {
	if r == nil {
		return 0
	}
	return r.Generation
}

func resourceVersion(r *gatewayv1.HTTPRoute) string {
	if r == nil {
		return ""
	}
	return r.ResourceVersion
}
