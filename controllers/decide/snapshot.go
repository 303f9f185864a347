package decide

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/analysis"
	"github.com/dgd-rollout/operator/render"
	"github.com/dgd-rollout/operator/traffic"
)

// Snapshot is everything one pass knows about one DGD, read before anything is decided
// (controllers' observe). Decide reads it and never changes it.
type Snapshot struct {
	// DGD is the graph as the pass read it, in the operator's version (v1alpha1); its
	// status is the status before the pass.
	DGD *v1alpha1.DynamoGraphDeployment
	// Now is the pass's clock.
	Now time.Time
	// Platform is the cluster's Dynamo platform the pods are rendered for.
	Platform render.Config
	// Backends describes the backends this operator runs, by the spec.backend value
	// that selects each.
	Backends map[v1alpha1.BackendType]backends.Description
	// Workloads are the DGD's workloads on every backend, sorted by name, with their
	// pods counted and their readiness as Dynamo's discovery routes it.
	Workloads []Workload
	// Stale names a workload the cache does not show the operator's last write to yet
	// (its replicas, or a status that has caught up with its spec); "" when none. A
	// pass that finds one acts on nothing: its watch event starts the next pass.
	Stale string
	// Revisions are the DGD's ControllerRevisions, sorted by ascending .revision.
	Revisions []*appsv1.ControllerRevision
	// Objects are the other objects of the DGD the pass looked at.
	Objects Objects
	// Discovery is what Dynamo's discovery publishes of the DGD's Services.
	Discovery Discovery
	// Names are workload names a backend that reads the cluster to name them (Grove)
	// gave, by key: the stable services' always, others as Decide asked (Needs.Names).
	Names map[backends.Key]string
	// AnalysisTemplates are the analysis templates the DGD's steps reference
	// (TemplateRefs), as the cache shows them; one missing does not exist.
	AnalysisTemplates Templates
	// Measurements are the results of the analysis queries earlier passes listed as due
	// (Decision.Measure) that have landed, by the measurement each was asked for.
	Measurements map[Measure]analysis.Result
	// Unscheduled are the DGD's pods the scheduler could not place, once looked for
	// (Needs.Unscheduled; nil before); UnscheduledListed says the list was read.
	Unscheduled       []UnscheduledPod
	UnscheduledListed bool
	// Holders are what holds each name the pass would create an object under, once read
	// (Needs.Holders): the DGD's own, someone else's, or nothing.
	Holders map[ObjectName]Holder
	// CanListUnscheduled: the reconciler can list pods past its cache (it has an API
	// reader); without, no pass looks for unschedulable pods.
	CanListUnscheduled bool
	// Validate is render.Validate, or a function that gives its verdict without
	// rendering again a spec it has checked (the reconciler remembers them); nil is
	// render.Validate.
	Validate func(*v1alpha1.DynamoGraphDeployment, render.Config) error
	// Dynamo is what Dynamo's own operator left of the DGD while it is taken over
	// (dynamo.go); nil when nothing. Its worker workloads are in Workloads (backend
	// DynamoBackend).
	Dynamo *Dynamo
	// SSHKeys are the SSH key Secrets of TRT-LLM gangs (by name, in the DGD's namespace)
	// a create of the operator's made or found there (AlreadyExists): the operator
	// never reads a Secret, so what this process has not created is created again, once.
	SSHKeys map[string]bool
	// Providers are the traffic providers this operator runs, by traffic.Provider.Kind
	// (the Gateway API's only where its CRDs are served); TrafficConfig is their
	// configuration (the operator's flags).
	Providers     map[string]traffic.Provider
	TrafficConfig traffic.Config
	// Traffic is what observe read of every provider's objects, by frontend service
	// (TrafficLookups): the objects it renders and looks up, and its pods.
	Traffic map[string]traffic.Observed
}

// Workload is one of the DGD's workloads as the pass observed it.
type Workload struct {
	backends.Workload
	// Backend is the Kind of the backend that manages it (Description.Kind).
	Backend string
	// Pods counts its replicas that still have pods, terminating ones included (a gang
	// counts while any of its pods is left): Recreate waits for them, and a revision
	// with pods is in use.
	Pods int32
}

// Objects are the DGD's objects besides its workloads and revisions, as the cache (or,
// for the Secret, the API server) shows them.
type Objects struct {
	// Services and Ingresses are those the DGD controls.
	Services  []corev1.Service
	Ingresses []networkingv1.Ingress
	// Named are the objects of the names Lookups lists, by Lookup.Key; an object
	// missing from the map does not exist (or is not in the cache).
	Named map[string]client.Object
}

// Discovery is what the DGD's discovery EndpointSlices publish (Kubernetes discovery;
// empty under etcd discovery), by Service: a slice belongs to the Service that
// controls it, by UID, so a slice left by an earlier Service of the same name is not
// taken for the new one's.
type Discovery struct {
	// Ready counts each Service's ready endpoints.
	Ready map[types.UID]int
	// Published holds the Services that have any slice.
	Published map[types.UID]bool
}

// UnscheduledPod is a pod of a DGD that the scheduler reported it could not place.
type UnscheduledPod struct {
	Graph, Service, Hash string
	// Message is the PodScheduled condition's message.
	Message string
}

// Measure names one measurement of an analysis step: the rollout (the update
// revision and its attempt), the step (its index, and when it started in Unix seconds
// as the status records it), the metric, which of its measurements (Index: how many
// were recorded before it, errors included) and the query as rendered. A result is
// taken only by the measurement it was asked for: a rollout restarted or retried, a
// step changed, a query edited or a measurement recorded since make another Measure.
type Measure struct {
	Revision int64
	Attempt  int32
	Step     int
	Start    int64
	Metric   string
	Index    int32
	Query    string
}
