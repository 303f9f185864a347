// Package traffic defines the one interface every traffic provider implements: how a
// frontend service's client traffic is split between cohorts (ROLLOUT.md, TRAFFIC.md).
//
// A cohort is one worker revision's frontends plus its workers, in one Dynamo namespace:
// its frontends discover only that namespace, so no request is ever served across
// versions. The controller (controllers/decide) decides the split, the percent of new
// requests each cohort takes and an optional header route, as a Traffic value; a
// provider only renders the objects that carry that split and judges, from what it
// observes, what of it is in effect. Like a backend, a provider never decides: its
// methods are pure functions of their arguments, and the controller makes every write
// (creates what is missing, updates what differs, owned by the DGD) and every read.
//
// Two providers, one folder each, one conformance suite (traffic/conformance):
//   - proxy: an HAProxy Deployment `{dgd}-{frontend}-proxy` with an agent beside it
//     that applies the split through HAProxy's runtime API on a socket only the pod
//     reaches, and reports what it applied; the frontend's Service `{dgd}-{frontend}`
//     selects the proxy while the DGD has cohorts.
//   - gatewayapi: an HTTPRoute `{dgd}-{frontend}` with one weighted backendRef per
//     cohort Service; a split is in effect once every parent Gateway has accepted the
//     route and resolved its refs for its current generation.
package traffic

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Cohort is one cohort as a provider routes to it.
type Cohort struct {
	// Hash is the cohort's worker hash, its name in every provider's objects.
	Hash string
	// Service is the cohort's Service (ClusterIP, port Port, selecting the cohort's
	// frontend pods of this frontend service).
	Service string
	// Address is the Service's cluster IP, "" while it has none yet (a provider that
	// needs it leaves the cohort out, and Effect says so).
	Address string
	// Port is the Service's port (8000, Dynamo's frontend port).
	Port int32
	// Weight is the percent of new requests the cohort takes, 0 to 100; the weights of
	// a Traffic sum to 100. A cohort at weight 0 takes no new request and finishes the
	// ones in flight (it drains).
	Weight int32
}

// HeaderRoute sends every request whose header Name has exactly the value Value to the
// cohort Hash, whatever the weights.
type HeaderRoute struct {
	Name, Value, Hash string
}

// Traffic is the split the controller asks for one frontend service of a DGD.
type Traffic struct {
	// DGD is the graph; Frontend the frontend service (its name in spec.services).
	DGD      *v1alpha1.DynamoGraphDeployment
	Frontend string
	// Entry is the name of the frontend's stable Service, `{dgd}-{frontend}`
	// (render.ServiceName), the address clients and the DGD's Ingress use.
	Entry string
	// Cohorts in order of hash. A cohort not listed is not routed to.
	Cohorts []Cohort
	// HeaderRoute, when set, names one of Cohorts.
	HeaderRoute *HeaderRoute
	// Spec is spec.rollout.trafficRouting (never nil: the proxy when unset).
	Spec v1alpha1.TrafficRouting
	// Config is the operator's configuration of the providers.
	Config Config
}

// Config is the operator's configuration of the providers (its flags).
type Config struct {
	// ProxyImage is the HAProxy image when the DGD names none.
	ProxyImage string
	// AgentImage is the image of the proxy's agent: the operator's own.
	AgentImage string
}

// Observed is what the controller read for a provider: the objects Lookups named (by
// "Kind/name"; one missing does not exist), and the pods of the provider's own
// workload (their metadata, from the operator's cache).
type Observed struct {
	Objects map[string]client.Object
	Pods    []metav1.PartialObjectMetadata
	// Now is the pass's clock.
	Now time.Time
}

// Effect is what of a Traffic is in effect, as the provider's objects show it.
type Effect struct {
	// InEffect: every cohort's weight and the header route of the Traffic are in
	// effect, wherever the provider routes (every proxy replica, every parent Gateway).
	InEffect bool
	// Serving: the entry routes requests at all (a ready proxy replica that has
	// applied a split with a cohort of weight above 0; a route accepted by a parent):
	// the frontend's Service may select the proxy.
	Serving bool
	// Weights are the weights in effect by cohort hash, wherever the provider routes
	// (every proxy replica reports them; every parent Gateway accepted and resolved the
	// route's current generation), whatever t asks: a step judges from them whether its
	// weight is in effect before it asks anything. Nil when unknown or not agreed.
	Weights map[string]int32
	// HeaderRoute is the header route in effect, judged as Weights (nil: none); its
	// Hash names the cohort, Name and Value may be empty where the provider reports
	// only the cohort.
	HeaderRoute *HeaderRoute
	// InFlight counts the requests in flight to each cohort (a cohort absent has
	// none), when the provider can see them (InFlightKnown); a Gateway cannot.
	InFlight      map[string]int64
	InFlightKnown bool
	// Message says what is not in effect yet, naming the object; "" when InEffect.
	Message string
}

// Rendered is what a provider renders for a Traffic.
type Rendered struct {
	// Apply are created when missing and updated when they differ from what the
	// cluster holds, in this order (RBAC before the pods that use it).
	Apply []client.Object
	// Create are created when missing and never updated: objects others write after
	// them (the proxy agents' reports).
	Create []client.Object
}

// Provider renders the objects that split a frontend's traffic and judges what of a
// split is in effect. Every method is pure.
type Provider interface {
	// Kind is status.traffic.provider of this provider: v1alpha1.TrafficProxy or
	// v1alpha1.TrafficGatewayAPI.
	Kind() string
	// Objects are every object the provider needs to route t, each with its namespace,
	// name and labels; the controller sets the DGD as their controller.
	Objects(t Traffic) (Rendered, error)
	// Lookups are the objects Effect reads, as empty objects of their kind with their
	// namespace and name (the controller reads them into Observed.Objects).
	Lookups(t Traffic) []client.Object
	// PodLabels selects the pods of the provider's own workload (Observed.Pods); nil
	// when it runs none.
	PodLabels(t Traffic) map[string]string
	// Effect judges what of t is in effect from what was observed.
	Effect(t Traffic, o Observed) Effect
	// EntrySelector is the selector of the frontend's Service `{dgd}-{frontend}` while
	// the provider serves: the proxy's pods; nil when the provider does not own that
	// Service (a Gateway routes through the HTTPRoute): the controller then points it
	// at one routable cohort's frontends, as it does before any provider serves.
	EntrySelector(t Traffic) map[string]string
}

// Weights returns the cohorts' weights by hash.
func (t Traffic) Weights() map[string]int32 {
	out := make(map[string]int32, len(t.Cohorts))
	for _, c := range t.Cohorts {
		out[c.Hash] = c.Weight
	}
	return out
}

// Sorted returns cohorts in order of hash, as Traffic.Cohorts holds them.
func Sorted(cohorts []Cohort) []Cohort {
	out := append([]Cohort(nil), cohorts...)
	sort.Slice(out, func(i, j int) bool { return out[i].Hash < out[j].Hash })
	return out
}

// Key is the key of an object in Observed.Objects: "Kind/name", the kind as its Go
// type names it (ConfigMap, Deployment, HTTPRoute...).
func Key(kind, name string) string { return kind + "/" + name }

// Comparer is implemented by a provider whose objects the API server fills in with
// defaults (an HTTPRoute's backendRef kind and weight, its match type): Same reports
// whether have, as cached, already is want, ignoring exactly those defaults (ok false
// for an object it does not know). Without it the controller compares the fields it
// renders.
type Comparer interface {
	Same(have, want client.Object) (same, ok bool)
}
