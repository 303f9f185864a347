// Package grove is the Grove backend: one PodCliqueSet per worker revision
// (`{dgd}-{hash}`, replicas 1) holding that revision's worker services, and one stable
// PodCliqueSet `{dgd}` for the frontend and other non-worker services, updated in place.
// A single-node service is a standalone PodClique; a multinode service is a
// PodCliqueScalingGroup of a leader clique (1 pod) and a worker clique (nodeCount-1
// pods), so one PCSG replica is one gang.
//
// Grove rejects adding or removing cliques on a live PodCliqueSet and does not push
// template replica changes to existing PodCliques / PCSGs, so replicas are moved through
// their scale subresource, and the PodCliqueSet template is kept in step for objects
// Grove recreates (Grove's generation hash excludes replicas, so this starts no Grove
// rolling update). minAvailable (immutable in Grove) is 1 for standalone cliques and
// scaling groups, so a planned scale-down to any count >= 1 never crosses it and never
// triggers gang termination; a revision drained to zero is deleted as a whole.
package grove

import (
	"context"
	"encoding/json"
	"fmt"

	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// Kind is the workload kind of this backend.
const Kind = "PodCliqueSet"

// +kubebuilder:rbac:groups=grove.io,resources=podcliquesets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=grove.io,resources=podcliques;podcliquescalinggroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=grove.io,resources=podcliques/scale;podcliquescalinggroups/scale,verbs=get;update;patch

// Backend manages PodCliqueSets and scales their PodCliques and PodCliqueScalingGroups.
type Backend struct {
	Client client.Client
	Scheme *runtime.Scheme
}

var (
	_ backends.Backend      = (*Backend)(nil)
	_ backends.LabelWatcher = (*Backend)(nil)
)

// New returns a Grove backend.
func New(c client.Client, s *runtime.Scheme) *Backend { return &Backend{Client: c, Scheme: s} }

// Kind implements backends.Backend.
func (b *Backend) Kind() string { return Kind }

// Objects implements backends.Backend: the PodCliqueSets are the DGD's.
func (b *Backend) Objects() []client.Object { return []client.Object{&grovev1.PodCliqueSet{}} }

// Watched implements backends.LabelWatcher: PodCliques and PCSGs belong to their
// PodCliqueSet and carry the DGD's labels from the clique templates.
func (b *Backend) Watched() []client.Object {
	return []client.Object{&grovev1.PodClique{}, &grovev1.PodCliqueScalingGroup{}}
}

// Name implements backends.Backend: `<pcs>-0-<clique>` or `<pcs>-0-<group>`, Grove's
// names for the objects of the PodCliqueSet's replica 0.
func (b *Backend) Name(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) string {
	svc := dgd.Spec.Services[key.Service]
	if svc == nil {
		svc = &v1alpha1.DynamoComponentDeploymentSharedSpec{}
	}
	return objectName(backends.GroupName(dgd.Name, key.Hash), placementOf(svc, key.Service))
}

func objectName(pcs string, pl placement) string {
	if pl.Group != "" {
		return pcs + "-0-" + pl.Group
	}
	return pcs + "-0-" + pl.Clique
}

// Ensure implements backends.Backend. A worker revision's PodCliqueSet is created once,
// whole; a stable one is updated in place, or replaced when its composition changes
// (Grove rejects adding or removing cliques on a live PodCliqueSet).
func (b *Backend) Ensure(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool) error {
	want, err := render(dgd, pool)
	if err != nil {
		return err
	}
	if err := controllerutil.SetControllerReference(dgd, want, b.Scheme); err != nil {
		return err
	}
	var have grovev1.PodCliqueSet
	err = b.Client.Get(ctx, client.ObjectKeyFromObject(want), &have)
	switch {
	case apierrors.IsNotFound(err):
		if err := b.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PodCliqueSet %s/%s: %w", want.Namespace, want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("getting PodCliqueSet %s/%s: %w", want.Namespace, want.Name, err)
	case !metav1.IsControlledBy(&have, dgd):
		return fmt.Errorf("PodCliqueSet %s/%s exists and is not controlled by DynamoGraphDeployment %s", have.Namespace, have.Name, dgd.Name)
	case pool.Hash != "":
		return nil // a worker revision never changes; Scale moves replicas
	case composition(&have) != composition(want):
		return backends.DeleteObject(ctx, b.Client, &have, Kind) // recreated with the new composition on the next pass
	}
	return b.updateStable(ctx, dgd, &have, want, pool)
}

// updateStable updates the stable PodCliqueSet's template in place (Grove rolls its
// pods) and scales its cliques through their scale subresource.
func (b *Backend) updateStable(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, have, want *grovev1.PodCliqueSet, pool backends.Pool) error {
	if have.Annotations[backends.AnnotationTemplateHash] != want.Annotations[backends.AnnotationTemplateHash] {
		patch := client.MergeFrom(have.DeepCopy())
		have.Annotations[backends.AnnotationTemplateHash] = want.Annotations[backends.AnnotationTemplateHash]
		have.Spec.Template = *keepImmutable(&have.Spec.Template, &want.Spec.Template)
		if err := b.Client.Patch(ctx, have, patch); err != nil {
			return fmt.Errorf("updating PodCliqueSet %s/%s: %w", have.Namespace, have.Name, err)
		}
	}
	for _, sw := range pool.Services {
		if err := b.Scale(ctx, dgd, sw.Key, sw.Replicas); err != nil {
			return err
		}
	}
	return nil
}

// keepImmutable returns want with the fields Grove makes immutable on a live
// PodCliqueSet (clique roleName, minAvailable, startsAfter; scaling group cliqueNames,
// minAvailable) and the replica counts taken from have.
func keepImmutable(have, want *grovev1.PodCliqueSetTemplateSpec) *grovev1.PodCliqueSetTemplateSpec {
	out := want.DeepCopy()
	old := map[string]*grovev1.PodCliqueTemplateSpec{}
	for _, c := range have.Cliques {
		old[c.Name] = c
	}
	for _, c := range out.Cliques {
		if o, ok := old[c.Name]; ok {
			c.Spec.RoleName, c.Spec.MinAvailable, c.Spec.StartsAfter, c.Spec.Replicas = o.Spec.RoleName, o.Spec.MinAvailable, o.Spec.StartsAfter, o.Spec.Replicas
		}
	}
	for i, g := range out.PodCliqueScalingGroupConfigs {
		for _, o := range have.PodCliqueScalingGroupConfigs {
			if o.Name == g.Name {
				out.PodCliqueScalingGroupConfigs[i].CliqueNames, out.PodCliqueScalingGroupConfigs[i].MinAvailable = o.CliqueNames, o.MinAvailable
				out.PodCliqueScalingGroupConfigs[i].Replicas = o.Replicas
			}
		}
	}
	return out
}

// Observe implements backends.Backend: one workload per service of every PodCliqueSet,
// read from its PodClique (readyReplicas) or PodCliqueScalingGroup (availableReplicas:
// gangs). An object Grove has not created yet counts with the template's replicas and
// nothing ready. PodCliqueSets are found by controller reference, so one stripped of
// its labels (and annotations) is still the DGD's: its labels are restored.
func (b *Backend) Observe(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]backends.Workload, error) {
	var list grovev1.PodCliqueSetList
	if err := b.Client.List(ctx, &list, client.InNamespace(dgd.Namespace)); err != nil {
		return nil, fmt.Errorf("listing PodCliqueSets of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	var out []backends.Workload
	for i := range list.Items {
		pcs := &list.Items[i]
		if !metav1.IsControlledBy(pcs, dgd) || !pcs.DeletionTimestamp.IsZero() {
			continue
		}
		hash := workerHash(pcs)
		if err := backends.RestoreLabels(ctx, b.Client, pcs, pcsLabels(dgd, hash)); err != nil {
			return nil, err
		}
		for service, pl := range placements(pcs) {
			w, err := b.observeOne(ctx, pcs, backends.Key{Service: service, Hash: hash}, pl)
			if err != nil {
				return nil, err
			}
			out = append(out, w)
		}
	}
	return out, nil
}

func (b *Backend) observeOne(ctx context.Context, pcs *grovev1.PodCliqueSet, wk backends.Key, pl placement) (backends.Workload, error) {
	w := backends.Workload{Key: wk, Name: objectName(pcs.Name, pl)}
	key := client.ObjectKey{Namespace: pcs.Namespace, Name: w.Name}
	if pl.Group != "" {
		w.Kind, w.Replicas = "PodCliqueScalingGroup", templateReplicas(pcs, pl)
		var g grovev1.PodCliqueScalingGroup
		if err := b.Client.Get(ctx, key, &g); apierrors.IsNotFound(err) {
			return w, nil
		} else if err != nil {
			return w, fmt.Errorf("getting PodCliqueScalingGroup %s: %w", key, err)
		}
		w.Replicas, w.Ready, w.Updated, w.Current = g.Spec.Replicas, g.Status.AvailableReplicas, g.Status.UpdatedReplicas, g.Status.Replicas
		return w, nil
	}
	w.Kind, w.Replicas = "PodClique", templateReplicas(pcs, pl)
	var c grovev1.PodClique
	if err := b.Client.Get(ctx, key, &c); apierrors.IsNotFound(err) {
		return w, nil
	} else if err != nil {
		return w, fmt.Errorf("getting PodClique %s: %w", key, err)
	}
	w.Replicas, w.Ready, w.Updated, w.Current = c.Spec.Replicas, c.Status.ReadyReplicas, c.Status.UpdatedReplicas, c.Status.Replicas
	return w, nil
}

func templateReplicas(pcs *grovev1.PodCliqueSet, pl placement) int32 {
	for _, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		if pl.Group != "" && g.Name == pl.Group {
			return ptr.Deref(g.Replicas, 1)
		}
	}
	for _, c := range pcs.Spec.Template.Cliques {
		if pl.Clique != "" && c.Name == pl.Clique {
			return c.Spec.Replicas
		}
	}
	return 0
}

// Scale implements backends.Backend: the PodClique's or PCSG's scale subresource, and
// the PodCliqueSet template in step for objects Grove recreates.
func (b *Backend) Scale(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, key backends.Key, replicas int32) error {
	var pcs grovev1.PodCliqueSet
	pcsKey := client.ObjectKey{Namespace: dgd.Namespace, Name: backends.GroupName(dgd.Name, key.Hash)}
	if err := b.Client.Get(ctx, pcsKey, &pcs); err != nil {
		return fmt.Errorf("getting PodCliqueSet %s: %w", pcsKey, err)
	}
	pl, ok := placements(&pcs)[key.Service]
	if !ok {
		return fmt.Errorf("PodCliqueSet %s holds no service %s", pcsKey, key.Service)
	}
	if err := b.scaleObject(ctx, pcs.Namespace, objectName(pcs.Name, pl), pl, replicas); err != nil {
		return err
	}
	return b.scaleTemplate(ctx, &pcs, pl, replicas)
}

func (b *Backend) scaleObject(ctx context.Context, ns, name string, pl placement, replicas int32) error {
	var obj client.Object = &grovev1.PodClique{}
	if pl.Group != "" {
		obj = &grovev1.PodCliqueScalingGroup{}
	}
	if err := b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); apierrors.IsNotFound(err) {
		return nil // Grove creates it from the template, which scaleTemplate keeps in step
	} else if err != nil {
		return fmt.Errorf("getting %s/%s: %w", ns, name, err)
	}
	current := int32(-1)
	switch o := obj.(type) {
	case *grovev1.PodClique:
		current = o.Spec.Replicas
	case *grovev1.PodCliqueScalingGroup:
		current = o.Spec.Replicas
	}
	if current == replicas {
		return nil
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	if err := b.Client.SubResource("scale").Update(ctx, obj, client.WithSubResourceBody(scale)); err != nil {
		return fmt.Errorf("scaling %s/%s to %d: %w", ns, name, replicas, err)
	}
	return nil
}

// scaleTemplate sets the template count of one clique or scaling group with a JSON
// patch that tests the entry's name and replaces only its replicas. A merge patch
// would send the whole cliques (or scaling group) list from pcs, which may be a cache
// copy older than the template write of another service in the same pass: that older
// list would silently undo it.
func (b *Backend) scaleTemplate(ctx context.Context, pcs *grovev1.PodCliqueSet, pl placement, replicas int32) error {
	if templateReplicas(pcs, pl) == replicas || replicas == 0 {
		return nil // Grove defaults a template count of 0 to 1: a drained revision is deleted instead
	}
	var ops []jsonPatchOp
	for i, g := range pcs.Spec.Template.PodCliqueScalingGroupConfigs {
		if pl.Group != "" && g.Name == pl.Group {
			path := fmt.Sprintf("/spec/template/podCliqueScalingGroups/%d", i)
			ops = append(ops, jsonPatchOp{Op: "test", Path: path + "/name", Value: g.Name},
				jsonPatchOp{Op: "add", Path: path + "/replicas", Value: replicas})
		}
	}
	for i, c := range pcs.Spec.Template.Cliques {
		if pl.Clique != "" && c.Name == pl.Clique {
			path := fmt.Sprintf("/spec/template/cliques/%d", i)
			ops = append(ops, jsonPatchOp{Op: "test", Path: path + "/name", Value: c.Name},
				jsonPatchOp{Op: "add", Path: path + "/spec/replicas", Value: replicas})
		}
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := b.Client.Patch(ctx, pcs, client.RawPatch(types.JSONPatchType, data)); err != nil {
		return fmt.Errorf("keeping PodCliqueSet %s/%s template in step: %w", pcs.Namespace, pcs.Name, err)
	}
	return nil
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// Delete implements backends.Backend. Grove cannot remove one clique from a live
// PodCliqueSet, so deleting any workload of a revision deletes the revision's
// PodCliqueSet (the controller only deletes a worker revision once it is drained whole).
func (b *Backend) Delete(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) error {
	pcs := &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: dgd.Namespace, Name: backends.GroupName(dgd.Name, key.Hash)}}
	return backends.DeleteObject(ctx, b.Client, pcs, Kind)
}
