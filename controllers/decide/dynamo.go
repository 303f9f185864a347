package decide

import (
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// Taking over a DGD that Dynamo's own operator ran (issue 25 item 4; README "Moving
// over from Dynamo's operator"). Dynamo's operator renders a DGD as one
// DynamoComponentDeployment (DCD) per component, each controlling a Deployment (a
// multinode component: a LeaderWorkerSet `<dcd>-0` of gangs) and Services (ai-dynamo/dynamo
// deploy/operator/internal/controller/dynamocomponentdeployment_controller.go,
// generateDeployment, generateLeaderWorkerSet, createOrUpdateOrDeleteServices; names and
// labels in /work/notes/i25-handover-facts.md §1). Its pods carry the labels ours select
// by (api/v1alpha1 LabelGraph, LabelService, LabelWorkerHash are Dynamo's own), so observe
// reports Dynamo's worker Deployments and LeaderWorkerSets as workloads of backend
// DynamoBackend, keyed
// by their component and Dynamo's worker hash: a revision the history does not know, which
// therefore counts as the oldest (history.number: 0). The planner drains it like any old
// revision as the spec's revision becomes ready (same surge, availability and
// decode-before-prefill order), and cleanup deletes it once drained. The rest is decided
// here:
//   - nothing is taken over while Dynamo's operator may still act (Dynamo.Stopped empty):
//     the pass stops with ReasonDynamoOperatorActive; nor while Dynamo's workloads of a
//     shape not taken over run (a Grove PodCliqueSet of another shape, a multinode
//     frontend): ReasonDynamoTakeOverUnsupported; Dynamo's Grove PodCliqueSet is taken
//     over as dynamo_grove.go says;
//   - a stable service's Deployment (frontend, planner) has our name (`{dgd}-{service}`
//     is Dynamo's too): Dynamo's is deleted with propagation Orphan, so its ReplicaSet
//     and pods keep serving, and ours, created under the name once it is free, adopts that
//     ReplicaSet (its selector, graph and service, matches Dynamo's pod labels) and
//     replaces its pods by the Deployment controller's rolling update, which never takes
//     a ready replica away before its successor is available;
//   - a Service of Dynamo's under a name we want (the frontend's, which clients address) is
//     adopted in place (our labels, the DGD as controller), never deleted;
//   - once nothing of Dynamo's runs (no workload, no pod), its other Services go, its DCDs
//     are deleted (their finalizer removed: no Dynamo controller is left to) and
//     Dynamo's finalizer leaves the DGD (ReleaseDynamo), so deleting the DGD later does
//     not hang.

// DynamoBackend is the backend kind of Dynamo's workloads being taken over: execute scales
// and deletes them by name (they are none of a backend's), and Decide never creates one.
const DynamoBackend = "Dynamo"

// Names of Dynamo's operator that the take-over reads and writes.
const (
	// DynamoFinalizer is the finalizer Dynamo's operator puts on every DGD and DCD it
	// handles (controller_common.HandleFinalizer).
	DynamoFinalizer = "nvidia.com/finalizer"
	// DynamoPausedAnnotation set to exactly "true" makes Dynamo's DGD reconciler return
	// early (internal/controller/paused/reconciler.go).
	DynamoPausedAnnotation = "nvidia.com/paused"
	// DynamoScopeLease is the name of the Lease whose holding excludes its namespace from
	// Dynamo's cluster-wide operator (internal/namespace_scope/lease_watcher.go LeaseName).
	DynamoScopeLease = "dynamo-operator-namespace-scope"
	// DCDKind is the kind of Dynamo's per-component object.
	DCDKind = "DynamoComponentDeployment"
)

// DynamoRecheck is how often a DGD being taken over looks again: Dynamo's objects are
// read past the cache (they carry none of our labels), so no watch event says when
// their status moves or when Dynamo's operator is stopped.
const DynamoRecheck = 2 * time.Second

// Dynamo is what Dynamo's own operator left of the DGD, besides its worker workloads
// (in Snapshot.Workloads, backend DynamoBackend). nil: nothing (the usual case).
type Dynamo struct {
	// Stopped says how Dynamo's operator was stopped from acting on the DGD (its
	// namespace-scope Lease held, or the DGD paused and no DCD left); "" when it may
	// still act.
	Stopped string
	// Stable are Dynamo's Deployments of non-worker services (frontend, planner).
	Stable []DynamoStable
	// Services are Dynamo's Services of the DGD (carrying its graph label, none of ours).
	Services []corev1.Service
	// Ingresses are Dynamo's Ingresses of the DGD (controlled by one of its DCDs, or
	// left without a controller by a DCD deleted with --cascade=orphan): adopted when
	// the DGD renders one under the name (dynamo_ingress.go).
	Ingresses []networkingv1.Ingress
	// VirtualServices are Dynamo's Istio VirtualServices of the DGD that one of its DCDs
	// controls (this operator renders none): they hold the DCDs' deletion (releaseExposure).
	VirtualServices []backends.ObjectRef
	// Components name Dynamo's DCDs of the DGD.
	Components []string
	// Unsupported are Dynamo's workloads of the DGD on a pathway the take-over does not
	// handle (Dynamo's Grove PodCliqueSet; a LeaderWorkerSet of a non-worker component):
	// while any is there the pass stops with ReasonDynamoTakeOverUnsupported and writes
	// nothing.
	Unsupported []backends.ObjectRef
	// Shapes say why each of Unsupported is not taken over, when known.
	Shapes []string
	// Floors are, by workload name, the least replicas each component of Dynamo's
	// Grove PodCliqueSet may be scaled to (dynamo_grove.go).
	Floors map[string]int32
	// Pods counts the DGD's pods of Dynamo's making (running or terminating).
	Pods int
	// Finalizer: the DGD carries DynamoFinalizer.
	Finalizer bool
}

// DynamoStable is one of Dynamo's Deployments of a non-worker service.
type DynamoStable struct {
	Service string
	backends.ObjectRef
}

// dynamoActive is the reason a DGD Dynamo's operator may still act on stops with, or "".
func dynamoActive(s *Snapshot) string {
	if s.Dynamo == nil || s.Dynamo.Stopped != "" {
		return ""
	}
	return fmt.Sprintf("this graph runs %s made by Dynamo's operator, which may still act on it: hold its namespace-scope Lease %q in namespace %s, or annotate the DGD %s=true and delete its %ss with --cascade=orphan (README, \"Moving over from Dynamo's operator\")",
		dynamoWhat(s), DynamoScopeLease, s.DGD.Namespace, DynamoPausedAnnotation, DCDKind)
}

// dynamoUnsupported is the reason a DGD running Dynamo's workloads of a shape not
// taken over stops with, or "". Nothing is created beside them: ours would run beside
// a PodCliqueSet of Dynamo's this operator cannot drain safely (grove.DynamoShape),
// which would stay routed to for good; or beside a multinode frontend's
// LeaderWorkerSet, under another name, for good.
func dynamoUnsupported(s *Snapshot) string {
	if s.Dynamo == nil || len(s.Dynamo.Unsupported) == 0 {
		return ""
	}
	var what []string
	for _, o := range s.Dynamo.Unsupported {
		what = append(what, o.String())
	}
	why := ""
	if len(s.Dynamo.Shapes) > 0 {
		why = " (" + strings.Join(s.Dynamo.Shapes, "; ") + ")"
	}
	return fmt.Sprintf("this graph runs %s made by Dynamo's operator, which this operator does not take over yet%s: it writes nothing while that runs; keep the graph under Dynamo's operator (do not hold its namespace-scope Lease %q in namespace %s) until it does (docs/moving-over.md)",
		strings.Join(what, ", "), why, DynamoScopeLease, s.DGD.Namespace)
}

// dynamoWhat says what of Dynamo's the DGD runs.
func dynamoWhat(s *Snapshot) string {
	n := len(s.Dynamo.Stable)
	for _, w := range s.Workloads {
		if w.Backend == DynamoBackend {
			n++
		}
	}
	if n == 0 {
		return fmt.Sprintf("%d pods", s.Dynamo.Pods)
	}
	return fmt.Sprintf("%d workloads", n)
}

// dynamoHolds is Dynamo's stable Deployment under name, or nil.
func (v *view) dynamoHolds(name string) *DynamoStable {
	if v.Dynamo == nil {
		return nil
	}
	for i := range v.Dynamo.Stable {
		if v.Dynamo.Stable[i].Name == name {
			return &v.Dynamo.Stable[i]
		}
	}
	return nil
}

// orphanDynamo decides the deletion of Dynamo's stable Deployment whose name ours needs,
// with propagation Orphan: its ReplicaSet and pods stay and keep serving until the
// Deployment of ours made under the name adopts and replaces them.
func orphanDynamo(v *view, d *draft, held *DynamoStable) {
	obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: held.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: v.dgd.Namespace, Name: held.Name, UID: held.UID}}
	d.write(Write{Op: DeleteObject, Object: obj, Kind: held.Kind, Orphan: true, Progress: true,
		Say: []string{fmt.Sprintf("released %s %s from Dynamo's operator (its pods stay until %s's own replaces them)", held.Kind, held.Name, held.Service)}})
	d.requeueIn(DynamoRecheck)
}

// adoptDynamoService decides the adoption of Dynamo's Service under a name the DGD needs:
// the DGD becomes its controller (Dynamo's DCD stops being one) and our labels are added,
// so the cache shows it and the next pass updates it in place. It is never deleted: the
// frontend's Service is what clients address. It reports whether one was adopted.
func adoptDynamoService(v *view, d *draft, name string) bool {
	if v.Dynamo == nil {
		return false
	}
	for i := range v.Dynamo.Services {
		have := &v.Dynamo.Services[i]
		if have.Name != name {
			continue
		}
		svc := have.DeepCopy()
		takeControl(v.dgd, svc)
		if svc.Labels == nil {
			svc.Labels = map[string]string{}
		}
		maps.Copy(svc.Labels, map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelGraph: v.dgd.Name})
		d.write(Write{Op: UpdateObject, Object: svc, Kind: "Service",
			Say: []string{fmt.Sprintf("adopted Service %s from Dynamo's operator", name)}})
		d.requeueIn(DynamoRecheck)
		return true
	}
	return false
}

// releaseDynamo decides the end of the take-over once nothing of Dynamo's runs: its
// Services that were not adopted deleted, then its DCDs and its finalizer on the DGD
// (ReleaseDynamo). While anything of Dynamo's still runs, or an object of Dynamo's
// exposing the graph that the DGD does not render waits (releaseExposure), it only asks
// to look again. want holds the names of the Services the DGD renders, and
// "Ingress/<name>" of its Ingresses.
func releaseDynamo(v *view, d *draft, want map[string]bool) {
	if v.Dynamo == nil {
		return
	}
	d.requeueIn(DynamoRecheck)
	if v.Dynamo.Pods > 0 || len(v.Dynamo.Stable) > 0 {
		return
	}
	for _, w := range v.Workloads {
		if w.Backend == DynamoBackend {
			return
		}
	}
	if releaseExposure(v, d, want) {
		return
	}
	for i := range v.Dynamo.Services {
		if s := &v.Dynamo.Services[i]; !want[s.Name] {
			d.write(Write{Op: DeleteObject, Object: s, Kind: "Service", Say: []string{fmt.Sprintf("deleted Dynamo's Service %s", s.Name)}})
		}
	}
	if len(v.Dynamo.Components) > 0 || v.Dynamo.Finalizer {
		d.write(Write{Op: ReleaseDynamo, Names: v.Dynamo.Components,
			Say: []string{fmt.Sprintf("took %s/%s over from Dynamo's operator (deleted its %ss %v, removed its finalizer)", v.dgd.Namespace, v.dgd.Name, DCDKind, v.Dynamo.Components)}})
	}
}
