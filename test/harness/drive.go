package harness

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/dgd-rollout/operator/test/invariants"
)

// SettleTimeout bounds how long Drive waits for the operator to act on a change.
var SettleTimeout = 30 * time.Second

// PollInterval is how often the harness reads the API server while it waits for the
// operator (WaitSettled, movesBySelf), and the envtest suites' Eventually polling
// interval (SetDefaultEventuallyPollingInterval). Each read is a GET and a LIST per
// workload kind. At Gomega's default of 10 ms and WaitSettled's former 20 ms, the
// deployment suite run alone took 134 CPU seconds (its API server and etcd included) in
// 173 s; at 100 ms, 82-90 CPU seconds in 176-187 s (two runs). In make test the suites
// run beside each other on 2 cores, where the API servers were half the CPU of the tests
// (docs/testing.md): a CPU second saved there is worth more than the tenth of a second a
// wait may now take longer. The fake kubelet's registration wait (grove_pods.go) still
// polls every 20 ms.
const PollInterval = 100 * time.Millisecond

// WaitSettled polls until the operator has acted on everything it can see (see
// Snapshot.Settled) and returns that state.
func (e *Env) WaitSettled(ctx context.Context, ns, name string) (Snapshot, error) {
	deadline := time.Now().Add(SettleTimeout)
	for {
		s, err := e.Take(ctx, ns, name)
		if err == nil && s.Settled() {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("%s/%s did not settle within %s (last error %v): workloads %+v, status %+v", ns, name, SettleTimeout, err, s.records, s.DGD.Status)
		}
		time.Sleep(PollInterval)
	}
}

// Drive plays the Deployment controller step by step: wait until the operator settles,
// check every invariant on that state, stop when done says so, else make up to grow
// more replicas of every Deployment ready (grow < 0: all) and repeat. It fails when a
// step changes nothing yet done is false (a hold the caller did not expect), and returns
// every settled state.
func (e *Env) Drive(ctx context.Context, ns, name string, grow int32, maxSteps int, done func(Snapshot) bool) ([]Snapshot, error) {
	var steps []Snapshot
	var floorOK map[string]bool
	for i := 0; i < maxSteps; i++ {
		s, err := e.WaitSettled(ctx, ns, name)
		if err != nil {
			return steps, err
		}
		steps = append(steps, s)
		services := invariants.ServicesOf(&s.DGD)
		if v := invariants.Check(services, s.Workloads, floorOK); len(v) > 0 {
			return steps, fmt.Errorf("step %d: %s; replicas %v", i, strings.Join(v, "; "), s.Replicas())
		}
		floorOK = invariants.FloorHolds(services, s.Workloads)
		if done(s) {
			return steps, nil
		}
		changed, err := e.Play(ctx, ns, name, grow)
		if err != nil {
			return steps, err
		}
		if !changed && !e.movesBySelf(ctx, ns, name, s, 5*time.Second) {
			return steps, fmt.Errorf("step %d: nothing left to make ready but not done: phase %v, replicas %v", i, s.DGD.Status.RollingUpdate, s.Replicas())
		}
	}
	return steps, fmt.Errorf("not done after %d steps", maxSteps)
}

// movesBySelf reports whether the DGD or its workloads change within d with nothing
// made ready: a pass that failed (a conflict, an injected fault) is retried by the
// controller after a backoff.
func (e *Env) movesBySelf(ctx context.Context, ns, name string, s Snapshot, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		time.Sleep(PollInterval)
		now, err := e.Take(ctx, ns, name)
		if err == nil && (now.DGD.ResourceVersion != s.DGD.ResourceVersion || !maps.Equal(now.Replicas(), s.Replicas())) {
			return true
		}
	}
	return false
}

// Play plays every workload controller of a DGD once (Deployments, LeaderWorkerSets and
// Grove).
func (e *Env) Play(ctx context.Context, ns, name string, grow int32) (bool, error) {
	d, err := e.PlayDeployments(ctx, ns, name, grow)
	if err != nil {
		return false, err
	}
	l, err := e.PlayLeaderWorkerSets(ctx, ns, name, grow)
	if err != nil {
		return false, err
	}
	g, err := e.PlayGrove(ctx, ns, name, grow)
	if err != nil {
		return false, err
	}
	p, err := e.PlayProxies(ctx, ns, name)
	return d || l || g || p, err
}
