package v1alpha1

// Reasons of status.rollingUpdate.reason and of the conditions.
const (
	// ReasonRollingUpdate: workers are moving to the update revision.
	ReasonRollingUpdate = "RollingUpdate"
	// ReasonPartitioned: the rollout holds at spec.rollout.partition.
	ReasonPartitioned = "Partitioned"
	// ReasonPaused: spec.rollout.paused holds the rollout.
	ReasonPaused = "Paused"
	// ReasonRolloutBlocked: no step keeps the invariants with these budgets.
	ReasonRolloutBlocked = "RolloutBlocked"
	// ReasonRolloutCompleted: every worker is on the update revision.
	ReasonRolloutCompleted = "RolloutCompleted"
	// ReasonProgressDeadlineExceeded: no progress for progressDeadlineSeconds.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonInvalidSpec: a spec no retry can fix (Ready False).
	ReasonInvalidSpec = "InvalidSpec"

	// Progressing condition.
	ReasonRolloutInProgress    = "RolloutInProgress"
	ReasonNewRevisionAvailable = "NewRevisionAvailable"
	// Available condition.
	ReasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// Ready condition (also ReasonPartitioned and ReasonPaused: every replica ready,
	// the rollout held on purpose).
	ReasonAllReplicasReady = "AllReplicasReady"
	ReasonReplicasNotReady = "ReplicasNotReady"
	// Reconciling condition: True with ReasonRollingUpdate or ReasonReplicasNotReady
	// (a scale or pods still starting), False with ReasonSettled, ReasonPartitioned or
	// ReasonPaused. Stalled: True with ReasonProgressDeadlineExceeded,
	// ReasonRolloutBlocked or ReasonInvalidSpec, else False with ReasonNotStalled.
	ReasonSettled    = "Settled"
	ReasonNotStalled = "NotStalled"
)

// Reasons of the Events the operator emits about a DGD. Every step of a rollout is one
// RolloutStep Event naming each workload it scaled, created or deleted and each object
// it wrote; a step that only wrote objects is one ObjectsUpdated Event.
const (
	EventRolloutStarted = "RolloutStarted"
	EventRolloutStep    = "RolloutStep"
	// EventRolloutStepEnded: a step of spec.rollout.steps ended (its partition reached,
	// its pause over, or promoted).
	EventRolloutStepEnded         = "RolloutStepEnded"
	EventObjectsUpdated           = "ObjectsUpdated"
	EventRolloutCompleted         = "RolloutCompleted"
	EventRolloutPartitioned       = "Rollout" + ReasonPartitioned
	EventRolloutPaused            = "Rollout" + ReasonPaused
	EventRolloutBlocked           = ReasonRolloutBlocked
	EventProgressDeadlineExceeded = ReasonProgressDeadlineExceeded
	EventInvalidSpec              = ReasonInvalidSpec
	// EventPodsUnschedulable (Warning): a service's pods the scheduler cannot place,
	// with its reason (status.services[].message says the same).
	EventPodsUnschedulable = "PodsUnschedulable"
)
