package controllers

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
	"github.com/dgd-rollout/operator/revisions"
	"github.com/dgd-rollout/operator/traffic"
)

// observe reads everything one pass of dgd decides from into a snapshot, and writes
// nothing: the DGD's pods (as metadata), its workloads on every backend, what Dynamo's
// discovery publishes of them, whether the cache shows the operator's last writes, its
// revisions, the objects its pods need, the analysis templates its steps reference,
// and the names of its stable workloads. A workload whose cache is behind ends the
// reading there: the pass will act on nothing.
func (r *Reconciler) observe(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) (*decide.Snapshot, error) {
	s := &decide.Snapshot{DGD: dgd, Now: r.now(), Platform: r.Platform, Backends: r.Backends.Descriptions(),
		Providers: r.Providers, TrafficConfig: r.Traffic,
		Names: map[backends.Key]string{}, CanListUnscheduled: r.APIReader != nil, Holders: map[decide.ObjectName]decide.Holder{}, Validate: r.specs.validate,
		Measurements: r.measurements().results(client.ObjectKeyFromObject(dgd), dgd.UID)}
	pods, err := r.listPods(ctx, dgd)
	if err != nil {
		return nil, err
	}
	if s.Workloads, s.Dynamo, err = r.observeWorkloads(ctx, dgd, pods); err != nil {
		return nil, err
	}
	if s.Discovery, err = r.observeDiscovery(ctx, dgd, pods, s.Workloads); err != nil {
		return nil, err
	}
	if s.Stale = r.staleWorkload(dgd, s.Workloads); s.Stale != "" {
		return s, nil
	}
	if s.Revisions, err = r.History.List(ctx, dgd); err != nil {
		return nil, err
	}
	if s.Objects, err = r.observeObjects(ctx, dgd); err != nil {
		return nil, err
	}
	if s.AnalysisTemplates, err = r.observeTemplates(ctx, dgd); err != nil {
		return nil, err
	}
	if s.Traffic, err = r.observeTraffic(ctx, dgd, pods); err != nil {
		return nil, err
	}
	s.SSHKeys = r.sshKeysOf(dgd)
	r.nameStable(dgd, s)
	return s, nil
}

// sshKeysOf are the SSH key Secrets of dgd's namespace a create made or found.
func (r *Reconciler) sshKeysOf(dgd *v1alpha1.DynamoGraphDeployment) map[string]bool {
	out := map[string]bool{}
	r.sshKeys.Range(func(k, _ any) bool {
		if key := k.(client.ObjectKey); key.Namespace == dgd.Namespace {
			out[key.Name] = true
		}
		return true
	})
	return out
}

// observeTraffic reads, for every frontend service, what each traffic provider renders
// and looks up (decide.TrafficLookups), from the cache, and the provider's pods among
// the DGD's.
func (r *Reconciler) observeTraffic(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pods []metav1.PartialObjectMetadata) (map[string]traffic.Observed, error) {
	out := map[string]traffic.Observed{}
	for service, l := range decide.TrafficLookups(dgd, r.Providers, r.Traffic) {
		o := traffic.Observed{Objects: map[string]client.Object{}}
		for key, empty := range l.Objects {
			obj := empty.DeepCopyObject().(client.Object)
			switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); {
			case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
			case err != nil:
				return nil, fmt.Errorf("getting %s of %s/%s: %w", key, dgd.Namespace, dgd.Name, err)
			default:
				o.Objects[key] = obj
			}
		}
		for _, sel := range l.Pods {
			for i := range pods {
				if labels.SelectorFromSet(sel).Matches(labels.Set(pods[i].Labels)) {
					o.Pods = append(o.Pods, pods[i])
				}
			}
		}
		out[service] = o
	}
	return out, nil
}

// listPods lists the DGD's pods (metadata only, through the graph index).
func (r *Reconciler) listPods(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]metav1.PartialObjectMetadata, error) {
	var pods metav1.PartialObjectMetadataList
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := backends.ListGraph(ctx, r.Client, &pods, dgd.Namespace, dgd.Name); err != nil {
		return nil, fmt.Errorf("listing pods of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	return pods.Items, nil
}

// observeWorkloads lists the DGD's workloads on every registered backend, and those
// Dynamo's operator left (observeDynamo), sorted by name, with their pods counted.
func (r *Reconciler) observeWorkloads(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pods []metav1.PartialObjectMetadata) ([]decide.Workload, *decide.Dynamo, error) {
	counts := podCounts(dgd, pods)
	dy, out, err := r.observeDynamo(ctx, dgd, pods, counts)
	if err != nil {
		return nil, nil, err
	}
	seen := map[backends.Key]bool{}
	for _, w := range out {
		seen[w.Key] = true
	}
	for _, b := range r.Backends.All() {
		ws, err := b.Observe(ctx, revisions.WithRestart(dgd)) // what decide renders (a stable workload's Outdated)
		if err != nil {
			return nil, nil, err
		}
		for _, w := range ws {
			n := counts[w.Key]
			if seen[w.Key] {
				n = 0 // an outdated stable workload's pods are counted once, with the first
			}
			seen[w.Key] = true
			out = append(out, decide.Workload{Workload: w, Backend: b.Describe().Kind, Pods: n})
		}
	}
	out = append(out, r.podsWithoutWorkload(dgd, counts, seen)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, dy, nil
}

// podCounts counts, per workload, the replicas that still have pods (a gang counts while
// any of its pods is left). Deployment status excludes terminating pods; Recreate must
// wait for them too.
func podCounts(dgd *v1alpha1.DynamoGraphDeployment, pods []metav1.PartialObjectMetadata) map[backends.Key]int32 {
	n := map[backends.Key]int32{}
	for i := range pods {
		n[podKey(dgd, pods[i].Labels)]++
	}
	for k, v := range n {
		if svc := dgd.Spec.Services[k.Service]; svc != nil && svc.NodeCount() > 1 {
			n[k] = (v + svc.NodeCount() - 1) / svc.NodeCount()
		}
	}
	return n
}

// podsWithoutWorkload stands in for worker workloads that are gone while their pods
// are still terminating (a Grove revision's PodCliqueSet is deleted whole and its
// objects vanish before its pods do): terminating, no replicas, their pods counted, so
// Recreate still waits for them and the revision stays in use.
func (r *Reconciler) podsWithoutWorkload(dgd *v1alpha1.DynamoGraphDeployment, pods map[backends.Key]int32, seen map[backends.Key]bool) []decide.Workload {
	var out []decide.Workload
	for k, n := range pods {
		if k.Hash == "" || seen[k] || n == 0 {
			continue
		}
		kind := ""
		if svc := dgd.Spec.Services[k.Service]; svc != nil {
			if b, err := r.Backends.For(dgd, svc); err == nil {
				kind = b.Describe().Kind
			}
		}
		out = append(out, decide.Workload{Pods: n, Backend: kind, Workload: backends.Workload{
			Key: k, Kind: "Pod", Name: fmt.Sprintf("pods of %s at %s", k.Service, k.Hash), Terminating: true, Synced: true}})
	}
	return out
}

// staleWorkload names a workload whose cached replicas differ from the operator's last
// write, or whose status has not caught up with its spec (expectations.fresh), or
// returns "". Every workload is looked at, so that the freshness waits of workloads
// created together start together. A status that reports nothing ready and no replica
// cannot overstate readiness (a workload just created): it needs no wait.
func (r *Reconciler) staleWorkload(dgd *v1alpha1.DynamoGraphDeployment, workloads []decide.Workload) string {
	stale := ""
	for _, w := range workloads {
		if w.Terminating {
			continue
		}
		key := types.NamespacedName{Namespace: dgd.Namespace, Name: w.Name}
		synced := w.Synced || w.Ready == 0 && w.Current == 0
		if !r.expected.satisfied(key, w.Replicas) || !r.expected.fresh(key, w.Generation, synced) {
			if stale == "" {
				stale = w.Name
			}
		}
	}
	return stale
}

// observeObjects reads the Services and Ingresses the DGD controls and the objects of
// fixed names its pods may need (decide.Lookups).
func (r *Reconciler) observeObjects(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) (decide.Objects, error) {
	var o decide.Objects
	var svcs corev1.ServiceList
	if err := backends.ListControlled(ctx, r.Client, &svcs, dgd); err != nil {
		return o, fmt.Errorf("listing Services of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	var ings networkingv1.IngressList
	if err := backends.ListControlled(ctx, r.Client, &ings, dgd); err != nil {
		return o, fmt.Errorf("listing Ingresses of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	o.Services, o.Ingresses, o.Named = svcs.Items, ings.Items, map[string]client.Object{}
	for _, l := range decide.Lookups(dgd) {
		var reader client.Reader = r.Client
		if l.Live && r.APIReader != nil {
			reader = r.APIReader
		}
		obj := l.Object.DeepCopyObject().(client.Object)
		switch err := reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return o, fmt.Errorf("getting %s of %s/%s: %w", l.Key(), dgd.Namespace, dgd.Name, err)
		default:
			o.Named[l.Key()] = obj
		}
	}
	return o, nil
}

// nameStable asks the backends that name their workloads from what the cluster holds
// (Grove picks the first free PodCliqueSet name) for the names of the DGD's stable
// workloads, which every pass reports.
func (r *Reconciler) nameStable(dgd *v1alpha1.DynamoGraphDeployment, s *decide.Snapshot) {
	for _, name := range dgd.ServiceNames() {
		svc := dgd.Spec.Services[name]
		if svc.IsWorker() {
			continue
		}
		if b, err := r.Backends.For(dgd, svc); err == nil && b.Describe().Names == nil {
			key := backends.Key{Service: name}
			s.Names[key] = b.Name(dgd, key)
		}
	}
}

// observeMore reads what a decision says it needs into the snapshot: the names of
// workloads, the DGD's pods the scheduler could not place, what holds the names its
// writes would create objects under.
func (r *Reconciler) observeMore(ctx context.Context, s *decide.Snapshot, needs decide.Needs) error {
	dgd := s.DGD
	for _, n := range needs.Names {
		if b := r.Backends.ByKind(n.Backend); b != nil {
			s.Names[n.Key] = b.Name(dgd, n.Key)
		}
	}
	for _, n := range needs.Holders {
		h, err := r.holder(ctx, dgd.Namespace, n)
		if err != nil {
			return err
		}
		s.Holders[n.ObjectName] = h
	}
	if needs.Unscheduled {
		pods, err := r.unscheduled.list(ctx, r.APIReader, dgd.Namespace, s.Now)
		if err != nil {
			return fmt.Errorf("listing unscheduled pods of %s/%s: %w", dgd.Namespace, dgd.Name, err)
		}
		s.Unscheduled, s.UnscheduledListed = pods, true
	}
	return nil
}

// holder reads what holds the name n in ns, past the cache (which holds only the
// operator's labelled objects): nothing, or an object and its controller.
func (r *Reconciler) holder(ctx context.Context, ns string, n decide.HolderNeed) (decide.Holder, error) {
	var obj client.Object
	switch {
	case n.Object != nil:
		obj = n.Object.DeepCopyObject().(client.Object)
	case r.Backends.ByKind(n.Backend) != nil:
		obj = r.Backends.ByKind(n.Backend).Objects()[0]
	default:
		return decide.Holder{}, fmt.Errorf("no backend manages %s", n.Backend)
	}
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	switch err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: n.Name}, obj); {
	case apierrors.IsNotFound(err):
		return decide.Holder{}, nil
	case err != nil:
		return decide.Holder{}, fmt.Errorf("getting %s %s/%s: %w", n.Kind, ns, n.Name, err)
	}
	return decide.Holder{Exists: true, Controller: metav1.GetControllerOf(obj), Deleting: !obj.GetDeletionTimestamp().IsZero()}, nil
}

// logMeasured logs the analysis measurements a pass took.
func logMeasured(ctx context.Context, d decide.Decision) {
	for _, m := range d.Measured {
		log.FromContext(ctx).V(1).Info("measured", "metric", m.Metric, "query", m.Query, "phase", m.Measurement.Phase,
			"value", m.Measurement.Value, "message", m.Measurement.Message)
	}
}
