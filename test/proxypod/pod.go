package proxypod

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dgd-rollout/operator/freeport"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// Options say how to run a proxy pod's containers.
type Options struct {
	// Manager is the manager binary built from this tree (opproc.Build): the agent's
	// /manager.
	Manager string
	// HAProxy is the haproxy to run; "" looks it up on PATH (Debian's package).
	HAProxy string
	// Kubeconfig is the file the agent reads as KUBECONFIG: the API server with a
	// token of the pod's ServiceAccount, so the agent has what the rendered Role grants
	// and nothing else.
	Kubeconfig string
	// Dir is the pod's emptyDir; "" makes a new temporary one (Stop removes it).
	Dir string
}

// Pod is one proxy pod of the rendered Deployment, its two containers run on this
// machine as a kubelet would run them, with the differences a pod's network and files
// make and nothing else:
//   - the agent's /manager is the binary built from this tree, HAProxy is Debian's
//     haproxy, each run with its container's command and args;
//   - the emptyDir both mount is one directory (Dir), substituted for its mount path
//     in the args;
//   - every ":port" bind address flag becomes a free 127.0.0.1 port;
//   - $(POD_NAME) and $(POD_NAMESPACE) are the downward API's values;
//   - the API server is reached with the kubeconfig of Options, a token of the pod's
//     ServiceAccount.
//
// The agent starts first and HAProxy once the agent's startup probe passes (a native
// sidecar with a startup probe holds the main containers until it passes:
// https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/).
type Pod struct {
	// Name and Namespace are the pod's.
	Name, Namespace string
	// Dir is the emptyDir: haproxy.cfg, pin.acl, the runtime API socket, the logs.
	Dir string
	// Entry is HAProxy's client listener (127.0.0.1:port), Health the agent's probes
	// (http://127.0.0.1:port).
	Entry, Health string

	haproxyPath string
	haproxyArgs []string
	ownDir      bool

	mu      sync.Mutex
	agent   *cluster.Child
	haproxy *cluster.Child
	logs    []*os.File
}

// Agent and HAProxy are the running processes (nil before they start).
func (p *Pod) Agent() *cluster.Child {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.agent
}

// HAProxy is the running HAProxy process (nil before it starts).
func (p *Pod) HAProxy() *cluster.Child {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.haproxy
}

// Start runs pod namespace/name of spec (a proxy Deployment's pod template) and waits
// until both containers are ready: the agent's /readyz answers 200 (the newest split it
// read is applied) and HAProxy listens. A pod that does not get there is stopped and its
// logs' last lines are in the error. ctx bounds the wait.
func Start(ctx context.Context, namespace, name string, spec corev1.PodSpec, o Options) (*Pod, error) {
	if len(spec.InitContainers) != 1 || len(spec.Containers) != 1 {
		return nil, fmt.Errorf("pod %s/%s: %d init containers and %d containers, want the agent and HAProxy", namespace, name, len(spec.InitContainers), len(spec.Containers))
	}
	agent, haproxyC := spec.InitContainers[0], spec.Containers[0]
	if len(agent.Command) == 0 || agent.Command[0] != "/manager" {
		return nil, fmt.Errorf("pod %s/%s: the agent runs %v, not the image's /manager", namespace, name, agent.Command)
	}
	path := o.HAProxy
	if path == "" {
		var err error
		if path, err = exec.LookPath("haproxy"); err != nil {
			return nil, fmt.Errorf("haproxy not found on PATH (Debian's package haproxy): %w", err)
		}
	}
	p := &Pod{Name: name, Namespace: namespace, Dir: o.Dir, haproxyPath: path}
	if p.Dir == "" {
		dir, err := ShortTempDir()
		if err != nil {
			return nil, err
		}
		p.Dir, p.ownDir = dir, true
	}
	fail := func(err error) (*Pod, error) {
		p.Stop(0)
		return nil, err
	}
	vars := map[string]string{"POD_NAME": name, "POD_NAMESPACE": namespace}
	args, err := p.substitute(agent, vars)
	if err != nil {
		return fail(err)
	}
	if p.haproxyArgs, err = p.substitute(haproxyC, vars); err != nil {
		return fail(err)
	}
	if len(p.haproxyArgs) == 0 || p.haproxyArgs[0] != "haproxy" {
		return fail(fmt.Errorf("pod %s/%s: the HAProxy container runs %v", namespace, name, p.haproxyArgs))
	}
	child, err := p.run("agent", exec.Command(o.Manager, args[1:]...), "KUBECONFIG="+o.Kubeconfig)
	if err != nil {
		return fail(err)
	}
	p.mu.Lock()
	p.agent = child
	p.mu.Unlock()
	if err := p.WaitHTTP(ctx, "/startz"); err != nil {
		return fail(err)
	}
	if _, err := os.Stat(proxy.ConfigPath(p.Dir)); err != nil {
		return fail(fmt.Errorf("pod %s/%s: the startup probe passed without haproxy.cfg: %w", namespace, name, err))
	}
	if err := p.StartHAProxy(ctx); err != nil {
		return fail(err)
	}
	if err := p.WaitHTTP(ctx, "/readyz"); err != nil {
		return fail(err)
	}
	return p, nil
}

// substitute is c's command and args as the pod runs them (see Pod).
func (p *Pod) substitute(c corev1.Container, vars map[string]string) ([]string, error) {
	var out []string
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		for k, v := range vars {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath == proxy.RunDir {
				a = strings.ReplaceAll(a, m.MountPath, p.Dir)
			}
		}
		if flag, port, ok := strings.Cut(a, "=:"); ok && strings.HasSuffix(flag, "-address") {
			free, err := FreePort()
			if err != nil {
				return nil, err
			}
			addr := "127.0.0.1:" + strconv.Itoa(free)
			switch port {
			case strconv.Itoa(int(proxy.HTTPPort)):
				p.Entry = addr
			case strconv.Itoa(int(proxy.HealthPort)):
				p.Health = "http://" + addr
			}
			a = flag + "=" + addr
		}
		out = append(out, a)
	}
	return out, nil
}

// run starts one container's process, its output in <Dir>/<what>.log.
func (p *Pod) run(what string, cmd *exec.Cmd, env ...string) (*cluster.Child, error) {
	f, err := os.Create(filepath.Join(p.Dir, what+".log"))
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.logs = append(p.logs, f)
	p.mu.Unlock()
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	child, err := cluster.StartChild(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting the %s of pod %s/%s: %w", what, p.Namespace, p.Name, err)
	}
	return child, nil
}

// StartHAProxy starts HAProxy with its container's command and waits for its listener
// (the container's TCP probe). A test that stopped HAProxy starts it again with it.
func (p *Pod) StartHAProxy(ctx context.Context) error {
	child, err := p.run("haproxy", exec.Command(p.haproxyPath, p.haproxyArgs[1:]...))
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.haproxy = child
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		if child.Exited() {
			return fmt.Errorf("HAProxy of pod %s/%s exited: %v\n%s", p.Namespace, p.Name, child.Err(), p.Tail("haproxy"))
		}
		c, err := net.DialTimeout("tcp", p.Entry, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("HAProxy of pod %s/%s not listening on %s: %w\n%s", p.Namespace, p.Name, p.Entry, ctx.Err(), p.Tail("haproxy"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitHTTP waits (60 s at most) until the agent's probe path answers 200.
func (p *Pod) WaitHTTP(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	agent := p.Agent()
	for {
		if agent.Exited() {
			return fmt.Errorf("the agent of pod %s/%s exited before %s answered 200: %v\n%s", p.Namespace, p.Name, path, agent.Err(), p.Tail("agent"))
		}
		if p.Probe(path) == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the agent of pod %s/%s never answered 200 on %s: %w\n%s", p.Namespace, p.Name, path, ctx.Err(), p.Tail("agent"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Probe is the status code of GET path on the agent's probe port, 0 when unreachable.
func (p *Pod) Probe(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Health+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// Stop stops the pod as a kubelet does with the rendered containers: HAProxy first,
// with SIGUSR1, the Docker library image's STOPSIGNAL (its soft stop: streams in flight
// finish; the runtime signals a container with its image's STOPSIGNAL when the spec
// names none, KEP-4960), killed after grace; then the agent, a native sidecar, which a
// kubelet stops after the main containers (SIGTERM: the agent's image names no
// STOPSIGNAL), killed after 5 s. It closes the logs and removes a directory Start made.
func (p *Pod) Stop(grace time.Duration) {
	p.mu.Lock()
	h, a := p.haproxy, p.agent
	p.mu.Unlock()
	if h != nil {
		stopWith(h, syscall.SIGUSR1, grace)
	}
	if a != nil {
		stopWith(a, syscall.SIGTERM, 5*time.Second)
	}
	p.mu.Lock()
	for _, f := range p.logs {
		_ = f.Close()
	}
	p.logs = nil
	p.mu.Unlock()
	if p.ownDir {
		_ = os.RemoveAll(p.Dir)
	}
}

// stopWith signals c by its PID, waits up to grace, then kills it and waits.
func stopWith(c *cluster.Child, sig syscall.Signal, grace time.Duration) {
	if c.Exited() {
		return
	}
	if err := syscall.Kill(c.PID(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		c.Stop(0)
		return
	}
	select {
	case <-c.Done():
	case <-time.After(grace):
		c.Stop(0)
	}
}

// Tail is the last 20 lines of a container's log ("agent" or "haproxy").
func (p *Pod) Tail(what string) string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, what+".log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

func (p *Pod) String() string { return fmt.Sprintf("pod %s/%s (%s)", p.Namespace, p.Name, p.Entry) }

// ShortTempDir is a new temporary directory with a short path: a UNIX socket's path is
// at most 107 bytes (sun_path), and a test's temporary directory holds its name.
func ShortTempDir() (string, error) {
	return os.MkdirTemp("", "px-")
}

// FreePort is a TCP port free on 127.0.0.1 now, for HAProxy to bind (freeport.Pick).
func FreePort() (int, error) { return freeport.Pick() }
