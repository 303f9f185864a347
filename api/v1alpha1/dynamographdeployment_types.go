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
	// Frontends says which frontends serve a worker revision: Shared (one frontend per
	// frontend service, updated in place, discovering every worker revision by prefix),
	// PerRevision (every worker revision is a cohort: a frontend of its own,
	// `{dgd}-{frontend}-{hash}`, that discovers only its revision's Dynamo namespace, and
	// client traffic split between the cohorts by weight), or Auto.
	//
	// Auto, the default, runs Shared until a revision changes a frontend's pod template
	// together with the workers, and PerRevision from that revision on. It is the default
	// because a change of the workers alone (a new model version, TP, resources) is safe
	// behind a shared frontend and needs no proxy and no extra frontend pods, while a
	// change of both (a Dynamo upgrade, a model card or router change) is not: frontends
	// and workers of two Dynamo versions cannot be mixed (ai-dynamo/dynamo#12657). Once a
	// DGD has cohorts, later worker revisions get cohorts too, for a cohort's frontend
	// sees only its own revision. A frontend-only change updates the current frontends
	// in place in every mode. A change of mode takes effect once the DGD has one
	// revision (at rest, or when a rollout starts from one).
	// +optional
	// +kubebuilder:default=Auto
	Frontends FrontendMode `json:"frontends,omitempty"`
	// TrafficRouting is how client traffic is split between cohorts: proxy (the default)
	// or gatewayAPI. Unused while the DGD has no cohorts.
	// +optional
	TrafficRouting *TrafficRouting `json:"trafficRouting,omitempty"`
}

// RolloutStep is one step of a stepped rollout: exactly one of partition, pause,
// analysis, setWeight and setHeaderRoute.
//
// +kubebuilder:validation:XValidation:rule="(has(self.partition) ? 1 : 0) + (has(self.pause) ? 1 : 0) + (has(self.analysis) ? 1 : 0) + (has(self.setWeight) ? 1 : 0) + (has(self.setHeaderRoute) ? 1 : 0) == 1",message="a step sets exactly one of partition, pause, analysis, setWeight and setHeaderRoute"
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
	// Analysis holds the rollout at the split the previous steps reached while it
	// measures metrics in Prometheus: the step ends when every metric has passed; a
	// failed metric aborts the rollout (every worker returns to the stable revision);
	// an inconclusive one holds the rollout until it is promoted or aborted.
	// +optional
	Analysis *RolloutAnalysis `json:"analysis,omitempty"`
	// SetWeight sends that percent of new requests to the new revision's cohort (as Argo
	// Rollouts' setWeight), and moves the workers until its cohort has at least that
	// share of every worker service; the step waits, and says so in status, while the
	// cohort's ready capacity is below the share. Only with cohorts (spec.rollout.frontends
	// PerRevision, or Auto once the revision makes cohorts): otherwise it holds the same
	// split as a partition of 100 - setWeight percent.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SetWeight *int32 `json:"setWeight,omitempty"`
	// SetHeaderRoute sends every request carrying the header to the new revision's
	// cohort, before (or beside) any weight, until the rollout ends (as Argo Rollouts'
	// setHeaderRoute). Only with cohorts; without, the step passes at once.
	// +optional
	SetHeaderRoute *HeaderRoute `json:"setHeaderRoute,omitempty"`
}

// RolloutAnalysis is an analysis step: metrics measured together, in the Prometheus
// the operator is configured with (--prometheus-url): its inline metrics and those of
// the analysis templates it references, at most 8 in all, each name once.
//
// +kubebuilder:validation:XValidation:rule="(has(self.metrics) && size(self.metrics) > 0) || (has(self.templates) && size(self.templates) > 0)",message="an analysis needs at least one metric or template",fieldPath=".metrics"
type RolloutAnalysis struct {
	// Metrics to measure. Each is measured count times, interval apart; the step passes
	// once every metric has passed.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Metrics []AnalysisMetric `json:"metrics,omitempty"`
	// Templates whose metrics the step measures too: AnalysisTemplates of the DGD's
	// namespace, or ClusterAnalysisTemplates (clusterScope). A template that does not
	// exist holds the DGD (reason InvalidSpec, naming it) until it is created.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Templates []AnalysisTemplateRef `json:"templates,omitempty"`
	// Args are the values of the templates' arguments ({{args.<name>}}), over their
	// defaults; the inline metrics read them too. An argument of a template that has no
	// value here nor a default holds the DGD (reason InvalidSpec, naming it).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Args []AnalysisArgument `json:"args,omitempty"`
}

// AnalysisMetric is one PromQL query and how to judge its result.
//
// +kubebuilder:validation:XValidation:rule="has(self.successCondition) || has(self.failureCondition)",message="a metric needs a successCondition or a failureCondition"
type AnalysisMetric struct {
	// Name of the metric, unique within its step.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Query is a PromQL query returning one value (a scalar or a vector of one
	// sample), with placeholders for the revisions being compared (as Argo Rollouts'
	// {{args.x}}: substitution only, no Go template actions, loops or functions):
	// {{.Canary.Namespace}} and {{.Stable.Namespace}} (the effective Dynamo namespaces
	// of the update and stable revisions, as Dynamo's engine metrics label them),
	// {{.Canary.MetricsNamespace}} and {{.Stable.MetricsNamespace}} (the same as the
	// Dynamo runtime's dynamo_component_* metrics label them: every character other
	// than a letter, digit or '_' made '_'), {{.Canary.Hash}}, {{.Canary.Revision}},
	// {{index .Canary.Workloads "decode"}} (workload names by service; also
	// {{.Canary.Workloads.decode}}), {{.Namespace}} and {{.Name}} (the DGD's), and
	// {{args.<name>}} (an argument of the step or of the metric's analysis template).
	// Admission refuses Go template loops and recursion (range, define, template,
	// block); the operator reports any other unknown placeholder (reason InvalidSpec)
	// without running it. Substituted, a query is at most 16 KiB.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.matches('[{][{]-?[[:space:]]*(range|define|template|block)([^.A-Za-z0-9_]|$)')",message="a query is placeholder substitution, not a Go template: {{range}}, {{define}}, {{template}} and {{block}} (loops and recursion) are refused; the placeholders are .Namespace, .Name, and .Canary or .Stable with .Namespace, .MetricsNamespace, .Hash, .Revision or .Workloads, and args.<name>"
	Query string `json:"query"`
	// SuccessCondition is a CEL expression over result (a double, the query's value),
	// e.g. "result < 0.05". A measurement for which it is false fails, unless a
	// failureCondition is also set: then it is inconclusive when neither holds.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	SuccessCondition string `json:"successCondition,omitempty"`
	// FailureCondition is a CEL expression over result; a measurement for which it is
	// true fails (whatever successCondition says).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	FailureCondition string `json:"failureCondition,omitempty"`
	// Interval between two measurements. Default 30s.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="must be at least 1s"
	Interval *metav1.Duration `json:"interval,omitempty"`
	// InitialDelay before the first measurement (from the start of the step). Default 0.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must not be negative"
	InitialDelay *metav1.Duration `json:"initialDelay,omitempty"`
	// Count is how many measurements (successful, failed or inconclusive; a query
	// that errs is retried and not counted) the metric takes. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Count *int32 `json:"count,omitempty"`
	// FailureLimit is how many failed measurements the metric tolerates: one more fails
	// it, and the rollout is aborted. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailureLimit *int32 `json:"failureLimit,omitempty"`
	// InconclusiveLimit is how many inconclusive measurements the metric tolerates: one
	// more makes it inconclusive, and the rollout holds until promoted or aborted.
	// Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InconclusiveLimit *int32 `json:"inconclusiveLimit,omitempty"`
	// ConsecutiveErrorLimit is how many queries in a row may err (Prometheus
	// unreachable, a bad query, no data, more than one series): one more makes the
	// metric inconclusive (never passed, never aborted: a person decides). Default 4.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ConsecutiveErrorLimit *int32 `json:"consecutiveErrorLimit,omitempty"`
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
	// Services by name. Names become part of workload names and the value of the
	// nvidia.com/dynamo-component label (Dynamo's too): at most 63 letters, digits and
	// '-', as Dynamo's v1beta1 component names. Longer workload names are shortened
	// with a digest (backends.WorkloadName), so no shorter limit is needed.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 63 && k.matches('^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$'))",message="service names must be at most 63 letters, digits or '-', starting and ending with a letter or digit"
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

	// Fields of Dynamo's v1alpha1 kept as given so that they convert to and from
	// v1beta1 as Dynamo's own conversion does.

	// Annotations and Labels are propagated by Dynamo to every child resource.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// PriorityClassName of Grove PodCliqueSets.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// TopologyConstraint is Dynamo's graph topology constraint (v1beta1 renames
	// topologyProfile to clusterTopologyName).
	// +optional
	TopologyConstraint *SpecTopologyConstraint `json:"topologyConstraint,omitempty"`
	// ProviderOverride and Experimental are Dynamo's, kept as given.
	// +optional
	ProviderOverride *Raw `json:"providerOverride,omitempty"`
	// Restart is Dynamo's {id, strategy}, kept as given: a new id puts
	// nvidia.com/restartAt on every service's pod template, so workers roll to a new
	// revision under spec.rollout and other services update in place.
	// +optional
	Restart *Raw `json:"restart,omitempty"`
	// +optional
	Experimental *Raw `json:"experimental,omitempty"`
}

// SpecTopologyConstraint is Dynamo's v1alpha1 graph topology constraint.
type SpecTopologyConstraint struct {
	// TopologyProfile names the ClusterTopology.
	// +optional
	TopologyProfile string `json:"topologyProfile,omitempty"`
	// PackDomain is the topology domain the graph is packed into.
	// +optional
	PackDomain string `json:"packDomain,omitempty"`
}

// RolloutPhase is where a worker rollout stands.
// +kubebuilder:validation:Enum=Pending;InProgress;Paused;Completed;Failed;Aborted
type RolloutPhase string

// Phases.
const (
	RolloutPending    RolloutPhase = "Pending"
	RolloutInProgress RolloutPhase = "InProgress"
	RolloutPaused     RolloutPhase = "Paused"
	RolloutCompleted  RolloutPhase = "Completed"
	RolloutFailed     RolloutPhase = "Failed"
	// RolloutAborted: the rollout to updateRevision was aborted (a failed analysis, or
	// "kubectl dgd rollout abort"); every worker returns to, or is back on, the stable
	// revision (currentRevision). A new worker revision or a retry starts again.
	RolloutAborted RolloutPhase = "Aborted"
)

// Condition types.
const (
	ConditionAvailable   = "Available"
	ConditionProgressing = "Progressing"
	ConditionReady       = "Ready"
	// ConditionReconciling is True while a rollout or a scale is under way (kstatus:
	// InProgress), False once the DGD has settled where its spec asks.
	ConditionReconciling = "Reconciling"
	// ConditionTakeOverHeld is True while the take-over of a DGD from Dynamo's operator
	// waits for something someone else controls (reason DynamoIngressHeld); absent
	// otherwise.
	ConditionTakeOverHeld = "TakeOverHeld"
	// ConditionStalled is True when the operator cannot go on without a spec change
	// (ProgressDeadlineExceeded, RolloutBlocked, InvalidSpec; kstatus: Failed).
	ConditionStalled = "Stalled"
)

// RollingUpdateStatus describes the current (or last) worker rollout.
type RollingUpdateStatus struct {
	// Phase is Pending, InProgress, Paused, Completed, Failed or Aborted.
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
	// is at, as an index (0-based); the number of steps once they are done. Absent
	// without steps. Messages, events, kubectl dgd and dgd_rollout_current_step count
	// steps from 1: index 1 of 5 steps reads "step 2/5".
	// +optional
	CurrentStepIndex *int32 `json:"currentStepIndex,omitempty"`
	// CurrentStepStartTime is when that step started.
	// +optional
	CurrentStepStartTime *metav1.Time `json:"currentStepStartTime,omitempty"`
	// CurrentStepKind is the kind of that step: Partition, Pause or Analysis. Absent
	// without steps and once they are done.
	// +optional
	CurrentStepKind StepKind `json:"currentStepKind,omitempty"`
	// CurrentStepEndTime is when that step ends, for a pause of a set duration.
	// +optional
	CurrentStepEndTime *metav1.Time `json:"currentStepEndTime,omitempty"`
	// Attempt counts the tries of this rollout: 1, and one more after each retry of an
	// abort. The abort and retry annotations name the attempt they act on.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
	// Analyses are the analysis steps this attempt has run or runs, oldest first, with
	// their measurements.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Analyses []AnalysisStatus `json:"analyses,omitempty"`
	// Abort says why the rollout to updateRevision was aborted; absent unless it was.
	// +optional
	Abort *AbortStatus `json:"abort,omitempty"`
}

// StepKind is the kind of a step of spec.rollout.steps.
// +kubebuilder:validation:Enum=Partition;Pause;Analysis;SetWeight;SetHeaderRoute
type StepKind string

// Step kinds.
const (
	StepPartition      StepKind = "Partition"
	StepPause          StepKind = "Pause"
	StepAnalysis       StepKind = "Analysis"
	StepSetWeight      StepKind = "SetWeight"
	StepSetHeaderRoute StepKind = "SetHeaderRoute"
)

// AnalysisPhase is the state of an analysis step or of one of its metrics.
// +kubebuilder:validation:Enum=Running;Successful;Failed;Inconclusive
type AnalysisPhase string

// Analysis phases.
const (
	AnalysisRunning      AnalysisPhase = "Running"
	AnalysisSuccessful   AnalysisPhase = "Successful"
	AnalysisFailed       AnalysisPhase = "Failed"
	AnalysisInconclusive AnalysisPhase = "Inconclusive"
)

// MeasurementPhase is the outcome of one measurement.
// +kubebuilder:validation:Enum=Successful;Failed;Inconclusive;Error
type MeasurementPhase string

// Measurement phases.
const (
	MeasurementSuccessful   MeasurementPhase = "Successful"
	MeasurementFailed       MeasurementPhase = "Failed"
	MeasurementInconclusive MeasurementPhase = "Inconclusive"
	// MeasurementError: the query failed or returned no single value; retried, not
	// counted.
	MeasurementError MeasurementPhase = "Error"
)

// AnalysisStatus is one analysis step's run.
type AnalysisStatus struct {
	// Step is the index of the step in spec.rollout.steps (0-based; messages count
	// from 1).
	Step int32 `json:"step"`
	// Phase is Running, Successful, Failed or Inconclusive.
	Phase AnalysisPhase `json:"phase"`
	// Message says why, for a finished run.
	// +optional
	Message string `json:"message,omitempty"`
	// StartTime is when the step started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// Metrics, in the order of the step.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Metrics []MetricStatus `json:"metrics,omitempty"`
}

// MetricStatus is one metric of an analysis run: its tallies and latest measurements.
type MetricStatus struct {
	// Name of the metric.
	Name string `json:"name"`
	// Phase is Running, Successful, Failed or Inconclusive.
	Phase AnalysisPhase `json:"phase"`
	// Message says why, for a finished metric.
	// +optional
	Message string `json:"message,omitempty"`
	// Successful, Failed, Inconclusive and Error count the measurements taken so far.
	// +optional
	Successful int32 `json:"successful,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	Inconclusive int32 `json:"inconclusive,omitempty"`
	// +optional
	Error int32 `json:"error,omitempty"`
	// ConsecutiveError counts the errors since the last measurement that did not err.
	// +optional
	ConsecutiveError int32 `json:"consecutiveError,omitempty"`
	// Measurements are the latest measurements (at most 10), oldest first.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Measurements []Measurement `json:"measurements,omitempty"`
}

// Measurement is one query of a metric and its verdict.
type Measurement struct {
	// Phase is Successful, Failed, Inconclusive or Error.
	Phase MeasurementPhase `json:"phase"`
	// Value is the query's value to six significant digits (1.0000000000000002 reads
	// 1), or exact, as Prometheus formats it, when the short value would be judged
	// otherwise (a value within rounding of a condition's threshold).
	// +optional
	Value string `json:"value,omitempty"`
	// Message says why an Error or Inconclusive measurement is one.
	// +optional
	Message string `json:"message,omitempty"`
	// Time is when the query ran.
	Time metav1.MicroTime `json:"time"`
}

// AbortStatus records an aborted rollout.
type AbortStatus struct {
	// Reason is AnalysisFailed (a metric failed) or RolloutAborted (kubectl dgd
	// rollout abort).
	Reason string `json:"reason"`
	// Message names the failing metric and its value, or who aborted.
	Message string `json:"message"`
	// Time is when the rollout was aborted.
	Time metav1.Time `json:"time"`
	// StableRevision is the revision every worker returns to.
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`
	// StableRevisionNumber is that revision's number.
	// +optional
	StableRevisionNumber int64 `json:"stableRevisionNumber,omitempty"`
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
	// RuntimeNamespaces are the effective Dynamo namespaces the service's replicas use:
	// those of its workloads with replicas or pods, not of one being deleted.
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
	// They are written when 0 too, so that kubectl's Up-to-date column reads 0 after an
	// abort rather than nothing.
	// +optional
	Replicas int32 `json:"replicas"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
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
	// Restart is the restart spec.restart.id asked for, as Dynamo reports it.
	// +optional
	Restart *RestartStatus `json:"restart,omitempty"`
	// Traffic is where clients enter while the DGD has cohorts, and whether the split
	// asked for is in effect; absent without cohorts.
	// +optional
	Traffic *TrafficStatus `json:"traffic,omitempty"`
	// Cohorts are the revisions' cohorts, newest first: their frontends, routable
	// workers and traffic; absent without cohorts.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Cohorts []CohortStatus `json:"cohorts,omitempty"`
}

// DynamoGraphDeployment is a Dynamo inference graph whose worker services are rolled
// side by side per revision.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dgd
// +kubebuilder:deprecatedversion:warning="nvidia.com/v1alpha1 DynamoGraphDeployment is deprecated; use nvidia.com/v1beta1 DynamoGraphDeployment"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: it is a label value on every workload"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.backend) || self.spec.backend != 'Grove' || !has(self.spec.services) || self.spec.services.all(k, self.metadata.name.size() + (has(self.spec.services[k].multinode) && self.spec.services[k].multinode.nodeCount >= 2 ? 2 * k.size() + 4 : k.size()) <= 45)",message="on Grove, a pod's name holds its PodCliqueSet (named after the DGD, as Dynamo names it), scaling group and clique: metadata.name plus the service name (twice plus 4 for a multinode service) must be at most Grove's 45 characters; shorten the DGD or service name",fieldPath=".spec.services"
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
