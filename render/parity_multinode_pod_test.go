package render_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/render"
)

// Whole-pod goldens of one multinode worker, per backend and role, written by hand from
// DYNAMO.md ("Every component", the worker column, "Multinode"), notes/dynamo-multinode.md
// §3 mp and Grove's pod contract (test/grove/objects.go): DGD llm in namespace prod,
// service VllmWorker (componentType decode, image 1.6.0), vLLM TP 16 on 8-GPU pods,
// nodeCount 2, revision abcd1234. The env is compared in order: the kubelet expands
// $(VAR) in a value only to variables defined before it (issue 38), so the aliases come
// last, after the Grove helpers they are built from, and a Grove worker has no
// DYNAMO_RANK (its shell exports it).

func fieldVar(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// mnWorkerEnv is a worker's env before the multinode aliases: Dynamo's common env, the
// worker defaults (runtime 1.6.0: health check on), the revision's worker suffix, and
// vLLM mp's NIXL side-channel host.
var mnWorkerEnv = []corev1.EnvVar{
	ev("DYN_NAMESPACE", pDynNS), ev("DYN_COMPONENT", "decode"), ev("DYN_PARENT_DGD_K8S_NAME", pDGD), ev("DYN_PARENT_DGD_K8S_NAMESPACE", pNS),
	fieldVar("POD_NAME", "metadata.name"), fieldVar("POD_NAMESPACE", "metadata.namespace"), fieldVar("POD_UID", "metadata.uid"),
	ev("DYN_DISCOVERY_BACKEND", "kubernetes"),
	ev("DYN_SYSTEM_ENABLED", "true"), ev("DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS", `["generate"]`), ev("DYN_SYSTEM_PORT", "9090"),
	ev("DYN_HEALTH_CHECK_ENABLED", "true"), ev("NIXL_TELEMETRY_ENABLE", "n"), ev("NIXL_TELEMETRY_EXPORTER", "prometheus"),
	ev("NIXL_TELEMETRY_PROMETHEUS_PORT", "19090"), ev("DYN_FORWARDPASS_METRIC_PORT", "20380"),
	ev("DYN_NAMESPACE_WORKER_SUFFIX", pHash),
	fieldVar("VLLM_NIXL_SIDE_CHANNEL_HOST", "status.podIP"),
}

// groveAliasEnv: the leader's pod DNS name from the scaling group's labels (Grove sets
// grove.io/podcliquescalinggroup and -replica-index on every pod of the group), through
// two helpers defined first.
var groveAliasEnv = []corev1.EnvVar{
	fieldVar("DYNAMO_GROVE_PCSG_NAME", "metadata.labels['grove.io/podcliquescalinggroup']"),
	fieldVar("DYNAMO_GROVE_PCSG_INDEX", "metadata.labels['grove.io/podcliquescalinggroup-replica-index']"),
	ev("DYNAMO_LEADER_ADDRESS", "$(DYNAMO_GROVE_PCSG_NAME)-$(DYNAMO_GROVE_PCSG_INDEX)-vllmworker-ldr-0.llm-0.prod.svc.cluster.local"),
}

// mnPod is the whole expected pod: main's command, args and env, the worker's probes
// (kept on the leader, none on a worker), the init containers and volumes after
// /dev/shm, and the role label (LWS only).
func mnPod(command, args []string, env []corev1.EnvVar, leader bool, role string, init []corev1.Container, volumes []corev1.Volume) corev1.PodTemplateSpec {
	gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	main := corev1.Container{
		Name: "main", Image: img("1.6.0"), Command: command, Args: args,
		Ports:        []corev1.ContainerPort{tcp("system", 9090), tcp("nixl", 19090)},
		Env:          env,
		Resources:    corev1.ResourceRequirements{Requests: gpus, Limits: gpus},
		VolumeMounts: []corev1.VolumeMount{shmMount},
	}
	if leader {
		main.LivenessProbe, main.ReadinessProbe, main.StartupProbe = workerLive3, workerReady, workerStartup
	}
	labels := map[string]string{
		"nvidia.com/selector":                     "llm-vllmworker-" + pHash,
		"nvidia.com/dynamo-component":             "VllmWorker",
		"nvidia.com/dynamo-namespace":             pDynNS,
		"nvidia.com/dynamo-graph-deployment-name": pDGD,
		"nvidia.com/dynamo-component-type":        "decode",
		"nvidia.com/dynamo-worker-hash":           pHash,
		"nvidia.com/metrics-enabled":              "true",
		"nvidia.com/dynamo-discovery-backend":     "kubernetes",
		"nvidia.com/dynamo-discovery-enabled":     "true",
		"app.kubernetes.io/managed-by":            "dgd-rollout",
	}
	if role != "" {
		labels["role"] = role
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			InitContainers:                init,
			Containers:                    []corev1.Container{main},
			Volumes:                       append([]corev1.Volume{shmVolume("8Gi")}, volumes...),
			TerminationGracePeriodSeconds: ptr.To[int64](60),
			SecurityContext:               &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			ServiceAccountName:            "llm-k8s-service-discovery",
		},
	}
}

// TestParityMultinodePodGolden: the LWS leader and worker, the Grove leader and worker.
func TestParityMultinodePodGolden(t *testing.T) {
	s := svc("decode", img("1.6.0"), cmdOpt("python3", "-m", "dynamo.vllm"),
		argsOpt("--model", "Qwen/Qwen3-8B", "--tensor-parallel-size", "16"), gpuOpt("8"), nodesOpt(2))
	vllm := []string{"python3", "-m", "dynamo.vllm"}
	mp := func(leader string) []string {
		return strs("--model", "Qwen/Qwen3-8B", "--tensor-parallel-size", "16",
			"--distributed-executor-backend", "mp", "--nnodes", "2", "--master-addr", leader, "--master-port", "29500")
	}
	lg := leaderGrove("vllmworker")
	grove := render.Grove{PCS: pDGD, Group: "vllmworker", Namespace: pNS}
	cases := []struct {
		name string
		gang render.Gang
		role render.Role
		want corev1.PodTemplateSpec
	}{
		{"LWS leader", render.LWS{}, render.RoleLeader, mnPod(vllm, append(mp(leaderLWS), "--node-rank", "0"),
			cat2(mnWorkerEnv, []corev1.EnvVar{ev("DYNAMO_LEADER_ADDRESS", leaderLWS), ev("DYNAMO_RANK", rankLWS)}),
			true, "leader", nil, nil)},
		{"LWS worker", render.LWS{}, render.RoleWorker, mnPod(vllm, append(mp(leaderLWS), "--node-rank", rankLWS, "--headless"),
			cat2(mnWorkerEnv, []corev1.EnvVar{ev("DYNAMO_LEADER_ADDRESS", leaderLWS), ev("DYNAMO_RANK", rankLWS)}),
			false, "worker", waitForLeader("${LWS_LEADER_ADDRESS}"), waitLeaderVolume)},
		{"Grove leader", grove, render.RoleLeader, mnPod(vllm, append(mp(lg), "--node-rank", "0"),
			cat2(mnWorkerEnv, groveAliasEnv, []corev1.EnvVar{ev("DYNAMO_RANK", "0")}),
			true, "", nil, nil)},
		{"Grove worker", grove, render.RoleWorker, mnPod(strs("sh", "-c"),
			strs("export DYNAMO_RANK=$((GROVE_PCLQ_POD_INDEX + 1)); exec python3 -m dynamo.vllm --model Qwen/Qwen3-8B --tensor-parallel-size 16"+
				" --distributed-executor-backend mp --nnodes 2 --master-addr "+lg+" --master-port 29500 --node-rank $((GROVE_PCLQ_POD_INDEX + 1)) --headless"),
			cat2(mnWorkerEnv, groveAliasEnv),
			false, "", waitForLeader("${GROVE_PCSG_NAME}-${GROVE_PCSG_INDEX}-vllmworker-ldr-0.${GROVE_HEADLESS_SERVICE}"), waitLeaderVolume)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := renderOne(t, nil, "VllmWorker", s, pHash, render.Config{}, tc.role, tc.gang)
			diff(t, "pod", tc.want, got)
		})
	}
}

func cat2(lists ...[]corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
