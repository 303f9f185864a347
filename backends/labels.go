package backends

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MissingLabels lists want's labels that have lacks or has with another value (nil when
// none): what Workload.Relabel reports.
func MissingLabels(have, want map[string]string) map[string]string {
	var out map[string]string
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// PatchLabels sets labels on obj (its kind, namespace and name set) with one merge
// patch of its metadata, and nothing else: how Backend.Relabel puts back labels someone
// stripped. An object gone meanwhile is not an error.
func PatchLabels(ctx context.Context, c client.Client, obj client.Object, labels map[string]string) error {
	if len(labels) == 0 {
		return nil
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("restoring the labels of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
