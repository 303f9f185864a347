// Package backends defines the one interface every workload backend implements
// (Deployment, LeaderWorkerSet, Grove PodCliqueSet / PodCliqueScalingGroup) and the
// helpers they share: workload names, labels and the pod template built from a service.
//
// A backend renders, observes and scales workloads; it never decides. Which replica
// count each workload should have is the planner's decision (controllers/planner), and
// the reconciler (controllers) wires the two. Optional capabilities are separate small
// interfaces detected by type assertion, in the style of Kueue's jobframework.
package backends

import (
	"context"

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
	// Kind and Name of the object, e.g. Deployment "vllm-decode-7c9f8d".
	Kind string
	Name string
	// Replicas is the replica count set on the workload.
	Replicas int32
	// Ready is the number of ready replicas as the workload reports them (Deployment
	// availableReplicas, LWS readyReplicas, PCSG availableReplicas...).
	Ready int32
	// Updated is the number of replicas running the workload's current template.
	Updated int32
	// Current is the number of replicas the workload reports existing.
	Current int32
}

// Backend renders, observes and scales the workloads of a DGD on one workload kind.
// Every method is idempotent: AlreadyExists and NotFound count as success.
type Backend interface {
	// Kind is the workload kind this backend manages, e.g. "Deployment".
	Kind() string
	// Name is the name of the object that holds key's replicas (what Observe reports).
	Name(dgd *v1alpha1.DynamoGraphDeployment, key Key) string
	// Ensure makes every workload of pool exist. A missing workload is created with its
	// Replicas. A stable workload (pool.Hash == "") also gets its template and replicas
	// updated in place when they differ. A worker workload's template is never changed
	// after creation: a new template is a new revision, hence a new workload.
	Ensure(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pool Pool) error
	// Observe lists every workload of this kind that the DGD controls.
	Observe(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]Workload, error)
	// Scale sets the replica count of one existing workload; no write when already equal.
	Scale(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, key Key, replicas int32) error
	// Delete removes one workload (its pods are garbage-collected).
	Delete(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, key Key) error
	// Objects are the types the controller must watch (owned by the DGD).
	Objects() []client.Object
}

// UnreadyFirstScaler is implemented by a backend whose scale-down removes unready
// replicas before ready ones (a ReplicaSet does; a StatefulSet removes the highest index).
// The planner then counts removing unready replicas as free.
type UnreadyFirstScaler interface {
	ScaleDownRemovesUnreadyFirst() bool
}

// LabelWatcher is implemented by a backend whose replica-holding objects are not owned
// by the DGD (Grove's PodCliques belong to their PodCliqueSet). The controller watches
// these types and maps an object to its DGD by the LabelGraph label.
type LabelWatcher interface {
	Watched() []client.Object
}

// RemovesUnreadyFirst reports whether b implements UnreadyFirstScaler and says true.
func RemovesUnreadyFirst(b Backend) bool {
	u, ok := b.(UnreadyFirstScaler)
	return ok && u.ScaleDownRemovesUnreadyFirst()
}
