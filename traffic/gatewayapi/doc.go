// Package gatewayapi is the Gateway API traffic provider (traffic.Provider, Kind
// v1alpha1.TrafficGatewayAPI): it splits a frontend service's client traffic between
// cohorts through one HTTPRoute the DGD controls, and judges from the route's status
// what of a split is in effect. Like every provider it is pure: no client, no I/O.
//
// # What it renders
//
// One HTTPRoute (gateway.networking.k8s.io/v1) named Traffic.Entry, `{dgd}-{frontend}`,
// in the DGD's namespace, with spec.parentRefs and spec.hostnames from
// spec.rollout.trafficRouting.gatewayAPI and these rules, in this order:
//
//  1. only while Traffic.HeaderRoute is set: requests whose header Name is exactly
//     Value (header names are case-insensitive, values exact: httproute_types.go
//     HTTPHeaderMatch) on path prefix "/" go to that cohort's Service alone;
//  2. every request on path prefix "/" goes to the cohorts' Services, one backendRef
//     per cohort in order of hash, weight = the cohort's percent. A cohort at 0 keeps
//     its backendRef with weight 0: "If weight is set to 0, no traffic should be
//     forwarded for this entry" (shared_types.go BackendRef.Weight).
//
// For the split rule [90, 10] and a header route to the second cohort:
//
//	rules:
//	- matches: [{path: {type: PathPrefix, value: /}, headers: [{type: Exact, name: x-canary, value: "1"}]}]
//	  backendRefs: [{group: "", kind: Service, name: llm-frontend-bbbbbbbb-cohort, port: 8000, weight: 1}]
//	- matches: [{path: {type: PathPrefix, value: /}}]
//	  backendRefs:
//	  - {group: "", kind: Service, name: llm-frontend-aaaaaaaa-cohort, port: 8000, weight: 90}
//	  - {group: "", kind: Service, name: llm-frontend-bbbbbbbb-cohort, port: 8000, weight: 10}
//
// The header rule wins over the split rule whatever their order (a match with more
// header matches takes precedence across rules: HTTPRouteRule.Matches); it is first
// so that a reader sees it first. Every default the CRD would fill in is rendered
// explicitly, so the object the API server stores is the object rendered.
//
// # Comparing
//
// The controller writes the route when what it renders is not Same as what it cached
// (Provider implements traffic.Comparer with Same).
// Same ignores exactly what the API server fills in (the +kubebuilder:default markers
// of apis/v1 at v1.6.3 on the fields rendered: parentRef group gateway.networking.k8s.io
// and kind Gateway, rules and matches defaulting to one path match PathPrefix "/",
// path type PathPrefix and value "/", header match type Exact, backendRef group "",
// kind Service and weight 1), the case of header names, and all metadata but the
// labels rendered (resourceVersion, generation, uid, managedFields, the controller
// reference the controller sets, labels and annotations others add) and status. Any
// other field set on the cluster's route (a filter, a timeout) makes it not Same, and
// the controller's update drops it. No field this provider leaves out is defaulted by
// the v1.6.3 CRDs (standard or experimental channel): their other defaults sit inside
// filters and sessionPersistence, which are defaulted only where they are set.
//
// # When a split is in effect
//
// Effect.InEffect holds iff the observed route is the DGD's (Controlled), its spec is
// Same as the one rendered for the Traffic, and for every parentRef of the spec
// status.parents holds an entry for that parent (matched as the Gateway API defines
// equality: group and kind defaulted, namespace the route's when unset, sectionName
// and port) with Accepted=True and ResolvedRefs=True whose observedGeneration is the
// route's metadata.generation, and PartiallyInvalid not True (a Gateway that drops
// invalid rules keeps Accepted=True: shared_types.go RouteConditionPartiallyInvalid).
// The generation is the rule of RouteParentStatus.Conditions ("Implementations MUST
// always update the observedGeneration field ... to the metadata.generation"): a
// condition for an older generation judged an older spec, so a weight just written
// is not in effect until the Gateway has judged it. An entry written by any
// controller counts (the provider does not read GatewayClasses to learn which
// controller owns a Gateway); entries for parents the spec does not name are ignored.
// A parent Gateway missing from the cluster is never in effect ("Gateway ns/name not
// found"): its controller writes no entry for it (RouteStatus.Parents: "parent
// references that cannot be resolved ... will not be added to this list").
//
// Weights and HeaderRoute are what the route routes, read from its rules (a
// backendRef's cohort found by its Service: a cohort of the Traffic, or a name of
// backends.CohortServiceName's shape), reported once every parent the route names has
// accepted and resolved its current generation, whatever the Traffic asks: the
// controller judges a step's weight with a Traffic of no cohort, and a cohort's weight
// 0 while the cohort is going. Serving holds when some parent the route names, whose
// Gateway exists, has accepted the route for some generation: the route routes at
// all. A Gateway's requests in flight are invisible (InFlightKnown false): a cohort at
// weight 0 keeps its frontends for drainSeconds once its weight 0 is in effect, then
// they go.
//
// # Sources
//
// sigs.k8s.io/gateway-api v1.6.3: apis/v1/httproute_types.go (HTTPRouteSpec,
// HTTPRouteRule, HTTPHeaderMatch, HTTPBackendRef), apis/v1/shared_types.go
// (ParentReference, BackendRef, RouteParentStatus, RouteStatus, the route condition
// types and reasons), apis/v1/object_reference_types.go (BackendObjectReference),
// config/crd/standard/gateway.networking.k8s.io_httproutes.yaml (the defaults);
// GEP-1364 (status and conditions); conformance/utils/kubernetes/helpers.go
// (parentsForRouteMatch: how conformance matches a status entry to a parentRef).
// The rule shapes follow argoproj-labs/rollouts-plugin-trafficrouter-gatewayapi
// pkg/plugin/httproute.go (setHTTPRouteWeight, setHTTPHeaderRoute), which adds the
// header rule after the weighted one.
package gatewayapi
