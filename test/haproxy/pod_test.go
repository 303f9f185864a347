package haproxy

import (
	"context"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dgd-rollout/operator/test/proxypod"
)

// pod is one proxy pod of the rendered Deployment, its two containers run on this
// machine as a kubelet would run them (test/proxypod: the agent from the manager binary
// built from this tree, Debian's HAProxy, free loopback ports), the API server reached
// with the pod's ServiceAccount token through the fault proxy of the test.
type pod struct {
	*proxypod.Pod
}

// startPod runs pod name of deployment d (the agent first, HAProxy once the agent's
// startup probe passes, the native sidecar's order) and waits until both are ready.
func (e *env) startPod(tb testing.TB, d *appsv1.Deployment, name, kubeconfig string) *pod {
	tb.Helper()
	p, err := proxypod.Start(context.Background(), d.Namespace, name, d.Spec.Template.Spec,
		proxypod.Options{Manager: e.bin, HAProxy: requireHAProxy(tb), Kubeconfig: kubeconfig})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Stop(5 * time.Second) })
	return &pod{p}
}

// startHAProxy starts HAProxy again after a test stopped it, and waits for its listener.
func (p *pod) startHAProxy(tb testing.TB) {
	tb.Helper()
	if err := p.StartHAProxy(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// waitHTTP waits until the agent's probe path answers 200.
func (p *pod) waitHTTP(tb testing.TB, path string) {
	tb.Helper()
	if err := p.WaitHTTP(context.Background(), path); err != nil {
		tb.Fatal(err)
	}
}

// shortTempDir is a temporary directory with a short path (a UNIX socket's is at most
// 107 bytes), removed at the end of the test.
func shortTempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := proxypod.ShortTempDir()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
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
