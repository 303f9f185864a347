//go:build linux

package crash

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/e2e"
	"github.com/dgd-rollout/operator/test/harness"
)

// TestKillAtEachWrite complements the random kills with deterministic ones. The
// operator talks to the API server through a proxy (writeProxy) that SIGKILLs it right
// after the API server applied a write and before the operator hears back: a crash
// with exactly that write done and the next one not started. One rollout kills after
// every write (each operator life makes one write), a second after every other write.
// After each kill the test checks ownership, records whether the live Deployments hold
// a one-sided pool (some worker services of a revision with replicas, another none),
// restarts the operator, and in the end requires convergence with no violation.
func TestKillAtEachWrite(t *testing.T) {
	e := getEnv(t)
	begin := time.Now()
	px := startWriteProxy(t, e)
	logPath := filepath.Join(e.dir, "killpoints-operator.log")
	var (
		mu    sync.Mutex
		op    *operator
		every atomic.Int64 // kill after every n-th write of the rollout; 0: never
		base  atomic.Int64 // write count when the rollout began
	)
	current := func() *operator { mu.Lock(); defer mu.Unlock(); return op }
	start := func() {
		o, err := e.startOperatorWith(px.kubeconfig, "dgd-operator", logPath, "--leader-elect=false")
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		op = o
		mu.Unlock()
	}
	px.set(func(n int, _ string) bool {
		k := every.Load()
		return k > 0 && (int64(n)-base.Load())%k == 0
	}, func() { current().kill() })
	start()
	t.Cleanup(func() {
		current().kill()
		t.Logf("runtime %s", time.Since(begin).Round(time.Millisecond))
	})
	s := newScenario(t, e, disagg("killpoints", "pd21", 2, 1, "vllm:v0"), hooks{
		describe: func() string { return "  operator log tail:\n" + indent(tailLog(logPath, 20)) }})

	var oneSidedKills []string
	total := 0
	for i, k := range []int64{1, 2} {
		img := fmt.Sprintf("vllm:v%d", i+1)
		n, _ := px.lastWrite()
		base.Store(int64(n))
		every.Store(k)
		s.update("image →"+img, func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, img) })
		kills := 0
		deadline := time.Now().Add(rolloutTimeout)
		for {
			o := current()
			done := false
			for o.alive() && !done {
				if v := s.w.Violations(); len(v) > 0 {
					t.Fatalf("invariant violated: %s\n%s", strings.Join(v, "; "), s.context(nil))
				}
				w, err := s.read()
				if err == nil {
					if p := s.ownershipProblems(w); len(p) > 0 {
						t.Fatalf("%s\n%s", strings.Join(p, "; "), s.context(w))
					}
					done = e2e.UpdateHash(w.d) == s.want && e2e.RolledOut(w.d, w.pods)
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s not rolled out within %s\n%s", img, rolloutTimeout, s.context(w))
				}
				time.Sleep(100 * time.Millisecond)
			}
			if done {
				break
			}
			if !o.killed.Load() {
				t.Fatalf("the operator exited by itself: %s\n%s", o.exitStatus(), tailLog(logPath, 30))
			}
			kills++
			n, desc := px.lastWrite()
			appendLog(logPath, "SIGKILL after write %d (%s)", n-int(base.Load()), desc)
			w, err := s.read()
			if err != nil {
				t.Fatal(err)
			}
			if p := s.ownershipProblems(w); len(p) > 0 {
				t.Fatalf("after a kill at %s: %s\n%s", desc, strings.Join(p, "; "), s.context(w))
			}
			if one := oneSided(w); one != "" {
				oneSidedKills = append(oneSidedKills, fmt.Sprintf("%s, killed after write %d (%s): %s", img, n-int(base.Load()), desc, one))
			}
			time.Sleep(200 * time.Millisecond)
			start()
		}
		every.Store(0)
		s.converge(fmt.Sprintf("%s (killed after %s, %d kills)", img, everyWrite(k), kills))
		total += kills
	}
	if v := s.w.Violations(); len(v) > 0 {
		t.Fatalf("invariant violations: %s", strings.Join(v, "; "))
	}
	t.Logf("%d deterministic kills survived; %d left a one-sided pool until the restart:\n  %s",
		total, len(oneSidedKills), strings.Join(oneSidedKills, "\n  "))
}

func everyWrite(k int64) string {
	if k == 1 {
		return "every write"
	}
	return fmt.Sprintf("every %d writes", k)
}
