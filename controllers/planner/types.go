package planner

// Strategy is how the worker services move from old revisions to the update revision.
type Strategy string

const (
	// RollingUpdate moves replicas between revisions within maxSurge and maxUnavailable,
	// keeping every revision's pool in ratio. It is the default (also for "").
	RollingUpdate Strategy = "RollingUpdate"
	// Recreate scales every old revision to zero, waits until its pods are gone, then
	// starts the update revision at full size.
	Recreate Strategy = "Recreate"
)

// Worker roles. Role is informational: the orphan rule applies to every pair of worker
// services with desired replicas, whatever their roles (see the package doc).
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
	RoleWorker  = "worker"
)

// IntOrPercent is a replica count or a percentage of a total, like intstr.IntOrString.
type IntOrPercent struct {
	Value   int32
	Percent bool
}

// ServiceSpec is one worker service of the graph.
type ServiceSpec struct {
	Name string
	// Role is "prefill", "decode" or "worker".
	Role string
	// Replicas is R_s, the desired replica count; a replica is a pod or a whole gang.
	// 0 retires the service: it drains with the pools that still hold it.
	Replicas int32
	// MaxSurge and MaxUnavailable are already merged with per-service overrides.
	MaxSurge       IntOrPercent
	MaxUnavailable IntOrPercent
	// UnreadyFirst is true when scaling a workload down removes unready replicas first
	// (Deployment/ReplicaSet). False (StatefulSet-based LWS) means the highest index goes
	// whatever its readiness, so the planner assumes the worst: ready replicas go first.
	UnreadyFirst bool
}

// Spec is the desired state of the graph's worker services.
type Spec struct {
	Services []ServiceSpec
	Strategy Strategy
	// Partition is how much of every service stays on the old revision; nil means 0.
	// Ignored by Recreate.
	Partition *IntOrPercent
	// Paused freezes a rollout in progress (see the package doc for first deploys).
	Paused bool
}

// Workload is the observed state of one (service, revision) workload.
type Workload struct {
	Service string
	// Revision is the ControllerRevision number; higher is newer.
	Revision int64
	// Spec is the replica count currently set on the workload.
	Spec int32
	// Current counts the replicas that exist, including unready and terminating ones.
	Current int32
	// Ready is the workload's ready count. Inputs must be observed after the workload
	// controller has processed the last write (status.observedGeneration), else a
	// stale Ready can overstate availability.
	Ready int32
}

// Input is everything the planner decides from.
type Input struct {
	Spec Spec
	// UpdateRevision is the revision every service should end on.
	UpdateRevision int64
	// Workloads lists every existing workload, any revision. The update revision's may
	// be missing (counted as 0); any other revision is old, whatever its number.
	Workloads []Workload
}

// Target is one replica count the caller must set.
type Target struct {
	Service  string
	Revision int64
	Replicas int32
}

// Phase summarises what a Plan does.
type Phase string

const (
	// PhaseCompleted: every service is at R_s and ready on the update revision, every
	// old workload is at 0.
	PhaseCompleted Phase = "Completed"
	// PhaseInProgress: the plan changes at least one replica count.
	PhaseInProgress Phase = "InProgress"
	// PhasePaused: Spec.Paused holds a rollout in progress; targets equal current specs.
	PhasePaused Phase = "Paused"
	// PhasePartitioned: the partition split is reached and ready.
	PhasePartitioned Phase = "Partitioned"
	// PhaseWaiting: nothing can move until replicas become ready or old pods terminate.
	PhaseWaiting Phase = "Waiting"
	// PhaseBlocked: every replica is ready yet no step keeps the invariants (a budget
	// combination no sequence of steps can satisfy; see the package doc). Only a spec
	// change (budgets, replicas, strategy) unblocks it.
	PhaseBlocked Phase = "Blocked"
)

// Plan is the planner's output for one reconcile pass.
type Plan struct {
	// Targets has one entry per workload of the input and one per spec service on the
	// update revision, sorted by service then revision. A 0 target for a workload that
	// does not exist needs no object. Apply every decrease before any increase: then
	// surge and availability also hold between the individual writes (the ratio holds
	// at plan granularity).
	Targets []Target
	Phase   Phase
	// Reason is human readable, e.g. "waiting for 2 decode replicas of revision 3 to
	// become ready".
	Reason string
	// Done is true in PhaseCompleted only; a reached partition is PhasePartitioned.
	Done bool
}
