package gangs

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"testing"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	leaderworkerset "sigs.k8s.io/lws/api/leaderworkerset/v1"
	lwswebhooks "sigs.k8s.io/lws/pkg/webhooks"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	renderpkg "github.com/dgd-rollout/operator/render"
	grovepods "github.com/dgd-rollout/operator/test/grove"
)

// The operator's own backends, end to end: one multinode graph rendered by the LWS and
// the Grove backend, its pods made as LWS v0.9.0 (StatefulSet identities, then the real
// LWS pod webhook) and Grove v0.1.0-alpha.12-rc1 (test/grove, from Grove's source) make
// them, each member's process read as the kubelet and its shell would start it.

const (
	agreeDGD     = "llm"
	agreeService = "VllmWorker"
	agreeHash    = "abcd1234"
	agreeNodes   = 3
	agreeGangs   = 2
)

// agreeGraph is DGD llm with one multinode worker service of agreeGangs gangs of
// agreeNodes pods, its main container and GPUs per pod as given.
func agreeGraph(svcAnn map[string]string, gpus string, command []string, args ...string) (*v1alpha1.DynamoGraphDeployment, backends.Pool) {
	spec := &v1alpha1.DynamoComponentDeploymentSharedSpec{
		ComponentType: v1alpha1.ComponentTypeWorker, Annotations: svcAnn, Replicas: ptr.To[int32](agreeGangs),
		Multinode: &v1alpha1.MultinodeSpec{NodeCount: agreeNodes},
		ExtraPodSpec: &v1alpha1.ExtraPodSpec{MainContainer: &corev1.Container{
			Image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.0", Command: command, Args: args}},
	}
	if gpus != "" {
		spec.Resources = &v1alpha1.Resources{Limits: &v1alpha1.ResourceItem{GPU: gpus}}
	}
	dgd := &v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: agreeDGD, UID: "dgd-uid"},
		Spec:       v1alpha1.DynamoGraphDeploymentSpec{Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{agreeService: spec}},
	}
	pool := backends.Pool{Hash: agreeHash, Services: []backends.ServiceWorkload{
		{Key: backends.Key{Service: agreeService, Hash: agreeHash}, Spec: spec, Replicas: agreeGangs}}}
	return dgd, pool
}

func agreeClient(t *testing.T) (client.Client, *runtime.Scheme) {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, v1alpha1.AddToScheme, grovev1.AddToScheme, leaderworkerset.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return fake.NewClientBuilder().WithScheme(s).Build(), s
}

// lwsBackendPods renders the graph with the LWS backend and makes its pods.
func lwsBackendPods(t *testing.T, dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool) []corev1.Pod {
	t.Helper()
	c, s := agreeClient(t)
	if err := lws.New(c, s, renderpkg.Config{}).Ensure(context.Background(), dgd, pool); err != nil {
		t.Fatalf("LWS backend: %v", err)
	}
	var list leaderworkerset.LeaderWorkerSetList
	if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("LWS backend made %d LeaderWorkerSets (%v), want 1", len(list.Items), err)
	}
	return lwsSetPods(t, &list.Items[0])
}

// lwsSetPods are the pods of every group of a LeaderWorkerSet as LWS v0.9.0 makes
// them (see lwsGroup): leader `<lws>-<g>` from the leader template, worker i
// `<lws>-<g>-<i>` from the worker template, hostname the pod name, subdomain `<lws>`
// (subdomainPolicy Shared), then the real LWS pod webhook.
func lwsSetPods(t *testing.T, set *leaderworkerset.LeaderWorkerSet) []corev1.Pod {
	t.Helper()
	hook := lwswebhooks.NewPodWebhook(nil)
	size := int(*set.Spec.LeaderWorkerTemplate.Size)
	mk := func(name string, ordinal int, tmpl *corev1.PodTemplateSpec, labels, ann map[string]string) corev1.Pod {
		l, a := maps.Clone(tmpl.Labels), maps.Clone(tmpl.Annotations)
		if a == nil {
			a = map[string]string{}
		}
		maps.Copy(l, labels)
		maps.Copy(a, ann)
		l["statefulset.kubernetes.io/pod-name"], l["apps.kubernetes.io/pod-index"] = name, strconv.Itoa(ordinal)
		l[leaderworkerset.RevisionKey] = "rev1"
		a[leaderworkerset.SizeAnnotationKey] = strconv.Itoa(size)
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: set.Namespace, UID: types.UID("uid-" + name), Labels: l, Annotations: a},
			Spec: *tmpl.Spec.DeepCopy()}
		p.Spec.Hostname, p.Spec.Subdomain = name, set.Name
		if err := hook.Default(context.Background(), &p); err != nil {
			t.Fatalf("LWS webhook on %s: %v", name, err)
		}
		return p
	}
	var pods []corev1.Pod
	for g := 0; g < int(*set.Spec.Replicas); g++ {
		leaderName := fmt.Sprintf("%s-%d", set.Name, g)
		leader := mk(leaderName, g, set.Spec.LeaderWorkerTemplate.LeaderTemplate,
			map[string]string{leaderworkerset.SetNameLabelKey: set.Name, leaderworkerset.WorkerIndexLabelKey: "0"}, nil)
		pods = append(pods, leader)
		for i := 1; i < size; i++ {
			pods = append(pods, mk(fmt.Sprintf("%s-%d", leaderName, i), i, &set.Spec.LeaderWorkerTemplate.WorkerTemplate, map[string]string{
				leaderworkerset.SetNameLabelKey:         set.Name,
				leaderworkerset.GroupIndexLabelKey:      leader.Labels[leaderworkerset.GroupIndexLabelKey],
				leaderworkerset.GroupUniqueHashLabelKey: leader.Labels[leaderworkerset.GroupUniqueHashLabelKey],
			}, map[string]string{leaderworkerset.LeaderPodNameAnnotationKey: leaderName}))
		}
	}
	return pods
}

// groveBackendPods renders the graph with the Grove backend and makes the pods of every
// scaling group replica as Grove does (test/grove: PodClique, then its pods).
func groveBackendPods(t *testing.T, dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool) []corev1.Pod {
	t.Helper()
	c, s := agreeClient(t)
	if err := grove.New(c, s, renderpkg.Config{}).Ensure(context.Background(), dgd, pool); err != nil {
		t.Fatalf("Grove backend: %v", err)
	}
	var list grovev1.PodCliqueSetList
	if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("Grove backend made %d PodCliqueSets (%v), want 1", len(list.Items), err)
	}
	pcs := &list.Items[0]
	var pods []corev1.Pod
	for _, cfg := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		pcsg := &grovev1.PodCliqueScalingGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: pcs.Namespace, Name: apicommon.GeneratePodCliqueScalingGroupName(apicommon.ResourceNameReplica{Name: pcs.Name}, cfg.Name)},
			Spec:       grovev1.PodCliqueScalingGroupSpec{Replicas: *cfg.Replicas, MinAvailable: cfg.MinAvailable, CliqueNames: cfg.CliqueNames},
		}
		for j := 0; j < int(pcsg.Spec.Replicas); j++ {
			for _, name := range cfg.CliqueNames {
				for _, tmpl := range pcs.Spec.Template.Cliques {
					if tmpl.Name != name {
						continue
					}
					pclq := grovepods.ScalingGroupPodClique(pcs, pcsg, j, tmpl)
					for k := 0; k < int(pclq.Spec.Replicas); k++ {
						p := grovepods.Pod(pcs, pclq, k)
						p.Name = fmt.Sprintf("%s%05x", p.GenerateName, 0xa1b2c+97*k)
						p.UID = types.UID("uid-" + p.Name)
						pods = append(pods, *p)
					}
				}
			}
		}
	}
	return pods
}

// member is what one gang member's process starts with, its leader named "leader"
// when it is its own gang's leader pod.
type member struct {
	Rank           int    // from its command line (-1: none, a Ray member)
	Leader         string // the pod its command line's leader address reaches
	EnvRank        string // DYNAMO_RANK in its process
	EnvLeader      string // the pod DYNAMO_LEADER_ADDRESS in its process reaches
	SpecRank       string // DYNAMO_RANK in its pod spec (Unset: none)
	SpecLeaderSame bool   // DYNAMO_LEADER_ADDRESS is in its pod spec, as its process sees it
}

// members checks every gang of pods (grouped by group) and reads its members, gangs in
// key order, each leader first.
func members(t *testing.T, backend string, gangs map[string]*Gang) [][]member {
	t.Helper()
	if len(gangs) != agreeGangs {
		t.Fatalf("%s: %d gangs, want %d", backend, len(gangs), agreeGangs)
	}
	keys := make([]string, 0, len(gangs))
	for k := range gangs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out [][]member
	for _, k := range keys {
		g := gangs[k]
		if v := Check(g, agreeNodes); len(v) != 0 {
			t.Errorf("%s gang %s does not form: %q", backend, k, v)
		}
		own := func(pod string) string {
			if g.Leader != nil && pod == g.Leader.Pod.Name {
				return "leader"
			}
			return pod
		}
		var ms []member
		for _, v := range Views(g, agreeNodes) {
			ms = append(ms, member{Rank: v.Rank, Leader: own(v.Leader), EnvRank: v.EnvRank, EnvLeader: own(v.EnvLeaderPod),
				SpecRank: v.SpecRank, SpecLeaderSame: v.SpecLeader != Unset && v.SpecLeader == v.EnvLeader})
		}
		out = append(out, ms)
	}
	return out
}

// TestBackendsAgreeOnRankAndLeader (issue 38): for each framework, the LWS and the Grove
// pods of one graph agree, member by member, on the rank and the leader address as the
// process sees them: its command line's rank and leader, DYNAMO_RANK and
// DYNAMO_LEADER_ADDRESS in its env (its shell's exports included). Both are exact: member
// p of a gang has rank p and reaches its own gang's leader. In the pod spec, DYNAMO_RANK
// is the rank wherever it is defined: on every LWS member, on a Grove leader; a Grove
// worker defines none (Grove v0.1.0-alpha.12 has nothing its env could read it from; its
// shell exports it). Before issue 38 a Grove worker's pod spec had DYNAMO_RANK="".
func TestBackendsAgreeOnRankAndLeader(t *testing.T) {
	vllm, sglang, trtllm := []string{"python3", "-m", "dynamo.vllm"}, []string{"python3", "-m", "dynamo.sglang"}, []string{"python3", "-m", "dynamo.trtllm"}
	ray := map[string]string{renderpkg.AnnotationVLLMDistributedExecutor: "ray"}
	cases := []struct {
		name    string
		ann     map[string]string
		gpus    string
		command []string
		args    []string
		noRank  bool // Ray assigns ranks: the command line gives none
	}{
		{name: "vLLM mp (TP 24 on 8-GPU pods)", gpus: "8", command: vllm, args: []string{"--model", "M", "--tensor-parallel-size", "24"}},
		{name: "vLLM ray", ann: ray, gpus: "8", command: vllm, args: []string{"--model", "M", "--tensor-parallel-size", "24"}, noRank: true},
		{name: "vLLM data parallel (DP 24 on 8-GPU pods)", gpus: "8", command: vllm, args: []string{"--model", "M", "--data-parallel-size", "24"}},
		{name: "SGLang (TP 24 on 8-GPU pods)", gpus: "8", command: sglang, args: []string{"--model-path", "M", "--tp", "24"}},
		{name: "TRT-LLM (4-GPU pods)", gpus: "4", command: trtllm, args: []string{"--model-path", "M"}},
		{name: "Dynamo 1.6's portable launch: data parallel by hand from $(DYNAMO_RANK) and $(DYNAMO_LEADER_ADDRESS)", command: vllm,
			args: []string{"--model", "M", "--data-parallel-size", "3", "--data-parallel-size-local", "1", "--data-parallel-start-rank", "$(DYNAMO_RANK)",
				"--data-parallel-address", "$(DYNAMO_LEADER_ADDRESS)", "--data-parallel-rpc-port", "13445"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dgd, pool := agreeGraph(tc.ann, tc.gpus, tc.command, tc.args...)
			onLWS := members(t, "LWS", GroupLWS(lwsBackendPods(t, dgd, pool)))
			onGrove := members(t, "Grove", GroupGrove(groveBackendPods(t, dgd, pool)))
			process := func(gangs [][]member) [][]member {
				out := make([][]member, len(gangs))
				for g, ms := range gangs {
					for _, m := range ms {
						m.SpecRank, m.SpecLeaderSame = "", false
						out[g] = append(out[g], m)
					}
				}
				return out
			}
			if d := cmp.Diff(process(onLWS), process(onGrove)); d != "" {
				t.Errorf("LWS and Grove processes disagree: -LWS +Grove\n%s", d)
			}
			for g := range onGrove {
				for p := 0; p < agreeNodes; p++ {
					want := member{Rank: p, Leader: "leader", EnvRank: strconv.Itoa(p), EnvLeader: "leader", SpecRank: strconv.Itoa(p), SpecLeaderSame: true}
					if tc.noRank {
						want.Rank = -1
						if p == 0 {
							want.Leader = "" // a Ray head names no leader
						}
					}
					lwsWant, groveWant := want, want
					if p > 0 {
						groveWant.SpecRank = Unset
					}
					if g >= len(onLWS) || p >= len(onLWS[g]) || p >= len(onGrove[g]) {
						t.Fatalf("gang %d has members LWS %d, Grove %d; want %d", g, len(onLWS[g]), len(onGrove[g]), agreeNodes)
					}
					if d := cmp.Diff(lwsWant, onLWS[g][p]); d != "" {
						t.Errorf("LWS gang %d member %d: -want +got\n%s", g, p, d)
					}
					if d := cmp.Diff(groveWant, onGrove[g][p]); d != "" {
						t.Errorf("Grove gang %d member %d: -want +got\n%s", g, p, d)
					}
				}
			}
		})
	}
}
