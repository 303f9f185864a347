package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
)

// gatewayIndex indexes DGDs by the Gateways their spec.rollout.trafficRouting.gatewayAPI
// names as parents ("<namespace>/<name>", the DGD's namespace when the ref names none).
const gatewayIndex = "spec.rollout.trafficRouting.gatewayAPI.parentRefs"

// gatewaysServed reports whether the Gateway API provider runs (its CRDs are served).
func (r *Reconciler) gatewaysServed() bool { return r.Providers[v1alpha1.TrafficGatewayAPI] != nil }

// indexGateways registers gatewayIndex.
func indexGateways(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &v1beta1.DynamoGraphDeployment{}, gatewayIndex, func(o client.Object) []string {
		dgd := o.(*v1beta1.DynamoGraphDeployment)
		ro := dgd.Spec.Rollout
		if ro == nil || ro.TrafficRouting == nil || ro.TrafficRouting.GatewayAPI == nil {
			return nil
		}
		var out []string
		for _, p := range ro.TrafficRouting.GatewayAPI.ParentRefs {
			if p.Kind != nil && *p.Kind != "Gateway" {
				continue
			}
			ns := dgd.Namespace
			if p.Namespace != nil && *p.Namespace != "" {
				ns = string(*p.Namespace)
			}
			out = append(out, ns+"/"+string(p.Name))
		}
		return out
	})
}

// watchGateways, where the Gateway API provider runs, hears the DGDs' HTTPRoutes (a
// parent Gateway's status on them says when a weight is in effect) and the Gateways
// they name (one that appears, or changes its listeners, is judged at once: Effect says
// "not found" until then).
func (r *Reconciler) watchGateways(mgr ctrl.Manager, b *builder.Builder) *builder.Builder {
	if !r.gatewaysServed() {
		return b
	}
	return b.Owns(&gatewayv1.HTTPRoute{}).
		Watches(&gatewayv1.Gateway{}, handler.EnqueueRequestsFromMapFunc(r.gatewayToDGDs))
}

// gatewayToDGDs maps a Gateway to the DGDs that name it as a parent.
func (r *Reconciler) gatewayToDGDs(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1beta1.DynamoGraphDeploymentList
	if err := r.Client.List(ctx, &list, client.MatchingFields{gatewayIndex: o.GetNamespace() + "/" + o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the DGDs of a Gateway", "gateway", o.GetNamespace()+"/"+o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, d := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&d)})
	}
	return out
}
