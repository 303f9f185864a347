package harness

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// LeaderWorkerSets lists a DGD's LeaderWorkerSets, sorted by name (none when the LWS
// CRD is not installed).
func (e *Env) LeaderWorkerSets(ctx context.Context, ns, dgd string) ([]lwsv1.LeaderWorkerSet, error) {
	var list lwsv1.LeaderWorkerSetList
	err := e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelGraph: dgd})
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// PlayLeaderWorkerSets acts as the LWS controller for a DGD's LeaderWorkerSets, in
// whole groups: replicas = spec, readyReplicas = min(spec, previous ready + grow)
// (grow < 0: all). A group counts as ready only whole, as LWS reports it. With
// services, only those services' LeaderWorkerSets are played.
func (e *Env) PlayLeaderWorkerSets(ctx context.Context, ns, dgd string, grow int32, services ...string) (bool, error) {
	ls, err := e.LeaderWorkerSets(ctx, ns, dgd)
	if err != nil {
		return false, err
	}
	changed := false
	for i := range ls {
		l := &ls[i]
		if len(services) > 0 && !slices.Contains(services, l.Labels[v1alpha1.LabelService]) {
			continue
		}
		spec := ptr.Deref(l.Spec.Replicas, 1)
		ready := spec
		if grow >= 0 {
			ready = min(spec, l.Status.ReadyReplicas+grow)
		}
		want := lwsv1.LeaderWorkerSetStatus{ObservedGeneration: l.Generation, Replicas: spec, ReadyReplicas: ready, UpdatedReplicas: spec}
		if equality.Semantic.DeepEqual(l.Status, want) {
			continue
		}
		l.Status = want
		if err := e.Client.Status().Update(ctx, l); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return true, nil
		} else if err != nil {
			return false, fmt.Errorf("playing LeaderWorkerSet %s: %w", l.Name, err)
		}
		changed = true
	}
	return changed, nil
}
