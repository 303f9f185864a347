package gangs

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Pod labels read by the grouping functions.
const (
	// LWS v0.9.0, api/leaderworkerset/v1/leaderworkerset_types.go:37-45.
	LabelLWSName        = "leaderworkerset.sigs.k8s.io/name"
	LabelLWSGroupIndex  = "leaderworkerset.sigs.k8s.io/group-index"
	LabelLWSWorkerIndex = "leaderworkerset.sigs.k8s.io/worker-index"
	// Grove (notes/grove-facts.md §1-§2).
	LabelGrovePCSG         = "grove.io/podcliquescalinggroup"
	LabelGrovePCSGReplica  = "grove.io/podcliquescalinggroup-replica-index"
	LabelGrovePodClique    = "grove.io/podclique"
	LabelGrovePodCliqueIdx = "grove.io/podclique-pod-index"
	// MainContainerName is the name of Dynamo's main container (notes/dynamo-multinode.md §0).
	MainContainerName = "main"
	// GPUResource is the resource that counts the GPUs of a pod.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
)

// Member is one pod of a gang together with the program its main container would run.
type Member struct {
	// Pod is the pod.
	Pod *corev1.Pod
	// Argv is the final argv: [Expand], then [Shell] for `sh -c` commands.
	Argv []string
	// Env is the main container's environment as resolved by [Expand].
	Env map[string]string
	// Expanded is command+args after kubelet expansion, before Shell. For
	// `sh -c` it holds the whole script, which is where `ray start --head` is found.
	Expanded []string
	// Err records a failure to expand or evaluate the command line.
	// [Check] reports it.
	Err error
}

// Gang is one multinode group: one LWS group, or one Grove PCSG replica.
type Gang struct {
	// Key is "<namespace>/<lws name>/<group-index>" for LWS and
	// "<namespace>/<pcsg name>/<replica-index>" for Grove.
	Key string
	// Leader is the leader member, or nil if there is none.
	Leader *Member
	// Members are all members: the leader first, then in worker order.
	Members []*Member
	// Peers are all pods that were grouped, across every gang. They are the DNS universe that
	// leader addresses resolve against. When Peers is nil, Members is used instead.
	Peers []*corev1.Pod
	// Problems are errors found while grouping, such as two leaders. [Check] reports them.
	Problems []string
}

// GroupLWS groups LWS pods by the labels leaderworkerset.sigs.k8s.io/name and
// group-index. The leader is the pod with worker-index "0", as in LWS
// podutils.LeaderPod (pkg/utils/pod/pod_utils.go:52-55). Pods that are being
// deleted, and pods without the labels, are skipped.
func GroupLWS(pods []corev1.Pod) map[string]*Gang {
	return group(pods, func(p *corev1.Pod) (string, bool, string, bool) {
		name, g := p.Labels[LabelLWSName], p.Labels[LabelLWSGroupIndex]
		idx, ok := p.Labels[LabelLWSWorkerIndex]
		if name == "" || g == "" || !ok {
			return "", false, "", false
		}
		return p.Namespace + "/" + name + "/" + g, idx == "0", sortKey(idx), true
	})
}

// GroupGrove groups Grove pods by the labels grove.io/podcliquescalinggroup
// and grove.io/podcliquescalinggroup-replica-index. The leader is the pod whose
// grove.io/podclique label ends in "-ldr" (Dynamo's cliques are <svc>-ldr and <svc>-wkr,
// notes/dynamo-multinode.md §2). Pods that are being deleted are skipped.
func GroupGrove(pods []corev1.Pod) map[string]*Gang {
	return group(pods, func(p *corev1.Pod) (string, bool, string, bool) {
		pcsg, r := p.Labels[LabelGrovePCSG], p.Labels[LabelGrovePCSGReplica]
		if pcsg == "" || r == "" {
			return "", false, "", false
		}
		clique := p.Labels[LabelGrovePodClique]
		return p.Namespace + "/" + pcsg + "/" + r, strings.HasSuffix(clique, "-ldr"),
			clique + "/" + sortKey(p.Labels[LabelGrovePodCliqueIdx]), true
	})
}

func sortKey(idx string) string {
	if n, err := strconv.Atoi(idx); err == nil {
		return fmt.Sprintf("%08d", n)
	}
	return idx
}

type classify func(p *corev1.Pod) (key string, leader bool, order string, ok bool)

func group(pods []corev1.Pod, cls classify) map[string]*Gang {
	gangs := map[string]*Gang{}
	var peers []*corev1.Pod
	order := map[*Member]string{}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		key, leader, ord, ok := cls(p)
		if !ok {
			continue
		}
		peers = append(peers, p)
		g := gangs[key]
		if g == nil {
			g = &Gang{Key: key}
			gangs[key] = g
		}
		m := NewMember(p)
		order[m] = ord
		if leader {
			if g.Leader != nil {
				g.Problems = append(g.Problems, fmt.Sprintf("two leader pods: %s and %s", g.Leader.Pod.Name, p.Name))
				ord = "~" + ord
				order[m] = ord
			} else {
				g.Leader = m
				order[m] = ""
			}
		}
		g.Members = append(g.Members, m)
	}
	for _, g := range gangs {
		g.Peers = peers
		sort.SliceStable(g.Members, func(a, b int) bool { return order[g.Members[a]] < order[g.Members[b]] })
	}
	return gangs
}

// NewMember computes the Member of pod from its main container: the container
// named "main", or else the first container.
func NewMember(pod *corev1.Pod) *Member {
	m := &Member{Pod: pod}
	c := MainContainer(pod)
	if c == nil {
		m.Err = fmt.Errorf("pod %s has no containers", pod.Name)
		return m
	}
	m.Expanded, m.Env, m.Err = Expand(pod, c)
	if m.Err == nil {
		m.Argv, m.Err = Shell(m.Expanded, m.Env)
	}
	return m
}

// MainContainer returns the container named "main", or else the first container, or nil.
func MainContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == MainContainerName {
			return &pod.Spec.Containers[i]
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return &pod.Spec.Containers[0]
	}
	return nil
}

// GPUsPerPod returns the nvidia.com/gpu limit of the pod's main container,
// or else its request, or else 0. Limits come before requests, as in Dynamo's
// ResolveContainerGPUs (notes/dynamo-multinode.md §0).
func GPUsPerPod(pod *corev1.Pod) int64 {
	c := MainContainer(pod)
	if c == nil {
		return 0
	}
	if q, ok := c.Resources.Limits[GPUResource]; ok {
		return q.Value()
	}
	if q, ok := c.Resources.Requests[GPUResource]; ok {
		return q.Value()
	}
	return 0
}

// Resolve returns the pods among peers that the DNS name host would reach
// from a pod in namespace fromNS. A pod with spec.hostname H and spec.subdomain S in
// namespace N answers to H.S.N.svc.cluster.local, H.S.N.svc, H.S.N, and H.S
// (only from the same namespace). A trailing dot is ignored. A host that is an IP
// matches the pods with that status.podIP. Pods without both hostname and subdomain have no
// such record. Note that the record also needs a headless Service named S that
// selects the pod: LWS creates <lws> (leaderworkerset_controller.go:213-220), and Grove creates
// <pcs>-0 (grove-facts §1). Services are not modelled here.
func Resolve(peers []*corev1.Pod, host, fromNS string) []*corev1.Pod {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	var out []*corev1.Pod
	if net.ParseIP(host) != nil {
		for _, p := range peers {
			if p.Status.PodIP == host {
				out = append(out, p)
			}
		}
		return out
	}
	for _, p := range peers {
		if p.Spec.Hostname == "" || p.Spec.Subdomain == "" {
			continue
		}
		base := strings.ToLower(p.Spec.Hostname + "." + p.Spec.Subdomain)
		switch host {
		case base + "." + p.Namespace + ".svc.cluster.local", base + "." + p.Namespace + ".svc",
			base + "." + p.Namespace:
			out = append(out, p)
		case base:
			if p.Namespace == fromNS {
				out = append(out, p)
			}
		}
	}
	return out
}
