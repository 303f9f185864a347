package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
	"github.com/dgd-rollout/operator/controllers/decide"
)

// dynamoLastApplied is the annotation Dynamo's operator puts on every object it writes
// (controller_common.SyncResource, NvidiaAnnotationHashKey).
const dynamoLastApplied = "nvidia.com/last-applied-hash"

// +kubebuilder:rbac:groups=networking.istio.io,resources=virtualservices,verbs=list

// dynamoExposure reads Dynamo's objects exposing dgd outside the cluster into dy: its
// Ingresses and its Istio VirtualServices.
func (r *Reconciler) dynamoExposure(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, dcds []metav1.PartialObjectMetadata, dy *decide.Dynamo) error {
	var err error
	if dy.Ingresses, err = r.dynamoIngresses(ctx, dgd, dcds); err != nil {
		return err
	}
	dy.VirtualServices, err = r.dynamoVirtualServices(ctx, dgd, dcds)
	return err
}

// dynamoVirtualServices lists, past the cache (metadata only), the Istio VirtualServices
// of dgd's namespace that one of dgd's DCDs controls: Dynamo's DCD controller makes one
// beside the frontend's Ingress, named alike, when its operator configuration has a
// virtualServiceGateway (dynamocomponentdeployment_controller.go
// createOrUpdateOrDeleteIngress, generateVirtualService; internal/dynamo/graph.go
// GenerateComponentVirtualService; networking.istio.io/v1beta1). None when Istio's CRD
// is not served.
func (r *Reconciler) dynamoVirtualServices(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, dcds []metav1.PartialObjectMetadata) ([]backends.ObjectRef, error) {
	items, _, err := r.listMetadata(ctx, schema.GroupVersionKind{Group: "networking.istio.io", Version: "v1beta1", Kind: "VirtualService"},
		client.InNamespace(dgd.Namespace))
	if err != nil {
		return nil, fmt.Errorf("listing the VirtualServices of namespace %s: %w", dgd.Namespace, err)
	}
	var out []backends.ObjectRef
	for i := range items {
		vs := &items[i]
		if ref := metav1.GetControllerOf(vs); ref != nil && slices.ContainsFunc(dcds, func(d metav1.PartialObjectMetadata) bool { return d.UID == ref.UID }) {
			out = append(out, backends.ObjectRef{Kind: "VirtualService", Name: vs.Name, UID: vs.UID})
		}
	}
	return out, nil
}

// dynamoIngresses lists, past the cache, the Ingresses of dgd's namespace that Dynamo's
// operator made for dgd on its component pathway (decide/dynamo_ingress.go): a
// frontend's, named after its DCD (`<dgd>-<lower(component)>`), carrying no label at
// all (GenerateComponentIngress sets none), so found by their controller: one of dgd's
// DCDs (dcds). One a DCD deleted with --cascade=orphan left has none: it is Dynamo's
// when it is not ours, carries Dynamo's last-applied annotation and has the DCD name of
// one of dgd's services.
func (r *Reconciler) dynamoIngresses(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, dcds []metav1.PartialObjectMetadata) ([]networkingv1.Ingress, error) {
	var list networkingv1.IngressList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(dgd.Namespace)); err != nil {
		return nil, fmt.Errorf("listing Dynamo's Ingresses of %s/%s: %w", dgd.Namespace, dgd.Name, err)
	}
	var names []string
	for name := range dgd.Spec.Services {
		names = append(names, strings.ToLower(strings.ReplaceAll(dgd.Name+"-"+name, ".", "-"))) // NormalizeKubeResourceName(GetDCDResourceName)
	}
	var out []networkingv1.Ingress
	for _, ing := range list.Items {
		if !dynamos(&ing) {
			continue
		}
		ref := metav1.GetControllerOf(&ing)
		byDCD := ref != nil && slices.ContainsFunc(dcds, func(d metav1.PartialObjectMetadata) bool { return d.UID == ref.UID })
		orphan := ref == nil && ing.Annotations[dynamoLastApplied] != "" && slices.Contains(names, ing.Name)
		if byDCD || orphan {
			out = append(out, ing)
		}
	}
	return out, nil
}
