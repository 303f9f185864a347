package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apicommon "github.com/ai-dynamo/grove/operator/api/common"
	grovev1 "github.com/ai-dynamo/grove/operator/api/core/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/deployment"
	"github.com/dgd-rollout/operator/backends/grove"
	"github.com/dgd-rollout/operator/backends/lws"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// The take-over of a DGD Dynamo's operator ran (controllers/decide/dynamo.go): what
// observe reads of Dynamo's objects and how execute writes them. Dynamo's objects carry
// none of our labels, so the cache (cmd/manager/app CacheOptions) never holds them: they
// are read past it, and only for a DGD that shows a sign of Dynamo's operator (its
// finalizer on the DGD, or a pod of the DGD that Dynamo's operator made: dynamoPod), so a
// DGD that never ran under Dynamo's operator costs nothing.

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get
// +kubebuilder:rbac:groups=nvidia.com,resources=dynamocomponentdeployments,verbs=get;list;patch;delete

// dcdVersions are the versions of Dynamo's DCD API the take-over reads and writes, in
// the order tried (a cluster serves one or both).
var dcdVersions = []string{"v1beta1", "v1alpha1"}

// observeDynamo reads what Dynamo's operator left of dgd: its worker Deployments and
// LeaderWorkerSets as workloads of decide.DynamoBackend, keyed by component and Dynamo's
// worker hash, their pods counted by counts; the rest in a decide.Dynamo. nil and no workloads when the DGD
// shows no sign of Dynamo's operator.
func (r *Reconciler) observeDynamo(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pods []metav1.PartialObjectMetadata,
	counts map[backends.Key]int32) (*decide.Dynamo, []decide.Workload, error) {
	theirs := 0
	for i := range pods {
		if dynamoPod(pods[i].Labels) {
			theirs++
		}
	}
	fin := controllerutil.ContainsFinalizer(dgd, decide.DynamoFinalizer)
	if (theirs == 0 && !fin) || r.APIReader == nil {
		return nil, nil, nil
	}
	dy := &decide.Dynamo{Pods: theirs, Finalizer: fin}
	sets, err := r.dynamoPodCliqueSets(ctx, dgd, dy, pods, counts)
	if err != nil {
		return nil, nil, err
	}
	ws, byDCD, err := r.dynamoObjects(ctx, dgd, dy, counts)
	if err != nil {
		return nil, nil, err
	}
	ws = append(ws, sets...)
	dcds, _, err := r.listDCDs(ctx, dgd)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range dcds {
		dy.Components = append(dy.Components, d.Name)
	}
	if err := r.dynamoExposure(ctx, dgd, dcds, dy); err != nil {
		return nil, nil, err
	}
	if dy.Stopped, err = r.dynamoStopped(ctx, dgd, len(dcds) == 0 && !byDCD); err != nil {
		return nil, nil, err
	}
	// Dynamo's DisaggregatedSet pathway: held (dynamo_disaggregatedset.go).
	if dy.Unsupported, err = r.appendDisaggregatedSets(ctx, dgd, dy.Unsupported); err != nil {
		return nil, nil, err
	}
	return dy, ws, nil
}

// dynamoObjects reads Dynamo's workloads and Services of dgd past the cache: its worker
// workloads (Deployments, LeaderWorkerSets) as workloads, its stable ones and its
// Services into dy; byDCD says whether any of them is controlled (by a DCD). On its
// Grove pathway Dynamo's component Services `<dgd>-<component>` are controlled by the
// DGD (ai-dynamo/dynamo deploy/operator/internal/controller/
// dgd_grove_stable_resources_reconciler.go reconcileComponentService, SyncResource
// with the DGD as owner): a Service of the graph the DGD controls without our label is
// Dynamo's too, and stays so once Dynamo's PodCliqueSet is gone (it is deleted at the
// end of the take-over, as the others are).
func (r *Reconciler) dynamoObjects(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, dy *decide.Dynamo,
	counts map[backends.Key]int32) (ws []decide.Workload, byDCD bool, err error) {
	in := []client.ListOption{client.InNamespace(dgd.Namespace), client.MatchingLabels{v1alpha1.LabelGraph: dgd.Name}}
	objs, err := r.dynamoWorkloadObjects(ctx, dgd, in)
	if err != nil {
		return nil, false, err
	}
	for _, o := range objs {
		if !dynamos(o) {
			continue
		}
		byDCD = byDCD || metav1.GetControllerOf(o) != nil
		w, ok := r.dynamoWorkload(o, counts)
		if !ok {
			continue
		}
		if svc := dgd.Spec.Services[w.Service]; svc != nil && !svc.IsWorker() {
			ref := backends.ObjectRef{Kind: w.Kind, Name: w.Name, UID: w.UID}
			if w.Kind != "Deployment" {
				// A multinode frontend or planner: ours would run beside it, under another
				// name, and nothing would ever remove it. Not taken over (yet).
				dy.Unsupported = append(dy.Unsupported, ref)
				continue
			}
			dy.Stable = append(dy.Stable, decide.DynamoStable{Service: w.Service, ObjectRef: ref})
			continue
		}
		ws = append(ws, w)
	}
	sharePods(ws)
	var svcs corev1.ServiceList
	if err := r.APIReader.List(ctx, &svcs, in...); err != nil {
		return nil, false, fmt.Errorf("listing Dynamo's Services of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	for i := range svcs.Items {
		if svc := &svcs.Items[i]; dynamos(svc) || metav1.IsControlledBy(svc, dgd) && svc.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			dy.Services = append(dy.Services, svcs.Items[i])
			byDCD = byDCD || dynamos(svc) && metav1.GetControllerOf(svc) != nil
		}
	}
	return ws, byDCD, nil
}

// dynamoWorkloadObjects lists the objects carrying dgd's graph label (in) of the kinds
// Dynamo's component pathway runs a component's pods in: Deployments (single-node), and
// LeaderWorkerSets (multinode, when this operator runs the LeaderWorkerSet backend:
// the LWS CRD is installed). Dynamo's DCD controller renders a multinode component as
// one LeaderWorkerSet `<dcd>-0` whose replicas are the component's (each a gang of
// nodeCount pods: a leader and its workers), labelled with the DCD's labels (graph,
// component, worker hash) and controlled by the DCD (ai-dynamo/dynamo
// deploy/operator/internal/controller/dynamocomponentdeployment_controller.go,
// reconcileLeaderWorkerSetResources, generateLeaderWorkerSet, leaderWorkerSetName).
// Without the backend no LeaderWorkerSet is read: none of Dynamo's gangs would count
// as routable (runsPods), and the planner would drain them at once.
func (r *Reconciler) dynamoWorkloadObjects(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, in []client.ListOption) ([]client.Object, error) {
	var out []client.Object
	var deps appsv1.DeploymentList
	if err := r.APIReader.List(ctx, &deps, in...); err != nil {
		return nil, fmt.Errorf("listing Dynamo's Deployments of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	for i := range deps.Items {
		out = append(out, &deps.Items[i])
	}
	if r.Backends.ByKind(lws.Kind) == nil {
		return out, nil
	}
	var sets lwsv1.LeaderWorkerSetList
	if err := r.APIReader.List(ctx, &sets, in...); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing Dynamo's LeaderWorkerSets of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	for i := range sets.Items {
		out = append(out, &sets.Items[i])
	}
	return out, nil
}

// dynamoPodCliqueSets finds, past the cache (metadata only), the PodCliqueSets of dgd's
// namespace that dgd controls and this operator did not make (grove.NotOurs): the one
// Dynamo's operator runs the whole graph in on its Grove pathway, named after the DGD
// (ai-dynamo/dynamo internal/dynamo/graph.go GenerateGrovePodCliqueSet). It carries no
// label of the graph's, hence the namespace's list. None when Grove's CRD is not
// served. Each is taken over (dynamoGroveSet) when the Grove backend runs and its shape
// is one the take-over handles (grove.DynamoShape); otherwise it goes to
// dy.Unsupported and the pass writes nothing.
func (r *Reconciler) dynamoPodCliqueSets(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, dy *decide.Dynamo,
	pods []metav1.PartialObjectMetadata, counts map[backends.Key]int32) ([]decide.Workload, error) {
	gvk := grovev1.SchemeGroupVersion.WithKind(grove.Kind)
	items, _, err := r.listMetadata(ctx, gvk, client.InNamespace(dgd.Namespace))
	if err != nil {
		return nil, fmt.Errorf("listing the PodCliqueSets of namespace %s: %w", dgd.Namespace, err)
	}
	var out []decide.Workload
	for i := range items {
		p := &items[i]
		if !metav1.IsControlledBy(p, dgd) || !grove.NotOurs(gvk, p) {
			continue
		}
		ws, why, err := r.dynamoGroveSet(ctx, p)
		if err != nil {
			return nil, err
		}
		if why != "" {
			dy.Unsupported = append(dy.Unsupported, backends.ObjectRef{Kind: grove.Kind, Name: p.Name, UID: p.UID})
			dy.Shapes = append(dy.Shapes, fmt.Sprintf("%s %s: %s", grove.Kind, p.Name, why))
			continue
		}
		out = append(out, r.dynamoGroveWorkers(dgd, dy, ws, counts)...)
		dy.Pods += groveMembers(pods, p.Name)
	}
	return out, nil
}

// dynamoGroveSet reads one of Dynamo's PodCliqueSets (whole, past the cache: it is not
// ours) and its components through the Grove backend, or says why it is not taken over.
func (r *Reconciler) dynamoGroveSet(ctx context.Context, p *metav1.PartialObjectMetadata) ([]grove.DynamoComponent, string, error) {
	b, ok := r.Backends.ByKind(grove.Kind).(*grove.Backend)
	if !ok {
		return nil, "this operator runs no Grove backend", nil
	}
	var pcs grovev1.PodCliqueSet
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(p), &pcs); apierrors.IsNotFound(err) {
		return nil, "", nil
	} else if err != nil {
		return nil, "", fmt.Errorf("reading Dynamo's PodCliqueSet %s/%s: %w", p.Namespace, p.Name, err)
	}
	if why := grove.DynamoShape(&pcs); why != "" {
		return nil, why, nil
	}
	ws, err := b.ObserveDynamo(ctx, &pcs)
	return ws, "", err
}

// dynamoGroveWorkers are the worker components of Dynamo's PodCliqueSet as workloads of
// decide.DynamoBackend (a worker hash their cliques lack is legacyHash, as for
// Dynamo's other hashless workers), their floors in dy. Its other components
// (frontend, planner) are no workload: they serve until the PodCliqueSet is deleted
// whole, once ours are ready (decide/dynamo_grove.go).
func (r *Reconciler) dynamoGroveWorkers(dgd *v1alpha1.DynamoGraphDeployment, dy *decide.Dynamo, cs []grove.DynamoComponent,
	counts map[backends.Key]int32) []decide.Workload {
	var out []decide.Workload
	for _, c := range cs {
		if svc := dgd.Spec.Services[c.Service]; svc != nil && !svc.IsWorker() {
			continue
		}
		if c.Hash == "" {
			c.Hash = legacyHash
		}
		if dy.Floors == nil {
			dy.Floors = map[string]int32{}
		}
		dy.Floors[c.Name] = c.Floor
		out = append(out, decide.Workload{Backend: decide.DynamoBackend, Pods: counts[c.Key], Workload: c.Workload})
	}
	return out
}

// groveMembers counts the pods Grove made for the PodCliqueSet named pcs (Grove labels
// each with app.kubernetes.io/part-of: <pcs>, api/common/labels.go
// GetDefaultLabelsForPodCliqueSetManagedResources).
func groveMembers(pods []metav1.PartialObjectMetadata, pcs string) int {
	n := 0
	for i := range pods {
		if l := pods[i].Labels; l[apicommon.LabelPartOfKey] == pcs && l[apicommon.LabelManagedByKey] == apicommon.LabelManagedByValue {
			n++
		}
	}
	return n
}

// dynamoWorkload is one of Dynamo's workload objects (a Deployment or a
// LeaderWorkerSet, dynamoWorkloadObjects) as a workload of the old revision Dynamo's
// worker hash names ("legacy" for a workload of before Dynamo's rolling updates, which
// has none), read by the backend of its kind as it reads its own (a LeaderWorkerSet's
// replicas and ready counts are gangs: LWS readyReplicas, groups whose every pod is
// ready); false when that backend does not run.
func (r *Reconciler) dynamoWorkload(o client.Object, counts map[backends.Key]int32) (decide.Workload, bool) {
	key := backends.Key{Service: o.GetLabels()[v1alpha1.LabelService], Hash: o.GetLabels()[v1alpha1.LabelWorkerHash]}
	if key.Hash == "" {
		key.Hash = legacyHash
	}
	kind := deployment.Kind
	if _, ok := o.(*lwsv1.LeaderWorkerSet); ok {
		kind = lws.Kind
	}
	b, ok := r.Backends.ByKind(kind).(workloadReader)
	if !ok {
		return decide.Workload{}, false
	}
	w, ok := b.Read(o)
	w.Key = key
	return decide.Workload{Backend: decide.DynamoBackend, Pods: counts[key], Workload: w}, ok
}

// workloadReader is a backend that reads an object of its kind as a workload
// (single.Adapter.Read: Deployment, LeaderWorkerSet).
type workloadReader interface {
	Read(client.Object) (backends.Workload, bool)
}

// legacyHash keys Dynamo's worker workloads and pods of before its rolling updates,
// which carry no worker hash (Dynamo's own sentinel for them: DYNAMO-V1BETA1.md §3).
const legacyHash = "legacy"

// podKey is the workload key of a pod of dgd (its labels): its component and worker
// hash, the hash legacyHash for a hashless pod of Dynamo's (dynamoPod) of a worker
// component, as dynamoWorkload keys its workload. Without it such pods would count for
// no workload and none would be routable: the planner would take Dynamo's legacy
// workers for an old revision with nothing ready and drain them at once.
func podKey(dgd *v1alpha1.DynamoGraphDeployment, labels map[string]string) backends.Key {
	if labels[v1alpha1.LabelTrafficProxy] != "" {
		return backends.Key{} // the traffic proxy's pod: none of a service's
	}
	key := backends.Key{Service: labels[v1alpha1.LabelService], Hash: labels[v1alpha1.LabelWorkerHash]}
	if svc := dgd.Spec.Services[key.Service]; key.Hash == "" && svc != nil && svc.IsWorker() && (dynamoPod(labels) || groveMember(labels)) {
		key.Hash = legacyHash
	}
	return key
}

// groveMember reports whether a pod (its labels) is one Grove made: Grove labels its
// pods managed-by grove-operator over the template's labels. A worker pod of ours on
// Grove always carries its worker hash, so a hashless worker pod Grove made runs in
// Dynamo's PodCliqueSet, whose cliques carry no hash unless the pod template does
// (ai-dynamo/dynamo internal/dynamo/graph.go generateLabels).
func groveMember(labels map[string]string) bool {
	return labels[apicommon.LabelManagedByKey] == apicommon.LabelManagedByValue
}

// sharePods counts the pods of workloads of one key once: counts are per (component,
// worker hash), and an older Dynamo ran one LeaderWorkerSet per replica of a component
// (`<dcd>-0`, `<dcd>-1`...: dynamocomponentdeployment_controller.go, legacyLWSInstanceIDLabel),
// all of one key. Each but the first (by name) has the replicas its status reports as
// its pods; the first the rest of the key's (terminating ones among them), so that the
// planner, which sums a revision's workloads, counts each pod once.
func sharePods(ws []decide.Workload) {
	byKey := map[backends.Key][]int{}
	for i := range ws {
		byKey[ws[i].Key] = append(byKey[ws[i].Key], i)
	}
	for _, is := range byKey {
		if len(is) < 2 {
			continue
		}
		slices.SortFunc(is, func(a, b int) int { return strings.Compare(ws[a].Name, ws[b].Name) })
		rest := ws[is[0]].Pods
		for _, i := range is[1:] {
			ws[i].Pods = ws[i].Current
			rest -= ws[i].Current
		}
		ws[is[0]].Pods = max(rest, 0)
	}
}

// runsPods is the backend whose pods w's are like: its own, or for one of Dynamo's
// workloads (backend decide.DynamoBackend, which no backend manages) the backend of its
// kind, since Dynamo's worker Deployments run their runtime in every pod as ours do, and
// Dynamo's LeaderWorkerSets only in each gang's leader, as ours do: the pod LWS labels
// worker-index 0, which Dynamo's Service selects alone (selector role=leader for a
// multinode DCD: dcdWorkloadRenderer.generateService in ai-dynamo/dynamo
// deploy/operator/internal/controller). nil when no backend runs that kind. Without it, discovery (routable) would find none of
// Dynamo's pods routable and lower its workloads' ready counts to zero: the planner
// would then see an old revision with nothing ready and drain it at once, before ours
// is ready (the e2e "Moving over" caught that: Dynamo's workers deleted in the first
// pass after the Lease).
func (r *Reconciler) runsPods(w decide.Workload) backends.Backend {
	if w.Backend == decide.DynamoBackend {
		if w.Group != nil && w.Group.Kind == grove.Kind {
			// A component of Dynamo's PodCliqueSet: pods of a clique or a scaling
			// group's gangs, as Grove runs ours (a gang's runtime in its `-ldr` clique).
			return r.Backends.ByKind(grove.Kind)
		}
		return r.Backends.ByKind(w.Kind)
	}
	return r.Backends.ByKind(w.Backend)
}

// listDCDs lists Dynamo's DCDs of dgd (metadata only) in the first version the cluster
// serves; none when it serves none (Dynamo's CRDs are not installed).
func (r *Reconciler) listDCDs(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]metav1.PartialObjectMetadata, schema.GroupVersionKind, error) {
	for _, v := range dcdVersions {
		gvk := schema.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v, Kind: decide.DCDKind}
		items, served, err := r.listMetadata(ctx, gvk, client.InNamespace(dgd.Namespace), client.MatchingLabels{v1alpha1.LabelGraph: dgd.Name})
		switch {
		case err != nil:
			return nil, gvk, fmt.Errorf("listing Dynamo's %ss of %s/%s: %w", decide.DCDKind, dgd.Namespace, dgd.Name, err)
		case !served:
			continue
		}
		var out []metav1.PartialObjectMetadata
		for _, d := range items {
			if metav1.IsControlledBy(&d, dgd) {
				out = append(out, d)
			}
		}
		return out, gvk, nil
	}
	return nil, schema.GroupVersionKind{}, nil
}

// dynamoStopped says how Dynamo's operator is kept from acting on dgd, or "": its
// namespace-scope Lease held (renewTime + leaseDurationSeconds still ahead, as its
// LeaseWatcher judges: a Lease lacking either counts as expired), or the DGD paused
// (nvidia.com/paused exactly "true") with no DCD left to reconcile Dynamo's workloads
// (released: nothing of Dynamo's is controlled by a DCD any more).
func (r *Reconciler) dynamoStopped(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, released bool) (string, error) {
	var l coordinationv1.Lease
	switch err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: dgd.Namespace, Name: decide.DynamoScopeLease}, &l); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("reading Lease %s/%s: %w", dgd.Namespace, decide.DynamoScopeLease, err)
	case l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil &&
		l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second).After(r.now()):
		return fmt.Sprintf("Lease %s held by %q", decide.DynamoScopeLease, ptr.Deref(l.Spec.HolderIdentity, "")), nil
	}
	if dgd.Annotations[decide.DynamoPausedAnnotation] == "true" && released {
		return decide.DynamoPausedAnnotation + "=true", nil
	}
	return "", nil
}

// writeDynamo scales or deletes one of Dynamo's workloads by its name (no backend
// manages it), through the scale subresource as a backend does, or by a delete whose
// precondition is the UID observed. The object is of the type the backend of its kind
// manages (a Deployment, a LeaderWorkerSet).
func (r *Reconciler) writeDynamo(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w decide.Write) error {
	if g := w.Workload.Group; g != nil && g.Kind == grove.Kind {
		return r.writeDynamoGrove(ctx, dgd, w)
	}
	b := r.Backends.ByKind(w.Workload.Kind)
	if b == nil {
		return fmt.Errorf("no backend runs %s, the kind of Dynamo's workload %s/%s", w.Workload.Kind, dgd.Namespace, w.Workload.Name)
	}
	obj := b.Objects()[0].DeepCopyObject().(client.Object)
	obj.SetNamespace(dgd.Namespace)
	obj.SetName(w.Workload.Name)
	obj.SetUID(w.Workload.UID)
	switch w.Op {
	case decide.Scale:
		scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: w.Replicas}}
		if err := r.Client.SubResource("scale").Update(ctx, obj, client.WithSubResourceBody(scale)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("scaling Dynamo's %s %s/%s to %d: %w", w.Workload.Kind, dgd.Namespace, w.Workload.Name, w.Replicas, err)
		}
	case decide.DeleteWorkload:
		return backends.DeleteObject(ctx, r.Client, obj, w.Workload.Kind)
	}
	return nil
}

// writeDynamoGrove scales a component of Dynamo's PodCliqueSet as the Grove backend
// scales its own (grove.Backend.ScaleDynamo), or deletes the PodCliqueSet whole, with
// the UID observed as precondition.
func (r *Reconciler) writeDynamoGrove(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w decide.Write) error {
	b, ok := r.Backends.ByKind(grove.Kind).(*grove.Backend)
	if !ok {
		return fmt.Errorf("no Grove backend runs Dynamo's PodCliqueSet %s/%s", dgd.Namespace, w.Workload.Group.Name)
	}
	g := w.Workload.Group
	switch w.Op {
	case decide.Scale:
		return b.ScaleDynamo(ctx, dgd.Namespace, g.Name, w.Workload.Service, w.Replicas)
	case decide.DeleteWorkload:
		pcs := &grovev1.PodCliqueSet{ObjectMeta: metav1.ObjectMeta{Namespace: dgd.Namespace, Name: g.Name, UID: g.UID}}
		return backends.DeleteObject(ctx, r.Client, pcs, grove.Kind)
	}
	return nil
}

// releaseDynamo ends a take-over (decide.ReleaseDynamo): each of Dynamo's DCDs named
// loses Dynamo's finalizer (no controller of Dynamo's is left to remove it, and a DCD
// deleted with it would hang in Terminating) and is deleted, and the DGD loses Dynamo's
// finalizer.
func (r *Reconciler) releaseDynamo(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, names []string) error {
	if len(names) > 0 {
		dcds, gvk, err := r.listDCDs(ctx, dgd)
		if err != nil {
			return err
		}
		for i := range dcds {
			d := &dcds[i]
			if !slices.Contains(names, d.Name) {
				continue
			}
			d.SetGroupVersionKind(gvk)
			if err := dropFinalizer(ctx, r.Client, d, decide.DynamoFinalizer); err != nil {
				return err
			}
			if err := backends.DeleteObject(ctx, r.Client, d, decide.DCDKind); err != nil {
				return err
			}
		}
	}
	return dropFinalizer(ctx, r.Client, dgd, decide.DynamoFinalizer)
}

// dropFinalizer removes finalizer from obj by a merge patch of its finalizers, guarded
// by its resourceVersion (a conflict retries the pass); nothing when obj lacks it.
func dropFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	rest := slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == finalizer })
	if rest == nil {
		rest = []string{}
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": rest, "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer %s from %s/%s: %w", finalizer, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
