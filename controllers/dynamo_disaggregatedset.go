package controllers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	disaggv1 "sigs.k8s.io/lws/api/disaggregatedset/v1"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/backends"
)

// Dynamo's DisaggregatedSet pathway (newer Dynamo; ai-dynamo/dynamo
// deploy/operator/internal/controller/): a DGD annotated
// nvidia.com/enable-disaggregated-set=true (the workload provider, persisted in its
// annotation, dgd_workload_provider.go providerFromCurrentIntent / ensureWorkloadProvider),
// with the operator's DisaggregatedSet feature gate on and at least two multinode worker
// components (dgd_disaggregatedset_selection.go disaggregatedSetEligibilityReason,
// selectDisaggregatedSetComponents), runs those workers as the roles of ONE LWS
// DisaggregatedSet named after the DGD (disaggregatedSetName: normalized, at most 31
// characters), labelled nvidia.com/dynamo-graph-deployment-name=<dgd> and
// nvidia.com/selector=<its name>, controlled by the DGD
// (dgd_disaggregatedset_workload_renderer.go Render). LWS's DisaggregatedSet controller
// makes a LeaderWorkerSet per role and revision, labelled only
// disaggregatedset.x-k8s.io/{name,role,revision} and controlled by the DisaggregatedSet
// (sigs.k8s.io/lws pkg/controllers/disaggregatedset lws_manager.go Create): none carries
// our graph label nor a DCD controller, so the take-over's list of Dynamo's workloads
// never sees them. The other components (frontend) keep their DCDs and Deployments
// (dgd_disaggregatedset_auxiliary_dcd_reconciler.go); the selected ones' DCDs are deleted.
// Without this the take-over would roll our workers out beside Dynamo's, release the DGD
// once the frontend moved, and leave Dynamo's DisaggregatedSet running (and routed to:
// its worker pods carry Dynamo's discovery labels) for good. It is held instead
// (decide: ReasonDynamoTakeOverUnsupported).

// +kubebuilder:rbac:groups=disaggregatedset.x-k8s.io,resources=disaggregatedsets,verbs=list

// disaggregatedSetKind is the kind of LWS's DisaggregatedSet.
const disaggregatedSetKind = "DisaggregatedSet"

// dynamoDisaggregatedSets lists, past the cache (metadata only), the DisaggregatedSets of
// dgd's namespace that dgd controls and this operator did not make: Dynamo's of the DGD.
// None when the DisaggregatedSet CRD is not served.
func (r *Reconciler) dynamoDisaggregatedSets(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment) ([]backends.ObjectRef, error) {
	items, _, err := r.listMetadata(ctx, disaggv1.GroupVersion.WithKind(disaggregatedSetKind), client.InNamespace(dgd.Namespace))
	if err != nil {
		return nil, fmt.Errorf("listing the DisaggregatedSets of namespace %s: %w", dgd.Namespace, err)
	}
	var out []backends.ObjectRef
	for i := range items {
		d := &items[i]
		if metav1.IsControlledBy(d, dgd) && d.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			out = append(out, backends.ObjectRef{Kind: disaggregatedSetKind, Name: d.Name, UID: d.UID})
		}
	}
	return out, nil
}

// appendDisaggregatedSets appends Dynamo's DisaggregatedSets of dgd to unsupported.
func (r *Reconciler) appendDisaggregatedSets(ctx context.Context, dgd *v1alpha1.DynamoGraphDeployment, unsupported []backends.ObjectRef) ([]backends.ObjectRef, error) {
	sets, err := r.dynamoDisaggregatedSets(ctx, dgd)
	return append(unsupported, sets...), err
}
