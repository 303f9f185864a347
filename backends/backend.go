// Package backends defines the one interface every workload backend implements
// (Deployment, LeaderWorkerSet, Grove PodCliqueSet / PodCliqueScalingGroup) and the
// helpers they share: workload names, labels and the pod template built from a service.
//
// A backend renders, observes and scales workloads; it never decides. Which replica
// count each workload should have is the planner's decision (controllers/planner), and
// the reconciler (controllers) wires the two. Observe only reads: what it finds out of
// place (labels stripped by hand) it reports, and the controller decides the write
// (Relabel). What the controller must know of a backend to decide is data, its
// Description; the optional capabilities that act (SubdomainReleaser) or read
// (GangLeaders, OwnerChainWatcher) are separate small interfaces detected by type
// assertion, in the style of Kueue's jobframework.
//
// Deployment and LeaderWorkerSet keep one object per (service, revision) with
// .spec.replicas and share one adapter (backends/single); Grove keeps a revision in one
// PodCliqueSet and has its own (backends/grove).
package backends

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Key identifies one workload of a DGD: a service at a worker revision. Hash is empty
// for a stable (non-worker) service such as the frontend, which is updated in place.
type Key struct {
	Service string
	Hash    string
}

// ServiceWorkload is what a backend renders for one (service, revision).
type ServiceWorkload struct {
	Key
	// Spec is the service's template at that revision (for an old revision, restored from
	// its ControllerRevision).
	Spec *v1alpha1.DynamoComponentDeploymentSharedSpec
	// Replicas is the replica count to create the workload with. For a stable workload it
	// is also applied to an existing one; a worker workload is scaled only through Scale.
	Replicas int32
	// InPlace: a revision workload (Hash set) whose template Ensure updates in place, as
	// a stable workload's, while its replicas move only through Scale: a cohort's
	// frontend, which a frontend-only change updates in its goal revision. The backend
	// renders it so that its own update keeps it available (a Deployment's
	// RollingUpdate, never Recreate).
	InPlace bool
}

// Pool is the set of workloads of one worker revision, or of the stable services
// (Hash == ""). A backend that holds a whole revision in one object (Grove) needs them
// together.
type Pool struct {
	Hash     string
	Services []ServiceWorkload
}

// Workload is the observed state of one workload, in replicas (pods, or whole gangs).
type Workload struct {
	Key
	// Kind and Name of the object, e.g. Deployment "vllm-decode-7c9f8d", and the UID
	// it had when observed: Delete deletes that object only (DeleteObject's UID
	// precondition), never another one made under its name since.
	Kind string
	Name string
	UID  types.UID
	// Group is the object that holds this workload together with others and is only
	// ever deleted whole (Grove: the PodCliqueSet of a revision), or nil when the
	// workload is its own object.
	Group *ObjectRef
	// Replicas is the replica count set on the workload.
	Replicas int32
	// Ready is the number of ready replicas as the workload reports them (Deployment
	// availableReplicas, LWS readyReplicas, PCSG availableReplicas...).
	Ready int32
	// Updated is the number of replicas running the workload's current template.
	Updated int32
	// Current is the number of replicas the workload reports existing.
	Current int32
	// Synced reports that the workload's status describes its latest spec
	// (status.observedGeneration >= metadata.generation). Counts of an unsynced
	// workload can overstate readiness: a pass does not plan from them (see the
	// controller's freshness wait).
	Synced bool
	// Generation is metadata.generation of the object Synced refers to.
	Generation int64
	// Terminating reports that the workload (or its group) is being deleted: it counts
	// with zero replicas until its pods are gone.
	Terminating bool
	// Outdated (stable workloads only) reports that the workload runs another template
	// than the one the spec renders now. Backends that update stable workloads in place
	// never report one after Ensure; a StableSideBySide backend keeps it until the
	// controller deletes it.
	Outdated bool
	// Relabel lists the labels the object holding the workload (its Group's, when it has
	// one) lacks or has changed from what the backend gives it: someone stripped them
	// (kubectl replace). Users and kubectl dgd select workloads by them; Observe finds
	// the workload anyway (by its controller and immutable fields) and reports them, and
	// the controller puts them back with Backend.Relabel. Nil when in place.
	Relabel map[string]string
}

// ObjectRef names an object of the DGD's namespace, and its UID when observed.
type ObjectRef struct {
	Kind string
	Name string
	UID  types.UID
}

// String is "Kind name".
func (o ObjectRef) String() string { return o.Kind + " " + o.Name }

// Description is what the controller knows of a backend without asking it anything:
// its workload kind and how it behaves, as data. The controller decides from it alone
// (controllers/decide), so everything in it is pure: no field reads the cluster.
type Description struct {
	// Kind is the workload kind this backend manages, e.g. "Deployment".
	Kind string
	// HoldsPools: the backend holds a worker revision's workloads in one object
	// (Grove's PodCliqueSet). The controller creates the pool whole, with every worker
	// service the backend runs, never adds a service to an existing one, and deletes it
	// whole once the plan drains it.
	HoldsPools bool
	// StableSideBySide: the backend cannot update a stable workload's template in place
	// without losing availability (Grove's RollingRecreate deletes a pod before it
	// creates its replacement, so a one-replica frontend would serve nothing for a
	// while). It creates a workload for the new template next to the old one; the
	// controller deletes the old one once the new one has enough ready replicas.
	StableSideBySide bool
	// RemovesUnreadyFirst: a scale-down removes unready replicas before ready ones (a
	// ReplicaSet does; a StatefulSet, under a LeaderWorkerSet, removes the highest
	// index whatever its readiness). The planner then counts removing unready replicas
	// as free.
	RemovesUnreadyFirst bool
	// ReleasesSubdomain: the workload's controller creates a headless Service under the
	// workload's own name only when none exists and looks again only on an event of the
	// workload (LWS: reconcileHeadlessServices). When the controller deletes a Service
	// of its own of that name (an operator before issue 22 named a revision's discovery
	// Service so), it tells the backend (SubdomainReleaser).
	ReleasesSubdomain bool
	// ReadyIsPodReady: a replica is one pod, ready exactly when the pod's Ready
	// condition is true (a Deployment of minReadySeconds 0, which the controller never
	// sets: its available count is its Ready pods). Its status says so two controller
	// hops after the pod (the ReplicaSet's status, then the Deployment's), the discovery
	// EndpointSlice one hop after it: under Kubernetes discovery the controller counts
	// such a workload's ready replicas from its discovery endpoints (controllers'
	// observeDiscovery), and a step starts a hop sooner.
	ReadyIsPodReady bool
	// Names is Backend.Name when it reads nothing: a workload's name from the DGD and
	// its key alone. Nil when the name depends on the cluster (Grove picks the first
	// free PodCliqueSet name): the controller asks Backend.Name, once per key it needs.
	Names func(dgd *v1alpha1.DynamoGraphDeployment, key Key) string
	// Validate reports the backend's own limits on a DGD's spec for the services it
	// runs (Grove: the length of the names it derives) as an error the controller
	// reports as InvalidSpec before anything is written; nil: no limits of its own.
	Validate func(dgd *v1alpha1.DynamoGraphDeployment, services []string) error
}

// Backend renders, observes and scales the workloads of a DGD on one workload kind.
// Every method is idempotent: AlreadyExists and NotFound count as success.
type Backend interface {
	// Describe is the backend's Description; it never changes.
	Describe() Description
	// Name is the name of the object that holds key's replicas (what Observe reports)
	// for the DGD's current spec.
	Name(dgd *v1alpha1.DynamoGraphDeployment, key Key) string
	// Ensure makes every workload of pool exist. A missing workload is created with its
	// Replicas. A stable workload (pool.Hash == "") also gets its template and replicas
	// updated in place when they differ, unless the backend is StableSideBySide (then a
	// new template is a new workload next to the old one, which the controller deletes
	// once the new one is ready). A worker workload's template is never changed after
	// creation: a new template is a new revision, hence a new workload.
	Ensure(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pool Pool) error
	// Observe lists every workload of this kind that the DGD controls, including
	// outdated stable ones and those being deleted (Terminating). It only reads.
	Observe(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]Workload, error)
	// Relabel puts w.Relabel on the object holding w (its Group, when it has one); an
	// object already gone is not an error.
	Relabel(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w Workload) error
	// Scale sets the replica count of one existing workload of the current spec; no
	// write when already equal. w is the workload as Observe reported it (its Key, and
	// its Name when observed: an object named by an earlier version of the operator
	// under another name is scaled under the name it has), or only a Key.
	Scale(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w Workload, replicas int32) error
	// Delete removes the object holding w: w itself, or its Group when it has one (the
	// controller deletes a group only once every workload in it may go). Its pods are
	// garbage-collected.
	Delete(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w Workload) error
	// Objects are the types the controller must watch (owned by the DGD).
	Objects() []client.Object
}

// OwnerChainWatcher is implemented by a backend whose replica-holding objects are not
// owned by the DGD directly (Grove's PodCliques and PodCliqueScalingGroups belong to
// their PodCliqueSet, a scaling group's PodCliques to the group). The controller
// watches these types and maps an object to its DGD up its chain of controller
// references, never by labels: Grove does not copy the DGD's labels onto every object.
type OwnerChainWatcher interface {
	Watched() []client.Object
}

// GangLeaders is implemented by a backend whose replicas can be gangs of several pods
// of which only the leader runs the replica's Dynamo runtime, the one pod Dynamo's
// discovery must find for the replica to be routed to (DYNAMO.md: worker pods of a
// gang start no runtime; Dynamo's discovery Service selects only leaders on LWS).
type GangLeaders interface {
	// Leader reports whether a pod with these labels is its replica's leader (a pod of
	// a single-node replica is its own).
	Leader(podLabels map[string]string) bool
}

// RunsRuntime reports whether a pod of b with these labels runs its replica's Dynamo
// runtime: every pod, but a gang's non-leaders.
func RunsRuntime(b Backend, podLabels map[string]string) bool {
	g, ok := b.(GangLeaders)
	return !ok || g.Leader(podLabels)
}

// SubdomainReleaser is implemented by a backend whose Description says
// ReleasesSubdomain: once the controller deletes a Service of its own named like a
// workload, ReleaseSubdomain gives the workload's controller the event it needs to
// create its own headless Service.
type SubdomainReleaser interface {
	ReleaseSubdomain(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, workload string) error
}
