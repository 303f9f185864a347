package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// Component types that carry meaning. Any other componentType (such as "epp") is a
// non-worker service, deployed like the frontend: stable and updated in place.
const (
	ComponentTypeFrontend = "frontend"
	ComponentTypeWorker   = "worker"
	ComponentTypePrefill  = "prefill"
	ComponentTypeDecode   = "decode"
	ComponentTypePlanner  = "planner"
)

// Per-service annotations kept from Dynamo: they override spec.rollout.maxSurge and
// spec.rollout.maxUnavailable for that service.
const (
	AnnotationMaxSurge       = "nvidia.com/deployment-rolling-update-max-surge"
	AnnotationMaxUnavailable = "nvidia.com/deployment-rolling-update-max-unavailable"
)

// DynamoComponentDeploymentSharedSpec is one service of a graph, in Dynamo's own shape.
// Fields this operator does not act on (ingress, autoscaling, pvc, sharedMemory...) are
// kept as given so that Dynamo manifests apply unchanged under strict field validation.
type DynamoComponentDeploymentSharedSpec struct {
	// Annotations added to the workloads and pods of this service. The rolling-update
	// annotations above are read by the operator, and
	// nvidia.com/vllm-distributed-executor-backend (mp or ray) by a vLLM gang.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Labels added to the workloads and pods of this service.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// ServiceName is the name of the component (informational).
	// +optional
	ServiceName string `json:"serviceName,omitempty"`
	// ComponentType is the role of the service: frontend, worker, prefill, decode, planner,
	// or any other text (a non-worker service). It is the value of the
	// nvidia.com/dynamo-component-type label (Dynamo's too), so it must be one: at most
	// 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	ComponentType string `json:"componentType,omitempty"`
	// SubComponentType refines a worker: prefill or decode carry meaning, other text is
	// kept. It is the value of nvidia.com/dynamo-sub-component-type, so it must be a
	// label value as componentType.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	SubComponentType string `json:"subComponentType,omitempty"`
	// DynamoNamespace is accepted for compatibility; the operator derives the runtime
	// namespace from the Kubernetes namespace and DGD name (see ROLLOUT.md).
	// +optional
	DynamoNamespace *string `json:"dynamoNamespace,omitempty"`
	// GlobalDynamoNamespace is accepted for compatibility.
	// +optional
	GlobalDynamoNamespace bool `json:"globalDynamoNamespace,omitempty"`
	// Resources in Dynamo's shape: gpu means nvidia.com/gpu.
	// +optional
	Resources *Resources `json:"resources,omitempty"`
	// Envs are added to the main container, after the graph-level envs.
	// +optional
	Envs []corev1.EnvVar `json:"envs,omitempty"`
	// EnvFromSecret names a Secret whose keys become environment variables.
	// +optional
	EnvFromSecret *string `json:"envFromSecret,omitempty"`
	// ExtraPodMetadata adds labels and annotations to the pods.
	// +optional
	ExtraPodMetadata *ExtraPodMetadata `json:"extraPodMetadata,omitempty"`
	// ExtraPodSpec is a full PodSpec (volumes, tolerations, nodeSelector...) plus the
	// mainContainer.
	// +optional
	ExtraPodSpec *ExtraPodSpec `json:"extraPodSpec,omitempty"`
	// LivenessProbe for the main container.
	// +optional
	LivenessProbe *corev1.Probe `json:"livenessProbe,omitempty"`
	// ReadinessProbe for the main container.
	// +optional
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`
	// Replicas is the desired number of replicas: pods, or gangs of multinode.nodeCount
	// pods; at most 10,000 (MaxReplicas).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Replicas *int32 `json:"replicas,omitempty"`
	// Multinode makes every replica a gang of nodeCount pods.
	// +optional
	Multinode *MultinodeSpec `json:"multinode,omitempty"`

	// Autoscaling is kept as given (not acted on by this operator).
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Autoscaling *runtime.RawExtension `json:"autoscaling,omitempty"`
	// PVC is kept as given.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	PVC *runtime.RawExtension `json:"pvc,omitempty"`
	// CompilationCache is kept as given.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	CompilationCache *runtime.RawExtension `json:"compilationCache,omitempty"`
	// Ingress exposes the service (a frontend) through an Ingress: host
	// `[hostPrefix]host.<hostSuffix>`, path / to the service's Service on port 8000.
	// +optional
	Ingress *IngressSpec `json:"ingress,omitempty"`
	// SharedMemory sizes the memory-backed /dev/shm volume every component gets (8Gi
	// by default), or removes it.
	// +optional
	SharedMemory *SharedMemorySpec `json:"sharedMemory,omitempty"`
	// RuntimeVersionOverride is the Dynamo runtime version (semver) of the image, for
	// images whose tag is not one; it decides version-dependent env and probes.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	RuntimeVersionOverride string `json:"runtimeVersionOverride,omitempty"`
	// VolumeMounts are Dynamo's PVC mounts (name, mountPoint, useAsCompilationCache),
	// kept as given: volumes and mounts reach pods through extraPodSpec.
	// +optional
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`

	// Fields of Dynamo's v1alpha1 that this operator keeps as given (it does not act on
	// them) so that they convert to and from v1beta1 as Dynamo's own conversion does.

	// MinAvailable is Grove's minimum of gang-scheduled replicas (Dynamo's field).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinAvailable *int32 `json:"minAvailable,omitempty"`
	// ScalingAdapter opts the service into Dynamo's DynamoGraphDeploymentScalingAdapter.
	// +optional
	ScalingAdapter *ScalingAdapter `json:"scalingAdapter,omitempty"`
	// FrontendSidecar runs a frontend next to the main container (container
	// sidecar-frontend in v1beta1).
	// +optional
	FrontendSidecar *FrontendSidecarSpec `json:"frontendSidecar,omitempty"`
	// ModelRef, EPPConfig, ProviderOverride, TopologyConstraint, Checkpoint,
	// GPUMemoryService and Failover are Dynamo's fields, kept as given.
	// +optional
	ModelRef *Raw `json:"modelRef,omitempty"`
	// +optional
	EPPConfig *Raw `json:"eppConfig,omitempty"`
	// +optional
	ProviderOverride *Raw `json:"providerOverride,omitempty"`
	// +optional
	TopologyConstraint *Raw `json:"topologyConstraint,omitempty"`
	// +optional
	Checkpoint *Raw `json:"checkpoint,omitempty"`
	// +optional
	GPUMemoryService *Raw `json:"gpuMemoryService,omitempty"`
	// +optional
	Failover *Raw `json:"failover,omitempty"`
}

// VolumeMount is Dynamo's v1alpha1 PVC mount.
type VolumeMount struct {
	// Name of the PVC (and volume).
	// +optional
	Name string `json:"name,omitempty"`
	// MountPoint in the main container.
	// +optional
	MountPoint string `json:"mountPoint,omitempty"`
	// UseAsCompilationCache marks the backend's compilation cache (v1beta1
	// compilationCache).
	// +optional
	UseAsCompilationCache bool `json:"useAsCompilationCache,omitempty"`
}

// ScalingAdapter is Dynamo's v1alpha1 scaling-adapter switch.
type ScalingAdapter struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// FrontendSidecarSpec is Dynamo's v1alpha1 frontend sidecar.
type FrontendSidecarSpec struct {
	// +optional
	Image string `json:"image,omitempty"`
	// +optional
	Args []string `json:"args,omitempty"`
	// +optional
	Envs []corev1.EnvVar `json:"envs,omitempty"`
	// +optional
	EnvFromSecret *string `json:"envFromSecret,omitempty"`
}

// Raw is a JSON object kept as given: a Dynamo field this operator does not act on.
// Its schema is an open object in both versions, so it converts verbatim.
//
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:Schemaless
// +kubebuilder:validation:Type=object
type Raw struct {
	runtime.RawExtension `json:",inline"`
}

// IngressSpec is Dynamo's ingress shape. An enabled Ingress's host,
// `[hostPrefix]host.<hostSuffix>`, must be what the API server takes as an Ingress
// rule's host (a DNS-1123 subdomain, lower case, at most 253 characters, optionally
// `*.` first): checked whole when hostSuffix is set, and without the operator's
// --ingress-host-suffix (checked when the operator starts) when it is not. A disabled
// one is kept as given, as Dynamo keeps it.
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || (has(self.host) && self.host.size() > 0)",message="host is required when ingress is enabled",fieldPath=".host",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || !has(self.host) || self.host.size() == 0 || ((has(self.hostPrefix) ? self.hostPrefix + self.host : self.host).size() + (has(self.hostSuffix) ? self.hostSuffix.size() + 1 : 0) <= 253 && (has(self.hostPrefix) ? self.hostPrefix + self.host : self.host).matches('^([*][.])?[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$') && (!has(self.hostSuffix) || self.hostSuffix.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')))",message="the Ingress host [hostPrefix]host.hostSuffix must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', each dot-separated label starting and ending with a letter or digit, at most 253 characters",fieldPath=".host"
type IngressSpec struct {
	// Enabled creates the Ingress.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Host is the host name's first label, e.g. the DGD's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host,omitempty"`
	// HostPrefix is prepended to Host. At most 253 characters (a whole DNS name's),
	// which also bounds the cost of the host rule above.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	HostPrefix *string `json:"hostPrefix,omitempty"`
	// HostSuffix is the domain after Host (the operator's --ingress-host-suffix, "local"
	// by default, when unset). At most 253 characters, as HostPrefix.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	HostSuffix *string `json:"hostSuffix,omitempty"`
	// IngressControllerClassName is the Ingress's class.
	// +optional
	IngressControllerClassName *string `json:"ingressControllerClassName,omitempty"`
	// TLS names the Secret holding the certificate.
	// +optional
	TLS *IngressTLSSpec `json:"tls,omitempty"`
	// Annotations and Labels are added to the Ingress.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// UseVirtualService and VirtualServiceGateway are accepted for compatibility
	// (Istio VirtualServices are not rendered by this operator).
	// +optional
	UseVirtualService bool `json:"useVirtualService,omitempty"`
	// +optional
	VirtualServiceGateway *string `json:"virtualServiceGateway,omitempty"`
}

// IngressTLSSpec names the TLS Secret of an Ingress.
type IngressTLSSpec struct {
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// SharedMemorySpec is Dynamo's shared-memory shape.
// +kubebuilder:validation:XValidation:rule="!(has(self.disabled) && self.disabled && has(self.size))",message="sharedMemory.size must not be set when sharedMemory.disabled is true",fieldPath=".size"
type SharedMemorySpec struct {
	// Disabled removes the /dev/shm volume.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// Size is the volume's sizeLimit (8Gi when unset or 0).
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
}

// MultinodeSpec makes every replica of a service a gang of NodeCount pods.
type MultinodeSpec struct {
	// NodeCount is the number of pods (nodes) per replica; at least 2 and at most
	// 1,024 (MaxNodeCount).
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=1024
	// +kubebuilder:default=2
	NodeCount int32 `json:"nodeCount"`
}

// Resources is Dynamo's resource shape.
type Resources struct {
	// +optional
	Requests *ResourceItem `json:"requests,omitempty"`
	// +optional
	Limits *ResourceItem `json:"limits,omitempty"`
	// Claims are the main container's resource claims (DRA).
	// +optional
	Claims []corev1.ResourceClaim `json:"claims,omitempty"`
}

// ResourceItem lists quantities by Dynamo's names. cpu and memory are checked at
// admission (CEL isQuantity), so a bad one is rejected naming its field instead of
// failing every workload render later. Custom values are not: a rule over a map of
// unbounded size exceeds the CRD's CEL cost budget; a bad one is reported as
// InvalidSpec at reconcile.
// +kubebuilder:validation:XValidation:rule="!has(self.cpu) || isQuantity(self.cpu)",message="must be a quantity, e.g. 500m or 2",fieldPath=".cpu",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.memory) || isQuantity(self.memory)",message="must be a quantity, e.g. 512Mi or 8Gi",fieldPath=".memory",reason=FieldValueInvalid
type ResourceItem struct {
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CPU string `json:"cpu,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Memory string `json:"memory,omitempty"`
	// GPU is a count of nvidia.com/gpu.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]*$`
	GPU string `json:"gpu,omitempty"`
	// GPUType selects the GPU product (node label nvidia.com/gpu.product).
	// +optional
	GPUType string `json:"gpuType,omitempty"`
	// Custom resources by their full name.
	// +optional
	Custom map[string]string `json:"custom,omitempty"`
}

// ExtraPodMetadata adds metadata to pods.
type ExtraPodMetadata struct {
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// ExtraPodSpec is a PodSpec plus the main container. The PodSpec's containers list is
// optional here: the main container is built from MainContainer.
type ExtraPodSpec struct {
	*corev1.PodSpec `json:",inline"`
	// MainContainer is the service's main container.
	// +optional
	MainContainer *corev1.Container `json:"mainContainer,omitempty"`
}

// NodeCount is the number of pods per replica: multinode.nodeCount, or 1.
func (s *DynamoComponentDeploymentSharedSpec) NodeCount() int32 {
	if s == nil || s.Multinode == nil || s.Multinode.NodeCount < 1 {
		return 1
	}
	return s.Multinode.NodeCount
}

// IsMultinode reports whether every replica is a gang of two or more pods.
func (s *DynamoComponentDeploymentSharedSpec) IsMultinode() bool { return s.NodeCount() >= 2 }

// IsWorker reports whether the service is a worker (worker, prefill or decode): workers
// roll side by side per revision; every other service is updated in place.
func (s *DynamoComponentDeploymentSharedSpec) IsWorker() bool {
	switch s.ComponentType {
	case ComponentTypeWorker, ComponentTypePrefill, ComponentTypeDecode:
		return true
	}
	return false
}

// Role is "prefill" or "decode" from componentType or subComponentType, else "worker".
func (s *DynamoComponentDeploymentSharedSpec) Role() string {
	for _, v := range []string{s.ComponentType, s.SubComponentType} {
		if v == ComponentTypePrefill || v == ComponentTypeDecode {
			return v
		}
	}
	return ComponentTypeWorker
}

// DesiredReplicas is spec.replicas, defaulting to 1.
func (s *DynamoComponentDeploymentSharedSpec) DesiredReplicas() int32 {
	if s.Replicas == nil {
		return 1
	}
	return *s.Replicas
}
