package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BackendType selects the workload kind the services run on.
// +kubebuilder:validation:Enum=Auto;Deployment;LeaderWorkerSet;Grove
type BackendType string

// Backends.
const (
	// BackendAuto uses Deployment for single-node services, LeaderWorkerSet for multinode.
	BackendAuto            BackendType = "Auto"
	BackendDeployment      BackendType = "Deployment"
	BackendLeaderWorkerSet BackendType = "LeaderWorkerSet"
	BackendGrove           BackendType = "Grove"
)

// RolloutStrategyType is how worker revisions replace each other.
// +kubebuilder:validation:Enum=RollingUpdate;Recreate
type RolloutStrategyType string

// Strategies.
const (
	RollingUpdateStrategy RolloutStrategyType = "RollingUpdate"
	RecreateStrategy      RolloutStrategyType = "Recreate"
)

// RolloutSpec controls how a new worker revision replaces the old one.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.maxSurge) && has(self.maxUnavailable) && string(self.maxSurge) in ['0', '0%'] && string(self.maxUnavailable) in ['0', '0%'])",message="spec.rollout.maxSurge and spec.rollout.maxUnavailable cannot both be 0",fieldPath=".maxUnavailable"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || size(self.steps) == 0 || !has(self.partition) || string(self.partition) in ['0', '0%']",message="spec.rollout.partition cannot be set with spec.rollout.steps: the steps set the partition",fieldPath=".partition"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || size(self.steps) == 0 || !has(self.strategy) || self.strategy != 'Recreate'",message="spec.rollout.steps need strategy RollingUpdate: Recreate has no split to hold",fieldPath=".steps"
type RolloutSpec struct {
	// Strategy is RollingUpdate (side by side, the default) or Recreate (old workers gone
	// before new ones start).
	// +optional
	// +kubebuilder:default=RollingUpdate
	Strategy RolloutStrategyType `json:"strategy,omitempty"`
	// MaxSurge is how many replicas of each worker service may exist above its desired
	// count: an integer or a percentage (rounded up). Default 25%.
	// +optional
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="must be a non-negative integer or a percentage such as 25%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
	// MaxUnavailable is how many replicas of each worker service may be unavailable below
	// its desired count: an integer or a percentage (rounded down). Default 25%.
	// +optional
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="must be a non-negative integer or a percentage such as 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// Partition keeps part of every worker service on the old revision (a canary): a
	// percentage of each service, or a count relative to the largest worker service.
	// 0 (the default) completes the rollout.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="must be a non-negative integer or a percentage from 0% to 100%"
	Partition *intstr.IntOrString `json:"partition,omitempty"`
	// Paused freezes all scaling of worker workloads at the current split.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// Steps make a canary of every worker rollout: an ordered list of holds, each a
	// partition the rollout moves to and holds until reached, or a pause (for a duration,
	// or until "kubectl dgd rollout promote"). After the last step the rollout completes.
	// Each step keeps every invariant of a rollout (availability, surge, ratio,
	// isolation). A rollout with nothing to move (a first deploy, a change of stable
	// services only) skips them.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Steps []RolloutStep `json:"steps,omitempty"`
	// ProgressDeadlineSeconds is how long a rollout may make no progress before it is
	// reported Failed (ProgressDeadlineExceeded). It keeps trying. Default 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
}

// RolloutStep is one step of a stepped rollout: exactly one of partition and pause.
//
// +kubebuilder:validation:XValidation:rule="has(self.partition) != has(self.pause)",message="a step sets exactly one of partition and pause"
type RolloutStep struct {
	// Partition moves the rollout until that much of every worker service is left on the
	// old revision (as spec.rollout.partition) and holds there until the step ends: as
	// soon as the split is reached and ready. A step may not raise the partition of an
	// earlier step. A non-negative integer or a percentage from 0% to 100% (checked by
	// the operator, reason InvalidSpec: a CEL rule per list item would exceed the API
	// server's cost budget).
	// +optional
	// +kubebuilder:validation:XIntOrString
	Partition *intstr.IntOrString `json:"partition,omitempty"`
	// Pause holds the rollout at the split the previous steps reached.
	// +optional
	Pause *RolloutPause `json:"pause,omitempty"`
}

// RolloutPause is a pause step.
type RolloutPause struct {
	// Duration of the pause, e.g. 10m. Without it, the rollout waits until promoted
	// ("kubectl dgd rollout promote").
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must not be negative"
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// DynamoGraphDeploymentSpec is a graph of services: a frontend and workers.
//
// +kubebuilder:validation:XValidation:rule="!has(self.services) || self.services.filter(k, has(self.services[k].componentType) && self.services[k].componentType == 'frontend').size() <= 1",message="at most one service may have componentType frontend",fieldPath=".services"
// +kubebuilder:validation:XValidation:rule="!has(self.backend) || self.backend != 'Deployment' || !has(self.services) || self.services.all(k, !has(self.services[k].multinode) || self.services[k].multinode.nodeCount < 2)",message="backend Deployment cannot run multinode services (multinode.nodeCount >= 2): use Auto, LeaderWorkerSet or Grove",fieldPath=".backend"
type DynamoGraphDeploymentSpec struct {
	// DynamoGraph is accepted for compatibility.
	// +optional
	DynamoGraph string `json:"dynamoGraph,omitempty"`
	// BackendFramework (sglang, vllm, trtllm) is accepted for compatibility.
	// +optional
	BackendFramework string `json:"backendFramework,omitempty"`
	// PVCs are kept as given.
	// +optional
	PVCs []runtime.RawExtension `json:"pvcs,omitempty"`
	// Services by name. Names become part of workload names: letters, digits and '-'.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 40 && k.matches('^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$'))",message="service names must be at most 40 letters, digits or '-', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",message="service names must differ in more than letter case: they become lower-case workload names"
	Services map[string]*DynamoComponentDeploymentSharedSpec `json:"services,omitempty"`
	// Envs are added to every service's main container.
	// +optional
	Envs []corev1.EnvVar `json:"envs,omitempty"`
	// Backend selects the workload kind: Auto (default: Deployment for single-node
	// services, LeaderWorkerSet for multinode ones), Deployment, LeaderWorkerSet or Grove.
	// +optional
	// +kubebuilder:default=Auto
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.backend is immutable: changing it would move the frontend to another workload kind by deleting and recreating it; create a new DynamoGraphDeployment instead"
	Backend BackendType `json:"backend,omitempty"`
	// Rollout controls worker rollouts.
	// +optional
	// +kubebuilder:default={}
	Rollout *RolloutSpec `json:"rollout,omitempty"`
	// RevisionHistoryLimit is how many old worker revisions to keep. Default 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// RolloutPhase is where a worker rollout stands.
// +kubebuilder:validation:Enum=Pending;InProgress;Paused;Completed;Failed
type RolloutPhase string

// Phases.
const (
	RolloutPending    RolloutPhase = "Pending"
	RolloutInProgress RolloutPhase = "InProgress"
	RolloutPaused     RolloutPhase = "Paused"
	RolloutCompleted  RolloutPhase = "Completed"
	RolloutFailed     RolloutPhase = "Failed"
)

// Condition types.
const (
	ConditionAvailable   = "Available"
	ConditionProgressing = "Progressing"
	ConditionReady       = "Ready"
	// ConditionReconciling is True while a rollout or a scale is under way (kstatus:
	// InProgress), False once the DGD has settled where its spec asks.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the operator cannot go on without a spec change
	// (ProgressDeadlineExceeded, RolloutBlocked, InvalidSpec; kstatus: Failed).
	ConditionStalled = "Stalled"
)

// RollingUpdateStatus describes the current (or last) worker rollout.
type RollingUpdateStatus struct {
	// Phase is Pending, InProgress, Paused, Completed or Failed.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// Reason is a CamelCase reason for the phase, e.g. Partitioned or ProgressDeadlineExceeded.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains the phase.
	// +optional
	Message string `json:"message,omitempty"`
	// StartTime is when the rollout to updateRevision started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// EndTime is when it completed.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// LastProgressTime is when the rollout last moved a replica.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
	// UpdatedServices lists the worker services fully on updateRevision.
	// +optional
	UpdatedServices []string `json:"updatedServices,omitempty"`
	// CurrentStepIndex is the step of spec.rollout.steps the rollout to updateRevision
	// is at; the number of steps once they are done. Absent without steps.
	// +optional
	CurrentStepIndex *int32 `json:"currentStepIndex,omitempty"`
	// CurrentStepStartTime is when that step started.
	// +optional
	CurrentStepStartTime *metav1.Time `json:"currentStepStartTime,omitempty"`
}

// ServiceStatus is the observed state of one service.
type ServiceStatus struct {
	// ComponentType of the service.
	// +optional
	ComponentType string `json:"componentType,omitempty"`
	// Replicas is the sum of replicas set on the service's workloads.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas is the number of ready replicas (pods, or whole gangs).
	ReadyReplicas int32 `json:"readyReplicas"`
	// UpdatedReplicas is the number of replicas on updateRevision (or on the current
	// template, for a service updated in place).
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// AvailableReplicas is the number of ready replicas as the workload reports availability.
	AvailableReplicas int32 `json:"availableReplicas"`
	// WorkloadKind is Deployment, LeaderWorkerSet, PodCliqueSet...
	// +optional
	WorkloadKind string `json:"workloadKind,omitempty"`
	// Workloads are the service's workloads, newest revision first.
	// +optional
	Workloads []WorkloadStatus `json:"workloads,omitempty"`
	// RuntimeNamespaces are the effective Dynamo namespaces the service's replicas use.
	// +optional
	RuntimeNamespaces []string `json:"runtimeNamespaces,omitempty"`
	// Message says why the service is short of ready replicas when the operator knows,
	// e.g. "2 decode pods of revision 3 unschedulable: 0/4 nodes are available: 4
	// Insufficient nvidia.com/gpu".
	// +optional
	Message string `json:"message,omitempty"`
}

// WorkloadStatus is one workload of a service as the operator last observed it.
type WorkloadStatus struct {
	// Name of the workload object.
	Name string `json:"name"`
	// Revision is the worker revision number; 0 for a stable (in-place) workload.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// Replicas set on the workload.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas the workload reports.
	ReadyReplicas int32 `json:"readyReplicas"`
}

// DynamoGraphDeploymentStatus is the observed state of a graph.
type DynamoGraphDeploymentStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Available, Progressing and Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// CurrentRevision is the revision (a ControllerRevision recording the whole graph)
	// every worker was on before the rollout (StatefulSet convention: equals
	// UpdateRevision when no rollout is under way).
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`
	// UpdateRevision is the revision the rollout moves to: the ControllerRevision that
	// records the spec's whole graph.
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`
	// UpdateWorkerHash is the worker hash of UpdateRevision: the suffix of its worker
	// workloads and Dynamo namespace, and the nvidia.com/dynamo-worker-hash label of its
	// pods. Revisions that change only stable services (frontend, planner...) share it.
	// +optional
	UpdateWorkerHash string `json:"updateWorkerHash,omitempty"`
	// UpdateRevisionNumber is the ControllerRevision number of UpdateRevision.
	// +optional
	UpdateRevisionNumber int64 `json:"updateRevisionNumber,omitempty"`
	// CollisionCount counts hash collisions of worker revisions.
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`
	// Replicas, ReadyReplicas, UpdatedReplicas and AvailableReplicas sum the worker services.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
	// UpdatedReadyReplicas is the number of ready replicas on updateRevision, over every
	// worker service; the progress deadline measures its growth.
	// +optional
	UpdatedReadyReplicas int32 `json:"updatedReadyReplicas,omitempty"`
	// Ready is "ready/desired" over every service, for kubectl get.
	// +optional
	Ready string `json:"ready,omitempty"`
	// RollingUpdate describes the current or last worker rollout.
	// +optional
	RollingUpdate *RollingUpdateStatus `json:"rollingUpdate,omitempty"`
	// Services by name.
	// +optional
	Services map[string]ServiceStatus `json:"services,omitempty"`
}

// DynamoGraphDeployment is a Dynamo inference graph whose worker services are rolled
// side by side per revision.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dgd
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: it is a label value on every workload"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.backend) || self.spec.backend != 'Grove' || !has(self.spec.services) || self.spec.services.all(k, self.metadata.name.size() + 9 + (has(self.spec.services[k].multinode) && self.spec.services[k].multinode.nodeCount >= 2 ? 2 * k.size() + 4 : k.size()) <= 45)",message="on Grove, a pod's name holds its PodCliqueSet (the DGD's name and an 8-character hash), scaling group and clique: metadata.name plus 9 plus the service name (twice plus 4 for a multinode service) must be at most Grove's 45 characters; shorten the DGD or service name",fieldPath=".spec.services"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Up-to-date",type=integer,JSONPath=`.status.updatedReplicas`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.updateRevisionNumber`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.rollingUpdate.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DynamoGraphDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec DynamoGraphDeploymentSpec `json:"spec,omitempty"`
	// +optional
	Status DynamoGraphDeploymentStatus `json:"status,omitempty"`
}

// DynamoGraphDeploymentList is a list of DynamoGraphDeployments.
//
// +kubebuilder:object:root=true
type DynamoGraphDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DynamoGraphDeployment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DynamoGraphDeployment{}, &DynamoGraphDeploymentList{})
}
