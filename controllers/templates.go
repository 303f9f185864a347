package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/api/v1beta1"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// templateIndex indexes DGDs by the analysis templates their steps reference, as
// templateKey writes them: a changed template re-runs the passes of its DGDs.
const templateIndex = "spec.rollout.steps.analysis.templates"

// templateKey is an index value: the template's kind and name (a namespaced template's
// DGDs are in its namespace, which the index is listed in).
func templateKey(ref v1alpha1.AnalysisTemplateRef) string {
	return ref.Kind() + "/" + ref.TemplateName
}

// indexTemplates registers templateIndex on the DGDs the controller watches (v1beta1,
// whose spec.rollout is v1alpha1's).
func indexTemplates(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &v1beta1.DynamoGraphDeployment{}, templateIndex, func(o client.Object) []string {
		dgd := o.(*v1beta1.DynamoGraphDeployment)
		refs := decide.TemplateRefs(&v1alpha1.DynamoGraphDeployment{Spec: v1alpha1.DynamoGraphDeploymentSpec{Rollout: dgd.Spec.Rollout}})
		var out []string
		for _, r := range refs {
			out = append(out, templateKey(r))
		}
		return out
	})
}

// watchTemplates re-runs the passes of the DGDs that reference an AnalysisTemplate or
// ClusterAnalysisTemplate when it is created, changed or deleted.
func (r *Reconciler) watchTemplates(b *builder.Builder) *builder.Builder {
	return b.Watches(&v1alpha1.AnalysisTemplate{}, handler.EnqueueRequestsFromMapFunc(r.templateToDGDs(false))).
		Watches(&v1alpha1.ClusterAnalysisTemplate{}, handler.EnqueueRequestsFromMapFunc(r.templateToDGDs(true)))
}

// templateToDGDs maps a template to the DGDs that reference it (templateIndex): those
// of its namespace, or of every namespace for a ClusterAnalysisTemplate.
func (r *Reconciler) templateToDGDs(cluster bool) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		key := templateKey(v1alpha1.AnalysisTemplateRef{TemplateName: o.GetName(), ClusterScope: cluster})
		opts := []client.ListOption{client.MatchingFields{templateIndex: key}}
		if !cluster {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		var list v1beta1.DynamoGraphDeploymentList
		if err := r.Client.List(ctx, &list, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the DGDs of an analysis template", "template", key)
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, d := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: d.Namespace, Name: d.Name}})
		}
		return out
	}
}

// observeTemplates reads the analysis templates the DGD's steps reference from the
// cache; one that does not exist is left out (decide reports it, naming it).
func (r *Reconciler) observeTemplates(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) (decide.Templates, error) {
	refs := decide.TemplateRefs(dgd)
	if len(refs) == 0 {
		return nil, nil
	}
	out := decide.Templates{}
	for _, ref := range refs {
		var obj client.Object = &v1alpha1.AnalysisTemplate{}
		key := client.ObjectKey{Namespace: dgd.Namespace, Name: ref.TemplateName}
		if ref.ClusterScope {
			obj, key.Namespace = &v1alpha1.ClusterAnalysisTemplate{}, ""
		}
		switch err := r.Client.Get(ctx, key, obj); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("getting %s %q of %s/%s: %w", ref.Kind(), ref.TemplateName, dgd.Namespace, dgd.Name, err)
		}
		switch t := obj.(type) {
		case *v1alpha1.AnalysisTemplate:
			out[ref] = &t.Spec
		case *v1alpha1.ClusterAnalysisTemplate:
			out[ref] = &t.Spec
		}
	}
	return out, nil
}
