// Package v1beta1 is Dynamo's current DynamoGraphDeployment API (nvidia.com/v1beta1,
// Dynamo's storage version since July 2026: DYNAMO-V1BETA1.md) plus the fields this
// operator owns. It is the storage version of our CRD (the hub); v1alpha1 is still
// served (a spoke, deprecated with a warning as Dynamo's is) and converts to and from
// it losslessly (package api/conversion, served at /convert).
//
// # Schema
//
// spec.components[] is Dynamo's v1beta1 component list, field by field: name, type,
// podTemplate (a native PodTemplateSpec whose container "main" the operator fills in),
// replicas, multinode, sharedMemorySize, compilationCache, frontendSidecar,
// scalingAdapter, minAvailable, globalDynamoNamespace, runtimeVersionOverride, and
// Dynamo's features this operator keeps as given without acting on them (modelRef,
// eppConfig, providerOverride, topologyConstraint, experimental): those are open
// objects in both versions, so they convert verbatim and Dynamo's manifests apply,
// but their inner schema is not checked here. spec.env, annotations, labels,
// priorityClassName, backendFramework, restart, topologyConstraint and experimental
// are Dynamo's graph fields. The fields this operator owns (spec.backend,
// spec.rollout, spec.revisionHistoryLimit and the whole status) are the v1alpha1
// types themselves, so they are identical in both versions; the status renames only
// what Dynamo renames (services to components, rollingUpdate.updatedServices to
// updatedComponents).
//
// # Which version the operator works on
//
// The operator works on v1alpha1 internally (render, backends, revisions and the
// controller read v1alpha1 types; ControllerRevisions record v1alpha1 service specs),
// because that is what every part of it was built and tested on, what its history
// records, and what its hashes are defined over: moving every consumer to v1beta1
// would rewrite render and revisions for no behaviour change, and an in-place
// conversion of stored ControllerRevisions. The controller watches and reads v1beta1
// (the storage version, so the API server never calls the conversion webhook for the
// operator's own reads) and converts in-process with the very functions /convert
// serves (conversion.Client, one seam); it writes the status back as v1beta1.
// +kubebuilder:object:generate=true
// +groupName=nvidia.com
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "nvidia.com", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
