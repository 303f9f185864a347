// Package lws is the LeaderWorkerSet backend: one LeaderWorkerSet per (worker service,
// revision) whose replicas are gangs of multinode.nodeCount pods (a leader and
// nodeCount-1 workers). The template never changes after creation, so LWS's own rolling
// update never runs; replicas are moved only by the planner, through Scale. Every field
// LWS's defaulting webhook would set is set here, so correctness never depends on it.
package lws

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/render"
)

// Kind is the workload kind of this backend.
const Kind = "LeaderWorkerSet"

// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets/scale,verbs=get;update

// Backend manages LeaderWorkerSets.
type Backend struct {
	Client client.Client
	Scheme *runtime.Scheme
	// Reader, when set (the manager's API reader), reads past the cache, which holds
	// only the operator's labelled objects (app.CacheOptions): a create answered
	// AlreadyExists is judged on the live object (backends.ExistingOnCreate).
	Reader client.Reader
	// Config is the platform every pod is rendered for.
	Config render.Config
}

var _ backends.Backend = (*Backend)(nil)

// New returns a LeaderWorkerSet backend.
func New(c client.Client, s *runtime.Scheme, cfg render.Config) *Backend {
	return &Backend{Client: c, Scheme: s, Config: cfg}
}

// Kind implements backends.Backend.
func (b *Backend) Kind() string { return Kind }

// Name implements backends.Backend: backends.GangSetName, so that the headless Service
// LWS creates under the LeaderWorkerSet's name is never one of ours.
func (b *Backend) Name(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) string {
	return backends.GangSetName(dgd.Name, key.Service, key.Hash)
}

// Objects implements backends.Backend.
func (b *Backend) Objects() []client.Object { return []client.Object{&lwsv1.LeaderWorkerSet{}} }

// Ensure implements backends.Backend. A stable (non-worker) multinode service is
// updated in place like any stable workload: template and replicas. A stable
// LeaderWorkerSet named like the service's own Service (`{dgd}-{service}`, before
// GangSetName) is replaced by one of the new name beside it: Observe reports the old
// one Outdated and the controller deletes it once the new one is ready.
func (b *Backend) Ensure(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool) error {
	for _, sw := range pool.Services {
		want, err := b.render(dgd, sw)
		if err != nil {
			return err
		}
		var have lwsv1.LeaderWorkerSet
		err = b.Client.Get(ctx, client.ObjectKeyFromObject(want), &have)
		switch {
		case apierrors.IsNotFound(err):
			if err := b.Client.Create(ctx, want); apierrors.IsAlreadyExists(err) {
				if err := backends.ExistingOnCreate(ctx, b.Reader, b.Client, want, dgd, Kind); err != nil {
					return err
				}
			} else if err != nil {
				return fmt.Errorf("creating LeaderWorkerSet %s/%s: %w", want.Namespace, want.Name, err)
			}
		case err != nil:
			return fmt.Errorf("getting LeaderWorkerSet %s/%s: %w", want.Namespace, want.Name, err)
		case !metav1.IsControlledBy(&have, dgd):
			return backends.NotControlled(Kind, &have, dgd)
		case sw.Hash == "":
			if err := b.updateStable(ctx, &have, want); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Backend) updateStable(ctx context.Context, have, want *lwsv1.LeaderWorkerSet) error {
	if have.Annotations[backends.AnnotationTemplateHash] == want.Annotations[backends.AnnotationTemplateHash] &&
		ptr.Deref(have.Spec.Replicas, 1) == ptr.Deref(want.Spec.Replicas, 1) {
		return nil
	}
	patch := client.MergeFrom(have.DeepCopy())
	if have.Annotations == nil {
		have.Annotations = map[string]string{}
	}
	have.Annotations[backends.AnnotationTemplateHash] = want.Annotations[backends.AnnotationTemplateHash]
	have.Spec.Replicas = want.Spec.Replicas
	have.Spec.RolloutStrategy = want.Spec.RolloutStrategy
	have.Spec.LeaderWorkerTemplate.LeaderTemplate = want.Spec.LeaderWorkerTemplate.LeaderTemplate
	have.Spec.LeaderWorkerTemplate.WorkerTemplate = want.Spec.LeaderWorkerTemplate.WorkerTemplate
	if err := b.Client.Patch(ctx, have, patch); err != nil {
		return fmt.Errorf("updating LeaderWorkerSet %s/%s: %w", have.Namespace, have.Name, err)
	}
	return nil
}

// render builds the LeaderWorkerSet of one (service, revision): size = nodeCount, the
// leader's and the workers' pod templates as render wires them for a LeaderWorkerSet
// group (one pod template for both when the service is single-node).
func (b *Backend) render(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload) (*lwsv1.LeaderWorkerSet, error) {
	comp := backends.Component(dgd, sw, b.Config)
	leader, tmpl, err := templates(comp)
	if err != nil {
		return nil, err
	}
	lws := &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:        backends.GangSetName(dgd.Name, sw.Service, sw.Hash),
			Namespace:   dgd.Namespace,
			Labels:      backends.Labels(dgd, sw.Service, sw.Hash),
			Annotations: map[string]string{backends.AnnotationTemplateHash: backends.TemplateHash([]any{leader, tmpl})},
		},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas: ptr.To(sw.Replicas),
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
				LeaderTemplate: &leader,
				WorkerTemplate: tmpl,
				Size:           ptr.To(sw.Spec.NodeCount()),
				RestartPolicy:  lwsv1.RecreateGroupOnPodRestart,
			},
			RolloutStrategy: rolloutStrategy(sw.Hash == ""),
			StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
			NetworkConfig:   &lwsv1.NetworkConfig{SubdomainPolicy: ptr.To(lwsv1.SubdomainShared)},
		},
	}
	if err := controllerutil.SetControllerReference(dgd, lws, b.Scheme); err != nil {
		return nil, err
	}
	return lws, nil
}

// Observe implements backends.Backend. Ready is LWS readyReplicas: groups whose leader
// and every worker are ready. LeaderWorkerSets are found by controller reference and
// (service, revision) read from the worker template, which never changes, so one whose
// labels were stripped by hand is still counted and drained; its labels are put back.
func (b *Backend) Observe(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]backends.Workload, error) {
	var list lwsv1.LeaderWorkerSetList
	if err := backends.ListControlled(ctx, b.Client, &list, dgd); err != nil {
		return nil, fmt.Errorf("listing LeaderWorkerSets of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	var out []backends.Workload
	for i := range list.Items {
		l := &list.Items[i]
		if !metav1.IsControlledBy(l, dgd) {
			continue
		}
		tl := l.Spec.LeaderWorkerTemplate.WorkerTemplate.Labels
		key := backends.Key{Service: tl[v1alpha1.LabelService], Hash: tl[v1alpha1.LabelWorkerHash]}
		if err := backends.RestoreLabels(ctx, b.Client, l, backends.Labels(dgd, key.Service, key.Hash)); err != nil {
			return nil, err
		}
		out = append(out, backends.Workload{
			Key:         key,
			Kind:        Kind,
			Name:        l.Name,
			UID:         l.UID,
			Replicas:    ptr.Deref(l.Spec.Replicas, 1),
			Ready:       l.Status.ReadyReplicas,
			Updated:     l.Status.UpdatedReplicas,
			Current:     l.Status.Replicas,
			Synced:      l.Status.ObservedGeneration >= l.Generation,
			Generation:  l.Generation,
			Terminating: !l.DeletionTimestamp.IsZero(),
			Outdated:    key.Hash == "" && l.Name != b.Name(dgd, key),
		})
	}
	return out, nil
}

// Scale implements backends.Backend.
func (b *Backend) Scale(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, key backends.Key, replicas int32) error {
	name := client.ObjectKey{Namespace: dgd.Namespace, Name: b.Name(dgd, key)}
	return backends.ScaleReplicas(ctx, b.Client, &lwsv1.LeaderWorkerSet{}, name, Kind,
		func(l *lwsv1.LeaderWorkerSet) *int32 { return l.Spec.Replicas }, replicas)
}

// Delete implements backends.Backend.
func (b *Backend) Delete(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w backends.Workload) error {
	return backends.DeleteObject(ctx, b.Client, &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{
		Namespace: dgd.Namespace, Name: w.Name, UID: w.UID}}, Kind)
}

// templates are the leader's and the workers' pod templates of a component.
func templates(comp render.Component) (corev1.PodTemplateSpec, corev1.PodTemplateSpec, error) {
	if !comp.Spec.IsMultinode() {
		t, err := comp.Pod(render.RoleMain, nil)
		return *t.DeepCopy(), t, err
	}
	leader, err := comp.Pod(render.RoleLeader, render.LWS{})
	if err != nil {
		return leader, leader, err
	}
	worker, err := comp.Pod(render.RoleWorker, render.LWS{})
	return leader, worker, err
}

// rolloutStrategy is LWS's own rolling update. A worker revision's template never
// changes, so it never runs: these are the values LWS's defaulting webhook would set.
// A stable service's LeaderWorkerSet is updated in place: it surges a group before
// taking one down (maxSurge 1, maxUnavailable 0), so it never has fewer ready groups
// than replicas; LWS's default (0 / 1) would take a group down first.
func rolloutStrategy(stable bool) lwsv1.RolloutStrategy {
	cfg := &lwsv1.RollingUpdateConfiguration{Partition: ptr.To[int32](0), MaxUnavailable: intstr.FromInt32(1), MaxSurge: intstr.FromInt32(0)}
	if stable {
		cfg.MaxUnavailable, cfg.MaxSurge = intstr.FromInt32(0), intstr.FromInt32(1)
	}
	return lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType, RollingUpdateConfiguration: cfg}
}

var _ backends.GangLeaders = (*Backend)(nil)

// Leader implements backends.GangLeaders: LWS's pod webhook labels every pod of a group
// with its index in it, 0 for the leader (lws v0.9.0 pkg/webhooks/pod_webhook.go,
// leaderworkerset.sigs.k8s.io/worker-index).
func (b *Backend) Leader(podLabels map[string]string) bool {
	i, ok := podLabels[lwsv1.WorkerIndexLabelKey]
	return !ok || i == "0"
}

var _ backends.SubdomainReleaser = (*Backend)(nil)

// AnnotationSubdomainReleased is set on a LeaderWorkerSet once the operator has deleted
// a Service of its own that had the LeaderWorkerSet's name (an operator before issue 22
// named a revision's discovery Service so): the annotation's write is the event on
// which LWS's controller creates the group's headless Service. It is metadata only:
// LWS's revision hash covers the template, so nothing rolls.
const AnnotationSubdomainReleased = "nvidia.com/dgd-subdomain-service-released"

// ReleaseSubdomain implements backends.SubdomainReleaser.
func (b *Backend) ReleaseSubdomain(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, workload string) error {
	l := &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Namespace: dgd.Namespace, Name: workload}}
	patch := []byte(`{"metadata":{"annotations":{"` + AnnotationSubdomainReleased + `":"true"}}}`)
	if err := b.Client.Patch(ctx, l, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotating LeaderWorkerSet %s/%s: %w", dgd.Namespace, workload, err)
	}
	return nil
}
