package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// FrontendMode says which frontends serve a worker revision.
// +kubebuilder:validation:Enum=Auto;Shared;PerRevision
type FrontendMode string

// Frontend modes.
const (
	// FrontendsAuto (the default) runs one shared frontend, as Dynamo does, until a
	// revision changes a frontend's pod template together with the workers (a Dynamo
	// upgrade, a model card or router change): from that revision on, every worker
	// revision is a cohort with a frontend of its own.
	FrontendsAuto FrontendMode = "Auto"
	// FrontendsShared runs one frontend per frontend service, updated in place, that
	// discovers every worker revision by prefix.
	FrontendsShared FrontendMode = "Shared"
	// FrontendsPerRevision makes every worker revision a cohort, from the first.
	FrontendsPerRevision FrontendMode = "PerRevision"
)

// TrafficRouting is how client traffic is split between cohorts: through a proxy the
// operator runs (the default) or an HTTPRoute of the Gateway API. At most one is set.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.proxy) && has(self.gatewayAPI))",message="spec.rollout.trafficRouting takes one of proxy and gatewayAPI, not both"
type TrafficRouting struct {
	// Proxy routes through an HAProxy Deployment the operator runs, `{dgd}-{frontend}-proxy`,
	// which the frontend's Service `{dgd}-{frontend}` selects while the DGD has cohorts.
	// The default when neither is set.
	// +optional
	Proxy *ProxyRouting `json:"proxy,omitempty"`
	// GatewayAPI routes through an HTTPRoute `{dgd}-{frontend}` the operator owns, with
	// one weighted backendRef per cohort.
	// +optional
	GatewayAPI *GatewayAPIRouting `json:"gatewayAPI,omitempty"`
}

// ProxyRouting configures the proxy.
type ProxyRouting struct {
	// Image of HAProxy (2.6 or later). Default: the operator's --proxy-image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`
	// Replicas of the proxy Deployment. Default 2.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Replicas *int32 `json:"replicas,omitempty"`
	// DrainTimeoutSeconds bounds how long a cohort whose weight is 0 waits for its
	// requests in flight through the proxy before its frontends go anyway. Default 3600.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	DrainTimeoutSeconds *int32 `json:"drainTimeoutSeconds,omitempty"`
}

// GatewayAPIRouting configures the HTTPRoute.
type GatewayAPIRouting struct {
	// ParentRefs are the Gateways (or their listeners) the HTTPRoute attaches to, as the
	// HTTPRoute takes them: each of the gateway-api CRD's own rules on spec.parentRefs
	// (sigs.k8s.io/gateway-api v1.6.3 apis/v1/shared_types.go CommonRouteSpec) that both
	// of its channels apply: two refs to one parent both set sectionName or neither
	// (the standard channel's first rule; the experimental one's also asks it of port),
	// and no two refs to one parent have the same sectionName and port (the
	// experimental channel's second rule; the standard one's refuses the same
	// sectionName whatever the ports). The HTTPRoute is written from them unchanged.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(p1, self.all(p2, p1.group == p2.group && p1.kind == p2.kind && p1.name == p2.name && (((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) || p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && p1.__namespace__ == p2.__namespace__)) ? ((!has(p1.sectionName) || p1.sectionName == '') == (!has(p2.sectionName) || p2.sectionName == '')) : true))",message="sectionName must be specified when parentRefs includes 2 or more references to the same parent"
	// +kubebuilder:validation:XValidation:rule="self.all(p1, self.exists_one(p2, p1.group == p2.group && p1.kind == p2.kind && p1.name == p2.name && (((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) || p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && p1.__namespace__ == p2.__namespace__)) && (((!has(p1.sectionName) || p1.sectionName == '') && (!has(p2.sectionName) || p2.sectionName == '')) || (has(p1.sectionName) && has(p2.sectionName) && p1.sectionName == p2.sectionName)) && (((!has(p1.port) || p1.port == 0) && (!has(p2.port) || p2.port == 0)) || (has(p1.port) && has(p2.port) && p1.port == p2.port))))",message="sectionName or port must be unique when parentRefs includes 2 or more references to the same parent"
	ParentRefs []gatewayv1.ParentReference `json:"parentRefs"`
	// Hostnames of the HTTPRoute.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Hostnames []gatewayv1.Hostname `json:"hostnames,omitempty"`
	// DrainSeconds is how long a cohort keeps its frontends once its weight 0 is in
	// effect, for the requests still in flight through the Gateway (which the operator
	// cannot see). Default 30.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	DrainSeconds *int32 `json:"drainSeconds,omitempty"`
}

// HeaderRoute sends every request whose header Name has exactly the value Value to the
// new revision's cohort.
type HeaderRoute struct {
	// Name of the header (an HTTP field name; matched case-insensitively).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Name string `json:"name"`
	// Value the header must have (visible ASCII characters, no spaces).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[!-~]+$`
	Value string `json:"value"`
}

// Traffic providers, as status.traffic.provider names them.
const (
	TrafficProxy      = "Proxy"
	TrafficGatewayAPI = "GatewayAPI"
)

// TrafficStatus is where clients enter while the DGD has cohorts, and whether the split
// asked for is in effect.
type TrafficStatus struct {
	// Provider is Proxy or GatewayAPI.
	Provider string `json:"provider"`
	// Entry names what clients reach: the Service `{dgd}-{frontend}` (Proxy) or the
	// HTTPRoute (GatewayAPI), one per frontend service.
	// +optional
	Entry []string `json:"entry,omitempty"`
	// InEffect: every weight and header route asked for is in effect.
	InEffect bool `json:"inEffect"`
	// Message says what is not in effect yet, naming the object.
	// +optional
	Message string `json:"message,omitempty"`
}

// CohortStatus is one revision's cohort: its frontends, its routable workers and the
// share of the traffic it is asked to take and takes.
type CohortStatus struct {
	// Revision is the ControllerRevision number of the cohort's newest revision.
	Revision int64 `json:"revision"`
	// Hash is the cohort's worker hash (its Dynamo namespace's suffix).
	Hash string `json:"hash"`
	// Namespace is the Dynamo namespace its frontends discover, and only that one.
	Namespace string `json:"namespace"`
	// Services are the cohort's Services the traffic is sent to, one per frontend service.
	// +optional
	Services []string `json:"services,omitempty"`
	// FrontendReplicas and FrontendReadyReplicas count the cohort's frontend replicas.
	FrontendReplicas      int32 `json:"frontendReplicas"`
	FrontendReadyReplicas int32 `json:"frontendReadyReplicas"`
	// RoutableWorkers counts the cohort's worker replicas Dynamo's discovery routes to.
	RoutableWorkers int32 `json:"routableWorkers"`
	// Routable: the cohort has a ready frontend and a routable pool (every worker role
	// with a replica Dynamo routes to), the condition for any weight.
	Routable bool `json:"routable"`
	// Weight is the percent of new requests the cohort is asked to take.
	Weight int32 `json:"weight"`
	// WeightInEffect is the percent the provider last reported in effect, when known.
	// +optional
	WeightInEffect *int32 `json:"weightInEffect,omitempty"`
	// HeaderRoute: requests with the step's header go to this cohort.
	// +optional
	HeaderRoute bool `json:"headerRoute,omitempty"`
	// InFlight counts the requests in flight through the proxy to the cohort, when known.
	// +optional
	InFlight *int64 `json:"inFlight,omitempty"`
	// DrainingSince is when weight 0 came into effect for a cohort that is going.
	// +optional
	DrainingSince *metav1.Time `json:"drainingSince,omitempty"`
}
