// Package v1alpha1 holds the DynamoGraphDeployment API: Dynamo's own v1alpha1 shape
// (services map, componentType, multinode, envs, resources, extraPodSpec...) plus the
// fields this operator owns: spec.backend, spec.rollout and spec.revisionHistoryLimit.
//
// +kubebuilder:object:generate=true
// +groupName=nvidia.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "nvidia.com", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
