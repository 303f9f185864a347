package render

import (
	"strings"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Role is the part a pod plays: the only pod of a single-node replica, or the leader or
// a worker of a multinode gang.
type Role string

// Roles.
const (
	RoleMain   Role = "main"
	RoleLeader Role = "leader"
	RoleWorker Role = "worker"
)

// Ports and names Dynamo's operator gives components (internal/consts/consts.go).
const (
	MainContainerName = "main"
	PortHTTP          = 8000
	PortSystem        = 9090
	PortNixl          = 19090
	PortPlannerMetric = 9085
	PortForwardPass   = 20380
	PortNameHTTP      = "http"
	PortNameSystem    = "system"
	PortNameNixl      = "nixl"
	PortNameMetrics   = "metrics"
	// PlannerServiceAccount is the planner's service account in every DGD namespace.
	PlannerServiceAccount = "planner-serviceaccount"
	// SharedMemoryVolume is the memory-backed volume mounted at /dev/shm.
	SharedMemoryVolume    = "shared-memory"
	sharedMemoryMountPath = "/dev/shm"
	defaultSharedMemory   = "8Gi"
	terminationGrace      = int64(60)
	defaultFSGroup        = int64(1000)
)

// Labels Dynamo puts on every component's pods (besides the ones the operator selects
// by, in api/v1alpha1).
const (
	LabelSelector            = "nvidia.com/selector"
	LabelDynamoNamespace     = "nvidia.com/dynamo-namespace"
	LabelSubComponentType    = "nvidia.com/dynamo-sub-component-type"
	LabelMetricsEnabled      = "nvidia.com/metrics-enabled"
	LabelDiscoveryBackend    = "nvidia.com/dynamo-discovery-backend"
	LabelDiscoveryEnabled    = "nvidia.com/dynamo-discovery-enabled"
	LabelRole                = "role"
	discoveryEnabledValue    = "true"
	metricsEnabledValue      = "true"
	metricsDisabledByDGDWith = "false"
)

// kind is how Dynamo treats a componentType.
type kind int

const (
	kindOther kind = iota
	kindFrontend
	kindWorker
	kindPlanner
)

func kindOf(componentType string) kind {
	switch componentType {
	case v1alpha1.ComponentTypeFrontend:
		return kindFrontend
	case v1alpha1.ComponentTypeWorker, v1alpha1.ComponentTypePrefill, v1alpha1.ComponentTypeDecode:
		return kindWorker
	case v1alpha1.ComponentTypePlanner:
		return kindPlanner
	}
	return kindOther
}

// Component is one service of a DGD at one revision, as rendered.
type Component struct {
	DGD *v1alpha1.DynamoGraphDeployment
	// Name is the service's name in spec.services.
	Name string
	// Spec is the service's template at that revision.
	Spec *v1alpha1.DynamoComponentDeploymentSharedSpec
	// Hash is the worker revision ("" for a stable service).
	Hash   string
	Config Config
}

func (c Component) kind() kind { return kindOf(c.Spec.ComponentType) }

// DynamoNamespace is DYN_NAMESPACE of every component of the DGD:
// `<k8s namespace>-<dgd name>` with dots turned into dashes (ComputeDynamoNamespace).
func DynamoNamespace(dgd *v1alpha1.DynamoGraphDeployment) string {
	return dgd.Namespace + "-" + strings.ReplaceAll(dgd.Name, ".", "-")
}

// EffectiveNamespace is the Dynamo namespace a replica registers in: a worker
// revision's `<DYN_NAMESPACE>-<hash>`, a stable service's DYN_NAMESPACE. A cohort's
// frontend (a frontend with a hash) discovers exactly its revision's, the same
// `<DYN_NAMESPACE>-<hash>`: callers pass revisioned for any component with a hash.
func EffectiveNamespace(dgd *v1alpha1.DynamoGraphDeployment, revisioned bool, hash string) string {
	if revisioned && hash != "" {
		return DynamoNamespace(dgd) + "-" + hash
	}
	return DynamoNamespace(dgd)
}

// Cohort reports whether the component is a cohort's frontend: a frontend rendered for
// one worker revision (Hash set), which discovers only that revision's Dynamo
// namespace instead of every revision by prefix.
func (c Component) Cohort() bool { return c.kind() == kindFrontend && c.Hash != "" }

// DiscoveryServiceAccount is the service account of a DGD's pods under Kubernetes
// discovery (Dynamo: `<dgd>-k8s-service-discovery`).
func DiscoveryServiceAccount(dgd string) string { return dgd + "-k8s-service-discovery" }

// annotation is the value of a DGD-level annotation as a component sees it: the
// service's own, else the DGD's (Dynamo propagates these to components).
func (c Component) annotation(key string) string {
	if v, ok := c.Spec.Annotations[key]; ok {
		return v
	}
	return c.DGD.Annotations[key]
}
