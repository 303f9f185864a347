package haproxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/traffic/proxy"
)

// pod is one proxy pod of the rendered Deployment, its two containers run on this
// machine as a kubelet would run them, with the differences a pod's network and files
// make and nothing else:
//   - the agent's /manager is the binary built from this tree, HAProxy is Debian's
//     haproxy on PATH, each run with its container's command and args;
//   - the emptyDir both mount is one new temporary directory, substituted for its
//     mount path in the args;
//   - every ":port" bind address flag becomes a free 127.0.0.1 port;
//   - $(POD_NAME) and $(POD_NAMESPACE) are the downward API's values;
//   - the API server is reached with the pod's ServiceAccount token (kubeconfig),
//     through the fault proxy of the test.
type pod struct {
	name, dir  string
	entry      string // HAProxy's listener, 127.0.0.1:port
	health     string // the agent's probes, http://127.0.0.1:port
	haproxyCmd []string
	agent      *cluster.Child
	haproxy    *cluster.Child
	logs       []*os.File
}

// startPod runs pod name of deployment d: the agent first, HAProxy once the agent's
// startup probe passes (the native sidecar's order), and waits until both are ready.
func (e *env) startPod(tb testing.TB, d *appsv1.Deployment, name, kubeconfig string) *pod {
	tb.Helper()
	spec := d.Spec.Template.Spec
	if len(spec.InitContainers) != 1 || len(spec.Containers) != 1 {
		tb.Fatalf("Deployment %s: %d init containers and %d containers, want the agent and HAProxy", d.Name, len(spec.InitContainers), len(spec.Containers))
	}
	p := &pod{name: name, dir: shortTempDir(tb)}
	tb.Cleanup(p.stop)
	agent := spec.InitContainers[0]
	vars := map[string]string{"POD_NAME": name, "POD_NAMESPACE": d.Namespace}
	args := p.substitute(tb, agent, vars)
	if agent.Command[0] != "/manager" {
		tb.Fatalf("the agent runs %v, not the image's /manager", agent.Command)
	}
	p.agent = p.run(tb, "agent", exec.Command(e.bin, args...), "KUBECONFIG="+kubeconfig)
	p.waitHTTP(tb, "/startz")
	if _, err := os.Stat(proxy.ConfigPath(p.dir)); err != nil {
		tb.Fatalf("startup probe passed without haproxy.cfg: %v", err)
	}
	p.haproxyCmd = p.substitute(tb, spec.Containers[0], vars)
	p.startHAProxy(tb)
	p.waitHTTP(tb, "/readyz")
	return p
}

// substitute is c's command and args as the pod runs them (see pod).
func (p *pod) substitute(tb testing.TB, c corev1.Container, vars map[string]string) []string {
	tb.Helper()
	var out []string
	for i, a := range append(append([]string{}, c.Command...), c.Args...) {
		if i == 0 && c.Command[0] == "/manager" {
			continue
		}
		for k, v := range vars {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath == proxy.RunDir {
				a = strings.ReplaceAll(a, m.MountPath, p.dir)
			}
		}
		if flag, port, ok := strings.Cut(a, "=:"); ok && strings.HasSuffix(flag, "-address") {
			addr := "127.0.0.1:" + strconv.Itoa(freePort(tb))
			switch port {
			case strconv.Itoa(int(proxy.HTTPPort)):
				p.entry = addr
			case strconv.Itoa(int(proxy.HealthPort)):
				p.health = "http://" + addr
			}
			a = flag + "=" + addr
		}
		out = append(out, a)
	}
	return out
}

func (p *pod) run(tb testing.TB, what string, cmd *exec.Cmd, env ...string) *cluster.Child {
	tb.Helper()
	f, err := os.Create(filepath.Join(p.dir, what+".log"))
	if err != nil {
		tb.Fatal(err)
	}
	p.logs = append(p.logs, f)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	child, err := cluster.StartChild(cmd)
	if err != nil {
		tb.Fatalf("starting %s of pod %s: %v", what, p.name, err)
	}
	return child
}

// startHAProxy starts HAProxy with its container's command and waits for its listener
// (the container's TCP probe).
func (p *pod) startHAProxy(tb testing.TB) {
	tb.Helper()
	path := requireHAProxy(tb)
	if p.haproxyCmd[0] != "haproxy" {
		tb.Fatalf("the HAProxy container runs %v", p.haproxyCmd)
	}
	p.haproxy = p.run(tb, "haproxy", exec.Command(path, p.haproxyCmd[1:]...))
	eventually(tb, 20*time.Second, "HAProxy of pod "+p.name+" listening on "+p.entry, func() bool {
		if p.haproxy.Exited() {
			tb.Fatalf("HAProxy of pod %s exited: %v\n%s", p.name, p.haproxy.Err(), p.tail("haproxy"))
		}
		c, err := net.DialTimeout("tcp", p.entry, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
}

// waitHTTP waits until the agent's probe path answers 200.
func (p *pod) waitHTTP(tb testing.TB, path string) {
	tb.Helper()
	if !poll(60*time.Second, func() bool { return p.agent.Exited() || p.probe(path) == http.StatusOK }) || p.agent.Exited() {
		tb.Fatalf("the agent of pod %s never answered 200 on %s (exited: %t %v):\n%s", p.name, path, p.agent.Exited(), p.agent.Err(), p.tail("agent"))
	}
}

// probe is the status code of GET path on the agent's probe port, 0 when unreachable.
func (p *pod) probe(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.health+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func (p *pod) stop() {
	for _, c := range []*cluster.Child{p.haproxy, p.agent} {
		if c != nil {
			c.Stop(5 * time.Second)
		}
	}
	for _, f := range p.logs {
		_ = f.Close()
	}
}

// tail is the last lines of a container's log.
func (p *pod) tail(what string) string {
	b, _ := os.ReadFile(filepath.Join(p.dir, what+".log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// shortTempDir is a temporary directory with a short path: a UNIX socket's path is at
// most 107 bytes (sun_path), and t.TempDir's holds the test's name.
func shortTempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "px-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually polls cond every 20 ms until it holds, failing after timeout.
func eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !poll(timeout, cond) {
		tb.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// poll polls cond every 20 ms until it holds (true) or timeout passes (false).
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func (p *pod) String() string { return fmt.Sprintf("pod %s (%s)", p.name, p.entry) }
