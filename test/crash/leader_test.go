//go:build linux

package crash

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/e2e"
	"github.com/dgd-rollout/operator/test/harness"
)

// leaseName and leaseNamespace are the operator's leader election Lease (cmd/manager's
// LeaderElectionID, and the namespace this test passes).
const (
	leaseName      = "dgd-rollout.nvidia.com"
	leaseNamespace = "default"
)

// Leader election log lines of client-go's LeaderElector and controller-runtime's
// controller start (which only a leader reaches).
const (
	logAcquired   = "successfully acquired lease"
	logCampaign   = "attempting to acquire leader lease"
	logWorkers    = "starting workers"
	defaultLease  = 15 * time.Second // controller-runtime's default LeaseDuration
	defaultRetry  = 2 * time.Second  // and RetryPeriod
	takeoverSlack = 2 * time.Second
)

// takeoverBound is the longest a follower of client-go's LeaderElector may take, after
// the leader's death, to acquire a lease of duration lease (client-go v0.36.2,
// tools/leaderelection/leaderelection.go): the follower tries every RetryPeriod
// stretched by up to JitterFactor (acquire: wait.JitterUntilWithContext, so 2 s to
// 4.4 s), and counts the lease's duration from when it itself saw the last renewal
// (observedTime, isLeaseValid), which can be one such interval after the renewal. So
// one interval to see the last renewal, the lease, and one interval to try again; the
// leader's last renewal is before its death. A bound of lease + RetryPeriod + 4 s was
// missed by 67 ms in a clean-clone CI run (21.07 s).
func takeoverBound(lease time.Duration) time.Duration {
	interval := time.Duration((1 + leaderelection.JitterFactor) * float64(defaultRetry))
	return interval + lease + interval + takeoverSlack
}

// TestLeaderElection runs two operator processes with leader election on. Exactly one
// acquires the Lease and acts (only it starts the controller, only it writes: the API
// server's managedFields name the writer, each process running under its own binary
// name); the other campaigns. SIGKILLing the leader mid-rollout hands the Lease to the
// other within the lease duration (plus a retry period), and the rollout completes
// with no violation; the restarted old leader stays a follower. Finally the new leader
// gets a SIGTERM (a graceful stop, as in a rolling upgrade of the operator) and the
// other takes over; the test logs whether the Lease was released on the way out.
func TestLeaderElection(t *testing.T) {
	e := getEnv(t)
	begin := time.Now()
	ctx := context.Background()
	if err := client.IgnoreNotFound(e.k8s.Delete(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: leaseName}})); err != nil {
		t.Fatal(err)
	}
	args := []string{"--leader-elect=true", "--leader-election-namespace=" + leaseNamespace}
	var ops []*operator
	t.Cleanup(func() {
		for _, op := range ops {
			op.kill()
		}
		if t.Failed() {
			for _, op := range ops {
				t.Logf("%s log tail:\n%s", op.name, indent(tailLog(op.logPath, 30)))
			}
		}
		t.Logf("runtime %s", time.Since(begin).Round(time.Millisecond))
	})
	for _, name := range []string{"manager-a", "manager-b"} {
		logPath := filepath.Join(e.dir, "leader-"+name+".log")
		appendLog(logPath, "start at %s", time.Since(begin).Round(time.Millisecond))
		op, err := e.startOperator(name, logPath, args...)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	leases := watchLease(t, e)

	// Exactly one acquires the Lease; the other campaigns.
	var leader, follower *operator
	poll(t, 30*time.Second, "a leader", func() bool {
		var acquired []*operator
		for _, op := range ops {
			if len(grepLog(op.logPath, logAcquired)) > 0 {
				acquired = append(acquired, op)
			}
		}
		if len(acquired) > 1 {
			t.Fatalf("both operators acquired the lease")
		}
		if len(acquired) == 1 {
			leader = acquired[0]
			follower = ops[0]
			if follower == leader {
				follower = ops[1]
			}
			return len(grepLog(follower.logPath, logCampaign)) > 0 && leases.holder() != ""
		}
		return false
	})
	holder := leases.holder()
	t.Logf("%s leads (lease holder %s, acquired after %s); %s campaigns", leader.name, holder,
		time.Since(begin).Round(time.Millisecond), follower.name)

	s := newScenario(t, e, disagg("leader", "pd42", 4, 2, "vllm:v1"), hooks{})
	s.update("image v1→v2", func(d *v1alpha1.DynamoGraphDeployment) { harness.SetImage(d, "vllm:v2") })
	s.until("v2 under way", rolloutTimeout, func(w *world) bool {
		ru := w.d.Status.RollingUpdate
		return w.d.Status.UpdateRevisionNumber == 2 && ru != nil && ru.Phase == v1alpha1.RolloutInProgress &&
			e2e.Pool(w.d, 2)["prefill"] >= 1
	})

	// Until now only the leader acted.
	if l := grepLog(follower.logPath, logAcquired, logWorkers); len(l) > 0 {
		t.Fatalf("%s acted while %s led:\n%s", follower.name, leader.name, strings.Join(l, "\n"))
	}
	writers := s.writers()
	if _, ok := writers[follower.name]; ok {
		t.Fatalf("%s wrote while %s led: writers %v", follower.name, leader.name, writers)
	}
	if _, ok := writers[leader.name]; !ok {
		t.Fatalf("no write by the leader %s: writers %v", leader.name, writers)
	}
	if hs := leases.holders(); len(hs) != 1 {
		t.Fatalf("the lease changed hands before any kill: %v", hs)
	}
	t.Logf("before the kill: writers %v, one lease holder", writers)

	// SIGKILL the leader mid-rollout: the follower takes over within the lease duration.
	last := leases.last()
	leader.kill()
	killedAt := time.Now()
	appendLog(leader.logPath, "SIGKILL at %s", time.Since(begin).Round(time.Millisecond))
	limit := takeoverBound(time.Duration(ptr.Deref(last.Spec.LeaseDurationSeconds, int32(defaultLease/time.Second))) * time.Second)
	poll(t, limit+10*time.Second, "a new lease holder", func() bool {
		return leases.holder() != holder && len(grepLog(follower.logPath, logAcquired)) > 0
	})
	took := time.Since(killedAt)
	now := leases.last()
	var gap time.Duration
	if now.Spec.AcquireTime != nil && last.Spec.RenewTime != nil {
		gap = now.Spec.AcquireTime.Sub(last.Spec.RenewTime.Time)
	}
	t.Logf("%s took over %s after the kill (acquired %s after the old holder's last renewal; lease %ds, transitions %d)",
		follower.name, took.Round(time.Millisecond), gap.Round(time.Millisecond),
		ptr.Deref(now.Spec.LeaseDurationSeconds, 0), ptr.Deref(now.Spec.LeaseTransitions, 0))
	if took > limit {
		t.Errorf("takeover took %s, more than client-go's longest (two jittered retry intervals, the lease, and %s) = %s", took, takeoverSlack, limit)
	}

	// The old leader comes back as a follower while the new leader finishes the rollout.
	appendLog(leader.logPath, "restart at %s", time.Since(begin).Round(time.Millisecond))
	restartedAt := time.Now()
	back, err := e.startOperator(leader.name, leader.logPath, args...)
	if err != nil {
		t.Fatal(err)
	}
	ops = append(ops, back)
	s.converge("v2 after the failover")
	if v := s.w.Violations(); len(v) > 0 {
		t.Fatalf("invariant violations: %s", strings.Join(v, "; "))
	}
	if d := time.Since(restartedAt); d < 3*time.Second {
		time.Sleep(3*time.Second - d)
	}
	if l := linesAfter(leader.logPath, "=== restart"); !containsAny(l, logCampaign) || containsAny(l, logAcquired, logWorkers) {
		t.Errorf("the restarted %s should campaign and not lead; its log since the restart:\n%s", leader.name, strings.Join(l, "\n"))
	}
	if hs := leases.holders(); len(hs) != 2 {
		t.Errorf("lease holders over the test: %v, want the first leader then the second", hs)
	}
	writers = s.writers()
	if _, ok := writers[follower.name]; !ok {
		t.Errorf("the new leader %s never wrote: writers %v", follower.name, writers)
	}
	if last, ok := writers[leader.name]; ok && last.After(killedAt.Add(time.Second)) {
		t.Errorf("%s wrote at %s, after it was killed at %s", leader.name, last, killedAt)
	}
	t.Logf("after the failover: writers (last write) %v", writers)

	// Graceful handover: SIGTERM the current leader; the restarted first process takes
	// over.
	holder = leases.holder()
	appendLog(follower.logPath, "SIGTERM at %s", time.Since(begin).Round(time.Millisecond))
	termAt := time.Now()
	_ = syscall.Kill(-follower.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-follower.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30s of SIGTERM", follower.name)
	}
	exited := time.Since(termAt)
	var l coordinationv1.Lease
	if err := e.k8s.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: leaseName}, &l); err != nil {
		t.Fatal(err)
	}
	released := ptr.Deref(l.Spec.HolderIdentity, "") == ""
	poll(t, limit+10*time.Second, "a new lease holder after SIGTERM", func() bool {
		return leases.holder() != holder && containsAny(linesAfter(leader.logPath, "=== restart"), logAcquired)
	})
	took = time.Since(termAt)
	t.Logf("SIGTERM: %s exited after %s (%s), lease released on exit: %v; %s took over %s after the SIGTERM",
		follower.name, exited.Round(time.Millisecond), follower.exitStatus(), released, leader.name, took.Round(time.Millisecond))
	if took > limit {
		t.Errorf("takeover after SIGTERM took %s, more than %s", took, limit)
	}
	if v := s.w.Violations(); len(v) > 0 {
		t.Fatalf("invariant violations: %s", strings.Join(v, "; "))
	}
}

// writers returns, per field manager, the latest managedFields time over the DGD and
// everything it owns (Deployments and ControllerRevisions). The operator processes run
// as different binary names, which the API server records as the manager.
func (s *scenario) writers() map[string]time.Time {
	s.t.Helper()
	ctx, in := context.Background(), client.InNamespace(s.ns)
	var objs []client.Object
	d, err := s.dgd()
	if err != nil {
		s.t.Fatal(err)
	}
	objs = append(objs, d)
	var deps appsv1.DeploymentList
	var revs appsv1.ControllerRevisionList
	if err := s.e.k8s.List(ctx, &deps, in); err != nil {
		s.t.Fatal(err)
	}
	if err := s.e.k8s.List(ctx, &revs, in); err != nil {
		s.t.Fatal(err)
	}
	for i := range deps.Items {
		objs = append(objs, &deps.Items[i])
	}
	for i := range revs.Items {
		objs = append(objs, &revs.Items[i])
	}
	out := map[string]time.Time{}
	for _, o := range objs {
		for _, f := range o.GetManagedFields() {
			if !strings.HasPrefix(f.Manager, "manager-") {
				continue // the test's own writes, kube-controller-manager's
			}
			if f.Time != nil && f.Time.After(out[f.Manager]) {
				out[f.Manager] = f.Time.Time
			} else if _, ok := out[f.Manager]; !ok {
				out[f.Manager] = time.Time{}
			}
		}
	}
	return out
}

// leaseWatch polls the Lease every 100 ms and records every holder it sees.
type leaseWatch struct {
	mu   sync.Mutex
	seen []string
	cur  *coordinationv1.Lease
}

func watchLease(t *testing.T, e *env) *leaseWatch {
	lw := &leaseWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			var l coordinationv1.Lease
			if err := e.k8s.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: leaseName}, &l); err == nil {
				lw.mu.Lock()
				h := ptr.Deref(l.Spec.HolderIdentity, "")
				if h != "" && (len(lw.seen) == 0 || lw.seen[len(lw.seen)-1] != h) {
					lw.seen = append(lw.seen, h)
				}
				lw.cur = &l
				lw.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return lw
}

func (lw *leaseWatch) holder() string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.cur == nil {
		return ""
	}
	return ptr.Deref(lw.cur.Spec.HolderIdentity, "")
}

func (lw *leaseWatch) holders() []string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return append([]string(nil), lw.seen...)
}

func (lw *leaseWatch) last() *coordinationv1.Lease {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.cur.DeepCopy()
}

// poll calls cond every 100 ms until it holds, failing after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// linesAfter returns the lines of path after the last line starting with marker.
func linesAfter(path, marker string) []string {
	all := grepLog(path, "") // every line
	for i := len(all) - 1; i >= 0; i-- {
		if strings.HasPrefix(all[i], marker) {
			return all[i+1:]
		}
	}
	return all
}

func containsAny(lines []string, substrs ...string) bool {
	for _, l := range lines {
		for _, s := range substrs {
			if strings.Contains(strings.ToLower(l), s) {
				return true
			}
		}
	}
	return false
}
