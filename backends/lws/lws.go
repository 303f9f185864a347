// Package lws is the LeaderWorkerSet backend: one LeaderWorkerSet per (worker service,
// revision) whose replicas are gangs of multinode.nodeCount pods (a leader and
// nodeCount-1 workers). It is a Kind of the single-object adapter (backends/single).
// The template never changes after creation, so LWS's own rolling update never runs;
// replicas are moved only by the planner, through Scale. Every field LWS's defaulting
// webhook would set is set here, so correctness never depends on it.
package lws

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/single"
	"github.com/dgd-rollout/operator/render"
)

// Kind is the workload kind of this backend.
const Kind = "LeaderWorkerSet"

// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets/scale,verbs=get;update

// Backend manages LeaderWorkerSets.
type Backend = single.Adapter[*lwsv1.LeaderWorkerSet]

// AnnotationSubdomainReleased is the annotation ReleaseSubdomain sets.
const AnnotationSubdomainReleased = single.AnnotationSubdomainReleased

// New returns a LeaderWorkerSet backend. A stable (non-worker) multinode service is
// updated in place like any stable workload: template and replicas. A stable
// LeaderWorkerSet named like the service's own Service (`{dgd}-{service}`, before
// GangSetName) is replaced by one of the new name beside it: Observe reports the old
// one Outdated and the controller deletes it once the new one is ready.
func New(c client.Client, s *runtime.Scheme, cfg render.Config) *Backend {
	return &Backend{Kind: kind(s, cfg), Client: c}
}

func kind(s *runtime.Scheme, cfg render.Config) single.Kind[*lwsv1.LeaderWorkerSet] {
	return single.Kind[*lwsv1.LeaderWorkerSet]{
		Description: backends.Description{
			Kind: Kind,
			// LWS creates a headless Service under its own name only when none exists.
			ReleasesSubdomain: true,
			// backends.GangSetName, so that the headless Service LWS creates under the
			// LeaderWorkerSet's name is never one of ours.
			Names: func(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) string {
				return backends.GangSetName(dgd.Name, key.Service, key.Hash)
			},
		},
		New:     func() *lwsv1.LeaderWorkerSet { return &lwsv1.LeaderWorkerSet{} },
		NewList: func() client.ObjectList { return &lwsv1.LeaderWorkerSetList{} },
		Render: func(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload) (*lwsv1.LeaderWorkerSet, error) {
			return renderLWS(dgd, sw, s, cfg)
		},
		// (service, revision) from the worker template, which never changes, so one
		// whose labels were stripped by hand is still counted and drained.
		Key: func(l *lwsv1.LeaderWorkerSet) (backends.Key, bool) {
			tl := l.Spec.LeaderWorkerTemplate.WorkerTemplate.Labels
			return backends.Key{Service: tl[v1alpha1.LabelService], Hash: tl[v1alpha1.LabelWorkerHash]}, true
		},
		Replicas: func(l *lwsv1.LeaderWorkerSet) *int32 { return l.Spec.Replicas },
		// Ready is LWS readyReplicas: groups whose leader and every worker are ready.
		Status: func(l *lwsv1.LeaderWorkerSet) single.Status {
			return single.Status{Ready: l.Status.ReadyReplicas, Updated: l.Status.UpdatedReplicas,
				Current: l.Status.Replicas, ObservedGeneration: l.Status.ObservedGeneration}
		},
		Stable: func(have, want *lwsv1.LeaderWorkerSet) {
			have.Spec.Replicas = want.Spec.Replicas
			have.Spec.RolloutStrategy = want.Spec.RolloutStrategy
			have.Spec.LeaderWorkerTemplate.LeaderTemplate = want.Spec.LeaderWorkerTemplate.LeaderTemplate
			have.Spec.LeaderWorkerTemplate.WorkerTemplate = want.Spec.LeaderWorkerTemplate.WorkerTemplate
		},
		Leader: leader,
	}
}

// render builds the LeaderWorkerSet of one (service, revision): size = nodeCount, the
// leader's and the workers' pod templates as render wires them for a LeaderWorkerSet
// group (one pod template for both when the service is single-node).
func renderLWS(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload, s *runtime.Scheme, cfg render.Config) (*lwsv1.LeaderWorkerSet, error) {
	comp := backends.Component(dgd, sw, cfg)
	leader, tmpl, err := templates(comp)
	if err != nil {
		return nil, err
	}
	lws := &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:        backends.GangSetName(dgd.Name, sw.Service, sw.Hash),
			Namespace:   dgd.Namespace,
			Labels:      backends.Labels(dgd, sw.Service, sw.Hash),
			Annotations: map[string]string{backends.AnnotationTemplateHash: backends.TemplateHash(struct{ Leader, Worker corev1.PodTemplateSpec }{leader, tmpl})},
		},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas: ptr.To(sw.Replicas),
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
				LeaderTemplate: &leader,
				WorkerTemplate: tmpl,
				Size:           ptr.To(sw.Spec.NodeCount()),
				RestartPolicy:  lwsv1.RecreateGroupOnPodRestart,
			},
			RolloutStrategy: rolloutStrategy(sw.Hash == "" || sw.InPlace), // a cohort's frontend updates in place too
			StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
			NetworkConfig:   &lwsv1.NetworkConfig{SubdomainPolicy: ptr.To(lwsv1.SubdomainShared)},
		},
	}
	lws.OwnerReferences = []metav1.OwnerReference{v1alpha1.ControllerRef(dgd)}
	return lws, nil
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

// leader reports whether a pod leads its group: LWS's pod webhook labels every pod of a
// group with its index in it, 0 for the leader (lws v0.9.0 pkg/webhooks/pod_webhook.go,
// leaderworkerset.sigs.k8s.io/worker-index).
func leader(podLabels map[string]string) bool {
	i, ok := podLabels[lwsv1.WorkerIndexLabelKey]
	return !ok || i == "0"
}
