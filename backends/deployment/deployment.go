// Package deployment is the Deployment backend: one apps/v1 Deployment per (service,
// revision), whose replicas are pods. It is a Kind of the single-object adapter
// (backends/single): it says how a Deployment is rendered and read; it decides nothing.
package deployment

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/backends/single"
	"github.com/dgd-rollout/operator/render"
)

// Kind is the workload kind of this backend.
const Kind = "Deployment"

// +kubebuilder:rbac:groups=apps,resources=deployments/scale,verbs=get;update

// Backend manages Deployments.
type Backend = single.Adapter[*appsv1.Deployment]

// New returns a Deployment backend that writes with c and reads live Deployments with
// r (the manager's API reader): the operator caches Deployments without their pod spec
// (app.CacheOptions), so a stable workload's template is patched against the live
// object.
func New(c client.Client, r client.Reader, s *runtime.Scheme, cfg render.Config) *Backend {
	return &Backend{Kind: kind(s, cfg), Client: c, Reader: r}
}

func kind(s *runtime.Scheme, cfg render.Config) single.Kind[*appsv1.Deployment] {
	return single.Kind[*appsv1.Deployment]{
		Description: backends.Description{
			Kind: Kind,
			// A ReplicaSet deletes not-ready pods before ready ones.
			RemovesUnreadyFirst: true,
			// The rendered Deployments keep minReadySeconds 0.
			ReadyIsPodReady: true,
			Names: func(dgd *v1alpha1.DynamoGraphDeployment, key backends.Key) string {
				return backends.WorkloadName(dgd.Name, key.Service, key.Hash)
			},
		},
		New:     func() *appsv1.Deployment { return &appsv1.Deployment{} },
		NewList: func() client.ObjectList { return &appsv1.DeploymentList{} },
		Render: func(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload) (*appsv1.Deployment, error) {
			return renderDeployment(dgd, sw, s, cfg)
		},
		Key:      key,
		Replicas: func(d *appsv1.Deployment) *int32 { return d.Spec.Replicas },
		Status: func(d *appsv1.Deployment) single.Status {
			return single.Status{Ready: d.Status.AvailableReplicas, Updated: d.Status.UpdatedReplicas,
				Current: d.Status.Replicas, ObservedGeneration: d.Status.ObservedGeneration}
		},
		Stable: func(have, want *appsv1.Deployment) {
			have.Spec.Replicas = want.Spec.Replicas
			have.Spec.Template = want.Spec.Template
		},
	}
}

// key reads (service, revision) from the Deployment's selector, which is immutable, so
// a Deployment whose labels were stripped by hand is still counted, drained and deleted.
func key(d *appsv1.Deployment) (backends.Key, bool) {
	if d.Spec.Selector == nil {
		return backends.Key{}, false
	}
	sel := d.Spec.Selector.MatchLabels
	if sel[v1alpha1.LabelService] == "" || sel[v1alpha1.LabelTrafficProxy] != "" {
		// None of a service's: the traffic proxy's Deployment is the DGD's too.
		return backends.Key{}, false
	}
	return backends.Key{Service: sel[v1alpha1.LabelService], Hash: sel[v1alpha1.LabelWorkerHash]}, true
}

func renderDeployment(dgd *v1alpha1.DynamoGraphDeployment, sw backends.ServiceWorkload, s *runtime.Scheme, cfg render.Config) (*appsv1.Deployment, error) {
	tmpl, err := backends.Component(dgd, sw, cfg).Pod(render.RoleMain, nil)
	if err != nil {
		return nil, err
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:        backends.WorkloadName(dgd.Name, sw.Service, sw.Hash),
			Namespace:   dgd.Namespace,
			Labels:      backends.Labels(dgd, sw.Service, sw.Hash),
			Annotations: map[string]string{backends.AnnotationTemplateHash: backends.TemplateHash(tmpl)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(sw.Replicas),
			Selector: selector(dgd, sw),
			Template: tmpl,
		},
	}
	if sw.Hash != "" && !sw.InPlace {
		// The template of a worker revision never changes, so the Deployment's own rolling
		// update never runs; Recreate keeps it from surging if someone edits it by hand.
		// A cohort's frontend (InPlace) keeps the default RollingUpdate: a frontend-only
		// change updates it in place, without taking its pods down first.
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	}
	d.OwnerReferences = []metav1.OwnerReference{v1alpha1.ControllerRef(dgd)}
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
