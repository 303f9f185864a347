package harness

import (
	"context"
	"slices"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// UpdateHash is the worker hash of the DGD's update revision.
func (s Snapshot) UpdateHash() string {
	return s.DGD.Status.UpdateWorkerHash
}

// Hashes lists the distinct worker hashes that have workloads, in order of appearance.
func (s Snapshot) Hashes() []string {
	var out []string
	for _, w := range s.Workloads {
		if !slices.Contains(out, w.Hash) {
			out = append(out, w.Hash)
		}
	}
	return out
}

// Pool maps service -> replicas set in one revision's pool.
func (s Snapshot) Pool(hash string) map[string]int32 {
	out := map[string]int32{}
	for _, w := range s.Workloads {
		if w.Hash == hash {
			out[w.Service] += w.Spec
		}
	}
	return out
}

// PoolSize sums the replicas set in one revision's pool.
func (s Snapshot) PoolSize(hash string) (n int32) {
	for _, v := range s.Pool(hash) {
		n += v
	}
	return n
}

// Completed is true once the phase says Completed and every worker workload left is
// on the update revision.
func (s Snapshot) Completed() bool {
	ru := s.DGD.Status.RollingUpdate
	if ru == nil || ru.Phase != v1alpha1.RolloutCompleted {
		return false
	}
	for _, w := range s.Workloads {
		if w.Hash != s.UpdateHash() {
			return false
		}
	}
	return true
}

// CompletedAt returns a Drive predicate: Completed on revision number n.
func CompletedAt(n int64) func(Snapshot) bool {
	return func(s Snapshot) bool { return s.Completed() && s.DGD.Status.UpdateRevisionNumber == n }
}

// PhaseIs returns a Drive predicate for a rollout phase (and reason, when not empty).
func PhaseIs(phase v1alpha1.RolloutPhase, reason string) func(Snapshot) bool {
	return func(s Snapshot) bool {
		ru := s.DGD.Status.RollingUpdate
		return ru != nil && ru.Phase == phase && (reason == "" || ru.Reason == reason)
	}
}

// Update applies change to the live DGD, retrying on conflicts.
func (e *Env) Update(ctx context.Context, ns, name string, change func(*v1alpha1.DynamoGraphDeployment)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var d v1alpha1.DynamoGraphDeployment
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		change(&d)
		return e.Client.Update(ctx, &d)
	})
}

// Deploy creates a DGD and drives it (everything ready at once) until done.
func (e *Env) Deploy(ctx context.Context, obj *v1alpha1.DynamoGraphDeployment, done func(Snapshot) bool) (Snapshot, error) {
	if err := e.Client.Create(ctx, obj); err != nil {
		return Snapshot{}, err
	}
	steps, err := e.Drive(ctx, obj.Namespace, obj.Name, -1, 10, done)
	if err != nil {
		return Snapshot{}, err
	}
	return steps[len(steps)-1], nil
}

// Image returns a change that sets the image of every worker service.
func Image(img string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) { SetImage(d, img) }
}
