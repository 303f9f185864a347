package gatewayapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/traffic"
)

// testController is the controllerName of the Gateways in these tests.
const testController = gatewayv1.GatewayController("example.com/test-gateway")

// trafficB builds Traffic values: DGD ns/llm, frontend "Frontend", entry
// llm-frontend, one parentRef to Gateway public, cohorts added with cohort().
type trafficB struct{ t traffic.Traffic }

func newTraffic() *trafficB {
	dgd := &v1alpha1.DynamoGraphDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "llm", UID: "dgd-uid"}}
	return &trafficB{t: traffic.Traffic{
		DGD: dgd, Frontend: "Frontend", Entry: "llm-frontend",
		Spec: v1alpha1.TrafficRouting{GatewayAPI: &v1alpha1.GatewayAPIRouting{
			ParentRefs: []gatewayv1.ParentReference{{Name: "public"}},
			Hostnames:  []gatewayv1.Hostname{"llm.example.com"},
		}},
	}}
}

// cohort adds cohort hash at weight w, its Service llm-frontend-<hash>-cohort
// (backends.CohortServiceName) on 8000.
func (b *trafficB) cohort(hash string, w int32) *trafficB {
	b.t.Cohorts = append(b.t.Cohorts, traffic.Cohort{Hash: hash, Service: backends.CohortServiceName("llm", "Frontend", hash), Port: 8000, Weight: w})
	return b
}

func (b *trafficB) header(name, value, hash string) *trafficB {
	b.t.HeaderRoute = &traffic.HeaderRoute{Name: name, Value: value, Hash: hash}
	return b
}

func (b *trafficB) parents(refs ...gatewayv1.ParentReference) *trafficB {
	b.t.Spec.GatewayAPI.ParentRefs = refs
	return b
}

func (b *trafficB) get() traffic.Traffic { return b.t }

// observedRoute is the route of t as the cluster would hold it: rendered, controlled
// by t's DGD, at generation gen, with status entries st.
func observedRoute(t traffic.Traffic, gen int64, st ...gatewayv1.RouteParentStatus) *gatewayv1.HTTPRoute {
	r, err := Route(t)
	if err != nil {
		panic(err)
	}
	r.Generation, r.ResourceVersion, r.UID = gen, "42", "route-uid"
	r.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeployment", Name: t.DGD.Name, UID: t.DGD.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	r.Status.Parents = st
	return r
}

// entry is a status.parents entry for ref written by controller, with conditions.
func entry(ref gatewayv1.ParentReference, controller gatewayv1.GatewayController, conds ...metav1.Condition) gatewayv1.RouteParentStatus {
	return gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: controller, Conditions: conds}
}

// accepted is an entry of testController with Accepted and ResolvedRefs True at gen,
// the parentRef written back as a Gateway controller does (group and kind set).
func accepted(ref gatewayv1.ParentReference, gen int64) gatewayv1.RouteParentStatus {
	return entry(defaultedParentRef(ref), testController, cond("Accepted", "True", "Accepted", gen), cond("ResolvedRefs", "True", "ResolvedRefs", gen))
}

func cond(typ string, status metav1.ConditionStatus, reason string, gen int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: gen, Message: reason + " message"}
}

func gw(ns, name string) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// observe is what the controller would read: the route (if any) and the Gateways.
func observe(route *gatewayv1.HTTPRoute, gateways ...*gatewayv1.Gateway) traffic.Observed {
	o := traffic.Observed{Objects: map[string]client.Object{}}
	if route != nil {
		o.Objects[traffic.Key("HTTPRoute", route.Name)] = route
	}
	for _, g := range gateways {
		o.Objects[traffic.Key("Gateway", g.Name)] = g
	}
	return o
}
