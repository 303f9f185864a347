package render_test

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/render"
)

// Multinode goldens: the worked examples of notes/dynamo-multinode.md §3.1 (vLLM mp, ray,
// data parallel), §4 (SGLang), §5 (TRT-LLM, exact strings as in Dynamo's
// backend_trtllm.go), §2 (leader address and rank per gang), plus the portable aliases
// DYNAMO_LEADER_ADDRESS / DYNAMO_RANK, last in env (LWS: from LWS's env; Grove: the
// leader address from Grove's labels, through two helpers before it, leader rank "0";
// a Grove worker's rank in no env, since no env can hold it on Grove v0.1.0-alpha.12:
// its shell exports it from the clique index, issue 38).

const (
	leaderLWS = "$(LWS_LEADER_ADDRESS)"
	rankLWS   = "$(LWS_WORKER_INDEX)"
	rankGrove = "$((GROVE_PCLQ_POD_INDEX + 1))"
)

// leaderGrove is L_G for a service whose lower-case name is group.
func leaderGrove(group string) string {
	return "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-" + group + "-ldr-0.$(GROVE_HEADLESS_SERVICE)"
}

// groveAlias is DYNAMO_LEADER_ADDRESS on Grove once resolved: the leader pod's DNS name
// `<P>-0-<G>-<j>-<G>-ldr-0.<P>-0.<ns>.svc.cluster.local` (notes/grove-facts.md §2), its
// PCSG name and replica index read from the pod's Grove labels.
func groveAlias(group string) string {
	return "{label:grove.io/podcliquescalinggroup}-{label:grove.io/podcliquescalinggroup-replica-index}-" +
		group + "-ldr-0.llm-0.prod.svc.cluster.local"
}

var kubeRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// resolve expands a variable's $(VAR) references to the pod's other variables (a
// label fieldRef becomes {label:KEY}); references to variables not in env stay.
func resolve(env []corev1.EnvVar, name string) (string, bool) {
	byName := map[string]corev1.EnvVar{}
	for _, e := range env {
		byName[e.Name] = e
	}
	var value func(string, int) string
	value = func(n string, depth int) string {
		e := byName[n]
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			p := e.ValueFrom.FieldRef.FieldPath
			if m := regexp.MustCompile(`^metadata\.labels\['(.*)'\]$`).FindStringSubmatch(p); m != nil {
				return "{label:" + m[1] + "}"
			}
			return "{field:" + p + "}"
		}
		return kubeRef.ReplaceAllStringFunc(e.Value, func(ref string) string {
			if _, ok := byName[ref[2:len(ref)-1]]; ok && depth < 5 {
				return value(ref[2:len(ref)-1], depth+1)
			}
			return ref
		})
	}
	if _, ok := byName[name]; !ok {
		return "", false
	}
	return value(name, 0), true
}

type probes int

const (
	probesKept probes = iota // the worker defaults (image 1.6.0)
	probesNone
	probesSSH // TRT-LLM worker: readiness TCP 2222 only
)

type mnCase struct {
	name    string
	svcName string
	s       *spec
	dgdAnn  map[string]string
	grove   bool
	role    render.Role
	command []string
	// args: a Grove worker's single shell arg less the DYNAMO_RANK export it starts with.
	args    []string
	probes  probes
	env     map[string]string // variables that must have these values ("<none>": absent)
	init    []corev1.Container
	volumes []corev1.Volume      // besides shared-memory
	mounts  []corev1.VolumeMount // on main, besides /dev/shm
}

func runMultinode(t *testing.T, cases []mnCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			group := strings.ToLower(tc.svcName)
			var gang render.Gang = render.LWS{}
			if tc.grove {
				gang = render.Grove{PCS: pDGD, Group: group, Namespace: pNS}
			}
			p := renderOne(t, tc.dgdAnn, tc.svcName, tc.s, pHash, render.Config{}, tc.role, gang)
			m := p.Spec.Containers[0]
			diff(t, "command", tc.command, m.Command)
			args := m.Args
			if tc.grove && tc.role == render.RoleWorker {
				args = stripRankExport(t, args)
			}
			diff(t, "args", tc.args, args)
			switch tc.probes {
			case probesKept:
				diff(t, "probes", []*corev1.Probe{workerLive3, workerReady, workerStartup}, []*corev1.Probe{m.LivenessProbe, m.ReadinessProbe, m.StartupProbe})
			case probesNone:
				diff(t, "probes", []*corev1.Probe{nil, nil, nil}, []*corev1.Probe{m.LivenessProbe, m.ReadinessProbe, m.StartupProbe})
			case probesSSH:
				ssh := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2222)}},
					InitialDelaySeconds: 20, PeriodSeconds: 20, TimeoutSeconds: 5, FailureThreshold: 10}
				diff(t, "probes", []*corev1.Probe{nil, ssh, nil}, []*corev1.Probe{m.LivenessProbe, m.ReadinessProbe, m.StartupProbe})
			}
			got := envMap(t, m.Env)
			for k, v := range tc.env {
				if g, ok := got[k]; v == "<none>" && ok {
					t.Errorf("env %s = %q, want absent", k, g)
				} else if v != "<none>" && g != v {
					t.Errorf("env %s = %q, want %q", k, g, v)
				}
			}
			// Portable aliases, last in env, each after what it is built from.
			wantLeader, wantRank := leaderLWS, rankLWS
			wantTail := []string{"DYNAMO_LEADER_ADDRESS", "DYNAMO_RANK"}
			if tc.grove {
				wantLeader, wantRank = groveAlias(group), "0"
				wantTail = []string{"DYNAMO_GROVE_PCSG_NAME", "DYNAMO_GROVE_PCSG_INDEX", "DYNAMO_LEADER_ADDRESS", "DYNAMO_RANK"}
				if tc.role == render.RoleWorker {
					wantRank, wantTail = "<none>", wantTail[:3] // exported by its shell (stripRankExport)
				}
			}
			if v, _ := resolve(m.Env, "DYNAMO_LEADER_ADDRESS"); v != wantLeader {
				t.Errorf("DYNAMO_LEADER_ADDRESS resolves to %q, want %q", v, wantLeader)
			}
			if v, ok := resolve(m.Env, "DYNAMO_RANK"); !ok && wantRank != "<none>" || ok && v != wantRank {
				t.Errorf("DYNAMO_RANK = %q (defined %v), want %q", v, ok, wantRank)
			}
			var tail []string
			for _, e := range m.Env[max(0, len(m.Env)-len(wantTail)):] {
				tail = append(tail, e.Name)
			}
			diff(t, "last env variables", wantTail, tail)
			diff(t, "initContainers", tc.init, p.Spec.InitContainers)
			var vols []corev1.Volume
			for _, v := range p.Spec.Volumes {
				if v.Name != "shared-memory" {
					vols = append(vols, v)
				}
			}
			diff(t, "volumes", tc.volumes, vols)
			var mounts []corev1.VolumeMount
			for _, v := range m.VolumeMounts {
				if v.Name != "shared-memory" {
					mounts = append(mounts, v)
				}
			}
			diff(t, "main volumeMounts", tc.mounts, mounts)
			// LWS pods carry role=leader|worker; Grove pods no role label (notes §6, §7).
			wantRole := string(tc.role)
			if tc.grove {
				wantRole = ""
			}
			diff(t, "label role", wantRole, p.Labels["role"])
		})
	}
}

// stripRankExport removes `export DYNAMO_RANK=$((GROVE_PCLQ_POD_INDEX + 1))` and its
// separator (`;` or `&&`) from the front of a Grove worker's one shell argument.
func stripRankExport(t *testing.T, args []string) []string {
	t.Helper()
	prefix := regexp.MustCompile(`^export DYNAMO_RANK="?\$\(\(GROVE_PCLQ_POD_INDEX \+ 1\)\)"?\s*(;|&&)\s*`)
	if len(args) != 1 || !prefix.MatchString(args[0]) {
		t.Errorf("args %q: want one shell string exporting DYNAMO_RANK=%s first", args, rankGrove)
		return args
	}
	return []string{prefix.ReplaceAllString(args[0], "")}
}

func waitForLeader(host string) []corev1.Container {
	return []corev1.Container{{
		Name: "wait-for-leader-mp", Image: img("1.6.0"),
		Command:      []string{"sh", "-c", `export LEADER_HOST="` + host + `" LEADER_PORT="29500" && exec python3 /scripts/wait-for-leader.py`},
		VolumeMounts: []corev1.VolumeMount{{Name: "wait-leader-script", MountPath: "/scripts", ReadOnly: true}},
	}}
}

var waitLeaderVolume = []corev1.Volume{{Name: "wait-leader-script", VolumeSource: corev1.VolumeSource{
	ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "llm-wait-leader-script"}}}}}

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestParityMultinodeVLLM: notes §3 and the worked examples §3.1 (DGD llm, service
// VllmWorker, decode, 8 GPUs per pod).
func TestParityMultinodeVLLM(t *testing.T) {
	vllm := []string{"python3", "-m", "dynamo.vllm"}
	tpArgs := []string{"--model", "Qwen/Qwen3-8B", "--tensor-parallel-size", "16"}
	tp := func(n int32, o ...opt) *spec {
		return svc("decode", img("1.6.0"), append([]opt{cmdOpt(vllm...), argsOpt(tpArgs...), gpuOpt("8"), nodesOpt(n)}, o...)...)
	}
	dpArgs := []string{"--model", "M", "--data-parallel-size", "16"}
	dp := svc("decode", img("1.6.0"), cmdOpt(vllm...), argsOpt(dpArgs...), gpuOpt("8"), nodesOpt(2))
	lg := leaderGrove("vllmworker")
	mp := func(n, leader string) []string {
		return []string{"--distributed-executor-backend", "mp", "--nnodes", n, "--master-addr", leader, "--master-port", "29500"}
	}
	mpLine := "python3 -m dynamo.vllm --model Qwen/Qwen3-8B --tensor-parallel-size 16 --distributed-executor-backend mp"
	nixl := map[string]string{"VLLM_NIXL_SIDE_CHANNEL_HOST": "field:status.podIP"}
	noNixl := map[string]string{"VLLM_NIXL_SIDE_CHANNEL_HOST": "<none>"}
	rayAnn := annOpt("nvidia.com/vllm-distributed-executor-backend", "ray")
	rayLeader := []string{"ray start --head --port=6379 && python3 -m dynamo.vllm --model Qwen/Qwen3-8B --tensor-parallel-size 16 --distributed-executor-backend ray"}
	dpFlags := func(leader string) []string {
		return []string{"--data-parallel-hybrid-lb", "--data-parallel-size-local", "8", "--data-parallel-start-rank", "0",
			"--data-parallel-address", leader, "--data-parallel-rpc-port", "13445"}
	}
	dpWorker := "exec python3 -m dynamo.vllm --model M --data-parallel-size 16 --data-parallel-hybrid-lb --data-parallel-size-local 8 --data-parallel-start-rank "
	runMultinode(t, []mnCase{
		{name: "mp grove leader", svcName: "VllmWorker", s: tp(2), grove: true, role: render.RoleLeader,
			command: vllm, args: cat(tpArgs, mp("2", lg), strs("--node-rank", "0")), probes: probesKept, env: nixl},
		{name: "mp grove worker", svcName: "VllmWorker", s: tp(2), grove: true, role: render.RoleWorker,
			command: strs("sh", "-c"), args: strs("exec " + mpLine + " --nnodes 2 --master-addr " + lg + " --master-port 29500 --node-rank " + rankGrove + " --headless"),
			probes: probesNone, env: nixl,
			init:    waitForLeader("${GROVE_PCSG_NAME}-${GROVE_PCSG_INDEX}-vllmworker-ldr-0.${GROVE_HEADLESS_SERVICE}"),
			volumes: waitLeaderVolume},
		{name: "mp lws leader", svcName: "VllmWorker", s: tp(2), role: render.RoleLeader,
			command: vllm, args: cat(tpArgs, mp("2", leaderLWS), strs("--node-rank", "0")), probes: probesKept, env: nixl},
		{name: "mp lws worker", svcName: "VllmWorker", s: tp(2), role: render.RoleWorker,
			command: vllm, args: cat(tpArgs, mp("2", leaderLWS), strs("--node-rank", rankLWS, "--headless")), probes: probesNone, env: nixl,
			init: waitForLeader("${LWS_LEADER_ADDRESS}"), volumes: waitLeaderVolume},
		{name: "mp grove worker, 4 nodes", svcName: "VllmWorker", s: tp(4), grove: true, role: render.RoleWorker,
			command: strs("sh", "-c"), args: strs("exec " + mpLine + " --nnodes 4 --master-addr " + lg + " --master-port 29500 --node-rank " + rankGrove + " --headless"),
			probes: probesNone, env: nixl,
			init:    waitForLeader("${GROVE_PCSG_NAME}-${GROVE_PCSG_INDEX}-vllmworker-ldr-0.${GROVE_HEADLESS_SERVICE}"),
			volumes: waitLeaderVolume},
		{name: "mp lws leader, 4 nodes", svcName: "VllmWorker", s: tp(4), role: render.RoleLeader,
			command: vllm, args: cat(tpArgs, mp("4", leaderLWS), strs("--node-rank", "0")), probes: probesKept, env: nixl},
		{name: "ray (service annotation) grove leader", svcName: "VllmWorker", s: tp(2, rayAnn), grove: true, role: render.RoleLeader,
			command: shellCmd, args: rayLeader, probes: probesKept, env: noNixl},
		{name: "ray (service annotation) grove worker", svcName: "VllmWorker", s: tp(2, rayAnn), grove: true, role: render.RoleWorker,
			command: shellCmd, args: strs("ray start --address=" + lg + ":6379 --block"), probes: probesNone, env: noNixl},
		{name: "ray (DGD annotation) lws leader", svcName: "VllmWorker", s: tp(2),
			dgdAnn: kvs("nvidia.com/vllm-distributed-executor-backend", "ray"), role: render.RoleLeader,
			command: shellCmd, args: rayLeader, probes: probesKept, env: noNixl},
		{name: "ray (DGD annotation, upper case) lws worker", svcName: "VllmWorker", s: tp(2),
			dgdAnn: kvs("nvidia.com/vllm-distributed-executor-backend", "Ray"), role: render.RoleWorker,
			command: shellCmd, args: strs("ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"), probes: probesNone, env: noNixl},
		// notes §3 shouldUseMpBackend / §8: without the executor annotation, a DGD whose
		// nvidia.com/dynamo-operator-origin-version is below 1.0.0 uses ray.
		{name: "ray (origin version 0.9.0) lws leader", svcName: "VllmWorker", s: tp(2),
			dgdAnn: kvs("nvidia.com/dynamo-operator-origin-version", "0.9.0"), role: render.RoleLeader,
			command: shellCmd, args: rayLeader, probes: probesKept, env: noNixl},
		{name: "data parallel grove leader", svcName: "VllmWorker", s: dp, grove: true, role: render.RoleLeader,
			command: vllm, args: cat(dpArgs, dpFlags(lg)), probes: probesKept, env: nixl},
		{name: "data parallel grove worker", svcName: "VllmWorker", s: dp, grove: true, role: render.RoleWorker,
			command: strs("sh", "-c"), args: strs(dpWorker + "$(( 8 * " + rankGrove + " )) --data-parallel-address " + lg + " --data-parallel-rpc-port 13445"),
			probes: probesNone, env: nixl},
		{name: "data parallel lws leader", svcName: "VllmWorker", s: dp, role: render.RoleLeader,
			command: vllm, args: cat(dpArgs, dpFlags(leaderLWS)), probes: probesKept, env: nixl},
		// notes §3.1 writes `$(( 8 * $(LWS_WORKER_INDEX) ))` and says the kubelet
		// substitutes the index. It does not: the kubelet reads `$((` up to the first `)`
		// as one (unknown) variable name and leaves the text alone (k8s
		// third_party/forked/golang/expansion), and sh would then run a command named
		// LWS_WORKER_INDEX. The rank must reach the shell as ${LWS_WORKER_INDEX}.
		{name: "data parallel lws worker", svcName: "VllmWorker", s: dp, role: render.RoleWorker,
			command: strs("sh", "-c"), args: strs(dpWorker + "$(( 8 * ${LWS_WORKER_INDEX} )) --data-parallel-address $(LWS_LEADER_ADDRESS) --data-parallel-rpc-port 13445"),
			probes: probesNone, env: nixl},
	})
}

// TestParityMultinodeSGLang: notes §4 and its example.
func TestParityMultinodeSGLang(t *testing.T) {
	sg := []string{"python3", "-m", "dynamo.sglang"}
	base := []string{"--model-path", "M", "--tp", "16"}
	s := func(n int32) *spec {
		return svc("decode", img("1.6.0"), cmdOpt(sg...), argsOpt(base...), gpuOpt("8"), nodesOpt(n))
	}
	lg := leaderGrove("sglangworker")
	none := map[string]string{"VLLM_NIXL_SIDE_CHANNEL_HOST": "<none>", "OMPI_MCA_orte_keep_fqdn_hostnames": "<none>"}
	runMultinode(t, []mnCase{
		{name: "grove leader", svcName: "SglangWorker", s: s(2), grove: true, role: render.RoleLeader,
			command: sg, args: cat(base, strs("--dist-init-addr", lg+":29500", "--nnodes", "2", "--node-rank", "0")), probes: probesKept, env: none},
		{name: "grove worker", svcName: "SglangWorker", s: s(2), grove: true, role: render.RoleWorker,
			command: strs("sh", "-c"), args: strs("exec python3 -m dynamo.sglang --model-path M --tp 16 --dist-init-addr " + lg + ":29500 --nnodes 2 --node-rank " + rankGrove),
			probes: probesNone, env: none},
		{name: "lws leader", svcName: "SglangWorker", s: s(2), role: render.RoleLeader,
			command: sg, args: cat(base, strs("--dist-init-addr", "$(LWS_LEADER_ADDRESS):29500", "--nnodes", "2", "--node-rank", "0")), probes: probesKept, env: none},
		{name: "lws worker", svcName: "SglangWorker", s: s(2), role: render.RoleWorker,
			command: sg, args: cat(base, strs("--dist-init-addr", "$(LWS_LEADER_ADDRESS):29500", "--nnodes", "2", "--node-rank", rankLWS)), probes: probesNone, env: none},
		{name: "lws worker, 4 nodes", svcName: "SglangWorker", s: s(4), role: render.RoleWorker,
			command: sg, args: cat(base, strs("--dist-init-addr", "$(LWS_LEADER_ADDRESS):29500", "--nnodes", "4", "--node-rank", rankLWS)), probes: probesNone, env: none},
		// notes §1: no framework detected and none declared → nothing is rewritten.
		{name: "no framework: lws worker unchanged", svcName: "Custom",
			s:       svc("decode", img("1.6.0"), cmdOpt("/bin/sh", "-c"), argsOpt("python3 serve.py"), nodesOpt(2)),
			role:    render.RoleWorker,
			command: shellCmd, args: strs("python3 serve.py"), probes: probesKept},
	})
}

// TestParityMultinodeTRTLLM: notes §5; exact strings of Dynamo's backend_trtllm.go
// (setupLeaderContainer, setupWorkerContainer): SSH key Secret at /ssh-pk, env
// OMPI_MCA_orte_keep_fqdn_hostnames=1, workers run sshd on 2222 (readiness TCP 2222),
// the leader runs mpirun over every member and keeps its probes. The Secret is the one
// the DGD names (Dynamo's Helm default name).
func TestParityMultinodeTRTLLM(t *testing.T) {
	trt := []string{"python3", "-m", "dynamo.trtllm"}
	s := func(n int32) *spec {
		return svc("decode", img("1.6.0"), cmdOpt(trt...), argsOpt("--model-path", "M"), gpuOpt("4"), nodesOpt(n))
	}
	ann := kvs("nvidia.com/mpi-ssh-secret", "mpi-run-ssh-secret")
	vol := []corev1.Volume{{Name: "mpi-run-ssh-secret", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "mpi-run-ssh-secret", DefaultMode: ptr.To[int32](0o644)}}}}
	mount := []corev1.VolumeMount{{Name: "mpi-run-ssh-secret", MountPath: "/ssh-pk", ReadOnly: true}}
	env := map[string]string{"OMPI_MCA_orte_keep_fqdn_hostnames": "1", "VLLM_NIXL_SIDE_CHANNEL_HOST": "<none>"}
	ssh := []string{
		"cp /ssh-pk/private.key $HOME/.ssh/id_rsa",
		"cp /ssh-pk/private.key.pub $HOME/.ssh/id_rsa.pub",
		"cp /ssh-pk/private.key.pub $HOME/.ssh/authorized_keys",
		"chmod 600 $HOME/.ssh/id_rsa $HOME/.ssh/authorized_keys",
		"chmod 644 $HOME/.ssh/id_rsa.pub",
		`printf 'Host *\nIdentityFile '$HOME'/.ssh/id_rsa\nStrictHostKeyChecking no\nPort 2222\n' > $HOME/.ssh/config`,
	}
	worker := strings.Join(cat(strs("mkdir -p $HOME/.ssh $HOME/.ssh/host_keys $HOME/.ssh/run", "ls -la /ssh-pk/"), ssh, strs(
		"ssh-keygen -t rsa -f $HOME/.ssh/host_keys/ssh_host_rsa_key -N ''",
		"ssh-keygen -t ecdsa -f $HOME/.ssh/host_keys/ssh_host_ecdsa_key -N ''",
		"ssh-keygen -t ed25519 -f $HOME/.ssh/host_keys/ssh_host_ed25519_key -N ''",
		`printf 'Port 2222\nHostKey '$HOME'/.ssh/host_keys/ssh_host_rsa_key\nHostKey '$HOME'/.ssh/host_keys/ssh_host_ecdsa_key\nHostKey '$HOME'/.ssh/host_keys/ssh_host_ed25519_key\nPidFile '$HOME'/.ssh/run/sshd.pid\nStrictModes no\nPermitRootLogin yes\nPasswordAuthentication no\nPubkeyAuthentication yes\nAuthorizedKeysFile '$HOME'/.ssh/authorized_keys\n' > $HOME/.ssh/sshd_config`,
		"/usr/sbin/sshd -D -f $HOME/.ssh/sshd_config")), " && ")
	// mpirun -x: the container's env names at that point and Dynamo's fixed list, sorted.
	xs := func() string {
		names := []string{
			"DYN_NAMESPACE", "DYN_COMPONENT", "DYN_PARENT_DGD_K8S_NAME", "DYN_PARENT_DGD_K8S_NAMESPACE", "POD_NAME", "POD_NAMESPACE", "POD_UID",
			"DYN_DISCOVERY_BACKEND", "DYN_SYSTEM_ENABLED", "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS", "DYN_SYSTEM_PORT", "DYN_HEALTH_CHECK_ENABLED",
			"NIXL_TELEMETRY_ENABLE", "NIXL_TELEMETRY_EXPORTER", "NIXL_TELEMETRY_PROMETHEUS_PORT", "DYN_FORWARDPASS_METRIC_PORT",
			"DYN_NAMESPACE_WORKER_SUFFIX", "OMPI_MCA_orte_keep_fqdn_hostnames",
			"CUDA_VISIBLE_DEVICES", "MODEL_PATH", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "TOKENIZERS_PARALLELISM", "NCCL_DEBUG",
			"NCCL_IB_DISABLE", "NCCL_P2P_DISABLE", "TENSORRT_LLM_CACHE_DIR", "HF_HOME", "TRANSFORMERS_CACHE", "HF_DATASETS_CACHE", "PATH",
			"LD_LIBRARY_PATH", "PYTHONPATH", "HOME", "USER", "TRTLLM_USE_UCX_KVCACHE",
		}
		sort.Strings(names)
		return "-x " + strings.Join(names, " -x ")
	}()
	mpirun := func(n int, hosts string) string {
		return `mpirun $([ "$(id -u)" = "0" ] && echo --allow-run-as-root) --oversubscribe -n ` + strconv.Itoa(n) + " -H " + hosts +
			` --mca pml ob1 --mca plm_rsh_args "-p 2222 -o StrictHostKeyChecking=no -i $HOME/.ssh/id_rsa" ` + xs +
			` bash -c 'trtllm-llmapi-launch python3 -m dynamo.trtllm --model-path M'`
	}
	leaderSetup := cat(strs("mkdir -p $HOME/.ssh", "ls -la /ssh-pk/"), ssh)
	g := func(role string, i int) string {
		return "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-trtllmworker-" + role + "-" + strconv.Itoa(i) + ".$(GROVE_HEADLESS_SERVICE)"
	}
	lwsWorker1 := `$(echo "$LWS_LEADER_ADDRESS" | sed 's/\./-1\./')`
	dnsWait := `TIMEOUT=300; START_TIME=$(date +%s); for worker in ` + lwsWorker1 + `; do echo "Waiting for DNS: $worker"; until getent hosts $worker >/dev/null 2>&1; do CURRENT_TIME=$(date +%s); if [ $((CURRENT_TIME - START_TIME)) -gt $TIMEOUT ]; then echo "ERROR: Timeout waiting for DNS: $worker"; exit 1; fi; echo "DNS not ready for $worker, retrying..."; sleep 2; done; echo "✓ DNS resolved: $worker"; done; echo "All workers DNS ready"`
	runMultinode(t, []mnCase{
		{name: "grove leader, 4 nodes", svcName: "TrtllmWorker", s: s(4), dgdAnn: ann, grove: true, role: render.RoleLeader,
			command: shellCmd, args: strs(strings.Join(cat(leaderSetup, strs(mpirun(16, g("ldr", 0)+","+g("wkr", 0)+","+g("wkr", 1)+","+g("wkr", 2)))), " && ")),
			probes: probesKept, env: env, volumes: vol, mounts: mount},
		{name: "grove worker", svcName: "TrtllmWorker", s: s(2), dgdAnn: ann, grove: true, role: render.RoleWorker,
			command: shellCmd, args: strs(worker), probes: probesSSH, env: env, volumes: vol, mounts: mount},
		{name: "lws leader", svcName: "TrtllmWorker", s: s(2), dgdAnn: ann, role: render.RoleLeader,
			command: shellCmd, args: strs(strings.Join(cat(leaderSetup, strs(dnsWait, mpirun(8, leaderLWS+","+lwsWorker1))), " && ")),
			probes: probesKept, env: env, volumes: vol, mounts: mount},
		{name: "lws worker", svcName: "TrtllmWorker", s: s(2), dgdAnn: ann, role: render.RoleWorker,
			command: shellCmd, args: strs(worker), probes: probesSSH, env: env, volumes: vol, mounts: mount},
	})
	// A Secret whose name is no volume name (a DNS subdomain with a dot, as the
	// default `<dgd>-mpi-ssh` is for a DGD named "llm.v2"): the volume is
	// mpi-ssh-key, the Secret as named. Dynamo names the volume after the Secret, and
	// the API server refused the LeaderWorkerSet's StatefulSets.
	dotted := kvs("nvidia.com/mpi-ssh-secret", "ssh.keys")
	dottedVol := []corev1.Volume{{Name: "mpi-ssh-key", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "ssh.keys", DefaultMode: ptr.To[int32](0o644)}}}}
	dottedMount := []corev1.VolumeMount{{Name: "mpi-ssh-key", MountPath: "/ssh-pk", ReadOnly: true}}
	runMultinode(t, []mnCase{
		{name: "lws worker, a Secret named like no volume", svcName: "TrtllmWorker", s: s(2), dgdAnn: dotted, role: render.RoleWorker,
			command: shellCmd, args: strs(worker), probes: probesSSH, env: env, volumes: dottedVol, mounts: dottedMount},
		{name: "grove worker, a Secret named like no volume", svcName: "TrtllmWorker", s: s(2), dgdAnn: dotted, grove: true, role: render.RoleWorker,
			command: shellCmd, args: strs(worker), probes: probesSSH, env: env, volumes: dottedVol, mounts: dottedMount},
	})
}

// TestParityMultinodeAliases (issue 38): the portable aliases where a command line or a
// user's env names them. On Grove a worker's rank reaches its process only through its
// shell (no env can hold it: Grove v0.1.0-alpha.12 labels no group-wide pod index and
// the kubelet does no arithmetic), so every Grove worker runs one: a command line that is
// no shell script is run by `sh -c "<export>; exec <line>"` with each kubelet reference
// turned into the shell's (`"${NAME}"`, the same value), and in a script the references
// to the aliases become the shell's (the kubelet would leave `$(DYNAMO_RANK)` literal:
// the pod spec defines none). On LWS and on Grove leaders the kubelet expands them. A
// user's own DYNAMO_RANK / DYNAMO_LEADER_ADDRESS is replaced (Dynamo: the operator owns
// them) and ours come last, after the helpers the Grove address is built from (the
// kubelet expands only variables defined earlier).
func TestParityMultinodeAliases(t *testing.T) {
	vllm := []string{"python3", "-m", "dynamo.vllm"}
	onePod := []string{"--model", "M", "--tensor-parallel-size", "8"}
	fits := svc("decode", img("1.6.0"), cmdOpt(vllm...), argsOpt(onePod...), gpuOpt("8"), nodesOpt(2))
	// Dynamo 1.6's portable launch (docs "Portable Topology Environment Variables"):
	// data parallel written by hand, no GPUs declared, so nothing is injected.
	portable := []string{"--model", "M", "--data-parallel-size", "2", "--data-parallel-size-local", "1",
		"--data-parallel-start-rank", "$(DYNAMO_RANK)", "--data-parallel-address", "$(DYNAMO_LEADER_ADDRESS)",
		"--data-parallel-rpc-port", "13445", "--served-model-name", "$(POD_NAME)"}
	byHand := svc("decode", img("1.6.0"), cmdOpt(vllm...), argsOpt(portable...), nodesOpt(2))
	// Dynamo's role-specific example in one template: the user's mp flags with the
	// aliases, TP 16 on 8 GPUs, so the operator's flags follow (and win).
	userMP := []string{"--model", "Qwen/Qwen3-8B", "--tensor-parallel-size", "16", "--master-addr", "$(DYNAMO_LEADER_ADDRESS)", "--node-rank", "$(DYNAMO_RANK)"}
	mp := svc("decode", img("1.6.0"), cmdOpt(vllm...), argsOpt(userMP...), gpuOpt("8"), nodesOpt(2))
	script := `python3 serve.py --rank $(DYNAMO_RANK) --leader "$(DYNAMO_LEADER_ADDRESS)" --home $HOME`
	custom := svc("decode", img("1.6.0"), cmdOpt("/bin/sh", "-c"), argsOpt(script), nodesOpt(2))
	userEnv := svc("decode", img("1.6.0"), cmdOpt(vllm...), argsOpt(onePod...), gpuOpt("8"), nodesOpt(2),
		mainEnvOpt(ev("DYNAMO_LEADER_ADDRESS", "mine"), ev("DYNAMO_RANK", "7"), ev("HF_HOME", "/hf")))
	lg := leaderGrove("vllmworker")
	nixl := map[string]string{"VLLM_NIXL_SIDE_CHANNEL_HOST": "field:status.podIP"}
	waitGrove := waitForLeader("${GROVE_PCSG_NAME}-${GROVE_PCSG_INDEX}-vllmworker-ldr-0.${GROVE_HEADLESS_SERVICE}")
	runMultinode(t, []mnCase{
		{name: "grove worker, vLLM in one pod's GPUs: its command run by the rank's shell", svcName: "VllmWorker", s: fits, grove: true, role: render.RoleWorker,
			command: strs("sh", "-c"), args: strs("exec python3 -m dynamo.vllm --model M --tensor-parallel-size 8"), probes: probesNone, env: nixl},
		{name: "lws worker, vLLM in one pod's GPUs: unchanged", svcName: "VllmWorker", s: fits, role: render.RoleWorker,
			command: vllm, args: onePod, probes: probesNone, env: nixl},
		{name: "grove worker, portable launch: every kubelet reference the shell's", svcName: "VllmWorker", s: byHand, grove: true, role: render.RoleWorker,
			command: strs("sh", "-c"), args: strs(`exec python3 -m dynamo.vllm --model M --data-parallel-size 2 --data-parallel-size-local 1 --data-parallel-start-rank "${DYNAMO_RANK}" --data-parallel-address "${DYNAMO_LEADER_ADDRESS}" --data-parallel-rpc-port 13445 --served-model-name "${POD_NAME}"`),
			probes: probesNone, env: nixl},
		{name: "grove leader, portable launch: the kubelet's", svcName: "VllmWorker", s: byHand, grove: true, role: render.RoleLeader,
			command: vllm, args: portable, probes: probesKept, env: nixl},
		{name: "lws worker, portable launch: the kubelet's", svcName: "VllmWorker", s: byHand, role: render.RoleWorker,
			command: vllm, args: portable, probes: probesNone, env: nixl},
		{name: "grove worker, the user's mp flags with the aliases, quoted for the shell", svcName: "VllmWorker", s: mp, grove: true, role: render.RoleWorker,
			command: strs("sh", "-c"), args: strs(`exec python3 -m dynamo.vllm --model Qwen/Qwen3-8B --tensor-parallel-size 16 --master-addr "${DYNAMO_LEADER_ADDRESS}" --node-rank "${DYNAMO_RANK}" --distributed-executor-backend mp --nnodes 2 --master-addr ` + lg + " --master-port 29500 --node-rank " + rankGrove + " --headless"),
			probes: probesNone, env: nixl, init: waitGrove, volumes: waitLeaderVolume},
		{name: "grove worker, a user's script: the aliases the shell's, the rest as written", svcName: "Custom", s: custom, grove: true, role: render.RoleWorker,
			command: shellCmd, args: strs(`python3 serve.py --rank ${DYNAMO_RANK} --leader "${DYNAMO_LEADER_ADDRESS}" --home $HOME`), probes: probesKept},
		{name: "lws worker, a user's script: unchanged", svcName: "Custom", s: custom, role: render.RoleWorker,
			command: shellCmd, args: strs(script), probes: probesKept},
		{name: "grove worker, the user's aliases replaced, its rank dropped", svcName: "VllmWorker", s: userEnv, grove: true, role: render.RoleWorker,
			command: strs("sh", "-c"), args: strs("exec python3 -m dynamo.vllm --model M --tensor-parallel-size 8"), probes: probesNone,
			env: map[string]string{"HF_HOME": "/hf"}},
		{name: "grove leader, the user's aliases replaced", svcName: "VllmWorker", s: userEnv, grove: true, role: render.RoleLeader,
			command: vllm, args: onePod, probes: probesKept, env: map[string]string{"HF_HOME": "/hf"}},
		{name: "lws worker, the user's aliases replaced", svcName: "VllmWorker", s: userEnv, role: render.RoleWorker,
			command: vllm, args: onePod, probes: probesNone, env: map[string]string{"HF_HOME": "/hf"}},
	})
}
