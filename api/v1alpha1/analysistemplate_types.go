package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxStepMetrics bounds the metrics one analysis step measures, its inline metrics and
// those of the templates it references together: status.rollingUpdate.analyses[].metrics
// holds one entry per metric and admits at most this many (the operator reports a step
// over it as InvalidSpec, since admission cannot see the templates).
const MaxStepMetrics = 8

// AnalysisTemplateSpec is a reusable set of analysis metrics with arguments, as Argo
// Rollouts' AnalysisTemplateSpec (argoproj/argo-rollouts
// pkg/apis/rollouts/v1alpha1/analysis_types.go): an analysis step references it by name
// (spec.rollout.steps[].analysis.templates) and passes values for its args; a metric's
// query, successCondition and failureCondition read an argument as {{args.<name>}}.
type AnalysisTemplateSpec struct {
	// Args the metrics read as {{args.<name>}}. An argument without a value must be
	// given one by every step that references the template (its analysis.args).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Args []AnalysisArgument `json:"args,omitempty"`
	// Metrics to measure, as an analysis step's inline metrics.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Metrics []AnalysisMetric `json:"metrics"`
}

// AnalysisArgument is an argument of an analysis template, or its value as a step
// passes it (Argo Rollouts' Argument, without valueFrom).
type AnalysisArgument struct {
	// Name of the argument: {{args.<name>}} reads it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*$`
	Name string `json:"name"`
	// Value of the argument. In a template, its default (without one, every step
	// referencing the template must set it); in a step, the value passed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Value *string `json:"value,omitempty"`
}

// AnalysisTemplateRef names an analysis template a step measures: an AnalysisTemplate
// in the DGD's namespace, or with clusterScope a ClusterAnalysisTemplate (Argo
// Rollouts' RolloutAnalysisTemplate: templateName and clusterScope).
type AnalysisTemplateRef struct {
	// TemplateName is the template's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TemplateName string `json:"templateName"`
	// ClusterScope: the template is a ClusterAnalysisTemplate.
	// +optional
	ClusterScope bool `json:"clusterScope,omitempty"`
}

// Kind is the referenced template's kind.
func (r AnalysisTemplateRef) Kind() string {
	if r.ClusterScope {
		return "ClusterAnalysisTemplate"
	}
	return "AnalysisTemplate"
}

// AnalysisTemplate is a namespaced, reusable set of analysis metrics with arguments that
// the DGDs of its namespace reference from their analysis steps.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=dgdat
// +kubebuilder:printcolumn:name="Metrics",type=string,JSONPath=`.spec.metrics[*].name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AnalysisTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AnalysisTemplateSpec `json:"spec"`
}

// AnalysisTemplateList is a list of AnalysisTemplates.
//
// +kubebuilder:object:root=true
type AnalysisTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnalysisTemplate `json:"items"`
}

// ClusterAnalysisTemplate is an AnalysisTemplate every namespace's DGDs may reference
// (with clusterScope: true).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=dgdcat
// +kubebuilder:printcolumn:name="Metrics",type=string,JSONPath=`.spec.metrics[*].name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterAnalysisTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AnalysisTemplateSpec `json:"spec"`
}

// ClusterAnalysisTemplateList is a list of ClusterAnalysisTemplates.
//
// +kubebuilder:object:root=true
type ClusterAnalysisTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterAnalysisTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AnalysisTemplate{}, &AnalysisTemplateList{}, &ClusterAnalysisTemplate{}, &ClusterAnalysisTemplateList{})
}
