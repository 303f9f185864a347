package harness

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/invariants"
)

// Deployments lists a DGD's Deployments, sorted by name.
func (e *Env) Deployments(ctx context.Context, ns, dgd string) ([]appsv1.Deployment, error) {
	var list appsv1.DeploymentList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelGraph: dgd}); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// PlayDeployments acts as the Deployment controller and kubelet for a DGD's
// Deployments: each status gets observedGeneration = generation, replicas = spec, and
// available/ready/updated = min(spec, previous available + grow). grow < 0 makes every
// replica ready at once. A scaled-down Deployment keeps min(spec, available). It returns
// whether any status changed.
func (e *Env) PlayDeployments(ctx context.Context, ns, dgd string, grow int32) (bool, error) {
	ds, err := e.Deployments(ctx, ns, dgd)
	if err != nil {
		return false, err
	}
	changed := false
	for i := range ds {
		d := &ds[i]
		spec := ptr.Deref(d.Spec.Replicas, 1)
		avail := spec
		if grow >= 0 {
			avail = min(spec, d.Status.AvailableReplicas+grow)
		}
		want := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: spec, ReadyReplicas: avail,
			AvailableReplicas: avail, UpdatedReplicas: spec, UnavailableReplicas: spec - avail}
		if equality.Semantic.DeepEqual(d.Status, want) {
			continue
		}
		d.Status = want
		if err := e.Client.Status().Update(ctx, d); apierrors.IsConflict(err) {
			return true, nil // the operator wrote it meanwhile: the next step sees the new spec
		} else if err != nil {
			return false, fmt.Errorf("playing Deployment %s: %w", d.Name, err)
		}
		changed = true
	}
	return changed, nil
}

// Snapshot is a DGD and its worker Deployments as invariants.Workloads.
type Snapshot struct {
	DGD       v1alpha1.DynamoGraphDeployment
	Workloads []invariants.Workload
	Stable    []appsv1.Deployment
	All       []appsv1.Deployment
}

// Take reads the DGD and its Deployments.
func (e *Env) Take(ctx context.Context, ns, name string) (Snapshot, error) {
	var s Snapshot
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s.DGD); err != nil {
		return s, err
	}
	ds, err := e.Deployments(ctx, ns, name)
	if err != nil {
		return s, err
	}
	s.All = ds
	for _, d := range ds {
		hash := d.Labels[v1alpha1.LabelWorkerHash]
		if hash == "" {
			s.Stable = append(s.Stable, d)
			continue
		}
		s.Workloads = append(s.Workloads, invariants.Workload{Service: d.Labels[v1alpha1.LabelService], Hash: hash,
			Spec: ptr.Deref(d.Spec.Replicas, 1), Ready: d.Status.AvailableReplicas})
	}
	return s, nil
}

// Settled reports whether the operator has acted on everything it can see: its last
// status was computed from exactly these Deployments, replica and ready counts. A pass
// that wrote anything changes a Deployment after computing its status, so a settled DGD
// has no write pending until something else changes.
func (s Snapshot) Settled() bool {
	if s.DGD.Status.ObservedGeneration != s.DGD.Generation || s.DGD.Status.UpdateRevision == "" {
		return false
	}
	seen := map[string]v1alpha1.WorkloadStatus{}
	for _, st := range s.DGD.Status.Services {
		for _, w := range st.Workloads {
			seen[w.Name] = w
		}
	}
	if len(seen) != len(s.All) {
		return false
	}
	for _, d := range s.All {
		w, ok := seen[d.Name]
		if !ok || w.Replicas != ptr.Deref(d.Spec.Replicas, 1) || w.ReadyReplicas != d.Status.AvailableReplicas {
			return false
		}
	}
	return len(s.DGD.Status.Services) == len(s.DGD.ServiceNames())
}

// Replicas maps "service@hash" to the replicas set on each worker Deployment.
func (s Snapshot) Replicas() map[string]int32 {
	out := map[string]int32{}
	for _, w := range s.Workloads {
		out[w.Service+"@"+w.Hash] = w.Spec
	}
	return out
}
