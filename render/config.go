// Package render builds what Dynamo's own operator renders for a component of a
// DynamoGraphDeployment, so that the pods this operator runs serve a real Dynamo graph:
// the pod template of every component type and multinode role (container `main`, env,
// ports, probes, /dev/shm, labels, annotations, service account, framework wiring of
// leader and workers), the component Services, the Ingress, and the per-namespace
// discovery and planner RBAC. It is backend-neutral: the Deployment, LeaderWorkerSet
// and Grove backends wrap the same pod template, so a Deployment's pod, an LWS leader
// and a Grove clique never disagree.
//
// The facts it follows are ../shared/design/DYNAMO.md (Dynamo main after v1.6.0,
// deploy/operator/internal/dynamo: component_common.go, component_frontend.go,
// component_worker.go, component_planner.go, graph.go, backend_vllm.go,
// backend_sglang.go, backend_trtllm.go, lws.go, grove.go), with two deliberate
// differences that make rolling updates safe: the Dynamo namespace variables are
// forced (a worker revision's DYN_NAMESPACE_WORKER_SUFFIX is its hash, whatever the
// user sets), and env keeps its order of first appearance instead of Dynamo's
// alphabetical sort, so a user's $(VAR) references keep working.
package render

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Discovery backends.
const (
	DiscoveryKubernetes = "kubernetes"
	DiscoveryEtcd       = "etcd"
)

// DGD annotations Dynamo reads (propagated from the DGD to its pods).
const (
	AnnotationDiscoveryBackend           = "nvidia.com/dynamo-discovery-backend"
	AnnotationEnableMetrics              = "nvidia.com/enable-metrics"
	AnnotationKubeDiscoveryMode          = "nvidia.com/dynamo-kube-discovery-mode"
	AnnotationOperatorOriginVersion      = "nvidia.com/dynamo-operator-origin-version"
	AnnotationVLLMDistributedExecutor    = "nvidia.com/vllm-distributed-executor-backend"
	AnnotationMPISSHSecret               = "nvidia.com/mpi-ssh-secret"
	defaultIngressHostSuffix             = "local"
	defaultDiscoveryBackend              = DiscoveryKubernetes
	discoveryBackendValuesForErrorString = "kubernetes or etcd"
)

// propagatedAnnotations are the DGD annotations copied onto every component's pods
// unless the service sets them itself (Dynamo's dgdPropagatedAnnotationKeys).
var propagatedAnnotations = []string{
	AnnotationEnableMetrics, AnnotationDiscoveryBackend, AnnotationKubeDiscoveryMode,
	AnnotationOperatorOriginVersion, AnnotationVLLMDistributedExecutor,
}

// RenderVersion numbers what this package renders into worker pods for a given spec.
// It is part of every worker revision's hash: bump it with any change that reaches
// worker pods, so that an upgraded operator rolls workers onto the new rendering once
// (side by side, as any rollout) instead of mixing two renderings in one revision.
// 1 was the operator before it rendered Dynamo's pod contract (stored as 0).
const RenderVersion = 2

// PodAnnotationKeys are the DGD annotations that reach pods (and so belong in the
// worker revision hash).
func PodAnnotationKeys() []string {
	return append(append([]string(nil), propagatedAnnotations...), AnnotationMPISSHSecret)
}

// Config is the cluster's Dynamo platform, as the operator is configured with it: the
// infrastructure endpoints injected into every pod (only those set), the default
// discovery backend and the Ingress host suffix. Every field reaches worker pods or
// their Services, so the worker revision hash covers it (Digest).
type Config struct {
	// NATSServer is NATS_SERVER, e.g. nats://nats.dynamo-system:4222.
	NATSServer string `json:"natsServer,omitempty"`
	// ETCDEndpoints is ETCD_ENDPOINTS, e.g. http://etcd.dynamo-system:2379.
	ETCDEndpoints string `json:"etcdEndpoints,omitempty"`
	// PrometheusEndpoint is PROMETHEUS_ENDPOINT (the planner reads metrics from it).
	PrometheusEndpoint string `json:"prometheusEndpoint,omitempty"`
	// ModelExpressURL is MODEL_EXPRESS_URL.
	ModelExpressURL string `json:"modelExpressURL,omitempty"`
	// DiscoveryBackend is the default DYN_DISCOVERY_BACKEND: kubernetes (the default) or
	// etcd; a DGD's nvidia.com/dynamo-discovery-backend annotation overrides it.
	DiscoveryBackend string `json:"discoveryBackend,omitempty"`
	// IngressHostSuffix is the domain of Ingress hosts whose spec gives none ("local").
	IngressHostSuffix string `json:"ingressHostSuffix,omitempty"`
}

// Validate reports a configuration the operator cannot run with.
func (c Config) Validate() error {
	switch c.DiscoveryBackend {
	case "", DiscoveryKubernetes, DiscoveryEtcd:
	default:
		return fmt.Errorf("discovery backend %q: must be %s", c.DiscoveryBackend, discoveryBackendValuesForErrorString)
	}
	// Admission checks an Ingress host without this suffix when the spec gives none
	// (api/v1alpha1 IngressSpec): the suffix must be a DNS-1123 subdomain itself.
	if errs := validation.IsDNS1123Subdomain(c.IngressHostSuffix); c.IngressHostSuffix != "" && len(errs) > 0 {
		return fmt.Errorf("ingress host suffix %q: %s", c.IngressHostSuffix, strings.Join(errs, "; "))
	}
	return nil
}

// Discovery is the discovery backend of a DGD's pods: its annotation, else the
// operator's default, else kubernetes.
func (c Config) Discovery(dgd *v1alpha1.DynamoGraphDeployment) string {
	if v := dgd.Annotations[AnnotationDiscoveryBackend]; v != "" {
		return v
	}
	if c.DiscoveryBackend != "" {
		return c.DiscoveryBackend
	}
	return defaultDiscoveryBackend
}

// KubernetesDiscovery reports whether a DGD's pods discover each other through
// Kubernetes (EndpointSlices and DynamoWorkerMetadata): everything but etcd.
func (c Config) KubernetesDiscovery(dgd *v1alpha1.DynamoGraphDeployment) bool {
	return c.Discovery(dgd) != DiscoveryEtcd
}

func (c Config) hostSuffix() string {
	if c.IngressHostSuffix != "" {
		return c.IngressHostSuffix
	}
	return defaultIngressHostSuffix
}
