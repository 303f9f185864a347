package harness

import (
	"context"
	"fmt"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// PodCliqueSets lists a DGD's PodCliqueSets (none when the Grove CRDs are not installed).
func (e *Env) PodCliqueSets(ctx context.Context, ns, dgd string) ([]grovev1.PodCliqueSet, error) {
	var list grovev1.PodCliqueSetList
	err := e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelGraph: dgd})
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	return list.Items, err
}

// groveObjects lists the PodCliques and PCSGs the operator scales (those carrying the
// DGD's label), as records.
func (e *Env) groveObjects(ctx context.Context, ns, dgd string) ([]grovev1.PodClique, []grovev1.PodCliqueScalingGroup, error) {
	var pclqs grovev1.PodCliqueList
	var pcsgs grovev1.PodCliqueScalingGroupList
	sel := client.MatchingLabels{v1alpha1.LabelGraph: dgd}
	if err := e.Client.List(ctx, &pclqs, client.InNamespace(ns), sel); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	if err := e.Client.List(ctx, &pcsgs, client.InNamespace(ns), sel); err != nil {
		return nil, nil, err
	}
	return pclqs.Items, pcsgs.Items, nil
}

// PlayGrove acts as the Grove operator for a DGD's PodCliqueSets: it creates, with
// Grove's names, the PodClique of every standalone clique (`<pcs>-0-<clique>`) and the
// PodCliqueScalingGroup of every scaling group (`<pcs>-0-<group>`) that does not exist
// yet, with the template's replicas (Grove sets replicas only on create), deletes them
// with their PodCliqueSet, and sets their status: replicas = spec, ready (PodClique
// readyReplicas, PCSG availableReplicas) = min(spec, previous + grow) (grow < 0: all).
func (e *Env) PlayGrove(ctx context.Context, ns, dgd string, grow int32) (bool, error) {
	sets, err := e.PodCliqueSets(ctx, ns, dgd)
	if err != nil {
		return false, err
	}
	changed := false
	for i := range sets {
		c, err := e.createGroveChildren(ctx, &sets[i])
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	pclqs, pcsgs, err := e.groveObjects(ctx, ns, dgd)
	if err != nil {
		return false, err
	}
	for i := range pclqs {
		c, err := e.playPodClique(ctx, &pclqs[i], sets, grow)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	for i := range pcsgs {
		c, err := e.playPCSG(ctx, &pcsgs[i], sets, grow)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

func (e *Env) createGroveChildren(ctx context.Context, pcs *grovev1.PodCliqueSet) (bool, error) {
	if !pcs.DeletionTimestamp.IsZero() {
		return false, nil
	}
	inGroup := map[string]bool{}
	created := false
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(pcs, grovev1.SchemeGroupVersion.WithKind("PodCliqueSet"))}
	for _, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		for _, n := range g.CliqueNames {
			inGroup[n] = true
		}
		obj := &grovev1.PodCliqueScalingGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: pcs.Namespace, Name: pcs.Name + "-0-" + g.Name, Labels: cliqueLabels(pcs, g.CliqueNames[0]), OwnerReferences: owner},
			Spec:       grovev1.PodCliqueScalingGroupSpec{Replicas: ptr.Deref(g.Replicas, 1), MinAvailable: g.MinAvailable, CliqueNames: g.CliqueNames},
		}
		c, err := createIfMissing(ctx, e.Client, obj)
		if err != nil {
			return false, err
		}
		created = created || c
	}
	for _, t := range pcs.Spec.Template.Cliques {
		if inGroup[t.Name] {
			continue
		}
		obj := &grovev1.PodClique{
			ObjectMeta: metav1.ObjectMeta{Namespace: pcs.Namespace, Name: pcs.Name + "-0-" + t.Name, Labels: t.Labels, OwnerReferences: owner},
			Spec:       t.Spec,
		}
		c, err := createIfMissing(ctx, e.Client, obj)
		if err != nil {
			return false, err
		}
		created = created || c
	}
	return created, nil
}

func cliqueLabels(pcs *grovev1.PodCliqueSet, clique string) map[string]string {
	for _, t := range pcs.Spec.Template.Cliques {
		if t.Name == clique {
			return t.Labels
		}
	}
	return nil
}

func createIfMissing(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	err := c.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("playing Grove: creating %s: %w", obj.GetName(), err)
	}
	return true, nil
}

// ownedByLive reports whether obj's controller is one of the live PodCliqueSets.
func ownedByLive(obj metav1.Object, sets []grovev1.PodCliqueSet) bool {
	ref := metav1.GetControllerOf(obj)
	for _, s := range sets {
		if ref != nil && ref.UID == s.UID && s.DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}

// gone deletes a child whose PodCliqueSet no longer exists, as the garbage collector
// would (envtest runs none), and reports whether it did.
func (e *Env) gone(ctx context.Context, obj client.Object, sets []grovev1.PodCliqueSet) (bool, error) {
	if ownedByLive(obj, sets) {
		return false, nil
	}
	if err := e.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	return true, nil
}

func (e *Env) playPodClique(ctx context.Context, c *grovev1.PodClique, sets []grovev1.PodCliqueSet, grow int32) (bool, error) {
	if g, err := e.gone(ctx, c, sets); g || err != nil {
		return g, err
	}
	ready := c.Spec.Replicas
	if grow >= 0 {
		ready = min(c.Spec.Replicas, c.Status.ReadyReplicas+grow)
	}
	if c.Status.Replicas == c.Spec.Replicas && c.Status.ReadyReplicas == ready && c.Status.UpdatedReplicas == c.Spec.Replicas && ptr.Deref(c.Status.ObservedGeneration, 0) == c.Generation {
		return false, nil
	}
	c.Status.Replicas, c.Status.ReadyReplicas, c.Status.UpdatedReplicas, c.Status.ObservedGeneration = c.Spec.Replicas, ready, c.Spec.Replicas, ptr.To(c.Generation)
	return statusUpdate(ctx, e.Client, c)
}

func (e *Env) playPCSG(ctx context.Context, g *grovev1.PodCliqueScalingGroup, sets []grovev1.PodCliqueSet, grow int32) (bool, error) {
	if gone, err := e.gone(ctx, g, sets); gone || err != nil {
		return gone, err
	}
	avail := g.Spec.Replicas
	if grow >= 0 {
		avail = min(g.Spec.Replicas, g.Status.AvailableReplicas+grow)
	}
	if g.Status.Replicas == g.Spec.Replicas && g.Status.AvailableReplicas == avail && ptr.Deref(g.Status.ObservedGeneration, 0) == g.Generation {
		return false, nil
	}
	g.Status.Replicas, g.Status.AvailableReplicas, g.Status.UpdatedReplicas, g.Status.ObservedGeneration = g.Spec.Replicas, avail, g.Spec.Replicas, ptr.To(g.Generation)
	return statusUpdate(ctx, e.Client, g)
}

func statusUpdate(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	if err := c.Status().Update(ctx, obj); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("playing Grove: status of %s: %w", obj.GetName(), err)
	}
	return true, nil
}

type groveChild struct {
	name     string
	labels   map[string]string
	replicas int32
}

// missingGroveChildren lists the PodCliques and PCSGs of a PodCliqueSet's replica 0 that
// do not exist (yet), with their template replicas.
func missingGroveChildren(pcs *grovev1.PodCliqueSet, seen map[string]bool) []groveChild {
	if !pcs.DeletionTimestamp.IsZero() {
		return nil
	}
	var out []groveChild
	inGroup := map[string]bool{}
	for _, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		for _, n := range g.CliqueNames {
			inGroup[n] = true
		}
		if name := pcs.Name + "-0-" + g.Name; !seen[name] {
			out = append(out, groveChild{name, cliqueLabels(pcs, g.CliqueNames[0]), ptr.Deref(g.Replicas, 1)})
		}
	}
	for _, t := range pcs.Spec.Template.Cliques {
		if name := pcs.Name + "-0-" + t.Name; !inGroup[t.Name] && !seen[name] {
			out = append(out, groveChild{name, t.Labels, t.Spec.Replicas})
		}
	}
	return out
}
