package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// How the take-over (dynamo.go, dynamo_ingress.go, dynamo_disaggregatedset.go) knows
// Dynamo's objects, and reads kinds the cache does not hold.

// dynamoPod reports whether a pod of the DGD (its labels) was made by Dynamo's operator
// on its component pathway: it carries no app.kubernetes.io/managed-by at all (Dynamo
// labels a DCD's pods with the DCD's labels, GetDCDKubeLabels, and sets none). Not "any
// value but ours": Grove labels every pod of a PodCliqueSet managed-by grove-operator
// over the template's labels (grove PodClique getLabels; test/harness/grove.go), so each
// pod of a DGD of ours on Grove would look like Dynamo's and stop the DGD.
func dynamoPod(labels map[string]string) bool {
	_, set := labels[v1alpha1.LabelManagedBy]
	return !set
}

// dynamos reports whether o is Dynamo's: not ours, and controlled by a DCD or by nothing
// (a DCD deleted with --cascade=orphan leaves its objects without a controller).
func dynamos(o metav1.Object) bool {
	if o.GetLabels()[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue {
		return false
	}
	ref := metav1.GetControllerOf(o)
	return ref == nil || ref.Kind == decide.DCDKind
}

// listMetadata lists, past the cache, the metadata of the objects of kind gvk that opts
// select; served is false, with none and no error, when the cluster does not serve the
// kind (its CRD is not installed: Grove's, Dynamo's, LWS's DisaggregatedSet, Istio's).
func (r *Reconciler) listMetadata(ctx context.Context, gvk schema.GroupVersionKind, opts ...client.ListOption) (items []metav1.PartialObjectMetadata, served bool, err error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	switch err := r.APIReader.List(ctx, list, opts...); {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return list.Items, true, nil
}
