package gangs

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestGangsForm builds two gangs of 2 and of 4 nodes, per deployer and
// framework, exactly as rendered, and expects every gang to form.
func TestGangsForm(t *testing.T) {
	cases := []struct {
		name string
		r    render
		fw   string
		on   []deployer
	}{
		{"vllm-mp", vllmMP, FrameworkVLLMMP, []deployer{lwsDeployer, groveDeployer}},
		{"sglang", sglang, FrameworkSGLang, []deployer{lwsDeployer, groveDeployer}},
		{"vllm-ray", vllmRay, FrameworkRay, []deployer{lwsDeployer, groveDeployer}},
		{"vllm-dp", vllmDP, FrameworkVLLMDP, []deployer{groveDeployer}}, // LWS: see TestLWSDataParallelWorkerCannotStart
		{"trtllm", trtllm, FrameworkTRTLLM, []deployer{lwsDeployer, groveDeployer}},
	}
	for _, tc := range cases {
		for _, d := range tc.on {
			for _, n := range []int{2, 4} {
				t.Run(fmt.Sprintf("%s/%s/%d", tc.name, d.name, n), func(t *testing.T) {
					gangs := groupFor(d, cluster(t, d, tc.r, n, 2))
					if len(gangs) != 2 {
						t.Fatalf("got %d gangs, want 2", len(gangs))
					}
					for key, g := range gangs {
						if fw := Framework(g.Leader); fw != tc.fw {
							t.Errorf("%s: framework %q, want %q (leader argv %q)", key, fw, tc.fw, g.Leader.Argv)
						}
						if v := Check(g, n); len(v) != 0 {
							t.Errorf("%s: unexpected violations:\n  %s", key, strings.Join(v, "\n  "))
						}
					}
				})
			}
		}
	}
}

func gangByLeader(t *testing.T, gangs map[string]*Gang, leaderPrefix string) *Gang {
	t.Helper()
	for _, g := range gangs {
		if g.Leader != nil && strings.HasPrefix(g.Leader.Pod.Name, leaderPrefix) {
			return g
		}
	}
	t.Fatalf("no gang led by %s*", leaderPrefix)
	return nil
}

// TestRenderedArgv pins what the exec'd processes look like after Expand+Shell.
func TestRenderedArgv(t *testing.T) {
	g := gangByLeader(t, GroupGrove(cluster(t, groveDeployer, vllmMP, 4, 2)), "llm-0-vllmworker-1-")
	leaderHost := "llm-0-vllmworker-1-vllmworker-ldr-0.llm-0.team.svc.cluster.local"
	w := g.Members[3] // wkr pod index 2 => rank 3
	want := []string{"python3", "-m", "dynamo.vllm", "--model", "Qwen/Qwen3-8B", "--tensor-parallel-size", "32",
		"--distributed-executor-backend", "mp", "--nnodes", "4", "--master-addr", leaderHost, "--master-port", "29500",
		"--node-rank", "3", "--headless"}
	if !slices.Equal(w.Argv, want) {
		t.Errorf("grove worker argv\n got %q\nwant %q", w.Argv, want)
	}

	lg := gangByLeader(t, GroupLWS(cluster(t, lwsDeployer, trtllm, 4, 2)), "llm-vllmworker-0-1")
	if got := lg.Leader.Env["LWS_LEADER_ADDRESS"]; got != "llm-vllmworker-0-1.llm-vllmworker-0.team" {
		t.Errorf("LWS_LEADER_ADDRESS = %q", got)
	}
	h, _ := mpiFlag(lg.Leader.Argv, "-H")
	if want := "llm-vllmworker-0-1.llm-vllmworker-0.team,llm-vllmworker-0-1-1.llm-vllmworker-0.team," +
		"llm-vllmworker-0-1-2.llm-vllmworker-0.team,llm-vllmworker-0-1-3.llm-vllmworker-0.team"; h != want {
		t.Errorf("mpirun -H %q, want %q", h, want)
	}
	if lg.Leader.Argv[1] != "--allow-run-as-root" || !strings.HasPrefix(lg.Leader.Argv[len(lg.Leader.Argv)-1], "trtllm-llmapi-launch python3 -m dynamo.trtllm") {
		t.Errorf("leader argv %q", lg.Leader.Argv)
	}
}

// TestLWSDataParallelWorkerCannotStart records a rendering defect. The
// DP worker rank `$(( 8 * $(LWS_WORKER_INDEX) ))` (notes §3 data-parallel) is
// NOT expanded by the kubelet: its `$(` reference runs up to the first `)`. So
// sh runs `LWS_WORKER_INDEX` as a command and fails on `8 *  `.
func TestLWSDataParallelWorkerCannotStart(t *testing.T) {
	g := gangByLeader(t, GroupLWS(cluster(t, lwsDeployer, vllmDP, 2, 1)), "llm-vllmworker-0-0")
	w := g.Members[1]
	if !strings.Contains(strings.Join(w.Expanded, " "), "$(( 8 * $(LWS_WORKER_INDEX) ))") {
		t.Fatalf("kubelet expansion unexpectedly rewrote the rank: %q", w.Expanded)
	}
	v := strings.Join(Check(g, 2), "\n")
	if !strings.Contains(v, "cannot evaluate command") || !strings.Contains(v, "LWS_WORKER_INDEX") {
		t.Errorf("want an evaluation violation naming LWS_WORKER_INDEX, got:\n%s", v)
	}
	if sh, err := exec.LookPath("sh"); err == nil { // the real shell agrees
		cmd := exec.Command(sh, "-c", strings.Replace(w.Expanded[2], "exec python3", "exec echo", 1))
		cmd.Env = []string{"LWS_WORKER_INDEX=1", "PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("real sh ran the LWS DP worker script: %s", out)
		}
	}
}

func setArg(c *corev1.Container, flag, value string) {
	for i := range c.Args {
		if c.Args[i] == flag {
			c.Args[i+1] = value
		}
	}
}

func mainOf(p *corev1.Pod) *corev1.Container { return MainContainer(p) }

func expectViolation(t *testing.T, g *Gang, n int, substr ...string) {
	t.Helper()
	v := Check(g, n)
	all := strings.Join(v, "\n")
	for _, s := range substr {
		if !strings.Contains(all, s) {
			t.Errorf("violations lack %q; got:\n  %s", s, strings.Join(v, "\n  "))
		}
	}
}

func TestViolations(t *testing.T) {
	t.Run("worker names another gang's leader (LWS)", func(t *testing.T) {
		pods := cluster(t, lwsDeployer, vllmMP, 2, 2)
		setArg(mainOf(&pods[3]), "--master-addr", "llm-vllmworker-0-0.llm-vllmworker-0.team") // gang 1's worker
		g := gangByLeader(t, GroupLWS(pods), "llm-vllmworker-0-1")
		expectViolation(t, g, 2, "resolves to pod team/llm-vllmworker-0-0, not this gang's leader llm-vllmworker-0-1",
			"members disagree on --master-addr")
	})
	t.Run("worker names another gang's leader (Grove env)", func(t *testing.T) {
		pods := cluster(t, groveDeployer, sglang, 2, 2)
		for i, e := range pods[3].Spec.Containers[0].Env { // gang 1's worker computes replica 0's address
			if e.Name == "GROVE_PCSG_INDEX" {
				pods[3].Spec.Containers[0].Env[i] = corev1.EnvVar{Name: e.Name, Value: "0"}
			}
		}
		g := gangByLeader(t, GroupGrove(pods), "llm-0-vllmworker-1-")
		expectViolation(t, g, 2, "not this gang's leader")
	})
	t.Run("two members with rank 1", func(t *testing.T) {
		pods := cluster(t, lwsDeployer, sglang, 4, 1)
		setArg(mainOf(&pods[2]), "--node-rank", "1")
		expectViolation(t, GroupLWS(pods)["team/llm-vllmworker-0/0"], 4,
			"--node-rank rank 1 is used by 2 members", "no member has --node-rank rank 2")
	})
	t.Run("missing --nnodes on a worker", func(t *testing.T) {
		pods := cluster(t, lwsDeployer, vllmMP, 2, 1)
		c := mainOf(&pods[1])
		i := slices.Index(c.Args, "--nnodes")
		c.Args = slices.Delete(c.Args, i, i+2)
		expectViolation(t, GroupLWS(pods)["team/llm-vllmworker-0/0"], 2, "llm-vllmworker-0-0-1: no --nnodes")
	})
	t.Run("nnodes differs from nodeCount", func(t *testing.T) {
		pods := cluster(t, lwsDeployer, sglang, 2, 1)
		for i := range pods {
			setArg(mainOf(&pods[i]), "--nnodes", "3")
		}
		expectViolation(t, GroupLWS(pods)["team/llm-vllmworker-0/0"], 2, "--nnodes 3, want nodeCount 2")
	})
	t.Run("nodeCount differs from gang size", func(t *testing.T) {
		g := GroupGrove(cluster(t, groveDeployer, vllmMP, 2, 1))["team/llm-0-vllmworker/0"]
		expectViolation(t, g, 3, "gang has 2 members, want nodeCount 3", "--nnodes 2, want nodeCount 3", "no member has --node-rank rank 2")
	})
	t.Run("deleted worker is skipped", func(t *testing.T) {
		pods := cluster(t, groveDeployer, vllmMP, 2, 1)
		pods[1].DeletionTimestamp = &metav1.Time{}
		g := GroupGrove(pods)["team/llm-0-vllmworker/0"]
		expectViolation(t, g, 2, "gang has 1 members", "no member has --node-rank rank 1")
	})
	t.Run("no leader", func(t *testing.T) {
		pods := cluster(t, groveDeployer, sglang, 2, 1)
		expectViolation(t, GroupGrove(pods[1:])["team/llm-0-vllmworker/0"], 2, "gang has no leader pod")
	})
	t.Run("grove worker without shell keeps literal arithmetic", func(t *testing.T) {
		pods := cluster(t, groveDeployer, vllmMP, 2, 1)
		c := mainOf(&pods[1])
		script := strings.TrimPrefix(c.Args[0], "exec ")
		c.Command, c.Args = nil, strings.Fields(script)
		expectViolation(t, GroupGrove(pods)["team/llm-0-vllmworker/0"], 2, `--node-rank "$((GROVE_PCLQ_POD_INDEX" is not an integer`)
	})
	t.Run("DP start rank not a multiple", func(t *testing.T) {
		pods := cluster(t, groveDeployer, vllmDP, 2, 1)
		c := mainOf(&pods[1])
		c.Args[0] = strings.Replace(c.Args[0], "$(( 8 *", "$(( 4 *", 1)
		expectViolation(t, GroupGrove(pods)["team/llm-0-vllmworker/0"], 2, "--data-parallel-start-rank 4 is not a multiple")
	})
	t.Run("ray worker on the wrong port", func(t *testing.T) {
		pods := cluster(t, lwsDeployer, vllmRay, 2, 1)
		mainOf(&pods[1]).Args[0] = "ray start --address=$(LWS_LEADER_ADDRESS):6380"
		expectViolation(t, GroupLWS(pods)["team/llm-vllmworker-0/0"], 2, "port 6380, but the head listens on 6379", "without --block")
	})
	t.Run("trtllm GPU count and host list", func(t *testing.T) {
		pods := cluster(t, groveDeployer, trtllm, 4, 1)
		c := mainOf(&pods[0])
		c.Args[0] = strings.Replace(c.Args[0], "-wkr-2.", "-wkr-1.", 1)
		c.Resources.Limits[GPUResource] = resource.MustParse("8") // limits win over the request of 4
		expectViolation(t, GroupGrove(pods)["team/llm-0-vllmworker/0"], 4,
			"mpirun -n 16, want nodeCount 4 × 8 GPUs per pod = 32", "names worker", "is not in the leader's mpirun -H list")
	})
}

// TestAliases checks DYNAMO_RANK and DYNAMO_LEADER_ADDRESS. On LWS they can be
// defined from the LWS vars: the webhook prepends those, so `$(LWS_...)` in a later env value expands.
func TestAliases(t *testing.T) {
	withAliases := func(d deployer, svc string, leader bool, n int) corev1.Container {
		c := sglang(d, svc, leader, n)
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvDynamoRank, Value: "$(LWS_WORKER_INDEX)"},
			corev1.EnvVar{Name: EnvDynamoLeaderAddress, Value: "$(LWS_LEADER_ADDRESS)"})
		return c
	}
	pods := cluster(t, lwsDeployer, withAliases, 4, 1)
	g := GroupLWS(pods)["team/llm-vllmworker-0/0"]
	if v := Check(g, 4); len(v) != 0 {
		t.Fatalf("unexpected violations: %q", v)
	}
	if got := g.Members[2].Env[EnvDynamoRank]; got != "2" {
		t.Errorf("DYNAMO_RANK = %q, want 2", got)
	}
	for i, e := range mainOf(&pods[2]).Env {
		if e.Name == EnvDynamoRank {
			mainOf(&pods[2]).Env[i].Value = "3"
		}
	}
	expectViolation(t, GroupLWS(pods)["team/llm-vllmworker-0/0"], 4, `DYNAMO_RANK="3" but its rank is 2`)
}

// groveAliases is sglang on Grove with the portable aliases in the template's env, as
// this operator's render.Grove wrote them before issue 38: DYNAMO_LEADER_ADDRESS from the
// PCSG labels through two helper variables defined before it, DYNAMO_RANK "0" on the
// leader and, on a worker, from the group-wide pod index label, with the worker's shell
// exporting the rank from its clique index.
func groveAliases(d deployer, svc string, leader bool, n int) corev1.Container {
	c := sglang(d, svc, leader, n)
	c.Env = append(c.Env,
		fieldEnv("DYNAMO_GROVE_PCSG_NAME", "metadata.labels['grove.io/podcliquescalinggroup']"),
		fieldEnv("DYNAMO_GROVE_PCSG_INDEX", "metadata.labels['grove.io/podcliquescalinggroup-replica-index']"),
		corev1.EnvVar{Name: EnvDynamoLeaderAddress, Value: "$(DYNAMO_GROVE_PCSG_NAME)-$(DYNAMO_GROVE_PCSG_INDEX)-" + svc + "-ldr-0.llm-0." + testNS + ".svc.cluster.local"})
	if leader {
		return withEnv(c, corev1.EnvVar{Name: EnvDynamoRank, Value: "0"})
	}
	c.Args[0] = "export DYNAMO_RANK=$((GROVE_PCLQ_POD_INDEX + 1)); " + c.Args[0]
	return withEnv(c, fieldEnv(EnvDynamoRank, "metadata.labels['grove.io/podcliquescalinggroup-pod-index']"))
}

func withEnv(c corev1.Container, e ...corev1.EnvVar) corev1.Container {
	c.Env = append(c.Env, e...)
	return c
}

// TestGroveAliasesInThePodSpec (issue 38): on Grove v0.1.0-alpha.12 a worker's
// DYNAMO_RANK read from grove.io/podcliquescalinggroup-pod-index is "" in its pod spec
// (Grove sets no such label) though its shell exports the right rank: the kubelet's
// $(DYNAMO_RANK), an exec probe or `kubectl exec` see "". Check reports the pod spec's
// value; with the env gone and the export kept the gang is clean, and so is the process.
// A leader address defined before its helper variables stays a literal (the kubelet
// expands only variables defined earlier in the list) and reaches no pod.
func TestGroveAliasesInThePodSpec(t *testing.T) {
	g := gangByLeader(t, GroupGrove(groveReplica("llm", "vllmworker", 0, 3, groveAliases)), "llm-0-vllmworker-0-")
	expectViolation(t, g, 3, `pod spec DYNAMO_RANK="" but its rank is 1`, `pod spec DYNAMO_RANK="" but its rank is 2`)
	if v := strings.Join(Check(g, 3), "\n"); strings.Contains(v, "process") || strings.Contains(v, "leader") {
		t.Errorf("only the workers' pod spec rank is wrong; got:\n%s", v)
	}

	noRankEnv := func(d deployer, svc string, leader bool, n int) corev1.Container {
		c := groveAliases(d, svc, leader, n)
		if !leader {
			c.Env = c.Env[:len(c.Env)-1]
		}
		return c
	}
	g = gangByLeader(t, GroupGrove(groveReplica("llm", "vllmworker", 0, 3, noRankEnv)), "llm-0-vllmworker-0-")
	if v := Check(g, 3); len(v) != 0 {
		t.Errorf("rank exported by the shell only: unexpected violations %q", v)
	}
	want := []View{
		{Rank: 0, Leader: "leader", SpecRank: "0", EnvRank: "0", EnvLeaderPod: "leader"},
		{Rank: 1, Leader: "leader", SpecRank: Unset, EnvRank: "1", EnvLeaderPod: "leader"},
		{Rank: 2, Leader: "leader", SpecRank: Unset, EnvRank: "2", EnvLeaderPod: "leader"},
	}
	got := Views(g, 3)
	for i := range got {
		if got[i].Leader == g.Leader.Pod.Name {
			got[i].Leader = "leader"
		}
		if got[i].EnvLeaderPod == g.Leader.Pod.Name {
			got[i].EnvLeaderPod = "leader"
		}
		if got[i].SpecLeader != got[i].EnvLeader || !strings.HasPrefix(got[i].EnvLeader, "llm-0-vllmworker-0-vllmworker-ldr-0.") {
			t.Errorf("member %d: leader address in spec %q, in process %q", i, got[i].SpecLeader, got[i].EnvLeader)
		}
		got[i].Pod, got[i].SpecLeader, got[i].EnvLeader = "", "", ""
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Views: -want +got\n%s", d)
	}

	misordered := func(d deployer, svc string, leader bool, n int) corev1.Container {
		c := noRankEnv(d, svc, leader, n)
		e := c.Env
		i := len(e) - 3 // the two helpers, then the address (and the leader's rank)
		if leader {
			i--
		}
		e[i], e[i+1], e[i+2] = e[i+2], e[i], e[i+1]
		return c
	}
	g = gangByLeader(t, GroupGrove(groveReplica("llm", "vllmworker", 0, 2, misordered)), "llm-0-vllmworker-0-")
	expectViolation(t, g, 2, `pod spec DYNAMO_LEADER_ADDRESS="$(DYNAMO_GROVE_PCSG_NAME)-$(DYNAMO_GROVE_PCSG_INDEX)-vllmworker-ldr-0.llm-0.team.svc.cluster.local" but it uses leader address`)
}
