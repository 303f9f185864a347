package gangs

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Framework names returned by [Framework].
const (
	FrameworkVLLMMP = "vllm-mp"  // torch.distributed launch: --nnodes/--master-addr/--node-rank
	FrameworkVLLMDP = "vllm-dp"  // data parallel: --data-parallel-address/-start-rank
	FrameworkRay    = "vllm-ray" // leader `ray start --head`, workers `ray start --address`
	FrameworkSGLang = "sglang"   // --dist-init-addr/--nnodes/--node-rank
	FrameworkTRTLLM = "trtllm"   // leader mpirun -H, workers sshd
)

// Portable alias env vars (notes/dynamo-multinode.md §2, consts @0367e404).
const (
	EnvDynamoRank          = "DYNAMO_RANK"
	EnvDynamoLeaderAddress = "DYNAMO_LEADER_ADDRESS"
)

var moduleRe = regexp.MustCompile(`\bdynamo\.(vllm|sglang|trtllm)\b`)

// Framework tells from the leader's final argv (and its script, for Ray) how the gang
// forms. It returns "" when the leader runs none of the known launchers.
func Framework(leader *Member) string {
	if leader == nil {
		return ""
	}
	joined := strings.Join(leader.Argv, " ")
	mods := map[string]bool{}
	for _, m := range moduleRe.FindAllStringSubmatch(joined, -1) {
		mods[m[1]] = true
	}
	switch {
	case len(leader.Argv) > 0 && path.Base(leader.Argv[0]) == "mpirun", mods["trtllm"]:
		return FrameworkTRTLLM
	case mods["sglang"]:
		return FrameworkSGLang
	}
	if v, _ := flagValue(leader.Argv, "--distributed-executor-backend"); v == "ray" || rayStart(leader) != nil {
		return FrameworkRay
	}
	if mods["vllm"] {
		if _, ok := flagValue(leader.Argv, "--data-parallel-address"); ok {
			return FrameworkVLLMDP
		}
		return FrameworkVLLMMP
	}
	return ""
}

// Check returns every reason the gang would not form a process group of
// nodeCount nodes. An empty result means it forms. The checks depend on
// [Framework]:
//   - every framework: exactly nodeCount members, one leader, and
//     command lines that can be evaluated;
//   - vLLM mp and SGLang: all members have --nnodes == nodeCount and the same
//     leader address (--master-addr + --master-port, or --dist-init-addr
//     host:port). The address resolves ([Resolve]) to exactly this gang's
//     leader pod, and --node-rank is 0..N-1, each once, with 0 on the leader. vLLM
//     workers run --headless and the leader does not (notes §3 mp);
//   - vLLM data parallel: same --data-parallel-address/-rpc-port/-size-local L on every member.
//     --data-parallel-start-rank is L*rank, with ranks 0..N-1 each once (leader 0), and
//     --data-parallel-size, when given, equals L*N (notes §3 data-parallel);
//   - vLLM Ray: the leader's script runs `ray start --head` and vLLM with
//     --distributed-executor-backend ray. Each worker runs `ray start
//     --address=H:P --block`, where H is the leader and P is the head's port (notes §3 ray);
//   - TRT-LLM: the leader's mpirun -H has N hosts. The first is the leader, and every other one is a
//     distinct worker pod of the gang. -n == N × GPUs per pod ([GPUsPerPod]). Workers run
//     sshd (notes §5);
//   - DYNAMO_RANK and DYNAMO_LEADER_ADDRESS, where a member defines them, in its pod
//     spec (what the kubelet resolves: what `$(DYNAMO_RANK)` in its args becomes, what an
//     exec probe or `kubectl exec` sees) and in its process (with its shell's exports:
//     [ShellEnv]), equal the member's rank and the leader address it uses. An empty value
//     is wrong: a rank read from a label the pod lacks is "".
func Check(g *Gang, nodeCount int) []string {
	if g == nil {
		return []string{"nil gang"}
	}
	return inspect(g, nodeCount).out
}

// inspect runs every check of [Check] and keeps what it read of each member.
func inspect(g *Gang, nodeCount int) *checker {
	c := &checker{g: g, n: nodeCount, peers: g.Peers, rank: map[*Member]int{}, addr: map[*Member]string{}}
	if c.peers == nil {
		for _, m := range g.Members {
			c.peers = append(c.peers, m.Pod)
		}
	}
	c.out = append(c.out, g.Problems...)
	if len(g.Members) != nodeCount {
		c.addf("gang has %d members, want nodeCount %d", len(g.Members), nodeCount)
	}
	if g.Leader == nil {
		c.addf("gang has no leader pod")
		return c
	}
	for _, m := range g.Members {
		if m.Err != nil {
			c.member(m, "cannot evaluate command: %v", m.Err)
		} else {
			c.live = append(c.live, m)
		}
	}
	if g.Leader.Err != nil {
		return c
	}
	switch fw := Framework(g.Leader); fw {
	case FrameworkVLLMMP:
		c.ranked("--master-addr", "--master-port", "--node-rank")
		for _, m := range c.live {
			if hasFlag(m.Argv, "--headless") == (m == g.Leader) {
				c.member(m, "--headless must be set on workers only (leader %v)", m == g.Leader)
			}
		}
	case FrameworkSGLang:
		c.ranked("--dist-init-addr", "", "--node-rank")
	case FrameworkVLLMDP:
		c.dataParallel()
	case FrameworkRay:
		c.ray()
	case FrameworkTRTLLM:
		c.mpi()
	default:
		c.member(g.Leader, "no known launcher (dynamo.vllm, dynamo.sglang, mpirun, ray start) in argv %q", g.Leader.Argv)
	}
	c.aliases()
	return c
}

type checker struct {
	g     *Gang
	n     int
	peers []*corev1.Pod
	out   []string
	live  []*Member          // members whose command line could be evaluated
	rank  map[*Member]int    // rank of each member, when known
	addr  map[*Member]string // leader host each member uses
}

func (c *checker) addf(format string, a ...any) { c.out = append(c.out, fmt.Sprintf(format, a...)) }

func (c *checker) member(m *Member, format string, a ...any) {
	c.addf("%s: %s", m.Pod.Name, fmt.Sprintf(format, a...))
}

// intFlag reads an integer flag, and reports it when it is missing or malformed.
func (c *checker) intFlag(m *Member, name string) (int, bool) {
	v, ok := flagValue(m.Argv, name)
	if !ok {
		c.member(m, "no %s", name)
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		c.member(m, "%s %q is not an integer", name, v)
		return 0, false
	}
	return n, true
}

// ranked checks the --nnodes/address/rank trio. With portFlag "", the address is host:port.
func (c *checker) ranked(addrFlag, portFlag, rankFlag string) {
	for _, m := range c.live {
		if n, ok := c.intFlag(m, "--nnodes"); ok && n != c.n {
			c.member(m, "--nnodes %d, want nodeCount %d", n, c.n)
		}
		if r, ok := c.intFlag(m, rankFlag); ok {
			c.rank[m] = r
		}
	}
	c.agreeOnAddress(addrFlag, portFlag)
	c.ranksExact(rankFlag)
}

// agreeOnAddress checks that every member names the same leader address and that it resolves to the leader.
func (c *checker) agreeOnAddress(addrFlag, portFlag string) {
	seen := map[string][]string{}
	for _, m := range c.live {
		v, ok := flagValue(m.Argv, addrFlag)
		if !ok {
			c.member(m, "no %s", addrFlag)
			continue
		}
		host, port := v, ""
		if portFlag == "" {
			var err error
			if host, port, err = net.SplitHostPort(v); err != nil {
				c.member(m, "%s %q is not host:port", addrFlag, v)
				continue
			}
		} else if port, ok = flagValue(m.Argv, portFlag); !ok {
			c.member(m, "no %s", portFlag)
		}
		c.addr[m] = host
		c.resolvesToLeader(m, addrFlag, host)
		seen[host+":"+port] = append(seen[host+":"+port], m.Pod.Name)
	}
	c.agree(addrFlag, seen)
}

func (c *checker) agree(what string, seen map[string][]string) {
	if len(seen) <= 1 {
		return
	}
	var parts []string
	for v, pods := range seen {
		parts = append(parts, fmt.Sprintf("%q by %s", v, strings.Join(pods, ",")))
	}
	sort.Strings(parts)
	c.addf("members disagree on %s: %s", what, strings.Join(parts, "; "))
}

// ranksExact checks that the recorded ranks are exactly 0..N-1, with 0 on the leader.
func (c *checker) ranksExact(what string) {
	by := map[int][]string{}
	for _, m := range c.live {
		r, ok := c.rank[m]
		if !ok {
			continue
		}
		by[r] = append(by[r], m.Pod.Name)
		if r < 0 || r >= c.n {
			c.member(m, "%s rank %d outside 0..%d", what, r, c.n-1)
		}
		if m == c.g.Leader && r != 0 {
			c.member(m, "leader has %s rank %d, want 0", what, r)
		}
	}
	for r := 0; r < c.n; r++ {
		switch pods := by[r]; {
		case len(pods) == 0:
			c.addf("no member has %s rank %d", what, r)
		case len(pods) > 1:
			c.addf("%s rank %d is used by %d members: %s", what, r, len(pods), strings.Join(pods, ","))
		}
	}
}

// resolvesToLeader checks that host reaches exactly the leader pod of this gang.
func (c *checker) resolvesToLeader(m *Member, what, host string) {
	leader := c.g.Leader.Pod
	pods := Resolve(c.peers, host, m.Pod.Namespace)
	switch {
	case len(pods) == 0:
		c.member(m, "%s %q resolves to no pod (leader is %s)", what, host, dnsName(leader))
	case len(pods) > 1:
		c.member(m, "%s %q resolves to %d pods: %s", what, host, len(pods), podNames(pods))
	case pods[0] != leader:
		c.member(m, "%s %q resolves to pod %s/%s, not this gang's leader %s", what, host, pods[0].Namespace, pods[0].Name, leader.Name)
	}
}

func dnsName(p *corev1.Pod) string {
	return p.Spec.Hostname + "." + p.Spec.Subdomain + "." + p.Namespace + ".svc.cluster.local"
}

func podNames(pods []*corev1.Pod) string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return strings.Join(names, ",")
}

// aliases checks DYNAMO_RANK and DYNAMO_LEADER_ADDRESS where a member defines them: in
// its pod spec (m.Env, as the kubelet resolves it) and in its process (ShellEnv). The
// process is judged only where it sees another value than the spec (its shell exported
// one), so one wrong value is reported once.
func (c *checker) aliases() {
	for _, m := range c.live {
		spec, proc := m.Env, ShellEnv(m.Expanded, m.Env)
		c.alias(m, "pod spec", spec)
		if proc[EnvDynamoRank] != spec[EnvDynamoRank] || proc[EnvDynamoLeaderAddress] != spec[EnvDynamoLeaderAddress] {
			c.alias(m, "process", proc)
		}
	}
}

// alias checks the aliases of member m in env, where (pod spec or process) says which.
func (c *checker) alias(m *Member, where string, env map[string]string) {
	if v, ok := env[EnvDynamoRank]; ok {
		if r := c.expectedRank(m); v != strconv.Itoa(r) {
			c.member(m, "%s %s=%q but its rank is %d", where, EnvDynamoRank, v, r)
		}
	}
	if v, ok := env[EnvDynamoLeaderAddress]; ok {
		if h, _, err := net.SplitHostPort(v); err == nil {
			v = h // host:port is accepted too
		}
		if a, known := c.addr[m]; known && v != a {
			c.member(m, "%s %s=%q but it uses leader address %q", where, EnvDynamoLeaderAddress, v, a)
		}
		c.resolvesToLeader(m, where+" "+EnvDynamoLeaderAddress, v)
	}
}

// expectedRank is a member's rank as its command line gives it, else (a Ray worker,
// whose rank Ray assigns) its place in the gang: the leader first, then the workers in
// their index order (LWS worker-index; Grove clique pod index, after the leader clique).
func (c *checker) expectedRank(m *Member) int {
	if r, ok := c.rank[m]; ok {
		return r
	}
	for i, o := range c.g.Members {
		if o == m {
			return i
		}
	}
	return -1
}

// Unset is how [View] shows a variable a member does not define.
const Unset = "<unset>"

// View is one gang member as its process starts, read by the checks of [Check]: its
// rank and leader as its command line gives them, and the portable aliases.
type View struct {
	// Pod is the member's pod name.
	Pod string
	// Rank is the member's rank as its command line gives it (--node-rank, the vLLM
	// data-parallel start rank over the local size, its place in the leader's mpirun
	// -H list), or -1 when it gives none (a Ray worker: Ray assigns it).
	Rank int
	// Leader is the pod the leader address of its command line resolves to ("" when it
	// names none or reaches no single pod).
	Leader string
	// SpecRank and SpecLeader are DYNAMO_RANK and DYNAMO_LEADER_ADDRESS in the pod spec
	// as the kubelet resolves them, or Unset.
	SpecRank, SpecLeader string
	// EnvRank and EnvLeader are the same in the process (its shell's exports
	// included), or Unset; EnvLeaderPod is the pod EnvLeader resolves to.
	EnvRank, EnvLeader, EnvLeaderPod string
}

// Views is what each member of g (the leader first) starts with, as [Check] reads it.
func Views(g *Gang, nodeCount int) []View {
	if g == nil {
		return nil
	}
	c := inspect(g, nodeCount)
	var out []View
	for _, m := range g.Members {
		proc := ShellEnv(m.Expanded, m.Env)
		v := View{Pod: m.Pod.Name, Rank: -1, SpecRank: lookup(m.Env, EnvDynamoRank), SpecLeader: lookup(m.Env, EnvDynamoLeaderAddress),
			EnvRank: lookup(proc, EnvDynamoRank), EnvLeader: lookup(proc, EnvDynamoLeaderAddress)}
		if r, ok := c.rank[m]; ok {
			v.Rank = r
		}
		if a, ok := c.addr[m]; ok {
			v.Leader = c.podAt(m, a)
		}
		if v.EnvLeader != Unset {
			v.EnvLeaderPod = c.podAt(m, v.EnvLeader)
		}
		out = append(out, v)
	}
	return out
}

// podAt is the one pod host (or host:port) reaches from member m, or "".
func (c *checker) podAt(m *Member, host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if pods := Resolve(c.peers, host, m.Pod.Namespace); len(pods) == 1 {
		return pods[0].Name
	}
	return ""
}

func lookup(env map[string]string, name string) string {
	if v, ok := env[name]; ok {
		return v
	}
	return Unset
}

// flagValue returns the last value of --name, given as `--name v` or `--name=v`.
func flagValue(argv []string, name string) (string, bool) {
	val, found := "", false
	for i, a := range argv {
		if a == name && i+1 < len(argv) {
			val, found = argv[i+1], true
		} else if strings.HasPrefix(a, name+"=") {
			val, found = a[len(name)+1:], true
		}
	}
	return val, found
}

func hasFlag(argv []string, name string) bool {
	for _, a := range argv {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}
