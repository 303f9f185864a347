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
	// ReasonNameConflict: an object the DGD needs (a workload, Service, Ingress,
	// ServiceAccount, Role, RoleBinding or ConfigMap) exists under the name it needs but
	// is not the DGD's. The operator leaves it alone and never counts it as created:
	// Ready False and Stalled True name the object until it is gone or renamed.
	ReasonNameConflict = "NameConflict"
	// ReasonWriteRefused: the API server refused a write of the pass for what it is
	// (400 Bad Request, 413 Request Entity Too Large, 422 Invalid: a label or name over
	// its limit, an Ingress host that is no DNS name, an object too large, an admission
	// policy's denial). Retrying the same write cannot help: Ready False and Stalled
	// True, with a message naming the object and the API server's own message, until the
	// spec or what the API server admits changes. The writes before it stay; none after
	// it is made.
	ReasonWriteRefused = "WriteRefused"
	// ReasonNamespaceTerminating: the DGD's namespace is being deleted, and the API
	// server refuses every new object in it (403, cause NamespaceTerminating): the
	// operator stops acting on the DGD, which goes with its namespace.
	ReasonNamespaceTerminating = "NamespaceTerminating"
	// ReasonObserveFailed: a read the pass decides from failed (a list the operator's
	// RBAC does not allow, a CRD removed): the message names the resource; retried.
	ReasonObserveFailed = "ObserveFailed"
	// ReasonDynamoIngressHeld: condition TakeOverHeld, the take-over from Dynamo's
	// operator waits before deleting its DCDs (EventDynamoIngressHeld).
	ReasonDynamoIngressHeld = "DynamoIngressHeld"
	// ReasonWriteForbidden: the API server forbade a write of the pass (403: the
	// operator's RBAC, a ResourceQuota exceeded, a namespace being deleted). Retrying
	// can help once that changes: Ready False and Reconciling True, retried with
	// backoff; the message names the object and the API server's message.
	ReasonWriteForbidden = "WriteForbidden"
	// ReasonAnalysisRunning: an analysis step measures its metrics (phase Paused).
	ReasonAnalysisRunning = "AnalysisRunning"
	// ReasonAnalysisInconclusive: an analysis step could not decide (inconclusive
	// measurements, or queries that kept failing); the rollout holds until promoted or
	// aborted (phase Paused).
	ReasonAnalysisInconclusive = "AnalysisInconclusive"
	// ReasonAnalysisFailed: a metric of an analysis step failed and the rollout was
	// aborted (phase Aborted).
	ReasonAnalysisFailed = "AnalysisFailed"
	// ReasonRolloutAborted: "kubectl dgd rollout abort" aborted the rollout (phase
	// Aborted).
	ReasonRolloutAborted = "RolloutAborted"

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
	// ReasonRecreating: under the Recreate strategy the running revision's workers are
	// taken down before the update revision starts. Ready turns False with it before the
	// first write that takes a pod away, so no reader sees Ready over a graph that cannot
	// route.
	ReasonRecreating = "Recreating"
	// Reconciling condition: True with ReasonRollingUpdate or ReasonReplicasNotReady
	// (a scale or pods still starting), False with ReasonSettled, ReasonPartitioned or
	// ReasonPaused. Stalled: True with ReasonProgressDeadlineExceeded,
	// ReasonRolloutBlocked, ReasonInvalidSpec, ReasonNameConflict or
	// ReasonWriteRefused, else False with ReasonNotStalled (Reconciling True with
	// ReasonWriteForbidden while a forbidden write is retried).
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
	EventRolloutStepEnded   = "RolloutStepEnded"
	EventObjectsUpdated     = "ObjectsUpdated"
	EventRolloutCompleted   = "RolloutCompleted"
	EventRolloutPartitioned = "Rollout" + ReasonPartitioned
	EventRolloutPaused      = "Rollout" + ReasonPaused
	// EventRolloutAnalysisRunning: the rollout holds at an analysis step while it measures.
	EventRolloutAnalysisRunning   = "Rollout" + ReasonAnalysisRunning
	EventRolloutBlocked           = ReasonRolloutBlocked
	EventProgressDeadlineExceeded = ReasonProgressDeadlineExceeded
	EventInvalidSpec              = ReasonInvalidSpec
	// EventNameConflict (Warning): an object the DGD needs is someone else's (its kind,
	// name and controller).
	EventNameConflict = ReasonNameConflict
	// EventWriteRefused (Warning): the API server refused a write (the object and the
	// API server's message); EventWriteForbidden (Warning): it forbade one (retried).
	EventWriteRefused   = ReasonWriteRefused
	EventWriteForbidden = ReasonWriteForbidden
	// EventPodsUnschedulable (Warning): a service's pods the scheduler cannot place,
	// with its reason (status.services[].message says the same).
	EventPodsUnschedulable = "PodsUnschedulable"
	// EventAnalysisSucceeded: an analysis step passed (every metric and its values).
	EventAnalysisSucceeded = "AnalysisSucceeded"
	// EventAnalysisInconclusive (Warning): an analysis step could not decide; the
	// rollout holds until promoted or aborted.
	EventAnalysisInconclusive = ReasonAnalysisInconclusive
	// EventAnalysisFailed (Warning): a metric failed (its name, value and condition);
	// the rollout is aborted.
	EventAnalysisFailed = ReasonAnalysisFailed
	// EventRolloutAborted (Warning): the rollout was aborted by a person.
	EventRolloutAborted = ReasonRolloutAborted
	// EventRolloutAbortCompleted: every worker is back on the stable revision.
	EventRolloutAbortCompleted = "RolloutAbortCompleted"
	// EventRolloutRetried: a retry started the aborted rollout again from its first step.
	EventRolloutRetried = "RolloutRetried"
	// EventRolloutStepsSkipped: the spec went back to the stable revision's workers (an
	// undo during a canary): they return at once, without the steps.
	EventRolloutStepsSkipped = "RolloutStepsSkipped"
	// EventRestartStarted: a new spec.restart.id started a restart of every component
	// (its id, the revision it rolls to, how the strategy maps onto the rollout).
	EventRestartStarted = "RestartStarted"
	// EventRestartCompleted: every component runs the restarted template.
	EventRestartCompleted = "RestartCompleted"
	// EventRestartSuperseded: another id or a spec change came before the restart
	// completed (the newer rollout replaces the same pods).
	EventRestartSuperseded = "RestartSuperseded"
	// EventRestartFailed (Warning): the rollout the restart started was aborted or failed.
	EventRestartFailed = "RestartFailed"
	// EventTrafficShifted: the pass asked a new split of the traffic between cohorts
	// (each changed cohort's revision and weight; status.cohorts has them all).
	EventTrafficShifted = "TrafficShifted"
)

// Reasons of cohorts and traffic (status.rollingUpdate.reason while the workers hold).
const (
	// ReasonTrafficDraining: a cohort the rollout removes waits until its weight 0 is in
	// effect and its requests in flight are done.
	ReasonTrafficDraining = "TrafficDraining"
	// ReasonCohortPrelude: the shared frontend is replaced by the live revision's cohort
	// frontend before another revision starts (spec.rollout.frontends).
	ReasonCohortPrelude = "CohortPrelude"
	// ReasonWaitingForCapacity: a setWeight step waits until the new revision's cohort
	// has that share of the ready capacity.
	ReasonWaitingForCapacity = "WaitingForCapacity"
	// ReasonTrafficNotServing (Ready False, a Warning Event): the DGD has cohorts and
	// its traffic provider routes nothing yet, or no more (a parent Gateway that does
	// not exist or has not accepted the route, no ready proxy replica that applied a
	// split): the message names the object.
	ReasonTrafficNotServing = "TrafficNotServing"
)

// ReasonDynamoOperatorActive (Ready False, Stalled True): the DGD still runs workloads
// Dynamo's own operator made, and that operator may still act on them (neither its
// namespace-scope Lease is held nor is the DGD paused with its components released):
// the operator takes nothing over until it is stopped (README, "Moving over from
// Dynamo's operator").
const ReasonDynamoOperatorActive = "DynamoOperatorActive"

// ReasonDynamoTakeOverUnsupported (Ready False, Stalled True): the DGD runs workloads
// Dynamo's own operator made that this operator cannot take over safely: a Grove
// PodCliqueSet of Dynamo's of a shape it does not handle, without the Grove backend, or
// under a rollout its minAvailable would deadlock (maxSurge below it, Recreate); a
// LeaderWorkerSet of a non-worker component. It writes nothing, neither beside them nor
// over them, while they run; the message says why (docs/moving-over.md, "On Grove").
const ReasonDynamoTakeOverUnsupported = "DynamoTakeOverUnsupported"

// EventDynamoIngressHeld (Warning): a take-over has drained Dynamo's workloads, but an
// object exposing the graph that one of Dynamo's DCDs still controls is not rendered by
// this DGD: an Ingress (Dynamo's operator's default ingress, or a
// services.<name>.ingress the spec no longer has) or an Istio VirtualService (this
// operator renders none). Deleting the DCDs would have the garbage collector delete it,
// so the take-over holds before that until the spec renders it (an Ingress is then
// adopted), someone deletes it, or removes its owner reference (docs/moving-over.md).
const EventDynamoIngressHeld = "DynamoIngressHeld"
