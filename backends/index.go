package backends

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dgd-rollout/operator/api/v1alpha1"
)

// ControllerUIDIndex is the cache index of an object's controller's UID: the DGD's for
// its workloads, Services and Ingresses. Listing by it reads (and copies) only one
// graph's objects, where a namespace list copies every graph's: with 500 graphs in a
// namespace, every pass of every graph would copy all 1,500 of their Deployments.
const ControllerUIDIndex = "dgd.nvidia.com/controller-uid"

// IndexControllerUID registers ControllerUIDIndex on obj's kind.
func IndexControllerUID(ctx context.Context, indexer client.FieldIndexer, obj client.Object) error {
	if err := indexer.IndexField(ctx, obj, ControllerUIDIndex, controllerUID); err != nil {
		return fmt.Errorf("indexing %T by controller UID: %w", obj, err)
	}
	return nil
}

func controllerUID(o client.Object) []string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// ListControlled lists into list the objects of owner's namespace whose controller is
// owner, through ControllerUIDIndex. A reader without the index (a client that reads
// the API server, as kubectl-dgd and the conformance suite use) lists the namespace;
// either way only objects owner controls are kept.
func ListControlled(ctx context.Context, c client.Reader, list client.ObjectList, owner client.Object) error {
	err := c.List(ctx, list, client.InNamespace(owner.GetNamespace()),
		client.MatchingFields{ControllerUIDIndex: string(owner.GetUID())})
	if err != nil && missingIndex(err, ControllerUIDIndex) {
		err = c.List(ctx, list, client.InNamespace(owner.GetNamespace()))
	}
	if err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := items[:0]
	for _, it := range items {
		if o, ok := it.(metav1.Object); ok && metav1.IsControlledBy(o, owner) {
			kept = append(kept, it)
		}
	}
	return meta.SetList(list, kept)
}

// GraphIndex is the cache index of an object's graph label (v1alpha1.LabelGraph), for
// objects the DGD does not own directly: its pods (owned by ReplicaSets, StatefulSets,
// PodCliques); and for its ControllerRevisions, which the revisions package lists by
// that label (with or without a cache) and then keeps those the DGD controls. Listing
// by it reads one graph's objects, where a label selector over the namespace tests
// every graph's.
const GraphIndex = "dgd.nvidia.com/graph"

// IndexGraph registers GraphIndex on obj's kind (a metav1.PartialObjectMetadata with
// its kind set indexes the metadata-only cache).
func IndexGraph(ctx context.Context, indexer client.FieldIndexer, obj client.Object) error {
	if err := indexer.IndexField(ctx, obj, GraphIndex, GraphOf); err != nil {
		return fmt.Errorf("indexing %T by graph: %w", obj, err)
	}
	return nil
}

// GraphOf is GraphIndex's value for o: its graph label, if any.
func GraphOf(o client.Object) []string {
	if g := o.GetLabels()[v1alpha1.LabelGraph]; g != "" {
		return []string{g}
	}
	return nil
}

// ListGraph lists into list the objects of the namespace labelled with graph, through
// GraphIndex, or by label where the reader has no such index.
func ListGraph(ctx context.Context, c client.Reader, list client.ObjectList, namespace, graph string) error {
	err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{GraphIndex: graph})
	if err != nil && missingIndex(err, GraphIndex) {
		err = c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{v1alpha1.LabelGraph: graph})
	}
	return err
}

// missingIndex reports whether err says the reader has no index named index: the
// cache's "Index with name ... does not exist", the fake client's "no index with
// name ...", or the API server's BadRequest on a field it cannot select.
func missingIndex(err error, index string) bool {
	if apierrors.IsBadRequest(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, index) &&
		(strings.Contains(msg, "does not exist") || strings.Contains(msg, "no index"))
}
