//go:build linux

package crash

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/freeport"
	"github.com/dgd-rollout/operator/test/e2e"
	"github.com/dgd-rollout/operator/test/harness"
	"github.com/dgd-rollout/operator/test/opproc"
)

// minKills is how many SIGKILLs a run must survive.
const minKills = 20

// TestCrashSafety runs the operator binary with leader election off and SIGKILLs it at
// random points (chaos: after spec changes, workload events, operator writes, uptime)
// while four DGDs roll: P=4/D=2 and P=8/D=4 image changes with maxSurge 1 and
// maxUnavailable 0, a retarget mid-rollout, a partition held at 50%, lowered to 25% and
// removed, a TP change, "rollout undo" to revision 1 and an undo mid-rollout, a
// Recreate rollout, and multinode gangs on real LeaderWorkerSets (two image changes, an
// undo mid-rollout). Every rollout must converge with the invariant watcher silent, no
// workload, ReplicaSet, StatefulSet or pod outside a recorded revision at any poll, exactly one
// ControllerRevision per worker template, and only the update revision's workloads
// left after each rollout. Then three restarts with nothing to do must write nothing.
func TestCrashSafety(t *testing.T) {
	e := getEnv(t)
	begin := time.Now()
	seed := time.Now().UnixNano()
	if v := os.Getenv("CRASH_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("CRASH_SEED=%q: %v", v, err)
		}
	}
	t.Logf("chaos seed %d (replay the kill schedule with CRASH_SEED=%d)", seed, seed)
	logPath := filepath.Join(e.dir, "crash-operator.log")
	c := newChaos(t, e, seed, logPath, "--leader-elect=false")
	c.run()
	t.Cleanup(func() {
		c.stop()
		t.Log(c.report())
		t.Logf("runtime %s", time.Since(begin).Round(time.Millisecond))
		if t.Failed() {
			t.Logf("operator log (CRASH_KEEP_LOGS=1 keeps it): %s", logPath)
		}
	})

	h := hooks{
		watching: func(s *scenario) {
			c.watch(func() int { return s.w.Snapshot().Events }, func() string { return killState(s) })
		},
		changed:  c.specChanged,
		describe: c.describe,
	}

	// A: P=4/D=2, two image changes.
	a := newScenario(t, e, disagg("crash-a", "pd42", 4, 2, "vllm:v1"), h)
	a.update("image v1→v2", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
	a.converge("v2")
	a.update("image v2→v3", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v3") })
	a.converge("v3")
	a.update("decode to tensor parallelism 2 (args)", func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Services["decode"].ExtraPodSpec.MainContainer.Args = []string{"--tensor-parallel-size", "2"}
	})
	a.converge("TP 2")

	// B: P=8/D=4, retarget mid-rollout, then a partition held at 50%, lowered to 25%,
	// removed.
	b := newScenario(t, e, disagg("crash-b", "pd84", 8, 4, "vllm:a"), h)
	b.update("image a→b", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:b") })
	w := b.until("b under way", rolloutTimeout, func(w *world) bool {
		return w.d.Status.UpdateRevisionNumber == 2 && e2e.Pool(w.d, 2)["prefill"] >= 2
	})
	if n := e2e.Pool(w.d, 2)["prefill"]; n >= 8 {
		t.Fatalf("b already rolled out (%d prefill on revision 2): no retarget mid-rollout", n)
	}
	b.update("retarget b→c mid-rollout", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:c") })
	b.converge("c (retargeted)")
	b.update("image c→d with partition 50%", func(d *v1alpha1.DynamoGraphDeployment) {
		harness.SetImage(d, "vllm:d")
		d.Spec.Rollout.Partition = ptr.To(intstr.FromString("50%"))
	})
	b.holdPartition("held at partition 50%", map[string]int{"prefill": 4, "decode": 2})
	b.update("partition 50%→25%", func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Rollout.Partition = ptr.To(intstr.FromString("25%"))
	})
	b.holdPartition("held at partition 25%", map[string]int{"prefill": 2, "decode": 1})
	b.update("partition removed", func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Rollout.Partition = nil })
	b.converge("d promoted")
	b.update("image d→e", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:e") })
	b.converge("e")

	// A again: "rollout undo" to revision 1 (its revision renumbered, not duplicated),
	// then a new image and an undo in the middle of that rollout, back to the template
	// whose workloads are still draining.
	h.watching(a)
	a.undo("undo to revision 1", 1)
	a.converge("revision 1's template (undo)")
	back := a.want
	a.update("image →v6", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v6") })
	w = a.until("v6 under way", rolloutTimeout, func(w *world) bool {
		next := w.d.Status.UpdateRevisionNumber
		return e2e.UpdateHash(w.d) == a.want && e2e.Pool(w.d, next)["prefill"] >= 1
	})
	if n := e2e.Pool(w.d, w.d.Status.UpdateRevisionNumber)["prefill"]; n >= 4 {
		t.Fatalf("v6 already rolled out: no undo mid-rollout")
	}
	a.undo("undo v6 mid-rollout", w.d.Status.UpdateRevisionNumber-1)
	if a.want != back {
		t.Fatalf("undo restored template %s, want %s", a.want, back)
	}
	a.converge("undo mid-rollout")

	// C: Recreate: the old revision's pods are gone before the new revision's start,
	// whatever the kills.
	r := newScenario(t, e, harness.NewDGD("crash-c", "recreate").Disagg(2, 1, "vllm:v1").
		Strategy(v1alpha1.RecreateStrategy).Obj(), h)
	old := r.want
	r.update("image v1→v2 (Recreate)", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
	r.until("v2 recreated without overlap", rolloutTimeout, func(w *world) bool {
		var onOld, onNew int
		for _, p := range w.pods {
			switch p.Labels[v1alpha1.LabelWorkerHash] {
			case old:
				onOld++
			case r.want:
				onNew++
			}
		}
		if onOld > 0 && onNew > 0 {
			t.Fatalf("Recreate: %d old and %d new worker pods coexist\n%s", onOld, onNew, r.context(w))
		}
		return e2e.UpdateHash(w.d) == r.want && e2e.RolledOut(w.d, w.pods)
	})
	r.converge("v2 (Recreate)")

	// D: multinode gangs on real LeaderWorkerSets and StatefulSets (prefill 4 gangs x 2
	// pods, decode 2 gangs x 4 pods): two image changes and an undo mid-rollout.
	g := newScenario(t, e, harness.NewDGD("crash-d", "gangs").Disagg(4, 2, "vllm:v1").
		Multinode("prefill", 2).Multinode("decode", 4).Rollout("1", "0").Obj(), h)
	g.update("image v1→v2 (gangs)", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
	g.converge("v2 (gangs)")
	g.update("image v2→v3 (gangs)", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v3") })
	w = g.until("v3 under way (gangs)", rolloutTimeout, func(w *world) bool {
		return e2e.UpdateHash(w.d) == g.want && e2e.Pool(w.d, w.d.Status.UpdateRevisionNumber)["prefill"] >= 1
	})
	if n := e2e.Pool(w.d, w.d.Status.UpdateRevisionNumber)["prefill"]; n >= 4 {
		t.Fatalf("v3 already rolled out: no undo mid-rollout")
	}
	g.undo("undo v3 mid-rollout (gangs)", w.d.Status.UpdateRevisionNumber-1)
	g.converge("v2 again (gangs)")

	// Too few kills (a calm seed): more image changes until the minimum is met.
	for i := 1; c.killCount() < minKills && i <= 8; i++ {
		img := fmt.Sprintf("vllm:extra%d", i)
		a.update("image →"+img, func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, img) })
		a.converge(img)
	}

	c.stop()
	steadyRestarts(t, e, logPath, a, b, r, g)
	for _, s := range []*scenario{a, b, r, g} {
		if v := s.w.Violations(); len(v) > 0 {
			t.Errorf("%s/%s: invariant violations: %s", s.ns, s.name, strings.Join(v, "; "))
		}
	}
	if x := c.unexpectedExits(); len(x) > 0 {
		t.Errorf("the operator exited by itself %d times (a crash, not a kill):\n%s", len(x), strings.Join(x, "\n"))
	}
	if p := grepLog(logPath, "panic", "fatal error", "data race"); len(p) > 0 {
		t.Errorf("operator log shows %d panics:\n%s", len(p), strings.Join(p, "\n"))
	}
	if n := c.killCount(); n < minKills {
		t.Errorf("only %d kills during the run, want at least %d", n, minKills)
	}
	errs := grepLog(logPath, `"level":"error"`)
	t.Logf("operator log: %d error lines over all runs", len(errs))
	for i, l := range errs {
		if i == 5 {
			t.Logf("  ...")
			break
		}
		t.Logf("  %s", l)
	}
}

// steadyRestarts starts and SIGKILLs the operator three times with every rollout
// complete: a restart with nothing to do must write nothing. Each operator talks to the
// API server through a proxy that records its writes (opproc.ServeProxy), and is
// killed once its metrics show a finished pass of every DGD and nothing queued or
// running; every write it sent in its life fails the test, and the resourceVersions and
// generations of every object are compared too.
func steadyRestarts(t *testing.T, e *env, logPath string, scenarios ...*scenario) {
	t.Helper()
	before := versions(t, scenarios)
	statuses := map[string]v1alpha1.DynamoGraphDeploymentStatus{}
	for _, s := range scenarios {
		if w, err := s.read(); err == nil {
			statuses[s.ns+"/"+s.name] = w.d.Status
		}
	}
	dir := filepath.Join(e.dir, "steady")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	proxy, err := opproc.StartProxy(e.cl.Config, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	kubeconfig := proxy.Kubeconfig
	for i := 1; i <= 3; i++ {
		metrics := freeAddr(t)
		appendLog(logPath, "steady-state start #%d", i)
		op, err := e.startOperatorWith(kubeconfig, "dgd-operator", logPath, "--leader-elect=false", "--metrics-bind-address="+metrics)
		if err != nil {
			t.Fatal(err)
		}
		poll(t, 30*time.Second, "a finished pass of every DGD and an idle work queue", func() bool {
			return passedAll(metrics, len(scenarios))
		})
		op.kill()
		appendLog(logPath, "steady-state SIGKILL #%d", i)
	}
	after := versions(t, scenarios)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("a restart with nothing to do wrote %s: %s → %s", k, v, after[k])
		}
	}
	var writes []string
	for _, r := range proxy.Requests(time.Time{}) {
		if r.Write() {
			writes = append(writes, fmt.Sprintf("%s %s %s/%s", r.Verb, r.Resource, r.Namespace, r.Name))
		}
	}
	if len(writes) > 0 {
		t.Errorf("restarts with nothing to do sent %d writes: %v", len(writes), writes)
	}
	for _, s := range scenarios {
		if w, err := s.read(); err == nil {
			if d := cmp.Diff(statuses[s.ns+"/"+s.name], w.d.Status); d != "" {
				t.Logf("status of %s/%s changed over the steady-state restarts (-before +after):\n%s", s.ns, s.name, d)
			}
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("a restart with nothing to do created %s", k)
		}
	}
	t.Logf("3 restarts in steady state: %d objects unchanged, %d writes sent", len(before), len(writes))
}

// freeAddr is a free 127.0.0.1 port's address, for the operator process to bind
// (freeport.Pick).
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// passedAll reports whether the operator serving its metrics on addr has finished at
// least n passes of the DGD controller (one per DGD after a start) and has nothing
// queued or running.
func passedAll(addr string, n int) bool {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var passes, depth, active float64 = 0, -1, -1
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"dynamographdeployment"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "controller_runtime_reconcile_total{"):
			passes += v
		case strings.HasPrefix(line, "workqueue_depth{"):
			depth = v
		case strings.HasPrefix(line, "controller_runtime_active_workers{"):
			active = v
		}
	}
	return passes >= float64(n) && depth == 0 && active == 0
}

// versions maps every DGD (resourceVersion: status writes count), worker or stable
// Deployment and LeaderWorkerSet (generation: spec writes) and ControllerRevision
// (resourceVersion).
func versions(t *testing.T, scenarios []*scenario) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range scenarios {
		w, err := s.read()
		if err != nil {
			t.Fatal(err)
		}
		out["DGD "+s.ns+"/"+s.name] = "rv " + w.d.ResourceVersion
		for _, d := range w.deps {
			out["Deployment "+s.ns+"/"+d.Name] = fmt.Sprintf("generation %d", d.Generation)
		}
		for _, l := range w.lwss {
			out["LeaderWorkerSet "+s.ns+"/"+l.Name] = fmt.Sprintf("generation %d", l.Generation)
		}
		for _, r := range w.revs {
			out["ControllerRevision "+s.ns+"/"+r.Name] = "rv " + r.ResourceVersion
		}
	}
	return out
}

// killState is a one-line state of the DGD at a kill.
func killState(s *scenario) string {
	d, err := s.dgd()
	if err != nil {
		return s.name + ": " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s gen %d/%d", s.name, d.Status.ObservedGeneration, d.Generation)
	if ru := d.Status.RollingUpdate; ru != nil {
		fmt.Fprintf(&b, " %s", ru.Phase)
		if ru.Reason != "" {
			fmt.Fprintf(&b, "/%s", ru.Reason)
		}
	}
	fmt.Fprintf(&b, " rev %d", d.Status.UpdateRevisionNumber)
	for _, name := range d.WorkerServiceNames() {
		fmt.Fprintf(&b, " %s", name)
		for _, w := range d.Status.Services[name].Workloads {
			fmt.Fprintf(&b, " r%d=%d/%d", w.Revision, w.ReadyReplicas, w.Replicas)
		}
	}
	return b.String()
}
