package harness

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
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

// lwsState is what the fake LWS remembers between plays: which groups (leader ordinals)
// of each LeaderWorkerSet are ready, and which failed (FailLeaderWorkerSetGroup).
type lwsState struct {
	mu     sync.Mutex
	groups map[types.UID][]bool
	failed map[types.UID]map[int]bool
}

// groupsOf returns the groups of l, first seen with its reported ready count on the
// lowest ordinals.
func (s *lwsState) groupsOf(l *lwsv1.LeaderWorkerSet) []bool {
	if s.groups == nil {
		s.groups = map[types.UID][]bool{}
	}
	g, ok := s.groups[l.UID]
	if !ok {
		g = make([]bool, l.Status.Replicas)
		for i := range g {
			g[i] = int32(i) < l.Status.ReadyReplicas
		}
	}
	return g
}

// PlayLeaderWorkerSets acts as the LWS controller for a DGD's LeaderWorkerSets, in
// whole groups (a group is ready only whole, as LWS reports it, updateConditions in
// sigs.k8s.io/lws pkg/controllers/leaderworkerset_controller.go). A group is the pod of
// one ordinal of the LWS's leader StatefulSet (ParallelPodManagement,
// constructLeaderStatefulSetApplyConfiguration there), so a scale-down removes the
// highest ordinals whatever their readiness, as the StatefulSet controller does
// (kubernetes pkg/controller/statefulset/stateful_set_control.go, updateStatefulSet:
// every pod with an ordinal >= replicas is condemned, sorted by descendingOrdinal and
// deleted by processCondemned, ready or not), and new groups start unready. Then up to
// grow more groups become ready (grow < 0: all), lowest ordinal first; replicas =
// spec. With services, only those services' LeaderWorkerSets are played.
func (e *Env) PlayLeaderWorkerSets(ctx context.Context, ns, dgd string, grow int32, services ...string) (bool, error) {
	ls, err := e.LeaderWorkerSets(ctx, ns, dgd)
	if err != nil {
		return false, err
	}
	e.lws.mu.Lock()
	defer e.lws.mu.Unlock()
	changed := false
	for i := range ls {
		l := &ls[i]
		if len(services) > 0 && !slices.Contains(services, l.Labels[v1alpha1.LabelService]) {
			continue
		}
		spec := ptr.Deref(l.Spec.Replicas, 1)
		groups := e.lws.groupsOf(l)
		groups = groups[:min(int32(len(groups)), spec)]
		for j := range e.lws.failed[l.UID] {
			if int32(j) >= spec {
				delete(e.lws.failed[l.UID], j) // its leader pod is gone; a group made again is new
			}
		}
		for int32(len(groups)) < spec {
			groups = append(groups, false)
		}
		budget := grow // per LeaderWorkerSet
		for j := range groups {
			if !groups[j] && budget != 0 && !e.lws.failed[l.UID][j] {
				groups[j], budget = true, budget-1
			}
		}
		e.lws.groups[l.UID] = groups
		ok, err := e.writeLWSStatus(ctx, l, groups)
		if err != nil {
			return false, err
		}
		changed = changed || ok
	}
	return changed, nil
}

// writeLWSStatus writes the status the groups make, unless it is already that.
func (e *Env) writeLWSStatus(ctx context.Context, l *lwsv1.LeaderWorkerSet, groups []bool) (bool, error) {
	var ready int32
	for _, g := range groups {
		if g {
			ready++
		}
	}
	spec := int32(len(groups))
	want := lwsv1.LeaderWorkerSetStatus{ObservedGeneration: l.Generation, Replicas: spec, ReadyReplicas: ready, UpdatedReplicas: spec}
	if equality.Semantic.DeepEqual(l.Status, want) {
		return false, nil
	}
	l.Status = want
	if err := e.Client.Status().Update(ctx, l); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("playing LeaderWorkerSet %s: %w", l.Name, err)
	}
	return true, nil
}

// FailLeaderWorkerSetGroup makes group (leader ordinal) index of LeaderWorkerSet name
// unready for good, as a gang whose pod failed by itself: its status reports one ready
// group fewer, and no play makes it ready again (a scale-down can remove it).
func (e *Env) FailLeaderWorkerSetGroup(ctx context.Context, ns, name string, index int) error {
	var l lwsv1.LeaderWorkerSet
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &l); err != nil {
		return err
	}
	e.lws.mu.Lock()
	defer e.lws.mu.Unlock()
	groups := e.lws.groupsOf(&l)
	if index >= len(groups) {
		return fmt.Errorf("LeaderWorkerSet %s has %d groups, no group %d", name, len(groups), index)
	}
	groups[index] = false
	e.lws.groups[l.UID] = groups
	if e.lws.failed == nil {
		e.lws.failed = map[types.UID]map[int]bool{}
	}
	if e.lws.failed[l.UID] == nil {
		e.lws.failed[l.UID] = map[int]bool{}
	}
	e.lws.failed[l.UID][index] = true
	_, err := e.writeLWSStatus(ctx, &l, groups)
	return err
}
