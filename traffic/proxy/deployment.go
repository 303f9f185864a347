package proxy

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/traffic"
)

// Container and volume names of the proxy pod.
const (
	agentContainer   = "agent"
	haproxyContainer = "haproxy"
	runVolume        = "run"
	tokenVolume      = "kube-api-access"
	// tokenDir is where client-go's in-cluster configuration reads the token, the CA
	// and the namespace (rest.InClusterConfig).
	tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// nonRoot is the distroless image's nonroot user; HAProxy runs as it too, so both
	// containers own the socket (mode 600).
	nonRoot int64 = 65532
)

// Images and knobs of t's proxy, defaults applied.
func proxyImage(t traffic.Traffic) string {
	switch {
	case t.Spec.Proxy != nil && t.Spec.Proxy.Image != "":
		return t.Spec.Proxy.Image
	case t.Config.ProxyImage != "":
		return t.Config.ProxyImage
	}
	return DefaultImage
}

func replicas(t traffic.Traffic) int32 {
	if t.Spec.Proxy != nil && t.Spec.Proxy.Replicas != nil {
		return *t.Spec.Proxy.Replicas
	}
	return DefaultReplicas
}

func drainTimeoutSeconds(t traffic.Traffic) int32 {
	if t.Spec.Proxy != nil && t.Spec.Proxy.DrainTimeoutSeconds != nil {
		return *t.Spec.Proxy.DrainTimeoutSeconds
	}
	return DefaultDrainTimeoutSeconds
}

// deployment is `{entry}-proxy`. Its pod template depends on the DGD's proxy spec and
// the operator's images only, never on the split: a weight change writes the desired
// ConfigMap and rolls no pod.
func deployment(t traffic.Traffic) (*appsv1.Deployment, error) {
	if t.Config.AgentImage == "" {
		return nil, fmt.Errorf("proxy of %s/%s: the operator names no agent image (traffic.Config.AgentImage)", t.DGD.Namespace, t.Entry)
	}
	drain := drainTimeoutSeconds(t)
	pod := corev1.PodSpec{
		ServiceAccountName: Name(t),
		// The token is mounted into the agent alone (tokenVolume), not into HAProxy.
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		// A pod told to stop gets the image's STOPSIGNAL, SIGUSR1 in the Docker library
		// image: HAProxy's soft stop, which lets streams in flight finish, bounded by
		// hard-stop-after (this drain timeout, in haproxy.cfg). The runtime uses a
		// container spec's stop signal, else the image's, else SIGTERM (KEP-4960,
		// kubernetes/enhancements keps/sig-node/4960-container-stop-signals): an image
		// without STOPSIGNAL gets SIGTERM, HAProxy's hard stop.
		TerminationGracePeriodSeconds: ptr.To(int64(drain) + 5),
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(nonRoot),
			RunAsGroup: ptr.To(nonRoot), FSGroup: ptr.To(nonRoot),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		InitContainers: []corev1.Container{agent(t, drain)},
		Containers:     []corev1.Container{haproxy(t)},
		Volumes: []corev1.Volume{
			{Name: runVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				SizeLimit: ptr.To(resource.MustParse("16Mi"))}}},
			tokenProjection(),
		},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
			WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: podLabels(t)}}},
	}
	return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta(t, Name(t)),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas(t)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels(t)},
			// One new pod at a time, none taken away before its replacement is ready.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					MaxSurge: ptr.To(intstr.FromInt32(1))}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(t)}, Spec: pod},
		},
	}, nil
}

// agent is a native sidecar (an init container with restartPolicy Always): it starts
// before HAProxy, and HAProxy starts only once its startup probe passed, that is once
// it has written haproxy.cfg holding the current split
// (https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/).
func agent(t traffic.Traffic, drain int32) corev1.Container {
	return corev1.Container{
		Name:          agentContainer,
		Image:         t.Config.AgentImage,
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Command:       []string{"/manager", "proxy-agent"},
		Args: []string{
			"--namespace=$(POD_NAMESPACE)",
			"--pod-name=$(POD_NAME)",
			"--split-configmap=" + Name(t),
			"--status-configmap=" + StatusName(t),
			"--dir=" + RunDir,
			"--bind-address=:" + strconv.Itoa(int(HTTPPort)),
			"--health-probe-bind-address=:" + strconv.Itoa(int(HealthPort)),
			"--drain-timeout=" + strconv.Itoa(int(drain)) + "s",
		},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
		},
		Ports: []corev1.ContainerPort{{Name: "health", ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP}},
		// /startz passes once haproxy.cfg is written, /readyz once the newest split the
		// agent knows is applied, /healthz while its loop runs.
		StartupProbe:   probe("/startz", 1, 600),
		ReadinessProbe: probe("/readyz", 2, 3),
		LivenessProbe:  probe("/healthz", 10, 6),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
		SecurityContext: restricted(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: runVolume, MountPath: RunDir},
			{Name: tokenVolume, MountPath: tokenDir, ReadOnly: true},
		},
	}
}

// haproxy runs HAProxy in the foreground (-db) on the agent's configuration.
func haproxy(t traffic.Traffic) corev1.Container {
	tcp := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(PortName)}},
			PeriodSeconds: period, FailureThreshold: failures}
	}
	return corev1.Container{
		Name:           haproxyContainer,
		Image:          proxyImage(t),
		Command:        []string{"haproxy", "-db", "-f", ConfigPath(RunDir)},
		Ports:          []corev1.ContainerPort{{Name: PortName, ContainerPort: HTTPPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: tcp(2, 3),
		LivenessProbe:  tcp(10, 6),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
		SecurityContext: restricted(),
		VolumeMounts:    []corev1.VolumeMount{{Name: runVolume, MountPath: RunDir}},
	}
}

func probe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}},
		PeriodSeconds: period, FailureThreshold: failures}
}

// restricted is the Pod Security Standards' restricted profile for a container: no
// privilege escalation, every capability dropped (neither binds below 1024), a
// read-only root filesystem (both write only into the emptyDir).
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// tokenProjection is the volume the ServiceAccount admission plugin would add for an
// automounted token (token, ca.crt, namespace), mounted into the agent only
// (https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/).
func tokenProjection() corev1.Volume {
	return corev1.Volume{Name: tokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(int32(0o444)),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3607))}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}
}
