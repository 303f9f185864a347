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
	// Annotations added to the pods of this service. The rolling-update annotations
	// above are read by the operator, and nvidia.com/vllm-distributed-executor-backend
	// (mp or ray) by a vLLM gang. Keys must be annotation keys and there may be at most
	// 16,384 (checked at admission: hack/crdfix podMaps, as the labels'; the 256 KiB
	// the API server allows all of a pod's annotations is checked at the first write).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Labels added to the pods of this service: label keys and values, at most 16,384
	// (checked at admission: hack/crdfix podMaps).
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
	// EnvFromSecret names a Secret whose keys become environment variables (the main
	// container's envFrom). Admission checks it as the API server checks an envFrom
	// Secret's name (k8s.io/kubernetes v1.36 pkg/apis/core/validation
	// validateSecretEnvSource: NameIsDNSSubdomain(name, true), a DNS-1123 subdomain, a
	// trailing '-' allowed); an empty one adds no envFrom.
	// +optional
	// +kubebuilder:validation:MaxLength=254
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || !format.dns1123SubdomainPrefix().validate(self).hasValue()",message="must be a Secret name: a DNS-1123 subdomain (lower-case letters, digits, '-' and '.'); the API server also takes one ending in '-' for an envFrom",messageExpression="'must be a Secret name, as the API server checks an envFrom Secret (a DNS-1123 subdomain of lower-case letters, digits, dashes and dots, or one ending in a dash), not \"' + self + '\"'",reason=FieldValueInvalid
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
	// EnvFromSecret is the sidecar's envFrom Secret (Dynamo renders it; checked as
	// services.<name>.envFromSecret).
	// +optional
	// +kubebuilder:validation:MaxLength=254
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || !format.dns1123SubdomainPrefix().validate(self).hasValue()",message="must be a Secret name: a DNS-1123 subdomain (lower-case letters, digits, '-' and '.'); the API server also takes one ending in '-' for an envFrom",messageExpression="'must be a Secret name, as the API server checks an envFrom Secret (a DNS-1123 subdomain of lower-case letters, digits, dashes and dots, or one ending in a dash), not \"' + self + '\"'",reason=FieldValueInvalid
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
// --ingress-host-suffix (checked when the operator starts) when it is not. An enabled
// one's class, TLS Secret, labels and annotations must be what the API server takes
// on an Ingress (k8s.io/kubernetes v1.36 pkg/apis/networking/validation:
// ValidateIngressClassName and validateTLSSecretName are DNS-1123 subdomains; metadata
// labels and annotations as on any object). A disabled one is kept as given, as Dynamo
// keeps it: only the lengths and counts below bound it (as the host's length does),
// which the rules need to fit the API server's CEL budget.
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || (has(self.host) && self.host.size() > 0)",message="host is required when ingress is enabled",fieldPath=".host",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || !has(self.ingressControllerClassName) || !format.dns1123Subdomain().validate(self.ingressControllerClassName).hasValue()",message="the Ingress class must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', at most 253 characters",messageExpression="'the Ingress class must be a DNS-1123 subdomain (lower-case letters, digits, dashes and dots, at most 253 characters), not \"' + self.ingressControllerClassName + '\"'",fieldPath=".ingressControllerClassName",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || !has(self.tls) || !has(self.tls.secretName) || size(self.tls.secretName) == 0 || !format.dns1123Subdomain().validate(self.tls.secretName).hasValue()",message="the TLS Secret must be a Secret name: a DNS-1123 subdomain",messageExpression="'the TLS Secret must be a Secret name, a DNS-1123 subdomain (lower-case letters, digits, dashes and dots), not \"' + self.tls.secretName + '\"'",fieldPath=".tls.secretName",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || !has(self.labels) || self.labels.all(k, !format.qualifiedName().validate(k).hasValue() && !format.labelValue().validate(self.labels[k]).hasValue())",message="the Ingress labels must be label keys (qualified names) with label values (at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit)",messageExpression="'the Ingress labels must be label keys (qualified names) with label values (at most 63 letters, digits, dashes, underscores and dots, starting and ending with a letter or digit); the label \"' + self.labels.filter(k, format.qualifiedName().validate(k).hasValue() || format.labelValue().validate(self.labels[k]).hasValue())[0] + '\" is not'",fieldPath=".labels",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || !has(self.annotations) || self.annotations.all(k, !format.qualifiedName().validate(k.lowerAscii()).hasValue())",message="the Ingress annotation keys must be qualified names",messageExpression="'the Ingress annotation keys must be qualified names: \"' + self.annotations.filter(k, format.qualifiedName().validate(k.lowerAscii()).hasValue())[0] + '\" is not'",fieldPath=".annotations",reason=FieldValueInvalid
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
	// +kubebuilder:validation:MaxLength=253
	IngressControllerClassName *string `json:"ingressControllerClassName,omitempty"`
	// TLS names the Secret holding the certificate.
	// +optional
	TLS *IngressTLSSpec `json:"tls,omitempty"`
	// Annotations and Labels are added to the Ingress: at most 256 each, and a label
	// value at most 63 characters (hack/crdfix ingressValues), the bounds that let the
	// rules above fit the CEL budget.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	Annotations map[string]string `json:"annotations,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxProperties=256
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
	// +kubebuilder:validation:MaxLength=253
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
// failing every workload render later. Custom values are not (a quantity rule per
// value of the map exceeds the CRD's CEL cost budget); a bad one is reported as
// InvalidSpec at reconcile. The resource names gpuType and the custom keys become are
// checked as the API server checks a container's (k8s.io/kubernetes v1.36
// pkg/apis/core/validation validateContainerResourceName: a qualified name; without a
// '/', cpu, memory, ephemeral-storage or hugepages-*; with one, in a kubernetes.io
// domain or an extended resource name, not requests.* and a qualified name after
// "requests."); one that is not rendered (gpuType without gpu, a custom key of an
// empty value) is not checked.
// +kubebuilder:validation:XValidation:rule="!has(self.gpu) || size(self.gpu) == 0 || !has(self.gpuType) || size(self.gpuType) == 0 || (!format.qualifiedName().validate(self.gpuType).hasValue() && (self.gpuType.contains('/') ? (self.gpuType.contains('kubernetes.io/') || (!self.gpuType.startsWith('requests.') && !format.qualifiedName().validate('requests.' + self.gpuType).hasValue())) : (self.gpuType in ['cpu', 'memory', 'ephemeral-storage'] || self.gpuType.startsWith('hugepages-'))))",message="gpuType must be a container resource name: a qualified name with a domain (e.g. nvidia.com/gpu), not requests.*, or cpu, memory, ephemeral-storage or hugepages-<size>",fieldPath=".gpuType",reason=FieldValueInvalid
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
	// GPUType selects the GPU product (node label nvidia.com/gpu.product): the resource
	// gpu counts instead of nvidia.com/gpu (render.GPUResource).
	// +optional
	// +kubebuilder:validation:MaxLength=317
	GPUType string `json:"gpuType,omitempty"`
	// Custom resources by their full name: at most 1,024 (the bound that lets the
	// rule on their names fit the CEL budget).
	// +optional
	// +kubebuilder:validation:MaxProperties=1024
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) == 0 || (!format.qualifiedName().validate(k).hasValue() && (k.contains('/') ? (k.contains('kubernetes.io/') || (!k.startsWith('requests.') && !format.qualifiedName().validate('requests.' + k).hasValue())) : (k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-')))))",message="custom resource names must be container resource names: a qualified name with a domain (e.g. example.com/fpga), not requests.*, or cpu, memory, ephemeral-storage or hugepages-<size>",messageExpression="'custom resource names must be container resource names (a qualified name with a domain, not requests.*, or cpu, memory, ephemeral-storage or hugepages-<size>), not ' + self.filter(k, size(self[k]) > 0 && !(!format.qualifiedName().validate(k).hasValue() && (k.contains('/') ? (k.contains('kubernetes.io/') || (!k.startsWith('requests.') && !format.qualifiedName().validate('requests.' + k).hasValue())) : (k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-')))))[0]",reason=FieldValueInvalid
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
