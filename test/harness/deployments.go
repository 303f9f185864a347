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

	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/revisions"
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
		if err := e.Client.Status().Update(ctx, d); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return true, nil // the operator changed or deleted it meanwhile: the next step sees that
		} else if err != nil {
			return false, fmt.Errorf("playing Deployment %s: %w", d.Name, err)
		}
		changed = true
	}
	return changed, nil
}

// LagDeployments plays a Deployment controller whose status lags one write behind
// and overstates readiness: every Deployment of the DGD whose status has not caught up
// with its spec (observedGeneration < generation) gets a status that still carries the
// old observedGeneration but reports every replica of the new spec available. It
// returns the Deployments whose stored status it changed (a conflict or an identical
// status changes nothing, and no watch hears of it). PlayDeployments then writes the truth.
func (e *Env) LagDeployments(ctx context.Context, ns, dgd string) ([]string, error) {
	ds, err := e.Deployments(ctx, ns, dgd)
	if err != nil {
		return nil, err
	}
	var wrote []string
	for i := range ds {
		d := &ds[i]
		if d.Status.ObservedGeneration >= d.Generation {
			continue
		}
		spec := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Status.ObservedGeneration, Replicas: spec, ReadyReplicas: spec,
			AvailableReplicas: spec, UpdatedReplicas: spec}
		rv := d.ResourceVersion
		err := e.Client.Status().Update(ctx, d)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue // someone else wrote it first: nothing of ours landed
		}
		if err != nil {
			return nil, fmt.Errorf("lagging Deployment %s: %w", d.Name, err)
		}
		// A status equal to the stored one is a no-op for the API server: no new
		// resourceVersion, no watch event, so no reconcile to wait for.
		if d.ResourceVersion != rv {
			wrote = append(wrote, d.Name)
		}
	}
	return wrote, nil
}

// Snapshot is a DGD, its Deployments and LeaderWorkerSets, and its worker workloads as
// invariants.Workloads.
type Snapshot struct {
	DGD       v1alpha1.DynamoGraphDeployment
	Workloads []invariants.Workload
	Stable    []appsv1.Deployment
	All       []appsv1.Deployment
	LWS       []lwsv1.LeaderWorkerSet
	PCS       []grovev1.PodCliqueSet
	// Proxies are the DGD's traffic proxy Deployments (cohorts).
	Proxies []appsv1.Deployment
	records []record
}

// record is one workload of either kind, as Settled compares it with the status.
type record struct {
	name, hash          string
	spec, ready, actual int32
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
	if s.LWS, err = e.LeaderWorkerSets(ctx, ns, name); err != nil {
		return s, err
	}
	for _, d := range ds {
		if d.Labels[v1alpha1.LabelTrafficProxy] != "" {
			s.Proxies = append(s.Proxies, d)
			continue // the traffic proxy: none of a service's workloads
		}
		s.add(d.Labels, d.Name, ptr.Deref(d.Spec.Replicas, 1), d.Status.AvailableReplicas, d.Status.Replicas)
		if d.Labels[v1alpha1.LabelWorkerHash] == "" {
			s.Stable = append(s.Stable, d)
		}
	}
	for _, l := range s.LWS {
		s.add(l.Labels, l.Name, ptr.Deref(l.Spec.Replicas, 1), l.Status.ReadyReplicas, l.Status.Replicas)
	}
	if s.PCS, err = e.PodCliqueSets(ctx, ns, name); err != nil {
		return s, err
	}
	if len(s.PCS) > 0 {
		w, err := e.readGrove(ctx, ns)
		if err != nil {
			return s, err
		}
		for _, pcs := range s.PCS {
			if pcs.DeletionTimestamp.IsZero() {
				s.addGrove(w, &pcs)
			}
		}
	}
	return s, nil
}

// addGrove records the workloads of one PodCliqueSet: for every service (named by its
// clique template's labels: Grove gives PCSGs none of them), its standalone PodClique
// or its PCSG, or the template's count with nothing ready while Grove has not made it.
func (s *Snapshot) addGrove(w *groveWorld, pcs *grovev1.PodCliqueSet) {
	group := map[string]string{}
	for _, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		for _, c := range g.CliqueNames {
			group[c] = g.Name
		}
	}
	done := map[string]bool{}
	for _, t := range pcs.Spec.Template.Cliques {
		labels := map[string]string{v1alpha1.LabelService: t.Labels[v1alpha1.LabelService], v1alpha1.LabelWorkerHash: t.Labels[v1alpha1.LabelWorkerHash]}
		name, replicas := pcs.Name+"-0-"+t.Name, t.Spec.Replicas
		if g, ok := group[t.Name]; ok {
			name = pcs.Name + "-0-" + g
			for _, c := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
				if c.Name == g {
					replicas = ptr.Deref(c.Replicas, 1)
				}
			}
		}
		if done[name] {
			continue
		}
		done[name] = true
		var spec, ready, actual int32 = replicas, 0, 0
		for _, c := range w.pclqs {
			if c.Name == name && w.live(&c) {
				spec, ready, actual = c.Spec.Replicas, c.Status.ReadyReplicas, c.Status.Replicas
			}
		}
		for _, g := range w.pcsgs {
			if g.Name == name && w.live(&g) {
				spec, ready, actual = g.Spec.Replicas, g.Status.AvailableReplicas, g.Status.Replicas
			}
		}
		s.add(labels, name, spec, ready, actual)
	}
}

func (s *Snapshot) add(labels map[string]string, name string, spec, ready, actual int32) {
	hash := labels[v1alpha1.LabelWorkerHash]
	s.records = append(s.records, record{name: name, hash: hash, spec: spec, ready: ready, actual: actual})
	if hash != "" {
		s.Workloads = append(s.Workloads, invariants.Workload{Service: labels[v1alpha1.LabelService], Hash: hash, Spec: spec, Ready: ready})
	}
}

// Settled reports whether the operator has acted on everything it can see: its last
// status reports exactly these Deployments, replica and ready counts. The status is the
// result of the pass that wrote it, so when it matches the Deployments and their ready
// counts, no pass has anything left to act on until something else changes.
func (s Snapshot) Settled() bool {
	if s.DGD.Status.ObservedGeneration != s.DGD.Generation || s.DGD.Status.UpdateRevision == "" {
		return false
	}
	// The status must come from a pass that synced this generation's worker template.
	if s.UpdateHash() != revisions.Hash(revisions.NewWorkerTemplate(&s.DGD), s.DGD.Status.CollisionCount) {
		return false
	}
	seen := map[string]v1alpha1.WorkloadStatus{}
	for _, st := range s.DGD.Status.Services {
		for _, w := range st.Workloads {
			seen[w.Name] = w
		}
	}
	if len(seen) != len(s.records) {
		return false
	}
	for _, r := range s.records {
		w, ok := seen[r.name]
		ready := r.ready
		if r.hash != "" {
			ready = min(ready, r.spec) // the status counts no replica being removed
		}
		if !ok || w.Replicas != r.spec || w.ReadyReplicas != ready {
			return false
		}
	}
	return len(s.DGD.Status.Services) == len(s.DGD.ServiceNames()) && !s.drainedPoolLeft()
}

// drainedPoolLeft reports an old revision whose Deployments are all at zero and report
// no replicas: the operator is about to delete them (the status cannot show that).
func (s Snapshot) drainedPoolLeft() bool {
	busy := map[string]bool{}
	for _, r := range s.records {
		if r.hash != "" {
			busy[r.hash] = busy[r.hash] || r.spec > 0 || r.actual > 0
		}
	}
	update := s.DGD.Status.UpdateWorkerHash
	for h, b := range busy {
		if h != update && !b {
			return true
		}
	}
	return false
}

// Replicas maps "service@hash" to the replicas set on each worker Deployment.
func (s Snapshot) Replicas() map[string]int32 {
	out := map[string]int32{}
	for _, w := range s.Workloads {
		out[w.Service+"@"+w.Hash] = w.Spec
	}
	return out
}
