package render

import (
	"fmt"
	"hash/fnv"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// ResourceGPU is what Dynamo's `gpu` resource means unless gpuType names another.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// Pod renders the pod template of one role of the component (RoleMain for a single-node
// service; RoleLeader or RoleWorker of gang for a multinode one). In order:
//
//  1. the main container: the type's defaults (command, ports, probes, env), the user's
//     mainContainer over them (its non-empty fields win; user command and args replace
//     the defaults independently; user probes replace a default whole), Dynamo's
//     resources, the service's top-level probes last;
//  2. env, lowest to highest: platform endpoints, Dynamo's common and per-type env,
//     spec.envs, mainContainer env, the service's envs, then the Dynamo namespace
//     variables, which nothing overrides (a worker revision's isolation);
//  3. the pod: extraPodSpec with main first, terminationGracePeriodSeconds 60 and
//     securityContext fsGroup 1000 where unset, /dev/shm, the service account;
//  4. labels and annotations (Dynamo's, the service's, the DGD's propagated ones);
//  5. multinode wiring of the role, for a worker of a detected framework.
func (c Component) Pod(role Role, gang Gang) (corev1.PodTemplateSpec, error) {
	var t corev1.PodTemplateSpec
	if c.Spec.ExtraPodSpec != nil && c.Spec.ExtraPodSpec.PodSpec != nil {
		c.Spec.ExtraPodSpec.PodSpec.DeepCopyInto(&t.Spec)
	}
	version, _, err := c.runtimeVersion()
	if err != nil {
		return t, fmt.Errorf("spec.services[%s].%w", c.Name, err)
	}
	main, err := c.mainContainer(version)
	if err != nil {
		return t, err
	}
	containers := []corev1.Container{main}
	for _, x := range t.Spec.Containers {
		if x.Name != MainContainerName {
			containers = append(containers, x)
		}
	}
	t.Spec.Containers = containers
	c.podDefaults(&t.Spec)
	t.Labels = c.labels(role, gang)
	t.Annotations = c.annotations()
	if role != RoleMain {
		if err := c.wire(&t, role, gang); err != nil {
			return t, fmt.Errorf("spec.services[%s]: %w", c.Name, err)
		}
	}
	return t, nil
}

// runtimeVersion is the component's Dynamo runtime version (see RuntimeVersion).
func (c Component) runtimeVersion() (*Version, bool, error) {
	image := ""
	if c.Spec.ExtraPodSpec != nil && c.Spec.ExtraPodSpec.MainContainer != nil {
		image = c.Spec.ExtraPodSpec.MainContainer.Image
	}
	v, ok, err := RuntimeVersion(image, c.Spec.RuntimeVersionOverride)
	if err != nil || !ok {
		return nil, false, err
	}
	return &v, true, nil
}

func gate(v *Version, at Version) bool { return v != nil && v.AtLeast(at) }

// mainContainer merges the user's mainContainer over the type's defaults.
func (c Component) mainContainer(version *Version) (corev1.Container, error) {
	if c.Spec.ExtraPodSpec == nil || c.Spec.ExtraPodSpec.MainContainer == nil || c.Spec.ExtraPodSpec.MainContainer.Image == "" {
		return corev1.Container{}, fmt.Errorf("spec.services[%s].extraPodSpec.mainContainer.image is required", c.Name)
	}
	user := c.Spec.ExtraPodSpec.MainContainer.DeepCopy()
	base := c.defaultContainer(version)
	m := *user
	m.Name = MainContainerName
	if len(m.Command) == 0 {
		m.Command = base.Command
	}
	if len(m.Args) == 0 {
		m.Args = base.Args
	}
	if len(m.Ports) == 0 {
		m.Ports = base.Ports
	}
	if m.LivenessProbe == nil {
		m.LivenessProbe = base.LivenessProbe
	}
	if m.ReadinessProbe == nil {
		m.ReadinessProbe = base.ReadinessProbe
	}
	if m.StartupProbe == nil {
		m.StartupProbe = base.StartupProbe
	}
	if c.Spec.LivenessProbe != nil {
		m.LivenessProbe = c.Spec.LivenessProbe.DeepCopy()
	}
	if c.Spec.ReadinessProbe != nil {
		m.ReadinessProbe = c.Spec.ReadinessProbe.DeepCopy()
	}
	m.Env = v1alpha1.MergeEnv(c.platformEnv(), c.commonEnv(), base.Env, c.DGD.Spec.Envs, user.Env, c.Spec.Envs, c.namespaceEnv(version))
	if c.Spec.EnvFromSecret != nil && *c.Spec.EnvFromSecret != "" {
		m.EnvFrom = append(m.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: *c.Spec.EnvFromSecret}}})
	}
	if err := applyResources(&m.Resources, c.Spec.Resources); err != nil {
		return m, fmt.Errorf("spec.services[%s].resources: %w", c.Name, err)
	}
	return m, nil
}

// defaultContainer is Dynamo's base container of the component's type
// (component_frontend.go, component_worker.go, component_planner.go).
func (c Component) defaultContainer(v *Version) corev1.Container {
	base := corev1.Container{Command: []string{"/bin/sh", "-c"}}
	switch c.kind() {
	case kindFrontend:
		base.Command, base.Args = []string{"python3"}, []string{"-m", "dynamo.frontend"}
		base.Ports = []corev1.ContainerPort{port(PortNameHTTP, PortHTTP)}
		base.LivenessProbe = httpProbe("/live", PortNameHTTP, 15, 10, 1, 3)
		base.ReadinessProbe = httpProbe("/health", PortNameHTTP, 10, 10, 3, 3)
		if gate(v, gateFrontendStartup) {
			base.StartupProbe = httpProbe("/live", PortNameHTTP, 0, 10, 1, 30)
		}
		base.Env = envs("DYNAMO_PORT", fmt.Sprint(PortHTTP), "DYN_HTTP_PORT", fmt.Sprint(PortHTTP))
		if gate(v, gateFrontendStartup) && !c.Cohort() { // a cohort's frontend has no prefix filter
			base.Env = append(base.Env, corev1.EnvVar{Name: "DYN_NAMESPACE_PREFIX_STRICT", Value: "true"})
		}
	case kindWorker:
		base.Ports = []corev1.ContainerPort{port(PortNameSystem, PortSystem), port(PortNameNixl, PortNixl)}
		failures := int32(1)
		if gate(v, gateCanaryHealth) {
			failures = 3
		}
		base.LivenessProbe = httpProbe("/live", PortNameSystem, 0, 5, 4, failures)
		base.ReadinessProbe = httpProbe("/health", PortNameSystem, 0, 10, 4, 3)
		base.StartupProbe = httpProbe("/live", PortNameSystem, 0, 10, 5, 720)
		base.Env = envs("DYN_SYSTEM_ENABLED", "true",
			"DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS", `["generate"]`,
			"DYN_SYSTEM_PORT", fmt.Sprint(PortSystem),
			"DYN_HEALTH_CHECK_ENABLED", fmt.Sprint(gate(v, gateCanaryHealth)),
			"NIXL_TELEMETRY_ENABLE", "n",
			"NIXL_TELEMETRY_EXPORTER", "prometheus",
			"NIXL_TELEMETRY_PROMETHEUS_PORT", fmt.Sprint(PortNixl),
			"DYN_FORWARDPASS_METRIC_PORT", fmt.Sprint(PortForwardPass))
	case kindPlanner:
		base.Ports = []corev1.ContainerPort{port(PortNameMetrics, PortPlannerMetric), port(PortNameSystem, PortSystem)}
		base.LivenessProbe = httpProbe("/live", PortNameSystem, 0, 5, 4, 1)
		base.ReadinessProbe = httpProbe("/health", PortNameSystem, 0, 10, 4, 3)
		base.StartupProbe = httpProbe("/live", PortNameSystem, 0, 10, 5, 720)
		base.Env = envs("PLANNER_PROMETHEUS_PORT", fmt.Sprint(PortPlannerMetric), "DYN_SYSTEM_PORT", fmt.Sprint(PortSystem))
	}
	return base
}

// platformEnv is the cluster's infrastructure endpoints, only those configured, below
// every other variable (AddStandardEnvVars).
func (c Component) platformEnv() []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, kv := range [][2]string{
		{"NATS_SERVER", c.Config.NATSServer}, {"ETCD_ENDPOINTS", c.Config.ETCDEndpoints},
		{"MODEL_EXPRESS_URL", c.Config.ModelExpressURL}, {"PROMETHEUS_ENDPOINT", c.Config.PrometheusEndpoint},
	} {
		if kv[1] != "" {
			out = append(out, corev1.EnvVar{Name: kv[0], Value: kv[1]})
		}
	}
	return out
}

// commonEnv is every component's env (getCommonContainer).
func (c Component) commonEnv() []corev1.EnvVar {
	out := envs("DYN_NAMESPACE", DynamoNamespace(c.DGD),
		"DYN_COMPONENT", c.Spec.ComponentType,
		"DYN_PARENT_DGD_K8S_NAME", c.DGD.Name,
		"DYN_PARENT_DGD_K8S_NAMESPACE", c.DGD.Namespace)
	for _, f := range [][2]string{{"POD_NAME", "metadata.name"}, {"POD_NAMESPACE", "metadata.namespace"}, {"POD_UID", "metadata.uid"}} {
		out = append(out, corev1.EnvVar{Name: f[0], ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: f[1]}}})
	}
	if c.Config.KubernetesDiscovery(c.DGD) {
		out = append(out, corev1.EnvVar{Name: "DYN_DISCOVERY_BACKEND", Value: DiscoveryKubernetes})
	}
	return out
}

// namespaceEnv isolates worker revisions: DYN_NAMESPACE is the DGD's, a worker's
// DYN_NAMESPACE_WORKER_SUFFIX its revision's hash (effective namespace
// `<DYN_NAMESPACE>-<hash>`), and a shared frontend discovers every revision by the
// prefix (ROLLOUT.md "Workloads"). A cohort's frontend has its revision's namespace as
// DYN_NAMESPACE and no prefix: Dynamo's frontend then filters on exactly that namespace
// (lib/llm/src/namespace.rs, NamespaceFilter::from_namespace_and_prefix: no prefix and a
// namespace other than "dynamo" is Exact), which is what ai-dynamo/dynamo#13824 did for
// its cohorts. Nothing the user sets overrides them.
func (c Component) namespaceEnv(_ *Version) []corev1.EnvVar {
	ns := DynamoNamespace(c.DGD)
	if c.Cohort() {
		return envs("DYN_NAMESPACE", EffectiveNamespace(c.DGD, true, c.Hash))
	}
	out := envs("DYN_NAMESPACE", ns)
	switch c.kind() {
	case kindWorker:
		out = append(out, corev1.EnvVar{Name: v1alpha1.EnvDynNamespaceWorkerSuffix, Value: c.Hash})
	case kindFrontend:
		out = append(out, corev1.EnvVar{Name: v1alpha1.EnvDynNamespacePrefix, Value: ns})
	}
	return out
}

// podDefaults applies Dynamo's pod-level defaults where the user set nothing.
func (c Component) podDefaults(spec *corev1.PodSpec) {
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To(terminationGrace)
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To(defaultFSGroup)}
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.ServiceAccountName == "" {
		switch {
		case c.kind() == kindPlanner:
			spec.ServiceAccountName = PlannerServiceAccount
		case c.Config.KubernetesDiscovery(c.DGD):
			spec.ServiceAccountName = DiscoveryServiceAccount(c.DGD.Name)
		}
	}
	c.sharedMemory(spec)
}

// sharedMemory mounts a memory-backed emptyDir at /dev/shm (8Gi, or sharedMemory.size;
// none when disabled), replacing any volume or mount of the same name or path
// (ApplySharedMemoryVolumeAndMount).
func (c Component) sharedMemory(spec *corev1.PodSpec) {
	shm := c.Spec.SharedMemory
	if shm != nil && shm.Disabled {
		return
	}
	size := resource.MustParse(defaultSharedMemory)
	if shm != nil && shm.Size != nil && !shm.Size.IsZero() {
		size = shm.Size.DeepCopy()
	}
	var volumes []corev1.Volume
	for _, v := range spec.Volumes {
		if v.Name != SharedMemoryVolume {
			volumes = append(volumes, v)
		}
	}
	spec.Volumes = append(volumes, corev1.Volume{Name: SharedMemoryVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}})
	main := &spec.Containers[0]
	var mounts []corev1.VolumeMount
	for _, m := range main.VolumeMounts {
		if m.Name != SharedMemoryVolume && m.MountPath != sharedMemoryMountPath {
			mounts = append(mounts, m)
		}
	}
	main.VolumeMounts = append(mounts, corev1.VolumeMount{Name: SharedMemoryVolume, MountPath: sharedMemoryMountPath})
}

// SelectorValue is nvidia.com/selector of a component's pods: `<dgd>-<service>`, and
// `-<hash>` for a worker revision (Dynamo's DCD name).
func SelectorValue(dgd, service, hash string) string {
	v := dgd + "-" + strings.ToLower(service)
	if hash != "" {
		v += "-" + hash
	}
	return labelValue(v)
}

// labels are the pod's labels: the service's and extraPodMetadata's, then Dynamo's
// (generateLabels), which win.
func (c Component) labels(role Role, gang Gang) map[string]string {
	l := map[string]string{}
	maps.Copy(l, c.Spec.Labels)
	if c.Spec.ExtraPodMetadata != nil {
		maps.Copy(l, c.Spec.ExtraPodMetadata.Labels)
	}
	l[v1alpha1.LabelGraph] = c.DGD.Name
	l[v1alpha1.LabelService] = labelValue(c.Name)
	l[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
	l[LabelSelector] = SelectorValue(c.DGD.Name, c.Name, c.Hash)
	l[LabelDynamoNamespace] = FitLabelValue(DynamoNamespace(c.DGD))
	if c.Cohort() { // its DYN_NAMESPACE, as the label always is
		l[LabelDynamoNamespace] = FitLabelValue(EffectiveNamespace(c.DGD, true, c.Hash))
	}
	if c.Spec.ComponentType != "" {
		l[v1alpha1.LabelComponentType] = labelValue(c.Spec.ComponentType)
	}
	if c.Spec.SubComponentType != "" {
		l[LabelSubComponentType] = labelValue(c.Spec.SubComponentType)
	}
	if c.Hash != "" {
		l[v1alpha1.LabelWorkerHash] = c.Hash
	}
	if c.annotation(AnnotationEnableMetrics) != metricsDisabledByDGDWith {
		l[LabelMetricsEnabled] = metricsEnabledValue
	}
	if c.Config.KubernetesDiscovery(c.DGD) {
		l[LabelDiscoveryBackend] = DiscoveryKubernetes
		l[LabelDiscoveryEnabled] = discoveryEnabledValue
	}
	if gang != nil && gang.RoleLabels() && role != RoleMain {
		l[LabelRole] = string(role)
	}
	return l
}

// annotations are the service's annotations (but those only the operator reads) and
// extraPodMetadata's, with the DGD's propagated annotations where the service has none.
func (c Component) annotations() map[string]string {
	a := map[string]string{}
	for k, v := range c.Spec.Annotations {
		if k != v1alpha1.AnnotationMaxSurge && k != v1alpha1.AnnotationMaxUnavailable && k != v1alpha1.AnnotationChangeCause {
			a[k] = v
		}
	}
	for _, k := range propagatedAnnotations {
		if _, ok := a[k]; !ok && c.DGD.Annotations[k] != "" {
			a[k] = c.DGD.Annotations[k]
		}
	}
	if c.Spec.ExtraPodMetadata != nil {
		maps.Copy(a, c.Spec.ExtraPodMetadata.Annotations)
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

// labelValue trims a string to a valid label value.
func labelValue(s string) string {
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "-_.")
}

// maxLabelValue is the length of the longest label value the API server takes.
const maxLabelValue = 63

// FitLabelValue is a value the operator derives from user-chosen names (a label value
// of letters, digits, '-', '_' and '.') made to fit a label: itself when it has at
// most 63 characters, else its first 54 and '-' and the first 8 hex digits of its
// FNV-1a hash, so distinct long values stay distinct. Dynamo's operator writes such
// values whole and its write is refused (nvidia.com/dynamo-namespace of a namespace
// and DGD name of 64 characters or more): this operator deploys the DGD, with the
// label shortened.
func FitLabelValue(s string) string {
	if len(s) <= maxLabelValue {
		return s
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	digest := fmt.Sprintf("%08x", h.Sum32())
	return strings.TrimRight(s[:maxLabelValue-len(digest)-1], "-_.") + "-" + digest
}

func port(name string, n int32) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: n, Protocol: corev1.ProtocolTCP}
}

func httpProbe(path, portName string, delay, period, timeout, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(portName)}},
		InitialDelaySeconds: delay, PeriodSeconds: period, TimeoutSeconds: timeout, FailureThreshold: failures,
	}
}

// envs builds literal variables from name, value pairs.
func envs(kv ...string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// GPUResource is the resource name a service's `gpu` means: its gpuType, else
// nvidia.com/gpu.
func GPUResource(item *v1alpha1.ResourceItem) corev1.ResourceName {
	if item != nil && item.GPUType != "" {
		return corev1.ResourceName(item.GPUType)
	}
	return ResourceGPU
}

func applyResources(dst *corev1.ResourceRequirements, r *v1alpha1.Resources) error {
	if r == nil {
		return nil
	}
	var err error
	if dst.Requests, err = applyItem(dst.Requests, r.Requests); err != nil {
		return fmt.Errorf("requests: %w", err)
	}
	if dst.Limits, err = applyItem(dst.Limits, r.Limits); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	return nil
}

func applyItem(dst corev1.ResourceList, item *v1alpha1.ResourceItem) (corev1.ResourceList, error) {
	if item == nil {
		return dst, nil
	}
	values := map[corev1.ResourceName]string{
		corev1.ResourceCPU:    item.CPU,
		corev1.ResourceMemory: item.Memory,
		GPUResource(item):     item.GPU,
	}
	for k, v := range item.Custom {
		values[corev1.ResourceName(k)] = v
	}
	for name, v := range values {
		if v == "" {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return dst, fmt.Errorf("%s: %w", name, err)
		}
		if dst == nil {
			dst = corev1.ResourceList{}
		}
		dst[name] = q
	}
	return dst, nil
}

// gpusPerPod is the main container's GPU count: limits, else requests (Dynamo's
// ResolveContainerGPUs).
func gpusPerPod(main *corev1.Container, item *v1alpha1.Resources) int64 {
	names := []corev1.ResourceName{ResourceGPU}
	if item != nil && item.Limits != nil && item.Limits.GPUType != "" {
		names = append([]corev1.ResourceName{corev1.ResourceName(item.Limits.GPUType)}, names...)
	}
	if item != nil && item.Requests != nil && item.Requests.GPUType != "" {
		names = append(names, corev1.ResourceName(item.Requests.GPUType))
	}
	for _, list := range []corev1.ResourceList{main.Resources.Limits, main.Resources.Requests} {
		for _, n := range names {
			if q, ok := list[n]; ok {
				return q.Value()
			}
		}
	}
	return 0
}
