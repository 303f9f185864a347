package render

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// Ports and values of the frameworks' multinode wiring (consts.go, backend_*.go).
const (
	vllmMasterPort      = 29500
	vllmRayPort         = 6379
	vllmDPRPCPort       = 13445
	sglangDistPort      = 29500
	mpiSSHPort          = 2222
	executorMP          = "mp"
	executorRay         = "ray"
	sshKeyMountPath     = "/ssh-pk"
	waitLeaderVolume    = "wait-leader-script"
	waitLeaderMountPath = "/scripts"
	// WaitLeaderScriptKey is the wait-for-leader script in its ConfigMap.
	WaitLeaderScriptKey = "wait-for-leader.py"
)

// WaitLeaderConfigMap is the ConfigMap holding a DGD's wait-for-leader script.
func WaitLeaderConfigMap(dgd string) string { return dgd + "-wait-leader-script" }

// SSHSecret is the Secret of a DGD's TRT-LLM gangs' SSH key: the one its
// nvidia.com/mpi-ssh-secret annotation names, else one the operator makes.
func (c Component) SSHSecret() string {
	if s := c.DGD.Annotations[AnnotationMPISSHSecret]; s != "" {
		return s
	}
	return c.DGD.Name + "-mpi-ssh"
}

// sshVolume is the name of the SSH key's volume in a TRT-LLM gang's pods: the Secret's
// name, as Dynamo names it (backend_trtllm.go UpdatePodSpec), when that is a volume
// name (a DNS-1123 label); else sshVolumeFallback. A Secret may be named as any DNS
// subdomain and `<dgd>-mpi-ssh` has up to 71 characters: with a DGD named "llm.v2",
// or of more than 55 characters, the volume name was no DNS label, and the API server
// refused every StatefulSet the LeaderWorkerSet controller made of it (and every pod
// Grove made), found by test/envtest/rendered's pod-template check. A name that was
// valid is kept, so no running gang's template changes.
func sshVolume(secret string) string {
	if len(validation.IsDNS1123Label(secret)) == 0 {
		return secret
	}
	return sshVolumeFallback
}

// sshVolumeFallback is the SSH key's volume when its Secret's name is no volume name.
const sshVolumeFallback = "mpi-ssh-key"

// Executor is a vLLM gang's distributed executor backend: the
// nvidia.com/vllm-distributed-executor-backend annotation (service, else DGD); else ray
// for a DGD that Dynamo's operator stamped with an origin version before 1.0.0 (its
// VLLMMultiprocessing compatibility gate); else mp, Dynamo's default for newer DGDs and
// for those this operator made (it stamps none).
func (c Component) Executor() (string, error) {
	switch v := strings.ToLower(c.annotation(AnnotationVLLMDistributedExecutor)); v {
	case "":
		if o, ok := parseVersion(c.annotation(AnnotationOperatorOriginVersion)); ok && !o.AtLeast(Version{Major: 1}) {
			return executorRay, nil
		}
		return executorMP, nil
	case executorMP:
		return executorMP, nil
	case executorRay:
		return executorRay, nil
	default:
		return "", fmt.Errorf("annotation %s: %q must be mp or ray", AnnotationVLLMDistributedExecutor, v)
	}
}

// wireVLLM: TP×PP beyond the pod's GPUs spans nodes with mp (leader `--node-rank 0`,
// workers `--node-rank <rank> --headless` after waiting for the leader) or ray (a ray
// head and `ray start --address` workers); TP×PP×DP beyond them is data parallel
// (backend_vllm.go updateVLLMMultinodeArgs). Workers lose their probes.
func (c Component) wireVLLM(t *corev1.PodTemplateSpec, role Role, gang Gang, n int) error {
	main := &t.Spec.Containers[0]
	executor, err := c.Executor()
	if err != nil {
		return err
	}
	gpus := int(gpusPerPod(main, c.Spec.Resources))
	if err := spanVLLM(main, executor, role, gang, n, gpus); err != nil {
		return err
	}
	if executor == executorMP {
		main.Env = v1alpha1.MergeEnv(main.Env, []corev1.EnvVar{{Name: "VLLM_NIXL_SIDE_CHANNEL_HOST",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}})
	}
	if role == RoleWorker {
		dropProbes(main)
		if strings.Contains(strings.Join(append(append([]string(nil), main.Command...), main.Args...), " "), "--distributed-executor-backend mp") {
			c.waitForLeader(t, gang.LeaderHost(), vllmMasterPort)
		}
	}
	return nil
}

// spanVLLM spans the model over the gang's n pods of gpus GPUs each (see wireVLLM):
// tensor and pipeline parallelism with mp or ray, else data parallelism; nothing when
// one pod holds it.
func spanVLLM(main *corev1.Container, executor string, role Role, gang Gang, n, gpus int) error {
	tp, pp, dp := argValue(main.Args, "--tensor-parallel-size", 1), argValue(main.Args, "--pipeline-parallel-size", 1), argValue(main.Args, "--data-parallel-size", 1)
	world := tp * pp
	leader := gang.LeaderHost()
	switch {
	case gpus > 0 && world > gpus && executor == executorMP:
		flags := fmt.Sprintf("--distributed-executor-backend mp --nnodes %d --master-addr %s --master-port %d", n, leader, vllmMasterPort)
		if role == RoleLeader {
			return injectFlags(main, flags+" --node-rank 0", false, FrameworkVLLM)
		}
		rank, shell := gang.Rank()
		return injectFlags(main, flags+" --node-rank "+rank+" --headless", shell, FrameworkVLLM)
	case gpus > 0 && world > gpus:
		if role == RoleLeader {
			line := shellJoin(append(append([]string(nil), main.Command...), main.Args...))
			main.Command, main.Args = []string{"/bin/sh", "-c"}, []string{fmt.Sprintf("ray start --head --port=%d && %s --distributed-executor-backend ray", vllmRayPort, line)}
		} else {
			main.Command, main.Args = []string{"/bin/sh", "-c"}, []string{fmt.Sprintf("ray start --address=%s:%d --block", leader, vllmRayPort)}
		}
	case gpus > 0 && world*dp > gpus:
		return vllmDataParallel(main, role, gang, n, gpus/world)
	}
	return nil
}

// vllmDataParallel makes the gang's pods data-parallel ranks of local ranks each, with
// the leader's address for the ranks to meet (updateVLLMMultinodeArgs).
func vllmDataParallel(main *corev1.Container, role Role, gang Gang, n, local int) error {
	flags := "--data-parallel-hybrid-lb"
	if !hasToken(main.Args, "--data-parallel-size") {
		flags += fmt.Sprintf(" --data-parallel-size %d", local*n)
	}
	flags += fmt.Sprintf(" --data-parallel-size-local %d", local)
	shell := false
	if role == RoleLeader {
		flags += " --data-parallel-start-rank 0"
	} else {
		// In the shell's arithmetic, LWS's rank is the shell's ${LWS_WORKER_INDEX}: the
		// kubelet does not expand $(VAR) inside $(( )) (it reads the variable name up
		// to the first ')'), and the variable is in the container's env.
		rank, _ := gang.Rank()
		flags += fmt.Sprintf(" --data-parallel-start-rank $(( %d * %s ))", local, shellVars(rank))
		shell = true
	}
	return injectFlags(main, flags+fmt.Sprintf(" --data-parallel-address %s --data-parallel-rpc-port %d", gang.LeaderHost(), vllmDPRPCPort), shell, FrameworkVLLM)
}

// waitForLeader makes a worker wait until its leader accepts connections on port (the
// wait-for-leader-mp init container), so vLLM's workers do not give up before the
// leader's torch store listens.
func (c Component) waitForLeader(t *corev1.PodTemplateSpec, leader string, port int) {
	main := &t.Spec.Containers[0]
	t.Spec.InitContainers = append(t.Spec.InitContainers, corev1.Container{
		Name:  "wait-for-leader-mp",
		Image: main.Image,
		Command: []string{"sh", "-c", fmt.Sprintf(`export LEADER_HOST="%s" LEADER_PORT="%d" && exec python3 %s/%s`,
			shellVars(leader), port, waitLeaderMountPath, WaitLeaderScriptKey)},
		VolumeMounts: []corev1.VolumeMount{{Name: waitLeaderVolume, MountPath: waitLeaderMountPath, ReadOnly: true}},
	})
	t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: waitLeaderVolume, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: WaitLeaderConfigMap(c.DGD.Name)}}}})
}

// wireSGLang: every member gets `--dist-init-addr <leader>:29500 --nnodes N
// --node-rank <rank>`; workers lose their probes (backend_sglang.go).
func wireSGLang(main *corev1.Container, role Role, gang Gang, n int) error {
	flags := fmt.Sprintf("--dist-init-addr %s:%d --nnodes %d", gang.LeaderHost(), sglangDistPort, n)
	if role == RoleLeader {
		return injectFlags(main, flags+" --node-rank 0", false, FrameworkSGLang)
	}
	rank, shell := gang.Rank()
	if err := injectFlags(main, flags+" --node-rank "+rank, shell, FrameworkSGLang); err != nil {
		return err
	}
	dropProbes(main)
	return nil
}

// trtllmForwardedEnv is what mpirun forwards to every rank besides the container's own
// variables (backend_trtllm.go).
var trtllmForwardedEnv = []string{"CUDA_VISIBLE_DEVICES", "MODEL_PATH", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT",
	"TOKENIZERS_PARALLELISM", "NCCL_DEBUG", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE", "TENSORRT_LLM_CACHE_DIR", "HF_HOME",
	"TRANSFORMERS_CACHE", "HF_DATASETS_CACHE", "PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "HOME", "USER", "TRTLLM_USE_UCX_KVCACHE"}

// wireTRTLLM: workers run sshd on 2222 (ready when it listens), the leader runs the
// model under mpirun over every member (backend_trtllm.go). Both mount the DGD's SSH
// key; the leader keeps its probes.
func (c Component) wireTRTLLM(t *corev1.PodTemplateSpec, role Role, gang Gang, n int) error {
	main := &t.Spec.Containers[0]
	secret := c.SSHSecret()
	volume := sshVolume(secret)
	main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: sshKeyMountPath, ReadOnly: true})
	t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o644)}}})
	main.Env = v1alpha1.MergeEnv(main.Env, envs("OMPI_MCA_orte_keep_fqdn_hostnames", "1"))
	setup := []string{
		"cp /ssh-pk/private.key $HOME/.ssh/id_rsa",
		"cp /ssh-pk/private.key.pub $HOME/.ssh/id_rsa.pub",
		"cp /ssh-pk/private.key.pub $HOME/.ssh/authorized_keys",
		"chmod 600 $HOME/.ssh/id_rsa $HOME/.ssh/authorized_keys",
		"chmod 644 $HOME/.ssh/id_rsa.pub",
		fmt.Sprintf(`printf 'Host *\nIdentityFile '$HOME'/.ssh/id_rsa\nStrictHostKeyChecking no\nPort %d\n' > $HOME/.ssh/config`, mpiSSHPort),
	}
	if role == RoleWorker {
		trtllmWorker(main, setup)
		return nil
	}
	c.trtllmLeader(main, setup, gang, n)
	return nil
}

// trtllmWorker makes main a TensorRT-LLM worker: sshd on mpiSSHPort with the DGD's key,
// ready when it listens.
func trtllmWorker(main *corev1.Container, setup []string) {
	steps := append([]string{"mkdir -p $HOME/.ssh $HOME/.ssh/host_keys $HOME/.ssh/run", "ls -la /ssh-pk/"}, setup...)
	for _, k := range []string{"rsa", "ecdsa", "ed25519"} {
		steps = append(steps, fmt.Sprintf("ssh-keygen -t %s -f $HOME/.ssh/host_keys/ssh_host_%s_key -N ''", k, k))
	}
	steps = append(steps,
		fmt.Sprintf(`printf 'Port %d\nHostKey '$HOME'/.ssh/host_keys/ssh_host_rsa_key\nHostKey '$HOME'/.ssh/host_keys/ssh_host_ecdsa_key\nHostKey '$HOME'/.ssh/host_keys/ssh_host_ed25519_key\nPidFile '$HOME'/.ssh/run/sshd.pid\nStrictModes no\nPermitRootLogin yes\nPasswordAuthentication no\nPubkeyAuthentication yes\nAuthorizedKeysFile '$HOME'/.ssh/authorized_keys\n' > $HOME/.ssh/sshd_config`, mpiSSHPort),
		"/usr/sbin/sshd -D -f $HOME/.ssh/sshd_config")
	main.Command, main.Args = []string{"/bin/sh", "-c"}, []string{strings.Join(steps, " && ")}
	main.LivenessProbe, main.StartupProbe = nil, nil
	main.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(mpiSSHPort)}},
		InitialDelaySeconds: 20, PeriodSeconds: 20, TimeoutSeconds: 5, FailureThreshold: 10}
}

// trtllmLeader makes main the TensorRT-LLM leader: once every worker's name resolves
// (where the gang needs it), it runs the model under mpirun over the gang's n pods.
func (c Component) trtllmLeader(main *corev1.Container, setup []string, gang Gang, n int) {
	hosts := []string{gang.LeaderHost()}
	for i := 1; i < n; i++ {
		hosts = append(hosts, gang.WorkerHost(i))
	}
	steps := append([]string{"mkdir -p $HOME/.ssh", "ls -la /ssh-pk/"}, setup...)
	if gang.NeedsDNSWait() {
		steps = append(steps, fmt.Sprintf(`TIMEOUT=300; START_TIME=$(date +%%s); for worker in %s; do echo "Waiting for DNS: $worker"; until getent hosts $worker >/dev/null 2>&1; do CURRENT_TIME=$(date +%%s); if [ $((CURRENT_TIME - START_TIME)) -gt $TIMEOUT ]; then echo "ERROR: Timeout waiting for DNS: $worker"; exit 1; fi; echo "DNS not ready for $worker, retrying..."; sleep 2; done; echo "✓ DNS resolved: $worker"; done; echo "All workers DNS ready"`,
			strings.Join(hosts[1:], " ")))
	}
	original := strings.Join(main.Args, " ")
	if len(main.Command) > 0 && pythonCommand.MatchString(main.Command[0]) || len(main.Args) == 0 {
		original = shellJoin(append(append([]string(nil), main.Command...), main.Args...))
	}
	gpus := int(gpusPerPod(main, c.Spec.Resources))
	steps = append(steps, fmt.Sprintf(`mpirun $([ "$(id -u)" = "0" ] && echo --allow-run-as-root) --oversubscribe -n %d -H %s --mca pml ob1 --mca plm_rsh_args "-p %d -o StrictHostKeyChecking=no -i $HOME/.ssh/id_rsa" %s bash -c 'trtllm-llmapi-launch %s'`,
		n*gpus, strings.Join(hosts, ","), mpiSSHPort, strings.Join(mpiForwarded(main), " "), original))
	main.Command, main.Args = []string{"/bin/sh", "-c"}, []string{strings.Join(steps, " && ")}
}

// mpiForwarded are mpirun's -x flags, sorted: the container's variables and
// trtllmForwardedEnv.
func mpiForwarded(main *corev1.Container) []string {
	forward := map[string]bool{}
	for _, e := range main.Env {
		forward[e.Name] = true
	}
	for _, e := range trtllmForwardedEnv {
		forward[e] = true
	}
	names := make([]string, 0, len(forward))
	for e := range forward {
		names = append(names, "-x "+e)
	}
	sort.Strings(names)
	return names
}
