package e2e

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/cluster"
	"github.com/dgd-rollout/operator/test/invariants"
)

// checkPods checks availability and isolation on the DGD's pods, and under Recreate
// that no two worker revisions have pods at once (terminating ones included: the old
// revision's pods are gone before the new revision starts).
func (w *Watcher) checkPods() {
	d, ok := w.get()
	if !ok {
		return
	}
	services := invariants.ServicesOf(d)
	recreate := d.RolloutOrDefault().Strategy == v1alpha1.RecreateStrategy
	var pods corev1.PodList
	if err := w.c.List(context.Background(), &pods, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelGraph: w.dgd}); err != nil {
		return
	}
	exist := map[string]int{}
	hashOfNS := map[string]string{}
	revisions := map[string]int{}          // worker hash -> pods
	gangs := map[string]map[string]int32{} // service -> gang -> ready pods
	for i := range pods.Items {
		p := &pods.Items[i]
		hash := p.Labels[v1alpha1.LabelWorkerHash]
		if hash == "" || p.Labels[v1alpha1.LabelComponentType] == v1alpha1.ComponentTypeFrontend {
			continue // a stable service's pod, or a cohort's frontend (test/observe judges those)
		}
		svc := p.Labels[v1alpha1.LabelService]
		exist[svc]++
		revisions[hash]++
		if gangs[svc] == nil {
			gangs[svc] = map[string]int32{}
		}
		gang := hash + "/" + p.Name // a single-node replica is its own gang
		if key, ok := p.Labels[lwsGroupKey]; ok {
			gang = hash + "/" + key
		}
		if p.DeletionTimestamp.IsZero() && cluster.PodReady(p) {
			gangs[svc][gang]++
		}
		w.checkIsolation(p, hash, hashOfNS)
	}
	if recreate && len(revisions) > 1 {
		w.fail(fmt.Sprintf("Recreate: worker pods of %d revisions exist at once: %v", len(revisions), revisions))
	}
	ready := map[string]int32{}
	for svc, byGang := range gangs {
		size := d.Spec.Services[svc].NodeCount()
		for _, n := range byGang {
			if n >= size {
				ready[svc]++
			}
		}
	}
	for _, s := range services {
		exist := exist[s.Name]
		if exist > w.Stats.PeakPods[s.Name] {
			w.Stats.PeakPods[s.Name] = exist
		}
		floor := s.Replicas - s.Unavail
		if !w.floor[s.Name] {
			w.floor[s.Name] = ready[s.Name] >= floor
			if w.floor[s.Name] {
				w.Stats.MinReady[s.Name] = ready[s.Name]
			}
			continue
		}
		w.Stats.MinReady[s.Name] = min(w.Stats.MinReady[s.Name], ready[s.Name])
		if ready[s.Name] < floor && !recreate {
			w.fail(fmt.Sprintf("availability: %s has %d ready pods, fewer than %d-%d", s.Name, ready[s.Name], s.Replicas, s.Unavail))
		}
	}
}

// lwsGroupKey labels every pod of one LeaderWorkerSet group.
const lwsGroupKey = "leaderworkerset.sigs.k8s.io/group-key"

// checkIsolation records the pod's effective Dynamo namespace and fails when two
// revisions share one, or when the suffix is not the pod's own revision hash.
func (w *Watcher) checkIsolation(p *corev1.Pod, hash string, hashOfNS map[string]string) {
	env := map[string]string{}
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
	}
	suffix := env[v1alpha1.EnvDynNamespaceWorkerSuffix]
	if suffix != hash {
		w.fail(fmt.Sprintf("isolation: pod %s of revision %s has %s=%q", p.Name, hash, v1alpha1.EnvDynNamespaceWorkerSuffix, suffix))
	}
	ns := env[v1alpha1.EnvDynNamespace] + "-" + suffix
	if other, ok := hashOfNS[ns]; ok && other != hash {
		w.fail(fmt.Sprintf("isolation: revisions %s and %s share Dynamo namespace %s", other, hash, ns))
	}
	hashOfNS[ns] = hash
}
