package gatewayapi

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/traffic"
)

// The operator writes the HTTPRoutes it renders and reads the Gateways they name.
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get;list;watch

// Provider is the Gateway API traffic provider. The zero value is ready to use.
type Provider struct{}

var (
	_ traffic.Provider = Provider{}
	_ traffic.Comparer = Provider{}
)

// ErrInvalid is wrapped by every error Objects returns: the Traffic cannot be routed
// as asked (no gatewayAPI spec, no cohort, a header route to a cohort not listed), and
// retrying the same Traffic cannot help.
var ErrInvalid = errors.New("traffic cannot be rendered as an HTTPRoute")

// Well-known values of the Gateway API, as its CRD defaults them.
const (
	// GatewayGroup is a parentRef's group when unset, and the group of Gateways.
	GatewayGroup = gatewayv1.Group(gatewayv1.GroupName)
	// GatewayKind is a parentRef's kind when unset.
	GatewayKind = gatewayv1.Kind("Gateway")
	// ServiceKind is a backendRef's kind when unset; its group is "" (core).
	ServiceKind = gatewayv1.Kind("Service")
)

// Kind is v1alpha1.TrafficGatewayAPI.
func (Provider) Kind() string { return v1alpha1.TrafficGatewayAPI }

// Objects renders the HTTPRoute (Route) to apply; nothing is created once.
func (Provider) Objects(t traffic.Traffic) (traffic.Rendered, error) {
	route, err := Route(t)
	if err != nil {
		return traffic.Rendered{}, err
	}
	return traffic.Rendered{Apply: []client.Object{route}}, nil
}

// Same is traffic.Comparer's: the package's Same for two HTTPRoutes (ok), ok false
// for objects of any other kind.
func (Provider) Same(have, want client.Object) (same, ok bool) {
	h, hok := have.(*gatewayv1.HTTPRoute)
	w, wok := want.(*gatewayv1.HTTPRoute)
	if !hok || !wok {
		return false, false
	}
	return Same(h, w), true
}

// Lookups are the HTTPRoute and every parent Gateway its parentRefs name (the ref's
// namespace, else the DGD's), once each, so that Effect can tell a Gateway that does
// not exist. A parentRef of another kind (a mesh's Service) is not looked up.
func (Provider) Lookups(t traffic.Traffic) []client.Object {
	out := []client.Object{&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: t.DGD.Namespace, Name: t.Entry}}}
	if t.Spec.GatewayAPI == nil {
		return out
	}
	seen := map[string]bool{}
	for _, ref := range t.Spec.GatewayAPI.ParentRefs {
		ns, name, ok := gatewayOf(ref, t.DGD.Namespace)
		if !ok || seen[ns+"/"+name] {
			continue
		}
		seen[ns+"/"+name] = true
		out = append(out, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	return out
}

// PodLabels is nil: the provider runs no pods of its own.
func (Provider) PodLabels(traffic.Traffic) map[string]string { return nil }

// EntrySelector is nil: the frontend's Service `{dgd}-{frontend}` stays the
// controller's. A Gateway routes through the HTTPRoute; in-cluster clients reach the
// Service, which cannot split by weight, so the controller points it at one routable
// cohort's frontends (controllers/decide localCohort), never at a cohort whose pool
// cannot serve yet.
func (Provider) EntrySelector(traffic.Traffic) map[string]string { return nil }

// Route renders the HTTPRoute of t (the package doc shows one). The same Traffic
// renders an identical object.
func Route(t traffic.Traffic) (*gatewayv1.HTTPRoute, error) {
	if err := validate(t); err != nil {
		return nil, fmt.Errorf("HTTPRoute %s/%s of DGD %s: %w", t.DGD.Namespace, t.Entry, t.DGD.Name, err)
	}
	g := t.Spec.GatewayAPI
	parents := make([]gatewayv1.ParentReference, len(g.ParentRefs))
	for i, ref := range g.ParentRefs {
		parents[i] = defaultedParentRef(ref)
	}
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.DGD.Namespace, Name: t.Entry, Labels: map[string]string{
			v1alpha1.LabelGraph:     t.DGD.Name,
			v1alpha1.LabelService:   labelValue(t.Frontend),
			v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		}},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Hostnames:       append([]gatewayv1.Hostname(nil), g.Hostnames...),
			Rules:           rules(t),
		},
	}, nil
}

// rules are the header rule, when t has a header route, then the split rule.
func rules(t traffic.Traffic) []gatewayv1.HTTPRouteRule {
	cohorts := traffic.Sorted(t.Cohorts)
	var out []gatewayv1.HTTPRouteRule
	if h := t.HeaderRoute; h != nil {
		for _, c := range cohorts {
			if c.Hash != h.Hash {
				continue
			}
			out = append(out, gatewayv1.HTTPRouteRule{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: rootPrefix(), Headers: []gatewayv1.HTTPHeaderMatch{{
					Type: ptr.To(gatewayv1.HeaderMatchExact), Name: gatewayv1.HTTPHeaderName(h.Name), Value: h.Value,
				}}}},
				// One backend takes every request of its rule whatever its weight
				// above 0; 1 is the CRD's default (BackendRef.Weight).
				BackendRefs: []gatewayv1.HTTPBackendRef{backendRef(c, 1)},
			})
		}
	}
	split := gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Path: rootPrefix()}}}
	for _, c := range cohorts {
		split.BackendRefs = append(split.BackendRefs, backendRef(c, c.Weight))
	}
	return append(out, split)
}

func rootPrefix() *gatewayv1.HTTPPathMatch {
	return &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")}
}

func backendRef(c traffic.Cohort, weight int32) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{
			Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(ServiceKind),
			Name: gatewayv1.ObjectName(c.Service), Port: ptr.To(c.Port),
		},
		Weight: ptr.To(weight),
	}}
}

// validate refuses a Traffic no HTTPRoute can carry.
func validate(t traffic.Traffic) error {
	if t.Spec.GatewayAPI == nil {
		return fmt.Errorf("%w: spec.rollout.trafficRouting.gatewayAPI is not set", ErrInvalid)
	}
	if len(t.Spec.GatewayAPI.ParentRefs) == 0 {
		return fmt.Errorf("%w: spec.rollout.trafficRouting.gatewayAPI.parentRefs is empty", ErrInvalid)
	}
	if len(t.Cohorts) == 0 {
		return fmt.Errorf("%w: no cohort to route to", ErrInvalid)
	}
	hashes, services := map[string]bool{}, map[string]bool{}
	for _, c := range t.Cohorts {
		if hashes[c.Hash] || services[c.Service] {
			return fmt.Errorf("%w: cohort %s (Service %s) listed twice", ErrInvalid, c.Hash, c.Service)
		}
		if c.Weight < 0 || c.Service == "" || c.Port <= 0 {
			return fmt.Errorf("%w: cohort %s has Service %q, port %d, weight %d", ErrInvalid, c.Hash, c.Service, c.Port, c.Weight)
		}
		hashes[c.Hash], services[c.Service] = true, true
	}
	if h := t.HeaderRoute; h != nil && !hashes[h.Hash] {
		return fmt.Errorf("%w: header route %s=%s to cohort %s, which is not listed", ErrInvalid, h.Name, h.Value, h.Hash)
	}
	return nil
}

// labelValue is the value of the service label on the frontend's pods: render's
// labelValue (render/pod.go) and backends' sanitizeLabelValue (backends/naming.go),
// the service name cut to 63 characters with '-', '_' and '.' trimmed off its ends.
func labelValue(s string) string {
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "-_.")
}
