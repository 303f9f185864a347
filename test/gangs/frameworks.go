package gangs

import (
	"net"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// dataParallel checks vLLM hybrid-LB data parallelism (notes/dynamo-multinode.md §3):
// rank r runs local ranks [L*r, L*r+L), so the start ranks must be L*0..L*(N-1),
// and the total size must be L*N.
func (c *checker) dataParallel() {
	locals, sizes := map[string][]string{}, map[string][]string{}
	for _, m := range c.live {
		l, lok := c.intFlag(m, "--data-parallel-size-local")
		if lok {
			locals[strconv.Itoa(l)] = append(locals[strconv.Itoa(l)], m.Pod.Name)
			if l <= 0 {
				c.member(m, "--data-parallel-size-local %d must be positive", l)
				lok = false
			}
		}
		if s, ok := c.intFlag(m, "--data-parallel-start-rank"); ok && lok {
			if s%l != 0 {
				c.member(m, "--data-parallel-start-rank %d is not a multiple of --data-parallel-size-local %d", s, l)
			} else {
				c.rank[m] = s / l
			}
		}
		if total, ok := c.intFlag(m, "--data-parallel-size"); ok {
			sizes[strconv.Itoa(total)] = append(sizes[strconv.Itoa(total)], m.Pod.Name)
			if lok && total != l*c.n {
				c.member(m, "--data-parallel-size %d, want --data-parallel-size-local %d × nodeCount %d = %d", total, l, c.n, l*c.n)
			}
		}
	}
	c.agree("--data-parallel-size-local", locals)
	c.agree("--data-parallel-size", sizes)
	c.agreeOnAddress("--data-parallel-address", "--data-parallel-rpc-port")
	c.ranksExact("data-parallel (start-rank / size-local)")
}

// ray checks vLLM on Ray (notes/dynamo-multinode.md §3 ray). The head is
// `ray start --head --port=P` before vLLM, and each worker runs `ray start --address=<leader>:P --block`.
func (c *checker) ray() {
	leader := c.g.Leader
	port := "6379" // ray's default GCS port
	if head := rayStart(leader); head == nil || !hasFlag(head, "--head") {
		c.member(leader, "leader does not run `ray start --head`")
	} else if v, ok := flagValue(head, "--port"); ok {
		port = v
	}
	if v, _ := flagValue(leader.Argv, "--distributed-executor-backend"); v != "ray" {
		c.member(leader, "leader argv has --distributed-executor-backend %q, want ray", v)
	}
	seen := map[string][]string{}
	for _, m := range c.live {
		if m == leader {
			continue
		}
		rs := rayStart(m)
		addr, ok := flagValue(rs, "--address")
		if rs == nil || !ok {
			c.member(m, "worker does not run `ray start --address=...`: %q", m.Argv)
			continue
		}
		host, p, err := net.SplitHostPort(addr)
		if err != nil {
			c.member(m, "ray start --address %q is not host:port", addr)
			continue
		}
		if p != port {
			c.member(m, "ray start --address port %s, but the head listens on %s", p, port)
		}
		if !hasFlag(rs, "--block") {
			c.member(m, "ray start without --block returns at once and the container exits")
		}
		c.addr[m] = host
		c.resolvesToLeader(m, "ray start --address", host)
		seen[addr] = append(seen[addr], m.Pod.Name)
	}
	c.agree("ray start --address", seen)
}

// rayStart returns the evaluated argv of the member's `ray start` step, or nil.
func rayStart(m *Member) []string {
	if len(m.Argv) > 1 && m.Argv[0] == "ray" && m.Argv[1] == "start" {
		return m.Argv
	}
	if !isShellCommand(m.Expanded) || len(m.Expanded) < 3 {
		return nil
	}
	items, err := splitList(m.Expanded[2])
	if err != nil {
		return nil
	}
	sh := newShell(m.Env, m.Expanded[3:])
	for _, it := range items {
		words, err := splitWords(it.text)
		if err != nil {
			continue
		}
		for len(words) > 0 && words[0] == "exec" {
			words = words[1:]
		}
		if len(words) > 1 && words[0] == "ray" && words[1] == "start" {
			argv, err := sh.simple(it.text)
			if err != nil {
				return nil
			}
			for len(argv) > 0 && argv[0] == "exec" {
				argv = argv[1:]
			}
			return argv
		}
	}
	return nil
}

// mpi checks the TRT-LLM mpirun leader and sshd workers (notes/dynamo-multinode.md §5).
func (c *checker) mpi() {
	leader := c.g.Leader
	if len(leader.Argv) == 0 || path.Base(leader.Argv[0]) != "mpirun" {
		c.member(leader, "TRT-LLM leader does not exec mpirun: %q", leader.Argv)
		return
	}
	hostList, ok := mpiFlag(leader.Argv, "-H", "--host", "-host")
	if !ok {
		c.member(leader, "mpirun has no -H host list")
	}
	var hosts []string
	if hostList != "" {
		hosts = strings.Split(hostList, ",")
	}
	if ok && len(hosts) != c.n {
		c.member(leader, "mpirun -H lists %d hosts, want nodeCount %d: %q", len(hosts), c.n, hostList)
	}
	byPod := map[*corev1.Pod]*Member{}
	for _, m := range c.g.Members {
		byPod[m.Pod] = m
	}
	used := map[*Member]string{}
	for i, h := range hosts {
		h = strings.SplitN(h, ":", 2)[0] // host:slots
		if i == 0 {
			c.addr[leader], c.rank[leader], used[leader] = h, 0, h
			c.resolvesToLeader(leader, "mpirun -H[0]", h)
			continue
		}
		pods := Resolve(c.peers, h, leader.Pod.Namespace)
		if len(pods) != 1 {
			c.member(leader, "mpirun -H[%d] %q resolves to %d pods %s, want one worker of this gang", i, h, len(pods), podNames(pods))
			continue
		}
		m := byPod[pods[0]]
		switch {
		case m == nil:
			c.member(leader, "mpirun -H[%d] %q resolves to pod %s/%s outside this gang", i, h, pods[0].Namespace, pods[0].Name)
		case m == leader:
			c.member(leader, "mpirun -H[%d] %q names the leader again", i, h)
		case used[m] != "":
			c.member(leader, "mpirun -H[%d] %q names worker %s twice (also %q)", i, h, m.Pod.Name, used[m])
		default:
			used[m], c.rank[m], c.addr[m] = h, i, hosts[0]
		}
	}
	gpus := GPUsPerPod(leader.Pod)
	if v, ok := mpiFlag(leader.Argv, "-n", "-np", "--np"); !ok {
		c.member(leader, "mpirun has no -n")
	} else if np, err := strconv.Atoi(v); err != nil || int64(np) != int64(c.n)*gpus {
		c.member(leader, "mpirun -n %s, want nodeCount %d × %d GPUs per pod = %d", v, c.n, gpus, int64(c.n)*gpus)
	}
	for _, m := range c.live {
		if m == leader {
			continue
		}
		if used[m] == "" && len(hosts) > 0 {
			c.member(m, "worker is not in the leader's mpirun -H list")
		}
		if len(m.Argv) == 0 || path.Base(m.Argv[0]) != "sshd" {
			c.member(m, "TRT-LLM worker does not run sshd: %q", m.Argv)
		}
	}
}

// mpiFlag returns the first value of any of the given mpirun options.
func mpiFlag(argv []string, names ...string) (string, bool) {
	for i, a := range argv {
		for _, n := range names {
			if a == n && i+1 < len(argv) {
				return argv[i+1], true
			}
			if strings.HasPrefix(a, n+"=") {
				return a[len(n)+1:], true
			}
		}
	}
	return "", false
}
