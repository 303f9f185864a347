// Package grove is the Grove backend: one PodCliqueSet per worker revision (replicas 1)
// holding that revision's worker services, one per stable service and template, and
// one per cohort frontend (a frontend at a worker revision) and template (cohort.go),
// named `{dgd}`, `{dgd}-1`, `{dgd}-2`... by the first free name (names.go); what each
// holds is in its labels. A single-node service is a standalone PodClique; a multinode
// service is a PodCliqueScalingGroup of a leader clique (1 pod) and a worker clique
// (nodeCount-1 pods), so one PCSG replica is one gang.
//
// Grove rejects adding or removing cliques on a live PodCliqueSet and does not push
// template replica changes to existing PodCliques / PCSGs, so replicas are moved through
// their scale subresource, and the PodCliqueSet template is kept in step for objects
// Grove recreates (Grove's generation hash excludes replicas, so this starts no Grove
// rolling update). minAvailable (immutable in Grove) is 1 for standalone cliques and
// scaling groups, so a planned scale-down to any count >= 1 never crosses it and never
// triggers gang termination. A revision is never scaled to zero clique by clique
// (Grove would warn AllScheduledReplicasLost and arm gang termination): the controller
// deletes its PodCliqueSet whole once the plan drains it.
//
// A stable service's template is never changed in place: Grove's RollingRecreate
// deletes a pod before creating its replacement, so a one-replica frontend would serve
// nothing for a while (FACTS.md). A new template is a new PodCliqueSet beside the old
// one (StableSideBySide); the controller deletes the old one once the new one is ready.
// One PodCliqueSet per stable service also means adding or removing a planner never
// changes the frontend's PodCliqueSet, whose composition Grove would reject changing.
// A cohort's frontend is replaced the same way (Observe reports the old one Outdated).
package grove

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	renderpkg "github.com/dgd-rollout/operator/render"
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
	// Reader, when set (the manager's API reader), reads past the cache, which holds
	// only the operator's labelled objects (app.CacheOptions): a create answered
	// AlreadyExists is judged on the live object (backends.ExistingOnCreate).
	Reader client.Reader
	// Config is the platform every pod is rendered for.
	Config renderpkg.Config
	// picked holds names picked for PodCliqueSets the cache does not show yet.
	picked picks
}

var (
	_ backends.Backend           = (*Backend)(nil)
	_ backends.OwnerChainWatcher = (*Backend)(nil)
)

// New returns a Grove backend.
func New(c client.Client, s *runtime.Scheme, cfg renderpkg.Config) *Backend {
	return &Backend{Client: c, Scheme: s, Config: cfg}
}

// Describe implements backends.Backend: a revision is one PodCliqueSet (HoldsPools); a
// stable template is replaced side by side (StableSideBySide); a name is picked from
// what the cluster holds (no Names); the names Grove derives have a limit (Validate).
func (b *Backend) Describe() backends.Description {
	return backends.Description{Kind: Kind, HoldsPools: true, StableSideBySide: true, Validate: b.ValidateSpec}
}

// Objects implements backends.Backend: the PodCliqueSets are the DGD's.
func (b *Backend) Objects() []client.Object { return []client.Object{&grovev1.PodCliqueSet{}} }

// Watched implements backends.OwnerChainWatcher: PodCliques belong to their
// PodCliqueSet (standalone) or PodCliqueScalingGroup (a gang member), PCSGs to their
// PodCliqueSet; Grove gives PCSGs none of the template's labels.
func (b *Backend) Watched() []client.Object {
	return []client.Object{&grovev1.PodClique{}, &grovev1.PodCliqueScalingGroup{}}
}

// Name implements backends.Backend: `<pcs>-0-<clique>` or `<pcs>-0-<group>`, Grove's
// names for the objects of the PodCliqueSet's replica 0, where the PodCliqueSet is the
// revision's, or for a stable service the one of its current template (the name it
// has, or will be created with).
func (b *Backend) Name(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) string {
	svc := dgd.Spec.Services[key.Service]
	if svc == nil {
		svc = &v1alpha1.DynamoComponentDeploymentSharedSpec{}
	}
	pcs, err := b.pcsName(context.Background(), dgd, key)
	if err != nil {
		return ""
	}
	return objectName(pcs, placementOf(svc, key.Service))
}

// pcsName is the PodCliqueSet holding key under the current spec: the revision's, for
// a stable service the one of its current template, for a cohort's frontend the one of
// its key and current template (cohortName); found by its labels, or the name it will
// be created with.
func (b *Backend) pcsName(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) (string, error) {
	if key.Hash != "" && !isCohortKey(dgd, key) {
		return b.nameFor(ctx, dgd, workerID(key.Hash), 0, b.workerRoom(dgd))
	}
	svc := dgd.Spec.Services[key.Service]
	if svc == nil {
		return "", fmt.Errorf("no service %s", key.Service)
	}
	places, h, err := stableTemplate(dgd, backends.ServiceWorkload{Key: key, Spec: svc, Replicas: svc.DesiredReplicas()}, b.Config)
	if err != nil {
		return "", err
	}
	if key.Hash != "" {
		name, _, err := b.cohortName(ctx, dgd, key, h, room(places))
		return name, err
	}
	return b.nameFor(ctx, dgd, stableID(key.Service, h), 1, room(places))
}

// workerRoom is how long the name of a PodCliqueSet holding every worker service of
// dgd may be.
func (b *Backend) workerRoom(dgd *v1alpha1.DynamoGraphDeployment) int {
	places := map[string]placement{}
	for _, name := range dgd.WorkerServiceNames() {
		places[name] = placementOf(dgd.Spec.Services[name], name)
	}
	return room(places)
}

func objectName(pcs string, pl placement) string {
	if pl.Group != "" {
		return pcs + "-0-" + pl.Group
	}
	return pcs + "-0-" + pl.Clique
}

// Ensure implements backends.Backend. A worker revision's PodCliqueSet is created once,
// whole, with the pool's worker services; a cohort's frontend in the pool (a non-worker
// service at the revision) gets a PodCliqueSet of its own per template (cohort.go),
// made after the workers' (a pass that fails between the two finds the workers and
// makes the frontend, decide's updateCohortFronts; the other way round the workers'
// PodCliqueSet would never be made, as a pool is made whole or not at all). Each stable
// service gets the PodCliqueSet of its current template, created beside any older one
// (never changed in place), and is scaled through its scale subresource.
func (b *Backend) Ensure(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool) error {
	if pool.Hash != "" {
		return b.ensureRevision(ctx, dgd, pool)
	}
	return b.ensureStable(ctx, dgd, pool)
}

// ensureRevision makes the PodCliqueSet of a worker revision's workers and those of its
// cohort frontends exist.
func (b *Backend) ensureRevision(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool) error {
	workers := backends.Pool{Hash: pool.Hash}
	var fronts []backends.ServiceWorkload
	for _, sw := range pool.Services {
		if sw.Spec != nil && !sw.Spec.IsWorker() {
			fronts = append(fronts, sw)
		} else {
			workers.Services = append(workers.Services, sw)
		}
	}
	if len(workers.Services) > 0 {
		name, err := b.nameFor(ctx, dgd, workerID(pool.Hash), 0, b.workerRoom(dgd))
		if err != nil {
			return err
		}
		want, err := render(dgd, workers, name, b.Config)
		if err != nil {
			return err
		}
		if _, err := b.create(ctx, dgd, want, workerID(pool.Hash), workerID(pool.Hash)); err != nil {
			return err
		}
	}
	for _, sw := range fronts {
		if err := b.ensureCohort(ctx, dgd, sw); err != nil {
			return err
		}
	}
	return nil
}

// ensureStable makes the PodCliqueSet of every stable service's current template exist
// at the service's replicas.
func (b *Backend) ensureStable(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool) error {
	for _, sw := range pool.Services {
		name, err := b.pcsName(ctx, dgd, sw.Key)
		if err != nil {
			return err
		}
		want, err := renderStable(dgd, sw, name, b.Config)
		if err != nil {
			return err
		}
		id := stableID(sw.Service, want.Labels[LabelStableHash])
		created, err := b.create(ctx, dgd, want, id, id)
		if err != nil || created {
			return err
		}
		if err := b.Scale(ctx, dgd, backends.Workload{Key: sw.Key}, sw.Replicas); err != nil {
			return err
		}
	}
	return nil
}

// create creates want (holding id, its name picked under pick) unless a PodCliqueSet
// of its name exists, and reports whether it did. The name was free when it was picked;
// one found taken since (another DGD's, or ours holding something else) is given up,
// and the next pass picks another. AlreadyExists counts as success (backends.Backend):
// the object is ours, created by an earlier pass the cache does not show yet, or
// someone else's, which the next pass sees in the cache and gives the name up for; the
// pick is kept until then.
func (b *Backend) create(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, want *grovev1.PodCliqueSet, id, pick string) (bool, error) {
	if err := v1alpha1.SetController(want, dgd); err != nil {
		return false, err
	}
	var have grovev1.PodCliqueSet
	err := b.Client.Get(ctx, client.ObjectKeyFromObject(want), &have)
	switch {
	case apierrors.IsNotFound(err):
		if err := b.Client.Create(ctx, want); apierrors.IsAlreadyExists(err) {
			// Someone else's (not in the cache, which holds only ours): the name is
			// given up, and taken() sees it from the API server when the next pass picks.
			if err := backends.ExistingOnCreate(ctx, b.Reader, b.Client, want, dgd, Kind); err != nil {
				b.picked.forget(dgd.UID, pick)
				return false, fmt.Errorf("PodCliqueSet %s/%s was taken meanwhile (%w): the next pass picks another name", want.Namespace, want.Name, err)
			}
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("creating PodCliqueSet %s/%s: %w", want.Namespace, want.Name, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("getting PodCliqueSet %s/%s: %w", want.Namespace, want.Name, err)
	case !metav1.IsControlledBy(&have, dgd) || identity(dgd, &have) != id:
		b.picked.forget(dgd.UID, pick)
		return false, fmt.Errorf("PodCliqueSet %s/%s was taken meanwhile (not this revision's or template's): the next pass picks another name", have.Namespace, have.Name)
	}
	return false, nil
}

// Observe implements backends.Backend: one workload per service of every PodCliqueSet,
// read from its PodClique (readyReplicas) or PodCliqueScalingGroup (availableReplicas:
// gangs). An object Grove has not created yet counts with the template's replicas and
// nothing ready. A PodCliqueSet being deleted counts as Terminating with no replicas.
// PodCliqueSets are found by controller reference, so one stripped of its labels (and
// annotations) is still the DGD's: the labels it lacks are reported on each of its
// workloads (Relabel puts them back on the PodCliqueSet). It only reads.
func (b *Backend) Observe(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]backends.Workload, error) {
	var list grovev1.PodCliqueSetList
	if err := backends.ListControlled(ctx, b.Client, &list, dgd); err != nil {
		return nil, fmt.Errorf("listing PodCliqueSets of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	var sets []*grovev1.PodCliqueSet
	for i := range list.Items {
		if pcs := &list.Items[i]; metav1.IsControlledBy(pcs, dgd) {
			sets = append(sets, pcs)
		}
	}
	replaced := b.outdatedCohorts(dgd, sets)
	var out []backends.Workload
	for _, pcs := range sets {
		ws, err := b.observeSet(ctx, dgd, pcs, replaced[pcs.Name])
		if err != nil {
			return nil, err
		}
		out = append(out, ws...)
	}
	return out, nil
}

// observeSet reads the workloads of one PodCliqueSet; replaced: a cohort frontend's
// that a newer one of its key replaces (outdatedCohorts).
func (b *Backend) observeSet(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pcs *grovev1.PodCliqueSet, replaced bool) ([]backends.Workload, error) {
	hash := workerHash(pcs)
	var outdated bool
	var relabel map[string]string
	if pcs.DeletionTimestamp.IsZero() {
		want := pcsLabels(dgd, hash)
		switch svc, cohort := cohortService(pcs); {
		case cohort:
			outdated = replaced
			want = cohortLabels(dgd, backends.Key{Service: svc, Hash: hash}, cohortTemplate(pcs))
		case hash == "":
			outdated = b.stableOutdated(dgd, pcs)
			if h := pcsStableHash(dgd, pcs); h != "" {
				want[LabelStableHash] = h
			}
		}
		relabel = backends.MissingLabels(pcs.Labels, want)
	}
	var out []backends.Workload
	for service, pl := range placements(pcs) {
		w, err := b.observeOne(ctx, pcs, backends.Key{Service: service, Hash: hash}, pl)
		if err != nil {
			return nil, err
		}
		w.Outdated, w.Relabel = outdated, relabel
		out = append(out, w)
	}
	return out, nil
}

// stableOutdated reports whether a stable PodCliqueSet is not the one the spec renders
// now for the service it holds: another template (stable hash), or a service that is
// gone or a worker now.
func (b *Backend) stableOutdated(dgd *v1alpha1.DynamoGraphDeployment, pcs *grovev1.PodCliqueSet) bool {
	places := placements(pcs)
	if len(places) != 1 {
		return true
	}
	for service := range places {
		svc := dgd.Spec.Services[service]
		if svc == nil || svc.IsWorker() {
			return true
		}
		_, h, err := stableTemplate(dgd, backends.ServiceWorkload{Key: backends.Key{Service: service}, Spec: svc, Replicas: svc.DesiredReplicas()}, b.Config)
		return err != nil || pcsStableHash(dgd, pcs) != h
	}
	return true
}

func (b *Backend) observeOne(ctx context.Context, pcs *grovev1.PodCliqueSet, wk backends.Key, pl placement) (backends.Workload, error) {
	w := backends.Workload{Key: wk, Name: objectName(pcs.Name, pl), Group: &backends.ObjectRef{Kind: Kind, Name: pcs.Name, UID: pcs.UID}, Synced: true}
	if !pcs.DeletionTimestamp.IsZero() {
		w.Kind, w.Terminating = Kind, true
		return w, nil
	}
	key := client.ObjectKey{Namespace: pcs.Namespace, Name: w.Name}
	if pl.Group != "" {
		w.Kind, w.Replicas = "PodCliqueScalingGroup", templateReplicas(pcs, pl)
		var g grovev1.PodCliqueScalingGroup
		if err := b.Client.Get(ctx, key, &g); apierrors.IsNotFound(err) {
			return w, nil
		} else if err != nil {
			return w, fmt.Errorf("getting PodCliqueScalingGroup %s: %w", key, err)
		}
		if !metav1.IsControlledBy(&g, pcs) {
			return w, nil // left by an earlier PodCliqueSet of this name: Grove has not made ours yet
		}
		w.Replicas, w.Ready, w.Updated, w.Current = g.Spec.Replicas, g.Status.AvailableReplicas, g.Status.UpdatedReplicas, g.Status.Replicas
		w.Generation, w.Synced = g.Generation, ptr.Deref(g.Status.ObservedGeneration, 0) >= g.Generation
		w.Terminating = !g.DeletionTimestamp.IsZero()
		return w, nil
	}
	w.Kind, w.Replicas = "PodClique", templateReplicas(pcs, pl)
	var c grovev1.PodClique
	if err := b.Client.Get(ctx, key, &c); apierrors.IsNotFound(err) {
		return w, nil
	} else if err != nil {
		return w, fmt.Errorf("getting PodClique %s: %w", key, err)
	}
	if !metav1.IsControlledBy(&c, pcs) {
		return w, nil
	}
	w.Replicas, w.Ready, w.Updated, w.Current = c.Spec.Replicas, c.Status.ReadyReplicas, c.Status.UpdatedReplicas, c.Status.Replicas
	w.Generation, w.Synced = c.Generation, ptr.Deref(c.Status.ObservedGeneration, 0) >= c.Generation
	w.Terminating = !c.DeletionTimestamp.IsZero()
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
func (b *Backend) Scale(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w backends.Workload, replicas int32) error {
	key := w.Key
	name, err := b.scaledSet(ctx, dgd, w)
	if err != nil {
		return err
	}
	var pcs grovev1.PodCliqueSet
	pcsKey := client.ObjectKey{Namespace: dgd.Namespace, Name: name}
	if err := b.Client.Get(ctx, pcsKey, &pcs); apierrors.IsNotFound(err) {
		return nil // gone: the next Observe no longer reports it
	} else if err != nil {
		return fmt.Errorf("getting PodCliqueSet %s: %w", pcsKey, err)
	}
	if !pcs.DeletionTimestamp.IsZero() {
		return nil // going whole: its cliques are never scaled (to 0 Grove would warn AllScheduledReplicasLost)
	}
	pl, ok := placements(&pcs)[key.Service]
	if !ok {
		return fmt.Errorf("PodCliqueSet %s holds no service %s", pcsKey, key.Service)
	}
	if err := b.scaleObject(ctx, &pcs, objectName(pcs.Name, pl), pl, replicas); err != nil {
		return err
	}
	return b.scaleTemplate(ctx, &pcs, pl, replicas)
}

// scaledSet is the PodCliqueSet Scale scales w in: for a cohort's frontend the one
// Observe reported w in (its key may have two, the outdated one beside its
// replacement), else the one holding w's key under the current spec.
func (b *Backend) scaledSet(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w backends.Workload) (string, error) {
	if w.Group != nil && w.Group.Name != "" && isCohortKey(dgd, w.Key) {
		return w.Group.Name, nil
	}
	return b.pcsName(ctx, dgd, w.Key)
}

func (b *Backend) scaleObject(ctx context.Context, pcs *grovev1.PodCliqueSet, name string, pl placement, replicas int32) error {
	var obj client.Object = &grovev1.PodClique{}
	if pl.Group != "" {
		obj = &grovev1.PodCliqueScalingGroup{}
	}
	ns := pcs.Namespace
	if err := b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); apierrors.IsNotFound(err) || err == nil && !metav1.IsControlledBy(obj, pcs) {
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
		return nil // Grove rejects a template count of 0: a drained revision is deleted instead
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

// Delete implements backends.Backend: the PodCliqueSet holding w (Grove cannot remove
// one clique from a live PodCliqueSet; the controller deletes a revision only once the
// plan drains it whole, a stable one once its replacement is ready).
func (b *Backend) Delete(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w backends.Workload) error {
	if w.Group == nil {
		return nil // every PodCliqueSet workload has its group: nothing of this DGD's to delete
	}
	name := w.Group.Name
	pcs := &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: dgd.Namespace, Name: name, UID: w.Group.UID}}
	return backends.DeleteObject(ctx, b.Client, pcs, Kind)
}

// Relabel implements backends.Backend: the labels go on the PodCliqueSet.
func (b *Backend) Relabel(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w backends.Workload) error {
	if w.Group == nil {
		return nil
	}
	pcs := &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: dgd.Namespace, Name: w.Group.Name}}
	return backends.PatchLabels(ctx, b.Client, pcs, w.Relabel)
}

// MaxNameLength is Grove's limit on a PodCliqueSet's name plus its scaling group's and
// clique's names (validation/podcliqueset.go: pods are named after them).
const MaxNameLength = 45

// ValidateSpec is Description.Validate: every service's cliques fit Grove's
// 45 characters with the PodCliqueSet named after the DGD alone, exactly Dynamo's
// limit (DYNAMO.md, "Validation Dynamo applies"). A PodCliqueSet beside the first takes
// a longer name where it fits and a shorter cut of the DGD's name where it does not
// (backends.PodCliqueSetName), so what Dynamo deploys deploys here, side by side.
func (b *Backend) ValidateSpec(dgd *v1alpha1.DynamoGraphDeployment, services []string) error {
	first, _ := backends.PodCliqueSetName(dgd.Name, 0, math.MaxInt)
	pcs := len(first)
	for _, name := range services {
		pl := placementOf(dgd.Spec.Services[name], name)
		n, what := pcs+len(pl.Clique), "clique "+pl.Clique
		if pl.Group != "" {
			n, what = pcs+len(pl.Group)+len(pl.Group+LeaderSuffix), fmt.Sprintf("scaling group %s and clique %s", pl.Group, pl.Group+LeaderSuffix)
		}
		if n > MaxNameLength {
			return fmt.Errorf("spec.services[%s]: Grove names pods after the PodCliqueSet (the DGD's name, %d characters) and the %s: %d characters, over Grove's limit of %d; shorten the DynamoGraphDeployment or service name",
				name, pcs, what, n, MaxNameLength)
		}
	}
	return nil
}

var _ backends.GangLeaders = (*Backend)(nil)

// Leader implements backends.GangLeaders: a pod of a scaling group (Grove labels it
// with the group, api/common/labels.go LabelPodCliqueScalingGroup) leads its gang when
// it belongs to the group's leader clique `<pcs>-0-<group>-<j>-<group>-ldr`
// (LabelPodClique); a standalone clique's pods are single-node replicas.
func (b *Backend) Leader(podLabels map[string]string) bool {
	if podLabels[apicommon.LabelPodCliqueScalingGroup] == "" {
		return true
	}
	return strings.HasSuffix(podLabels[apicommon.LabelPodClique], LeaderSuffix)
}
