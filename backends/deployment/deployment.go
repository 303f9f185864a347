// Package deployment is the Deployment backend: one apps/v1 Deployment per (service,
// revision), whose replicas are pods. It renders, observes and scales; it decides nothing.
package deployment

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/render"
)

// Kind is the workload kind of this backend.
const Kind = "Deployment"

// +kubebuilder:rbac:groups=apps,resources=deployments/scale,verbs=get;update

// Backend manages Deployments.
type Backend struct {
	Client client.Client
	// Reader reads a Deployment from the API server where the cached copy is not
	// enough: the operator caches Deployments without their pod spec
	// (app.CacheOptions), so a stable workload's template is patched against the live
	// object.
	Reader client.Reader
	Scheme *runtime.Scheme
	// Config is the platform every pod is rendered for.
	Config render.Config
}

var (
	_ backends.Backend            = (*Backend)(nil)
	_ backends.UnreadyFirstScaler = (*Backend)(nil)
)

// New returns a Deployment backend that writes with c and reads live Deployments with
// r (the manager's API reader).
func New(c client.Client, r client.Reader, s *runtime.Scheme, cfg render.Config) *Backend {
	return &Backend{Client: c, Reader: r, Scheme: s, Config: cfg}
}

// Kind implements backends.Backend.
func (b *Backend) Kind() string { return Kind }

// Name implements backends.Backend.
func (b *Backend) Name(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) string {
	return backends.WorkloadName(dgd.Name, key.Service, key.Hash)
}

// Objects implements backends.Backend.
func (b *Backend) Objects() []client.Object { return []client.Object{&appsv1.Deployment{}} }

// ScaleDownRemovesUnreadyFirst implements backends.UnreadyFirstScaler: a ReplicaSet
// deletes not-ready pods before ready ones.
func (b *Backend) ScaleDownRemovesUnreadyFirst() bool { return true }

// Ensure implements backends.Backend.
func (b *Backend) Ensure(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, pool backends.Pool) error {
	for _, sw := range pool.Services {
		if err := b.ensureOne(ctx, dgd, sw); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) ensureOne(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload) error {
	want, err := b.render(dgd, sw)
	if err != nil {
		return err
	}
	var have appsv1.Deployment
	err = b.Client.Get(ctx, client.ObjectKeyFromObject(want), &have)
	if apierrors.IsNotFound(err) {
		if err := b.Client.Create(ctx, want); apierrors.IsAlreadyExists(err) {
			return backends.ExistingOnCreate(ctx, b.Reader, b.Client, want, dgd, Kind)
		} else if err != nil {
			return fmt.Errorf("creating Deployment %s/%s: %w", want.Namespace, want.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting Deployment %s/%s: %w", want.Namespace, want.Name, err)
	}
	if !metav1.IsControlledBy(&have, dgd) {
		return backends.NotControlled(Kind, &have, dgd)
	}
	if sw.Hash != "" {
		return nil // a worker revision's template never changes; Scale moves replicas
	}
	return b.updateStable(ctx, &have, want)
}

// updateStable updates a stable workload in place (template, labels, replicas) only when
// something the operator renders differs (the template hash annotation or the
// replicas, both in the cached copy). The patch is computed against the live object,
// whose pod spec the cache does not hold, so that a field removed from the template
// is removed from the Deployment.
func (b *Backend) updateStable(ctx context.Context, have, want *appsv1.Deployment) error {
	same := have.Annotations[backends.AnnotationTemplateHash] == want.Annotations[backends.AnnotationTemplateHash] &&
		ptr.Deref(have.Spec.Replicas, 1) == ptr.Deref(want.Spec.Replicas, 1)
	if same {
		return nil
	}
	have = &appsv1.Deployment{}
	if err := b.Reader.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		return fmt.Errorf("reading Deployment %s/%s: %w", want.Namespace, want.Name, err)
	}
	patch := client.MergeFrom(have.DeepCopy())
	if have.Annotations == nil {
		have.Annotations = map[string]string{}
	}
	if have.Labels == nil {
		have.Labels = map[string]string{}
	}
	maps.Copy(have.Labels, want.Labels)
	have.Annotations[backends.AnnotationTemplateHash] = want.Annotations[backends.AnnotationTemplateHash]
	have.Spec.Replicas = want.Spec.Replicas
	have.Spec.Template = want.Spec.Template
	if err := b.Client.Patch(ctx, have, patch); err != nil {
		return fmt.Errorf("updating Deployment %s/%s: %w", have.Namespace, have.Name, err)
	}
	return nil
}

func (b *Backend) render(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload) (*appsv1.Deployment, error) {
	tmpl, err := backends.Component(dgd, sw, b.Config).Pod(render.RoleMain, nil)
	if err != nil {
		return nil, err
	}
	labels := backends.Labels(dgd, sw.Service, sw.Hash)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:        backends.WorkloadName(dgd.Name, sw.Service, sw.Hash),
			Namespace:   dgd.Namespace,
			Labels:      labels,
			Annotations: map[string]string{backends.AnnotationTemplateHash: backends.TemplateHash(tmpl)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(sw.Replicas),
			Selector: selector(dgd, sw),
			Template: tmpl,
		},
	}
	if sw.Hash != "" {
		// The template of a worker revision never changes, so the Deployment's own rolling
		// update never runs; Recreate keeps it from surging if someone edits it by hand.
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	}
	if err := controllerutil.SetControllerReference(dgd, d, b.Scheme); err != nil {
		return nil, err
	}
	return d, nil
}

// selector selects the pods of one workload. A stable workload's selector also requires
// the worker-hash label to be absent, so it can never adopt worker pods of the service.
func selector(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: backends.SelectorLabels(dgd, sw.Service, sw.Hash)}
	if sw.Hash == "" {
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{
			Key: v1alpha1.LabelWorkerHash, Operator: metav1.LabelSelectorOpDoesNotExist}}
	}
	return s
}

// Observe implements backends.Backend. Workloads are found by controller reference, and
// (service, revision) read from the immutable selector, so a Deployment whose labels were
// stripped by hand is still counted, drained and deleted; its labels are put back.
func (b *Backend) Observe(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]backends.Workload, error) {
	var list appsv1.DeploymentList
	if err := backends.ListControlled(ctx, b.Client, &list, dgd); err != nil {
		return nil, fmt.Errorf("listing Deployments of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	var out []backends.Workload
	for i := range list.Items {
		d := &list.Items[i]
		if !metav1.IsControlledBy(d, dgd) || d.Spec.Selector == nil {
			continue
		}
		sel := d.Spec.Selector.MatchLabels
		key := backends.Key{Service: sel[v1alpha1.LabelService], Hash: sel[v1alpha1.LabelWorkerHash]}
		if err := backends.RestoreLabels(ctx, b.Client, d, backends.Labels(dgd, key.Service, key.Hash)); err != nil {
			return nil, err
		}
		out = append(out, backends.Workload{
			Key:         key,
			Kind:        Kind,
			Name:        d.Name,
			UID:         d.UID,
			Replicas:    ptr.Deref(d.Spec.Replicas, 1),
			Ready:       d.Status.AvailableReplicas,
			Updated:     d.Status.UpdatedReplicas,
			Current:     d.Status.Replicas,
			Synced:      d.Status.ObservedGeneration >= d.Generation,
			Generation:  d.Generation,
			Terminating: !d.DeletionTimestamp.IsZero(),
		})
	}
	return out, nil
}

// Scale implements backends.Backend.
func (b *Backend) Scale(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, key backends.Key, replicas int32) error {
	name := client.ObjectKey{Namespace: dgd.Namespace, Name: backends.WorkloadName(dgd.Name, key.Service, key.Hash)}
	return backends.ScaleReplicas(ctx, b.Client, &appsv1.Deployment{}, name, Kind,
		func(d *appsv1.Deployment) *int32 { return d.Spec.Replicas }, replicas)
}

// Delete implements backends.Backend.
func (b *Backend) Delete(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, w backends.Workload) error {
	return backends.DeleteObject(ctx, b.Client, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Namespace: dgd.Namespace, Name: w.Name, UID: w.UID}}, Kind)
}
