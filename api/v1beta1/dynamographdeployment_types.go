package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Component types of Dynamo's v1beta1 (spec.components[].type).
const (
	ComponentTypeFrontend = "frontend"
	ComponentTypeWorker   = "worker"
	ComponentTypePrefill  = "prefill"
	ComponentTypeDecode   = "decode"
	ComponentTypePlanner  = "planner"
	ComponentTypeEPP      = "epp"
)

// MainContainerName is the container of podTemplate the operator fills in with
// Dynamo's defaults; every other container is a user sidecar.
const MainContainerName = "main"

// DefaultFrontendSidecarName is the container a v1alpha1 frontendSidecar becomes.
const DefaultFrontendSidecarName = "sidecar-frontend"

// DynamoGraphDeploymentSpec is Dynamo's v1beta1 graph plus this operator's rollout
// fields.
//
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || !has(self.restart)",message="spec.restart must be unset on create; set spec.restart.id after creation to request a restart",optionalOldSelf=true,fieldPath=".restart"
// +kubebuilder:validation:XValidation:rule="!has(self.backend) || self.backend != 'Deployment' || !has(self.components) || self.components.all(c, !has(c.multinode) || c.multinode.nodeCount < 2)",message="backend Deployment cannot run multinode components (multinode.nodeCount >= 2): use Auto, LeaderWorkerSet or Grove",fieldPath=".backend"
type DynamoGraphDeploymentSpec struct {
	// ProviderOverride configures the root resource of the graph's workload provider
	// (Dynamo's field, kept as given).
	// +optional
	ProviderOverride *v1alpha1.Raw `json:"providerOverride,omitempty"`
	// Annotations Dynamo propagates to every child resource.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Labels Dynamo propagates to every child resource.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// PriorityClassName of Grove PodCliqueSets (Dynamo's field).
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Components of the graph, each with its own stable name. Names become part of
	// workload names: letters, digits and '-', at most 63 characters (Dynamo's limit),
	// unique in more than letter case.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=25
	// +kubebuilder:validation:XValidation:rule="self.filter(c, has(c.type) && c.type == 'epp').size() <= 1",message="at most one component may have type epp"
	// +kubebuilder:validation:XValidation:rule="self.all(c1, !has(c1.name) || self.filter(c2, has(c2.name) && c2.name.lowerAscii() == c1.name.lowerAscii()).size() == 1)",message="component names must be unique case-insensitively: they become lower-case workload names"
	Components []DynamoComponentDeploymentSharedSpec `json:"components,omitempty"`
	// Env is prepended to every component's main container env; a component's own
	// variable of the same name wins.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// BackendFramework is sglang, vllm or trtllm: it decides a multinode gang's wiring
	// when the command does not tell.
	// +optional
	// +kubebuilder:validation:Enum=sglang;vllm;trtllm
	BackendFramework string `json:"backendFramework,omitempty"`
	// Restart requests a restart of the graph (Dynamo's field, kept as given): a new id
	// puts nvidia.com/restartAt on every component's pod template, so workers roll to a
	// new revision under spec.rollout and other components update in place.
	// +optional
	Restart *v1alpha1.Raw `json:"restart,omitempty"`
	// TopologyConstraint is Dynamo's graph topology constraint.
	// +optional
	TopologyConstraint *SpecTopologyConstraint `json:"topologyConstraint,omitempty"`
	// Experimental holds Dynamo's graph-level preview features, kept as given.
	// +optional
	Experimental *v1alpha1.Raw `json:"experimental,omitempty"`

	// Backend selects the workload kind: Auto (default: Deployment for single-node
	// components, LeaderWorkerSet for multinode ones), Deployment, LeaderWorkerSet or
	// Grove.
	// +optional
	// +kubebuilder:default=Auto
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.backend is immutable: changing it would move the frontend to another workload kind by deleting and recreating it; create a new DynamoGraphDeployment instead"
	Backend v1alpha1.BackendType `json:"backend,omitempty"`
	// Rollout controls worker rollouts.
	// +optional
	// +kubebuilder:default={}
	Rollout *v1alpha1.RolloutSpec `json:"rollout,omitempty"`
	// RevisionHistoryLimit is how many old worker revisions to keep. Default 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// SpecTopologyConstraint is Dynamo's v1beta1 graph topology constraint.
type SpecTopologyConstraint struct {
	// ClusterTopologyName names the ClusterTopology.
	// +kubebuilder:validation:MinLength=1
	ClusterTopologyName string `json:"clusterTopologyName"`
	// PackDomain is the topology domain the graph is packed into.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	PackDomain string `json:"packDomain,omitempty"`
}

// DynamoComponentDeploymentSharedSpec is one component of a graph, in Dynamo's v1beta1
// shape.
//
// +kubebuilder:validation:XValidation:rule="!has(self.eppConfig) || (has(self.type) && self.type == 'epp')",message="eppConfig may only be set when type is epp",fieldPath=".eppConfig"
// +kubebuilder:validation:XValidation:rule="!has(self.minAvailable) || (has(self.replicas) && self.replicas == 0) || self.minAvailable <= (has(self.replicas) ? self.replicas : 1)",message="minAvailable must be less than or equal to replicas unless replicas is 0",fieldPath=".minAvailable"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.minAvailable) || (has(self.minAvailable) && self.minAvailable == oldSelf.minAvailable)",message="minAvailable is immutable after creation",fieldPath=".minAvailable"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.type) || (has(self.type) && self.type == oldSelf.type)",message="type is immutable after it is set",fieldPath=".type"
type DynamoComponentDeploymentSharedSpec struct {
	// ProviderOverride configures the component's Grove unit (Dynamo's field, kept as
	// given).
	// +optional
	ProviderOverride *v1alpha1.Raw `json:"providerOverride,omitempty"`
	// ComponentName is the component's stable name within the graph.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$`
	ComponentName string `json:"name"`
	// ComponentType is the component's role: frontend, worker, prefill, decode,
	// planner or epp. Worker, prefill and decode components roll side by side per
	// revision; every other one is updated in place.
	// +optional
	// +kubebuilder:validation:Enum=frontend;worker;prefill;decode;planner;epp
	ComponentType string `json:"type,omitempty"`
	// RuntimeVersionOverride is the Dynamo runtime version (MAJOR.MINOR.PATCH) of an
	// image whose tag is not one; it decides version-dependent env and probes.
	// +optional
	// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$`
	RuntimeVersionOverride string `json:"runtimeVersionOverride,omitempty"`
	// GlobalDynamoNamespace is Dynamo's field, kept as given: the operator derives the
	// runtime namespace itself (ROLLOUT.md "Workloads").
	// +optional
	GlobalDynamoNamespace bool `json:"globalDynamoNamespace,omitempty"`
	// PodTemplate is the component's pod: the operator merges Dynamo's defaults into the
	// container named main (which must carry the image); other containers are sidecars.
	// +optional
	PodTemplate *corev1.PodTemplateSpec `json:"podTemplate,omitempty"`
	// Replicas is the desired number of replicas: pods, or gangs of multinode.nodeCount
	// pods; at most 10,000 (v1alpha1.MaxReplicas).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Replicas *int32 `json:"replicas,omitempty"`
	// MinAvailable is Grove's minimum of gang-scheduled replicas (Dynamo's field).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinAvailable *int32 `json:"minAvailable,omitempty"`
	// Multinode makes every replica a gang of nodeCount pods.
	// +optional
	Multinode *v1alpha1.MultinodeSpec `json:"multinode,omitempty"`
	// SharedMemorySize is the size of the memory-backed /dev/shm (8Gi when unset); "0"
	// removes it.
	// +optional
	SharedMemorySize *resource.Quantity `json:"sharedMemorySize,omitempty"`
	// ModelRef references a model (Dynamo's field, kept as given).
	// +optional
	ModelRef *v1alpha1.Raw `json:"modelRef,omitempty"`
	// ScalingAdapter opts the component into Dynamo's scaling adapter (presence is the
	// switch: scalingAdapter: {}).
	// +optional
	ScalingAdapter *ScalingAdapter `json:"scalingAdapter,omitempty"`
	// EPPConfig configures an endpoint picker (Dynamo's field, kept as given).
	// +optional
	EPPConfig *v1alpha1.Raw `json:"eppConfig,omitempty"`
	// FrontendSidecar names the container of podTemplate that runs a frontend.
	// +optional
	FrontendSidecar *string `json:"frontendSidecar,omitempty"`
	// CompilationCache is a PVC-backed compilation cache.
	// +optional
	CompilationCache *CompilationCacheConfig `json:"compilationCache,omitempty"`
	// TopologyConstraint of the component (Dynamo's field, kept as given).
	// +optional
	TopologyConstraint *v1alpha1.Raw `json:"topologyConstraint,omitempty"`
	// Experimental holds Dynamo's preview features of the component.
	// +optional
	Experimental *ExperimentalSpec `json:"experimental,omitempty"`
}

// ScalingAdapter is Dynamo's presence marker (scalingAdapter: {}).
type ScalingAdapter struct{}

// CompilationCacheConfig is a PVC-backed compilation cache.
type CompilationCacheConfig struct {
	// PVCName is the claim.
	// +kubebuilder:validation:MinLength=1
	PVCName string `json:"pvcName"`
	// MountPath in the main container (empty: the backend's default).
	// +optional
	MountPath string `json:"mountPath,omitempty"`
}

// ExperimentalSpec is Dynamo's component preview features, each kept as given.
type ExperimentalSpec struct {
	// +optional
	GPUMemoryService *v1alpha1.Raw `json:"gpuMemoryService,omitempty"`
	// +optional
	Failover *v1alpha1.Raw `json:"failover,omitempty"`
	// +optional
	Checkpoint *v1alpha1.Raw `json:"checkpoint,omitempty"`
	// +optional
	Grove *v1alpha1.Raw `json:"grove,omitempty"`
}

// RollingUpdateStatus is v1alpha1's, with Dynamo's v1beta1 name for the list of
// updated components.
type RollingUpdateStatus struct {
	// Phase is Pending, InProgress, Paused, Completed, Failed or Aborted.
	// +optional
	Phase v1alpha1.RolloutPhase `json:"phase,omitempty"`
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
	// UpdatedComponents lists the worker components fully on updateRevision.
	// +optional
	UpdatedComponents []string `json:"updatedComponents,omitempty"`
	// CurrentStepIndex is the step of spec.rollout.steps the rollout is at, as an index
	// (0-based); messages and kubectl dgd count steps from 1 ("step 2/5").
	// +optional
	CurrentStepIndex *int32 `json:"currentStepIndex,omitempty"`
	// CurrentStepStartTime is when that step started.
	// +optional
	CurrentStepStartTime *metav1.Time `json:"currentStepStartTime,omitempty"`
	// CurrentStepKind is the kind of that step: Partition, Pause, Analysis, SetWeight or
	// SetHeaderRoute.
	// +optional
	CurrentStepKind v1alpha1.StepKind `json:"currentStepKind,omitempty"`
	// CurrentStepEndTime is when that step ends, for a pause of a set duration.
	// +optional
	CurrentStepEndTime *metav1.Time `json:"currentStepEndTime,omitempty"`
	// Attempt counts the tries of this rollout.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
	// Analyses are the analysis steps this attempt has run or runs.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Analyses []v1alpha1.AnalysisStatus `json:"analyses,omitempty"`
	// Abort says why the rollout to updateRevision was aborted.
	// +optional
	Abort *v1alpha1.AbortStatus `json:"abort,omitempty"`
}

// DynamoGraphDeploymentStatus is v1alpha1's status, with Dynamo's v1beta1 names
// (components, rollingUpdate.updatedComponents).
type DynamoGraphDeploymentStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Available, Progressing, Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// CurrentRevision is the revision every worker was on before the rollout.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`
	// UpdateRevision is the revision the rollout moves to.
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`
	// UpdateWorkerHash is the worker hash of UpdateRevision.
	// +optional
	UpdateWorkerHash string `json:"updateWorkerHash,omitempty"`
	// UpdateRevisionNumber is the ControllerRevision number of UpdateRevision.
	// +optional
	UpdateRevisionNumber int64 `json:"updateRevisionNumber,omitempty"`
	// CollisionCount counts hash collisions of worker revisions.
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`
	// Replicas, ReadyReplicas, UpdatedReplicas and AvailableReplicas sum the worker
	// components.
	// +optional
	Replicas int32 `json:"replicas"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
	// UpdatedReadyReplicas is the number of ready replicas on updateRevision.
	// +optional
	UpdatedReadyReplicas int32 `json:"updatedReadyReplicas,omitempty"`
	// Ready is "ready/desired" over every component, for kubectl get.
	// +optional
	Ready string `json:"ready,omitempty"`
	// RollingUpdate describes the current or last worker rollout.
	// +optional
	RollingUpdate *RollingUpdateStatus `json:"rollingUpdate,omitempty"`
	// Components by name.
	// +optional
	Components map[string]v1alpha1.ServiceStatus `json:"components,omitempty"`
	// Restart is the restart spec.restart.id asked for, as Dynamo reports it.
	// +optional
	Restart *v1alpha1.RestartStatus `json:"restart,omitempty"`
	// Traffic is where clients enter while the DGD has cohorts; absent without cohorts.
	// +optional
	Traffic *v1alpha1.TrafficStatus `json:"traffic,omitempty"`
	// Cohorts are the revisions' cohorts, newest first; absent without cohorts.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Cohorts []v1alpha1.CohortStatus `json:"cohorts,omitempty"`
}

// DynamoGraphDeployment is a Dynamo inference graph whose worker components are rolled
// side by side per revision.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=dgd
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: it is a label value on every workload"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.backend) || self.spec.backend != 'Grove' || !has(self.spec.components) || self.spec.components.all(c, self.metadata.name.size() + (has(c.multinode) && c.multinode.nodeCount >= 2 ? 2 * c.name.size() + 4 : c.name.size()) <= 45)",message="on Grove, a pod's name holds its PodCliqueSet (named after the DGD, as Dynamo names it), scaling group and clique: metadata.name plus the component name (twice plus 4 for a multinode component) must be at most Grove's 45 characters; shorten the DGD or component name",fieldPath=".spec.components"
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

// Hub marks v1beta1 as the version every other converts through.
func (*DynamoGraphDeployment) Hub() {}

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
