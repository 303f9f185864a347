package backends

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControllerUIDIndex is the cache index of an object's controller's UID: the DGD's for
// its workloads and ControllerRevisions. Listing by it reads (and copies) only one
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
	if err != nil && missingIndex(err) {
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

// missingIndex reports whether err says the reader has no ControllerUIDIndex: the
// cache's "Index with name ... does not exist", the fake client's "no index with
// name ...", or the API server's BadRequest on a field it cannot select.
func missingIndex(err error) bool {
	if apierrors.IsBadRequest(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, ControllerUIDIndex) &&
		(strings.Contains(msg, "does not exist") || strings.Contains(msg, "no index"))
}
