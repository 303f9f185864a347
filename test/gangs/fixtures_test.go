package gangs

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	leaderworkerset "sigs.k8s.io/lws/api/leaderworkerset/v1"
	lwswebhooks "sigs.k8s.io/lws/pkg/webhooks"
)

const testNS = "team"

// deployer mirrors Dynamo's MultinodeDeployer (notes/dynamo-multinode.md §2 table).
type deployer struct {
	name       string
	leaderAddr func(svc string) string
	workerRank string
	needsShell bool
	hostNames  func(svc string, n int) []string
	dnsWait    bool
}

var lwsDeployer = deployer{
	name:       "LWS",
	leaderAddr: func(string) string { return "$(LWS_LEADER_ADDRESS)" },
	workerRank: "$(LWS_WORKER_INDEX)",
	hostNames: func(_ string, n int) []string {
		hosts := []string{"$(LWS_LEADER_ADDRESS)"}
		for i := 1; i < n; i++ {
			hosts = append(hosts, fmt.Sprintf(`$(echo "$LWS_LEADER_ADDRESS" | sed 's/\./-%d\./')`, i))
		}
		return hosts
	},
	dnsWait: true,
}

var groveDeployer = deployer{
	name: "Grove",
	leaderAddr: func(svc string) string {
		return "$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-" + svc + "-ldr-0.$(GROVE_HEADLESS_SERVICE)"
	},
	workerRank: "$((GROVE_PCLQ_POD_INDEX + 1))",
	needsShell: true,
	hostNames: func(svc string, n int) []string {
		hosts := []string{"$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-" + svc + "-ldr-0.$(GROVE_HEADLESS_SERVICE)"}
		for i := 0; i < n-1; i++ {
			hosts = append(hosts, fmt.Sprintf("$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-%s-wkr-%d.$(GROVE_HEADLESS_SERVICE)", svc, i))
		}
		return hosts
	},
}

// render produces Dynamo's rendered main container for one role.
type render func(d deployer, svc string, leader bool, n int) corev1.Container

// baseContainer is the worker base container after the user's main container
// is merged (notes §0, §0.1): env DYN_* and POD_* come before the backend's env.
func baseContainer(gpus int64, command []string, args ...string) corev1.Container {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return corev1.Container{
		Name: MainContainerName, Image: "nvcr.io/nvidia/ai-dynamo/runtime:1.2.0",
		Command: command, Args: args,
		Env: []corev1.EnvVar{
			{Name: "DYN_SYSTEM_ENABLED", Value: "true"}, {Name: "DYN_SYSTEM_PORT", Value: "9090"},
			{Name: "DYN_NAMESPACE", Value: "team-llm"}, {Name: "DYN_DISCOVERY_BACKEND", Value: "kubernetes"},
			field("POD_NAME", "metadata.name"), field("POD_NAMESPACE", "metadata.namespace"), field("POD_UID", "metadata.uid"),
		},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: q}, Requests: corev1.ResourceList{GPUResource: q}},
	}
}

// shellQuote is Dynamo's shellQuoteForBashC (notes §0.2).
func shellQuote(s string) string {
	if !strings.ContainsAny(s, " \t\n'\"\\{}[]$`!") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`", `'`, `'"'"'`)
	return `"` + r.Replace(s) + `"`
}

// injectFlags is Dynamo's injectFlagsIntoContainerCommand, case A (Command[0] is Python, notes §0.2).
func injectFlags(c *corev1.Container, flags string, needsShell bool) {
	if !needsShell {
		c.Args = append(c.Args, strings.Fields(flags)...)
		return
	}
	var parts []string
	for _, p := range append(append([]string{}, c.Command...), c.Args...) {
		parts = append(parts, shellQuote(p))
	}
	c.Command = []string{"sh", "-c"}
	c.Args = []string{"exec " + strings.Join(parts, " ") + " " + flags}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

// lwsGroup builds group g of LeaderWorkerSet lws (size n, subdomainPolicy
// Shared), as LWS v0.9.0 creates it. The leader StatefulSet <lws> has serviceName <lws>
// (leaderworkerset_controller.go:833-835). The worker StatefulSet <lws>-<g>
// has serviceName <lws> and ordinals from 1 (pod_controller.go:429-440).
// Hostname and subdomain come from StatefulSet initIdentity, and then the
// real LWS pod webhook runs (pod_webhook.go:83-178).
func lwsGroup(t testing.TB, lws string, g, n int, r render, svc string) []corev1.Pod {
	t.Helper()
	hook := lwswebhooks.NewPodWebhook(nil)
	mk := func(name string, ordinal int, labels, ann map[string]string, leader bool) corev1.Pod {
		role := map[bool]string{true: "leader", false: "worker"}[leader]
		labels["role"] = role // Dynamo's LWS template label (notes §6)
		labels["statefulset.kubernetes.io/pod-name"] = name
		labels["apps.kubernetes.io/pod-index"] = strconv.Itoa(ordinal)
		labels[leaderworkerset.RevisionKey] = "rev1"
		ann[leaderworkerset.SizeAnnotationKey] = strconv.Itoa(n)
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name), Labels: labels, Annotations: ann},
			Spec: corev1.PodSpec{Hostname: name, Subdomain: lws, ServiceAccountName: "default",
				Containers: []corev1.Container{r(lwsDeployer, svc, leader, n)}},
		}
		if err := hook.Default(context.Background(), &p); err != nil {
			t.Fatalf("LWS webhook on %s: %v", name, err)
		}
		return p
	}
	leaderName := fmt.Sprintf("%s-%d", lws, g)
	leader := mk(leaderName, g, map[string]string{
		leaderworkerset.SetNameLabelKey: lws, leaderworkerset.WorkerIndexLabelKey: "0",
	}, map[string]string{}, true)
	pods := []corev1.Pod{leader}
	for i := 1; i < n; i++ {
		pods = append(pods, mk(fmt.Sprintf("%s-%d", leaderName, i), i, map[string]string{
			leaderworkerset.SetNameLabelKey:         lws,
			leaderworkerset.GroupIndexLabelKey:      leader.Labels[leaderworkerset.GroupIndexLabelKey],
			leaderworkerset.GroupUniqueHashLabelKey: leader.Labels[leaderworkerset.GroupUniqueHashLabelKey],
		}, map[string]string{leaderworkerset.LeaderPodNameAnnotationKey: leaderName}, false))
	}
	return pods
}

// groveReplica builds PCSG replica j of component svc in PodCliqueSet pcs
// (replica 0), following notes/grove-facts.md §1-§2. The cliques are <svc>-ldr (1 pod) and
// <svc>-wkr (n-1 pods). Pod names are generateName <pclq>-<rand>, hostname is <pclq>-<k>,
// and subdomain is <pcs>-0. The GROVE_* env comes after the template env, with the PCSG vars first.
func groveReplica(pcs, svc string, j, n int, r render) []corev1.Pod {
	pcsg := pcs + "-0-" + svc
	var pods []corev1.Pod
	for _, clique := range []string{svc + "-ldr", svc + "-wkr"} {
		leader := strings.HasSuffix(clique, "-ldr")
		pclq := fmt.Sprintf("%s-%d-%s", pcsg, j, clique)
		replicas := map[bool]int{true: 1, false: n - 1}[leader]
		for k := 0; k < replicas; k++ {
			c := r(groveDeployer, svc, leader, n)
			c.Env = append(c.Env,
				fieldEnv("GROVE_PCSG_NAME", "metadata.labels['grove.io/podcliquescalinggroup']"),
				corev1.EnvVar{Name: "GROVE_PCSG_TEMPLATE_NUM_PODS", Value: strconv.Itoa(n)},
				fieldEnv("GROVE_PCSG_INDEX", "metadata.labels['grove.io/podcliquescalinggroup-replica-index']"),
				corev1.EnvVar{Name: "GROVE_PCS_NAME", Value: pcs},
				corev1.EnvVar{Name: "GROVE_PCS_INDEX", Value: "0"},
				corev1.EnvVar{Name: "GROVE_PCLQ_NAME", Value: pclq},
				corev1.EnvVar{Name: "GROVE_HEADLESS_SERVICE", Value: pcs + "-0." + testNS + ".svc.cluster.local"},
				fieldEnv("GROVE_PCLQ_POD_INDEX", "metadata.labels['grove.io/podclique-pod-index']"))
			name := fmt.Sprintf("%s-%05x", pclq, 0xa1b2c+97*k+13*j)
			pods = append(pods, corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name), Labels: map[string]string{
					"app.kubernetes.io/managed-by": "grove-operator", "app.kubernetes.io/part-of": pcs,
					"app.kubernetes.io/name": pclq, "app.kubernetes.io/component": "pcsg-podclique",
					LabelGrovePCSG: pcsg, LabelGrovePCSGReplica: strconv.Itoa(j), "grove.io/podgang": pcs + "-0",
					"grove.io/podcliqueset-replica-index": "0", LabelGrovePodClique: pclq, LabelGrovePodCliqueIdx: strconv.Itoa(k),
					"nvidia.com/dynamo-component": svc,
				}},
				Spec: corev1.PodSpec{Hostname: fmt.Sprintf("%s-%d", pclq, k), Subdomain: pcs + "-0",
					SchedulerName: "default-scheduler", Containers: []corev1.Container{c}},
			})
		}
	}
	return pods
}

// The renderers below reproduce the worked examples of notes/dynamo-multinode.md.

// vllmMP is §3 mp: TP 16 on 8-GPU pods.
func vllmMP(d deployer, svc string, leader bool, n int) corev1.Container {
	c := baseContainer(8, []string{"python3", "-m", "dynamo.vllm"}, "--model", "Qwen/Qwen3-8B", "--tensor-parallel-size", strconv.Itoa(8*n))
	c.Env = append(c.Env, fieldEnv("VLLM_NIXL_SIDE_CHANNEL_HOST", "status.podIP"))
	flags := fmt.Sprintf("--distributed-executor-backend mp --nnodes %d --master-addr %s --master-port 29500", n, d.leaderAddr(svc))
	if leader {
		injectFlags(&c, flags+" --node-rank 0", false)
	} else {
		injectFlags(&c, flags+" --node-rank "+d.workerRank+" --headless", d.needsShell)
	}
	return c
}

// sglang is §4.
func sglang(d deployer, svc string, leader bool, n int) corev1.Container {
	c := baseContainer(8, []string{"python3", "-m", "dynamo.sglang"}, "--model-path", "M", "--tp", strconv.Itoa(8*n))
	flags := fmt.Sprintf("--dist-init-addr %s:29500 --nnodes %d --node-rank ", d.leaderAddr(svc), n)
	if leader {
		injectFlags(&c, flags+"0", false)
	} else {
		injectFlags(&c, flags+d.workerRank, d.needsShell)
	}
	return c
}

// vllmRay is §3 ray.
func vllmRay(d deployer, svc string, leader bool, n int) corev1.Container {
	c := baseContainer(8, []string{"/bin/sh", "-c"})
	if leader {
		c.Args = []string{fmt.Sprintf("ray start --head --port=6379 && python3 -m dynamo.vllm --model Qwen/Qwen3-8B --tensor-parallel-size %d --distributed-executor-backend ray", 8*n)}
	} else {
		c.Args = []string{"ray start --address=" + d.leaderAddr(svc) + ":6379 --block"}
	}
	return c
}

// vllmDP is §3 data-parallel: DP 8*n on 8-GPU pods, so local is 8.
func vllmDP(d deployer, svc string, leader bool, n int) corev1.Container {
	c := baseContainer(8, []string{"python3", "-m", "dynamo.vllm"}, "--model", "M", "--data-parallel-size", strconv.Itoa(8*n))
	c.Env = append(c.Env, fieldEnv("VLLM_NIXL_SIDE_CHANNEL_HOST", "status.podIP"))
	rank := "0"
	if !leader {
		rank = "$(( 8 * " + d.workerRank + " ))"
	}
	flags := "--data-parallel-hybrid-lb --data-parallel-size-local 8 --data-parallel-start-rank " + rank +
		" --data-parallel-address " + d.leaderAddr(svc) + " --data-parallel-rpc-port 13445"
	injectFlags(&c, flags, !leader)
	return c
}

// trtllm is §5, with 4 GPUs per pod. It follows backend_trtllm.go setupLeaderContainer/setupWorkerContainer.
func trtllm(d deployer, svc string, leader bool, n int) corev1.Container {
	c := baseContainer(4, []string{"python3", "-m", "dynamo.trtllm"}, "--model-path", "M", "--extra-engine-args", "/cfg/engine.yaml")
	c.Env = append(c.Env, corev1.EnvVar{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "1"})
	ssh := []string{"mkdir -p $HOME/.ssh", "ls -la /ssh-pk/", "cp /ssh-pk/private.key $HOME/.ssh/id_rsa",
		"cp /ssh-pk/private.key.pub $HOME/.ssh/id_rsa.pub", "cp /ssh-pk/private.key.pub $HOME/.ssh/authorized_keys",
		"chmod 600 $HOME/.ssh/id_rsa $HOME/.ssh/authorized_keys", "chmod 644 $HOME/.ssh/id_rsa.pub",
		`printf 'Host *\nIdentityFile '$HOME'/.ssh/id_rsa\nStrictHostKeyChecking no\nPort 2222\n' > $HOME/.ssh/config`}
	if !leader {
		ssh[0] = "mkdir -p $HOME/.ssh $HOME/.ssh/host_keys $HOME/.ssh/run"
		ssh = append(ssh, "ssh-keygen -t rsa -f $HOME/.ssh/host_keys/ssh_host_rsa_key -N ''",
			`printf 'Port 2222\nHostKey '$HOME'/.ssh/host_keys/ssh_host_rsa_key\nPidFile '$HOME'/.ssh/run/sshd.pid\n' > $HOME/.ssh/sshd_config`,
			"/usr/sbin/sshd -D -f $HOME/.ssh/sshd_config")
		c.Command, c.Args = []string{"/bin/sh", "-c"}, []string{strings.Join(ssh, " && ")}
		return c
	}
	var quoted []string
	for _, p := range append(append([]string{}, c.Command...), c.Args...) {
		quoted = append(quoted, shellQuote(p))
	}
	names := map[string]bool{"CUDA_VISIBLE_DEVICES": true, "HOME": true, "PATH": true, "HF_TOKEN": true}
	for _, e := range c.Env {
		names[e.Name] = true
	}
	var xs []string
	for k := range names {
		xs = append(xs, "-x "+k)
	}
	sort.Strings(xs)
	hosts := d.hostNames(svc, n)
	mpirun := fmt.Sprintf(`mpirun $([ "$(id -u)" = "0" ] && echo --allow-run-as-root) --oversubscribe -n %d -H %s --mca pml ob1 --mca plm_rsh_args "-p 2222 -o StrictHostKeyChecking=no -i $HOME/.ssh/id_rsa" %s bash -c 'trtllm-llmapi-launch %s'`,
		n*4, strings.Join(hosts, ","), strings.Join(xs, " "), strings.Join(quoted, " "))
	if d.dnsWait {
		ssh = append(ssh, fmt.Sprintf(`TIMEOUT=300; START_TIME=$(date +%%s); for worker in %s; do echo "Waiting for DNS: $worker"; until getent hosts $worker >/dev/null 2>&1; do CURRENT_TIME=$(date +%%s); if [ $((CURRENT_TIME - START_TIME)) -gt $TIMEOUT ]; then echo "ERROR: Timeout waiting for DNS: $worker"; exit 1; fi; echo "DNS not ready for $worker, retrying..."; sleep 2; done; echo "✓ DNS resolved: $worker"; done; echo "All workers DNS ready"`, strings.Join(hosts[1:], " ")))
	}
	c.Command, c.Args = []string{"/bin/sh", "-c"}, []string{strings.Join(append(ssh, mpirun), " && ")}
	return c
}

// cluster builds `gangs` gangs of n nodes on d, for component svc.
func cluster(t testing.TB, d deployer, r render, n, gangs int) []corev1.Pod {
	var pods []corev1.Pod
	for g := 0; g < gangs; g++ {
		if d.name == "LWS" {
			pods = append(pods, lwsGroup(t, "llm-vllmworker-0", g, n, r, "vllmworker")...)
		} else {
			pods = append(pods, groveReplica("llm", "vllmworker", g, n, r)...)
		}
	}
	return pods
}

func groupFor(d deployer, pods []corev1.Pod) map[string]*Gang {
	if d.name == "LWS" {
		return GroupLWS(pods)
	}
	return GroupGrove(pods)
}
