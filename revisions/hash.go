package revisions

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/digest"
)

// WorkerTemplate is the part of a DGD that shapes worker pods. Two DGDs with equal
// WorkerTemplates run identical workers, and any change to a WorkerTemplate rolls every
// worker service to a new revision (prefill and decode must move to a new Dynamo
// namespace together).
//
// It covers, for every worker service (componentType worker, prefill or decode) keyed by
// service name: componentType, subComponentType, resources, envs, envFromSecret, labels,
// annotations, extraPodMetadata, extraPodSpec (volumes, tolerations, the main container's
// image, command and args...), livenessProbe, readinessProbe and multinode.nodeCount; plus
// the graph-level spec.envs (added to every main container) and spec.backend (the
// workload kind).
//
// It excludes:
//   - replicas: scaling is not a new revision (Deployment and StatefulSet agree);
//   - autoscaling and ingress: kept as given, never rendered into pods;
//   - dynamoNamespace and globalDynamoNamespace: the operator derives the runtime
//     namespace itself (ROLLOUT.md "Workloads");
//   - pvc, compilationCache, sharedMemory and volumeMounts: accepted for compatibility
//     with Dynamo manifests but not rendered into pods by this operator (volumes and
//     mounts reach pods through extraPodSpec, which is covered); if a backend ever
//     renders them, they must be added here, which changes every hash;
//   - serviceName: informational;
//   - the annotations AnnotationMaxSurge, AnnotationMaxUnavailable and
//     kubernetes.io/change-cause, read by the operator or by humans, not by pods;
//   - every field of non-worker services (frontend, planner...): they are updated in
//     place and start no worker rollout (a change to one is still a new revision: see
//     GraphTemplate).
//
// The JSON field order below is part of the hash: do not reorder, rename or remove
// fields, and add new ones only with omitempty and a golden-test update.
type WorkerTemplate struct {
	// Backend is spec.backend, with "" normalized to Auto (the CRD default), so a DGD
	// hashes the same before and after admission defaulting.
	Backend v1alpha1.BackendType `json:"backend,omitempty"`
	// Envs are the graph-level spec.envs, in order.
	Envs []corev1.EnvVar `json:"envs,omitempty"`
	// Services are the worker services by name.
	Services map[string]ServiceTemplate `json:"services,omitempty"`
	// RenderVersion is render.RenderVersion: what the operator renders into worker pods
	// from the same spec. A new renderer is a new revision, rolled like any other.
	RenderVersion int `json:"renderVersion,omitempty"`
	// BackendFramework is spec.backendFramework (it decides a gang's wiring).
	BackendFramework string `json:"backendFramework,omitempty"`
	// Annotations are the DGD's annotations that reach worker pods
	// (render.PodAnnotationKeys: discovery backend, metrics, vLLM executor...).
	Annotations map[string]string `json:"annotations,omitempty"`
	// Zero lists, on the Grove backend only, the worker services with no replicas: a
	// revision's PodCliqueSet holds a clique for every other worker service, and Grove
	// can neither hold a clique at zero (below minAvailable it gang-terminates) nor add
	// one later, so scaling a worker to or from zero there is a new revision.
	Zero []string `json:"zero,omitempty"`
}

// ServiceTemplate is the pod-shaping part of one worker service. See WorkerTemplate for
// what it covers and why. Each field is the DynamoComponentDeploymentSharedSpec field of
// the same JSON name, except Annotations (without the excluded ones) and NodeCount.
type ServiceTemplate struct {
	ComponentType    string                     `json:"componentType,omitempty"`
	SubComponentType string                     `json:"subComponentType,omitempty"`
	Resources        *v1alpha1.Resources        `json:"resources,omitempty"`
	Envs             []corev1.EnvVar            `json:"envs,omitempty"`
	EnvFromSecret    *string                    `json:"envFromSecret,omitempty"`
	Labels           map[string]string          `json:"labels,omitempty"`
	Annotations      map[string]string          `json:"annotations,omitempty"`
	ExtraPodMetadata *v1alpha1.ExtraPodMetadata `json:"extraPodMetadata,omitempty"`
	ExtraPodSpec     *v1alpha1.ExtraPodSpec     `json:"extraPodSpec,omitempty"`
	LivenessProbe    *corev1.Probe              `json:"livenessProbe,omitempty"`
	ReadinessProbe   *corev1.Probe              `json:"readinessProbe,omitempty"`
	// NodeCount is multinode.nodeCount, 1 for a single-node service.
	NodeCount int32 `json:"nodeCount"`
	// SharedMemory sizes /dev/shm; RuntimeVersionOverride decides version-gated env and
	// probes.
	SharedMemory           *v1alpha1.SharedMemorySpec `json:"sharedMemory,omitempty"`
	RuntimeVersionOverride string                     `json:"runtimeVersionOverride,omitempty"`
}

// excludedAnnotations are service annotations that never reach a pod's behaviour.
var excludedAnnotations = map[string]bool{
	v1alpha1.AnnotationMaxSurge:       true,
	v1alpha1.AnnotationMaxUnavailable: true,
	v1alpha1.AnnotationChangeCause:    true,
}

// NewWorkerTemplate returns the worker template of dgd. The result shares maps, slices
// and pointers with dgd: treat it as read-only.
func NewWorkerTemplate(dgd *v1alpha1.DynamoGraphDeployment) WorkerTemplate {
	d := NewRevisionData(dgd)
	return d.Template()
}

// newWorkerTemplate builds a WorkerTemplate from the parts of a spec (or of a
// RevisionData) it depends on.
func newWorkerTemplate(d *RevisionData) WorkerTemplate {
	backend := d.Backend
	if backend == "" {
		backend = v1alpha1.BackendAuto
	}
	services := d.Services
	t := WorkerTemplate{Backend: backend, Envs: d.Envs, RenderVersion: d.RenderVersion, BackendFramework: d.BackendFramework, Annotations: d.Annotations}
	if backend == v1alpha1.BackendGrove {
		for name, s := range services {
			if s != nil && s.IsWorker() && s.DesiredReplicas() == 0 {
				t.Zero = append(t.Zero, name)
			}
		}
		sort.Strings(t.Zero)
	}
	for name, s := range services {
		if s == nil || !s.IsWorker() {
			continue
		}
		if t.Services == nil {
			t.Services = map[string]ServiceTemplate{}
		}
		t.Services[name] = newServiceTemplate(s)
	}
	return t
}

// newServiceTemplate projects one worker service onto its pod-shaping fields, in their
// canonical layout (see canonical).
func newServiceTemplate(s *v1alpha1.DynamoComponentDeploymentSharedSpec) ServiceTemplate {
	s = canonical(s)
	return ServiceTemplate{
		ComponentType:    s.ComponentType,
		SubComponentType: s.SubComponentType,
		Resources:        s.Resources,
		Envs:             s.Envs,
		EnvFromSecret:    s.EnvFromSecret,
		Labels:           s.Labels,
		Annotations:      podAnnotations(s.Annotations),
		ExtraPodMetadata: s.ExtraPodMetadata,
		ExtraPodSpec:     s.ExtraPodSpec,
		LivenessProbe:    s.LivenessProbe,
		ReadinessProbe:   s.ReadinessProbe,
		NodeCount:        s.NodeCount(),
		SharedMemory:     s.SharedMemory,

		RuntimeVersionOverride: s.RuntimeVersionOverride,
	}
}

// podAnnotations returns annotations without excludedAnnotations (nil when none remain).
func podAnnotations(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		if excludedAnnotations[k] {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(in))
		}
		out[k] = v
	}
	return out
}

// GraphTemplate is the whole graph a revision records: the worker template (whose hash
// decides what rolls) and every stable service (frontend, planner...), which is updated
// in place. Two DGDs with equal GraphTemplates are the same revision; a change to a
// stable service alone is a new revision that rolls no worker. A stable service counts
// with its whole spec except replicas and autoscaling (scaling is not a revision) and
// the annotations no pod reads (excludedAnnotations).
type GraphTemplate struct {
	Workers WorkerTemplate                                           `json:"workers"`
	Stable  map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec `json:"stable,omitempty"`
	// WorkersOnly marks the template of a revision made before whole-graph revisions:
	// it does not know the stable services, so it equals no whole-graph template.
	WorkersOnly bool `json:"workersOnly,omitempty"`
}

// stableTemplate projects a stable service onto what its revision records: its
// canonical layout (see canonical), without replicas, autoscaling, the annotations no pod
// reads, and dynamoNamespace and serviceName, which reach nothing (the operator derives
// the runtime namespace; the map key names the service).
func stableTemplate(s *v1alpha1.DynamoComponentDeploymentSharedSpec) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	c := canonical(s)
	c.Replicas, c.Autoscaling, c.DynamoNamespace, c.ServiceName = nil, nil, nil, ""
	c.Annotations = podAnnotations(c.Annotations)
	return c
}

// GraphHash returns the hash that names a revision: Hash's scheme over g.
func GraphHash(g GraphTemplate, collisionCount *int32) string {
	return digest.WithCollisions(g, collisionCount)
}

// Hash returns the revision hash of t: digest.WithCollisions of t (8 hex characters of
// the SHA-256 of its canonical JSON, with collisionCount appended when non-nil, as
// Kubernetes' ControllerRevision hash appends it). 8 lowercase hex characters are what
// Dynamo's worker hash is and the only worker namespace suffix a strict frontend
// (DYN_NAMESPACE_PREFIX_STRICT) discovers: any other shape would leave a revision's
// workers invisible. A nil collisionCount and a pointer to 0 give different hashes;
// Sync always passes a non-nil count.
//
// The result is stable across processes and Go versions as long as the JSON encoding
// of WorkerTemplate does not change; TestHashGolden guards that.
func Hash(t WorkerTemplate, collisionCount *int32) string {
	return digest.WithCollisions(t, collisionCount)
}
